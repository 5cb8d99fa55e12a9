//! A layer unpacked as hostile input. Every name in the tar is the layer's to choose, so nothing
//! is ever opened by a path: each member is reached from the layer's own directory one component
//! at a time with `openat(O_NOFOLLOW | O_DIRECTORY)`, and a member is refused — with its name —
//! when its name is absolute or holds `..`, when it lies under a symlink (or any non-directory)
//! the layer made, when it is a hard link to something this layer does not hold, or when it
//! would pass the size or member bounds. Device nodes and FIFOs are dropped; setuid and setgid
//! bits are cleared; extended attributes (file capabilities among them) are not kept. Whiteouts
//! (`.wh.NAME`) become overlayfs whiteouts (0/0 character devices) and opaque markers
//! (`.wh..wh..opq`) the `user.overlay.opaque` attribute, which an overlay mounted with
//! `userxattr` reads. The uncompressed stream must hash to the layer's `diff_id`.
//!
//! Ownership is kept when the unpacking process may give it: [`crate::isolate`] runs this as
//! uid 0 of a user namespace whose 65,536 uids are a reserved range of unprivileged host uids.

use sha2::{Digest, Sha256};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What one layer may hold.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes of file content, all members together.
    pub bytes: u64,
    /// Members, of every kind.
    pub members: u64,
}

/// What unpacking a layer did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unpacked {
    pub members: u64,
    pub bytes: u64,
    /// Device nodes and FIFOs left out.
    pub dropped: u64,
    /// Files whose setuid or setgid bit was cleared.
    pub cleared: u64,
    pub whiteouts: u64,
}

/// The uids (and gids) an image's files may have: those of a 65,536-wide user namespace.
pub const IMAGE_IDS: u32 = 65_536;

