//! What a sandboxed command wrote to its tree, as changes to a git tree: an overlay upper layer
//! (as the sandbox's helper merges one out of a run: files, symlinks, directories, whiteouts as
//! 0/0 character devices, opaque directories marked by the `trusted.` or `user.overlay.opaque`
//! attribute) read against the tree it lay over, then applied with gix's tree editor, which
//! writes only the directories that changed.
//!
//! The layer is hostile (the command wrote it): nothing in it is followed — a symlink is read as
//! a link and kept as one, a file is opened without following a link — names git cannot hold
//! (`.git`, not UTF-8) and special files (FIFOs, sockets, devices) are skipped with why, and the
//! bytes read are bounded. The caller decides which changes to take ([`apply`] writes those).

use super::objects::{self, Kind};
use super::{gix_err, GitError, Result};
use gix::ObjectId;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Not in the base tree.
    Added,
    /// In the base tree, now with other content, mode or kind.
    Modified,
    /// In the base tree (a file, a link, or a directory and all below it), now gone.
    Deleted,
}

/// One changed path (a file or link; a deleted directory is one change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
    /// What the path holds now (`None`: deleted).
    pub entry: Option<(Kind, ObjectId)>,
}

/// The changes a layer makes to a tree, and what of it could not be taken.
#[derive(Debug, Default)]
pub struct Changes {
    pub changes: Vec<Change>,
    /// Paths skipped, each with why (a FIFO, a name git cannot hold).
    pub skipped: Vec<(String, String)>,
}

/// The most bytes of files [`read`] takes from a layer when not told.
pub const MAX_BYTES: u64 = 1 << 30;

/// What [`read`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// An overlay's upper layer: what is not in it is as the base has it.
    Upper,
    /// A whole tree (a command that ran in a checkout without an overlay): what is not in it is
    /// gone.
    Whole,
}

/// The changes the directory `dir` (an upper layer laid over `base`'s files, or a whole tree)
/// makes to the tree `base`, its new files and links written as blobs; refused when its files
/// hold more than `max_bytes`. A layer that does not exist changes nothing.
pub fn read(
    repo: &gix::Repository,
    base: ObjectId,
    dir: &Path,
    layout: Layout,
    max_bytes: u64,
) -> Result<Changes> {
    read_with(repo, base, dir, layout, max_bytes, &mut |_, _| true)
}

/// [`read`], asking `take(path, is_dir)` of each entry the base tree does not have (a new file,
/// link or directory) before reading it or going below it: what it refuses is left out, unread
/// (an ignored `node_modules/` costs nothing). What the base has is always read.
pub fn read_with(
    repo: &gix::Repository,
    base: ObjectId,
    dir: &Path,
    layout: Layout,
    max_bytes: u64,
    take: &mut dyn FnMut(&str, bool) -> bool,
) -> Result<Changes> {
    let mut walk = Walk {
        repo,
        max_bytes,
        bytes: 0,
        whole: layout == Layout::Whole,
        out: Changes::default(),
        take,
    };
    if layout == Layout::Upper && std::fs::symlink_metadata(dir).is_err() {
        return Ok(walk.out);
    }
    walk.dir(dir, "", Some(base))?;
    walk.out.changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(walk.out)
}

/// Write `base` with `changes` applied; its id. Only the directories they touch are written.
pub fn apply(repo: &gix::Repository, base: ObjectId, changes: &[Change]) -> Result<ObjectId> {
    if changes.is_empty() {
        return Ok(base);
    }
    let mut editor = repo.edit_tree(base).map_err(gix_err)?;
    for c in changes {
        match c.entry {
            Some((kind, id)) => {
                editor
                    .upsert(c.path.as_str(), kind.mode().kind(), id)
                    .map_err(gix_err)?;
            }
            None => {
                editor.remove(c.path.as_str()).map_err(gix_err)?;
            }
        }
    }
    Ok(editor.write().map_err(gix_err)?.detach())
}

struct Walk<'a> {
    repo: &'a gix::Repository,
    max_bytes: u64,
    bytes: u64,
    whole: bool,
    out: Changes,
    take: &'a mut dyn FnMut(&str, bool) -> bool,
}

/// The entries of a tree by name.
fn entries_of(
    repo: &gix::Repository,
    tree: Option<ObjectId>,
) -> Result<BTreeMap<String, (Kind, ObjectId)>> {
    let Some(tree) = tree else {
        return Ok(BTreeMap::new());
    };
    Ok(objects::entries(repo, tree)?
        .into_iter()
        .map(|e| (e.path, (e.kind, e.id)))
        .collect())
}

