//! What the hooks call: find the new commits of watched branches and queue them. It must be fast
//! (it runs inside the user's `git commit`) and must never make that command fail.

use crate::app::{repo::repos, Context, Result};
use gs_git as git;
use gs_git::ObjectId;
use std::collections::HashSet;
use std::path::Path;

/// How many new commits one notification queues per branch at most (a push of a long history
/// onto a watched branch); the rest stay unqueued, to be run with `git sandbox run RANGE`.
pub const WALK_LIMIT: usize = 1000;

/// A transaction with more branch updates than this is a bulk one: it reads every watermark at
/// once.
const BULK: usize = 64;

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
        gs_ipc::ping(&ctx.paths.home, &row.repository_id);
    }
    Ok(Notified {
        repository_id: Some(row.repository_id),
        queued,
        warning,
    })
}

/// One line of a reference transaction, as the reference-transaction hook reads it:
/// `<old> <new> <refname>` (an all-zero id: the ref did not exist, or is deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
    pub refname: String,
}

/// The transaction's lines; a line that does not read as one is skipped.
pub fn parse_updates(text: &str) -> Vec<RefUpdate> {
    let id = |s: &str| ObjectId::from_hex(s.as_bytes()).ok();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (old, new, refname) = (f.next()?, f.next()?, f.next()?);
            let (old, new) = (id(old)?, id(new)?);
            Some(RefUpdate {
                old: (!old.is_null()).then_some(old),
                new: (!new.is_null()).then_some(new),
                refname: refname.to_string(),
            })
        })
        .collect()
}

/// What the reference-transaction hook calls, with its transaction's branch updates: queue the
/// new commits of the watched branches among them. Its work grows with the updates it is given,
/// not with the number of refs in the repository (agents make thousands of branches).
pub fn notify_updates(
    ctx: &Context,
    cwd: &Path,
    trigger: &str,
    updates: &[RefUpdate],
) -> Result<Notified> {
    let repo = git::discover(cwd)?;
    let Some(row) = repos::registration(ctx, &repo)? else {
        return Ok(Notified::default());
    };
    queue_updates(ctx, &repo, &row.repository_id, trigger, updates, true)
}

/// [`notify_updates`] in a registered repository (also what the hook's spool is taken in by):
/// queue the new commits of the watched branches among `updates`; `ping` the daemon when some
/// were queued.
pub fn queue_updates(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
    updates: &[RefUpdate],
    ping: bool,
) -> Result<Notified> {
    queue_in_turn(ctx, repo, repository_id, trigger, &[updates], ping)
}

/// [`queue_updates`] for several transactions, taken in the order given (each branch's in the
/// order git made them: a walk stops at the branch's value before its transaction).
pub fn queue_in_turn(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
    transactions: &[&[RefUpdate]],
    ping: bool,
) -> Result<Notified> {
    let (globs, warning) = watched_globs(ctx, repo);
    let mut queued = 0;
    for updates in transactions {
        queued += scan_updates(ctx, repo, repository_id, trigger, &globs, updates)?;
    }
    if queued > 0 && ping {
        gs_ipc::ping(&ctx.paths.home, repository_id);
    }
    // Each branch made or moved left a loose ref, and the next `git gc` would start this hook
    // twice per loose ref: once there are many (counted up to that many, a few small reads),
    // they are packed now, with no hook run. A failure (another process packing) leaves them
    // for the next hook run or the daemon's next full scan.
    let _ = git::loose_refs::pack_if_many(repo);
    Ok(Notified {
        repository_id: Some(repository_id.to_string()),
        queued,
        warning,
    })
}

