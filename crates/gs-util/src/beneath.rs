//! Opening files inside a directory whose contents a commit controls (a checkout, a work tree)
//! without being led anywhere: no symlinks, no escape from the directory, regular files only,
//! and never more than a cap read. A FIFO does not block and `/dev/zero` is not read.
//!
//! Opens go through `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`;
//! where the kernel lacks it (ENOSYS), through a walk of `openat(O_NOFOLLOW)`, one component at
//! a time. Absolute paths and `..` are refused before anything is opened.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read (or created), as one line naming the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    #[error("{0} escapes the checkout; not read")]
    Escapes(String),
    #[error("{0} is a symlink (or under one); not read")]
    Symlink(String),
    #[error("{path} is a {kind}; not read")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path} is over the {} cap; not read", size_text(*.cap))]
    TooLarge { path: String, cap: u64 },
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{0} already exists")]
    Exists(String),
    #[error("{path} cannot be opened: {error}")]
    Io { path: String, error: String },
}

/// At most `cap` bytes of the regular file `rel` under `dir`, or why not. `dir` itself is
/// trusted; nothing below it is followed.
pub fn read_beneath(dir: &Path, rel: &str, cap: u64) -> Result<Vec<u8>, Skip> {
    read_with(dir, rel, cap, Resolver::Best)
}

/// Whether `rel` under `dir` is a regular file, reached without a symlink.
pub fn exists_regular_beneath(dir: &Path, rel: &str) -> bool {
    open_with(dir, rel, libc::O_PATH, Resolver::Best)
        .and_then(|fd| kind(&fd, rel))
        .is_ok_and(|k| k.is_file())
}

/// The names in the directory `rel` under `dir` (reached without a symlink), sorted, at most
/// `max` of them. Names only: what each is, is for its own open to find out.
pub fn list_beneath(dir: &Path, rel: &str, max: usize) -> Result<Vec<String>, Skip> {
    let at = open_with(dir, rel, libc::O_PATH, Resolver::Best)?;
    let k = kind(&at, rel)?;
    if k.is_symlink() {
        return Err(Skip::Symlink(rel.to_string()));
    }
    if k.is_file() {
        return Err(Skip::NotRegular {
            path: rel.to_string(),
            kind: "file, not a directory",
        });
    }
    if !k.is_dir() {
        return Err(not_regular(rel, k));
    }
    let fd = openat(
        &at,
        ".",
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        rel,
    )?;
    let raw = fd.as_raw_fd();
    // SAFETY: fdopendir takes over a descriptor of ours (released from the OwnedFd here) and
    // closedir closes it; readdir's entries are read before the next call.
    let names = unsafe {
        let d = libc::fdopendir(raw);
        if d.is_null() {
            return Err(io_skip(rel, std::io::Error::last_os_error()));
        }
        std::mem::forget(fd);
        let mut names = Vec::new();
        loop {
            let e = libc::readdir(d);
            if e.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
            if names.len() > max.saturating_mul(4).max(1024) {
                break;
            }
        }
        libc::closedir(d);
        names
    };
    let mut names: Vec<String> = names
        .into_iter()
        .filter(|n| !n.contains('/') && !n.contains('\u{fffd}'))
        .collect();
    names.sort();
    names.truncate(max);
    Ok(names)
}

/// Create the new file `rel` under `dir` with `mode` (`O_CREAT | O_EXCL | O_NOFOLLOW`), and the
/// directories it needs (0755, less the umask); an existing path, a symlink on the way or an
/// escape is refused.
pub fn create_beneath(dir: &Path, rel: &str, mode: u32) -> Result<File, Skip> {
    let (parent, name) = match rel.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, rel),
    };
    check(rel)?;
    let root = open_root(dir, rel)?;
    let mut cur = root;
    if let Some(parent) = parent {
        for comp in parent.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let c = cstring(comp, rel)?;
            // SAFETY: mkdirat with a valid descriptor and NUL-terminated name.
            let r = unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o755) };
            if r != 0 && errno() != libc::EEXIST {
                return Err(io_skip(rel, std::io::Error::last_os_error()));
            }
            cur = openat(&cur, comp, libc::O_PATH, rel)?;
            let k = kind(&cur, rel)?;
            if k.is_symlink() {
                return Err(Skip::Symlink(rel.to_string()));
            }
            if !k.is_dir() {
                return Err(Skip::Exists(rel.to_string()));
            }
        }
    }
    let c = cstring(name, rel)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: openat with a valid descriptor and NUL-terminated name; the result is owned below.
    let fd = unsafe { libc::openat(cur.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EEXIST) => Skip::Exists(rel.to_string()),
            _ => io_skip(rel, e),
        });
    }
    // SAFETY: a fresh descriptor we own.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Remove `rel` under `dir` — a file, a symlink (itself, never its target), or a directory with