/// Whiteouts and opaque markers, as the OCI image spec writes them in a layer.
const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// Unpack the layer read from `blob` (a gzip'd or plain tar) into the empty directory open as `dest`,
/// checking its uncompressed content against `diff_id`; `chown`: give members their owners.
pub fn unpack(
    blob: impl Read,
    dest: &OwnedFd,
    diff_id: &str,
    bounds: Bounds,
    chown: bool,
) -> Result<Unpacked, String> {
    let mut blob = std::io::BufReader::with_capacity(1 << 16, blob);
    let head = {
        use std::io::BufRead;
        blob.fill_buf()
            .map_err(|e| format!("reading the layer: {e}"))?
            .to_vec()
    };
    let stream: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(blob))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(
            "the layer is zstd-compressed, which git-sandbox does not unpack; use an image whose layers are gzip'd (docker's default)".into(),
        );
    } else {
        Box::new(blob)
    };
    let hashing = Hashing {
        inner: stream,
        hash: Sha256::new(),
    };
    let root = dest;
    let mut archive = tar::Archive::new(hashing);
    let mut done = Unpacked::default();
    let entries = archive
        .entries()
        .map_err(|e| format!("the layer is not a tar: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("the layer's tar is damaged: {e}"))?;
        done.members += 1;
        if done.members > bounds.members {
            return Err(format!(
                "the layer holds more than {} members; raise [environment] image_mb only if you trust the image",
                bounds.members
            ));
        }
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw).into_owned();
        let refuse = |why: &str| format!("the layer's member {name:?} {why}; the image is refused");
        let parts = components(&raw).map_err(&refuse)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader
                | tar::EntryType::XHeader
                | tar::EntryType::GNULongName
                | tar::EntryType::GNULongLink
        ) {
            continue;
        }
        let Some((last, dirs)) = parts.split_last() else {
            continue; // the layer's root itself
        };
        let parent = walk(root, dirs, true).map_err(|why| refuse(&why))?;
        let last_c = cstring(last).map_err(&refuse)?;
        // Whiteouts and opaque markers.
        if last == OPAQUE {
            set_opaque(&parent).map_err(|e| refuse(&e))?;
            done.whiteouts += 1;
            continue;
        }
        if let Some(hidden) = last.strip_prefix(WHITEOUT) {
            if hidden.starts_with(".wh.") || hidden.is_empty() || hidden == "." || hidden == ".." {
                continue; // AUFS's own metadata (.wh..wh.plnk and the like)
            }
            let hidden_c = cstring(hidden).map_err(&refuse)?;
            replace(&parent, &hidden_c).map_err(|e| refuse(&e))?;
            // SAFETY: a valid directory descriptor and name; 0/0 makes the whiteout.
            let r =
                unsafe { libc::mknodat(parent.as_raw_fd(), hidden_c.as_ptr(), libc::S_IFCHR, 0) };
            if r < 0 {
                return Err(refuse(&format!(
                    "could not be made a whiteout ({}); unpacking needs a kernel that lets a user namespace make whiteouts (Linux 5.8 or later)",
                    std::io::Error::last_os_error()
                )));
            }
            done.whiteouts += 1;
            continue;
        }
        let header = entry.header();
        let raw_mode = header
            .mode()
            .map_err(|e| refuse(&format!("has no mode ({e})")))?;
        let mode = raw_mode & 0o1777;
        if raw_mode & 0o6000 != 0 {
            done.cleared += 1;
        }
        let (uid, gid) = (
            header
                .uid()
                .map_err(|e| refuse(&format!("has no owner ({e})")))?,
            header
                .gid()
                .map_err(|e| refuse(&format!("has no group ({e})")))?,
        );
        if chown && (uid >= IMAGE_IDS as u64 || gid >= IMAGE_IDS as u64) {
            return Err(refuse(&format!(
                "is owned by {uid}:{gid}, past the {IMAGE_IDS} ids an image's user namespace maps"
            )));
        }
        let mtime = header.mtime().unwrap_or(0);
        let owner = chown.then_some((uid as u32, gid as u32));
        match kind {
            tar::EntryType::Directory => {
                make_dir(&parent, &last_c, mode, owner).map_err(|e| refuse(&e))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                replace(&parent, &last_c).map_err(|e| refuse(&e))?;
                // SAFETY: a valid directory descriptor and name; the result is checked.
                let fd = unsafe {
                    libc::openat(
                        parent.as_raw_fd(),
                        last_c.as_ptr(),
                        libc::O_WRONLY
                            | libc::O_CREAT
                            | libc::O_EXCL
                            | libc::O_NOFOLLOW
                            | libc::O_CLOEXEC,
                        0o600,
                    )
                };
                if fd < 0 {
                    return Err(refuse(&format!(
                        "could not be created: {}",
                        std::io::Error::last_os_error()
                    )));
                }
                // SAFETY: a fresh descriptor we own.
                let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
                let left = bounds.bytes.saturating_sub(done.bytes);
                let n = copy_bounded(&mut entry, &mut file, left).map_err(|e| refuse(&e))?;
                if n > left {
                    return Err(format!(
                        "the image is larger than [environment] image_mb ({} MB) allows: its member {name:?} passes it; raise image_mb in your user config if you trust the image",
                        bounds.bytes >> 20
                    ));
                }
                done.bytes += n;
                // SAFETY: our own descriptor.
                unsafe {
                    libc::fchmod(file.as_raw_fd(), mode);
                    if let Some((u, g)) = owner {
                        libc::fchown(file.as_raw_fd(), u, g);
                        // chown clears the setuid bits; they are gone already. The mode again,
                        // for a sticky bit chown may have kept or not.
                        libc::fchmod(file.as_raw_fd(), mode);
                    }
                }
                set_times(&parent, &last_c, mtime);
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| refuse("is a symlink to nothing"))?
                    .into_owned();
                let target =
                    CString::new(target).map_err(|_| refuse("links to a name with a NUL byte"))?;
                replace(&parent, &last_c).map_err(|e| refuse(&e))?;
                // SAFETY: valid strings and descriptor. The link is written, never followed.
                let r = unsafe {
                    libc::symlinkat(target.as_ptr(), parent.as_raw_fd(), last_c.as_ptr())
                };
                if r < 0 {
                    return Err(refuse(&format!(
                        "could not be made a symlink: {}",
                        std::io::Error::last_os_error()
                    )));
                }
                if let Some((u, g)) = owner {
                    // SAFETY: valid descriptor and name; the link itself, not what it names.
                    unsafe {
                        libc::fchownat(
                            parent.as_raw_fd(),
                            last_c.as_ptr(),
                            u,
                            g,
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    };
                }
                set_times(&parent, &last_c, mtime);
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| refuse("is a hard link to nothing"))?
                    .into_owned();
                let shown = String::from_utf8_lossy(&target).into_owned();
                let tparts = components(&target).map_err(|why| {
                    refuse(&format!("is a hard link to {shown:?}, whose name {why}"))
                })?;
                let Some((tlast, tdirs)) = tparts.split_last() else {
                    return Err(refuse("is a hard link to the layer's root"));
                };
                let out = || {
                    refuse(&format!("is a hard link to {shown:?}, which this layer does not hold (a link out of the layer)"))
                };
                let tparent = walk(root, tdirs, false).map_err(|_| out())?;
                let tlast_c = cstring(tlast).map_err(&refuse)?;
                match lstat_at(&tparent, &tlast_c) {
                    Some(st)
                        if st.st_mode & libc::S_IFMT == libc::S_IFREG
                            || st.st_mode & libc::S_IFMT == libc::S_IFLNK => {}
                    _ => return Err(out()),
                }
                replace(&parent, &last_c).map_err(|e| refuse(&e))?;
                // SAFETY: valid descriptors and names; without AT_SYMLINK_FOLLOW nothing is followed.
                let r = unsafe {
                    libc::linkat(
                        tparent.as_raw_fd(),
                        tlast_c.as_ptr(),
                        parent.as_raw_fd(),
                        last_c.as_ptr(),
                        0,
                    )
                };
                if r < 0 {
                    return Err(refuse(&format!(
                        "could not be linked: {}",
                        std::io::Error::last_os_error()
                    )));
                }
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                done.dropped += 1;
            }
            other => {
                return Err(refuse(&format!(
                    "is of a kind git-sandbox does not unpack ({other:?})"
                )));
            }
        }
    }
    // The rest of the stream (the tar's end blocks) counts in its digest too.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())
        .map_err(|e| format!("reading the layer: {e}"))?;
    let got = format!("sha256:{:x}", rest.hash.finalize());
    if got != diff_id {
        return Err(format!(
            "the layer's content is {got}, not the {diff_id} its image's config names; the image is refused"
        ));
    }
    Ok(done)
}

