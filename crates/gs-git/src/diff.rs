//! Change statistics of a commit against its first parent, computed from the trees.

use super::{gix_err, Result};
use gix::bstr::ByteSlice;
use gix::object::tree::diff::{Action, Change};
use gix::ObjectId;
use gs_model::{ChangeStatus, Changes, FileChange};

/// Changes of a commit against its first parent (against the empty tree for a root commit).
pub fn commit_changes(repo: &gix::Repository, info: &super::CommitInfo) -> Result<Changes> {
    let parent_tree = match info.parents.first() {
        Some(p) => Some(super::commit_info(repo, *p)?.tree),
        None => None,
    };
    tree_changes(repo, parent_tree, info.tree)
}

thread_local! {
    /// The blob-diff machinery of the repository last diffed on this thread: making it loads the
    /// index and its attributes, which a run of many commits would otherwise do once per commit.
    /// Kept for [`DIFF_CACHE_FOR`] from when it was made, so a long-lived process (the daemon)
    /// sees a change of `.gitattributes` soon.
    static DIFF_CACHE: std::cell::RefCell<Option<DiffCache>> = const { std::cell::RefCell::new(None) };
}

type DiffCache = (
    std::path::PathBuf,
    std::time::Instant,
    gix::diff::blob::Platform,
);

const DIFF_CACHE_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// The blob-diff machinery for `repo`: this thread's, when it was made for the same repository.
fn diff_cache(repo: &gix::Repository) -> Result<(std::time::Instant, gix::diff::blob::Platform)> {
    if let Some((dir, made, cache)) = DIFF_CACHE.with(|c| c.borrow_mut().take()) {
        if dir == repo.git_dir() && made.elapsed() < DIFF_CACHE_FOR {
            return Ok((made, cache));
        }
    }
    let mut cache = repo.diff_resource_cache_for_tree_diff().map_err(gix_err)?;
    // A blob is loaded whole to count its lines: past this size it counts as binary instead,
    // so a commit's large files do not become the supervisor's memory.
    cache.filter.options.large_file_threshold_bytes = super::checkout::STREAM_THRESHOLD;
    Ok((std::time::Instant::now(), cache))
}

/// Files changed, insertions and deletions between `old` (None: the empty tree) and `new`.
pub fn tree_changes(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: ObjectId,
) -> Result<Changes> {
    // One tree (an empty commit, a revert of a revert): nothing changed, nothing to read.
    if old == Some(new) {
        return Ok(Changes::default());
    }
    let empty = repo.empty_tree();
    let old_tree = match old {
        Some(id) => repo.find_tree(id).map_err(gix_err)?,
        None => empty,
    };
    let new_tree = repo.find_tree(new).map_err(gix_err)?;
    let (made, mut cache) = diff_cache(repo)?;
    let mut files = Vec::new();
    let mut platform = old_tree.changes().map_err(gix_err)?;
    platform.options(|o| {
        o.track_path().track_rewrites(None);
    });
    platform
        .for_each_to_obtain_tree(
            &new_tree,
            |change: Change<'_, '_, '_>| -> gix::Result<Action> {
                if change.entry_mode().is_tree() {
                    return Ok(Action::Continue(()));
                }
                let status = match &change {
                    Change::Addition { .. } => ChangeStatus::Added,
                    Change::Deletion { .. } => ChangeStatus::Deleted,
                    Change::Modification {
                        previous_entry_mode,
                        entry_mode,
                        ..
                    } if previous_entry_mode.kind() != entry_mode.kind() => {
                        ChangeStatus::TypeChanged
                    }
                    Change::Modification { .. } => ChangeStatus::Modified,
                    Change::Rewrite { .. } => ChangeStatus::Renamed,
                };
                let path = change.location().to_str_lossy().into_owned();
                let counts = match change.diff(&mut cache) {
                    Ok(mut platform) => platform.line_counts().ok().flatten(),
                    Err(_) => None,
                };
                cache.clear_resource_cache_keep_allocation();
                files.push(FileChange {
                    path,
                    status,
                    insertions: counts.map_or(0, |c| u64::from(c.insertions)),
                    deletions: counts.map_or(0, |c| u64::from(c.removals)),
                    binary: counts.is_none(),
                });
                Ok(Action::Continue(()))
            },
        )
        .map_err(gix_err)?;
    DIFF_CACHE.with(|c| *c.borrow_mut() = Some((repo.git_dir().to_path_buf(), made, cache)));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let files_changed = files.len() as u64;
    let insertions = files.iter().map(|f| f.insertions).sum();
    let deletions = files.iter().map(|f| f.deletions).sum();
    files.truncate(gs_model::MAX_CHANGED_FILES);
    Ok(Changes {
        files_changed,
        insertions,
        deletions,
        files_omitted: files_changed - files.len() as u64,
        files,
    })
}

/// A path whose file differs between two trees: its blob on each side, `None` where the path is
/// absent or not a regular file (a directory, symlink or submodule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobChange {
    pub path: String,
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
}

/// The regular files that differ between trees `old` and `new`, by path. Only the subtrees that
/// differ are read, so the cost follows the diff, not the tree. A rename is a deletion and an
/// addition; a mode change alone (`chmod +x`) is not listed.
pub fn blob_changes(
    repo: &gix::Repository,
    old: ObjectId,
    new: ObjectId,
) -> Result<Vec<BlobChange>> {
    if old == new {
        return Ok(Vec::new());
    }
    let old_tree = repo.find_tree(old).map_err(gix_err)?;
    let new_tree = repo.find_tree(new).map_err(gix_err)?;
    let mut out = Vec::new();
    let mut platform = old_tree.changes().map_err(gix_err)?;
    platform.options(|o| {
        o.track_path().track_rewrites(None);
    });
    let blob =
        |mode: gix::object::tree::EntryMode, id: gix::Id<'_>| mode.is_blob().then(|| id.detach());
    platform
        .for_each_to_obtain_tree(
            &new_tree,
            |change: Change<'_, '_, '_>| -> gix::Result<Action> {
                if let Change::Rewrite {
                    source_location,
                    source_entry_mode,
                    source_id,
                    ..
                } = &change
                {
                    // Not asked for (no rewrite tracking), but a rename is two paths.
                    out.push(BlobChange {
                        path: source_location.to_str_lossy().into_owned(),
                        old: blob(*source_entry_mode, *source_id),
                        new: None,
                    });
                }
                let (old, new) = match &change {
                    Change::Addition { entry_mode, id, .. } => (None, blob(*entry_mode, *id)),
                    Change::Deletion { entry_mode, id, .. } => (blob(*entry_mode, *id), None),
                    Change::Modification {
                        previous_entry_mode,
                        previous_id,
                        entry_mode,
                        id,
                        ..
                    } => (
                        blob(*previous_entry_mode, *previous_id),
                        blob(*entry_mode, *id),
                    ),
                    Change::Rewrite { entry_mode, id, .. } => (None, blob(*entry_mode, *id)),
                };
                if old != new {
                    out.push(BlobChange {
                        path: change.location().to_str_lossy().into_owned(),
                        old,
                        new,
                    });
                }
                Ok(Action::Continue(()))
            },
        )
        .map_err(gix_err)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
