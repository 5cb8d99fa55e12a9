//! What the hooks call: find the new commits of watched branches and queue them. It must be fast
//! (it runs inside the user's `git commit`) and must never make that command fail.

use super::{repos, Context, Result};
use crate::git;
use gix::ObjectId;
use std::collections::HashSet;
use std::path::Path;

/// How many new commits one notification queues per branch at most (a push of a long history
/// onto a watched branch); the rest stay unqueued, to be run with `git sandbox run RANGE`.
pub const WALK_LIMIT: usize = 1000;

#[derive(Debug, Default, serde::Serialize)]
pub struct Notified {
    pub repository_id: Option<String>,
    pub queued: usize,
    /// A problem worth a warning (e.g. a broken `.sandbox.toml`); the hook still succeeds.
    pub warning: Option<String>,
}

pub fn notify(ctx: &Context, cwd: &Path, trigger: &str) -> Result<Notified> {
    let repo = git::discover(cwd)?;
    let Some(row) = repos::registration(ctx, &repo)? else {
        return Ok(Notified::default());
    };
    let (queued, warning) = scan(ctx, &repo, &row.repository_id, trigger)?;
    if queued > 0 {
        crate::ipc::ping(&ctx.paths.home, &row.repository_id);
    }
    Ok(Notified {
        repository_id: Some(row.repository_id),
        queued,
        warning,
    })
}

/// Queue the commits of watched branches that arrived since the tool last looked (the branch
/// watermarks), skipping any that already has a result or a job. The history a repository had
/// when it was adopted is never queued by this: only `run RANGE` or `[watch] backfill` run it.
/// Returns how many were queued and a warning when the repository's config is broken (the
/// defaults are used then).
pub fn scan(
    ctx: &Context,
    repo: &gix::Repository,
    repository_id: &str,
    trigger: &str,
) -> Result<(usize, Option<String>)> {
    let mut warning = None;
    let layers = match repo.workdir() {
        Some(dir) => ctx.layers.with_repo_dir(dir).unwrap_or_else(|e| {
            warning = Some(format!(
                "{e}; using the default watched branches until it is fixed"
            ));
            ctx.layers.clone()
        }),
        None => ctx.layers.clone(),
    };
    let config = layers.resolve();
    let globs = config.watched_branches().unwrap_or_else(|e| {
        warning = Some(format!(
            "{e}; using the default watched branches until it is fixed"
        ));
        crate::config::Config::default()
            .watched_branches()
            .unwrap_or_default()
    });
    let mut watched: Vec<(String, ObjectId)> = git::branches(repo)?
        .into_iter()
        .filter(|(b, _)| globs.is_match(b))
        .map(|(b, tip)| (format!("refs/heads/{b}"), tip))
        .collect();
    // With `[remote] poll`, the remote's watched branches are watched too.
    if let Some(remote) = super::remote::followed(ctx, repo) {
        watched.extend(
            git::remote_branches(repo, &remote)?
                .into_iter()
                .filter(|(b, _)| globs.is_match(b))
                .map(|(b, tip)| (format!("refs/remotes/{remote}/{b}"), tip)),
        );
    }
    let Some(old) = git::marks::read(repo) else {
        // Adopted before watermarks existed: what is there now is history.
        git::marks::write(repo, &watched.iter().cloned().collect())?;
        return Ok((0, warning));
    };
    let queued = queue_new(ctx, repo, repository_id, trigger, &watched, &old)?;
    let new: git::marks::Marks = watched.into_iter().collect();
    if new != old {
        git::marks::write(repo, &new)?;
    }
    Ok((queued, warning))
}

/// Queue the new commits of `refs` alone (a ref a webhook announced and a fetch brought), with
/// the same watermarks as [`scan`]; the other refs' watermarks stay. Returns how many.
pub fn scan_refs(
    ctx: &Context,
    repo: &gix::Repository,
    repository_id: &str,
    trigger: &str,
    refs: &[(String, ObjectId)],
) -> Result<usize> {
    let old = git::marks::read(repo).unwrap_or_default();
    let queued = queue_new(ctx, repo, repository_id, trigger, refs, &old)?;
    let mut new = old.clone();
    new.extend(refs.iter().cloned());
    if new != old {
        git::marks::write(repo, &new)?;
    }
    Ok(queued)
}

