//! Loose refs kept few. git (2.47) starts the `reference-transaction` hook twice for every loose
//! ref `git pack-refs` prunes, whatever the hook does, so in a repository where agents made
//! 20,000 branches the next `git gc` starts any installed hook 40,000 times (77 s with an empty
//! `exit 0` hook against 24.5 s with none, on this machine kind). git-sandbox's own hook is such
//! a hook. So once a repository holds [`PACK_AT`] loose refs that `pack-refs` would pack, they
//! are packed here, with no hook run: packing changes no ref's value (every ref reads the same
//! before and after), it is what `git gc` does anyway, and git 2.47's `pack-refs --auto` packs
//! at a similar count. A later `git gc` then prunes fewer than [`PACK_AT`] loose refs.

use super::{GitError, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// From this many loose refs on, [`pack_if_many`] packs them. git 2.47's own `pack-refs --auto`
/// packs from 16 to about 80, by the size of `packed-refs`; a `git gc` with fewer loose refs
/// than this starts the hook fewer than twice as many times (under 0.2 s on this machine kind).
pub const PACK_AT: usize = 100;

/// Top-level folders of `refs/` that are per work tree: `pack-refs` never packs them.
const PER_WORKTREE: [&str; 3] = ["bisect", "worktree", "rewritten"];

/// How many loose refs under the repository's `refs/` `git pack-refs --all` would pack, counted
/// up to `limit` (the count stops there). Symbolic refs (`refs/remotes/origin/HEAD`), lock files
/// and per-work-tree refs stay loose, so they are not counted; links are not followed.
pub fn count_loose(repo: &gix::Repository, limit: usize) -> usize {
    let refs = repo.common_dir().join("refs");
    let mut count = 0;
    let mut dirs = vec![(refs.clone(), true)];
    while let Some((dir, top)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if kind.is_dir() {
                if !(top && PER_WORKTREE.iter().any(|p| name == *p)) {
                    dirs.push((entry.path(), false));
                }
            } else if kind.is_file()
                && !name.as_encoded_bytes().ends_with(b".lock")
                && !is_symbolic(&entry.path())
            {
                count += 1;
                if count >= limit {
                    return count;
                }
            }
        }
    }
    count
}

/// Whether a loose ref's file holds a symbolic ref (`ref: refs/heads/main`). Opened without
/// following a link or waiting on a FIFO that replaced it since it was listed: the daemon that
/// counts may be root.
fn is_symbolic(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut head = [0u8; 4];
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"ref:")
}

/// `git pack-refs --all` with no hook run (`core.hooksPath` pointed where there is none), in the
/// repository's common dir: every loose ref lands in `packed-refs`, and its file is removed.
pub fn pack(repo: &gix::Repository) -> Result<()> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo.common_dir())
        .args(["-c", "core.hooksPath=/dev/null", "pack-refs", "--all"])
        // The hook's environment may name another work tree's dirs.
        .env_remove("GIT_DIR")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| GitError::Io {
            context: "cannot start git (is it installed and on PATH?)".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(GitError::Cli {
            cmd: "git pack-refs --all".into(),
            stderr: String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', " "),
        });
    }
    Ok(())
}

/// [`pack`] when the repository holds at least [`PACK_AT`] loose refs; whether it did.
pub fn pack_if_many(repo: &gix::Repository) -> Result<bool> {
    if count_loose(repo, PACK_AT) < PACK_AT {
        return Ok(false);
    }
    pack(repo)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::git;

    #[test]
    fn many_loose_refs_are_packed_with_no_hook_run_and_every_ref_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        git(path, &["init", "-q", "-b", "main"]);
        git(path, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let head = git(path, &["rev-parse", "HEAD"]).trim().to_string();
        let hooks = path.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        let started = path.join("hook-started");
        let hook = hooks.join("reference-transaction");
        std::fs::write(
            &hook,
            format!("#!/bin/sh\necho \"$1\" >> '{}'\n", started.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let batch: String = (0..PACK_AT - 2)
            .map(|i| format!("create refs/heads/experiment/b{i} {head}\n"))
            .collect();
        crate::cli::update_refs(path, &batch, "test").unwrap();
        std::fs::remove_file(&started).unwrap();
        // A symbolic ref, a lock and a per-work-tree ref are not counted.
        std::fs::create_dir_all(path.join(".git/refs/remotes/origin")).unwrap();
        std::fs::write(
            path.join(".git/refs/remotes/origin/HEAD"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        std::fs::write(path.join(".git/refs/heads/x.lock"), format!("{head}\n")).unwrap();
        // Nor a FIFO or a link (never opened: a read of a FIFO would wait forever).
        let fifo =
            std::ffi::CString::new(path.join(".git/refs/heads/fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("/etc/passwd", path.join(".git/refs/heads/link")).unwrap();
        std::fs::create_dir_all(path.join(".git/refs/bisect")).unwrap();
        std::fs::write(path.join(".git/refs/bisect/bad"), format!("{head}\n")).unwrap();
        let repo = crate::open(path).unwrap();
        // main and the branches.
        assert_eq!(count_loose(&repo, usize::MAX), PACK_AT - 1);
        assert!(!pack_if_many(&repo).unwrap(), "packed below the count");
        assert!(path.join(".git/refs/heads/experiment/b0").exists());

        git(path, &["branch", "experiment/last", &head]);
        std::fs::remove_file(&started).unwrap();
        let before = git(path, &["for-each-ref", "--format=%(refname) %(objectname)"]);
        let repo = crate::open(path).unwrap();
        assert_eq!(count_loose(&repo, usize::MAX), PACK_AT);
        assert_eq!(count_loose(&repo, 10), 10, "the count stops at its limit");
        assert!(pack_if_many(&repo).unwrap());
        assert_eq!(
            git(path, &["for-each-ref", "--format=%(refname) %(objectname)"]),
            before
        );
        assert!(!path.join(".git/refs/heads/experiment/b0").exists());
        assert!(!path.join(".git/refs/heads/main").exists());
        assert_eq!(count_loose(&repo, usize::MAX), 0);
        assert!(
            !started.exists(),
            "the hook ran: {}",
            std::fs::read_to_string(&started).unwrap_or_default()
        );
        // What stays loose stays.
        assert!(path.join(".git/refs/remotes/origin/HEAD").exists());
        assert!(path.join(".git/refs/bisect/bad").exists());
    }
}
