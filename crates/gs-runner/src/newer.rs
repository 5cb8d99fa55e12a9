//! A kept checkout's files made newer than cached outputs built from other trees. Build tools
//! take an output newer than its sources as built from them (make's rule, cargo's fingerprints
//! of local crates), and a kept checkout keeps the times its files were written at: an output
//! that a run in another slot built later from another tree would pass for this tree's. So the
//! files of a run's tree that differ from a tree the cached outputs were built from are touched
//! before the run, as a checkout in one reused worktree would have them.

use crate::caches::Made;
use gix::ObjectId;
use gs_git as git;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Past this many other trees to diff against, every file is touched instead.
const MAX_TREES: usize = 16;

/// What to touch.
#[derive(Debug, PartialEq, Eq)]
pub enum Stale {
    Files(Vec<String>),
    All,
}

/// The files of `tree` a build tool could take as older than earlier runs' outputs.
///
/// `tree` is kept in the slot `slot` with every file at least as new as `fresh_ms`; the runs are
/// those `made` records. A record of this slot needs nothing (a file the slot changed since that
/// run is newer than its outputs), nor one of a run that ended before `fresh_ms`.
pub fn stale(
    repo: &gix::Repository,
    tree: ObjectId,
    made: &[Made],
    slot: &str,
    fresh_ms: i64,
) -> Option<Stale> {
    let mut trees = BTreeSet::new();
    for m in made {
        if m.slot == slot || m.end_ms < fresh_ms {
            continue;
        }
        match ObjectId::from_hex(m.tree.as_bytes()) {
            Ok(t) if t == tree => {}
            Ok(t) => {
                trees.insert(t);
            }
            Err(_) => return Some(Stale::All),
        }
    }
    if trees.len() > MAX_TREES {
        return Some(Stale::All);
    }
    let mut files = BTreeSet::new();
    for from in trees {
        match git::cache::changed_files(repo, from, tree) {
            Ok(f) => files.extend(f),
            Err(_) => return Some(Stale::All),
        }
    }
    (!files.is_empty()).then(|| Stale::Files(files.into_iter().collect()))
}

/// Set the modification time of `rel` under `dir` to now: the kept checkout's contents are the
/// commit's, so nothing on the way is followed (a link itself is touched, never its target).
fn touch_one(dir: &Path, rel: &str) {
    gs_util::beneath::touch_beneath(dir, rel);
}

/// Make `files` (paths under `dir`) newer than anything written before now.
pub fn touch(dir: &Path, files: &[String]) {
    for f in files {
        touch_one(dir, f);
    }
}

/// Set the modification time of the entry `name` of `dir`, a directory this walk reached
/// without following a link (`read_dir`'s types are the entries' own), the entry itself never
/// followed either.
fn touch_entry(dir: &Path, name: &[u8]) {
    let mut p = dir.as_os_str().as_bytes().to_vec();
    p.push(b'/');
    p.extend_from_slice(name);
    if let Ok(c) = CString::new(p) {
        gs_util::beneath::touch_at(libc::AT_FDCWD, &c);
    }
}

/// Make every file under `dir` newer than anything written before now.
pub fn touch_all(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            touch_all(&e.path());
        } else {
            touch_entry(dir, e.file_name().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(tree: &str, slot: &str, end_ms: i64) -> Made {
        Made {
            tree: tree.into(),
            slot: slot.into(),
            end_ms,
        }
    }

    #[test]
    fn only_other_slots_runs_of_other_trees_since_the_files_were_written_count() {
        let d = tempfile::tempdir().unwrap();
        let repo = gix::init(d.path()).unwrap();
        let tree = ObjectId::empty_tree(gix::hash::Kind::Sha1);
        let t = tree.to_string();
        // This slot's runs, runs before the files were written and of this very tree: nothing.
        let none = [
            made("0000000000000000000000000000000000000001", "me", 50),
            made("0000000000000000000000000000000000000002", "other", 5),
            made(&t, "other", 50),
        ];
        assert_eq!(stale(&repo, tree, &none, "me", 10), None);
        // A record that names no tree: every file.
        let unknown = [made("*", "-", 50)];
        assert_eq!(stale(&repo, tree, &unknown, "me", 10), Some(Stale::All));
        assert_eq!(stale(&repo, tree, &unknown, "me", 60), None);
    }

    #[test]
    fn touched_files_are_newer_than_what_was_written_before() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/a.rs"), "a").unwrap();
        std::fs::write(d.path().join("b"), "b").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        for f in ["src/a.rs", "b"] {
            let file = std::fs::File::options()
                .write(true)
                .open(d.path().join(f))
                .unwrap();
            file.set_modified(old).unwrap();
        }
        let mtime = |f: &str| {
            std::fs::metadata(d.path().join(f))
                .unwrap()
                .modified()
                .unwrap()
        };
        touch(d.path(), &["src/a.rs".to_string()]);
        assert!(mtime("src/a.rs") > old && mtime("b") == old);
        touch_all(d.path());
        assert!(mtime("b") > old);
    }

    #[test]
    fn a_touch_never_follows_a_link_on_the_way_out_of_the_checkout() {
        // The kept checkout's contents are the commit's: a directory swapped for a link to a
        // host directory must not lead the supervisor's touch to the host's files.
        let d = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("passwd"), "root").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        std::fs::File::options()
            .write(true)
            .open(host.path().join("passwd"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::os::unix::fs::symlink(host.path(), d.path().join("etc")).unwrap();
        touch(d.path(), &["etc/passwd".to_string()]);
        touch_all(d.path());
        let host_mtime = std::fs::metadata(host.path().join("passwd"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            host_mtime, old,
            "the host's file was touched through the link"
        );
    }
}