/// everything in it — reaching it without following any symlink on the way. `Ok(false)` when it
/// was not there.
pub fn remove_beneath(dir: &Path, rel: &str) -> Result<bool, Skip> {
    let rel = rel.trim_end_matches('/');
    let (parent, name) = match rel.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, rel),
    };
    check(rel)?;
    let parent_fd = match parent {
        Some(p) => match open_with(dir, p, libc::O_PATH | libc::O_DIRECTORY, Resolver::Best) {
            Ok(fd) => fd,
            Err(Skip::Missing(_)) => return Ok(false),
            Err(e) => return Err(e),
        },
        None => open_root(dir, rel)?,
    };
    let c = cstring(name, rel)?;
    // SAFETY: unlinkat with a valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(parent_fd.as_raw_fd(), c.as_ptr(), 0) } == 0 {
        return Ok(true);
    }
    match errno() {
        libc::ENOENT => Ok(false),
        libc::EISDIR | libc::EPERM => {
            // A directory: std removes its contents with openat/unlinkat, never following a
            // link, and the path through /proc names the parent we opened, not a lookup.
            let path = format!("/proc/self/fd/{}/{name}", parent_fd.as_raw_fd());
            std::fs::remove_dir_all(&path).map_err(|e| io_skip(rel, e))?;
            Ok(true)
        }
        _ => Err(io_skip(rel, std::io::Error::last_os_error())),
    }
}

/// Remove the directory `rel` under `dir` if it is empty (reached without following links).
pub fn remove_empty_dir_beneath(dir: &Path, rel: &str) -> bool {
    let Some((parent_fd, c)) = parent_beneath(dir, rel) else {
        return false;
    };
    // SAFETY: unlinkat with a valid descriptor and NUL-terminated name.
    unsafe { libc::unlinkat(parent_fd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) == 0 }
}

/// The directory holding `rel` under `dir`, reached without following links, and `rel`'s last
/// name in it.
fn parent_beneath(dir: &Path, rel: &str) -> Option<(OwnedFd, std::ffi::CString)> {
    let (parent, name) = match rel.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, rel),
    };
    check(rel).ok()?;
    let parent_fd = match parent {
        Some(p) => open_with(dir, p, libc::O_PATH | libc::O_DIRECTORY, Resolver::Best),
        None => open_root(dir, rel),
    };
    Some((parent_fd.ok()?, cstring(name, rel).ok()?))
}

/// Set the modification time of `rel` under `dir` to now (its access time untouched), reaching
/// it without following any symlink on the way; a symlink at `rel` has its own time set. Whether
/// it was done.
pub fn touch_beneath(dir: &Path, rel: &str) -> bool {
    parent_beneath(dir, rel).is_some_and(|(fd, name)| touch_at(fd.as_raw_fd(), &name))
}

/// Set the modification time of `name` in the directory `dirfd` (or `libc::AT_FDCWD`) to now,
/// its access time untouched and a symlink's own time set, never its target's.
pub fn touch_at(dirfd: std::os::fd::RawFd, name: &std::ffi::CStr) -> bool {
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
    ];
    // SAFETY: utimensat with a NUL-terminated name and two timespecs.
    unsafe {
        libc::utimensat(
            dirfd,
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
    }
}

/// How to resolve: openat2 when the kernel has it, or always by the walk (for tests).
#[derive(Clone, Copy, PartialEq)]
enum Resolver {
    Best,
    #[cfg_attr(not(test), allow(dead_code))]
    Walk,
}

fn read_with(dir: &Path, rel: &str, cap: u64, how: Resolver) -> Result<Vec<u8>, Skip> {
    let fd = open_with(
        dir,
        rel,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        how,
    )?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| io_skip(rel, e))?;
    if !meta.is_file() {
        return Err(not_regular(rel, meta.file_type()));
    }
    if meta.len() > cap {
        return Err(too_large(rel, cap));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_skip(rel, e))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(rel, cap));
    }
    Ok(bytes)
}

/// Refuse what cannot be beneath: empty, absolute, `..`.
fn check(rel: &str) -> Result<(), Skip> {
    if rel.is_empty()
        || rel.starts_with('/')
        || rel.split('/').any(|c| c == "..")
        || rel.contains('\0')
    {
        return Err(Skip::Escapes(rel.to_string()));
    }
    Ok(())
}

fn open_root(dir: &Path, rel: &str) -> Result<OwnedFd, Skip> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map(OwnedFd::from)
        .map_err(|e| io_skip(rel, e))
}

