//! Everything the tool asks of git: opening repositories, resolving revisions, reading blobs,
//! checking trees out, notes, tree diffs, hooks, and the few git CLI calls gix cannot do.

pub mod bulk;
pub mod cache;
pub mod checkout;
pub mod cli;
pub mod diff;
pub mod hooks;
pub mod ignore;
pub mod loose_refs;
pub mod marks;
pub mod notes;
pub mod objects;
pub mod pack;
pub mod remote;
pub mod revs;
pub mod rewrite;
pub mod snapshot;
/// Test helpers of this crate's tests and of the app's (feature `testutil`).
#[cfg(any(test, feature = "testutil"))]
pub mod testutil;
pub mod upper;

use gix::bstr::ByteSlice;
/// The types the app holds and passes on; it calls gix through this crate only.
pub use gix::{ObjectId, Repository};
use gs_util::{hint::display_hinted, hint::Hinted};
use std::path::{Path, PathBuf};

/// The notes ref every result lives under.
pub const NOTES_REF: &str = "refs/notes/sandbox";

/// The notes ref of the short human summaries plain `git log` shows (`notes.displayRef`).
pub const SUMMARY_NOTES_REF: &str = "refs/notes/sandbox-summary";

/// The notes ref evaluations live under, on the experiment's head commit.
pub const EVAL_NOTES_REF: &str = "refs/notes/sandbox-eval";

/// What went wrong talking to git. `Display` is one line with the fix; [`Hinted`] splits them.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    NotARepo {
        path: PathBuf,
    },
    BadRevision {
        rev: String,
        detail: String,
    },
    EmptyRange(String),
    UnknownRevision {
        name: String,
        within: Option<String>,
    },
    PastRoot {
        rev: String,
        of: Option<String>,
        commits: usize,
        first: String,
    },
    NoSuchParent {
        rev: String,
        of: String,
        parents: usize,
    },
    NotACommit {
        rev: String,
        kind: String,
    },
    Gix(#[source] GixError),
    TreeTooLarge {
        size: u64,
        ceiling: u64,
    },
    Cli {
        cmd: String,
        stderr: String,
    },
    Io {
        context: String,
        source: std::io::Error,
    },
    /// Something git-sandbox will not do here, and what to do instead.
    Refused {
        problem: String,
        hint: String,
    },
}

impl Hinted for GitError {
    fn problem(&self) -> String {
        match self {
            GitError::NotARepo { path } => {
                format!("{} is not inside a git repository", path.display())
            }
            GitError::BadRevision { rev, detail } => format!("invalid revision {rev:?}: {detail}"),
            GitError::EmptyRange(range) => format!("the range {range:?} holds no commits"),
            GitError::UnknownRevision { name, within } => format!(
                "unknown revision {name:?}{}",
                within
                    .as_ref()
                    .map(|w| format!(" (in {w:?})"))
                    .unwrap_or_default()
            ),
            GitError::PastRoot {
                rev,
                of,
                commits,
                first,
            } => format!(
                "{rev}: the history{} has only {} (the first is {first})",
                of.as_ref().map(|o| format!(" of {o}")).unwrap_or_default(),
                plural(*commits, "commit")
            ),
            GitError::NoSuchParent { rev, of, parents } => {
                format!("{rev}: {of} has only {}", plural(*parents, "parent"))
            }
            GitError::NotACommit { rev, kind } => format!("{rev:?} names a {kind}, not a commit"),
            GitError::Gix(e) => format!("git failed: {e}"),
            GitError::TreeTooLarge { size, ceiling } => format!(
                "the tree is {}, over the checkout ceiling of {}",
                mib(*size),
                mib(*ceiling)
            ),
            GitError::Cli { cmd, stderr } => format!("`{cmd}` failed: {stderr}"),
            GitError::Io { context, source } => format!("{context}: {source}"),
            GitError::Refused { problem, .. } => problem.clone(),
        }
    }

    fn hints(&self) -> Vec<String> {
        let hint = match self {
            GitError::NotARepo { .. } => {
                "run this inside one, or create one with `git sandbox new`".to_string()
            }
            GitError::EmptyRange(range) => {
                format!("check the order (OLDER..NEWER) with `git log --oneline {range}`")
            }
            GitError::UnknownRevision { .. } => "name a commit, branch or tag that exists (see `git branch` and `git log --oneline`)".into(),
            GitError::NoSuchParent { .. } => "^2 names the second parent of a merge".into(),
            GitError::NotACommit { .. } => "name a commit, branch or tag".into(),
            GitError::Refused { hint, .. } => hint.clone(),
            GitError::TreeTooLarge { .. } => {
                "raise [limits] checkout_mb in your user config to run it".into()
            }
            GitError::BadRevision { .. }
            | GitError::PastRoot { .. }
            | GitError::Gix(_)
            | GitError::Cli { .. }
            | GitError::Io { .. } => return Vec::new(),
        };
        vec![hint]
    }
}

