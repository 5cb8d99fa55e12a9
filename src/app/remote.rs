//! Results that travel with the repository: `push` sends the watched branches, the notes and
//! `refs/sandbox/*` to a remote (never forced; a notes ref the remote moved is fetched, merged
//! line-wise and pushed again with back-off), `fetch` brings the remote's notes beside ours
//! (`refs/notes/remotes/<remote>/…`), checks them there ([`super::bounds`]), merges them in and
//! indexes what arrived. The remote's `refs/sandbox/*` land under
//! `refs/sandbox/remotes/<remote>/`, where no experiment's state is read. Records are one
//! line each, so git's `cat_sort_uniq` merge keeps every machine's record and readers take the
//! newest made for the commit.

use super::{bounds, experiments, Context, Result};
use crate::git::{self, remote};
use crate::model::EventKind;
use crate::model::{note, Evaluation, NoteRecord};
use crate::store::RepoRow;
use gix::ObjectId;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// Our notes refs, each with the strategy that merges a remote's into it: records are one line
/// each (every machine's is kept; readers take the newest); a summary or an evaluation is one
/// document, ours kept on a conflict (summaries are then written again from the merged record).
const NOTES: [(&str, &str); 3] = [
    (git::NOTES_REF, "cat_sort_uniq"),
    (git::SUMMARY_NOTES_REF, "ours"),
    (git::EVAL_NOTES_REF, "ours"),
];

/// Attempts of a push whose notes the remote moved meanwhile (fetch, merge, push again).
const PUSH_ATTEMPTS: u32 = 8;

#[derive(Debug, Serialize)]
pub struct Fetched {
    pub remote: String,
    pub url: String,
    /// Local refs the fetch wrote (remote-tracking branches, the remote's notes, `refs/sandbox/*`).
    pub updated: Vec<String>,
    /// Refs the fetch did not take, with why (a `refs/sandbox/…` that differs here).
    pub rejected: Vec<Rejected>,
    /// Our notes refs that the remote's notes changed.
    pub merged: Vec<String>,
    /// Commits whose result arrived or changed (indexed).
    pub results: usize,
    /// Records merged but not indexed (dated in the future, on commits this clone lacks).
    pub not_indexed: bounds::NotIndexed,
    /// Whether the fetch refspec for the notes was added to the remote just now.
    pub refspec_added: bool,
}

#[derive(Debug, Serialize)]
pub struct Pushed {
    pub remote: String,
    pub url: String,
    /// Refs the remote took (branches, notes, `refs/sandbox/*`).
    pub updated: Vec<String>,
    pub up_to_date: usize,
    /// Refs the remote refused, with git's reason.
    pub rejected: Vec<Rejected>,
    /// How often the remote's notes were fetched and merged before it took ours.
    pub merges: u32,
}

#[derive(Debug, Serialize)]
pub struct Rejected {
    #[serde(rename = "ref")]
    pub name: String,
    pub reason: String,
}

/// The remote to use: the one named (it must exist), else the current branch's, else `origin`.
pub fn resolve(dir: &Path, named: Option<&str>) -> Result<String> {
    let all = remote::remotes(dir)?;
    let listed = || {
        if all.is_empty() {
            "add one: git remote add origin URL".to_string()
        } else {
            format!("remotes here: {}", all.join(", "))
        }
    };
    if let Some(n) = named {
        if all.iter().any(|r| r == n) {
            return Ok(n.to_string());
        }
        return Err(super::AppError::usage(format!("no remote named {n:?}")).hint(listed()));
    }
    let current = git::cli::git(dir, &["symbolic-ref", "-q", "--short", "HEAD"])
        .ok()
        .map(|s| s.trim().to_string());
    if let Some(r) = current
        .and_then(|b| git::cli::get_config(dir, &format!("branch.{b}.remote")))
        .filter(|r| all.contains(r))
    {
        return Ok(r);
    }
    if all.iter().any(|r| r == "origin") {
        return Ok("origin".into());
    }
    Err(match all.as_slice() {
        [] => super::AppError::usage("this repository has no remote")
            .hint("add one: git remote add origin URL"),
        _ => super::AppError::usage("no remote named \"origin\", and the current branch has none")
            .hint(format!("name one: git sandbox push REMOTE ({})", listed())),
    })
}

