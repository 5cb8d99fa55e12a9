//! The run's view when its root is an image (`[environment] image`): the image's unpacked layers
//! as a read-only overlay, with nothing of the host's file system in it but `/dev` (read-only)
//! and the run's own directory; private tmpfs on `/tmp`, `/var/tmp` and `/dev/shm`; the tree at
//! the image's `WorkingDir`. Assembled under a private tmpfs, then made the root by
//! `pivot_root`, the old root detached.
//!
//! The layers are reached through descriptors the helper opened before anything was mounted
//! (`/proc/self/fd/N` as lower directories: a path the image names is never one the supervisor
//! opens, and many layers do not overflow the mount options' page).

use super::fsview::{bounded_overlay, mount, set_readonly, Keep, View, VIEW_ROOT};
use super::ImageRoot;
use gs_model::{Layer, LayerStatus};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Where the new root is assembled, on a private tmpfs of this mount namespace.
const STAGE: &str = "/tmp";

/// Build the image's view and make it the root. Any failure is the run's end: a run that asked
/// for an image never runs on the host's root instead.
pub fn setup(
    image: &ImageRoot,
    layers: &[OwnedFd],
    keeps: &[Keep],
    disk_mb: u64,
    uid: u32,
) -> Result<View, String> {
    let workdir = workdir_of(image)?;
    mount(
        "none",
        Path::new("/"),
        "",
        libc::MS_REC | libc::MS_PRIVATE,
        "",
    )?;
    let stage = Path::new(STAGE);
    mount(
        "tmpfs",
        stage,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=0700,size=1m",
    )?;
    // The mount points the image may lack, as the topmost (read-only) layer: a directory the
    // image has merges with it; one it has as a file or link is hidden by ours.
    let top = stage.join("top");
    let root = stage.join("root");
    let rel_workdir = workdir.strip_prefix("/").unwrap_or(&workdir).to_path_buf();
    for d in [
        Path::new("proc"),
        Path::new("dev"),
        Path::new("tmp"),
        Path::new("var/tmp"),
        rel_workdir.as_path(),
    ] {
        mkdirs(&top.join(d))?;
    }
    mkdirs(&root)?;
    let mut lowers = vec![top.display().to_string()];
    lowers.extend(
        layers
            .iter()
            .map(|l| format!("/proc/self/fd/{}", l.as_raw_fd())),
    );
    // `userxattr`: the layers mark opaque directories as `user.overlay.opaque` (unpacked in a
    // user namespace, which cannot write `trusted.` attributes).
    mount(
        "overlay",
        &root,
        "overlay",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RDONLY,
        &format!("lowerdir={},userxattr", lowers.join(":")),
    )
    .map_err(|e| format!("the image's layers as the root: {e}"))?;
    let size = if disk_mb == 0 {
        1 << 20
    } else {
        disk_mb.clamp(16, 1 << 20)
    };
    let tmpfs = |at: &Path, mode: &str| {
        mount(
            "tmpfs",
            at,
            "tmpfs",
            libc::MS_NOSUID | libc::MS_NODEV,
            &format!("mode={mode},size={size}m"),
        )
    };
    let inside = |p: &str| root.join(p.trim_start_matches('/'));
    tmpfs(&inside("/tmp"), "1777")?;
    tmpfs(&inside("/var/tmp"), "1777")?;
    // The host's devices as the host root's view has them: read-only, nosuid.
    mount("/dev", inside("/dev"), "", libc::MS_BIND | libc::MS_REC, "")?;
    set_readonly(&inside("/dev"), true)?;
    let mut private_tmp = vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")];
    if inside("/dev/shm").is_dir() {
        tmpfs(&inside("/dev/shm"), "1777")?;
        private_tmp.push(PathBuf::from("/dev/shm"));
    }
    // The run's directory, at the path every run sees it, and its tree at the working directory.
    let run_dir = inside(VIEW_ROOT);
    let keep = keeps
        .iter()
        .find(|k| k.writable)
        .ok_or("the run's directory was not opened")?;
    let disk = bounded_overlay(keep, &run_dir, disk_mb, uid)
        .map_err(|e| format!("the run's directory: {e}"))?;
    mount(
        &run_dir.join("tree").display().to_string(),
        root.join(&rel_workdir),
        "",
        libc::MS_BIND,
        "",
    )?;
    gs_util::mount::pivot_into(&root)?;
    let shown = if image.label.is_empty() {
        "the image".to_string()
    } else {
        image.label.clone()
    };
    let mut out = vec![
        Layer::new(
            "read_only_root",
            LayerStatus::Enforced,
            format!(
                "the root is {shown}, its layers read-only and nosuid; the host's root is not mounted (only /dev, read-only)"
            ),
        ),
        Layer::new(
            "private_tmp",
            LayerStatus::Enforced,
            "fresh tmpfs (disk_mb each) on /tmp, /var/tmp and /dev/shm",
        ),
        Layer::new(
            "secrets_hidden",
            LayerStatus::Enforced,
            "nothing of the host's file system is in the view: no home, no config, no toolchain",
        ),
    ];
    out.push(Layer::new(
        "disk_limit",
        if disk.is_some() {
            LayerStatus::Enforced
        } else {
            LayerStatus::Off
        },
        if disk.is_some() {
            "the run writes to an overlay over its checkout whose upper layer is a tmpfs of disk_mb; nothing it writes reaches the host"
        } else {
            "disk_mb is unlimited in your config: the run writes to an overlay on an unbounded tmpfs"
        },
    ));
    Ok(View {
        layers: out,
        private_tmp,
        disk_mb: disk,
        root: Some(PathBuf::from(VIEW_ROOT)),
        tree_at: Some(workdir),
    })
}

/// The image's `WorkingDir` (else `/src`) as a clean absolute path: no `..`, not `/`, not under
/// a directory the run's view mounts itself.
fn workdir_of(image: &ImageRoot) -> Result<PathBuf, String> {
    let w = if image.workdir.as_os_str().is_empty() {
        Path::new("/src")
    } else {
        image.workdir.as_path()
    };
    let mut clean = PathBuf::from("/");
    for c in w.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => clean.push(n),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!(
                    "the image's WorkingDir {} leaves its root",
                    w.display()
                ))
            }
        }
    }
    let taken = ["/proc", "/dev", "/tmp", "/var/tmp"];
    if clean == Path::new("/") || taken.iter().any(|t| clean.starts_with(t)) {
        return Ok(PathBuf::from("/src"));
    }
    Ok(clean)
}

fn mkdirs(p: &Path) -> Result<(), String> {
    std::fs::create_dir_all(p)
        .map_err(|e| format!("mkdir {}: {}", p.display(), super::errno_text(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_directory_is_clean_absolute_and_not_a_mount_of_the_view() {
        let at = |w: &str| {
            workdir_of(&ImageRoot {
                workdir: PathBuf::from(w),
                ..ImageRoot::default()
            })
        };
        assert_eq!(at("").unwrap(), Path::new("/src"));
        assert_eq!(at("/app/./x").unwrap(), Path::new("/app/x"));
        assert_eq!(at("app").unwrap(), Path::new("/app"));
        assert_eq!(at("/").unwrap(), Path::new("/src"));
        assert_eq!(at("/tmp/x").unwrap(), Path::new("/src"));
        assert!(at("/app/../../etc").is_err());
    }
}
