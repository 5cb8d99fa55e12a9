//! Folding a stack of cache layers into one: what overlayfs shows of the stack, as one layer.
//! Walked newest first, each name is taken from the topmost layer that has it and linked, never
//! copied (a layer's files are never written in place); what a newer layer hides is not visited.
//! Merging the layers oldest first instead linked every generation's files and then removed the
//! ones the next generation replaced: a branch whose builds rewrite the same outputs (cargo's
//! incremental sessions, its test binaries) paid a link and an unlink per file per generation,
//! on the data dir's disk, in the run that published the fold. And a whiteout hides a name
//! only from what is below it: one that nothing below the stack has (a session directory an
//! earlier generation made and a later one removed) is not carried into the fold, where it
//! would otherwise stay for good and be made again by every fold after it.

use super::{cached_mode, cstr, entries, is_opaque, last_error, lstatat, openat, set_opaque};
use super::{Cursor, Merged};
use std::os::fd::{AsRawFd, OwnedFd};

/// Fold `layers` into `into` as overlayfs shows them stacked over `below`.
///
/// `layers` are directories at the same path, topmost first; `into` is an empty directory of
/// the same file system; `below` the layers a run lays under them, at the same path. Whiteouts
/// are kept where they hide a name one of `below` has, opaque directories where they hide
/// anything. Directories are owned by `owner` and get the topmost one's mode; files and links
/// are linked. An entry that could not be made is
/// counted in `out` ([`Merged::failure`]), naming it under `at`.
pub fn fold(
    layers: &[OwnedFd],
    below: &[OwnedFd],
    into: i32,
    at: &str,
    owner: (u32, u32),
    out: &mut Merged,
) {
    let mut cursor = Cursor {
        root: 0,
        at: at.trim_end_matches('/').as_bytes().to_vec(),
        rel: Vec::new(),
        dir: None,
    };
    let fds: Vec<i32> = layers.iter().map(AsRawFd::as_raw_fd).collect();
    let below: Vec<i32> = below.iter().map(AsRawFd::as_raw_fd).collect();
    fold_dir(&fds, &below, into, &mut cursor, owner, out);
}

fn is_whiteout(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == 0
}

fn fold_dir(
    layers: &[i32],
    below: &[i32],
    into: i32,
    cur: &mut Cursor,
    owner: (u32, u32),
    out: &mut Merged,
) {
    let mut seen = std::collections::HashSet::new();
    for (i, &top) in layers.iter().enumerate() {
        let Some(names) = entries(top) else {
            out.fail(&cur.shown(b""), format!("cannot read: {}", last_error()));
            continue;
        };
        for name in names {
            if !seen.insert(name.clone()) {
                // A newer layer has it: that one is what the stack shows.
                continue;
            }
            let Some(c) = cstr(&name) else { continue };
            let Some(st) = lstatat(top, &name) else {
                out.fail(&cur.shown(&name), last_error());
                continue;
            };
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    let at = (layers, i, below);
                    fold_subdir(at, &name, &st, into, cur, owner, out);
                }
                libc::S_IFREG | libc::S_IFLNK => {
                    // SAFETY: linkat between descriptors we were given, NUL-terminated names;
                    // without AT_SYMLINK_FOLLOW a link is linked, not its target.
                    if unsafe { libc::linkat(top, c.as_ptr(), into, c.as_ptr(), 0) } == 0 {
                        out.files += 1;
                        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                            out.bytes += st.st_size as u64;
                        }
                    } else {
                        out.fail(&cur.shown(&name), last_error());
                    }
                }
                libc::S_IFCHR if is_whiteout(&st) => {
                    if !out.keep_whiteouts && !below.iter().any(|&b| lstatat(b, &name).is_some()) {
                        continue;
                    }
                    // SAFETY: mknodat with a valid descriptor and NUL-terminated name.
                    if unsafe { libc::mknodat(into, c.as_ptr(), libc::S_IFCHR, 0) } != 0 {
                        out.fail(&cur.shown(&name), last_error());
                    }
                }
                // FIFOs, sockets and devices are no cache (a merge keeps none).
                _ => {}
            }
        }
    }
}

