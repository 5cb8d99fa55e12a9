//! An experiment's metadata in git outside the product's tree: `refs/sandbox/experiments/<name>`
//! points at a commit (its parent the previous version, so `push` fast-forwards it) whose tree
//! holds one `experiment.toml`. A remote's copy (`refs/sandbox/remotes/<remote>/experiments/…`)
//! is read only where there is none here; an old branch's committed
//! `experiments/<name>/experiment.toml` is read once and moved into the ref.

use crate::app::{AppError, Result};
use gs_config::ConfigFile;
use gs_git as git;
use gs_git::CommitInfo;
use gs_git::ObjectId;
use gs_git::{cli, remote::SANDBOX_REMOTES};
use gs_model::ExperimentFile;
use std::path::Path;

pub const META_PREFIX: &str = "refs/sandbox/experiments/";
/// The file the metadata commit's tree holds.
const FILE: &str = "experiment.toml";
/// The most a metadata file may hold: a remote's is read whole.
const MAX_BYTES: u64 = 1 << 20;

pub fn meta_ref(name: &str) -> String {
    format!("{META_PREFIX}{name}")
}

/// A remote's copy of the metadata of `name`, as fetched.
pub fn remote_meta_ref(remote: &str, name: &str) -> String {
    format!(
        "{SANDBOX_REMOTES}{remote}/{}{name}",
        META_PREFIX.trim_start_matches("refs/sandbox/")
    )
}

/// Where an old experiment kept its metadata: in its own tree.
pub fn committed_path(name: &str) -> String {
    format!("experiments/{name}/experiment.toml")
}

/// Where the metadata in use came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// This repository's own ref.
    Local,
    /// An old experiment's committed file, not moved into the ref yet ([`migrate`]).
    Committed,
    /// A remote's copy, read because there is none here.
    Remote(String),
}

/// Metadata with where it came from and the commit that holds it.
#[derive(Debug, Clone)]
pub struct Meta {
    pub file: ExperimentFile,
    pub origin: Origin,
    pub commit: ObjectId,
}

/// The text of a small UTF-8 blob at `path` in `tree`, or `None`.
fn small_text(repo: &gs_git::Repository, tree: ObjectId, path: &str) -> Option<String> {
    let (id, size) = git::blob_at(repo, tree, path).ok()??;
    if size > MAX_BYTES {
        return None;
    }
    let data = git::objects::blob(repo, id).ok()?;
    String::from_utf8(data).ok()
}

fn parse(text: &str) -> Option<ExperimentFile> {
    toml::from_str(text).ok()
}

/// The metadata a metadata commit holds.
pub fn read_commit(repo: &gs_git::Repository, commit: ObjectId) -> Option<ExperimentFile> {
    let tree = git::objects::tree_of(repo, commit)?;
    parse(&small_text(repo, tree, FILE)?)
}

/// The `experiments` folders of commits' trees, read once per commit: many experiments share a
/// head (those with no commits of their own), and most trees have none.
#[derive(Default)]
pub struct Folders(std::collections::HashMap<ObjectId, Option<ObjectId>>);

impl Folders {
    fn of(&mut self, repo: &gs_git::Repository, commit: ObjectId) -> Option<ObjectId> {
        *self.0.entry(commit).or_insert_with(|| {
            let tree = git::objects::tree_of(repo, commit)?;
            let entry = git::objects::entry_at(repo, tree, "experiments")?;
            (entry.kind == git::objects::Kind::Tree).then_some(entry.id)
        })
    }
}

/// The metadata an old experiment committed in `head`'s tree.
pub fn read_committed(
    repo: &gs_git::Repository,
    head: ObjectId,
    name: &str,
    folders: &mut Folders,
) -> Option<ExperimentFile> {
    let folder = folders.of(repo, head)?;
    parse(&small_text(repo, folder, &format!("{name}/{FILE}"))?).filter(|m| m.name == name)
}

/// The text written to the ref: the metadata with a header that says what it is.
pub fn body(meta: &ExperimentFile) -> String {
    format!(
        "# Experiment {name}, kept by git-sandbox in {r} (never in the product's tree).\n\
         # [config] takes keys as in .sandbox.toml; they apply to the runs of experiment/{name}\n\
         # (limits may only be tightened).\n{}",
        toml::to_string(meta).expect("metadata always serializes"),
        name = meta.name,
        r = meta_ref(&meta.name),
    )
}

