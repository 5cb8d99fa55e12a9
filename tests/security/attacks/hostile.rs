//! What a hostile commit controls outside its sandbox: its config (which may only tighten the
//! user's policy), the paths the supervisor reads for it (never followed), the size of what it
//! writes (bounded on every backing), and the notes ref it races for. Each attack runs as root
//! and, where the machine allows it, as the unprivileged user `nobody`.

use crate::common::World;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn user_config(w: &World, toml: &str) {
    let dir = w.path("config/git-sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
    w.own(&w.path("config"));
}

/// Commit `toml` as the repository's config and run HEAD; returns the record.
fn run_with(w: &World, repo: &Path, toml: &str) -> Value {
    w.commit(repo, &[(".sandbox.toml", toml)], "hostile config");
    let o = w.sandbox(repo, &["run", "--json"]);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    o.json()[0].clone()
}

/// The worlds to attack in: root, and `nobody` when we are root.
fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    match World::unprivileged() {
        Some(w) => out.push(("nobody", w)),
        None => eprintln!("not root: the unprivileged variant runs as this user only"),
    }
    out
}

const QUICK: &str = "[analysis]\nenabled = false\n";

#[test]
fn a_committed_config_cannot_lift_or_zero_a_limit() {
    for (who, w) in worlds() {
        user_config(
            &w,
            "[limits]\nmemory_mb = 512\ncpu_seconds = 20\nopen_files = 256\n",
        );
        let repo = w.new_repo("zero");
        for key in [
            "memory_mb",
            "cpu_seconds",
            "open_files",
            "file_size_mb",
            "processes",
            "cpu_cores",
        ] {
            for value in ["0", "-1", "99999999999999", "\"unlimited\""] {
                let rec = run_with(
                    &w,
                    &repo,
                    &format!("[test]\ncommand = \"true\"\n[limits]\n{key} = {value}\n{QUICK}"),
                );
                assert_eq!(rec["status"], "error", "{who} {key}={value}: {rec}");
                assert_eq!(rec["tests"], Value::Null, "nothing ran: {rec}");
                let error = rec["error"].as_str().unwrap();
                assert!(
                    error.contains(&format!("key `limits.{key}`")),
                    "{who} {key}={value}: {error}"
                );
            }
        }
        // A real value tightens, and the record says what the kernel applied.
        let rec = run_with(
            &w,
            &repo,
            &format!("[test]\ncommand = \"ulimit -n\"\n[limits]\nmemory_mb = 300\nopen_files = 100\n{QUICK}"),
        );
        assert_eq!(rec["status"], "passed", "{who}: {rec}");
        let limits = &rec["tests"]["limits"];
        if who == "root" {
            // Memory in use is the cgroup's to limit: no address-space limit beside it.
            assert_eq!(limits["rlimit_as_mb"], Value::Null, "{who}: {limits}");
            assert_eq!(limits["memory_by"], "cgroup", "{who}: {limits}");
        } else {
            assert_eq!(limits["rlimit_as_mb"], 300, "{who}: {limits}");
            assert_eq!(limits["memory_by"], "address space", "{who}: {limits}");
        }
        assert_eq!(limits["rlimit_nofile"], 100, "{who}: {limits}");
        assert_eq!(limits["rlimit_cpu_s"], 20, "the user's ceiling: {limits}");
        assert_eq!(rec["tests"]["output_tail"], "100", "{who}: {rec}");
        if who == "root" {
            assert_eq!(limits["cgroup_memory_mb"], 300, "{limits}");
        }
        // Asking for more than the user allows gets the user's policy.
        let rec = run_with(
            &w,
            &repo,
            &format!("[test]\ncommand = \"ulimit -n\"\n[limits]\nopen_files = 5000\n{QUICK}"),
        );
        assert_eq!(rec["tests"]["limits"]["rlimit_nofile"], 256, "{who}: {rec}");
        assert_eq!(rec["tests"]["output_tail"], "256");
    }
}

#[test]
fn the_users_timeout_is_a_ceiling() {
    for (who, w) in worlds() {
        user_config(&w, "[test]\ntimeout = \"2s\"\n");
        let repo = w.new_repo("slow");
        let started = Instant::now();
        let rec = run_with(
            &w,
            &repo,
            &format!("[test]\ncommand = \"sleep 30\"\ntimeout = \"1h\"\n{QUICK}"),
        );
        assert!(started.elapsed() < Duration::from_secs(15), "{who}");
        assert_eq!(rec["status"], "timeout", "{who}: {rec}");
        assert_eq!(rec["tests"]["limits"]["timeout_ms"], 2000, "{who}: {rec}");
    }
}