/// The directory `name`, topmost in `layers[from]`: folded from it and from the same directory
/// in each layer below, down to the first that hides the rest (an opaque directory, a whiteout,
/// a file). Hidden that way, the folded directory is opaque too, so that what is below the stack
/// stays hidden as it was. `at`: the layers of the directory holding it, the topmost one's
/// index, and what is below them.
fn fold_subdir(
    (layers, from, below): (&[i32], usize, &[i32]),
    name: &[u8],
    st: &libc::stat,
    into: i32,
    cur: &mut Cursor,
    owner: (u32, u32),
    out: &mut Merged,
) {
    let mut dirs: Vec<OwnedFd> = Vec::new();
    let mut opaque = false;
    for &layer in &layers[from..] {
        let Some(there) = lstatat(layer, name) else {
            continue;
        };
        if there.st_mode & libc::S_IFMT != libc::S_IFDIR {
            opaque = true;
            break;
        }
        let Some(d) = openat(layer, name, libc::O_DIRECTORY | libc::O_RDONLY) else {
            out.fail(&cur.shown(name), last_error());
            return;
        };
        let stops = is_opaque(d.as_raw_fd());
        dirs.push(d);
        if stops {
            opaque = true;
            break;
        }
    }
    let Some(c) = cstr(name) else { return };
    // SAFETY: mkdirat with a valid descriptor and NUL-terminated name.
    if unsafe { libc::mkdirat(into, c.as_ptr(), 0o755) } != 0 {
        out.fail(&cur.shown(name), last_error());
        return;
    }
    let Some(dst) = openat(into, name, libc::O_DIRECTORY | libc::O_RDONLY) else {
        out.fail(&cur.shown(name), last_error());
        return;
    };
    if opaque {
        set_opaque(dst.as_raw_fd());
    }
    let rel = Cursor::join(&cur.rel, name);
    let parent = std::mem::replace(&mut cur.rel, rel);
    // What shows below the folded directory: nothing when it is opaque, else the same
    // directory in each layer below the stack that has one.
    let under: Vec<OwnedFd> = if opaque {
        Vec::new()
    } else {
        below
            .iter()
            .filter_map(|&b| openat(b, name, libc::O_DIRECTORY | libc::O_RDONLY))
            .collect()
    };
    let fds: Vec<i32> = dirs.iter().map(AsRawFd::as_raw_fd).collect();
    let under: Vec<i32> = under.iter().map(AsRawFd::as_raw_fd).collect();
    fold_dir(&fds, &under, dst.as_raw_fd(), cur, owner, out);
    cur.rel = parent;
    // SAFETY: plain calls on a descriptor we own.
    unsafe {
        libc::fchown(dst.as_raw_fd(), owner.0, owner.1);
        libc::fchmod(dst.as_raw_fd(), cached_mode(st.st_mode));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    fn file(root: &Path, p: &str, body: &str) {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    /// A whiteout at `p`; `false` when this process may not make one.
    fn whiteout(root: &Path, p: &str) -> bool {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        // SAFETY: mknod with a valid path.
        unsafe { libc::mknod(c(&p).as_ptr(), libc::S_IFCHR, 0) == 0 }
    }

    fn opaque_dir(root: &Path, p: &str) {
        let p = root.join(p);
        std::fs::create_dir_all(&p).unwrap();
        set_opaque(std::fs::File::open(&p).unwrap().as_raw_fd());
    }

    /// What a read-only overlay of `lowers` (topmost first) shows: path, and a file's content,
    /// a link's target or `/` for a directory. `None` when this process may not mount one.
    fn view(lowers: &[&Path], at: &Path) -> Option<BTreeMap<String, String>> {
        std::fs::create_dir_all(at).unwrap();
        let dirs: Vec<String> = lowers.iter().map(|l| l.display().to_string()).collect();
        let opts = CString::new(format!("lowerdir={}", dirs.join(":"))).unwrap();
        // SAFETY: mount with valid NUL-terminated strings.
        let ok = unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                c(at).as_ptr(),
                c"overlay".as_ptr(),
                libc::MS_RDONLY,
                opts.as_ptr().cast(),
            )
        } == 0;
        if !ok {
            return None;
        }
        let mut out = BTreeMap::new();
        let mut todo = vec![at.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(at).unwrap().display().to_string();
                let t = e.file_type().unwrap();
                let what = if t.is_symlink() {
                    format!("-> {}", std::fs::read_link(&p).unwrap().display())
                } else if t.is_dir() {
                    todo.push(p.clone());
                    "/".into()
                } else {
                    std::fs::read_to_string(&p).unwrap()
                };
                out.insert(rel, what);
            }
        }
        // SAFETY: unmounting what we mounted.
        unsafe { libc::umount2(c(at).as_ptr(), libc::MNT_DETACH) };
        Some(out)
    }

    #[test]
    fn a_fold_shows_what_the_stack_showed_over_what_is_below_it() {
        let d = tempfile::tempdir().unwrap();
        let [l1, l2, l3, below, folded] =
            ["l1", "l2", "l3", "below", "folded"].map(|n| d.path().join(n));
        for l in [&l1, &l2, &l3, &below, &folded] {
            std::fs::create_dir_all(l).unwrap();
        }
        // Below the stack (production's cache, a setup layer).
        file(&below, "d/a", "below a");
        file(&below, "e/f0", "below e");
        file(&below, "k/kb", "below k");
        file(&below, "z", "below z");
        // The oldest generation.
        file(&l3, "d/a", "l3 a");
        file(&l3, "d/b", "l3 b");
        file(&l3, "x", "l3 x");
        file(&l3, "e/f", "l3 f");
        file(&l3, "g/h", "l3 h");
        file(&l3, "k/k1", "l3 k1");
        file(&l3, "s/old", "l3 session");
        std::os::unix::fs::symlink("d/b", l3.join("sym")).unwrap();
        // The next: a deletion of a name below too, a file become a directory, a directory
        // emptied (opaque), a directory removed, a session removed.
        if !whiteout(&l2, "d/a") {
            eprintln!("cannot make a whiteout here: skipped");
            return;
        }
        file(&l2, "x/y", "l2 y");
        opaque_dir(&l2, "e");
        file(&l2, "e/e2", "l2 e2");
        assert!(whiteout(&l2, "k"));
        assert!(whiteout(&l2, "s/old"));
        file(&l2, "s/new", "l2 session");
        // The newest: a directory become a file, a removed directory made again, a link.
        file(&l1, "d/c", "l1 c");
        file(&l1, "g", "l1 g");
        opaque_dir(&l1, "k");
        file(&l1, "k/k2", "l1 k2");
        std::os::unix::fs::symlink("x/y", l1.join("sym2")).unwrap();

        let layers: Vec<OwnedFd> = [&l1, &l2, &l3]
            .iter()
            .map(|l| OwnedFd::from(std::fs::File::open(l).unwrap()))
            .collect();
        let under = [OwnedFd::from(std::fs::File::open(&below).unwrap())];
        let into = std::fs::File::open(&folded).unwrap();
        let mut out = Merged::default();
        fold(&layers, &under, into.as_raw_fd(), "layer", (0, 0), &mut out);
        assert!(out.failure().is_none(), "{:?}", out.failure());

        let Some(stacked) = view(&[&l1, &l2, &l3, &below], &d.path().join("m1")) else {
            eprintln!("cannot mount an overlay here: skipped");
            return;
        };
        let one = view(&[&folded, &below], &d.path().join("m2")).unwrap();
        assert_eq!(one, stacked);
        assert_eq!(stacked.get("d/a"), None, "{stacked:?}");
        assert_eq!(stacked.get("z").map(String::as_str), Some("below z"));
        // Files are linked, not copied.
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(folded.join("x/y")).unwrap().ino(),
            std::fs::metadata(l2.join("x/y")).unwrap().ino()
        );
        // Only the whiteout that hides a name below is kept: `s/old` hid l3's alone.
        assert!(std::fs::symlink_metadata(folded.join("d/a")).is_ok());
        assert!(std::fs::symlink_metadata(folded.join("s/old")).is_err());
    }
}
