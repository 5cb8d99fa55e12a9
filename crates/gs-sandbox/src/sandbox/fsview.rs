//! The run's view of the file system inside its mount namespace: the whole host tree read-only,
//! private tmpfs on /tmp, /var/tmp and /dev/shm, empty tmpfs over home and tool directories
//! (secrets hidden) with toolchains bound back read-only, the run's directory bound back
//! writable, a fresh /proc for the new PID namespace; plus loopback and hostname.

use super::errno_text;
use gs_model::{Layer, LayerStatus};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A host directory opened before anything was hidden, to be bound back at `path`.
pub struct Keep {
    pub path: PathBuf,
    pub fd: OwnedFd,
    pub writable: bool,
    /// A kept checkout shared by runs: only ever an overlay's lower layer, never writable.
    pub kept: bool,
    /// Build-cache layers to lay under it, topmost first.
    pub layers: Vec<OwnedFd>,
    /// Layers to lay over it, topmost first (an agent workspace's).
    pub above: Vec<OwnedFd>,
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
        kept: false,
        layers: Vec::new(),
        above: Vec::new(),
    })
}

pub(super) fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

pub(super) use gs_util::mount::{check, mount};

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
pub(super) fn set_readonly(path: &Path, readonly: bool) -> Result<(), String> {
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
    /// The size of the file system the run's directory writes to, when it is bounded.
    pub disk_mb: Option<u64>,
    /// Where the run sees its directory, when not at its host path: [`VIEW_ROOT`].
    pub root: Option<PathBuf>,
    /// Where the run sees its tree, when not in its directory: an image's `WorkingDir`.
    pub tree_at: Option<PathBuf>,
}

/// Where every run sees its directory (`tree/`, `home/`, `tmp/`) when it has a private /tmp: one
/// path for every run, so tools that key their caches by absolute paths (cargo's fingerprints,
/// compilers' dependency files) find a build cache made by an earlier run still valid.
pub const VIEW_ROOT: &str = "/tmp/git-sandbox/run";

/// The size of the file system at `path`, in MiB.
fn fs_size_mb(path: &Path) -> Option<u64> {
    let c = cstr(path);
    // SAFETY: a zeroed statfs filled by the kernel from a valid C string.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut st) == 0)
            .then(|| (st.f_blocks as u64).saturating_mul(st.f_bsize as u64) / (1024 * 1024))
    }
}

/// The run's directory as a private, bounded, writable view: an overlay whose lower layer is
/// the directory as the supervisor wrote it (read through `keep`, opened before anything was
/// hidden) and whose upper layer is a fresh tmpfs of `size_mb` (0: the kernel's default) — so
/// every byte the run writes (its tree, HOME, TMPDIR) counts against the size, whatever backs
/// the checkout, and nothing it writes reaches the host. Returns the size in force.
pub(super) fn bounded_overlay(
    keep: &Keep,
    path: &Path,
    size_mb: u64,
    uid: u32,
) -> Result<Option<u64>, String> {
    if !path.exists() {
        std::fs::create_dir_all(path)
            .map_err(|e| format!("mkdir {}: {}", path.display(), errno_text(&e)))?;
    }
    let size = if size_mb > 0 {
        format!(",size={size_mb}m")
    } else {
        String::new()
    };
    mount(
        "tmpfs",
        path,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        &format!("mode=0755{size}"),
    )?;
    let result = (|| {
        let upper = path.join("upper");
        let work = path.join("work");
        for d in [&upper, &work] {
            std::fs::create_dir(d)
                .map_err(|e| format!("mkdir {}: {}", d.display(), errno_text(&e)))?;
        }
        let c = cstr(&upper);
        // SAFETY: valid C string; the run's uid owns the top of its writable tree.
        unsafe { libc::chown(c.as_ptr(), uid, uid) };
        // Options by descriptor and relative paths: a path with ',' or ':' cannot break them.
        let dir = cstr(path);
        // SAFETY: valid C string.
        if unsafe { libc::chdir(dir.as_ptr()) } < 0 {
            return Err(format!(
                "chdir {}: {}",
                path.display(),
                errno_text(&std::io::Error::last_os_error())
            ));
        }
        // The commit's tree is the topmost lower layer, the caches below it: a cache can add
        // files where the tree has none (target/, node_modules/), never hide or replace one of
        // the tree's, whatever an earlier run left in it.
        // An agent workspace's layers are over the tree: they hold its edits.
        let mut lowers: Vec<String> = keep
            .above
            .iter()
            .map(|l| format!("/proc/self/fd/{}", l.as_raw_fd()))
            .collect();
        lowers.push(format!("/proc/self/fd/{}", keep.fd.as_raw_fd()));
        lowers.extend(
            keep.layers
                .iter()
                .map(|l| format!("/proc/self/fd/{}", l.as_raw_fd())),
        );
        let opts = format!("lowerdir={},upperdir=upper,workdir=work", lowers.join(":"));
        let mounted = mount(
            "overlay",
            path,
            "overlay",
            libc::MS_NOSUID | libc::MS_NODEV,
            &opts,
        );
        // SAFETY: back to the root; the command chdirs to its own directory.
        unsafe { libc::chdir(c"/".as_ptr()) };
        mounted
    })();
    match result {
        Ok(()) => Ok(fs_size_mb(path).filter(|_| size_mb > 0)),
        Err(e) => {
            let c = cstr(path);
            // SAFETY: undo the tmpfs so the fallback binds the directory itself.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            Err(e)
        }
    }
}