#[test]
fn report_paths_outside_the_checkout_are_config_errors() {
    let w = World::new();
    let repo = w.new_repo("junit-paths");
    for path in [
        "/etc/hostname",
        "../../../../etc/passwd",
        "reports/../../x.xml",
    ] {
        let rec = run_with(
            &w,
            &repo,
            &format!("[test]\ncommand = \"true\"\njunit = \"{path}\"\n{QUICK}"),
        );
        assert_eq!(rec["status"], "error", "{path}: {rec}");
        let error = rec["error"].as_str().unwrap();
        assert!(error.contains("key `test.junit`"), "{path}: {error}");
    }
}

#[test]
fn a_report_the_test_turns_into_a_link_or_a_fifo_is_never_followed() {
    for (who, w) in worlds() {
        // A host file an attacker would like in the note, shaped as a JUnit report.
        let secret = w.path("secret.xml");
        std::fs::write(
            &secret,
            "<testsuite tests=\"1\" failures=\"1\"><testcase name=\"t\"><failure message=\"TOPSECRET-4711\"/></testcase></testsuite>",
        )
        .unwrap();
        w.own(&secret);
        let repo = w.new_repo("links");
        for (how, command, says) in [
            (
                "link to a host file",
                format!("ln -s {} report.xml", secret.display()),
                "symlink",
            ),
            (
                "link to /dev/zero",
                "ln -s /dev/zero report.xml".to_string(),
                "symlink",
            ),
            ("FIFO", "mkfifo report.xml".to_string(), "FIFO"),
            ("directory", "mkdir report.xml".to_string(), "directory"),
        ] {
            let started = Instant::now();
            let rec = run_with(
                &w,
                &repo,
                &format!("[test]\ncommand = \"{command}\"\njunit = \"report.xml\"\ntimeout = \"20s\"\n{QUICK}"),
            );
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{who} {how}: took {:?}",
                started.elapsed()
            );
            let text = rec.to_string();
            assert!(!text.contains("TOPSECRET"), "{who} {how}: {text}");
            assert_eq!(rec["status"], "passed", "{who} {how}: {rec}");
            let warning = rec["warnings"][0].as_str().unwrap_or_default();
            assert!(
                warning.contains("report.xml") && warning.contains(says),
                "{who} {how}: {rec}"
            );
        }
        // A real report is read.
        let rec = run_with(
            &w,
            &repo,
            &format!("[test]\ncommand = \"printf '<testsuite tests=\\\\\\\"3\\\\\\\" failures=\\\\\\\"0\\\\\\\"><testcase name=\\\\\\\"a\\\\\\\"/><testcase name=\\\\\\\"b\\\\\\\"/><testcase name=\\\\\\\"c\\\\\\\"/></testsuite>' > report.xml\"\njunit = \"report.xml\"\n{QUICK}"),
        );
        assert_eq!(rec["tests"]["framework"], "junit", "{who}: {rec}");
        assert_eq!(rec["tests"]["passed"], 3, "{who}: {rec}");
    }
}

