//! The run's view of the file system inside its mount namespace: the whole host tree read-only,
//! private tmpfs on /tmp, /var/tmp and /dev/shm, empty tmpfs over home and tool directories
//! (secrets hidden) with toolchains bound back read-only, the run's directory bound back
//! writable, a fresh /proc for the new PID namespace; plus loopback and hostname.

use super::errno_text;
use crate::model::{Layer, LayerStatus};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A host directory opened before anything was hidden, to be bound back at `path`.
pub struct Keep {
    pub path: PathBuf,
    pub fd: OwnedFd,
    pub writable: bool,
}

/// Open `path` as an `O_PATH` descriptor (works through directories the run's uid cannot search).
pub fn open_keep(path: &Path, writable: bool) -> Option<Keep> {
    let c = cstr(path);
    // SAFETY: valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Some(Keep {
        path: path.to_path_buf(),
        fd,
        writable,
    })
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

fn check(r: libc::c_int, what: &str) -> Result<(), String> {
    if r < 0 {
        Err(format!(
            "{what}: {}",
            errno_text(&std::io::Error::last_os_error())
        ))
    } else {
        Ok(())
    }
}

fn mount(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), String> {
    let (s, t, f, d) = (
        CString::new(src).unwrap_or_default(),
        cstr(target),
        CString::new(fstype).unwrap_or_default(),
        CString::new(data).unwrap_or_default(),
    );
    // SAFETY: valid C strings.
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

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Set or clear read-only on the mount at `path` and every mount below it (one syscall).
fn set_readonly(path: &Path, readonly: bool) -> Result<(), String> {
    let attr = MountAttr {
        attr_set: if readonly {
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID
        } else {
            0
        },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let c = cstr(path);
    // SAFETY: valid pointers; the size matches the struct the kernel expects (v0, 32 bytes).
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(
        r as libc::c_int,
        &format!("mount_setattr {}", path.display()),
    )
}

/// What the view set up, for the report and for Landlock.
pub struct View {
    pub layers: Vec<Layer>,
    /// Private tmp directories that were mounted (writable for the run).
    pub private_tmp: Vec<PathBuf>,
}

/// Build the view. Called in the new mount namespace, before any untrusted code runs.
pub fn setup(keeps: &[Keep], hide: &[PathBuf], tmp_size_mb: u64) -> View {
    let mut layers = Vec::new();
    let mut private_tmp = Vec::new();
    if let Err(e) = mount(
        "none",
        Path::new("/"),
        "",
        libc::MS_REC | libc::MS_PRIVATE,
        "",
    ) {
        layers.push(Layer::new("read_only_root", LayerStatus::Unavailable, e));
        return View {
            layers,
            private_tmp,
        };
    }
    layers.push(match set_readonly(Path::new("/"), true) {
        Ok(()) => Layer::new(
            "read_only_root",
            LayerStatus::Enforced,
            "every host mount read-only and nosuid; only the run's directory is writable",
        ),
        Err(e) => Layer::new("read_only_root", LayerStatus::Unavailable, e),
    });
    // Private temp dirs.
    let mut tmp_errors = Vec::new();
    let size = tmp_size_mb.clamp(16, 1 << 20);
    for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
        let p = Path::new(dir);
        if !p.is_dir() || p.is_symlink() {
            continue;
        }
        let opts = format!("mode=1777,size={size}m");
        match mount("tmpfs", p, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, &opts) {
            Ok(()) => private_tmp.push(p.to_path_buf()),
            Err(e) => tmp_errors.push(e),
        }
    }
    layers.push(if tmp_errors.is_empty() {
        Layer::new(
            "private_tmp",
            LayerStatus::Enforced,
            format!("fresh tmpfs ({size} MiB) on /tmp, /var/tmp and /dev/shm"),
        )
    } else {
        Layer::new(
            "private_tmp",
            LayerStatus::Unavailable,
            tmp_errors.join("; "),
        )
    });
    // Hidden directories (parents first, so nested ones end up under the parent's tmpfs).
    let mut hidden = Vec::new();
    let mut hide_errors = Vec::new();
    let mut hide: Vec<&PathBuf> = hide.iter().collect();
    hide.sort_by_key(|p| p.components().count());
    for dir in hide {
        if private_tmp.iter().any(|t| dir.starts_with(t)) {
            hidden.push(dir.display().to_string());
            continue; // already gone with the private tmp
        }
        if !dir.is_dir() {
            continue;
        }
        match mount(
            "tmpfs",
            dir,
            "tmpfs",
            libc::MS_NOSUID | libc::MS_NODEV,
            "mode=0755,size=1m",
        ) {
            Ok(()) => hidden.push(dir.display().to_string()),
            Err(e) => hide_errors.push(e),
        }
    }
    // Bind back what must stay visible, shallowest first.
    let mut keep_errors = Vec::new();
    let mut order: Vec<&Keep> = keeps.iter().collect();
    order.sort_by_key(|k| k.path.components().count());
    for k in order {
        let res = (|| {
            if !k.path.exists() {
                std::fs::create_dir_all(&k.path)
                    .map_err(|e| format!("mkdir {}: {}", k.path.display(), errno_text(&e)))?;
            }
            let src = format!("/proc/self/fd/{}", k.fd.as_raw_fd());
            mount(&src, &k.path, "", libc::MS_BIND | libc::MS_REC, "")?;
            set_readonly(&k.path, !k.writable)
        })();
        if let Err(e) = res {
            keep_errors.push(e);
        }
    }
    layers.push(if hide_errors.is_empty() && keep_errors.is_empty() {
        Layer::new(
            "secrets_hidden",
            LayerStatus::Enforced,
            format!(
                "empty over {}; toolchains bound back read-only: {}",
                hidden.join(", "),
                keeps
                    .iter()
                    .filter(|k| !k.writable)
                    .map(|k| k.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    } else {
        let mut all = hide_errors;
        all.extend(keep_errors);
        Layer::new("secrets_hidden", LayerStatus::Unavailable, all.join("; "))
    });
    View {
        layers,
        private_tmp,
    }
}

/// A /proc that shows only the run's own PID namespace.
pub fn fresh_proc() -> Result<(), String> {
    mount(
        "proc",
        Path::new("/proc"),
        "proc",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )
}

/// Bring up `lo` in the new network namespace (the only interface it has).
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: plain socket/ioctl calls on a zeroed ifreq; the fd is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(fd, "socket")?;
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        let r = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr);
        if r < 0 {
            let e = check(r, "SIOCGIFFLAGS");
            libc::close(fd);
            return e;
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let r = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &ifr);
        libc::close(fd);
        check(r, "SIOCSIFFLAGS")
    }
}

pub fn set_hostname(name: &str) {
    // SAFETY: valid pointer and length.
    unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
}