/// `git sandbox fetch`: the remote's branches (as remote-tracking refs), its notes merged into
/// ours, its `refs/sandbox/*` as `refs/sandbox/remotes/<remote>/*` (an experiment's state here
/// is ours to change); then what arrived is indexed.
pub fn fetch(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    named: Option<&str>,
) -> Result<Fetched> {
    let dir = git::repo_root(repo);
    let name = resolve(&dir, named)?;
    let refspec_added = remote::ensure_notes_refspec(&dir, &name)?;
    let specs = vec![
        format!("+refs/heads/*:refs/remotes/{name}/*"),
        remote::notes_refspec(&name),
        remote::sandbox_refspec(&name),
    ];
    let updates = remote::fetch(&dir, &name, &specs)?;
    let (merged, mut results, not_indexed) = take_in(ctx, repo, row, &dir, &name)?;
    // On a shared index, a result whose machine died before pushing it is in the index: it is
    // written here too, so every clone has every result after a fetch.
    if ctx.index.is_shared() {
        let records = ctx.index.run_records(&row.repository_id)?;
        results += super::results::rewrite_missing(ctx, repo, row, &records, true)?;
    }
    experiments::sync(ctx, repo, row)?;
    super::pull_request::adopt_merged(ctx, repo, row, &name)?;
    let f = Fetched {
        url: remote::shown_url(&dir, &name),
        updated: updates
            .iter()
            .filter(|u| u.changed())
            .map(|u| u.name.clone())
            .collect(),
        rejected: rejected(&updates),
        remote: name,
        merged,
        results,
        not_indexed,
        refspec_added,
    };
    ctx.index.add_event(
        EventKind::RemoteFetched,
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"remote": f.remote, "updated": f.updated.len(), "results": f.results, "rejected": f.rejected.len(), "not_indexed": f.not_indexed.total()}),
    )?;
    Ok(f)
}

fn rejected(updates: &[remote::RefUpdate]) -> Vec<Rejected> {
    updates
        .iter()
        .filter(|u| u.rejected())
        .map(|u| Rejected {
            name: u.name.clone(),
            reason: u.summary.clone(),
        })
        .collect()
}

/// Check the remote's notes (already fetched beside ours), merge them into ours, write the
/// summaries of the records that changed again, and index the records and evaluations that
/// arrived. Returns the notes refs that moved, how many results arrived or changed, and the
/// records not indexed. Notes over the bounds refuse it all, ours unchanged.
fn take_in(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    dir: &Path,
    name: &str,
) -> Result<(Vec<String>, usize, bounds::NotIndexed)> {
    let before: Vec<HashMap<ObjectId, ObjectId>> = NOTES
        .iter()
        .map(|(r, _)| git::notes::all_notes(repo, r))
        .collect::<std::result::Result<_, _>>()?;
    let mut plan = Vec::new();
    for (ours, strategy) in NOTES {
        let mut theirs = vec![format!(
            "{}{}",
            remote::tracking_prefix(name),
            ours.trim_start_matches("refs/notes/")
        )];
        // Every machine's records, each through its own ref (see `notes_specs`).
        if ours == git::NOTES_REF {
            theirs.extend(git::cli::list_refs(
                dir,
                &format!(
                    "{}{}",
                    remote::tracking_prefix(name),
                    WRITERS_PREFIX.trim_start_matches("refs/notes/")
                ),
            )?);
        }
        plan.push((ours, strategy, theirs));
    }
    let pairs: Vec<(&str, String)> = plan
        .iter()
        .flat_map(|(ours, _, theirs)| theirs.iter().map(|t| (*ours, t.clone())))
        .collect();
    bounds::check_incoming(repo, dir, name, &pairs)?;
    let mut merged = Vec::new();
    for (ours, strategy, theirs) in plan {
        let mut moved = false;
        for t in &theirs {
            moved |= remote::merge_notes(dir, ours, t, strategy)?;
        }
        if moved {
            merged.push(ours.to_string());
        }
    }
    let mut not_indexed = bounds::NotIndexed::default();
    if merged.is_empty() {
        return Ok((merged, 0, not_indexed));
    }
    let changed = |i: usize| -> Result<Vec<(ObjectId, ObjectId)>> {
        Ok(git::notes::all_notes(repo, NOTES[i].0)?
            .into_iter()
            .filter(|(c, b)| before[i].get(c) != Some(b))
            .collect())
    };
    let mut results = 0;
    let mut summaries = Vec::new();
    let summary_now = git::notes::all_notes(repo, git::SUMMARY_NOTES_REF)?;
    let judge = ctx.judge()?;
    for (commit, blob) in changed(0)? {
        if !bounds::has_commit(repo, commit) {
            not_indexed.missing_commit += 1;
            continue;
        }
        let Ok(body) = git::notes::read_blob(repo, blob) else {
            continue;
        };
        let (found, future) = note::decode_counted(&body, &commit.to_string(), &judge);
        not_indexed.future_dated += future;
        if let NoteRecord::Found(r) = found {
            ctx.index.put_run(&row.repository_id, &r)?;
            results += 1;
            let summary = note::summary(&r);
            let current = summary_now
                .get(&commit)
                .and_then(|b| git::notes::read_blob(repo, *b).ok());
            if current.as_deref() != Some(summary.as_slice()) {
                summaries.push((commit, summary));
            }
        }
    }
    if !summaries.is_empty() {
        git::notes::write_notes(
            repo,
            git::SUMMARY_NOTES_REF,
            &summaries,
            &format!("git-sandbox: summaries of results from {name}"),
        )?;
    }
    for (head, blob) in changed(2)? {
        let Ok(body) = git::notes::read_blob(repo, blob) else {
            continue;
        };
        if let Ok(ev) = serde_json::from_slice::<Evaluation>(&body) {
            if ev.head.commit == head {
                ctx.index.put_evaluation(&row.repository_id, &ev)?;
            }
        }
    }
    Ok((merged, results, not_indexed))
}