#[test]
fn what_a_run_writes_is_bounded_on_every_backing() {
    for (who, mut w) in worlds() {
        // Checkouts on a disk, not on a tmpfs.
        let scratch = w.path("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        w.own(&scratch);
        w.extra_env
            .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
        user_config(&w, "[limits]\ndisk_mb = 64\n");
        let repo = w.new_repo("fill");
        let rec = run_with(
            &w,
            &repo,
            &format!(
                "[test]\ncommand = \"dd if=/dev/zero of=big bs=1M count=200 2>&1 | grep -o 'No space left' | head -1; dd if=/dev/zero of=$HOME/big bs=1M count=200 2>&1 | grep -o 'No space left' | head -1; ls -l big | cut -d' ' -f5\"\n{QUICK}"
            ),
        );
        let out = rec["tests"]["output_tail"].as_str().unwrap();
        assert_eq!(
            out.matches("No space left").count(),
            2,
            "the tree and HOME share the bound: {who}: {rec}"
        );
        let size: u64 = out.lines().last().unwrap().trim().parse().unwrap();
        assert!(size <= 64 << 20, "{who}: the tree file grew to {size}");
        assert_eq!(rec["tests"]["limits"]["disk_mb"], 64, "{who}: {rec}");
        // What the run wrote is gone with it; only the kept checkout (the commit's own small
        // tree) stays on the disk.
        let left = crate::common::files_under(&scratch);
        let bytes: u64 = left
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .map(|m| m.len())
            .sum();
        assert!(bytes < 1 << 20, "{who}: {bytes} bytes left: {left:?}");
        assert!(!left.iter().any(|p| p.ends_with("big")), "{who}: {left:?}");
    }
}

#[test]
fn a_racing_git_notes_add_loses_no_result_and_stops_no_range() {
    let w = World::new();
    let repo = w.new_repo("race");
    let config = |command: &str| format!("[test]\ncommand = \"{command}\"\n{QUICK}");
    w.commit(&repo, &[(".sandbox.toml", &config("true"))], "quick");
    let base = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // 40 commits, shared out among the run's workers (one per core). The 11th and the 26th take
    // long enough that notes are written midway (a batch older than 2 s is written), so a worker
    // can end while the writer below still races the others; the last takes long enough that
    // the writer has stopped well before the run's last check of its notes. (A writer still
    // running when the run has returned can drop a note after it: no tool can stop that.)
    let mut ids = Vec::new();
    for i in 0..40 {
        let command = match i {
            10 | 25 => "sleep 2.2",
            39 => "sleep 1.5",
            _ => "true",
        };
        ids.push(w.commit(
            &repo,
            &[
                ("n.txt", &i.to_string()),
                (".sandbox.toml", &config(command)),
            ],
            &format!("c{i}"),
        ));
    }
    // Commits the user annotates by hand, in the same notes ref, until a while after the run's
    // second batch of notes has appeared.
    let side: Vec<String> = (0..50)
        .map(|k| {
            w.git(
                &repo,
                &[
                    "commit-tree",
                    "-p",
                    &base,
                    "-m",
                    &format!("side {k}"),
                    "HEAD^{tree}",
                ],
            )
            .trim()
            .to_string()
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let annotator = {
        let (stop, repo) = (stop.clone(), repo.clone());
        let mut cmds = Vec::new();
        for id in &side {
            let mut c = std::process::Command::new("git");
            c.args(["notes", "--ref=sandbox", "add", "-f", "-m", "by hand", id])
                .current_dir(&repo);
            w.apply_env(&mut c);
            cmds.push(c);
        }
        // 26 runs in the index: the notes of more than half the run are written (the index
        // follows the notes, and unlike them it is not at this writer's mercy).
        let index = w.data().join("index.db");
        let written = move || {
            rusqlite::Connection::open(&index)
                .and_then(|c| c.query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0)))
                .is_ok_and(|n| n >= 26)
        };
        std::thread::spawn(move || {
            // How many annotations were made after that.
            let mut after: Option<usize> = None;
            for k in 0.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) || after >= Some(15) {
                    break;
                }
                let len = cmds.len();
                let _ = cmds[k % len].output();
                match after.as_mut() {
                    Some(n) => *n += 1,
                    None => {
                        if written() {
                            after = Some(0);
                        }
                    }
                }
            }
            after.unwrap_or(0)
        })
    };
    let o = w.sandbox(&repo, &["run", &format!("{base}..HEAD")]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let raced = annotator.join().unwrap();
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        raced > 0,
        "the writer ran on after the run's notes: {raced}"
    );
    assert_eq!(o.stdout.lines().count(), 40, "every commit printed: {o:?}");
    for line in o.stdout.lines() {
        let short = line.split_whitespace().nth(1).unwrap();
        let id = ids.iter().find(|i| i.starts_with(short)).unwrap();
        let note = w.note(&repo, id);
        assert!(
            note.as_ref().is_some_and(|n| n["commit"] == id.as_str()),
            "printed {short} (commit {} of 40) but its note is {note:?}; the writer made {raced} notes after 26 were indexed; {}",
            ids.iter().position(|i| i == id).unwrap_or(99),
            o.stderr + &w.git(&repo, &["log", "--format=%h %s", "-12", "refs/notes/sandbox"])
        );
    }
}

#[test]
fn a_corrupt_index_names_the_recovery_and_the_recovery_works() {
    let w = World::new();
    let created = w.new_repo("kept");
    let adopted = w.work().join("adopted");
    std::fs::create_dir_all(&adopted).unwrap();
    w.git(&adopted, &["init", "-q", "-b", "main"]);
    w.commit(&adopted, &[("a.txt", "a")], "a");
    assert_eq!(w.sandbox(&adopted, &["init"]).code, 0);
    assert_eq!(w.sandbox(&created, &["run"]).code, 0);
    let index = w.data().join("index.db");
    for f in ["index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    std::fs::write(&index, b"garbage, not a database".repeat(200)).unwrap();
    let o = w.sandbox(&w.work(), &["status"]);
    assert_ne!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains("is corrupt") && o.stderr.contains("reindex"),
        "{o:?}"
    );
    // The recovery it names.
    std::fs::rename(&index, w.data().join("index.db.bad")).unwrap();
    let o = w.sandbox(&w.work(), &["reindex"]);
    assert_eq!(o.code, 0, "{o:?}");
    let list = w.sandbox(&w.work(), &["list", "--json"]).json();
    assert_eq!(
        list["total"], 2,
        "both repositories, wherever adopted: {list}"
    );
    let log = w.sandbox(&created, &["log", "-n", "1"]);
    assert!(log.stdout.starts_with("✔ "), "{log:?}");
}

#[test]
fn a_huge_committed_config_is_an_error_not_a_big_read() {
    let w = World::new();
    let repo = w.new_repo("huge-config");
    let huge = format!("# {}\n[test]\ncommand = \"true\"\n", "x".repeat(3 << 20));
    let rec = run_with(&w, &repo, &huge);
    assert_eq!(rec["status"], "error", "{}", rec["error"]);
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains(".sandbox.toml: the file is") && error.contains("1 MiB"),
        "{error}"
    );
}
