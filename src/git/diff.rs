//! Change statistics of a commit against its first parent, computed from the trees.

use super::{gix_err, Result};
use crate::model::{Changes, FileChange};
use gix::bstr::ByteSlice;
use gix::object::tree::diff::{Action, Change};
use gix::ObjectId;

/// Changes of a commit against its first parent (against the empty tree for a root commit).
pub fn commit_changes(repo: &gix::Repository, info: &super::CommitInfo) -> Result<Changes> {
    let parent_tree = match info.parents.first() {
        Some(p) => Some(super::commit_info(repo, *p)?.tree),
        None => None,
    };
    tree_changes(repo, parent_tree, info.tree)
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
    let mut cache = repo.diff_resource_cache_for_tree_diff().map_err(gix_err)?;
    // A blob is loaded whole to count its lines: past this size it counts as binary instead,
    // so a commit's large files do not become the supervisor's memory.
    cache.filter.options.large_file_threshold_bytes = super::checkout::STREAM_THRESHOLD;
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
                    Change::Addition { .. } => "added",
                    Change::Deletion { .. } => "deleted",
                    Change::Modification {
                        previous_entry_mode,
                        entry_mode,
                        ..
                    } if previous_entry_mode.kind() != entry_mode.kind() => "type_changed",
                    Change::Modification { .. } => "modified",
                    Change::Rewrite { .. } => "renamed",
                };
                let path = change.location().to_str_lossy().into_owned();
                let counts = match change.diff(&mut cache) {
                    Ok(mut platform) => platform.line_counts().ok().flatten(),
                    Err(_) => None,
                };
                cache.clear_resource_cache_keep_allocation();
                files.push(FileChange {
                    path,
                    status: status.to_string(),
                    insertions: counts.map_or(0, |c| u64::from(c.insertions)),
                    deletions: counts.map_or(0, |c| u64::from(c.removals)),
                    binary: counts.is_none(),
                });
                Ok(Action::Continue(()))
            },
        )
        .map_err(gix_err)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let files_changed = files.len() as u64;
    let insertions = files.iter().map(|f| f.insertions).sum();
    let deletions = files.iter().map(|f| f.deletions).sum();
    files.truncate(crate::model::MAX_CHANGED_FILES);
    Ok(Changes {
        files_changed,
        insertions,
        deletions,
        files_omitted: files_changed - files.len() as u64,
        files,
    })
}
