//! The git command line for unit tests that build repositories: no system or global config, a
//! fixed identity.

use std::path::Path;
use std::process::Command;

/// Run `git args` in `dir` and return its stdout; panics (naming the call) when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_env(dir, args, &[])
}

/// [`git`] with more environment (dates, say).
pub fn git_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "a")
        .env("GIT_AUTHOR_EMAIL", "a@b")
        .env("GIT_COMMITTER_NAME", "a")
        .env("GIT_COMMITTER_EMAIL", "a@b")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit holding `files` (path, content); its directory and the open
/// repository.
pub fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, gix::Repository) {
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q"]);
    for (p, body) in files {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, body).unwrap();
    }
    git(d.path(), &["add", "-A", "-f"]);
    git(d.path(), &["commit", "-qm", "files"]);
    let repo = gix::open(d.path()).unwrap();
    (d, repo)
}

/// The tree of HEAD.
pub fn head_tree(repo: &gix::Repository) -> gix::ObjectId {
    repo.head_commit().unwrap().tree_id().unwrap().detach()
}