/// `git sandbox push`: the watched branches, the notes and `refs/sandbox/*` (with
/// `notes_only`, the notes alone), never forced. A notes ref the remote moved is fetched,
/// merged and pushed again, with back-off; a branch the remote moved is the user's to merge.
pub fn push(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    named: Option<&str>,
    notes_only: bool,
) -> Result<Pushed> {
    let dir = git::repo_root(repo);
    let name = resolve(&dir, named)?;
    remote::ensure_notes_refspec(&dir, &name)?;
    // On a shared index, the first push says where other machines clone it from.
    if ctx.index.is_shared() && row.remote_url.is_none() {
        let mut known = row.clone();
        known.remote_url = super::repos::remote_url_of(&dir, &name);
        ctx.index.upsert_repository(&known)?;
    }
    let mut specs = notes_specs(ctx, &dir);
    if !notes_only {
        for (branch, _) in super::select::watched_branches(ctx, repo)? {
            specs.push(format!("refs/heads/{branch}:refs/heads/{branch}"));
        }
        for r in repo
            .references()
            .map_err(|e| git::GitError::Gix(e.to_string()))?
            .prefixed("refs/sandbox/")
            .map_err(|e| git::GitError::Gix(e.to_string()))?
            .flatten()
        {
            let full = r.name().as_bstr().to_string();
            // What remotes hold is theirs: never sent back as ours.
            if full.starts_with(remote::SANDBOX_REMOTES) {
                continue;
            }
            specs.push(format!("{full}:{full}"));
        }
    }
    push_specs(ctx, repo, row, &dir, &name, specs)
}

/// The refspecs that push our notes. On an index many machines share, the records go to this
/// home's own ref on the remote (`refs/notes/sandbox-by/<home-id>`), which no other machine
/// writes, so pushes never contend; readers fold every machine's ref into theirs when they
/// fetch, and write the summaries from the folded records (so those are not pushed).
fn notes_specs(ctx: &Context, dir: &Path) -> Vec<String> {
    let mine = ctx.index.is_shared().then(|| writer_ref(ctx));
    NOTES
        .iter()
        .filter(|(r, _)| remote::ref_tip(dir, r).is_some())
        .filter_map(|(r, _)| match (&mine, *r) {
            (Some(w), git::NOTES_REF) => Some(format!("{r}:{w}")),
            (Some(_), git::SUMMARY_NOTES_REF) => None,
            _ => Some(format!("{r}:{r}")),
        })
        .collect()
}

