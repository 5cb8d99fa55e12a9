//! A workspace's changes as git sees them: its *view tree* — the base commit's tree with what its
//! layers changed, read by `gs_git::upper` (whiteouts and opaque directories as deletions,
//! symlinks as symlinks, modes kept, nothing followed, sizes bounded), new paths the base tree's
//! `.gitignore` ignores left out unread — kept in its state and brought up to date layer by
//! layer as commands and writes add them. `diff` shows it against the base; `commit` makes it
//! a commit on the experiment's branch (the ref moves last, compare-and-swap), and the
//! workspace goes on from there.

use super::{event, take, Found};
use crate::app::experiment::experiments;
use crate::app::intake::queue;
use crate::app::{AppError, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{EventKind, Trigger};
use serde::Serialize;
use std::path::Path;

/// The view tree the state holds, when it was made from the layers there are now.
pub(super) fn view_tree(at: Repo<'_>, found: &Found) -> Result<ObjectId> {
    match ObjectId::from_hex(found.state.tree.as_bytes()) {
        Ok(t)
            if git::objects::size(at.repo, t).is_some()
                && found.state.layers_top == found.layers_top() =>
        {
            Ok(t)
        }
        // A state without one, of other layers (cut off between a layer and the state), or
        // whose objects git lost: from the layers again.
        _ => rebuild(at, found),
    }
}

/// The view tree read again from every layer, oldest first.
fn rebuild(at: Repo<'_>, found: &Found) -> Result<ObjectId> {
    let (layers, _locks) = gs_runner::caches::workspace_layers(&found.layers());
    let mut tree = git::commit_info(at.repo, found.base())?.tree;
    for layer in layers.iter().rev() {
        tree = apply_layer(at, found, tree, layer)?;
    }
    Ok(tree)
}

/// `tree` with what the layer `layer` (laid out as a run's directory: its `tree/`) changed,
/// new paths the base tree ignores left out; its files bounded by the base commit's
/// `[limits] checkout_mb`, as a checkout is.
pub(super) fn apply_layer(
    at: Repo<'_>,
    found: &Found,
    tree: ObjectId,
    layer: &Path,
) -> Result<ObjectId> {
    // A layer with nothing under the tree (a command that wrote only to its home, or nothing).
    if std::fs::symlink_metadata(layer.join("tree")).is_err() {
        return Ok(tree);
    }
    let repo = at.repo;
    let info = git::commit_info(repo, found.base())?;
    let base_tree = info.tree;
    let config = crate::app::config::commit_config::config_for(
        at.ctx,
        repo,
        &info,
        Some(&found.state.name),
        &gs_config::ConfigFile::default(),
    )?;
    let mut ignores = git::ignore::TreeIgnores::new(repo, base_tree);
    let mut take = |path: &str, is_dir: bool| !ignores.is_ignored(path, is_dir);
    let changes = git::upper::read_with(
        repo,
        tree,
        &layer.join("tree"),
        git::upper::Layout::Upper,
        config.limits.checkout_bytes().min(git::upper::MAX_BYTES),
        &mut take,
    )?;
    Ok(git::upper::apply(repo, tree, &changes.changes)?)
}

/// Lines added and removed at `path` from tree `before` to `after`.
pub(super) fn lines_changed(
    repo: &gs_git::Repository,
    before: ObjectId,
    after: ObjectId,
    path: &str,
) -> (u64, u64) {
    git::diff::tree_changes(repo, Some(before), after)
        .ok()
        .and_then(|c| c.files.into_iter().find(|f| f.path == path))
        .map_or((0, 0), |f| (f.insertions, f.deletions))
}

/// What `workspace diff` shows.
#[derive(Debug, Serialize)]
pub struct Diff {
    pub workspace: String,
    pub base: String,
    /// git's unified diff of the base's tree and the workspace's (binary files named).
    pub patch: String,
    pub files: gs_model::Changes,
}

/// `workspace diff NAME`: the workspace against its base, as `git diff` prints two trees.
pub fn diff(at: Repo<'_>, name: &str) -> Result<Diff> {
    let found = super::find(at, name)?;
    let tree = view_tree(at, &found)?;
    let base_tree = git::commit_info(at.repo, found.base())?.tree;
    let dir = experiments::git_dir_for_cli(at.repo);
    let (b, t) = (base_tree.to_string(), tree.to_string());
    // Two trees: no work tree's attributes, no external diff or text conversion runs.
    let patch = git::cli::git(
        &dir,
        &[
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            &b,
            &t,
        ],
    )?;
    Ok(Diff {
        workspace: name.to_string(),
        base: found.state.base.clone(),
        patch,
        files: git::diff::tree_changes(at.repo, Some(base_tree), tree)?,
    })
}

/// What `workspace commit` made.
#[derive(Debug, Serialize)]
pub struct Committed {
    pub workspace: String,
    pub commit: String,
    pub branch: String,
    pub parent: String,
    pub files: gs_model::Changes,
    /// Whether a run of it is queued (or its result was there already).
    pub queued: bool,
}

/// `workspace commit NAME -m MSG`: its changes as a commit on `experiment/NAME` (parent: the
/// workspace's base), the branch moved from the base to it or not at all, then (`queue_run`)
/// queued for verification like any commit; the workspace goes on from it. Refused with nothing to commit,
/// or when the branch moved past the base since (someone committed there).
pub fn commit(
    at: Repo<'_>,
    name: &str,
    message: &str,
    trigger: Trigger,
    queue_run: bool,
) -> Result<Committed> {
    if message.trim().is_empty() {
        return Err(AppError::usage("the commit message is empty")
            .hint("say what the change does: -m \"fix the parser's off-by-one\""));
    }
    let (mut found, _held) = take(at, name)?;
    let tree = view_tree(at, &found)?;
    let base = found.base();
    let base_tree = git::commit_info(at.repo, base)?.tree;
    if tree == base_tree {
        return Err(AppError::refused(format!(
            "workspace {name:?} has nothing to commit: its files are its base's ({})",
            gs_util::short(&found.state.base)
        ))
        .hint(format!(
            "change something first (`git sandbox workspace write {name} PATH` or `workspace exec`)"
        )));
    }
    let branch = found.branch();
    let tip = experiments::ref_tip(at.repo, &branch)?;
    if tip != Some(base) {
        let now = tip.map_or("nothing (it was deleted)".to_string(), |t| {
            gs_util::short(&t.to_string()).to_string()
        });
        return Err(AppError::refused(format!(
            "{} moved from the workspace's base {} to {now}: committing would drop that work",
            branch.trim_start_matches("refs/heads/"),
            gs_util::short(&found.state.base)
        ))
        .hint(format!(
            "keep the workspace's changes as a patch (`git sandbox workspace diff {name}`), then `git sandbox workspace rm {name}` and start again from the branch"
        )));
    }
    let dir = experiments::git_dir_for_cli(at.repo);
    let (t, p) = (tree.to_string(), base.to_string());
    let out = git::cli::git_with_env(
        &dir,
        &["commit-tree", &t, "-p", &p, "-m", message],
        &git::cli::fallback_identity(&dir),
    )?;
    let commit = ObjectId::from_hex(out.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("git commit-tree", e)))?;
    // The ref moves last, from the base or not at all.
    git::cli::update_refs(
        &dir,
        &format!("update {branch} {commit} {base}\n"),
        &format!("git-sandbox: workspace {name}: commit"),
    )?;
    let files = git::diff::tree_changes(at.repo, Some(base_tree), tree)?;
    found.state.base = commit.to_string();
    found.state.commits += 1;
    found.state.used_at = gs_util::time::now_rfc3339();
    found.save()?;
    event(
        at,
        EventKind::WorkspaceCommitted,
        &found.state.base,
        serde_json::json!({"workspace": name, "commit": commit.to_string(), "parent": p, "files": files.files_changed}),
    );
    let queued = queue_run && queue::request(at, commit, Some(&branch), trigger).is_ok();
    Ok(Committed {
        workspace: name.to_string(),
        commit: commit.to_string(),
        branch: branch.trim_start_matches("refs/heads/").to_string(),
        parent: p,
        files,
        queued,
    })
}
