//! A run's writes kept for its branch: the build caches' paths it wrote (`Plan::cache_paths`),
//! merged into the branch's next layer by the helper once the run has ended, from the overlay's
//! upper layer and never through a link.

use super::{errno_text, fsview, Plan, RUN_GID};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Once the run has ended (everything in its PID namespace is gone with its init), merge what it
/// wrote under the cached paths into its branch's layer: the overlay is detached, which shows its
/// upper layer (a tmpfs, still mounted in this namespace), and each path is merged from there,
/// never through a link.
pub(super) fn keep_caches(plan: &Plan, branch: &std::fs::File, uid: u32) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain getters.
    let gid = if unsafe { libc::geteuid() } == 0 {
        RUN_GID
    } else {
        unsafe { libc::getegid() }
    };
    // The overlay is where init mounted it: the one path every run sees, else the host path.
    let mut at = None;
    for dir in [Path::new(fsview::VIEW_ROOT), plan.root.as_path()] {
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap_or_default();
        // SAFETY: detaching the overlay we (our init) mounted, in our own mount namespace.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
            at = Some(dir);
            break;
        }
    }
    let Some(at) = at else {
        return;
    };
    let Some(upper) = std::fs::File::open(at)
        .ok()
        .and_then(|r| super::layers::open_dir_beneath(r.as_raw_fd(), "upper"))
    else {
        return;
    };
    let written: Vec<(&String, std::os::fd::OwnedFd)> = plan
        .cache_paths
        .iter()
        .filter_map(|p| Some((p, super::layers::open_dir_beneath(upper.as_raw_fd(), p)?)))
        .collect();
    // Nothing written under the cached paths: nothing to make on the data dir's disk in a build
    // cache's stage (the supervisor keeps it for its next run). A new base is kept even empty,
    // and a setup step's layer is used even empty: their `added` says the merge ended.
    let stage = plan
        .cache_out
        .as_ref()
        .and_then(|p| p.file_name())
        .is_some_and(|n| {
            n.as_bytes()
                .starts_with(super::layers::STAGE_PREFIX.as_bytes())
        });
    let base = CString::new("base").unwrap_or_default();
    // SAFETY: faccessat with a valid descriptor and NUL-terminated name.
    if written.is_empty()
        && stage
        && unsafe { libc::faccessat(branch.as_raw_fd(), base.as_ptr(), libc::F_OK, 0) } != 0
    {
        return;
    }
    let Some(out) = make_dirs(branch.as_raw_fd(), "layer", uid, gid) else {
        return;
    };
    // The layers the run read, for the files it copied up from them unchanged.
    let below = plan
        .cache_layers
        .iter()
        .filter_map(|l| std::fs::File::open(l).ok().map(std::os::fd::OwnedFd::from))
        .collect();
    let mut merged = super::layers::Merged::over(below);
    if stage {
        merged = merged.refusing_startup_files();
    }
    for (path, from) in written {
        let Some(into) = make_dirs(out.as_raw_fd(), path, uid, gid) else {
            let why = errno_text(&std::io::Error::last_os_error());
            super::layers::append_at(
                branch.as_raw_fd(),
                "failed",
                &format!("{path}: cannot make it: {why}\n"),
            );
            return;
        };
        super::layers::merge(
            from.as_raw_fd(),
            into.as_raw_fd(),
            path,
            (uid, gid),
            &mut merged,
        );
    }
    // A layer missing entries is never kept: without `added` it is not used, and `failed` says
    // which entry did not arrive and why.
    if let Some(why) = merged.failure() {
        super::layers::append_at(branch.as_raw_fd(), "failed", &format!("{why}\n"));
        return;
    }
    // The start-up files the run wrote and the layer does not keep, said beside it.
    if merged.refused_count > 0 {
        super::layers::append_at(
            branch.as_raw_fd(),
            "refused",
            &format!(
                "{} start-up file(s) not kept: {}\n",
                merged.refused_count,
                merged.refused.join(", ")
            ),
        );
    }
    // What was added, for the supervisor's bound on the layer's size.
    super::layers::append_at(branch.as_raw_fd(), "added", &format!("{}\n", merged.bytes));
}

/// A detached, writable clone of the mount at `path` (`open_tree(OPEN_TREE_CLONE)`): it is in
/// no mount table, so making the namespace's mounts read-only leaves it as it is.
pub(super) fn clone_mount(path: &Path) -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: open_tree with a valid path; the result is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { std::fs::File::from_raw_fd(fd as i32) })
}

/// `mkdir -p` of `path` under `dir` (never through a link), owned by `uid`, writable for `gid`.
fn make_dirs(dir: i32, path: &str, uid: u32, gid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: dup of a descriptor we hold, owned below.
    let mut cur = unsafe { OwnedFd::from_raw_fd(libc::dup(dir)) };
    for comp in path.split('/').filter(|c| !c.is_empty()) {
        if comp == ".." || comp == "." {
            return None;
        }
        let c = CString::new(comp).ok()?;
        // SAFETY: mkdirat/openat with a valid descriptor and NUL-terminated name.
        unsafe {
            if libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o775) == 0 {
                libc::fchownat(
                    cur.as_raw_fd(),
                    c.as_ptr(),
                    uid,
                    gid,
                    libc::AT_SYMLINK_NOFOLLOW,
                );
                // Not the umask's: the group of every run may write it.
                libc::fchmodat(cur.as_raw_fd(), c.as_ptr(), 0o775, 0);
            }
            let fd = libc::openat(
                cur.as_raw_fd(),
                c.as_ptr(),
                libc::O_DIRECTORY | libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return None;
            }
            cur = OwnedFd::from_raw_fd(fd);
        }
    }
    Some(cur)
}