/// The remote ref this home pushes its records through on a shared index.
pub fn writer_ref(ctx: &Context) -> String {
    format!(
        "{WRITERS_PREFIX}{}",
        super::daemons::home_id(&ctx.paths.home)
    )
}

/// Where each machine's records are on the remote, one ref per home.
const WRITERS_PREFIX: &str = "refs/notes/sandbox-by/";

/// Push `specs` to the remote `name`, never forced; a notes ref the remote moved is fetched,
/// merged and pushed again with back-off.
fn push_specs(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    dir: &Path,
    name: &str,
    mut specs: Vec<String>,
) -> Result<Pushed> {
    let mut out = Pushed {
        url: remote::shown_url(dir, name),
        remote: name.to_string(),
        updated: Vec::new(),
        up_to_date: 0,
        rejected: Vec::new(),
        merges: 0,
    };
    let mut attempt = 0;
    while !specs.is_empty() {
        attempt += 1;
        let updates = remote::push(dir, name, &specs)?;
        let (retry, done): (Vec<_>, Vec<_>) = updates
            .into_iter()
            .partition(|u| u.retryable() && u.name.starts_with("refs/notes/"));
        for u in &done {
            if u.changed() {
                out.updated.push(u.name.clone());
            } else if u.flag == '=' {
                out.up_to_date += 1;
            }
        }
        out.rejected.extend(rejected(&done));
        if retry.is_empty() {
            break;
        }
        if attempt >= PUSH_ATTEMPTS {
            out.rejected.extend(retry.iter().map(|u| Rejected {
                name: u.name.clone(),
                reason: format!("{} (the remote kept moving: {attempt} attempts)", u.summary),
            }));
            break;
        }
        // The remote has notes we do not: take them in, then offer the merge.
        std::thread::sleep(PUSH_RETRY.delay(attempt));
        remote::fetch(dir, name, &[remote::notes_refspec(name)])?;
        take_in(ctx, repo, row, dir, name)?;
        out.merges += 1;
        specs.retain(|spec| {
            retry
                .iter()
                .any(|u| spec.rsplit_once(':').is_some_and(|(_, to)| to == u.name))
        });
    }
    ctx.index.add_event(
        EventKind::RemotePushed,
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"remote": out.remote, "updated": out.updated.len(), "rejected": out.rejected.len(), "merges": out.merges}),
    )?;
    Ok(out)
}

/// What a poll of a repository's remote found.
#[derive(Debug, Default, Serialize)]
pub struct Polled {
    /// Remote-tracking refs and notes refs fetched because they moved.
    pub fetched: Vec<String>,
    /// Commits queued (new commits of watched branches with no result yet).
    pub queued: usize,
}

/// `[remote] poll`: ask the repository's remote (`git ls-remote`, no objects) what moved; fetch
/// the watched branches that did (into `refs/remotes/<remote>/…`) and its notes when they did
/// (merged into ours: a commit another machine ran is not run again), then queue what is new.
/// A repository without a remote has nothing to poll.
pub fn poll(ctx: &Context, repo: &gix::Repository, row: &RepoRow) -> Result<Polled> {
    let dir = git::repo_root(repo);
    if remote::remotes(&dir)?.is_empty() {
        return Ok(Polled::default());
    }
    let name = resolve(&dir, None)?;
    let globs = super::select::watch_globs(ctx, repo)?;
    let mut specs = Vec::new();
    let mut notes_moved = false;
    let listed = remote::ls_remote(&dir, &name, &["refs/heads/*", "refs/notes/sandbox*"])?;
    for (refname, id) in listed {
        if let Some(branch) = refname.strip_prefix("refs/heads/") {
            let local = format!("refs/remotes/{name}/{branch}");
            if globs.is_match(branch) && remote::ref_tip(&dir, &local).as_deref() != Some(&id) {
                specs.push(format!("+{refname}:{local}"));
            }
        } else if let Some(rest) = refname.strip_prefix("refs/notes/") {
            let local = format!("{}{rest}", remote::tracking_prefix(&name));
            let ours =
                NOTES.iter().any(|(r, _)| *r == refname) || refname.starts_with(WRITERS_PREFIX);
            if ours && remote::ref_tip(&dir, &local).as_deref() != Some(&id) {
                notes_moved = true;
            }
        }
    }
    if notes_moved {
        specs.push(remote::notes_refspec(&name));
    }
    let mut out = Polled::default();
    if specs.is_empty() {
        return Ok(out);
    }
    let updates = remote::fetch(&dir, &name, &specs)?;
    out.fetched = updates
        .iter()
        .filter(|u| u.changed())
        .map(|u| u.name.clone())
        .collect();
    if notes_moved {
        take_in(ctx, repo, row, &dir, &name)?;
    }
    super::pull_request::adopt_merged(ctx, repo, row, &name)?;
    out.queued = super::notify::scan(ctx, repo, &row.repository_id, "poll")?.0;
    Ok(out)
}

