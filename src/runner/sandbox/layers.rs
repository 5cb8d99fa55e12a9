//! Build caches as overlay layers. A branch's cache is a directory laid out like a run's
//! directory (`tree/`, `home/`) and used as an overlay lower layer above the kept checkout, so a
//! run starts with the `target/`, `node_modules/` or `~/.cache` its branch left. What the run
//! writes lands in its upper layer (a tmpfs bounded by `disk_mb`); once the command has ended,
//! the helper — outside the sandbox's confinement, never following a link — merges the upper's
//! changes under the cached paths into the branch's own layer, with overlayfs' own notation
//! (whiteouts for deletions, opaque directories), so the next run sees what this one left. A
//! branch only ever writes its own layer: production's is written only by production's runs.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What a merge did.
#[derive(Debug, Default)]
pub struct Merged {
    pub files: u64,
    pub bytes: u64,
    /// Files with several names (cargo links each binary it builds under two): the first name
    /// merged, by (device, inode) in the upper layer, so the others become links to it.
    links: std::collections::HashMap<(u64, u64), (OwnedFd, CString)>,
    /// Files are hard-linked from `from`, not copied (folding a cache's generations: their
    /// files are never written in place, so a link is a copy).
    link_files: bool,
}

impl Merged {
    /// A merge that links files instead of copying them.
    pub fn linking() -> Merged {
        Merged {
            link_files: true,
            ..Merged::default()
        }
    }
}

fn cstr(s: &[u8]) -> Option<CString> {
    CString::new(s).ok()
}

fn openat(dir: i32, name: &[u8], flags: i32) -> Option<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: openat with a valid descriptor and NUL-terminated name; the result is owned below.
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
    };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open the directory `path` (components separated by `/`) under `dir`, never through a link.
pub fn open_dir_beneath(dir: i32, path: &str) -> Option<OwnedFd> {
    let mut cur = openat(dir, b".", libc::O_DIRECTORY | libc::O_RDONLY)?;
    for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if comp == ".." {
            return None;
        }
        cur = openat(
            cur.as_raw_fd(),
            comp.as_bytes(),
            libc::O_DIRECTORY | libc::O_RDONLY,
        )?;
    }
    Some(cur)
}

fn lstatat(dir: i32, name: &[u8]) -> Option<libc::stat> {
    let c = cstr(name)?;
    // SAFETY: a zeroed stat filled by the kernel.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0).then_some(st)
    }
}

/// Remove `name` in `dir`, a directory with everything under it included.
fn remove_at(dir: i32, name: &[u8]) {
    let Some(c) = cstr(name) else { return };
    // SAFETY: unlinkat with a valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir, c.as_ptr(), 0) } == 0 {
        return;
    }
    if let Some(sub) = openat(dir, name, libc::O_DIRECTORY | libc::O_RDONLY) {
        for entry in entries(sub.as_raw_fd()) {
            remove_at(sub.as_raw_fd(), &entry);
        }
    }
    // SAFETY: as above.
    unsafe { libc::unlinkat(dir, c.as_ptr(), libc::AT_REMOVEDIR) };
}

/// The names in the directory `dir` (not `.` and `..`), read from the descriptor itself: the
/// helper sees no `/proc` of its own once its init mounted the new PID namespace's.
fn entries(dir: i32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // SAFETY: fdopendir takes a duplicate we own; readdir's entries are read at once, and the
    // stream (with its descriptor) is closed on every path.
    unsafe {
        let fd = libc::openat(
            dir,
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return out;
        }
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            libc::close(fd);
            return out;
        }
        loop {
            let e = libc::readdir(stream);
            if e.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                out.push(name.to_vec());
            }
        }
        libc::closedir(stream);
    }
    out
}

fn is_opaque(fd: i32) -> bool {
    let mut buf = [0u8; 4];
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        // SAFETY: reading an xattr into a local buffer.
        let n = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 1 && buf[0] == b'y' {
            return true;
        }
    }
    false
}

