//! The few things done through the git command line: init, config writes, and commits made on
//! the user's behalf (so their identity, hooks policy and signing stay git's business).

use super::{GitError, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Run `git -C dir args…`, returning stdout; stderr becomes the error.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    git_with_env(dir, args, &[])
}

pub fn git_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let (ok, stdout, stderr) = git_status(dir, args, env)?;
    if !ok {
        return Err(GitError::Cli {
            cmd: format!("git {}", args.join(" ")),
            stderr,
        });
    }
    Ok(stdout)
}

/// The refs under `prefix` (`refs/notes/remotes/origin/sandbox-by/`), sorted.
pub fn list_refs(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    Ok(git(dir, &["for-each-ref", "--format=%(refname)", prefix])?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// `git config --local KEY VALUE`.
pub fn set_config(dir: &Path, key: &str, value: &str) -> Result<()> {
    git(dir, &["config", "--local", key, value]).map(drop)
}

/// `git config KEY`, `None` when unset.
pub fn get_config(dir: &Path, key: &str) -> Option<String> {
    git(dir, &["config", key])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Every value of a multi-valued `git config KEY` (local and global), empty when unset.
pub fn get_all_config(dir: &Path, key: &str) -> Vec<String> {
    git(dir, &["config", "--get-all", key])
        .map(|s| s.lines().map(|l| l.trim().to_string()).collect())
        .unwrap_or_default()
}

/// Identity env vars for commits the tool makes, used only where git has none configured.
pub fn fallback_identity(dir: &Path) -> Vec<(&'static str, &'static str)> {
    let mut env = Vec::new();
    if get_config(dir, "user.name").is_none() && std::env::var_os("GIT_AUTHOR_NAME").is_none() {
        env.extend([
            ("GIT_AUTHOR_NAME", "git-sandbox"),
            ("GIT_COMMITTER_NAME", "git-sandbox"),
        ]);
    }
    if get_config(dir, "user.email").is_none() && std::env::var_os("GIT_AUTHOR_EMAIL").is_none() {
        env.extend([
            ("GIT_AUTHOR_EMAIL", "git-sandbox@localhost"),
            ("GIT_COMMITTER_EMAIL", "git-sandbox@localhost"),
        ]);
    }
    env
}

/// Like [`git_with_env`], but a failing git is an answer, not an error: (success, stdout, stderr).
/// For commands whose exit status means something (`merge-tree`, `merge-base --is-ancestor`).
pub fn git_status(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(bool, String, String)> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| GitError::Io {
            context: "cannot start git (is it installed and on PATH?)".into(),
            source,
        })?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr)
            .trim()
            .replace('\n', " "),
    ))
}

/// `git update-ref --stdin` with one transaction: every update happens or none does, and each
/// names the value it expects (compare-and-swap).
pub fn update_refs(dir: &Path, transaction: &str, message: &str) -> Result<()> {
    let input = format!("start\n{transaction}prepare\ncommit\n");
    git_input(
        dir,
        &["update-ref", "-m", message, "--stdin"],
        input.as_bytes(),
    )
    .map(drop)
}

/// `git -C dir args…` with `input` on its stdin; its stdout, or stderr as the error.
pub fn git_input(dir: &Path, args: &[&str], input: &[u8]) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| GitError::Io {
            context: "cannot start git (is it installed and on PATH?)".into(),
            source,
        })?;
    // Written from a thread: git may fill its stdout before it has read all of its input.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        std::thread::spawn(move || {
            // git's own error (on stderr) says more than the EPIPE of a git that died early.
            let _ = gs_util::without_sigpipe(|| stdin.write_all(&input));
        })
    });
    let out = child.wait_with_output().map_err(|source| GitError::Io {
        context: format!("git {} did not finish", args.first().unwrap_or(&"")),
        source,
    })?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    if !out.status.success() {
        return Err(GitError::Cli {
            cmd: format!("git {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', " "),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The work trees (main and linked) that have `refs/heads/BRANCH` checked out.
pub fn worktrees_on(dir: &Path, branch: &str) -> Result<Vec<std::path::PathBuf>> {
    let listing = git(dir, &["worktree", "list", "--porcelain"])?;
    let wanted = format!("branch refs/heads/{branch}");
    let mut out = Vec::new();
    let mut current: Option<&str> = None;
    for line in listing.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            current = Some(p);
        } else if line == wanted {
            if let Some(p) = current {
                out.push(std::path::PathBuf::from(p));
            }
        }
    }
    Ok(out)
}
