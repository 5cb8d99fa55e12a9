//! What the reference-transaction hook leaves instead of starting a process: a commit's hook
//! writes the branches it moved to a file in this home's spool (`$GIT_SANDBOX_HOME/spool/`,
//! shell builtins only), and the next command on a repository, `status`, or the daemon within a
//! fifth of a second, takes it in here and queues what is new, as `notify` would have.
//!
//! A spool file says what `notify --stdin` would have been told: which branches of the repository
//! at a path moved, from which commit to which. It is this user's (the spool is theirs alone),
//! and what it names is checked in git as `notify` checks it: a registered repository, watched
//! branches, ids that are commits there, walked back to the watermarks. A file lost (a hook
//! killed mid-write) delays its commits until the daemon's next full scan; it loses nothing,
//! because the watermarks move only when commits are queued.

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
    // The complete files, oldest first: a branch's updates are taken in the order git made them.
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        if let Some(rest) = name.strip_prefix(TAKEN) {
            // A taker that died after claiming: its claim is stale once old.
            if rest.contains('-') && older_than(&path, STALE) {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        if name.starts_with('.') {
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
        let written = entry.metadata().and_then(|m| m.modified()).ok();
        files.push((written, name.to_string()));
    }
    files.sort();
    // Each repository's branches: the value before the first update taken in, and after the
    // last, as one transaction that made them all would say.
    let mut by_repo: BTreeMap<PathBuf, Vec<notify::RefUpdate>> = BTreeMap::new();
    for (_, name) in files {
        // Claimed by a rename: of two takers, one gets it.
        let claim = spool.join(format!("{TAKEN}{name}-{}", std::process::id()));
        if std::fs::rename(spool.join(&name), &claim).is_err() {
            continue;
        }
        let text = read(&claim).unwrap_or_default();
        let _ = std::fs::remove_file(&claim);
        for moved in parse(&text) {
            let updates = by_repo.entry(moved.cwd).or_default();
            for u in moved.updates {
                match updates.iter_mut().find(|v| v.refname == u.refname) {
                    Some(v) => v.new = u.new,
                    None => updates.push(u),
                }
            }
        }
    }
    by_repo
        .into_iter()
        .map(|(cwd, updates)| queue(ctx, &cwd, &updates, ping))
        .sum()
}

/// Queue the new commits of `updates` in the repository at `cwd`, as the hook's `notify` does;
/// an update to an id that is no commit there queues nothing.
fn queue(ctx: &Context, cwd: &Path, updates: &[notify::RefUpdate], ping: bool) -> usize {
    let Ok(repo) = git::discover(cwd) else {
        return 0;
    };
    let Ok(Some(row)) = repos::registration(ctx, &repo) else {
        return 0;
    };
    let updates: Vec<notify::RefUpdate> = updates
        .iter()
        .filter(|u| u.new.is_some_and(|id| git::objects::is_commit(&repo, id)))
        .cloned()
        .collect();
    if updates.is_empty() {
        return 0;
    }
    notify::queue_updates(ctx, &repo, &row.repository_id, "hook", &updates, ping)
        .map(|n| n.queued)
        .unwrap_or(0)
}

fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
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
        assert!(complete("git-sandbox spool 1\ncwd /w\nend\n"));
        assert!(!complete("git-sandbox spool 1\ncwd /w\nen"));
    }
}