/// A name's components, `.` and empty ones left out; a reason when it is absolute or climbs.
fn components(raw: &[u8]) -> Result<Vec<String>, &'static str> {
    if raw.first() == Some(&b'/') {
        return Err("is an absolute name");
    }
    let text = std::str::from_utf8(raw).map_err(|_| "is not UTF-8")?;
    let mut out = Vec::new();
    for c in text.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("climbs out with '..'"),
            c => out.push(c.to_string()),
        }
    }
    Ok(out)
}

fn cstring(s: &str) -> Result<CString, &'static str> {
    CString::new(s).map_err(|_| "holds a NUL byte")
}

fn open_dir_at(dir: RawFd, name: &CString) -> std::io::Result<OwnedFd> {
    // SAFETY: a valid descriptor and name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_RDONLY,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The directory `dirs` below `root`, reached without following anything; missing ones made
/// (`make`) as the tar implies them.
fn walk(root: &OwnedFd, dirs: &[String], make: bool) -> Result<OwnedFd, String> {
    let mut at = root
        .try_clone()
        .map_err(|e| format!("could not be reached: {e}"))?;
    for d in dirs {
        let c = cstring(d).map_err(str::to_string)?;
        let next = match open_dir_at(at.as_raw_fd(), &c) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && make => {
                // SAFETY: valid descriptor and name.
                unsafe { libc::mkdirat(at.as_raw_fd(), c.as_ptr(), 0o755) };
                open_dir_at(at.as_raw_fd(), &c).map_err(|e| format!("could not be reached: {e}"))?
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                return Err(format!(
                    "lies under {d:?}, which the layer made a symlink or a file, not a directory"
                ));
            }
            Err(e) => return Err(format!("could not be reached: {e}")),
        };
        at = next;
    }
    Ok(at)
}

