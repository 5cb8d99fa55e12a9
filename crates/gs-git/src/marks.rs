//! Watermarks: the tip of each watched branch the tool last knew, so that a hook or the daemon
//! queues only the commits that arrived since, never the history a repository had when it was
//! adopted. Kept in the repository's own git dir: local to this clone, never pushed, and it
//! survives a lost index.
//!
//! Laid out like git's own refs, so that a hook run's work does not grow with the number of
//! branches (agents make tens of thousands): `<git common dir>/sandbox-watermarks` holds every
//! branch's mark as sorted `<commit> <refname>` lines (written by a full look, looked up by a
//! binary search), and `sandbox-watermarks.d/` one file per branch a hook moved since (its
//! name a hash of the refname, its line the same format), which wins over the sorted list.

use super::{GitError, Result};
use gix::ObjectId;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const FILE: &str = "sandbox-watermarks";
const LOOSE: &str = "sandbox-watermarks.d";

/// Past this many branches in one call, [`set`] rewrites the sorted list instead of writing a
/// file per branch: a transaction that moves thousands of branches pays for them anyway.
const LOOSE_MAX: usize = 64;

pub type Marks = BTreeMap<String, ObjectId>;

fn path(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join(FILE)
}

fn loose_dir(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join(LOOSE)
}

fn loose_path(repo: &gix::Repository, refname: &str) -> PathBuf {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(refname.as_bytes());
    let name: String = hash[..20].iter().map(|b| format!("{b:02x}")).collect();
    loose_dir(repo).join(name)
}

fn parse_line(line: &[u8]) -> Option<(&str, ObjectId)> {
    let line = std::str::from_utf8(line).ok()?;
    let (id, name) = line.trim_end_matches('\n').split_once(' ')?;
    Some((name, ObjectId::from_hex(id.as_bytes()).ok()?))
}

fn io_err(context: String) -> impl FnOnce(std::io::Error) -> GitError {
    move |source| GitError::Io { context, source }
}

/// Whether this repository has watermarks (it has none when adopted before they existed, or
/// after they were removed).
pub fn exists(repo: &gix::Repository) -> bool {
    path(repo).exists() || loose_dir(repo).exists()
}

/// Whether hook runs left branches' own files (see [`write`], which folds them into the list).
pub fn has_loose(repo: &gix::Repository) -> bool {
    loose_dir(repo).exists()
}

/// Every watermark, or `None` when this repository has none yet.
pub fn read(repo: &gix::Repository) -> Option<Marks> {
    let packed = std::fs::read(path(repo));
    let loose = std::fs::read_dir(loose_dir(repo));
    if packed.is_err() && loose.is_err() {
        return None;
    }
    let mut marks: Marks = packed
        .unwrap_or_default()
        .split(|b| *b == b'\n')
        .filter_map(parse_line)
        .map(|(name, id)| (name.to_string(), id))
        .collect();
    for entry in loose.into_iter().flatten().flatten() {
        // Temp files of a write under way start with a dot.
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        if let Ok(text) = std::fs::read(entry.path()) {
            if let Some((name, id)) = parse_line(&text) {
                marks.insert(name.to_string(), id);
            }
        }
    }
    Some(marks)
}

/// The watermark of one branch: its own file when a hook moved it, else a binary search of the
/// sorted list (a few small reads, however many branches it holds).
pub fn get(repo: &gix::Repository, refname: &str) -> Option<ObjectId> {
    if let Ok(text) = std::fs::read(loose_path(repo, refname)) {
        if let Some((name, id)) = parse_line(&text) {
            if name == refname {
                return Some(id);
            }
        }
    }
    let file = std::fs::File::open(path(repo)).ok()?;
    search(&file, refname.as_bytes()).ok().flatten()
}

/// The line that starts at `start`, without its newline (empty at the end of the file).
fn line_at(file: &std::fs::File, start: u64) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    let mut at = start;
    loop {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(line);
        }
        if let Some(i) = buf[..n].iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&buf[..i]);
            return Ok(line);
        }
        line.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
}

/// The offset of the first line that starts at or after `at`.
fn next_start(file: &std::fs::File, at: u64) -> std::io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    Ok(at + line_at(file, at - 1)?.len() as u64)
}

fn name_of(line: &[u8]) -> &[u8] {
    line.iter()
        .position(|b| *b == b' ')
        .map_or(&[][..], |i| &line[i + 1..])
}

