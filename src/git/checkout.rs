//! Checking a tree out into a fresh throw-away directory, in-process: the user's work tree, index,
//! HEAD and worktree list are never touched and no hook fires.

use super::{gix_err, GitError, Result};
use gix::ObjectId;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Where throw-away checkouts go: `$GIT_SANDBOX_TMPDIR`, else a RAM-backed `/dev/shm` (creating
/// files is the whole cost of a checkout, and tmpfs makes it ~10× cheaper), else the system temp dir.
pub fn scratch_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("GIT_SANDBOX_TMPDIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

const PREFIX: &str = "git-sandbox-";

/// Remove checkouts left by processes that no longer exist (a `kill -9` skips every destructor).
/// Runs once per process; a tmpfs leak is memory.
fn sweep_stale(parent: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for dir in stale_checkouts(parent) {
            let _ = std::fs::remove_dir_all(dir);
        }
    });
}

/// The checkouts under `parent` whose process no longer exists (`git-sandbox-<pid>-…`
/// directories): a live process's checkout is never among them.
pub fn stale_checkouts(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !crate::util::pid_alive(pid) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(entry.path());
        }
    }
    out.sort();
    out
}

/// A checked-out tree; the directory is removed when this is dropped.
pub struct Checkout {
    dir: tempfile::TempDir,
    pub files: usize,
}

impl Checkout {
    /// The directory the tree was written to (the temp dir's `tree/`).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("tree")
    }

    /// The temp dir around the tree, for files that must not be part of it (private tmp, home).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// Check `tree` out into a new directory under `parent`.
pub fn checkout_tree(
    repo: &gix::Repository,
    tree: ObjectId,
    parent: &Path,
    interrupt: &AtomicBool,
) -> Result<Checkout> {
    std::fs::create_dir_all(parent).map_err(|source| GitError::Io {
        context: format!("cannot create {}", parent.display()),
        source,
    })?;
    sweep_stale(parent);
    // The pid in the name lets a later process remove what a killed one left behind.
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempdir_in(parent)
        .map_err(|source| GitError::Io {
            context: format!("cannot create a temp dir in {}", parent.display()),
            source,
        })?;
    let dest = dir.path().join("tree");
    std::fs::create_dir(&dest).map_err(|source| GitError::Io {
        context: format!("cannot create {}", dest.display()),
        source,
    })?;
    let mut index = repo.index_from_tree(&tree).map_err(gix_err)?;
    let mut opts = repo
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .map_err(gix_err)?;
    opts.destination_is_initially_empty = true;
    opts.thread_limit = None;
    let objects = repo.objects.clone().into_arc().map_err(gix_err)?;
    let outcome = gix::worktree::state::checkout(
        &mut index,
        &dest,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        interrupt,
        opts,
    )
    .map_err(gix_err)?;
    if let Some(err) = outcome.errors.first() {
        return Err(GitError::Gix(format!(
            "checkout of {} failed: {}",
            err.path, err.error
        )));
    }
    Ok(Checkout {
        dir,
        files: outcome.files_updated,
    })
}