fn lstat_at(dir: &OwnedFd, name: &CString) -> Option<libc::stat> {
    // SAFETY: zeroed plain data filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, name and buffer; nothing followed.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (r == 0).then_some(st)
}

/// Make room for a member named `name`: what an earlier member left there goes (a directory only
/// when empty: a layer replacing a whole tree writes a whiteout first).
fn replace(dir: &OwnedFd, name: &CString) -> Result<(), String> {
    let Some(st) = lstat_at(dir, name) else {
        return Ok(());
    };
    let flags = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        libc::AT_REMOVEDIR
    } else {
        0
    };
    // SAFETY: valid descriptor and name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } < 0 {
        return Err(format!(
            "replaces what an earlier member made there and could not remove it: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn make_dir(
    parent: &OwnedFd,
    name: &CString,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), String> {
    match lstat_at(parent, name) {
        Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {}
        Some(_) => {
            replace(parent, name)?;
            // SAFETY: valid descriptor and name.
            unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o700) };
        }
        None => {
            // SAFETY: valid descriptor and name.
            unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o700) };
        }
    }
    let dir = open_dir_at(parent.as_raw_fd(), name)
        .map_err(|e| format!("could not be made a directory: {e}"))?;
    // SAFETY: our own descriptor. A directory keeps its owner's write bit for its own members
    // while unpacking; the mode it asks for is set now and stays (members are made through
    // the unpacking process's capabilities).
    unsafe {
        if let Some((u, g)) = owner {
            libc::fchown(dir.as_raw_fd(), u, g);
        }
        libc::fchmod(dir.as_raw_fd(), mode);
    }
    Ok(())
}

fn set_opaque(dir: &OwnedFd) -> Result<(), String> {
    let key = c"user.overlay.opaque";
    // SAFETY: our own descriptor; a one-byte value.
    let r = unsafe { libc::fsetxattr(dir.as_raw_fd(), key.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    if r < 0 {
        return Err(format!(
            "could not mark its directory opaque: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn set_times(dir: &OwnedFd, name: &CString, mtime: u64) {
    let t = libc::timespec {
        tv_sec: mtime.min(i64::MAX as u64) as libc::time_t,
        tv_nsec: 0,
    };
    let times = [t, t];
    // SAFETY: valid descriptor, name and array; the link itself, not what it names.
    unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
}

/// Copy at most `left + 1` bytes (one past the bound tells it was passed).
fn copy_bounded(from: &mut impl Read, to: &mut std::fs::File, left: u64) -> Result<u64, String> {
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = from
            .read(&mut buf)
            .map_err(|e| format!("could not be read: {e}"))?;
        if k == 0 {
            return Ok(n);
        }
        n += k as u64;
        if n > left {
            return Ok(n);
        }
        to.write_all(&buf[..k])
            .map_err(|e| format!("could not be written: {e}"))?;
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_climb_or_start_at_the_root_are_refused() {
        assert_eq!(components(b"./usr//bin/sh").unwrap(), ["usr", "bin", "sh"]);
        assert!(components(b"/etc/passwd").is_err());
        assert!(components(b"usr/../../x").is_err());
        assert!(components(b"..").is_err());
        assert!(components(b"./").unwrap().is_empty());
    }
}