/// The commit that would hold `meta` after `parent`, written to the object store only.
pub fn commit_of(
    repo: &gs_git::Repository,
    dir: &Path,
    meta: &ExperimentFile,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId> {
    let blob = git::objects::write_blob(repo, body(meta).as_bytes())?;
    let tree = git::objects::write_tree(repo, &[(FILE, git::objects::Kind::File, blob)])?;
    let tree = tree.to_string();
    let parent = parent.map(|p| p.to_string());
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
    if let Some(p) = &parent {
        args.extend(["-p", p.as_str()]);
    }
    let out = cli::git_with_env(dir, &args, &cli::fallback_identity(dir))?;
    ObjectId::from_hex(out.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("git commit-tree", e)))
}

/// The `update-ref --stdin` line that moves the metadata of `meta.name` from `old` (`None`: it
/// must not exist) to a new commit holding `meta`: a compare-and-swap, so two writers never
/// lose each other's change silently.
pub fn update_line(
    repo: &gs_git::Repository,
    dir: &Path,
    meta: &ExperimentFile,
    old: Option<ObjectId>,
    message: &str,
) -> Result<String> {
    let new = commit_of(repo, dir, meta, old, message)?;
    let r = meta_ref(&meta.name);
    Ok(match old {
        Some(old) => format!("update {r} {new} {old}\n"),
        None => format!("create {r} {new}\n"),
    })
}

/// Write `meta` as the next version of the experiment's metadata (compare-and-swap).
pub fn write(
    repo: &gs_git::Repository,
    dir: &Path,
    meta: &ExperimentFile,
    old: Option<ObjectId>,
    message: &str,
) -> Result<()> {
    let line = update_line(repo, dir, meta, old, message)?;
    cli::update_refs(dir, &line, &format!("git-sandbox: {message}"))?;
    Ok(())
}

/// The commit a ref points at, if it exists.
fn tip(repo: &gs_git::Repository, refname: &str) -> Option<ObjectId> {
    git::objects::ref_commit(repo, refname).ok()?
}

/// The remotes with a copy of `name`'s metadata, in the order they are read.
fn remote_copies(repo: &gs_git::Repository, name: &str) -> Vec<(String, ObjectId)> {
    let mut out: Vec<(String, ObjectId)> = git::objects::remote_names(repo)
        .into_iter()
        .filter_map(|r| tip(repo, &remote_meta_ref(&r, name)).map(|t| (r, t)))
        .collect();
    prefer(&mut out);
    out
}

/// Remotes' copies in the order they are read: `origin` first, then by name.
pub fn prefer(copies: &mut [(String, ObjectId)]) {
    copies.sort_by(|a, b| (a.0 != "origin", &a.0).cmp(&(b.0 != "origin", &b.0)));
}

/// The metadata of `name`: this repository's, else the file an old experiment committed on
/// `head` (until [`migrate`] moves it), else a remote's copy.
pub fn metadata(repo: &gs_git::Repository, name: &str, head: Option<ObjectId>) -> Option<Meta> {
    metadata_in(
        repo,
        name,
        tip(repo, &meta_ref(name)),
        &remote_copies(repo, name),
        head,
        &mut Folders::default(),
    )
}

/// [`metadata`] from refs already read: `local`, this repository's metadata commit; `remotes`,
/// the remotes' in the order they are read.
pub fn metadata_in(
    repo: &gs_git::Repository,
    name: &str,
    local: Option<ObjectId>,
    remotes: &[(String, ObjectId)],
    head: Option<ObjectId>,
    folders: &mut Folders,
) -> Option<Meta> {
    if let Some(commit) = local {
        return read_commit(repo, commit).map(|file| Meta {
            file,
            origin: Origin::Local,
            commit,
        });
    }
    if let Some(h) = head {
        if let Some(file) = read_committed(repo, h, name, folders) {
            return Some(Meta {
                file,
                origin: Origin::Committed,
                commit: h,
            });
        }
    }
    remotes.iter().find_map(|(remote, commit)| {
        read_commit(repo, *commit).map(|file| Meta {
            file,
            origin: Origin::Remote(remote.clone()),
            commit: *commit,
        })
    })
}

/// Move the metadata an old experiment committed on `head` into its ref (with `budget_ms`,
/// `indexed`, the budget of the index's row when there is one: `experiment budget` changed
/// only that, so it is the budget in force).
pub fn migrate(
    repo: &gs_git::Repository,
    file: &ExperimentFile,
    indexed: Option<Option<u64>>,
) -> Result<()> {
    let mut file = file.clone();
    if let Some(budget_ms) = indexed {
        file.budget = budget_ms.map(budget_text);
    }
    let dir = git::repo_root(repo);
    let message = format!(
        "experiment {}: metadata moved out of the branch's tree",
        file.name
    );
    write(repo, &dir, &file, None, &message)
}

