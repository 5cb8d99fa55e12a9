//! Files a run copied up unchanged from the cache layers below it, linked back instead of copied
//! again. rustc starts each incremental session by hard-linking the previous session's files
//! into a new directory; on the overlay each link copies the lower file up into the run's
//! upper layer, and the merge then wrote all of them to the cache's disk once more (150 of the
//! 174 files a one-line change of a small crate leaves), a file created each. Such a file is
//! byte for byte a file of a layer below, which is never written in place: the merge links
//! that one into the new generation, as a fold does.
//!
//! A file is looked for under its own path and, by name, in the directories beside its own (the
//! previous session's) in each layer below; it is taken only when it is the same: size,
//! modification time (a copy-up keeps it) and mode as the cache keeps it, and every byte; else
//! it is copied as any other.

use super::{cached_mode, cstr, entries, lstatat, open_beneath, openat};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};

/// The layers below a run, and where a file copied up from one of them may be found there.
#[derive(Default)]
pub(super) struct Below {
    layers: Vec<OwnedFd>,
    /// The directories looked in for the files of the last directory merged: its own path, and
    /// its siblings (rustc's previous session), in each layer.
    near: Option<(Vec<u8>, Vec<OwnedFd>)>,
}

impl std::fmt::Debug for Below {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Below({} layers)", self.layers.len())
    }
}

/// At most this many directories are looked in for one directory's files: a lookup costs
/// lstats, never a walk of the layers.
const NEAR: usize = 64;

/// Whether overlayfs copied the upper file `fd` up from a lower one (it records the origin).
fn copied_up(fd: i32) -> bool {
    [c"trusted.overlay.origin", c"user.overlay.origin"]
        .iter()
        // SAFETY: asking an xattr's size, no buffer.
        .any(|n| unsafe { libc::fgetxattr(fd, n.as_ptr(), std::ptr::null_mut(), 0) } >= 0)
}

fn key(st: &libc::stat) -> (i64, i64, i64) {
    (st.st_size, st.st_mtime, st.st_mtime_nsec)
}

impl Below {
    pub(super) fn new(layers: Vec<OwnedFd>) -> Below {
        Below { layers, near: None }
    }

    /// The directories of the layers where a file of `dir` (a path in the layers) copied up
    /// may come from: `dir` itself, and the other directories beside it.
    fn near(&mut self, dir: &[u8]) -> &[OwnedFd] {
        if self.near.as_ref().is_none_or(|(d, _)| d != dir) {
            let (parent, leaf) = match dir.iter().rposition(|&b| b == b'/') {
                Some(i) => (&dir[..i], &dir[i + 1..]),
                None => (&dir[..0], dir),
            };
            let mut found = Vec::new();
            for layer in &self.layers {
                let Some(p) = open_beneath(layer.as_raw_fd(), parent) else {
                    continue;
                };
                if let Some(d) = openat(p.as_raw_fd(), leaf, libc::O_DIRECTORY | libc::O_RDONLY) {
                    found.push(d);
                }
                for name in entries(p.as_raw_fd()).unwrap_or_default() {
                    if found.len() >= NEAR {
                        break;
                    }
                    if name == leaf {
                        continue;
                    }
                    if let Some(d) =
                        openat(p.as_raw_fd(), &name, libc::O_DIRECTORY | libc::O_RDONLY)
                    {
                        found.push(d);
                    }
                }
            }
            self.near = Some((dir.to_vec(), found));
        }
        self.near.as_ref().map_or(&[], |(_, f)| f.as_slice())
    }

    /// Link `name` in `into` to the file below that is the same as `name` in `from` (the
    /// upper layer's directory at `dir`, a path in the layers), if `from`'s was copied up and
    /// such a file is there.
    pub(super) fn link(
        &mut self,
        (from, dir): (i32, &[u8]),
        name: &[u8],
        st: &libc::stat,
        into: i32,
    ) -> bool {
        if self.layers.is_empty() || st.st_size <= 0 {
            return false;
        }
        let Some(upper) = openat(from, name, libc::O_RDONLY | libc::O_NONBLOCK) else {
            return false;
        };
        if !copied_up(upper.as_raw_fd()) {
            return false;
        }
        let mode = cached_mode(st.st_mode);
        let Some(c) = cstr(name) else { return false };
        for d in self.near(dir) {
            let Some(lower) = lstatat(d.as_raw_fd(), name) else {
                continue;
            };
            if lower.st_mode & libc::S_IFMT != libc::S_IFREG
                || lower.st_mode & 0o7777 != mode
                || key(&lower) != key(st)
            {
                continue;
            }
            let Some(fd) = openat(d.as_raw_fd(), name, libc::O_RDONLY | libc::O_NONBLOCK) else {
                continue;
            };
            if !same_bytes(&upper, &fd) {
                continue;
            }
            // SAFETY: linkat between descriptors we hold, NUL-terminated names; a link is not
            // followed.
            if unsafe { libc::linkat(d.as_raw_fd(), c.as_ptr(), into, c.as_ptr(), 0) } == 0 {
                return true;
            }
        }
        false
    }
}

