//! Work not committed yet, as a commit to run: the index as it is (`Staged`), or the work tree
//! with its changes and its untracked files that are not ignored (`Worktree`). The tree is
//! written through a private copy of the index, so the user's index and work tree are never
//! written; the commit is an object on HEAD that no ref points at.

use super::{cli, GitError, Result};
use gix::ObjectId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshot {
    /// What `git commit` would commit now.
    Staged,
    /// What `git add -A && git commit` would commit now.
    Worktree,
}

impl Snapshot {
    pub fn describe(self) -> &'static str {
        match self {
            Snapshot::Staged => "the index (staged changes)",
            Snapshot::Worktree => "the work tree (uncommitted changes)",
        }
    }
}

/// Write `what` of the repository at `repo` as a commit on HEAD (none on an unborn branch) and
/// return it, with the tree it holds.
pub fn take(repo: &gix::Repository, what: Snapshot) -> Result<(ObjectId, ObjectId)> {
    let work = repo
        .workdir()
        .ok_or_else(|| GitError::Refused {
            problem: "a bare repository has no index or work tree to run".into(),
            hint: "run it in a clone with a work tree, or name a commit".into(),
        })?
        .to_path_buf();
    let private = tempfile::Builder::new()
        .prefix("git-sandbox-index-")
        .tempdir()
        .map_err(|source| GitError::Io {
            context: "cannot make a private copy of the index".into(),
            source,
        })?;
    let index = private.path().join("index");
    match std::fs::copy(repo.index_path(), &index) {
        // The copy keeps the index's mtime: git trusts an entry's stat data only when the file
        // is older than the index ("racy git"), and a copy made now would make a file changed
        // in the same second as its `git add` look unchanged.
        Ok(_) => {
            let modified = std::fs::metadata(repo.index_path()).and_then(|m| m.modified());
            let kept = modified.and_then(|t| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&index)?
                    .set_modified(t)
            });
            if let Err(source) = kept {
                return Err(GitError::Io {
                    context: "cannot keep the index's time on its private copy".into(),
                    source,
                });
            }
        }
        // An unborn branch with nothing added yet: start from an empty index.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(GitError::Io {
                context: format!("cannot read the index {}", repo.index_path().display()),
                source,
            })
        }
    }
    let index = index.to_string_lossy().into_owned();
    let env = [("GIT_INDEX_FILE", index.as_str())];
    // `git add` would take a conflicted file, markers and all, as resolved: refuse first.
    if !cli::git_with_env(&work, &["ls-files", "--unmerged"], &env)?
        .trim()
        .is_empty()
    {
        return Err(unmerged());
    }
    if what == Snapshot::Worktree {
        cli::git_with_env(&work, &["add", "--all", "--", ":/"], &env)?;
    }
    let tree = match cli::git_status(&work, &["write-tree"], &env)? {
        (true, out, _) => parse_id(&out)?,
        (false, _, err) if err.contains("unmerged") => return Err(unmerged()),
        (false, _, err) => {
            return Err(GitError::Cli {
                cmd: "git write-tree".into(),
                stderr: err,
            })
        }
    };
    let head = repo.head_id().ok().map(|id| id.detach());
    let branch = repo
        .head_name()
        .ok()
        .flatten()
        .map(|n| n.shorten().to_string())
        .unwrap_or_else(|| "a detached HEAD".into());
    let message = format!("{} of {branch}", what.describe());
    let mut args = vec!["commit-tree".to_string(), tree.to_string()];
    if let Some(h) = head {
        args.extend(["-p".into(), h.to_string()]);
    }
    args.extend(["-m".into(), message]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Never signed, and never in need of the user's identity: it is ours, not theirs.
    let mut env: Vec<(&str, &str)> = vec![
        ("GIT_AUTHOR_NAME", "git-sandbox"),
        ("GIT_AUTHOR_EMAIL", "git-sandbox@localhost"),
        ("GIT_COMMITTER_NAME", "git-sandbox"),
        ("GIT_COMMITTER_EMAIL", "git-sandbox@localhost"),
    ];
    env.push(("GIT_CONFIG_COUNT", "1"));
    env.push(("GIT_CONFIG_KEY_0", "commit.gpgSign"));
    env.push(("GIT_CONFIG_VALUE_0", "false"));
    let commit = parse_id(&cli::git_with_env(&work, &args, &env)?)?;
    Ok((commit, tree))
}

fn unmerged() -> GitError {
    GitError::Refused {
        problem: "the index has unmerged paths (a merge, rebase or cherry-pick is in progress)"
            .into(),
        hint: "resolve them first (`git status` lists them), or run a commit".into(),
    }
}

fn parse_id(out: &str) -> Result<ObjectId> {
    ObjectId::from_hex(out.trim().as_bytes()).map_err(|_| GitError::Cli {
        cmd: "git write-tree".into(),
        stderr: format!("printed {:?}, not an object id", out.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::git;

    #[test]
    fn staged_and_worktree_trees_leave_the_index_and_work_tree_alone() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        git(dir, &["add", "a.txt"]);
        git(dir, &["commit", "-qm", "one"]);
        std::fs::write(dir.join("a.txt"), "two\n").unwrap();
        git(dir, &["add", "a.txt"]);
        // The same size, most likely in the same second as its `git add`: only git's racy-entry
        // check (which needs the index's own mtime) sees the change.
        std::fs::write(dir.join("a.txt"), "TWO\n").unwrap();
        std::fs::write(dir.join("new.txt"), "new\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "ignored.txt\n").unwrap();
        std::fs::write(dir.join("ignored.txt"), "x\n").unwrap();
        let index_before = std::fs::read(dir.join(".git/index")).unwrap();
        let status_before = git(dir, &["--no-optional-locks", "status", "--porcelain=v2"]);
        let repo = crate::open(dir).unwrap();

        let (commit, tree) = take(&repo, Snapshot::Staged).unwrap();
        assert_eq!(git(dir, &["show", &format!("{tree}:a.txt")]), "two\n");
        assert_eq!(
            git(dir, &["rev-parse", &format!("{commit}^")]).trim(),
            git(dir, &["rev-parse", "HEAD"]).trim()
        );
        let (_, tree) = take(&repo, Snapshot::Worktree).unwrap();
        assert_eq!(git(dir, &["show", &format!("{tree}:a.txt")]), "TWO\n");
        let files = git(dir, &["ls-tree", "--name-only", &tree.to_string()]);
        assert!(
            files.contains("new.txt") && !files.contains("ignored.txt"),
            "{files}"
        );

        assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index_before);
        assert_eq!(
            git(dir, &["--no-optional-locks", "status", "--porcelain=v2"]),
            status_before
        );
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "TWO\n");
    }
}
