//! What a hostile commit or a careless umask must not get: private data files, reads that do not
//! follow the commit's symlinks, and checkouts bounded by a ceiling.

use crate::common::{World, BIN};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Run `git-sandbox ARGS` in `dir` under `umask 000`.
fn sandbox_umask0(w: &World, dir: &Path, args: &[&str]) -> crate::common::Out {
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
    crate::common::Out {
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

/// `git-sandbox ARGS` with its address space capped (so a regression that reads `/dev/zero`
/// fails the test instead of eating the machine), and its peak RSS in KiB.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives the peak RSS
fn sandbox_measured(w: &World, dir: &Path, args: &[&str]) -> (crate::common::Out, u64) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_path = w.path(&format!("measured-{n}.out"));
    let err_path = w.path(&format!("measured-{n}.err"));
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 3 << 30,
                rlim_max: 3 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 reaps the child we spawned (std never waits for it).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let out = crate::common::Out {
        code,
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    };
    (out, usage.ru_maxrss as u64)
}

/// `git-sandbox ARGS` and the peak RSS (VmHWM, KiB) of that process alone, polled while it runs
/// (the high-water mark only grows, so a late read sees the peak of everything before it).
fn sandbox_polled(w: &World, dir: &Path, args: &[&str]) -> (crate::common::Out, u64) {
    let out_path = w.path("polled.out");
    let err_path = w.path("polled.err");
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = std::fs::read_to_string(&status_file).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        }) {
            peak = peak.max(hwm);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let out = crate::common::Out {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    };
    (out, peak)
}

fn commit_symlink(w: &World, repo: &Path, name: &str, target: &Path) -> String {
    let link = repo.join(name);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(target, &link).unwrap();
    w.git(repo, &["add", name]);
    w.git(
        repo,
        &[
            "commit",
            "-q",
            "-m",
            &format!("{name} -> {}", target.display()),
        ],
    );
    w.git(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn a_committed_symlink_manifest_is_not_followed() {
    let w = World::new();
    let repo = w.new_repo("links");
    // Only the detected command decides what runs: no config, no other test files.
    w.git(&repo, &["rm", "-q", "-r", "--cached", "."]);
    for e in std::fs::read_dir(&repo).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != ".git" {
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
    }
    w.commit(&repo, &[("README.md", "nothing to test\n")], "bare");
    let planted = w.path("host/package.json");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::write(&planted, r#"{"scripts":{"test":"echo HOSTSECRET-4711"}}"#).unwrap();
    for target in [Path::new("/dev/zero"), planted.as_path()] {
        let commit = commit_symlink(&w, &repo, "package.json", target);
        let started = std::time::Instant::now();
        let (o, peak_kib) = sandbox_measured(&w, &repo, &["run", "--json"]);
        assert_eq!(o.code, 0, "{}: {o:?}", target.display());
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert!(
            peak_kib < 512 * 1024,
            "the run peaked at {peak_kib} KiB with {}",
            target.display()
        );
        let note = w.note(&repo, &commit).expect("a note");
        assert_eq!(note["status"], "passed", "{note}");
        assert_ne!(note["tests"]["framework"], "npm", "{note}");
        let everything = format!("{o:?}{note}");
        assert!(!everything.contains("HOSTSECRET"), "{everything}");
    }
    let logs = w.data().join("logs");
    for e in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap_or_default();
            assert!(!text.contains("HOSTSECRET"), "{}", f.path().display());
        }
    }
}

/// `len` bytes that zlib cannot shrink to nothing, the same for the same seed.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn commit_bytes(w: &World, repo: &Path, files: &[(&str, &[u8])], message: &str) -> String {
    for (rel, body) in files {
        let p = repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
        w.git(repo, &["add", rel]);
    }
    w.git(repo, &["commit", "-q", "-m", message]);
    w.git(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

fn scratch_entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_tree_over_the_checkout_ceiling_is_an_error_and_writes_nothing() {
    let mut w = World::new();
    let scratch = w.path("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    let cfg = w.path("config/git-sandbox/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "[limits]\ncheckout_mb = 2\n").unwrap();
    let repo = w.new_repo("ceiling");
    // The repository may not raise the ceiling it is held to.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"echo ran\"\n[limits]\ncheckout_mb = 100\n",
        )],
        "try to raise",
    );
    let commit = commit_bytes(&w, &repo, &[("data.bin", &noise(3 << 20, 7))], "3 MiB");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "error", "{rec}");
    let err = rec["error"].as_str().unwrap();
    assert!(
        err.starts_with("checkout failed: the tree is 3.0 MiB, over the checkout ceiling of 2 MiB; raise [limits] checkout_mb in your user config"),
        "{err}"
    );
    assert_eq!(w.note(&repo, &commit).unwrap()["status"], "error");
    // No run directory is left, and the kept checkouts hold nothing of the refused tree.
    let left: Vec<String> = scratch_entries(&scratch)
        .into_iter()
        .filter(|n| {
            n.starts_with("git-sandbox-")
                && !n.starts_with("git-sandbox-probe")
                && !n.starts_with("git-sandbox-cache-")
        })
        .collect();
    assert!(left.is_empty(), "left in the scratch dir: {left:?}");
    assert!(
        !crate::common::files_under(&scratch)
            .iter()
            .any(|p| p.ends_with("data.bin")),
        "the refused tree was written somewhere"
    );
    // Raised in the user config, the same commit runs.
    std::fs::write(&cfg, "[limits]\ncheckout_mb = 8\n").unwrap();
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["status"], "passed");
}

