//! What the reference-transaction hook leaves instead of starting a process: a commit's hook
//! writes the branches it moved to a file in this home's spool (`$GIT_SANDBOX_HOME/spool/`,
//! shell builtins only), and the next command on a repository, `status`, or the daemon within a
//! fifth of a second, takes it in here and queues what is new, as `notify` would have.
//!
//! A spool file says what `notify --stdin` would have been told: which branches of the repository
//! at a path moved, from which commit to which. It is this user's (the spool is theirs alone),
//! and what it names is checked in git as `notify` checks it: a registered repository, watched
//! branches, ids that are commits there, walked back to the watermarks. A file lost (a hook
//! killed mid-write) loses nothing: the watermarks move only when commits are queued, and the
//! next commit's walk (or the daemon's next full scan) goes down to them.

use crate::app::{home, intake::notify, repo::repos, Context};
use gs_git as git;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The first line of a block the hook writes.
const HEADER: &str = "git-sandbox spool 1";
/// The last line of a complete block.
const END: &str = "end";
/// A file's size past which it is not read (a hook writes a few hundred bytes).
const MAX_BYTES: u64 = 256 * 1024;
/// A file still incomplete after this long belongs to a hook that died mid-write.
const STALE: std::time::Duration = std::time::Duration::from_secs(60);
/// The prefix of a file a taker claimed (renamed), so that two takers never queue it twice.
const TAKEN: &str = ".taken-";

/// One hook run's report: the directory it ran in and its transaction's lines that moved
/// branches (`<old> <new> <refname>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub cwd: PathBuf,
    pub updates: Vec<notify::RefUpdate>,
}

/// The complete blocks of a spool file's text (an incomplete last block is left out).
pub fn parse(text: &str) -> Vec<Moved> {
    let mut out = Vec::new();
    let mut block: Option<Moved> = None;
    for line in text.lines() {
        if line == HEADER {
            block = Some(Moved {
                cwd: PathBuf::new(),
                updates: Vec::new(),
            });
            continue;
        }
        let Some(b) = block.as_mut() else { continue };
        if line == END {
            out.extend(block.take().filter(|b| b.cwd.is_absolute()));
        } else if let Some(cwd) = line.strip_prefix("cwd ") {
            b.cwd = PathBuf::from(cwd);
        } else {
            b.updates.extend(
                notify::parse_updates(line)
                    .into_iter()
                    .filter(|u| u.refname.starts_with("refs/heads/")),
            );
        }
    }
    out
}

/// Whether a spool file's text ends with a complete block (a hook's write is whole).
fn complete(text: &str) -> bool {
    text.ends_with(&format!("\n{END}\n"))
}

/// Take in every complete spool file of this home: queue the new commits of the branches they
/// name, in each registered repository they name. Returns how many commits were queued. Never
/// fails: a repository that cannot be opened or is not registered is skipped (its commits are
/// the full scan's). `ping`: wake the daemon when something was queued (not from the daemon).
pub fn take_in(ctx: &Context, ping: bool) -> usize {
    let spool = home::spool_dir(&ctx.paths.home);
    let entries = match std::fs::read_dir(&spool) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Made here for an existing home, so that the next commit's hook writes here.
            let _ = home::make_spool(&ctx.paths.home);
            return 0;
        }
        Err(_) => return 0,
    };
    // Each complete file is claimed by a rename (of two takers, one gets it) and kept until its
    // commits are queued: a taker killed before then leaves its claims, which are taken in
    // again once stale. Their order does not matter (a file system's clock ticks every few
    // milliseconds, and the names are process ids): each branch's updates are put in the
    // order git made them below.
    let mut claims = Vec::new();
    let mut by_repo: BTreeMap<PathBuf, Vec<notify::RefUpdate>> = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        let stale_claim = name.starts_with(TAKEN) && older_than(&path, STALE);
        if name.starts_with('.') && !stale_claim {
            continue;
        }
        let Some(text) = read(&path) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if !(text.starts_with(HEADER) || HEADER.starts_with(text.as_str())) {
            // Not a hook's: nothing to wait for.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if !complete(&text) {
            // A hook is writing it (or died doing so).
            if older_than(&path, STALE) {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        let claim = spool.join(format!("{TAKEN}{}-{}", std::process::id(), claims.len()));
        if std::fs::rename(&path, &claim).is_err() {
            continue;
        }
        let text = read(&claim).unwrap_or_default();
        claims.push(claim);
        for moved in parse(&text) {
            by_repo.entry(moved.cwd).or_default().extend(moved.updates);
        }
    }
    let queued = by_repo
        .into_iter()
        .map(|(cwd, updates)| queue(ctx, &cwd, updates, ping))
        .sum();
    for claim in claims {
        let _ = std::fs::remove_file(claim);
    }
    queued
}

