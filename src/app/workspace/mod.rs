//! Agent workspaces: a live sandbox on an experiment's branch that an agent works in. A
//! workspace is its experiment (`experiment/NAME`, started as `experiment start` starts one), a
//! base commit, and the layers its commands and writes left over that commit's tree — kept as
//! generations in the data dir, as a branch's build cache keeps its, but laid *over* the tree
//! (see `gs_runner::caches::workspace_layers`). A command runs in a kept checkout of the base
//! with those layers over it and a fresh upper layer on top; when it ends, its upper becomes the
//! next layer (a killed command's is dropped). `commit` reads the layers against the base tree
//! (`gs_git::upper`), makes a commit on the branch, and the workspace goes on from it.
//!
//! Layout: `$GIT_SANDBOX_HOME/workspaces/<repository id>/<name>/` holds `workspace.json` (the
//! state below, replaced whole), `lock` (held by the one command at a time) and `layers/`.
//! Nothing of it is in the repository but the branch and its commits: the user's checkout,
//! index and HEAD are never touched.

use crate::app::experiment::experiments;
use crate::app::{AppError, Context, Repo, Result};
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_util::time;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod commit;
mod files;
mod run;

pub use commit::{commit, diff, Committed, Diff};
pub use files::{list_dir, read_file, write_file, DirEntry, FileRead, MAX_FILE};
pub use run::{exec, Ran};

/// A workspace's state, as `workspace.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub name: String,
    /// The commit its layers lie over: where it started, then its latest commit.
    pub base: String,
    /// Its *view tree*: the base's tree with what its layers changed (new ignored paths left
    /// out), what `diff` shows and `commit` commits.
    #[serde(default)]
    pub tree: String,
    /// The newest of its layers when `tree` was made (`gen-N`; `""`: none): a state that
    /// names another (a command cut off between its layer and this file) is read from the
    /// layers again.
    #[serde(default)]
    pub layers_top: String,
    pub created_at: String,
    pub used_at: String,
    /// Commands run in it, and the CPU they spent (milliseconds).
    pub execs: u64,
    pub cpu_ms: u64,
    pub commits: u64,
}

/// A workspace as `workspace list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    #[serde(flatten)]
    pub state: State,
    pub branch: String,
    /// What its layers hold on disk (bytes).
    pub bytes: u64,
    /// Its experiment's budget, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<experiments::Budget>,
}

/// Where the workspaces of a repository live.
fn repo_dir(ctx: &Context, repository_id: &str) -> PathBuf {
    ctx.paths.home.join("workspaces").join(repository_id)
}

/// An existing workspace, found by name.
pub(crate) struct Found {
    pub dir: PathBuf,
    pub state: State,
}

impl Found {
    pub fn layers(&self) -> PathBuf {
        self.dir.join("layers")
    }

    pub fn base(&self) -> ObjectId {
        ObjectId::from_hex(self.state.base.as_bytes()).expect("a workspace's base is a full id")
    }

    /// The name of its newest layer's generation (`gen-N`), `""` with none.
    pub fn layers_top(&self) -> String {
        let (layers, _locks) = gs_runner::caches::workspace_layers(&self.layers());
        layers
            .first()
            .and_then(|l| l.parent()?.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub fn branch(&self) -> String {
        experiments::branch_ref(&self.state.name)
    }

    /// Write the state whole (a new file renamed over the old one).
    pub fn save(&self) -> Result<()> {
        let tmp = self.dir.join("workspace.json.new");
        let mut text = serde_json::to_vec_pretty(&self.state).expect("states serialize");
        text.push(b'\n');
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, self.dir.join("workspace.json")))
            .map_err(crate::app::io_err("cannot write the workspace's state"))
    }
}