/// Build the view. Called in the new mount namespace, before any untrusted code runs. The run's
/// writable file systems (its directory, its private tmps) are bounded by `disk_mb`.
pub fn setup(keeps: &[Keep], hide: &[PathBuf], disk_mb: u64, uid: u32) -> View {
    let mut layers = Vec::new();
    let mut private_tmp = Vec::new();
    let mut disk = None;
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
            disk_mb: None,
            root: None,
            tree_at: None,
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
    let size = if disk_mb == 0 {
        1 << 20
    } else {
        disk_mb.clamp(16, 1 << 20)
    };
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
            "fresh tmpfs (disk_mb each) on /tmp, /var/tmp and /dev/shm",
        )
    } else {
        Layer::new(
            "private_tmp",
            LayerStatus::Unavailable,
            tmp_errors.join("; "),
        )
    });
    // The run's directory goes to the one path every run sees, on the private /tmp.
    let relocated = private_tmp
        .iter()
        .any(|t| t == Path::new("/tmp"))
        .then(|| PathBuf::from(VIEW_ROOT));
    let at = |k: &Keep| match (&relocated, k.writable) {
        (Some(r), true) => r.clone(),
        _ => k.path.clone(),
    };
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
    let mut disk_layer = None;
    for k in order {
        let path = at(k);
        if k.writable {
            match bounded_overlay(k, &path, disk_mb, uid) {
                Ok(size) => {
                    disk = size;
                    disk_layer = Some(Layer::new(
                        "disk_limit",
                        if size.is_some() {
                            LayerStatus::Enforced
                        } else {
                            LayerStatus::Off
                        },
                        if size.is_some() {
                            "the run writes to an overlay over its checkout whose upper layer is a tmpfs of disk_mb; nothing it writes reaches the host"
                        } else {
                            "disk_mb is unlimited in your config: the run writes to an overlay on an unbounded tmpfs"
                        },
                    ));
                    continue;
                }
                Err(e) => {
                    disk_layer = Some(Layer::new(
                        "disk_limit",
                        LayerStatus::Unavailable,
                        format!(
                            "no overlay over the run's directory ({e}): its writes are not bounded"
                        ),
                    ));
                }
            }
        }
        let res = (|| {
            if !path.exists() {
                std::fs::create_dir_all(&path)
                    .map_err(|e| format!("mkdir {}: {}", path.display(), errno_text(&e)))?;
            }
            let src = format!("/proc/self/fd/{}", k.fd.as_raw_fd());
            mount(&src, &path, "", libc::MS_BIND | libc::MS_REC, "")?;
            // A kept checkout without its overlay is bound read-only: it is never the run's
            // to write.
            set_readonly(&path, !k.writable || k.kept)
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
    layers.extend(disk_layer);
    View {
        layers,
        private_tmp,
        disk_mb: disk,
        root: relocated,
        tree_at: None,
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

pub fn set_hostname(name: &str) {
    // SAFETY: valid pointer and length.
    unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
}
