//! Results that arrive from a remote: `fetch` brings the remote's notes beside ours
//! (`refs/notes/remotes/<remote>/…`), takes them in ([`crate::app::publish::exchange`]) and indexes what
//! arrived; `[remote] poll` and a webhook fetch what moved and queue the new commits. The
//! remote's `refs/sandbox/*` land under `refs/sandbox/remotes/<remote>/`, where no experiment's
//! state is read.

use crate::app::locate::remote_name;
use crate::app::publish::exchange::{rejected, take_in, Rejected, NOTES, WRITERS_PREFIX};
use crate::app::{experiment::experiments, publish::bounds, Repo, Result};
use gs_git as git;
use gs_git::remote;
use gs_git::ObjectId;
use serde::Serialize;

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

/// `git sandbox fetch`: the remote's branches (as remote-tracking refs), its notes merged into
/// ours, its `refs/sandbox/*` as `refs/sandbox/remotes/<remote>/*` (an experiment's state here
/// is ours to change); then what arrived is indexed.
pub fn fetch(at: Repo<'_>, named: Option<&str>) -> Result<Fetched> {
    let Repo { ctx, repo, row } = at;
    let dir = git::repo_root(repo);
    let name = remote_name(&dir, named)?;
    let refspec_added = remote::ensure_notes_refspec(&dir, &name)?;
    let specs = vec![
        format!("+refs/heads/*:refs/remotes/{name}/*"),
        remote::notes_refspec(&name),
        remote::sandbox_refspec(&name),
    ];
    let updates = remote::fetch(&dir, &name, &specs)?;
    let (merged, mut results, not_indexed) = take_in(at, &dir, &name)?;
    // On a shared index, a result whose machine died before pushing it is in the index: it is
    // written here too, so every clone has every result after a fetch.
    if ctx.index.is_shared() {
        let records = ctx.index.run_records(&row.repository_id)?;
        results += crate::app::records::results::rewrite_missing(at, &records, true)?;
    }
    experiments::sync(at)?;
    crate::app::experiment::pull_request::adopt_merged(at, &name)?;
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
        gs_model::EventKind::RemoteFetched,
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"remote": f.remote, "updated": f.updated.len(), "results": f.results, "rejected": f.rejected.len(), "not_indexed": f.not_indexed.total()}),
    )?;
    Ok(f)
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
pub fn poll(at: Repo<'_>) -> Result<Polled> {
    let Repo { ctx, repo, row } = at;
    let dir = git::repo_root(repo);
    if remote::remotes(&dir)?.is_empty() {
        return Ok(Polled::default());
    }
    let name = remote_name(&dir, None)?;
    let globs = crate::app::select::watch_globs(ctx, repo)?;
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
        take_in(at, &dir, &name)?;
    }
    crate::app::experiment::pull_request::adopt_merged(at, &name)?;
    out.queued = crate::app::intake::notify::scan(ctx, repo, &row.repository_id, "poll")?.0;
    Ok(out)
}

/// Fetch a ref a webhook announced (`refspec` into `local_ref`) with the remote's notes, merge
/// the notes, and queue the ref's new commits (trigger `webhook`). Returns how many were queued.
pub fn fetch_announced(at: Repo<'_>, name: &str, refspec: &str, local_ref: &str) -> Result<usize> {
    let Repo { ctx, repo, row } = at;
    let dir = git::repo_root(repo);
    remote::fetch(
        &dir,
        name,
        &[refspec.to_string(), remote::notes_refspec(name)],
    )?;
    take_in(at, &dir, name)?;
    crate::app::experiment::pull_request::adopt_merged(at, name)?;
    let Some(tip) =
        remote::ref_tip(&dir, local_ref).and_then(|t| ObjectId::from_hex(t.as_bytes()).ok())
    else {
        return Ok(0);
    };
    crate::app::intake::notify::scan_refs(
        ctx,
        repo,
        &row.repository_id,
        "webhook",
        &[(local_ref.to_string(), tip)],
    )
}
