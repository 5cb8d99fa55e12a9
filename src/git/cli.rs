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
