//! What every area needs to find a repository's parts: its remotes and their URLs, and the
//! names users give (repositories, experiments, organisations).

use super::{AppError, Context, Result};
use gs_git as git;
use gs_git::remote;
use std::path::Path;

/// A name a user gave (a repository's, an experiment's), or a usage error saying what is wrong.
pub fn check_name(name: &str) -> Result<()> {
    match gs_util::name_problem(name) {
        None => Ok(()),
        Some(problem) => Err(
            AppError::usage(format!("invalid name {name:?}: it {problem}"))
                .hint("use letters, digits, '-', '_' and '.' (at most 100 characters)"),
        ),
    }
}

/// The remote to use: the one named (it must exist), else the current branch's, else `origin`.
pub fn remote_name(dir: &Path, named: Option<&str>) -> Result<String> {
    let all = remote::remotes(dir)?;
    let listed = || {
        if all.is_empty() {
            "add one: git remote add origin URL".to_string()
        } else {
            format!("remotes here: {}", all.join(", "))
        }
    };
    if let Some(n) = named {
        if all.iter().any(|r| r == n) {
            return Ok(n.to_string());
        }
        return Err(super::AppError::usage(format!("no remote named {n:?}")).hint(listed()));
    }
    let current = git::cli::git(dir, &["symbolic-ref", "-q", "--short", "HEAD"])
        .ok()
        .map(|s| s.trim().to_string());
    if let Some(r) = current
        .and_then(|b| git::cli::get_config(dir, &format!("branch.{b}.remote")))
        .filter(|r| all.contains(r))
    {
        return Ok(r);
    }
    if all.iter().any(|r| r == "origin") {
        return Ok("origin".into());
    }
    Err(match all.as_slice() {
        [] => super::AppError::usage("this repository has no remote")
            .hint("add one: git remote add origin URL"),
        _ => super::AppError::usage("no remote named \"origin\", and the current branch has none")
            .hint(format!("name one: git sandbox push REMOTE ({})", listed())),
    })
}

/// The remote whose branches the daemon follows for `repo` (`[remote] poll`): its
/// remote-tracking refs are watched like its own branches.
pub fn followed(ctx: &Context, repo: &gs_git::Repository) -> Option<String> {
    ctx.layers.resolve().remote.poll?;
    let dir = git::repo_root(repo);
    if remote::remotes(&dir).ok()?.is_empty() {
        return None;
    }
    remote_name(&dir, None).ok()
}

/// The URL of the remote `name` of the repository at `root`, as the registry keeps it for other machines.
pub fn remote_url_of(root: &Path, name: &str) -> Option<String> {
    let url = git::remote::shown_url(root, name);
    if url.is_empty() {
        return None;
    }
    let local = !url.contains("://") && !url.contains(':');
    Some(if local && Path::new(&url).is_relative() {
        std::fs::canonicalize(root.join(&url))
            .map(|p| p.display().to_string())
            .unwrap_or(url)
    } else {
        url
    })
}
