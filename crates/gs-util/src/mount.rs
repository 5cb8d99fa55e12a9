//! The mount syscalls a sandbox's root is made with (a run's view, an image's root, a
//! Dockerfile `RUN`'s): `mount(2)` with its errors as text, and `pivot_root` into a new root.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `strerror`-style text with the errno name, e.g. "Operation not permitted (EPERM)".
pub fn errno_text(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => " (EPERM)",
        Some(libc::EACCES) => " (EACCES)",
        Some(libc::EINVAL) => " (EINVAL)",
        Some(libc::ENOSYS) => " (ENOSYS)",
        Some(libc::ENOSPC) => " (ENOSPC)",
        Some(libc::EOPNOTSUPP) => " (EOPNOTSUPP)",
        Some(libc::ENOENT) => " (ENOENT)",
        Some(libc::EROFS) => " (EROFS)",
        Some(libc::EBUSY) => " (EBUSY)",
        Some(libc::EMFILE) => " (EMFILE)",
        Some(libc::EMLINK) => " (EMLINK)",
        _ => "",
    };
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    format!("{text}{name}")
}

/// A syscall's result: `what` and the errno's text when it failed.
pub fn check(r: libc::c_int, what: &str) -> Result<(), String> {
    if r < 0 {
        Err(format!(
            "{what}: {}",
            errno_text(&std::io::Error::last_os_error())
        ))
    } else {
        Ok(())
    }
}

fn c_text(s: &[u8]) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{:?} holds a NUL", String::from_utf8_lossy(s)))
}

/// `mount(2)`; an empty `fstype` or `data` is passed as none.
pub fn mount(
    src: &str,
    target: impl AsRef<Path>,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), String> {
    let target = target.as_ref();
    let (s, t, f, d) = (
        c_text(src.as_bytes())?,
        c_text(target.as_os_str().as_bytes())?,
        c_text(fstype.as_bytes())?,
        c_text(data.as_bytes())?,
    );
    // SAFETY: valid C strings that outlive the call.
    let r = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            if fstype.is_empty() {
                std::ptr::null()
            } else {
                f.as_ptr()
            },
            flags,
            if data.is_empty() {
                std::ptr::null()
            } else {
                d.as_ptr().cast()
            },
        )
    };
    check(r, &format!("mount {}", target.display()))
}

/// Make `root` the root of this mount namespace, detach the old one, and go to `/`.
pub fn pivot_into(root: &Path) -> Result<(), String> {
    let c = c_text(root.as_os_str().as_bytes())?;
    // SAFETY: valid C strings; the classic `pivot_root(".", ".")`: the old root is stacked
    // under the new one at "/" and detached at once.
    unsafe {
        check(libc::chdir(c.as_ptr()), "chdir to the new root")?;
        check(
            libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) as libc::c_int,
            "pivot_root",
        )?;
        check(
            libc::umount2(c".".as_ptr(), libc::MNT_DETACH),
            "detaching the old root",
        )?;
        check(libc::chdir(c"/".as_ptr()), "chdir /")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_call_and_the_errno() {
        let e = mount("none", "/nonexistent/gs-util-test", "tmpfs", 0, "").unwrap_err();
        assert!(e.starts_with("mount /nonexistent/gs-util-test: "), "{e}");
        assert!(e.contains("(E"), "{e}");
        assert!(mount("a\0b", "/x", "", 0, "")
            .unwrap_err()
            .contains("holds a NUL"));
    }
}
