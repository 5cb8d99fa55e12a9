//! Bringing a kept checkout from one tree to the next by applying the tree diff: only the paths
//! the diff names are removed or written (through gix's checkout, with the repository's filters
//! and attributes), so the cost follows the size of the change, not of the tree.

use super::checkout::STREAM_THRESHOLD;
use super::{gix_err, GitError, Result};
use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Mode, Stat};
use gix::object::tree::diff::{Action, Change};
use gix::objs::tree::EntryKind;
use gix::ObjectId;
use gs_util::beneath;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What an update did.
#[derive(Debug, Default)]
pub struct Updated {
    /// The blob bytes of the new tree (the old total, adjusted by the diff).
    pub bytes: u64,
    /// Paths written (files and symlinks).
    pub written: Vec<String>,
    /// Paths removed (files, symlinks, directories).
    pub removed: Vec<String>,
}

/// One entry that changed between the two trees (directories only when deleted).
struct Changed {
    path: String,
    old: Option<(EntryKind, ObjectId)>,
    new: Option<(EntryKind, ObjectId)>,
}

fn is_blob(k: EntryKind) -> bool {
    matches!(
        k,
        EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link
    )
}

/// Bring `dest`, a checkout of tree `from` holding `bytes_before` bytes of blobs, to tree `to`,
/// if the new tree's blobs add up to at most `ceiling` bytes. `Ok(None)` when the change cannot
/// be applied piecemeal (a `.gitattributes` changed, which changes how every file is written):
/// check the tree out afresh instead. `before` is given every path the update may write or
/// remove, before anything is touched.
#[allow(clippy::too_many_arguments)]
pub fn update(
    repo: &gix::Repository,
    dest: &Path,
    from: ObjectId,
    to: ObjectId,
    bytes_before: u64,
    ceiling: u64,
    interrupt: &AtomicBool,
    before: &mut dyn FnMut(&[String]),
) -> Result<Option<Updated>> {
    let changes = diff(repo, from, to)?;
    if changes
        .iter()
        .any(|c| c.path.rsplit('/').next() == Some(".gitattributes"))
    {
        return Ok(None);
    }
    // The new size from the sizes of what changed, checked before anything is touched.
    let size = |id: ObjectId| -> Result<u64> { Ok(repo.find_header(id).map_err(gix_err)?.size()) };
    let mut bytes = bytes_before as i128;
    for c in &changes {
        if let Some((k, id)) = c.old.filter(|(k, _)| is_blob(*k)) {
            let _ = k;
            bytes -= size(id)? as i128;
        }
        if let Some((_, id)) = c.new.filter(|(k, _)| is_blob(*k)) {
            bytes += size(id)? as i128;
        }
    }
    let bytes = bytes.max(0) as u64;
    if bytes > ceiling {
        return Err(GitError::TreeTooLarge {
            size: bytes,
            ceiling,
        });
    }
    before(&changes.iter().map(|c| c.path.clone()).collect::<Vec<_>>());
    let mut out = Updated {
        bytes,
        ..Updated::default()
    };
    // Removals first: a path that becomes a directory, a file that becomes a link, and the
    // other way round, are cleared before anything is written there.
    for c in &changes {
        let Some((old_kind, _)) = c.old else { continue };
        let same_kind = c.new.is_some_and(|(k, _)| {
            is_blob(k)
                && is_blob(old_kind)
                && (k == EntryKind::Link) == (old_kind == EntryKind::Link)
        });
        if same_kind {
            continue;
        }
        if beneath::remove_beneath(dest, &c.path).map_err(|e| cache_err(&c.path, e))? {
            out.removed.push(c.path.clone());
        }
    }
    // Directories a removal emptied go too: a fresh checkout would not have them.
    for path in out.removed.clone() {
        let mut dir = path.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if !beneath::remove_empty_dir_beneath(dest, parent) {
                break;
            }
            dir = parent;
        }
    }
    // Writes, through gix's checkout of an index holding just the changed entries.
    let mut state = gix::index::State::new(repo.object_hash());
    let mut large = Vec::new();
    for c in &changes {
        let Some((kind, id)) = c.new.filter(|(k, _)| is_blob(*k)) else {
            continue;
        };
        let mode = match kind {
            EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
            EntryKind::Link => Mode::SYMLINK,
            _ => Mode::FILE,
        };
        let mut flags = Flags::empty();
        if kind != EntryKind::Link && size(id)? > STREAM_THRESHOLD {
            flags.insert(Flags::SKIP_WORKTREE);
            large.push((c.path.clone(), id, kind == EntryKind::BlobExecutable));
        }
        state.dangerously_push_entry(
            Stat::default(),
            id,
            flags,
            mode,
            BStr::new(c.path.as_bytes()),
        );
        out.written.push(c.path.clone());
    }
    if state.entries().is_empty() {
        return Ok(Some(out));
    }
    state.sort_entries();
    super::checkout::write_entries(
        repo,
        &mut state,
        dest,
        false,
        interrupt,
        "update of the checkout at",
    )?;
    for (path, id, executable) in large {
        if interrupt.load(Ordering::Relaxed) {
            return Err(GitError::gix("checkout interrupted"));
        }
        beneath::remove_beneath(dest, &path).map_err(|e| cache_err(&path, e))?;
        super::checkout::stream_blob_to(repo, &path, id, executable, dest)?;
    }
    Ok(Some(out))
}