#[test]
fn blobs_over_the_streaming_threshold_check_out_byte_identical() {
    let w = World::new();
    let repo = w.new_repo("big");
    let big = noise(48 << 20, 11);
    let tool = noise(17 << 20, 13);
    let mut script = b"#!/bin/sh\nexit 0\n".to_vec();
    script.extend_from_slice(&tool);
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"test ! -e big.bin || { sha256sum big.bin deep/dir/tool.sh && test -x deep/dir/tool.sh && test ! -x big.bin && test -f small.txt; }\"\n[analysis]\nenabled = false\n",
        )],
        "configure",
    );
    // What the supervisor holds anyway (its own pages, the index, the repository's caches),
    // from a run of the same repository without the large blobs: the first run sets up the
    // index and the kept checkout, the measured one is a forced re-run like the one below.
    assert_eq!(w.sandbox(&repo, &["run", "--json"]).code, 0);
    let (o, baseline_kib) = sandbox_polled(&w, &repo, &["run", "--json", "--force"]);
    assert_eq!(o.code, 0, "{o:?}");
    let commit = commit_bytes(
        &w,
        &repo,
        &[
            ("big.bin", &big),
            ("deep/dir/tool.sh", &script),
            ("small.txt", b"small\n"),
        ],
        "large blobs",
    );
    w.git(&repo, &["update-index", "--chmod=+x", "deep/dir/tool.sh"]);
    w.git(&repo, &["commit", "-q", "--amend", "--no-edit"]);
    let commit_after = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    assert_ne!(commit, commit_after);
    let (o, supervisor_peak_kib) = sandbox_polled(&w, &repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["status"], "passed", "{}", o.stdout);
    let log = std::fs::read_dir(w.data().join("logs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join(format!("{commit_after}.log"));
    let output = std::fs::read_to_string(&log).unwrap();
    for rel in ["big.bin", "deep/dir/tool.sh"] {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            &format!("git cat-file blob HEAD:{rel} | sha256sum | cut -d' ' -f1"),
        ])
        .current_dir(&repo);
        w.apply_env(&mut cmd);
        let want = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        let want = want.trim();
        assert_eq!(want.len(), 64);
        assert!(
            output.contains(&format!("{want}  {rel}")),
            "{rel}: want {want} in\n{output}"
        );
    }
    // The supervisor never held the blob whole: its peak grew by well under the blob's size
    // over the run without it (holding it would add all 48 MiB, and the 17 MiB one besides).
    let grown = supervisor_peak_kib.saturating_sub(baseline_kib);
    assert!(
        grown < (big.len() / 1024 / 2) as u64,
        "the supervisor peaked at {supervisor_peak_kib} KiB with a {} KiB blob, {grown} KiB over \
         {baseline_kib} KiB without it",
        big.len() / 1024
    );
}