display_hinted!(GitError);

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

pub fn gix_err<E: std::error::Error + Send + Sync + 'static>(e: E) -> GitError {
    GitError::Gix(GixError {
        message: String::new(),
        source: Some(Box::new(e)),
    })
}

impl GitError {
    /// A failure of git's that carries no error of its own: what failed, in words.
    pub fn gix(message: impl Into<String>) -> GitError {
        GitError::Gix(GixError {
            message: message.into(),
            source: None,
        })
    }

    /// A failure of git's: what was being done, and the error it gave (kept whole, so its
    /// causes are printed).
    pub fn gix_in<E: std::error::Error + Send + Sync + 'static>(
        doing: impl Into<String>,
        e: E,
    ) -> GitError {
        GitError::Gix(GixError {
            message: doing.into(),
            source: Some(Box::new(e)),
        })
    }
}

/// What git (gix, or a git command) failed at: what was being done, and the error it gave
/// with its causes. Shown as one line, each cause after a colon (a cause whose words the one
/// before already holds is not said twice).
#[derive(Debug)]
pub struct GixError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl std::fmt::Display for GixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = self.message.clone();
        let mut cause: Option<&(dyn std::error::Error + 'static)> = match &self.source {
            Some(e) => Some(e.as_ref()),
            None => None,
        };
        while let Some(e) = cause {
            let text = e.to_string();
            if !text.is_empty() && !said.contains(&text) {
                if !said.is_empty() {
                    said.push_str(": ");
                }
                said.push_str(&text);
            }
            cause = e.source();
        }
        f.write_str(&said)
    }
}

impl std::error::Error for GixError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.source {
            Some(e) => Some(e.as_ref()),
            None => None,
        }
    }
}

/// How many pack indices a repository handle can know at once. gix fixes the number when the
/// handle opens (by default what the disk holds then, at least 32), and the tool adds packs while
/// it holds one — a pack per batch of results, and other writers add theirs — so a long `run` or
/// a busy daemon would run out and fail to read objects that are there. Packs past 50 are rolled
/// up ([`pack::PACK_LIMIT`]); this leaves room for many more.
const INDEX_SLOTS: gix::odb::store::init::Slots =
    gix::odb::store::init::Slots::AsNeededByDiskState {
        multiplier: 2.0,
        minimum: 512,
    };

/// Open the repository that contains `dir`.
pub fn discover(dir: &Path) -> Result<gix::Repository> {
    let mut trust = gix::sec::trust::Mapping::<gix::open::Options>::default();
    trust.full = trust.full.object_store_slots(INDEX_SLOTS);
    trust.reduced = trust.reduced.object_store_slots(INDEX_SLOTS);
    gix::ThreadSafeRepository::discover_opts(dir, Default::default(), trust)
        .map(gix::Repository::from)
        .map_err(|_| GitError::NotARepo {
            path: dir.to_path_buf(),
        })
}

/// Open a repository at exactly `path` (a work tree or a bare repository).
pub fn open(path: &Path) -> Result<gix::Repository> {
    let options = gix::open::Options::default().object_store_slots(INDEX_SLOTS);
    let mut repo = gix::open_opts(path, options).map_err(|_| GitError::NotARepo {
        path: path.to_path_buf(),
    })?;
    // Objects read again and again (a tree's config file, the notes' fan-out trees) are
    // decoded once. Objects never change, so a cached one is never stale.
    repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
    Ok(repo)
}

/// The decoded objects a repository handle keeps.
const OBJECT_CACHE_BYTES: usize = 4 << 20;