/// Whether the directory at `path` is opaque (hides everything below it): overlayfs's
/// `trusted.` or `user.overlay.opaque` attribute, read without following a link.
pub fn is_opaque(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut buf = [0u8; 4];
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        // SAFETY: reading an attribute of a path (not following a link) into a local buffer.
        let n = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n == 1 && buf[0] == b'y' {
            return true;
        }
    }
    false
}

impl Walk<'_> {
    fn join(rel: &str, name: &str) -> String {
        if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        }
    }

    /// The layer's directory `dir` (the tree's `rel`), over `base` (its tree there, if any).
    fn dir(&mut self, dir: &Path, rel: &str, base: Option<ObjectId>) -> Result<()> {
        let below = entries_of(self.repo, base)?;
        let opaque = self.whole || (!rel.is_empty() && is_opaque(dir));
        let read = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        let mut seen = std::collections::HashSet::new();
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| io(dir, e))?;
            names.push(entry.file_name());
        }
        names.sort();
        for os_name in names {
            let path = dir.join(&os_name);
            let Some(name) = os_name.to_str() else {
                let shown = Self::join(rel, &os_name.to_string_lossy());
                self.out
                    .skipped
                    .push((shown, "its name is not UTF-8".into()));
                continue;
            };
            let at = Self::join(rel, name);
            if name.eq_ignore_ascii_case(".git") {
                self.out
                    .skipped
                    .push((at, "git cannot hold a `.git` in a tree".into()));
                continue;
            }
            seen.insert(name.to_string());
            let old = below.get(name).copied();
            let meta = std::fs::symlink_metadata(&path).map_err(|e| io(&path, e))?;
            let ft = meta.file_type();
            let whiteout = ft.is_char_device() && meta.rdev() == 0;
            if old.is_none() && !whiteout && !(self.take)(&at, ft.is_dir()) {
                continue;
            }
            if ft.is_char_device() && meta.rdev() == 0 {
                // A whiteout: gone.
                if old.is_some() {
                    self.change(at, ChangeKind::Deleted, None);
                }
                continue;
            }
            if ft.is_dir() {
                match old {
                    Some((Kind::Tree, id)) => self.dir(&path, &at, Some(id))?,
                    Some(_) => {
                        // A file became a directory: the file goes, what is below comes.
                        self.change(at.clone(), ChangeKind::Deleted, None);
                        self.dir(&path, &at, None)?;
                    }
                    None => self.dir(&path, &at, None)?,
                }
                continue;
            }
            let new = if ft.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| io(&path, e))?;
                let bytes = std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec();
                self.count(&at, bytes.len() as u64)?;
                (Kind::Link, objects::write_blob(self.repo, &bytes)?)
            } else if ft.is_file() {
                self.count(&at, meta.len())?;
                let bytes = read_file(&path, meta.len())?;
                let kind = if meta.mode() & 0o111 != 0 {
                    Kind::Executable
                } else {
                    Kind::File
                };
                (kind, objects::write_blob(self.repo, &bytes)?)
            } else {
                self.out
                    .skipped
                    .push((at, "a special file (FIFO, socket or device)".into()));
                continue;
            };
            match old {
                Some(o) if o == new => {}
                Some((Kind::Tree, _)) => {
                    self.change(at.clone(), ChangeKind::Deleted, None);
                    self.change(at, ChangeKind::Added, Some(new));
                }
                Some(_) => self.change(at, ChangeKind::Modified, Some(new)),
                None => self.change(at, ChangeKind::Added, Some(new)),
            }
        }
        // An opaque directory hides what was below it: what it does not hold is gone.
        if opaque {
            for name in below.keys().filter(|n| !seen.contains(*n)) {
                self.change(Self::join(rel, name), ChangeKind::Deleted, None);
            }
        }
        Ok(())
    }

    fn change(&mut self, path: String, kind: ChangeKind, entry: Option<(Kind, ObjectId)>) {
        self.out.changes.push(Change { path, kind, entry });
    }

    fn count(&mut self, at: &str, n: u64) -> Result<()> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.max_bytes {
            return Err(GitError::Refused {
                problem: format!(
                    "what the command wrote holds more than {} MiB (at {at})",
                    self.max_bytes >> 20
                ),
                hint: "raise [limits] checkout_mb, or have the command write less".into(),
            });
        }
        Ok(())
    }
}

/// A regular file's bytes, opened without following a link, at most `len` (its size when seen).
fn read_file(path: &Path, len: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io(path, e))?;
    let mut bytes = Vec::with_capacity(len.min(1 << 20) as usize);
    f.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| io(path, e))?;
    Ok(bytes)
}

fn io(path: &Path, source: std::io::Error) -> GitError {
    GitError::Io {
        context: format!("cannot read {}", path.display()),
        source,
    }
}

#[cfg(test)]
mod tests;
