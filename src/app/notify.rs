//! What the hooks call: find the new commits of watched branches and queue them. It must be fast
//! (it runs inside the user's `git commit`) and must never make that command fail.

use super::{repos, Context, Result};
use crate::git;
use gix::ObjectId;
use std::collections::HashSet;
use std::path::Path;

/// How far back one notification walks a branch; older unqueued commits are left to the daemon's
/// start-up scan, so a hook stays fast even on a huge adopted history.
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

/// Queue the commits of watched branches that have neither a note nor a job. Returns how many
/// were queued and a warning when the repository's config is broken (defaults are used then).
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
    let watched = config.watched_branches().unwrap_or_else(|e| {
        warning = Some(format!(
            "{e}; using the default watched branches until it is fixed"
        ));
        crate::config::Config::default()
            .watched_branches()
            .unwrap_or_default()
    });
    let mut notes = git::notes::Lookup::new(repo, git::NOTES_REF)?;
    let mut jobs = Vec::new();
    let mut seen = HashSet::new();
    for (branch, tip) in git::branches(repo)? {
        if !watched.is_match(&branch) {
            continue;
        }
        let refname = format!("refs/heads/{branch}");
        let mut found = Vec::new();
        let mut stack = vec![tip];
        while let Some(id) = stack.pop() {
            if found.len() >= WALK_LIMIT || !seen.insert(id) {
                continue;
            }
            let hex = id.to_string();
            if ctx.index.has_job(repository_id, &hex)? || notes.has(repo, id)? {
                continue;
            }
            found.push((id, Some(refname.clone())));
            stack.extend(parents(repo, id));
        }
        jobs.extend(found);
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
    Ok((queued, warning))
}

/// Write again the notes of indexed runs whose note is gone. Plain `git notes add` does not
/// compare-and-swap, so one racing with our write can replace the notes ref and drop our notes;
/// the index still holds them. (To drop a result on purpose, remove the note and run
/// `git sandbox reindex`, which makes the index follow the notes.) Returns how many came back.
pub fn restore_lost_notes(
    ctx: &Context,
    repo: &gix::Repository,
    repository_id: &str,
) -> Result<usize> {
    let notes = git::notes::all_notes(repo, git::NOTES_REF)?;
    let mut bodies = Vec::new();
    for record in ctx.index.run_records(repository_id)? {
        let Ok(id) = ObjectId::from_hex(record.commit.as_bytes()) else {
            continue;
        };
        if !notes.contains_key(&id) && repo.find_commit(id).is_ok() {
            bodies.push((id, super::run::note_body(&record)));
        }
    }
    if bodies.is_empty() {
        return Ok(0);
    }
    git::notes::write_notes(
        repo,
        git::NOTES_REF,
        &bodies,
        &format!(
            "git-sandbox: restore {} notes lost to a concurrent writer",
            bodies.len()
        ),
    )?;
    let commits: Vec<String> = bodies.iter().map(|(id, _)| id.to_string()).collect();
    ctx.index.add_event(
        "notes.restored",
        Some(repository_id),
        None,
        None,
        &serde_json::json!({ "commits": commits }),
    )?;
    Ok(bodies.len())
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