/// How long [`open_recent`] hands out a handle of one opening (its config as it was read).
const RECENT_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// The repository at `path` as [`open`] gives it, from an opening of the last
/// [`RECENT_FOR`] in this process when there is one: a daemon serving a burst of jobs opens
/// each repository once, not once per job and step (an opening reads its config and lists its
/// packs). Objects and references are read from disk as they are now (a handle finds packs
/// written after its opening); only the config is as read at the opening.
pub fn open_recent(path: &Path) -> Result<gix::Repository> {
    use std::os::unix::fs::MetadataExt;
    type Recent = Vec<(
        PathBuf,
        (u64, u64),
        std::time::Instant,
        gix::ThreadSafeRepository,
    )>;
    static RECENT: std::sync::Mutex<Recent> = std::sync::Mutex::new(Vec::new());
    // The git dir's identity: a repository removed or made anew at the path is opened anew.
    let identity = |repo: &gix::Repository| {
        std::fs::metadata(repo.git_dir())
            .map(|m| (m.dev(), m.ino()))
            .ok()
    };
    {
        let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(_, _, at, _)| at.elapsed() < RECENT_FOR);
        if let Some((_, id, _, r)) = recent.iter().find(|(p, _, _, _)| p == path) {
            let mut repo = r.to_thread_local();
            if identity(&repo) == Some(*id) {
                repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
                return Ok(repo);
            }
            recent.retain(|(p, _, _, _)| p != path);
        }
    }
    let repo = open(path)?;
    if let Some(id) = identity(&repo) {
        let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(p, _, _, _)| p != path);
        recent.push((
            path.to_path_buf(),
            id,
            std::time::Instant::now(),
            repo.clone().into_sync(),
        ));
    }
    Ok(repo)
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

/// Resolve one revision to a commit id (errors in plain words, see [`revs::resolve`]).
pub fn resolve_commit(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    revs::resolve(repo, rev)
}

/// Commits of one argument, oldest first: `REV` is one commit, `A..B` the commits of B not in A.
/// An empty range is an error here; [`revs::commits`] takes several arguments and leaves an empty
/// result to the caller.
pub fn resolve_commits(repo: &gix::Repository, spec: &str) -> Result<Vec<ObjectId>> {
    let walk = revs::Walk {
        oldest_first: true,
        max_count: None,
        plain_means_listed: true,
    };
    let ids = revs::commits(repo, &[spec.to_string()], None, walk)?;
    if ids.is_empty() {
        return Err(GitError::EmptyRange(spec.to_string()));
    }
    Ok(ids)
}

fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
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

/// The id and size of the blob at `path` in `tree` (a regular file, not a link or a tree),
/// without reading it: a commit's file may be huge.
pub fn blob_at(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &str,
) -> Result<Option<(ObjectId, u64)>> {
    let tree = repo.find_tree(tree).map_err(gix_err)?;
    let Some(entry) = tree.lookup_entry_by_path(path).map_err(gix_err)? else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    let id = entry.object_id();
    let size = repo.find_header(id).map_err(gix_err)?.size();
    Ok(Some((id, size)))
}

/// Whether `tree` holds anything (a file, a link, a directory) at `path`.
pub fn path_in_tree(repo: &gix::Repository, tree: ObjectId, path: &str) -> bool {
    repo.find_tree(tree)
        .ok()
        .and_then(|t| t.lookup_entry_by_path(path).ok().flatten())
        .is_some()
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

/// The remote-tracking branches of `remote` (`refs/remotes/<remote>/…`), named without the prefix
/// (`main`, `experiment/x`); its `HEAD` is not a branch.
pub fn remote_branches(repo: &gix::Repository, remote: &str) -> Result<Vec<(String, ObjectId)>> {
    let prefix = format!("refs/remotes/{remote}/");
    let refs = repo.references().map_err(gix_err)?;
    let mut out = Vec::new();
    for r in refs.prefixed(prefix.as_str()).map_err(gix_err)? {
        let Ok(mut r) = r else { continue };
        let full = r.name().as_bstr().to_str_lossy().into_owned();
        let Some(name) = full.strip_prefix(&prefix).map(str::to_string) else {
            continue;
        };
        if name == "HEAD" {
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a cause, as gix's are: its message does not repeat the cause's.
    #[derive(Debug, thiserror::Error)]
    #[error("could not open the object database")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_git_failure_keeps_its_causes_and_says_each_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let e = GitError::gix_in("reading refs/notes/sandbox", Outer(io));
        assert_eq!(
            e.problem(),
            "git failed: reading refs/notes/sandbox: could not open the object database: permission denied"
        );
        let cause = std::error::Error::source(&e).and_then(std::error::Error::source);
        assert_eq!(
            cause.map(|c| c.to_string()).as_deref(),
            Some("could not open the object database")
        );
        // A cause whose words the message already holds is not said again.
        let io = std::io::Error::other("disk full");
        assert_eq!(gix_err(io).problem(), "git failed: disk full");
        assert_eq!(
            GitError::gix("checkout interrupted").problem(),
            "git failed: checkout interrupted"
        );
    }
}