fn open_with(dir: &Path, rel: &str, flags: i32, how: Resolver) -> Result<OwnedFd, Skip> {
    check(rel)?;
    let root = open_root(dir, rel)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if how == Resolver::Best {
        match openat2(&root, rel, flags) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
            Err(e) => return Err(errno_skip(rel, e)),
            Ok(fd) => return Ok(fd),
        }
    }
    // The walk: every directory on the way opened without following, and checked to be one.
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let Some((last, dirs)) = comps.split_last() else {
        return Err(Skip::Escapes(rel.to_string()));
    };
    let mut cur = root;
    for comp in dirs {
        // Without O_DIRECTORY, so a symlink opens as itself and is named as one.
        cur = openat(&cur, comp, libc::O_PATH, rel)?;
        let k = kind(&cur, rel)?;
        if k.is_symlink() {
            return Err(Skip::Symlink(rel.to_string()));
        }
        if !k.is_dir() {
            return Err(Skip::Missing(rel.to_string()));
        }
    }
    openat(&cur, last, flags, rel)
}

fn openat2(dir: &OwnedFd, rel: &str, flags: i32) -> std::io::Result<OwnedFd> {
    let c =
        std::ffi::CString::new(rel).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain data; zeroed then filled.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with a valid descriptor, path and open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &raw const how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn openat(dir: &OwnedFd, comp: &str, flags: i32, rel: &str) -> Result<OwnedFd, Skip> {
    let c = cstring(comp, rel)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: openat with a valid descriptor and NUL-terminated name; the result is owned below.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno_skip(rel, std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The type of what `fd` refers to (fstat works on O_PATH descriptors too).
fn kind(fd: &OwnedFd, rel: &str) -> Result<std::fs::FileType, Skip> {
    let file = File::from(fd.try_clone().map_err(|e| io_skip(rel, e))?);
    file.metadata()
        .map(|m| m.file_type())
        .map_err(|e| io_skip(rel, e))
}

fn cstring(comp: &str, rel: &str) -> Result<std::ffi::CString, Skip> {
    std::ffi::CString::new(std::ffi::OsStr::new(comp).as_bytes())
        .map_err(|_| Skip::Escapes(rel.to_string()))
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn errno_skip(rel: &str, e: std::io::Error) -> Skip {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Skip::Symlink(rel.to_string()),
        Some(libc::EXDEV) => Skip::Escapes(rel.to_string()),
        Some(libc::ENOENT | libc::ENOTDIR) => Skip::Missing(rel.to_string()),
        Some(libc::ENXIO) => Skip::NotRegular {
            path: rel.to_string(),
            kind: "socket",
        },
        _ => io_skip(rel, e),
    }
}

fn io_skip(rel: &str, e: std::io::Error) -> Skip {
    Skip::Io {
        path: rel.to_string(),
        error: e.to_string(),
    }
}

fn not_regular(rel: &str, t: std::fs::FileType) -> Skip {
    let kind = if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "special file"
    };
    Skip::NotRegular {
        path: rel.to_string(),
        kind,
    }
}

fn too_large(rel: &str, cap: u64) -> Skip {
    Skip::TooLarge {
        path: rel.to_string(),
        cap,
    }
}

fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes}-byte")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_listing_is_sorted_bounded_and_never_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        let reports = d.path().join("target/reports");
        std::fs::create_dir_all(&reports).unwrap();
        for n in ["b.xml", "a.xml", "c.txt"] {
            std::fs::write(reports.join(n), "x").unwrap();
        }
        assert_eq!(
            list_beneath(d.path(), "target/reports", 10).unwrap(),
            ["a.xml", "b.xml", "c.txt"]
        );
        assert_eq!(
            list_beneath(d.path(), "target/reports", 1).unwrap(),
            ["a.xml"]
        );
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), d.path().join("linked")).unwrap();
        assert!(matches!(
            list_beneath(d.path(), "linked", 10),
            Err(Skip::Symlink(_))
        ));
        assert!(matches!(
            list_beneath(d.path(), "../x", 10),
            Err(Skip::Escapes(_))
        ));
        assert!(list_beneath(d.path(), "target/reports/a.xml", 10).is_err());
        assert!(matches!(
            list_beneath(d.path(), "missing", 10),
            Err(Skip::Missing(_))
        ));
    }

    fn both(dir: &Path, rel: &str, cap: u64) -> Result<Vec<u8>, Skip> {
        let best = read_with(dir, rel, cap, Resolver::Best);
        let walk = read_with(dir, rel, cap, Resolver::Walk);
        assert_eq!(best, walk, "openat2 and the walk disagree on {rel}");
        best
    }

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sub/deeper")).unwrap();
        std::fs::write(d.path().join("package.json"), "{}").unwrap();
        std::fs::write(d.path().join("sub/deeper/report.xml"), "<x/>").unwrap();
        d
    }

    #[test]
    fn a_normal_file_is_read() {
        let d = tree();
        assert_eq!(both(d.path(), "package.json", MIB).unwrap(), b"{}");
        assert_eq!(
            both(d.path(), "./sub/deeper/report.xml", MIB).unwrap(),
            b"<x/>"
        );
        assert!(exists_regular_beneath(d.path(), "sub/deeper/report.xml"));
        assert!(!exists_regular_beneath(d.path(), "sub"));
        assert!(!exists_regular_beneath(d.path(), "nope"));
        assert_eq!(
            both(d.path(), "nope", MIB),
            Err(Skip::Missing("nope".into()))
        );
    }

    #[test]
    fn a_symlink_to_dev_zero_is_not_read() {
        let d = tree();
        symlink("/dev/zero", d.path().join("zero.json")).unwrap();
        let err = both(d.path(), "zero.json", MIB).unwrap_err();
        assert_eq!(err, Skip::Symlink("zero.json".into()));
        assert_eq!(
            err.to_string(),
            "zero.json is a symlink (or under one); not read"
        );
        assert!(!exists_regular_beneath(d.path(), "zero.json"));
    }

    #[test]
    fn a_symlink_to_a_host_file_or_through_a_linked_dir_is_not_followed() {
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("secret"), "HOST SECRET").unwrap();
        let d = tree();
        symlink(host.path().join("secret"), d.path().join("link")).unwrap();
        symlink(host.path(), d.path().join("dirlink")).unwrap();
        symlink("sub/deeper/report.xml", d.path().join("inside")).unwrap();
        for rel in ["link", "dirlink/secret", "inside"] {
            assert_eq!(
                both(d.path(), rel, MIB),
                Err(Skip::Symlink(rel.into())),
                "{rel}"
            );
            assert!(!exists_regular_beneath(d.path(), rel), "{rel}");
        }
    }

    #[test]
    fn a_fifo_does_not_block() {
        let d = tree();
        let fifo = d.path().join("report.xml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let dir = d.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(both(&dir, "report.xml", MIB));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO blocked");
        let err = got.unwrap_err();
        assert_eq!(err.to_string(), "report.xml is a FIFO; not read");
        assert!(!exists_regular_beneath(d.path(), "report.xml"));
    }

    #[test]
    fn absolute_paths_and_dot_dot_are_refused() {
        let d = tree();
        for rel in ["/etc/passwd", "../x", "sub/../../x", "sub/..", ""] {
            let err = both(d.path(), rel, MIB).unwrap_err();
            assert_eq!(err, Skip::Escapes(rel.into()), "{rel}");
        }
        assert_eq!(
            Skip::Escapes("../x".into()).to_string(),
            "../x escapes the checkout; not read"
        );
    }

    #[test]
    fn an_oversized_file_is_refused() {
        let d = tree();
        std::fs::write(d.path().join("big"), vec![b'x'; 4096]).unwrap();
        let err = both(d.path(), "big", 4095).unwrap_err();
        assert_eq!(
            err,
            Skip::TooLarge {
                path: "big".into(),
                cap: 4095
            }
        );
        assert_eq!(both(d.path(), "big", 4096).unwrap().len(), 4096);
        assert_eq!(
            too_large("report.xml", 8 * MIB).to_string(),
            "report.xml is over the 8 MiB cap; not read"
        );
    }

    #[test]
    fn create_makes_directories_and_refuses_links_and_existing_files() {
        let d = tree();
        let host = tempfile::tempdir().unwrap();
        symlink(host.path(), d.path().join("out")).unwrap();
        let mut f = create_beneath(d.path(), "new/dir/file.bin", 0o644).unwrap();
        std::io::Write::write_all(&mut f, b"data").unwrap();
        assert_eq!(
            std::fs::read(d.path().join("new/dir/file.bin")).unwrap(),
            b"data"
        );
        assert_eq!(
            create_beneath(d.path(), "new/dir/file.bin", 0o644).unwrap_err(),
            Skip::Exists("new/dir/file.bin".into())
        );
        assert!(create_beneath(d.path(), "out/evil", 0o644).is_err());
        assert!(create_beneath(d.path(), "../evil", 0o644).is_err());
        assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 0);
        symlink("/tmp/nowhere-git-sandbox", d.path().join("dangling")).unwrap();
        assert!(create_beneath(d.path(), "dangling", 0o644).is_err());
        assert!(!Path::new("/tmp/nowhere-git-sandbox").exists());
    }
}