/// [`scan`] for the branches `updates` moved alone: the other branches' watermarks stay as they
/// are (a branch that moved with no hook running is picked up by the next full scan: the
/// daemon's ref watcher, `[remote] poll`).
fn scan_updates(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
    globs: &gs_util::glob::Globs,
    updates: &[RefUpdate],
) -> Result<usize> {
    if !git::marks::exists(repo) {
        // No watermarks yet: the full scan sets them.
        return Ok(scan(ctx, repo, repository_id, trigger)?.0);
    }
    // The last update of each watched branch.
    let mut last: Vec<&RefUpdate> = Vec::new();
    let mut named = HashSet::new();
    for u in updates.iter().rev() {
        let (Some(_), Some(branch)) = (u.new, u.refname.strip_prefix("refs/heads/")) else {
            continue;
        };
        if named.insert(u.refname.as_str()) && globs.is_match(branch) {
            last.push(u);
        }
    }
    last.reverse();
    // A branch's own watermark is looked up alone (a few small reads), so that a commit's hook
    // run does not grow with the other branches; a transaction that moves many reads them all.
    let all = (last.len() > BULK)
        .then(|| git::marks::read(repo))
        .flatten();
    let mark_of = |refname: &str| match &all {
        Some(all) => all.get(refname).copied(),
        None => git::marks::get(repo, refname),
    };
    // Those that move to a commit their watermark is not at. A deletion (or pack-refs pruning
    // a loose ref) has nothing to run.
    let mut moved: Vec<(String, ObjectId, Vec<ObjectId>)> = Vec::new();
    for u in last {
        let new = u.new.expect("kept above");
        let mark = mark_of(&u.refname);
        if mark != Some(new) {
            let own = mark.into_iter().chain(u.old).collect();
            moved.push((u.refname.clone(), new, own));
        }
    }
    if moved.is_empty() {
        return Ok(0);
    }
    // Every branch's watermark stops a walk when they are at hand; looked up one branch at a
    // time, a walk that meets another branch's unrun watermark (a branch made on the history the
    // repository was adopted with) goes on to the full walk below, which hides them all.
    let marked: HashSet<ObjectId> = all.iter().flat_map(|m| m.values().copied()).collect();
    let mut notes = crate::app::records::results::NoteReader::new(repo)?;
    let mut seen = HashSet::new();
    let mut tips_done = HashSet::new();
    let mut jobs = Vec::new();
    let mut unsettled = Vec::new();
    for (refname, new, own) in &moved {
        if !tips_done.insert(*new) {
            continue;
        }
        let near = near_new_commits(
            ctx,
            repo,
            repository_id,
            *new,
            own,
            [&marked, &seen],
            &mut notes,
        )?;
        match near {
            Some(found) => {
                seen.extend(found.iter().copied());
                jobs.extend(found.into_iter().map(|id| (id, Some(refname.clone()))));
            }
            None => unsettled.push((refname.clone(), *new)),
        }
    }
    if !unsettled.is_empty() {
        // Rare (a branch made on old history, an orphan branch, a push of a long history):
        // only a walk that hides every watermark can tell what is new.
        let all = git::marks::read(repo).unwrap_or_default();
        let hidden: Vec<ObjectId> = all
            .values()
            .copied()
            .collect::<HashSet<_>>()
            .into_iter()
            .filter(|id| git::objects::is_commit(repo, *id))
            .collect();
        for (refname, tip) in unsettled {
            let found = new_commits(
                ctx,
                repo,
                repository_id,
                tip,
                &hidden,
                &mut notes,
                &mut seen,
            )?;
            jobs.extend(found.into_iter().map(|id| (id, Some(refname.clone()))));
        }
    }
    let queued = enqueue(ctx, repository_id, trigger, jobs)?;
    let moved: Vec<(String, ObjectId)> = moved.into_iter().map(|(r, new, _)| (r, new)).collect();
    git::marks::set(repo, &moved)?;
    Ok(queued)
}

/// How far [`near_new_commits`] walks before it hands over to the full walk.
const NEAR_LIMIT: usize = 100;

/// The new commits behind `tip` when they sit on known history, newest first: the walk stops at
/// the branch's own watermark or old value (`own`), at any branch's watermark or commit already
/// found (`known`), and at commits with a job or a result. `None` when it cannot tell cheaply: it reached a root commit (old
/// history with no results, or an orphan branch) or went past [`NEAR_LIMIT`] commits.
fn near_new_commits(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    tip: ObjectId,
    own: &[ObjectId],
    known: [&HashSet<ObjectId>; 2],
    notes: &mut crate::app::records::results::NoteReader,
) -> Result<Option<Vec<ObjectId>>> {
    let mut found = Vec::new();
    let mut visited = HashSet::new();
    let mut queue = std::collections::VecDeque::from([tip]);
    while let Some(id) = queue.pop_front() {
        if own.contains(&id) || known.iter().any(|k| k.contains(&id)) || !visited.insert(id) {
            continue;
        }
        if ctx.index.has_job(repository_id, &id.to_string())?
            || notes.record(ctx, repo, id).ok().flatten().is_some()
        {
            continue;
        }
        let up = parents(repo, id);
        if up.is_empty() || found.len() >= NEAR_LIMIT {
            return Ok(None);
        }
        found.push(id);
        queue.extend(up);
    }
    Ok(Some(found))
}

/// The watched branches' globs under the repository's config, with a warning when that config
/// is broken (the defaults are used then).
fn watched_globs(
    ctx: &Context,
    repo: &gs_git::Repository,
) -> (gs_util::glob::Globs, Option<String>) {
    let mut warning = None;
    let layers = ctx.checkout_layers(repo).unwrap_or_else(|e| {
        warning = Some(format!(
            "{e}; until it is fixed the hook watches the default branches, and runs of its commits end in `error`"
        ));
        ctx.layers.clone()
    });
    let config = layers.resolve();
    let globs = config.watched_branches().unwrap_or_else(|e| {
        warning = Some(format!(
            "{e}; until it is fixed the hook watches the default branches"
        ));
        gs_config::Config::default()
            .watched_branches()
            .unwrap_or_default()
    });
    (globs, warning)
}

