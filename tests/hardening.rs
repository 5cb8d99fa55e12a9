//! What a hostile commit or a careless umask must not get: private data files, reads that do not
//! follow the commit's symlinks, and checkouts bounded by a ceiling.

mod common;

use common::{World, BIN};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Run `git-sandbox ARGS` in `dir` under `umask 000`.
fn sandbox_umask0(w: &World, dir: &Path, args: &[&str]) -> common::Out {
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    common::Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o777
}

#[test]
fn data_files_are_private_under_umask_000() {
    let mut w = World::new();
    // A data dir that does not exist yet, so the tool creates it.
    let home = w.path("fresh/data");
    w.extra_env
        .push(("GIT_SANDBOX_HOME".into(), home.display().to_string()));
    let o = sandbox_umask0(&w, &w.work(), &["new", "r", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let repo = std::path::PathBuf::from(o.json()["path"].as_str().unwrap().to_string());
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"echo private-output\"\n",
        )],
        "configure",
    );
    let o = sandbox_umask0(&w, &repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let commit = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let repo_logs: Vec<_> = std::fs::read_dir(home.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(repo_logs.len(), 1, "{repo_logs:?}");
    let log = repo_logs[0].join(format!("{commit}.log"));
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("private-output"));
    for dir in [&home, &home.join("logs"), &repo_logs[0]] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    for file in ["index.db", "probe.json"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
    // SQLite removes these when the last connection closes (the daemon test sees them open).
    for file in ["index.db-wal", "index.db-shm"] {
        if home.join(file).exists() {
            assert_eq!(mode(&home.join(file)), 0o600, "{file}");
        }
    }
    assert_eq!(mode(&log), 0o600, "{}", log.display());
}
