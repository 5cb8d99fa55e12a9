//! Looking a path up in an image's merged root — its unpacked layers, topmost first, as overlayfs
//! would show them (whiteouts, opaque directories, symlinks resolved inside the image) — without
//! following anything on the host: each layer is walked with `openat(O_NOFOLLOW)`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a path is in the merged root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File { executable: bool },
    Dir,
    Other,
}

enum Found {
    Entry(libc::stat, Option<Vec<u8>>),
    /// Hidden from the layers below (a whiteout, or a non-directory on the way).
    Hidden,
    Absent,
}

fn open_at(dir: i32, name: &str, flags: i32) -> Option<OwnedFd> {
    let c = CString::new(name).ok()?;
    // SAFETY: a valid descriptor and name; the result is checked.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn lstat(dir: i32, name: &str) -> Option<libc::stat> {
    let c = CString::new(name).ok()?;
    // SAFETY: zeroed plain data filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, name and buffer.
    (unsafe { libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0)
        .then_some(st)
}

fn opaque(dir: &OwnedFd) -> bool {
    let mut v = [0u8; 2];
    // SAFETY: our own descriptor and buffer.
    let n = unsafe {
        libc::fgetxattr(
            dir.as_raw_fd(),
            c"user.overlay.opaque".as_ptr(),
            v.as_mut_ptr().cast(),
            2,
        )
    };
    n == 1 && v[0] == b'y'
}

fn is_whiteout(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == 0
}

/// `parts` in one layer; `stop`: a directory on the way was opaque (lower layers are hidden).
fn in_layer(layer: &Path, parts: &[String], stop: &mut bool) -> Found {
    let c = match CString::new(layer.as_os_str().as_bytes()) {
        Ok(c) => c,
        Err(_) => return Found::Absent,
    };
    // SAFETY: a valid string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Found::Absent;
    }
    // SAFETY: a fresh descriptor we own.
    let mut at = unsafe { OwnedFd::from_raw_fd(fd) };
    let Some((last, dirs)) = parts.split_last() else {
        return Found::Absent;
    };
    for d in dirs {
        match lstat(at.as_raw_fd(), d) {
            None => return Found::Absent,
            Some(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => return Found::Hidden,
            Some(_) => {}
        }
        let Some(next) = open_at(at.as_raw_fd(), d, libc::O_DIRECTORY | libc::O_RDONLY) else {
            return Found::Absent;
        };
        if opaque(&next) {
            *stop = true;
        }
        at = next;
    }
    match lstat(at.as_raw_fd(), last) {
        None => Found::Absent,
        Some(st) if is_whiteout(&st) => Found::Hidden,
        Some(st) => {
            let link = (st.st_mode & libc::S_IFMT == libc::S_IFLNK).then(|| {
                let mut buf = vec![0u8; 4096];
                let c = CString::new(last.as_str()).unwrap_or_default();
                // SAFETY: valid descriptor, name and buffer.
                let n = unsafe {
                    libc::readlinkat(
                        at.as_raw_fd(),
                        c.as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                buf.truncate(n.max(0) as usize);
                buf
            });
            Found::Entry(st, link)
        }
    }
}

/// The entry at `parts` in the merged layers (topmost first), and a symlink's target.
fn merged(layers: &[PathBuf], parts: &[String]) -> Option<(libc::stat, Option<Vec<u8>>)> {
    for layer in layers {
        let mut stop = false;
        match in_layer(layer, parts, &mut stop) {
            Found::Entry(st, link) => return Some((st, link)),
            Found::Hidden => return None,
            Found::Absent if stop => return None,
            Found::Absent => {}
        }
    }
    None
}

/// How a walk through the merged layers ended.
enum Walked {
    /// Every component there: the resolved path and what the last one is.
    Found(Vec<String>, libc::stat),
    /// A component absent: the resolved path so far with the rest as named.
    Absent(Vec<String>),
}

/// Walk `path` (absolute, inside the image) through the merged layers, the image's symlinks
/// followed inside the image (40 at most); `None` when a non-directory is on the way or the
/// links loop.
fn walk(layers: &[PathBuf], path: &str) -> Option<Walked> {
    let mut todo: Vec<String> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect();
    todo.reverse();
    let mut done: Vec<String> = Vec::new();
    let mut last: Option<libc::stat> = None;
    let mut hops = 0;
    while let Some(c) = todo.pop() {
        if c == ".." {
            done.pop();
            continue;
        }
        done.push(c);
        let Some((st, link)) = merged(layers, &done) else {
            done.extend(todo.into_iter().rev());
            return Some(Walked::Absent(done));
        };
        if let Some(target) = link {
            hops += 1;
            if hops > 40 {
                return None;
            }
            done.pop();
            let t = String::from_utf8_lossy(&target).into_owned();
            if t.starts_with('/') {
                done.clear();
            }
            for p in t.split('/').filter(|c| !c.is_empty() && *c != ".").rev() {
                todo.push(p.to_string());
            }
            continue;
        }
        if !todo.is_empty() && st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return None;
        }
        last = Some(st);
    }
    Some(match last {
        Some(st) => Walked::Found(done, st),
        // The root itself.
        None => Walked::Absent(done),
    })
}

/// Where a directory `path` (absolute, inside the image) is once the image's symlinks on the way
/// are followed inside the image (40 at most), as a path relative to its root; the components
/// that do not exist yet are kept as they are. `None` when a file is in the way or the links
/// loop: nothing can be made there. A layer that writes to the result writes where the image
/// means, not over its links (`/bin` in a merged-`/usr` Debian is `usr/bin`).
pub fn resolve_dir(layers: &[PathBuf], path: &str) -> Option<String> {
    match walk(layers, path)? {
        Walked::Found(_, st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => None,
        Walked::Found(done, _) | Walked::Absent(done) => Some(done.join("/")),
    }
}

/// What `path` (absolute, inside the image) is, symlinks resolved inside the image (40 at most).
pub fn lookup(layers: &[PathBuf], path: &str) -> Option<Kind> {
    match walk(layers, path)? {
        Walked::Found(_, st) => Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File {
                executable: st.st_mode & 0o111 != 0,
            },
            libc::S_IFDIR => Kind::Dir,
            _ => Kind::Other,
        }),
        // The root is a directory; anything else absent is nothing.
        Walked::Absent(done) if done.is_empty() => Some(Kind::Dir),
        Walked::Absent(_) => None,
    }
}