/// Fetch a ref a webhook announced (`refspec` into `local_ref`) with the remote's notes, merge
/// the notes, and queue the ref's new commits (trigger `webhook`). Returns how many were queued.
pub fn fetch_announced(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
    refspec: &str,
    local_ref: &str,
) -> Result<usize> {
    let dir = git::repo_root(repo);
    remote::fetch(
        &dir,
        name,
        &[refspec.to_string(), remote::notes_refspec(name)],
    )?;
    take_in(ctx, repo, row, &dir, name)?;
    super::pull_request::adopt_merged(ctx, repo, row, name)?;
    let Some(tip) =
        remote::ref_tip(&dir, local_ref).and_then(|t| ObjectId::from_hex(t.as_bytes()).ok())
    else {
        return Ok(0);
    };
    super::notify::scan_refs(
        ctx,
        repo,
        &row.repository_id,
        "webhook",
        &[(local_ref.to_string(), tip)],
    )
}

/// The remote whose branches the daemon follows for `repo` (`[remote] poll`): its
/// remote-tracking refs are watched like its own branches.
pub fn followed(ctx: &Context, repo: &gix::Repository) -> Option<String> {
    ctx.layers.resolve().remote.poll?;
    let dir = git::repo_root(repo);
    if remote::remotes(&dir).ok()?.is_empty() {
        return None;
    }
    resolve(&dir, None).ok()
}

/// Push one branch (and the notes, the evidence beside it) to the remote `named` (else the
/// default one). Returns the remote's name and what was pushed.
pub fn push_branch(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    named: Option<&str>,
    branch: &str,
) -> Result<Pushed> {
    let dir = git::repo_root(repo);
    let name = resolve(&dir, named)?;
    let mut specs = notes_specs(ctx, &dir);
    specs.push(format!("refs/heads/{branch}:refs/heads/{branch}"));
    push_specs(ctx, repo, row, &dir, &name, specs)
}

/// 100 ms doubling per attempt, up to 3.2 s, spread by a little noise so that two machines
/// that collided do not collide again in step.
const PUSH_RETRY: crate::util::backoff::Backoff = crate::util::backoff::Backoff::doubling(
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(3200),
)
.with_jitter();

/// `[remote] auto_push`: after runs, push the notes (alone) to the repository's remote; the
/// outbox (`publish/`) calls it. A push that fails never fails the runs: it is an event, and
/// the problem (one line) for the outbox to try again. `Ok` when auto-push is off, there is no
/// remote, or it went through.
pub fn auto_push(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
) -> std::result::Result<(), String> {
    let config = ctx.layers.resolve();
    // A repository without any remote has nowhere to push: not a failure.
    if !config.remote.auto_push
        || remote::remotes(&git::repo_root(repo)).is_ok_and(|r| r.is_empty())
    {
        return Ok(());
    }
    let problem = match push(ctx, repo, row, None, true) {
        Ok(p) if p.rejected.is_empty() => return Ok(()),
        Ok(p) => p
            .rejected
            .iter()
            .map(|r| format!("{} {}", r.name, r.reason))
            .collect::<Vec<_>>()
            .join("; "),
        Err(e) => e.to_string(),
    };
    let _ = ctx.index.add_event(
        EventKind::RemotePushFailed,
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"error": problem}),
    );
    Err(problem)
}