/// The files of `to` whose content or kind differs from `from`'s: added or changed, not what
/// `to` no longer has.
pub fn changed_files(repo: &gix::Repository, from: ObjectId, to: ObjectId) -> Result<Vec<String>> {
    Ok(diff(repo, from, to)?
        .into_iter()
        .filter(|c| c.new.is_some_and(|(k, _)| is_blob(k)))
        .map(|c| c.path)
        .collect())
}

fn cache_err(path: &str, e: beneath::Skip) -> GitError {
    GitError::gix(format!("update of the checkout at {path} failed: {e}"))
}

/// The entries that differ between two trees, by path; a deleted directory is one entry.
fn diff(repo: &gix::Repository, from: ObjectId, to: ObjectId) -> Result<Vec<Changed>> {
    let old = repo.find_tree(from).map_err(gix_err)?;
    let new = repo.find_tree(to).map_err(gix_err)?;
    let mut platform = old.changes().map_err(gix_err)?;
    platform.options(|o| {
        o.track_path().track_rewrites(None);
    });
    let mut out = Vec::new();
    platform
        .for_each_to_obtain_tree(&new, |change: Change<'_, '_, '_>| -> gix::Result<Action> {
            let path = change.location().to_str_lossy().into_owned();
            let c = match change {
                Change::Addition { entry_mode, id, .. } => {
                    if entry_mode.is_tree() {
                        return Ok(Action::Continue(()));
                    }
                    Changed {
                        path,
                        old: None,
                        new: Some((entry_mode.kind(), id.detach())),
                    }
                }
                Change::Deletion { entry_mode, id, .. } => Changed {
                    path,
                    old: Some((entry_mode.kind(), id.detach())),
                    new: None,
                },
                Change::Modification {
                    previous_entry_mode,
                    entry_mode,
                    ..
                } if previous_entry_mode.is_tree() && entry_mode.is_tree() => {
                    // A directory whose contents changed: its entries say how.
                    return Ok(Action::Continue(()));
                }
                Change::Modification {
                    previous_entry_mode,
                    previous_id,
                    entry_mode,
                    id,
                    ..
                } => Changed {
                    path,
                    old: Some((previous_entry_mode.kind(), previous_id.detach())),
                    new: (!entry_mode.is_tree()).then(|| (entry_mode.kind(), id.detach())),
                },
                Change::Rewrite { .. } => return Ok(Action::Continue(())),
            };
            out.push(c);
            Ok(Action::Continue(()))
        })
        .map_err(gix_err)?;
    // Deeper paths last for writes does not matter; for removals, a directory removed whole
    // makes its children's removals no-ops.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::git;

    fn tree_of(dir: &Path, rev: &str) -> ObjectId {
        ObjectId::from_hex(
            git(dir, &["rev-parse", &format!("{rev}^{{tree}}")])
                .trim()
                .as_bytes(),
        )
        .unwrap()
    }

    /// Every file under `dir` with its content (links as `-> target`), and its executable bit.
    fn listing(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let t = e.file_type().unwrap();
                if t.is_symlink() {
                    out.push((
                        rel,
                        format!("-> {}", std::fs::read_link(&p).unwrap().display()),
                    ));
                } else if t.is_dir() {
                    out.push((rel.clone() + "/", String::new()));
                    walk(root, &p, out);
                } else {
                    use std::os::unix::fs::PermissionsExt;
                    let x = e.metadata().unwrap().permissions().mode() & 0o111 != 0;
                    out.push((rel, format!("{x} {}", std::fs::read_to_string(&p).unwrap())));
                }
            }
        }
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    #[test]
    fn an_update_matches_a_fresh_checkout_through_every_kind_of_change() {
        let d = tempfile::tempdir().unwrap();
        let repo_dir = d.path().join("repo");
        std::fs::create_dir(&repo_dir).unwrap();
        git(&repo_dir, &["init", "-q", "-b", "main"]);
        let w = |rel: &str, body: &str| {
            let p = repo_dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w("a.txt", "a\n");
        w("dir/b.txt", "b\n");
        w("dir/sub/c.txt", "c\n");
        w("gone/x.txt", "x\n");
        w("becomes_dir", "file\n");
        std::os::unix::fs::symlink("a.txt", repo_dir.join("link")).unwrap();
        w("run.sh", "#!/bin/sh\n");
        git(&repo_dir, &["add", "-A"]);
        git(&repo_dir, &["commit", "-qm", "one"]);
        // Every kind of change at once.
        w("a.txt", "a changed\n");
        std::fs::remove_dir_all(repo_dir.join("gone")).unwrap();
        std::fs::remove_file(repo_dir.join("becomes_dir")).unwrap();
        w("becomes_dir/inside.txt", "in\n");
        std::fs::remove_file(repo_dir.join("link")).unwrap();
        w("link", "now a file\n");
        std::fs::remove_dir_all(repo_dir.join("dir/sub")).unwrap();
        std::os::unix::fs::symlink("b.txt", repo_dir.join("dir/sub")).unwrap();
        git(&repo_dir, &["update-index", "--chmod=+x", "a.txt"]);
        w("new/deep/d.txt", "d\n");
        git(&repo_dir, &["add", "-A"]);
        git(&repo_dir, &["update-index", "--chmod=+x", "a.txt"]);
        git(&repo_dir, &["commit", "-qm", "two"]);
        let repo = gix::open(&repo_dir).unwrap();
        let (one, two) = (tree_of(&repo_dir, "HEAD~1"), tree_of(&repo_dir, "HEAD"));
        let flag = AtomicBool::new(false);
        let kept =
            super::super::checkout::checkout_tree(&repo, one, d.path(), &flag, u64::MAX).unwrap();
        let mut announced = Vec::new();
        let mut before = |paths: &[String]| announced = paths.to_vec();
        let updated = update(
            &repo,
            &kept.path(),
            one,
            two,
            0,
            u64::MAX,
            &flag,
            &mut before,
        )
        .unwrap()
        .expect("applied piecemeal");
        assert!(updated.written.contains(&"a.txt".to_string()));
        // Every path written or removed was announced before.
        for p in updated.written.iter().chain(&updated.removed) {
            assert!(announced.contains(p), "{p} in {announced:?}");
        }
        assert!(
            updated.removed.contains(&"gone/x.txt".to_string())
                || updated.removed.contains(&"gone".to_string())
        );
        let fresh =
            super::super::checkout::checkout_tree(&repo, two, d.path(), &flag, u64::MAX).unwrap();
        assert_eq!(listing(&kept.path()), listing(&fresh.path()));
        // And back again.
        update(
            &repo,
            &kept.path(),
            two,
            one,
            0,
            u64::MAX,
            &flag,
            &mut |_| {},
        )
        .unwrap()
        .unwrap();
        let first =
            super::super::checkout::checkout_tree(&repo, one, d.path(), &flag, u64::MAX).unwrap();
        assert_eq!(listing(&kept.path()), listing(&first.path()));
    }

    #[test]
    fn a_changed_gitattributes_asks_for_a_fresh_checkout() {
        let d = tempfile::tempdir().unwrap();
        git(d.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(d.path().join("a.txt"), "a\n").unwrap();
        git(d.path(), &["add", "-A"]);
        git(d.path(), &["commit", "-qm", "one"]);
        std::fs::write(d.path().join(".gitattributes"), "*.txt text eol=crlf\n").unwrap();
        git(d.path(), &["add", "-A"]);
        git(d.path(), &["commit", "-qm", "two"]);
        let repo = gix::open(d.path()).unwrap();
        let flag = AtomicBool::new(false);
        let dest = tempfile::tempdir().unwrap();
        let r = update(
            &repo,
            dest.path(),
            tree_of(d.path(), "HEAD~1"),
            tree_of(d.path(), "HEAD"),
            0,
            u64::MAX,
            &flag,
            &mut |_| {},
        )
        .unwrap();
        assert!(r.is_none());
    }
}