/// The one command at a time of a workspace: held while it runs, released when dropped.
pub(crate) struct Held(#[allow(dead_code)] std::fs::File);

/// Take the lock of the workspace in `dir`, or refuse: another command holds it.
fn hold(dir: &Path, name: &str) -> Result<Held> {
    let f = gs_util::private::open_rw(&dir.join("lock"))
        .map_err(crate::app::io_err("cannot open the workspace's lock"))?;
    match f.try_lock() {
        Ok(()) => Ok(Held(f)),
        Err(std::fs::TryLockError::WouldBlock) => Err(AppError::refused(format!(
            "workspace {name:?} is busy: another command runs in it"
        ))
        .hint("wait for it to end and run yours again (one command at a time per workspace)")),
        Err(std::fs::TryLockError::Error(e)) => Err(AppError::Io {
            context: "cannot lock the workspace".into(),
            source: e,
        }),
    }
}

/// The workspace `name` of the repository, or why not.
pub(crate) fn find(at: Repo<'_>, name: &str) -> Result<Found> {
    crate::app::locate::check_name(name)?;
    let dir = repo_dir(at.ctx, &at.row.repository_id).join(name);
    let text = match std::fs::read(dir.join("workspace.json")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(AppError::not_found(
            format!("no workspace {name:?} in {}", at.row.name),
        )
        .hint(
            "see `git sandbox workspace list`, or make one with `git sandbox workspace new NAME`",
        )),
        Err(e) => {
            return Err(AppError::Io {
                context: format!("cannot read {}", dir.join("workspace.json").display()),
                source: e,
            })
        }
    };
    let state: State = serde_json::from_slice(&text).map_err(|e| {
        AppError::refused(format!(
            "the state of workspace {name:?} cannot be read ({e}): {}",
            dir.join("workspace.json").display()
        ))
        .hint(format!(
            "remove it with `git sandbox workspace rm {name}` (its branch stays)"
        ))
    })?;
    if state.name != name || ObjectId::from_hex(state.base.as_bytes()).is_err() {
        return Err(AppError::refused(format!(
            "the state of workspace {name:?} does not name it or its base commit"
        ))
        .hint(format!(
            "remove it with `git sandbox workspace rm {name}` (its branch stays)"
        )));
    }
    Ok(Found { dir, state })
}

/// Find `name` and hold it for one command.
pub(crate) fn take(at: Repo<'_>, name: &str) -> Result<(Found, Held)> {
    let found = find(at, name)?;
    let held = hold(&found.dir, name)?;
    // Read again under the lock: the command before may have moved its base.
    Ok((find(at, name)?, held))
}

/// `workspace new NAME [--from REV]`: experiment `NAME` started at REV (default production), and
/// a workspace over that commit with nothing written yet.
pub fn new(at: Repo<'_>, name: &str, from: Option<&str>) -> Result<Listed> {
    let Repo { ctx, row, .. } = at;
    crate::app::locate::check_name(name)?;
    let dir = repo_dir(ctx, &row.repository_id).join(name);
    if dir.join("workspace.json").exists() {
        return Err(
            AppError::usage(format!("workspace {name:?} already exists"))
                .hint("choose another name, or remove it with `git sandbox workspace rm NAME`"),
        );
    }
    let started = experiments::start(at, name, None, from, None, None)?;
    let base = ObjectId::from_hex(started.commit.as_bytes())
        .map_err(|e| AppError::Git(gs_git::GitError::gix_in("experiment start", e)))?;
    let tree = gs_git::commit_info(at.repo, base)?.tree;
    std::fs::create_dir_all(dir.join("layers"))
        .map_err(crate::app::io_err("cannot make the workspace's directory"))?;
    let now = time::now_rfc3339();
    let found = Found {
        dir,
        state: State {
            name: name.to_string(),
            base: started.commit.clone(),
            tree: tree.to_string(),
            layers_top: String::new(),
            created_at: now.clone(),
            used_at: now,
            execs: 0,
            cpu_ms: 0,
            commits: 0,
        },
    };
    found.save()?;
    event(
        at,
        EventKind::WorkspaceCreated,
        &found.state.base,
        serde_json::json!({"workspace": name, "base": started.base, "branch": started.branch}),
    );
    listed(at, found)
}

/// One workspace as `list` shows it.
pub fn get(at: Repo<'_>, name: &str) -> Result<Listed> {
    listed(at, find(at, name)?)
}

fn listed(at: Repo<'_>, found: Found) -> Result<Listed> {
    let budget = experiments::find(at, &found.state.name)
        .ok()
        .map(|e| experiments::budget(at.ctx, at.row, &e))
        .transpose()?
        .flatten();
    Ok(Listed {
        branch: found.branch().trim_start_matches("refs/heads/").to_string(),
        bytes: gs_util::disk_size(&found.layers()),
        budget,
        state: found.state,
    })
}

/// `workspace list`: every workspace of the repository, by name.
pub fn list(at: Repo<'_>) -> Result<Vec<Listed>> {
    let dir = repo_dir(at.ctx, &at.row.repository_id);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| gs_util::name_problem(n).is_none())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        if let Ok(found) = find(at, &n) {
            out.push(listed(at, found)?);
        }
    }
    Ok(out)
}

/// What `workspace rm` did.
#[derive(Debug, Serialize)]
pub struct Removed {
    pub workspace: String,
    /// Its branch, kept unless killed.
    pub branch: String,
    pub killed: bool,
}

/// `workspace rm NAME [--kill]`: the workspace goes (its layers, its state); its branch stays,
/// unless `kill` (then the experiment is killed, its branch archived).
pub fn rm(at: Repo<'_>, name: &str, kill: bool) -> Result<Removed> {
    let (found, held) = take(at, name)?;
    // Renamed away first: a half-removed workspace is never found again.
    let gone = found
        .dir
        .with_file_name(format!(".removed-{name}-{}", std::process::id()));
    std::fs::rename(&found.dir, &gone)
        .map_err(crate::app::io_err("cannot remove the workspace"))?;
    drop(held);
    let _ = std::fs::remove_dir_all(&gone);
    if kill {
        experiments::kill(at, name, false)?;
    }
    event(
        at,
        EventKind::WorkspaceRemoved,
        &found.state.base,
        serde_json::json!({"workspace": name, "killed": kill}),
    );
    Ok(Removed {
        workspace: name.to_string(),
        branch: found.branch().trim_start_matches("refs/heads/").to_string(),
        killed: kill,
    })
}

/// `workspace reset NAME`: its layers dropped (every change since its last commit, the files
/// its commands built among them); its base stays.
pub fn reset(at: Repo<'_>, name: &str) -> Result<Listed> {
    let (mut found, _held) = take(at, name)?;
    drop_layers(&found)?;
    found.state.tree = gs_git::commit_info(at.repo, found.base())?.tree.to_string();
    found.state.layers_top = String::new();
    found.state.used_at = time::now_rfc3339();
    found.save()?;
    event(
        at,
        EventKind::WorkspaceReset,
        &found.state.base,
        serde_json::json!({"workspace": name}),
    );
    listed(at, found)
}

/// Replace the workspace's layers by none (the old ones renamed away, then removed).
fn drop_layers(found: &Found) -> Result<()> {
    let layers = found.layers();
    let old = found.dir.join(format!("layers.old-{}", std::process::id()));
    std::fs::rename(&layers, &old)
        .and_then(|_| std::fs::create_dir(&layers))
        .map_err(crate::app::io_err("cannot drop the workspace's layers"))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Log a workspace event of the repository, about `commit`.
fn event(at: Repo<'_>, kind: EventKind, commit: &str, data: serde_json::Value) {
    let _ = at
        .ctx
        .index
        .add_event(kind, Some(&at.row.repository_id), None, Some(commit), &data);
}
