//! Everything the tool asks of git: opening repositories, resolving revisions, reading blobs,
//! checking trees out, notes, tree diffs, hooks, and the few git CLI calls gix cannot do.

pub mod checkout;
pub mod cli;
pub mod diff;
pub mod hooks;
pub mod notes;

use gix::bstr::ByteSlice;
use gix::ObjectId;
use std::path::{Path, PathBuf};

/// The notes ref every result lives under.
pub const NOTES_REF: &str = "refs/notes/sandbox";

/// The notes ref evaluations live under, on the experiment's head commit.
pub const EVAL_NOTES_REF: &str = "refs/notes/sandbox-eval";

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path} is not inside a git repository; run this inside one, or create one with `git sandbox new`")]
    NotARepo { path: PathBuf },
    #[error("unknown revision {rev:?}: {detail}; name a commit, branch or tag that exists (see `git log --oneline`)")]
    BadRevision { rev: String, detail: String },
    #[error("the range {0:?} holds no commits; check the order (OLDER..NEWER) with `git log --oneline {0}`")]
    EmptyRange(String),
    #[error("git failed: {0}")]
    Gix(String),
    #[error(
        "the tree is {}, over the checkout ceiling of {}; raise [limits] checkout_mb in your user config to run it",
        mib(*.size), mib(*.ceiling)
    )]
    TreeTooLarge { size: u64, ceiling: u64 },
    #[error("`{cmd}` failed: {stderr}")]
    Cli { cmd: String, stderr: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, GitError>;

/// Bytes as MiB for messages: `1.5 MiB`, `1024 MiB`.
fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    if m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

pub(crate) fn gix_err(e: impl std::fmt::Display) -> GitError {
    GitError::Gix(e.to_string())
}

/// Open the repository that contains `dir`.
pub fn discover(dir: &Path) -> Result<gix::Repository> {
    gix::discover(dir).map_err(|_| GitError::NotARepo {
        path: dir.to_path_buf(),
    })
}

/// Open a repository at exactly `path` (a work tree or a bare repository).
pub fn open(path: &Path) -> Result<gix::Repository> {
    gix::open(path).map_err(|_| GitError::NotARepo {
        path: path.to_path_buf(),
    })
}

/// The directory that identifies a repository: its work tree, or the git dir when bare.
pub fn repo_root(repo: &gix::Repository) -> PathBuf {
    let p = repo.workdir().unwrap_or_else(|| repo.git_dir());
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The repository with a committer identity for the reflog entries of the tool's own ref writes:
/// a fresh machine (or a daemon in a clean environment) may have none configured.
pub fn with_identity(repo: &gix::Repository) -> gix::Repository {
    let mut repo = repo.clone();
    if repo.committer().is_none() {
        use gix::config::tree::{gitoxide, Committer};
        let mut config = repo.config_snapshot_mut();
        let _ = config.set_value(&Committer::NAME, "git-sandbox");
        let _ = config.set_value(&Committer::EMAIL, "git-sandbox@localhost");
        let _ = config.set_value(&gitoxide::Committer::NAME_FALLBACK, "git-sandbox");
        drop(config);
    }
    repo
}

/// Resolve one revision to a commit id.
pub fn resolve_commit(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    let bad = |detail: String| GitError::BadRevision {
        rev: rev.to_string(),
        detail,
    };
    if rev.is_empty() || rev.starts_with('-') {
        return Err(bad("not a revision".into()));
    }
    let id = repo
        .rev_parse_single(rev)
        .map_err(|e| bad(first_line(&e.to_string())))?;
    let object = id.object().map_err(gix_err)?;
    let commit = object
        .peel_to_commit()
        .map_err(|_| bad("it does not name a commit".into()))?;
    Ok(commit.id)
}

/// Commits of `spec`, oldest first: `REV` is one commit, `A..B` the commits of B not in A
/// (`A..` means `A..HEAD`).
pub fn resolve_commits(repo: &gix::Repository, spec: &str) -> Result<Vec<ObjectId>> {
    let Some((from, to)) = spec.split_once("..") else {
        return Ok(vec![resolve_commit(repo, spec)?]);
    };
    if from.contains("..") || to.starts_with('.') {
        return Err(GitError::BadRevision {
            rev: spec.to_string(),
            detail: "symmetric ranges (A...B) are not supported".into(),
        });
    }
    let to = if to.is_empty() { "HEAD" } else { to };
    let tip = resolve_commit(repo, to)?;
    let mut walk = repo.rev_walk([tip]);
    if !from.is_empty() {
        walk = walk.with_hidden([resolve_commit(repo, from)?]);
    }
    let mut ids = Vec::new();
    for info in walk.all().map_err(gix_err)? {
        ids.push(info.map_err(gix_err)?.id);
    }
    if ids.is_empty() {
        return Err(GitError::EmptyRange(spec.to_string()));
    }
    ids.reverse();
    Ok(ids)
}

/// What a run needs to know about a commit.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub id: ObjectId,
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    pub summary: String,
}

pub fn commit_info(repo: &gix::Repository, id: ObjectId) -> Result<CommitInfo> {
    let commit = repo.find_commit(id).map_err(gix_err)?;
    let decoded = commit.decode().map_err(gix_err)?;
    Ok(CommitInfo {
        id,
        tree: decoded.tree(),
        parents: decoded.parents().collect(),
        summary: decoded.message_summary().to_str_lossy().into_owned(),
    })
}

/// The blob at `path` in `tree`, if there is one.
pub fn read_blob_at(repo: &gix::Repository, tree: ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo.find_tree(tree).map_err(gix_err)?;
    let Some(entry) = tree.lookup_entry_by_path(path).map_err(gix_err)? else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    let blob = repo.find_blob(entry.object_id()).map_err(gix_err)?;
    Ok(Some(blob.data.clone()))
}

/// Branches (`refs/heads/*`) and their tips, short name first.
pub fn branches(repo: &gix::Repository) -> Result<Vec<(String, ObjectId)>> {
    let refs = repo.references().map_err(gix_err)?;
    let mut out = Vec::new();
    for r in refs.local_branches().map_err(gix_err)? {
        let Ok(mut r) = r else { continue };
        let name = r.name().shorten().to_str_lossy().into_owned();
        if let Ok(id) = r.peel_to_id() {
            out.push((name, id.detach()));
        }
    }
    Ok(out)
}

/// The branch HEAD points at, if any (`main`).
pub fn head_branch(repo: &gix::Repository) -> Option<String> {
    repo.head_name()
        .ok()
        .flatten()
        .map(|n| n.shorten().to_str_lossy().into_owned())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}
