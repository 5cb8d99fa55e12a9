//! An overlay's upper directory as a layer tar, as a registry would serve it: what a build step
//! wrote, its deletes (overlayfs's 0/0 character devices) as `.wh.NAME` files and its opaque
//! directories (`user.overlay.opaque`) as `.wh..wh..opq`. The directory was written by a hostile
//! command: it is walked by descriptor, nothing is followed, no FIFO or device is opened, and
//! the tar is then unpacked by the same rules as any pulled layer.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

fn err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// The names in the directory `dir` (not `.` or `..`).
fn names(dir: &OwnedFd) -> Result<Vec<CString>, String> {
    // SAFETY: a duplicate the stream owns and closes; entries are copied out before the next
    // call; the stream is closed on every path.
    unsafe {
        let dup = libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return Err(err("dup"));
        }
        libc::lseek(dup, 0, libc::SEEK_SET);
        let stream = libc::fdopendir(dup);
        if stream.is_null() {
            libc::close(dup);
            return Err(err("fdopendir"));
        }
        let mut out = Vec::new();
        loop {
            let e = libc::readdir(stream);
            if e.is_null() {
                break;
            }
            let name = CStr::from_ptr((*e).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                out.push(name.to_owned());
            }
        }
        libc::closedir(stream);
        Ok(out)
    }
}

fn stat_at(dir: &OwnedFd, name: &CStr) -> Result<libc::stat, String> {
    // SAFETY: a zeroed stat filled by the kernel; no link followed.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) < 0
        {
            return Err(err("fstatat"));
        }
        Ok(st)
    }
}

fn open_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> Result<OwnedFd, String> {
    // SAFETY: the result is checked and owned.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        return Err(err("openat"));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn opaque(dir: &OwnedFd) -> bool {
    let mut buf = [0u8; 4];
    // SAFETY: a local buffer of its length.
    let n = unsafe {
        libc::fgetxattr(
            dir.as_raw_fd(),
            c"user.overlay.opaque".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n == 1 && buf[0] == b'y'
}

fn header(kind: tar::EntryType, st: &libc::stat, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(st.st_mode & 0o7777);
    h.set_uid(u64::from(st.st_uid));
    h.set_gid(u64::from(st.st_gid));
    h.set_mtime(st.st_mtime.max(0) as u64);
    h.set_size(size);
    h
}

/// Write the upper directory open as `dir` to `out` as a layer tar.
pub fn tar_of_upper(dir: OwnedFd, out: File) -> Result<(), String> {
    let mut b = tar::Builder::new(out);
    let mut pending: Vec<(OwnedFd, Vec<u8>)> = vec![(dir, Vec::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let path = |name: &[u8]| {
            let mut p = prefix.clone();
            p.extend_from_slice(name);
            p
        };
        let put =
            |b: &mut tar::Builder<File>, h: &mut tar::Header, p: &[u8], data: &mut dyn Read| {
                b.append_data(h, OsStr::from_bytes(p), data)
                    .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(p)))
            };
        if !prefix.is_empty() && opaque(&dir) {
            // SAFETY: a plain C struct, all zero: a marker file with no owner and no time.
            let st: libc::stat = unsafe { std::mem::zeroed() };
            let mut h = header(tar::EntryType::Regular, &st, 0);
            h.set_mode(0o644);
            put(
                &mut b,
                &mut h,
                &path(b".wh..wh..opq"),
                &mut std::io::empty(),
            )?;
        }
        for name in names(&dir)? {
            let st = stat_at(&dir, &name)?;
            let p = path(name.to_bytes());
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    let mut h = header(tar::EntryType::Directory, &st, 0);
                    let mut dp = p.clone();
                    dp.push(b'/');
                    put(&mut b, &mut h, &dp, &mut std::io::empty())?;
                    let sub = open_at(&dir, &name, libc::O_RDONLY | libc::O_DIRECTORY)?;
                    pending.push((sub, dp));
                }
                libc::S_IFREG => {
                    let f = File::from(open_at(&dir, &name, libc::O_RDONLY)?);
                    let size = st.st_size.max(0) as u64;
                    let mut h = header(tar::EntryType::Regular, &st, size);
                    put(&mut b, &mut h, &p, &mut f.take(size))?;
                }
                libc::S_IFLNK => {
                    let mut buf = vec![0u8; 4096];
                    // SAFETY: a local buffer of its length; no link followed.
                    let n = unsafe {
                        libc::readlinkat(
                            dir.as_raw_fd(),
                            name.as_ptr(),
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                        )
                    };
                    if n < 0 {
                        return Err(err("readlinkat"));
                    }
                    buf.truncate(n as usize);
                    let mut h = header(tar::EntryType::Symlink, &st, 0);
                    b.append_link(&mut h, OsStr::from_bytes(&p), OsStr::from_bytes(&buf))
                        .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(&p)))?;
                }
                // overlayfs's whiteout: a delete of what a lower layer has.
                libc::S_IFCHR if st.st_rdev == 0 => {
                    let mut h = header(tar::EntryType::Regular, &st, 0);
                    h.set_mode(0o644);
                    put(
                        &mut b,
                        &mut h,
                        &path(&[b".wh.", name.to_bytes()].concat()),
                        &mut std::io::empty(),
                    )?;
                }
                // FIFOs, sockets, devices: never a layer's.
                _ => {}
            }
        }
    }
    b.into_inner()
        .and_then(|f| f.sync_all())
        .map_err(|e| e.to_string())
}
