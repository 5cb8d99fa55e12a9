//! Results that travel with the repository: `push` sends the watched branches, the notes and
//! `refs/sandbox/*` to a remote (never forced; a notes ref the remote moved is fetched, merged
//! line-wise and pushed again with back-off). Records are one line each, so git's
//! `cat_sort_uniq` merge keeps every machine's record and readers take the newest made for the
//! commit. Fetching is [`crate::app::intake::fetch`]'s.

use crate::app::locate::remote_name;
use crate::app::publish::exchange::{rejected, take_in, writer_ref, Rejected, NOTES};
use crate::app::{Context, Repo, Result};
use gs_git as git;
use gs_git::remote;
use gs_model::EventKind;
use serde::Serialize;
use std::path::Path;

/// Attempts of a push whose notes the remote moved meanwhile (fetch, merge, push again).
const PUSH_ATTEMPTS: u32 = 8;

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

/// `git sandbox push`: the watched branches, the notes and `refs/sandbox/*` (with
/// `notes_only`, the notes alone), never forced. A notes ref the remote moved is fetched,
/// merged and pushed again, with back-off; a branch the remote moved is the user's to merge.
pub fn push(at: Repo<'_>, named: Option<&str>, notes_only: bool) -> Result<Pushed> {
    let Repo { ctx, repo, row } = at;
    let dir = git::repo_root(repo);
    let name = remote_name(&dir, named)?;
    remote::ensure_notes_refspec(&dir, &name)?;
    // On a shared index, the first push says where other machines clone it from.
    if ctx.index.is_shared() && row.remote_url.is_none() {
        let mut known = row.clone();
        known.remote_url = crate::app::locate::remote_url_of(&dir, &name);
        ctx.index.upsert_repository(&known)?;
    }
    let mut specs = notes_specs(ctx, &dir);
    if !notes_only {
        for (branch, _) in crate::app::select::watched_branches(ctx, repo)? {
            specs.push(format!("refs/heads/{branch}:refs/heads/{branch}"));
        }
        for (full, _) in git::objects::refs(repo, "refs/sandbox/")? {
            // What remotes hold is theirs: never sent back as ours.
            if full.starts_with(remote::SANDBOX_REMOTES) {
                continue;
            }
            specs.push(format!("{full}:{full}"));
        }
    }
    push_specs(at, &dir, &name, specs)
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

/// Push `specs` to the remote `name`, never forced; a notes ref the remote moved is fetched,
/// merged and pushed again with back-off.
fn push_specs(at: Repo<'_>, dir: &Path, name: &str, mut specs: Vec<String>) -> Result<Pushed> {
    let Repo { ctx, row, .. } = at;
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
        take_in(at, dir, name)?;
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

/// Push one branch (and the notes, the evidence beside it) to the remote `named` (else the
/// default one). Returns the remote's name and what was pushed.
pub fn push_branch(at: Repo<'_>, named: Option<&str>, branch: &str) -> Result<Pushed> {
    let Repo { ctx, repo, .. } = at;
    let dir = git::repo_root(repo);
    let name = remote_name(&dir, named)?;
    let mut specs = notes_specs(ctx, &dir);
    specs.push(format!("refs/heads/{branch}:refs/heads/{branch}"));
    push_specs(at, &dir, &name, specs)
}

/// 100 ms doubling per attempt, up to 3.2 s, spread by a little noise so that two machines
/// that collided do not collide again in step.
const PUSH_RETRY: gs_util::backoff::Backoff = gs_util::backoff::Backoff::doubling(
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(3200),
)
.with_jitter();

/// `[remote] auto_push`: after runs, push the notes (alone) to the repository's remote; the
/// outbox (`publish/`) calls it. A push that fails never fails the runs: it is an event, and
/// the problem (one line) for the outbox to try again. `Ok` when auto-push is off, there is no
/// remote, or it went through.
pub fn auto_push(at: Repo<'_>) -> std::result::Result<(), String> {
    let Repo { ctx, repo, row } = at;
    let config = ctx.layers.resolve();
    // A repository without any remote has nowhere to push: not a failure.
    if !config.remote.auto_push
        || remote::remotes(&git::repo_root(repo)).is_ok_and(|r| r.is_empty())
    {
        return Ok(());
    }
    let problem = match push(at, None, true) {
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