fn set_opaque(fd: i32) {
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        // SAFETY: writing an xattr from a local buffer; which namespace works depends on the
        // mounter's privileges, so both are tried.
        unsafe { libc::fsetxattr(fd, name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    }
}

/// The mode a cached file or directory gets: its own, without set-id bits, and with what its
/// owner may do also allowed to the group every run shares (a run of another slot, with another
/// uid, builds on it).
fn cached_mode(mode: u32) -> u32 {
    let mode = mode & 0o777;
    mode | ((mode & 0o700) >> 3)
}

/// Merge everything under `from` (a directory of the run's upper layer) into `into` (the same
/// path in the branch's layer), as overlayfs would see `into` laid over what is below it.
/// Files are owned by `owner` (uid, gid); set-id bits are dropped; times are kept (build tools
/// compare them).
pub fn merge(from: i32, into: i32, owner: (u32, u32), out: &mut Merged) {
    let (uid, gid) = owner;
    for name in entries(from) {
        let Some(st) = lstatat(from, &name) else {
            continue;
        };
        let kind = st.st_mode & libc::S_IFMT;
        let Some(c) = cstr(&name) else { continue };
        match kind {
            libc::S_IFCHR if st.st_rdev == 0 => {
                // A whiteout: gone in the merged view; say so in the layer too.
                remove_at(into, &name);
                // SAFETY: mknodat with a valid descriptor and NUL-terminated name.
                unsafe { libc::mknodat(into, c.as_ptr(), libc::S_IFCHR, 0) };
            }
            libc::S_IFDIR => {
                let Some(src) = openat(from, &name, libc::O_DIRECTORY | libc::O_RDONLY) else {
                    continue;
                };
                let opaque = is_opaque(src.as_raw_fd());
                let existing = lstatat(into, &name);
                if opaque || existing.is_some_and(|e| e.st_mode & libc::S_IFMT != libc::S_IFDIR) {
                    remove_at(into, &name);
                }
                // SAFETY: mkdirat with a valid descriptor and NUL-terminated name.
                unsafe { libc::mkdirat(into, c.as_ptr(), 0o755) };
                let Some(dst) = openat(into, &name, libc::O_DIRECTORY | libc::O_RDONLY) else {
                    continue;
                };
                if opaque {
                    set_opaque(dst.as_raw_fd());
                }
                merge(src.as_raw_fd(), dst.as_raw_fd(), owner, out);
                // SAFETY: plain calls on a descriptor we own.
                unsafe {
                    libc::fchown(dst.as_raw_fd(), uid, gid);
                    libc::fchmod(dst.as_raw_fd(), cached_mode(st.st_mode));
                }
            }
            libc::S_IFREG => {
                remove_at(into, &name);
                if out.link_files {
                    // SAFETY: linkat between descriptors we were given, NUL-terminated names.
                    if unsafe { libc::linkat(from, c.as_ptr(), into, c.as_ptr(), 0) } == 0 {
                        out.files += 1;
                        out.bytes += st.st_size as u64;
                    }
                    continue;
                }
                let key = (st.st_dev, st.st_ino);
                if st.st_nlink > 1 {
                    if let Some((dir, first)) = out.links.get(&key) {
                        // SAFETY: linkat between descriptors we hold, NUL-terminated names.
                        let linked = unsafe {
                            libc::linkat(dir.as_raw_fd(), first.as_ptr(), into, c.as_ptr(), 0)
                        };
                        if linked == 0 {
                            out.files += 1;
                            continue;
                        }
                    }
                }
                if copy_file(from, into, &name, &st, owner) {
                    out.files += 1;
                    out.bytes += st.st_size as u64;
                    if st.st_nlink > 1 {
                        // SAFETY: dup of a descriptor we were given, owned by the map.
                        let dup = unsafe { libc::fcntl(into, libc::F_DUPFD_CLOEXEC, 0) };
                        if dup >= 0 {
                            // SAFETY: a fresh descriptor we own.
                            let dir = unsafe { OwnedFd::from_raw_fd(dup) };
                            out.links.insert(key, (dir, c.clone()));
                        }
                    }
                }
            }
            libc::S_IFLNK => {
                remove_at(into, &name);
                let mut target = vec![0u8; 4096];
                // SAFETY: reading a link into a local buffer of the size passed.
                let n = unsafe {
                    libc::readlinkat(from, c.as_ptr(), target.as_mut_ptr().cast(), target.len())
                };
                if n <= 0 {
                    continue;
                }
                target.truncate(n as usize);
                let Some(t) = cstr(&target) else { continue };
                // SAFETY: symlinkat and fchownat with valid strings and descriptor.
                unsafe {
                    libc::symlinkat(t.as_ptr(), into, c.as_ptr());
                    libc::fchownat(into, c.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW);
                }
                out.files += 1;
            }
            // FIFOs, sockets and devices are no cache.
            _ => {}
        }
    }
}

fn copy_file(from: i32, into: i32, name: &[u8], st: &libc::stat, owner: (u32, u32)) -> bool {
    let Some(src) = openat(from, name, libc::O_RDONLY | libc::O_NONBLOCK) else {
        return false;
    };
    let Some(c) = cstr(name) else { return false };
    let mode = cached_mode(st.st_mode);
    // SAFETY: openat with a valid descriptor and NUL-terminated name; owned below.
    let fd = unsafe {
        libc::openat(
            into,
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: a fresh descriptor we own.
    let dst = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut src_file = std::fs::File::from(src);
    let mut dst_file = std::fs::File::from(dst);
    if std::io::copy(&mut src_file, &mut dst_file).is_err() {
        // SAFETY: removing the half-written file we created.
        unsafe { libc::unlinkat(into, c.as_ptr(), 0) };
        return false;
    }
    let times = [
        libc::timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec,
        },
        libc::timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec,
        },
    ];
    // SAFETY: plain calls on a descriptor we own.
    unsafe {
        libc::fchown(dst_file.as_raw_fd(), owner.0, owner.1);
        libc::fchmod(dst_file.as_raw_fd(), mode);
        libc::futimens(dst_file.as_raw_fd(), times.as_ptr());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(p).unwrap())
    }

    #[test]
    fn a_merge_copies_files_links_and_deletions_never_following_a_link() {
        let d = tempfile::tempdir().unwrap();
        let (up, layer) = (d.path().join("up"), d.path().join("layer"));
        std::fs::create_dir_all(up.join("target/debug")).unwrap();
        std::fs::create_dir_all(layer.join("target/old")).unwrap();
        std::fs::write(layer.join("target/stale.txt"), "stale").unwrap();
        std::fs::write(layer.join("target/old/x"), "x").unwrap();
        std::fs::write(up.join("target/debug/app"), "binary").unwrap();
        std::fs::set_permissions(
            up.join("target/debug/app"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", up.join("target/link")).unwrap();
        // Two names of one file (cargo's deps/app-hash and app): one copy, two names.
        std::fs::create_dir_all(up.join("target/debug/deps")).unwrap();
        std::fs::write(up.join("target/debug/deps/lib-1"), "a library").unwrap();
        std::fs::hard_link(
            up.join("target/debug/deps/lib-1"),
            up.join("target/debug/lib"),
        )
        .unwrap();
        // A deletion, as overlayfs records it (needs CAP_MKNOD: tests run as root).
        let c = CString::new(up.join("target/stale.txt").as_os_str().as_bytes()).unwrap();
        // SAFETY: mknod with a valid path.
        let whiteout = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) } == 0;
        let mut out = Merged::default();
        merge(
            dir_fd(&up).as_raw_fd(),
            dir_fd(&layer).as_raw_fd(),
            (12345, 54321),
            &mut out,
        );
        assert_eq!(
            std::fs::read_to_string(layer.join("target/debug/app")).unwrap(),
            "binary"
        );
        let meta = std::fs::metadata(layer.join("target/debug/app")).unwrap();
        assert_eq!(
            meta.mode() & 0o7777,
            0o775,
            "set-id dropped, the group may write"
        );
        assert_eq!((meta.uid(), meta.gid()), (12345, 54321));
        let (a, b) = (
            std::fs::metadata(layer.join("target/debug/deps/lib-1")).unwrap(),
            std::fs::metadata(layer.join("target/debug/lib")).unwrap(),
        );
        assert_eq!(
            (a.ino(), a.nlink()),
            (b.ino(), 2),
            "linked, not copied twice"
        );
        assert_eq!(out.bytes, "binary".len() as u64 + "a library".len() as u64);
        assert_eq!(
            std::fs::read_link(layer.join("target/link")).unwrap(),
            std::path::Path::new("/etc/passwd"),
            "a link is copied as a link"
        );
        assert!(
            layer.join("target/old/x").exists(),
            "untouched entries stay"
        );
        if whiteout {
            let st = std::fs::symlink_metadata(layer.join("target/stale.txt")).unwrap();
            assert!(std::os::unix::fs::FileTypeExt::is_char_device(
                &st.file_type()
            ));
        }
        assert!(out.bytes >= 6 && out.files >= 2, "{out:?}");
    }
}