/// Queue the new commits of `updates` in the repository at `cwd`, as the hook's `notify` does;
/// an update to an id that is no commit there queues nothing.
fn queue(ctx: &Context, cwd: &Path, updates: Vec<notify::RefUpdate>, ping: bool) -> usize {
    let Ok(repo) = git::discover(cwd) else {
        return 0;
    };
    let Ok(Some(row)) = repos::registration(ctx, &repo) else {
        return 0;
    };
    let updates: Vec<notify::RefUpdate> = updates
        .into_iter()
        .filter(|u| u.new.is_some_and(|id| git::objects::is_commit(&repo, id)))
        .collect();
    if updates.is_empty() {
        return 0;
    }
    // In turn, each walk stops at the branch's watermark, which the one before moved; not at
    // its old value, as the hook's `notify` does: a file lost (a hook killed mid-write) would
    // leave the commits it brought unqueued below one that is queued, where no scan looks.
    let mut updates = in_turn(updates, |r| git::objects::ref_target(&repo, r));
    for u in &mut updates {
        u.old = None;
    }
    let each: Vec<&[notify::RefUpdate]> = updates.iter().map(std::slice::from_ref).collect();
    notify::queue_in_turn(ctx, &repo, &row.repository_id, "hook", &each, ping)
        .map(|n| n.queued)
        .unwrap_or(0)
}

/// Each branch's updates in the order git made them, from the links between them (git moved the
/// branch from each one's `old`, the value the one before left): a run of linked updates is
/// followed from its first, and a run that ends at the branch's value now (`tip_of`) comes last,
/// so that its watermark ends there. Taken one at a time in this order, every commit an update
/// brought is queued, as the hook's `notify` would have, whichever file was read first.
pub fn in_turn(
    updates: Vec<notify::RefUpdate>,
    tip_of: impl Fn(&str) -> Option<gs_git::ObjectId>,
) -> Vec<notify::RefUpdate> {
    let mut branches: Vec<String> = Vec::new();
    for u in &updates {
        if !branches.contains(&u.refname) {
            branches.push(u.refname.clone());
        }
    }
    let mut out = Vec::with_capacity(updates.len());
    for branch in branches {
        let mut left: Vec<notify::RefUpdate> = updates
            .iter()
            .filter(|u| u.refname == branch)
            .cloned()
            .collect();
        let mut runs: Vec<Vec<notify::RefUpdate>> = Vec::new();
        while !left.is_empty() {
            // A first update: one whose old value no other update left (else any: a cycle).
            let first = (0..left.len())
                .find(|&i| {
                    !left
                        .iter()
                        .enumerate()
                        .any(|(j, v)| j != i && v.new.is_some() && v.new == left[i].old)
                })
                .unwrap_or(0);
            let mut run = vec![left.remove(first)];
            while let Some(next) = left
                .iter()
                .position(|v| v.old.is_some() && v.old == run.last().and_then(|u| u.new))
            {
                run.push(left.remove(next));
            }
            runs.push(run);
        }
        let tip = tip_of(&branch);
        runs.sort_by_key(|run| tip.is_some() && run.last().and_then(|u| u.new) == tip);
        out.extend(runs.into_iter().flatten());
    }
    out
}

/// A spool file's text: a regular file, not followed if a link, never waited on if a FIFO.
fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

fn older_than(path: &Path, age: std::time::Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|e| e > age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spool_files_complete_blocks_name_their_directory_and_branch_updates() {
        let (a, b) = ("1".repeat(40), "2".repeat(40));
        let text = format!(
            "git-sandbox spool 1\ncwd /w/a\n\
            {a} {b} refs/heads/main\n\
            {a} {b} refs/tags/v1\n\
            not a line\n\
            end\n\
            git-sandbox spool 1\ncwd relative\n{a} {b} refs/heads/x\nend\n\
            garbage\n\
            git-sandbox spool 1\ncwd /w/b\n{a} {b} refs/heads/y\n"
        );
        let parsed = parse(&text);
        assert_eq!(parsed.len(), 1, "{parsed:?}");
        assert_eq!(parsed[0].cwd, PathBuf::from("/w/a"));
        assert_eq!(
            parsed[0].updates,
            notify::parse_updates(&format!("{a} {b} refs/heads/main\n"))
        );
        assert!(!complete(&text));
        assert!(!complete("git-sandbox spool 1\ncwd /w\nen"));
    }

    #[test]
    fn updates_read_in_any_order_are_taken_in_the_order_git_made_them() {
        let id = |c: char| gs_git::ObjectId::from_hex(c.to_string().repeat(40).as_bytes()).unwrap();
        let up = |refname: &str, old: Option<char>, new: char| notify::RefUpdate {
            old: old.map(id),
            new: Some(id(new)),
            refname: refname.to_string(),
        };
        let main = "refs/heads/main";
        // main a→b→c→d (its files read backwards), and x made at e then moved to f; then main's
        // chain broken by an update no hook saw (d→9), 9→8 read first.
        let read = vec![
            up(main, Some('9'), '8'),
            up(main, Some('c'), 'd'),
            up("refs/heads/x", Some('e'), 'f'),
            up(main, Some('b'), 'c'),
            up("refs/heads/x", None, 'e'),
            up(main, Some('a'), 'b'),
        ];
        let ordered = in_turn(read, |r| (r == main).then(|| id('8')));
        let steps: Vec<(String, Option<gs_git::ObjectId>)> =
            ordered.iter().map(|u| (u.refname.clone(), u.new)).collect();
        let want = |r: &str, c: char| (r.to_string(), Some(id(c)));
        assert_eq!(
            steps,
            vec![
                want(main, 'b'),
                want(main, 'c'),
                want(main, 'd'),
                // The run that ends at main's value now comes last.
                want(main, '8'),
                want("refs/heads/x", 'e'),
                want("refs/heads/x", 'f'),
            ]
        );
    }
}
