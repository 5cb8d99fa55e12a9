//! Checking a tree out into a fresh throw-away directory, in-process: the user's work tree, index,
//! HEAD and worktree list are never touched and no hook fires. The tree is the commit's, so its
//! size is checked against a ceiling before anything is written, and large blobs are streamed to
//! their files by `git cat-file` rather than held in memory.

use super::{gix_err, GitError, Result};
use gix::index::entry::{Flags, Mode};
use gix::ObjectId;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// Blobs larger than this are left out of gix's checkout, which holds each blob in memory, and
/// streamed into their files instead.
pub const STREAM_THRESHOLD: u64 = 16 * 1024 * 1024;

/// Where throw-away checkouts go: `$GIT_SANDBOX_TMPDIR`, else a RAM-backed `/dev/shm` (creating
/// files is the whole cost of a checkout, and tmpfs makes it ~10× cheaper), else the system temp
/// dir.
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
/// Runs once per process and directory (a run makes its directory in the scratch dir, a kept
/// checkout rebuilt first makes one in its slot: each is swept); a tmpfs leak is memory.
fn sweep_stale(parent: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
    if swept.iter().any(|p| p == parent) {
        return;
    }
    swept.push(parent.to_path_buf());
    for dir in stale_checkouts(parent) {
        let _ = std::fs::remove_dir_all(dir);
    }
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
        if !gs_util::pid_alive(pid) && entry.file_type().is_ok_and(|t| t.is_dir()) {
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
    /// What the tree's blobs add up to.
    pub bytes: u64,
}

/// A new, empty run directory under `parent`, named like a checkout so that one left behind by a
/// killed process is swept the same way.
pub fn run_dir(parent: &Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(parent).map_err(|source| GitError::Io {
        context: format!("cannot create {}", parent.display()),
        source,
    })?;
    sweep_stale(parent);
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempdir_in(parent)
        .map_err(|source| GitError::Io {
            context: format!("cannot create a temp dir in {}", parent.display()),
            source,
        })
}

impl Checkout {
    /// The temp dir itself (holding `tree/`), to keep or to hand on.
    pub fn into_dir(self) -> tempfile::TempDir {
        self.dir
    }

    /// The directory the tree was written to (the temp dir's `tree/`).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("tree")
    }

    /// The temp dir around the tree, for files that must not be part of it (private tmp, home).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// Write the entries of `index` into `dest` with gix (filters by the tree's attributes, in
/// parallel): into an empty directory when `fresh`, else over what is there (a kept checkout's
/// update, which also refuses paths that collide with what is there). Errors read "`what`
/// PATH failed: …". Returns how many files were written.
pub(super) fn write_entries(
    repo: &gix::Repository,
    index: &mut gix::index::State,
    dest: &Path,
    fresh: bool,
    interrupt: &AtomicBool,
    what: &str,
) -> Result<usize> {
    use gix::worktree::stack::state::attributes::Source;
    let source = if fresh {
        Source::IdMapping
    } else {
        Source::WorktreeThenIdMapping
    };
    let mut opts = repo.checkout_options(source).map_err(gix_err)?;
    opts.destination_is_initially_empty = fresh;
    opts.overwrite_existing = !fresh;
    opts.thread_limit = None;
    let objects = repo.objects.clone().into_arc().map_err(gix_err)?;
    let outcome = gix::worktree::state::checkout(
        index,
        dest,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        interrupt,
        opts,
    )
    .map_err(gix_err)?;
    if let Some(err) = outcome.errors.first() {
        return Err(GitError::gix(format!(
            "{what} {} failed: {}",
            err.path, err.error
        )));
    }
    if let Some(c) = outcome.collisions.first().filter(|_| !fresh) {
        return Err(GitError::gix(format!(
            "{what} {} failed: it collides with what is there",
            c.path
        )));
    }
    Ok(outcome.files_updated)
}

/// A blob checked out by streaming: where, what, and whether it is executable.
struct Large {
    path: String,
    id: ObjectId,
    size: u64,
    executable: bool,
}

/// Check `tree` out into a new directory under `parent`, if its blobs add up to at most
/// `ceiling` bytes (checked from object headers before anything is written).
pub fn checkout_tree(
    repo: &gix::Repository,
    tree: ObjectId,
    parent: &Path,
    interrupt: &AtomicBool,
    ceiling: u64,
) -> Result<Checkout> {
    let mut index = repo.index_from_tree(&tree).map_err(gix_err)?;
    let (large, bytes) = plan(repo, &mut index, ceiling)?;
    // The pid in the name lets a later process remove what a killed one left behind.
    let dir = run_dir(parent)?;
    let dest = dir.path().join("tree");
    std::fs::create_dir(&dest).map_err(|source| GitError::Io {
        context: format!("cannot create {}", dest.display()),
        source,
    })?;
    let written = write_entries(repo, &mut index, &dest, true, interrupt, "checkout of")?;
    for blob in &large {
        if interrupt.load(Ordering::Relaxed) {
            return Err(GitError::gix("checkout interrupted"));
        }
        stream_blob(repo, blob, &dest)?;
    }
    Ok(Checkout {
        dir,
        files: written,
        bytes,
    })
}

/// Sum the tree's blobs from their headers and refuse it over `ceiling`; mark the blobs over
/// [`STREAM_THRESHOLD`] to be skipped by gix and return them for streaming.
fn plan(
    repo: &gix::Repository,
    index: &mut gix::index::File,
    ceiling: u64,
) -> Result<(Vec<Large>, u64)> {
    let mut total: u64 = 0;
    let mut large = Vec::new();
    for (entry, path) in index.entries_mut_with_paths() {
        if !(entry.mode == Mode::FILE
            || entry.mode == Mode::FILE_EXECUTABLE
            || entry.mode == Mode::SYMLINK)
        {
            continue; // submodules are not checked out
        }
        let size = repo.find_header(entry.id).map_err(gix_err)?.size();
        total = total.saturating_add(size);
        if size <= STREAM_THRESHOLD {
            continue;
        }
        let path = path.to_string();
        if entry.mode == Mode::SYMLINK {
            return Err(GitError::gix(format!(
                "checkout of {path} failed: it is a symlink of {size} bytes, longer than any target can be"
            )));
        }
        entry.flags.insert(Flags::SKIP_WORKTREE);
        large.push(Large {
            path,
            id: entry.id,
            size,
            executable: entry.mode == Mode::FILE_EXECUTABLE,
        });
    }
    if total > ceiling {
        return Err(GitError::TreeTooLarge {
            size: total,
            ceiling,
        });
    }
    Ok((large, total))
}

fn stream_blob(repo: &gix::Repository, blob: &Large, dest: &Path) -> Result<()> {
    stream_blob_to(repo, &blob.path, blob.id, blob.executable, dest)
}

/// Write one blob into a new file `path` of the checkout at `dest`, streamed by `git cat-file`.
///
/// Never through a symlink, never over an existing path; the blob never sits in our memory.
pub fn stream_blob_to(
    repo: &gix::Repository,
    path: &str,
    id: ObjectId,
    executable: bool,
    dest: &Path,
) -> Result<()> {
    let size = repo.find_header(id).map_err(gix_err)?.size();
    let blob = Large {
        path: path.to_string(),
        id,
        size,
        executable,
    };
    let fail =
        |detail: String| GitError::gix(format!("checkout of {} failed: {detail}", blob.path));
    let mode = if blob.executable { 0o755 } else { 0o644 };
    let file = gs_util::beneath::create_beneath(dest, &blob.path, mode)
        .map_err(|skip| fail(skip.to_string()))?;
    // git streams blobs over core.bigFileThreshold; small pack windows keep the pages it maps
    // (and so its resident memory) bounded too.
    let threshold = format!("core.bigFileThreshold={STREAM_THRESHOLD}");
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo.git_dir())
        .args(["-c", &threshold, "-c", "core.packedGitWindowSize=16m"])
        .args(["-c", "core.packedGitLimit=64m"])
        .args(["cat-file", "blob", &blob.id.to_string()])
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| fail(e.to_string()))?)
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| GitError::Io {
            context: "cannot start git (is it installed and on PATH?)".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(fail(format!(
            "`git cat-file blob {}` failed: {}",
            blob.id,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let written = file.metadata().map_err(|e| fail(e.to_string()))?.len();
    if written != blob.size {
        return Err(fail(format!("wrote {written} of {} bytes", blob.size)));
    }
    Ok(())
}