/// Queue the commits of watched branches that arrived since the tool last looked (the branch
/// watermarks), skipping any that already has a result or a job. The history a repository had
/// when it was adopted is never queued by this: only `run RANGE` or `[watch] backfill` run it.
/// Returns how many were queued and a warning when the repository's config is broken (the
/// defaults are used then).
pub fn scan(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
) -> Result<(usize, Option<String>)> {
    let (globs, warning) = watched_globs(ctx, repo);
    let mut watched: Vec<(String, ObjectId)> = git::branches(repo)?
        .into_iter()
        .filter(|(b, _)| globs.is_match(b))
        .map(|(b, tip)| (format!("refs/heads/{b}"), tip))
        .collect();
    // With `[remote] poll`, the remote's watched branches are watched too.
    if let Some(remote) = crate::app::locate::followed(ctx, repo) {
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
    // The branches' own files (from hook runs) go back into the one list here, where the cost
    // of every branch is paid anyway.
    if new != old || git::marks::has_loose(repo) {
        git::marks::write(repo, &new)?;
    }
    Ok((queued, warning))
}

/// Queue the new commits of `refs` alone (a ref a webhook announced and a fetch brought), with
/// the same watermarks as [`scan`]; the other refs' watermarks stay. Returns how many.
pub fn scan_refs(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
    refs: &[(String, ObjectId)],
) -> Result<usize> {
    let old = git::marks::read(repo).unwrap_or_default();
    let queued = queue_new(ctx, repo, repository_id, trigger, refs, &old)?;
    let moved: Vec<(String, ObjectId)> = refs
        .iter()
        .filter(|(r, id)| old.get(r) != Some(id))
        .cloned()
        .collect();
    if !moved.is_empty() {
        git::marks::set(repo, &moved)?;
    }
    Ok(queued)
}

/// Queue the commits of `watched` that no watermark in `old` covers and that have no result or
/// job yet, oldest first. Returns how many.
fn queue_new(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
    trigger: &str,
    watched: &[(String, ObjectId)],
    old: &git::marks::Marks,
) -> Result<usize> {
    let hidden: Vec<ObjectId> = old
        .values()
        .copied()
        .filter(|id| git::objects::is_commit(repo, *id))
        .collect();
    let mut notes = crate::app::records::results::NoteReader::new(repo)?;
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
    enqueue(ctx, repository_id, trigger, jobs)
}

/// Queue `jobs` (found newest first) oldest first, so a worker runs history in order.
fn enqueue(
    ctx: &Context,
    repository_id: &str,
    trigger: &str,
    mut jobs: Vec<(ObjectId, Option<String>)>,
) -> Result<usize> {
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
    repo: &gs_git::Repository,
    repository_id: &str,
    tip: ObjectId,
    hidden: &[ObjectId],
    notes: &mut crate::app::records::results::NoteReader,
    seen: &mut HashSet<ObjectId>,
) -> Result<Vec<ObjectId>> {
    let index = &ctx.index;
    // Which of the commits this walk may meet have a job, asked in one query: the commits a
    // walk that stops only at results would take (a superset of those the walk below meets,
    // up to the limit); one met beyond them is asked about alone.
    let mut ahead = Vec::new();
    for id in git::objects::walk_commits(repo, tip, hidden, |id| {
        !seen.contains(&id) && notes.record(ctx, repo, id).ok().flatten().is_none()
    })? {
        ahead.push(id?.to_string());
        if ahead.len() >= WALK_LIMIT {
            break;
        }
    }
    let asked: HashSet<&str> = ahead.iter().map(String::as_str).collect();
    let refs: Vec<&str> = ahead.iter().map(String::as_str).collect();
    let queued_ahead = index.queued_among(repository_id, &refs).unwrap_or_default();
    let walk = git::objects::walk_commits(repo, tip, hidden, |id| {
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
    })?;
    let mut found = Vec::new();
    for id in walk {
        found.push(id?);
        if found.len() >= WALK_LIMIT {
            break;
        }
    }
    Ok(found)
}

/// Set the watermarks of a repository being adopted: each watched branch's tip, or with
/// `[watch] backfill = N` its N-th first-parent ancestor, then queue what that leaves (the last N
/// commits of each watched branch, trigger `backfill`). Returns how many were queued.
pub fn adopt_history(
    ctx: &Context,
    repo: &gs_git::Repository,
    repository_id: &str,
) -> Result<usize> {
    let config = ctx.checkout_layers(repo)?.resolve();
    let globs = config.watched_branches().map_err(|e| {
        crate::app::AppError::Usage(crate::app::Message::of("[watch] branches", &e))
    })?;
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

fn parents(repo: &gs_git::Repository, id: ObjectId) -> Vec<ObjectId> {
    git::objects::parents(repo, id)
}