/// Queue the commits of `watched` that no watermark in `old` covers and that have no result or
/// job yet, oldest first. Returns how many.
fn queue_new(
    ctx: &Context,
    repo: &gix::Repository,
    repository_id: &str,
    trigger: &str,
    watched: &[(String, ObjectId)],
    old: &git::marks::Marks,
) -> Result<usize> {
    let hidden: Vec<ObjectId> = old
        .values()
        .copied()
        .filter(|id| repo.find_commit(*id).is_ok())
        .collect();
    let mut notes = super::results::NoteReader::new(repo)?;
    let mut jobs = Vec::new();
    let mut seen = HashSet::new();
    for (refname, tip) in watched {
        if old.get(refname) == Some(tip) {
            continue;
        }
        let found = new_commits(
            ctx,
            repo,
            repository_id,
            *tip,
            &hidden,
            &mut notes,
            &mut seen,
        )?;
        jobs.extend(found.into_iter().map(|id| (id, Some(refname.clone()))));
    }
    // Oldest first, so a worker runs history in order.
    jobs.reverse();
    let jobs: Vec<(String, Option<String>)> = jobs
        .into_iter()
        .map(|(id, r)| (id.to_string(), r))
        .collect();
    let queued = ctx.index.enqueue(repository_id, &jobs, trigger)?;
    if queued > 0 {
        ctx.index.touch_repository(repository_id)?;
    }
    Ok(queued)
}

/// Commits reachable from `tip` but not from any watermark, newest first, stopping at commits
/// that have a result or a job (and their ancestry), at most [`WALK_LIMIT`].
fn new_commits(
    ctx: &Context,
    repo: &gix::Repository,
    repository_id: &str,
    tip: ObjectId,
    hidden: &[ObjectId],
    notes: &mut super::results::NoteReader,
    seen: &mut HashSet<ObjectId>,
) -> Result<Vec<ObjectId>> {
    let index = &ctx.index;
    // Which of the commits this walk may meet have a job, asked in one query: the commits a
    // walk that stops only at results would take (a superset of those the walk below meets,
    // up to the limit); one met beyond them is asked about alone.
    let mut ahead = Vec::new();
    for info in repo
        .rev_walk([tip])
        .with_hidden(hidden.iter().copied())
        .selected(|id| {
            let id = id.to_owned();
            !seen.contains(&id) && notes.record(ctx, repo, id).ok().flatten().is_none()
        })
        .map_err(git::gix_err)?
    {
        ahead.push(info.map_err(git::gix_err)?.id.to_string());
        if ahead.len() >= WALK_LIMIT {
            break;
        }
    }
    let asked: HashSet<&str> = ahead.iter().map(String::as_str).collect();
    let refs: Vec<&str> = ahead.iter().map(String::as_str).collect();
    let queued_ahead = index.queued_among(repository_id, &refs).unwrap_or_default();
    let walk = repo
        .rev_walk([tip])
        .with_hidden(hidden.iter().copied())
        .selected(|id| {
            let id = id.to_owned();
            if !seen.insert(id) {
                return false;
            }
            let hex = id.to_string();
            let queued = if asked.contains(hex.as_str()) {
                queued_ahead.contains(&hex)
            } else {
                index.has_job(repository_id, &hex).unwrap_or(false)
            };
            let done = !queued && notes.record(ctx, repo, id).ok().flatten().is_some();
            !queued && !done
        })
        .map_err(git::gix_err)?;
    let mut found = Vec::new();
    for info in walk {
        found.push(info.map_err(git::gix_err)?.id);
        if found.len() >= WALK_LIMIT {
            break;
        }
    }
    Ok(found)
}

/// Set the watermarks of a repository being adopted: each watched branch's tip, or with
/// `[watch] backfill = N` its N-th first-parent ancestor, then queue what that leaves (the last N
/// commits of each watched branch, trigger `backfill`). Returns how many were queued.
pub fn adopt_history(ctx: &Context, repo: &gix::Repository, repository_id: &str) -> Result<usize> {
    let config = match repo.workdir() {
        Some(dir) => ctx.layers.with_repo_dir(dir)?.resolve(),
        None => ctx.layers.resolve(),
    };
    let globs = config
        .watched_branches()
        .map_err(|e| super::AppError::Usage(super::Message::of("[watch] branches", &e)))?;
    let mut marks = git::marks::read(repo).unwrap_or_default();
    for (branch, tip) in git::branches(repo)? {
        if !globs.is_match(&branch) {
            continue;
        }
        let refname = format!("refs/heads/{branch}");
        if marks.contains_key(&refname) {
            continue;
        }
        let mut mark = Some(tip);
        for _ in 0..config.watch.backfill {
            mark = mark.and_then(|id| parents(repo, id).first().copied());
        }
        match mark {
            Some(m) => {
                marks.insert(refname, m);
            }
            // Shorter than the backfill: every commit of the branch is run.
            None => {
                marks.remove(&refname);
            }
        }
    }
    git::marks::write(repo, &marks)?;
    if config.watch.backfill == 0 {
        return Ok(0);
    }
    Ok(scan(ctx, repo, repository_id, "backfill")?.0)
}

fn parents(repo: &gix::Repository, id: ObjectId) -> Vec<ObjectId> {
    repo.find_commit(id)
        .ok()
        .and_then(|c| {
            c.parent_ids()
                .map(|p| p.detach())
                .collect::<Vec<_>>()
                .into()
        })
        .unwrap_or_default()
}