/// A budget in milliseconds as the metadata writes it.
pub fn budget_text(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The `[config]` of the metadata as the text of a `.sandbox.toml`, or `None` when empty.
pub fn config_text(meta: &ExperimentFile) -> Option<String> {
    (!meta.config.is_empty())
        .then(|| toml::to_string(&meta.config).expect("a TOML table always serializes"))
}

/// The old experiments' metadata files `tree` holds that `base` (production's tree) does not:
/// what a promotion must leave out. Only files that read as metadata of the experiment of
/// their folder count; a project's own `experiments/` is left alone.
pub fn bookkeeping(repo: &gs_git::Repository, tree: ObjectId, base: ObjectId) -> Vec<String> {
    let Some(dir) = git::objects::entry_at(repo, tree, "experiments") else {
        return Vec::new();
    };
    if dir.kind != git::objects::Kind::Tree {
        return Vec::new();
    }
    let mut out = Vec::new();
    for entry in git::objects::entries(repo, dir.id).unwrap_or_default() {
        if entry.kind != git::objects::Kind::Tree {
            continue;
        }
        let name = entry.path;
        let path = committed_path(&name);
        let Some(text) = small_text(repo, tree, &path) else {
            continue;
        };
        let ours = parse(&text).is_some_and(|m| m.name == name);
        let same_in_base = git::blob_at(repo, base, &path).ok().flatten().map(|b| b.0)
            == git::blob_at(repo, tree, &path).ok().flatten().map(|b| b.0);
        if ours && !same_in_base {
            out.push(path);
        }
    }
    out
}

/// `tree` without `paths` (an empty folder goes too), written to the object store.
pub fn tree_without(dir: &Path, tree: ObjectId, paths: &[String]) -> Result<ObjectId> {
    let tmp = tempfile::tempdir().map_err(crate::app::io_err("cannot create a temporary index"))?;
    let index = tmp.path().join("index");
    let index = index.to_string_lossy().into_owned();
    let env = [("GIT_INDEX_FILE", index.as_str())];
    cli::git_with_env(dir, &["read-tree", &tree.to_string()], &env)?;
    let mut args = vec!["rm", "--cached", "-q", "--ignore-unmatch", "--"];
    args.extend(paths.iter().map(String::as_str));
    cli::git_with_env(dir, &args, &env)?;
    let out = cli::git_with_env(dir, &["write-tree"], &env)?;
    ObjectId::from_hex(out.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("git write-tree", e)))
}

/// A commit on `parent` without the old metadata files `paths` in its tree.
///
/// What production gets then holds none: a promotion of an experiment started before the
/// metadata moved out of the tree.
pub fn drop_commit(dir: &Path, parent: ObjectId, name: &str, paths: &[String]) -> Result<ObjectId> {
    let tree = tree_without(dir, parent, paths)?;
    let message = format!(
        "Drop experiment bookkeeping from experiment/{name}\n\nIts metadata lives in {} now, outside the tree.",
        meta_ref(name)
    );
    let out = cli::git_with_env(
        dir,
        &[
            "commit-tree",
            &tree.to_string(),
            "-p",
            &parent.to_string(),
            "-m",
            &message,
        ],
        &cli::fallback_identity(dir),
    )?;
    ObjectId::from_hex(out.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("git commit-tree", e)))
}

/// The `[config]` of experiment `name`'s metadata, as a config layer for the run of `info`. The
/// commit the experiment started from is production's, run under production's config: an
/// experiment with no commits of its own costs no run.
pub fn config_overrides(
    repo: &gs_git::Repository,
    info: &CommitInfo,
    name: &str,
) -> Result<ConfigFile> {
    let Some(m) = metadata(repo, name, Some(info.id)) else {
        return Ok(ConfigFile::default());
    };
    if info.id == m.file.base_commit.as_str() {
        return Ok(ConfigFile::default());
    }
    let label = match &m.origin {
        Origin::Committed => format!(
            "{}:{}",
            gs_util::short(&info.id.to_string()),
            committed_path(name)
        ),
        _ => format!("{}:experiment.toml", meta_ref(name)),
    };
    match config_text(&m.file) {
        Some(text) => Ok(gs_config::parse_repository_file(
            &format!("{label} [config]"),
            &text,
        )?),
        None => Ok(ConfigFile::default()),
    }
}