/// Binary search of the sorted list for `refname`'s line.
fn search(file: &std::fs::File, refname: &[u8]) -> std::io::Result<Option<ObjectId>> {
    // The line sought, if there, starts in [lo, hi); lo is always a line's start.
    let (mut lo, mut hi) = (0u64, file.metadata()?.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let start = next_start(file, mid)?;
        if start >= hi {
            if mid == lo {
                break;
            }
            hi = mid;
            continue;
        }
        let line = line_at(file, start)?;
        match name_of(&line).cmp(refname) {
            std::cmp::Ordering::Equal => {
                return Ok(parse_line(&line).map(|(_, id)| id));
            }
            std::cmp::Ordering::Less => lo = start + line.len() as u64 + 1,
            std::cmp::Ordering::Greater => hi = start,
        }
    }
    // `lo` itself is left unread when the loop stops on `mid == lo`.
    if lo < hi {
        let line = line_at(file, lo)?;
        if name_of(&line) == refname {
            return Ok(parse_line(&line).map(|(_, id)| id));
        }
    }
    Ok(None)
}

/// Record the watermarks of `moved` branches, the others' left as they are: a file each, or,
/// for many at once, the sorted list rewritten.
pub fn set(repo: &gix::Repository, moved: &[(String, ObjectId)]) -> Result<()> {
    if moved.len() > LOOSE_MAX || !exists(repo) {
        let mut marks = read(repo).unwrap_or_default();
        marks.extend(moved.iter().cloned());
        return write(repo, &marks);
    }
    let dir = loose_dir(repo);
    std::fs::create_dir_all(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    for (name, id) in moved {
        if name.contains(['\n', ' ']) {
            continue;
        }
        let p = loose_path(repo, name);
        // No fsync, as for the list (see `write`).
        gs_util::replace_file(&p, format!("{id} {name}\n").as_bytes(), false)
            .map_err(io_err(format!("cannot write {}", p.display())))?;
    }
    Ok(())
}

/// Replace every watermark (atomically: a reader sees the old list or the new one), then drop
/// the per-branch files it now holds.
pub fn write(repo: &gix::Repository, marks: &Marks) -> Result<()> {
    let mut body = String::new();
    for (name, id) in marks {
        if name.contains(['\n', ' ']) {
            continue;
        }
        body.push_str(&format!("{id} {name}\n"));
    }
    let p = path(repo);
    // No fsync: this runs in hooks, and a crash that loses the newest watermarks only makes
    // the next scan look at a few commits again (those with a job or a note stop it). A hook
    // that writes a branch's file while a full look rewrites the list may see it removed: the
    // same few commits looked at again.
    gs_util::replace_file(&p, body.as_bytes(), false)
        .map_err(io_err(format!("cannot write {}", p.display())))?;
    clear_loose(&loose_dir(repo))
}

fn clear_loose(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(GitError::Io {
            context: format!("cannot remove {}", dir.display()),
            source,
        }),
    }
}

/// Remove the watermarks, so that adopting the repository again starts afresh (instead of
/// queueing everything that arrived since). Returns whether there were any.
pub fn remove(repo: &gix::Repository) -> Result<bool> {
    let had = exists(repo);
    let p = path(repo);
    match std::fs::remove_file(&p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(GitError::Io {
                context: format!("cannot remove {}", p.display()),
                source,
            })
        }
    }
    clear_loose(&loose_dir(repo))?;
    Ok(had)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_hex(format!("{n:02x}").repeat(20).as_bytes()).unwrap()
    }

    #[test]
    fn the_sorted_list_finds_every_branch_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        for count in [0usize, 1, 2, 3, 7, 100, 1000] {
            let marks: Marks = (0..count)
                .map(|i| (format!("refs/heads/b{i}"), id((i % 250) as u8)))
                .collect();
            write(&repo, &marks).unwrap();
            for (name, want) in &marks {
                assert_eq!(get(&repo, name), Some(*want), "{name} of {count}");
            }
            for missing in [
                "refs/heads/a",
                "refs/heads/b",
                "refs/heads/b5x",
                "refs/heads/c",
            ] {
                if !marks.contains_key(missing) {
                    assert_eq!(get(&repo, missing), None, "{missing} of {count}");
                }
            }
            assert_eq!(read(&repo).unwrap(), marks);
        }
    }

    #[test]
    fn a_branchs_own_file_wins_until_the_list_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        assert!(!exists(&repo) && read(&repo).is_none());
        let marks: Marks = (0..10)
            .map(|i| (format!("refs/heads/b{i}"), id(1)))
            .collect();
        write(&repo, &marks).unwrap();
        set(&repo, &[("refs/heads/b3".into(), id(2))]).unwrap();
        set(&repo, &[("refs/heads/new".into(), id(3))]).unwrap();
        assert_eq!(get(&repo, "refs/heads/b3"), Some(id(2)));
        assert_eq!(get(&repo, "refs/heads/new"), Some(id(3)));
        assert_eq!(get(&repo, "refs/heads/b4"), Some(id(1)));
        let all = read(&repo).unwrap();
        assert_eq!((all.len(), all["refs/heads/b3"]), (11, id(2)));
        write(&repo, &all).unwrap();
        assert!(!loose_dir(&repo).exists());
        assert_eq!(read(&repo).unwrap(), all);
        assert!(remove(&repo).unwrap());
        assert!(!exists(&repo) && !remove(&repo).unwrap());
    }
}