/// Whether two open files hold the same bytes (their sizes are known to be equal).
fn same_bytes(a: &OwnedFd, b: &OwnedFd) -> bool {
    let (Ok(a), Ok(b)) = (a.try_clone(), b.try_clone()) else {
        return false;
    };
    let (mut a, mut b) = (std::fs::File::from(a), std::fs::File::from(b));
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = match a.read(&mut x) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return b.read(&mut y[..1]).is_ok_and(|m| m == 0);
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{merge, Merged};
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::Path;

    fn fd(p: &Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(p).unwrap())
    }

    /// `upper/<to>` as overlayfs leaves a file it copied up from `lower/<from>` (a link made
    /// to it, then the old name removed): the same bytes, mode and times, and the origin
    /// recorded. `false` when this process may not set it.
    fn copy_up(lower: &Path, upper: &Path, from: &str, to: &str) -> bool {
        let (l, u) = (lower.join(from), upper.join(to));
        std::fs::create_dir_all(u.parent().unwrap()).unwrap();
        std::fs::copy(&l, &u).unwrap();
        let m = std::fs::metadata(&l).unwrap();
        let f = std::fs::File::options().write(true).open(&u).unwrap();
        f.set_modified(m.modified().unwrap()).unwrap();
        f.set_permissions(m.permissions()).unwrap();
        // SAFETY: setting an xattr from a local buffer on a descriptor we own.
        unsafe {
            libc::fsetxattr(
                f.as_raw_fd(),
                c"trusted.overlay.origin".as_ptr(),
                b"\0\xfb".as_ptr().cast(),
                2,
                0,
            ) == 0
        }
    }

    #[test]
    fn a_file_copied_up_unchanged_is_linked_to_the_layer_below_and_a_changed_one_copied() {
        let d = tempfile::tempdir().unwrap();
        let (lower, upper, layer) = (
            d.path().join("lower"),
            d.path().join("up"),
            d.path().join("layer"),
        );
        for (name, body) in [("s1/obj.o", "object"), ("s1/graph.bin", "graph")] {
            let p = lower.join("tree/target").join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o664)).unwrap();
        }
        std::fs::create_dir_all(&layer).unwrap();
        // rustc's next session: the previous one's file linked into a new directory.
        if !copy_up(&lower.join("tree/target"), &upper, "s1/obj.o", "s2/obj.o") {
            eprintln!("cannot set a trusted xattr here: skipped");
            return;
        }
        // Copied up, then rewritten in place (same size): its own bytes are kept.
        assert!(copy_up(
            &lower.join("tree/target"),
            &upper,
            "s1/graph.bin",
            "s1/graph.bin"
        ));
        let g = upper.join("s1/graph.bin");
        let when = std::fs::metadata(&g).unwrap().modified().unwrap();
        std::fs::write(&g, "GRAPH").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&g)
            .unwrap()
            .set_modified(when)
            .unwrap();
        // Written by the run: copied.
        std::fs::write(upper.join("s1/new.rlib"), "new").unwrap();

        let mut out = Merged::over(vec![fd(&lower)]);
        std::fs::create_dir_all(layer.join("tree/target")).unwrap();
        merge(
            fd(&upper).as_raw_fd(),
            fd(&layer.join("tree/target")).as_raw_fd(),
            "tree/target",
            (0, 0),
            &mut out,
        );
        assert!(out.failure().is_none(), "{:?}", out.failure());
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let (kept, below) = (layer.join("tree/target/s1"), lower.join("tree/target/s1"));
        assert_eq!(
            ino(&layer.join("tree/target/s2/obj.o")),
            ino(&below.join("obj.o")),
            "linked"
        );
        assert_ne!(ino(&kept.join("graph.bin")), ino(&below.join("graph.bin")));
        assert_eq!(
            std::fs::read_to_string(kept.join("graph.bin")).unwrap(),
            "GRAPH"
        );
        assert_eq!(
            std::fs::read_to_string(kept.join("new.rlib")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_to_string(below.join("obj.o")).unwrap(),
            "object"
        );
        assert_eq!(out.files, 3);
    }
}
