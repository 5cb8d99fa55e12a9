//! The call the installed hooks make (`notify --hook NAME --stdin`), read apart from the rest of
//! the command line so that it stays cheap inside every `git commit`: it queues what the parsed
//! command queues, answers bad arguments as the parser does, and leaves the index's file alone.

use crate::common;

use common::{Out, World};
use std::path::Path;

fn pending(w: &World) -> u64 {
    w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]["pending_jobs"]
        .as_u64()
        .unwrap()
}

/// `git-sandbox ARGS` in `repo` with `input` on stdin, as the hook runs it.
fn notify(w: &World, repo: &Path, args: &[&str], input: &str) -> Out {
    use std::io::Write;
    let mut cmd = std::process::Command::new(common::BIN);
    cmd.args(args).current_dir(repo);
    w.apply_env(&mut cmd);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Move `main` to a new commit with the hooks off; the transaction line the hook would get.
fn commit_quietly(w: &World, repo: &Path) -> String {
    let old = w.git(repo, &["rev-parse", "HEAD"]).trim().to_string();
    let tree = format!("{old}^{{tree}}");
    let new = w.git(repo, &["commit-tree", &tree, "-p", &old, "-m", "quiet"]);
    let new = new.trim();
    let none = w.path("no-hooks");
    std::fs::create_dir_all(&none).unwrap();
    let hooks = format!("core.hooksPath={}", none.display());
    w.git(
        repo,
        &["-c", &hooks, "update-ref", "refs/heads/main", new, &old],
    );
    format!("{old} {new} refs/heads/main\n")
}

#[test]
fn the_hooks_call_queues_what_the_parsed_command_queues_with_the_same_output() {
    let w = World::new();
    let repo = w.new_repo("calls");
    let hook_call = ["notify", "--hook", "reference-transaction", "--stdin"];
    // The same command in an order only the parser reads.
    let parsed = ["notify", "--stdin", "--hook=reference-transaction"];
    for broken in [false, true] {
        if broken {
            // A broken repository config: a warning, the default watched branches, still queued.
            std::fs::write(repo.join(".sandbox.toml"), "[watch\nbranches = 1\n").unwrap();
        }
        let mut outs = Vec::new();
        for args in [&hook_call[..], &parsed[..]] {
            let before = pending(&w);
            let o = notify(&w, &repo, args, &commit_quietly(&w, &repo));
            assert_eq!(o.code, 0, "{args:?}: {o:?}");
            assert_eq!(pending(&w), before + 1, "{args:?} queued the commit");
            outs.push((o.stdout, o.stderr));
        }
        assert_eq!(outs[0], outs[1], "broken config: {broken}");
        assert_eq!(outs[0].1.contains("warning:"), broken, "{outs:?}");
    }
    // Lines that are not a transaction's are skipped alike: nothing queued, nothing said.
    let before = pending(&w);
    std::fs::remove_file(repo.join(".sandbox.toml")).unwrap();
    let fast = notify(&w, &repo, &hook_call, "not a transaction\n");
    let slow = notify(&w, &repo, &parsed, "not a transaction\n");
    assert_eq!(
        (fast.code, &fast.stdout, &fast.stderr),
        (slow.code, &slow.stdout, &slow.stderr)
    );
    assert_eq!((fast.code, fast.stderr.as_str()), (0, ""), "{fast:?}");
    assert_eq!(pending(&w), before);
}

#[test]
fn the_hooks_call_with_bad_arguments_gets_the_parsers_one_line_errors() {
    let w = World::new();
    let repo = w.new_repo("bad-calls");
    for (args, names) in [
        (&["notify", "--hook"][..], "--hook"),
        (&["notify", "--hook", "--stdin"][..], "--hook"),
        (
            &[
                "notify",
                "--hook",
                "reference-transaction",
                "--stdin",
                "--bogus",
            ][..],
            "--bogus",
        ),
        (
            &["notify", "--hook", "reference-transaction", "extra"][..],
            "extra",
        ),
    ] {
        let o = notify(&w, &repo, args, "");
        assert_eq!(o.code, 2, "{args:?}: {o:?}");
        let first = o.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(names),
            "{args:?}: {o:?}"
        );
    }
    // `--help` after the hook's arguments is the command's help.
    let help = notify(
        &w,
        &repo,
        &[
            "notify",
            "--hook",
            "reference-transaction",
            "--stdin",
            "--help",
        ],
        "",
    );
    let plain = w.sandbox(&repo, &["notify", "--help"]);
    assert_eq!((help.code, &help.stdout), (0, &plain.stdout), "{help:?}");
    assert!(help.stdout.contains("--stdin"), "{help:?}");
}

#[test]
fn a_commits_hook_run_queues_it_without_rewriting_the_index_file() {
    use std::os::unix::fs::MetadataExt;
    let w = World::new();
    let repo = w.new_repo("quick");
    let before = pending(&w);
    let index = w.data().join("index.db");
    let stamp = || {
        let m = std::fs::metadata(&index).unwrap();
        (m.mtime(), m.mtime_nsec(), std::fs::read(&index).unwrap())
    };
    let was = stamp();
    // The hook's rows go to the WAL: copying them into the database file on the way out costs
    // fsyncs inside the user's `git commit`. The next command reads them all the same.
    w.commit(&repo, &[("a.txt", "a\n")], "one");
    w.commit(&repo, &[("b.txt", "b\n")], "two");
    assert!(stamp() == was, "the hook rewrote {}", index.display());
    assert_eq!(pending(&w), before + 2);
}

#[test]
fn the_wal_hook_runs_leave_behind_stays_small() {
    let w = World::new();
    let repo = w.new_repo("many-runs");
    let before = pending(&w);
    let wal = w.data().join("index.db-wal");
    let mut largest = 0;
    // Hook runs alone (no daemon, no other command): what they leave is read back by the next
    // process to open the index, so it must not grow with their number.
    for _ in 0..25 {
        let update = commit_quietly(&w, &repo);
        let o = notify(
            &w,
            &repo,
            &["notify", "--hook", "reference-transaction", "--stdin"],
            &update,
        );
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{o:?}");
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    assert!(largest <= 320 * 1024, "the WAL grew to {largest} bytes");
    assert_eq!(pending(&w), before + 25);
}

/// The spool files in this home (`$GIT_SANDBOX_HOME/spool`), with their text.
fn spooled(w: &World) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(w.data().join("spool"))
        .map(|d| {
            d.flatten()
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A commit's hook starts no process: the shell writes the branch it moved to the home's spool,
/// and the next command queues the commit before it reports (from a linked worktree too).
/// Without the spool the hook calls the binary as before.
#[test]
fn a_commits_hook_writes_the_spool_and_the_next_command_queues_its_commit() {
    let w = World::new();
    let repo = w.new_repo("spooled");
    let before = pending(&w);
    assert_eq!(spooled(&w), Vec::<String>::new());
    let id = w.commit(&repo, &[("a.txt", "a\n")], "one");
    let files = spooled(&w);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].contains(&format!("{id} refs/heads/main")) && files[0].ends_with("\nend\n"),
        "{files:?}"
    );
    // `log` takes it in before it reads: the commit is queued, the spool empty.
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert_eq!(log.code, 0, "{log:?}");
    assert!(log.stdout.contains("queued"), "{log:?}");
    assert_eq!(spooled(&w), Vec::<String>::new());
    assert_eq!(pending(&w), before + 1);

    // A linked worktree's commit names the worktree, which leads to the same repository.
    let tree = w.path("linked");
    w.git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "experiment/wt",
            tree.to_str().unwrap(),
        ],
    );
    let two = w.commit(&tree, &[("b.txt", "b\n")], "two");
    // Its branch's creation is a hook run of its own.
    let files = spooled(&w);
    assert!(
        files.iter().any(|f| f.contains(&format!(
            "cwd {}\n",
            std::fs::canonicalize(&tree).unwrap().display()
        )) && f.contains(&format!("{two} refs/heads/experiment/wt"))),
        "{files:?}"
    );
    assert_eq!(
        pending(&w),
        before + 2,
        "status queued the worktree's commit"
    );
    assert_eq!(spooled(&w), Vec::<String>::new());

    // No spool (a home made before it, or one this user cannot write): the binary queues it.
    std::fs::remove_dir(w.data().join("spool")).unwrap();
    w.commit(&repo, &[("c.txt", "c\n")], "three");
    assert!(!w.data().join("spool").exists());
    // Queued by then: the spool `status` takes in is made again, empty.
    assert_eq!(pending(&w), before + 3);
    // The command made the spool again: the next commit uses it.
    assert!(w.data().join("spool").is_dir());
    w.commit(&repo, &[("d.txt", "d\n")], "four");
    assert_eq!(spooled(&w).len(), 1);

    // Two commits spooled, then one made with the hooks off: taken in together, the two are
    // queued as git made them, and the one nobody queued is not.
    w.commit(&repo, &[("e.txt", "e\n")], "five");
    assert_eq!(spooled(&w).len(), 2);
    commit_quietly(&w, &repo);
    let log = w.sandbox(&repo, &["log", "-n", "4"]);
    let states: Vec<&str> = log
        .stdout
        .lines()
        .map(|l| {
            if l.contains("queued") {
                "queued"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(states, ["other", "queued", "queued", "queued"], "{log:?}");
    assert_eq!(pending(&w), before + 5);

    // Many commits spooled within a few milliseconds (files whose times tie and whose names,
    // process ids, say nothing of their order): every one is queued, and so is the commit made
    // with the hooks off below them: they reached main since its watermark.
    for k in 0..12 {
        w.commit(&repo, &[("f.txt", &format!("{k}\n"))], &format!("many {k}"));
    }
    assert_eq!(spooled(&w).len(), 12);
    assert_eq!(pending(&w), before + 5 + 12 + 1);
}

/// A spool file only says which branches of which directory moved: what is queued is read from
/// git. A forged line naming another commit, a directory that is no registered repository, a
/// garbled file and one a hook is still writing queue nothing; only the last stays.
#[test]
fn a_forged_or_garbled_spool_file_queues_nothing_a_scan_would_not() {
    let w = World::new();
    let repo = w.new_repo("forged");
    let before = pending(&w);
    let spool = w.data().join("spool");
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let other = w.path("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    w.git(&other, &["init", "-q"]);
    let block = |cwd: &Path, line: &str| {
        format!("git-sandbox spool 1\ncwd {}\n{line}\nend\n", cwd.display())
    };
    let zero = "0".repeat(40);
    let made_up = "1234567890123456789012345678901234567890";
    // main did not move: a line claiming it did at a made-up commit.
    std::fs::write(
        spool.join("1"),
        block(&repo, &format!("{head} {made_up} refs/heads/main")),
    )
    .unwrap();
    // A repository that is not registered, and a directory that is not one.
    std::fs::write(
        spool.join("2"),
        block(&other, &format!("{zero} {head} refs/heads/main")),
    )
    .unwrap();
    std::fs::write(
        spool.join("3"),
        block(Path::new("/nonexistent/x"), "a b refs/heads/main"),
    )
    .unwrap();
    std::fs::write(spool.join("4"), "\u{0}\u{1}garbage\n").unwrap();
    // A FIFO and a link are not waited on or followed.
    let fifo = std::ffi::CString::new(spool.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink(spool.join("1"), spool.join("link")).unwrap();
    // A hook mid-write: no end line yet.
    std::fs::write(
        spool.join("5"),
        format!("git-sandbox spool 1\ncwd {}\n", repo.display()),
    )
    .unwrap();
    assert_eq!(pending(&w), before);
    let left: Vec<String> = std::fs::read_dir(&spool)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["5".to_string()]);
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(!log.stdout.contains("queued"), "{log:?}");

    // A hook's file lost (the hook killed mid-write): the next commit's brings both.
    std::fs::remove_file(spool.join("5")).unwrap();
    w.commit(&repo, &[("a.txt", "a\n")], "lost");
    for f in std::fs::read_dir(&spool).unwrap().flatten() {
        std::fs::remove_file(f.path()).unwrap();
    }
    w.commit(&repo, &[("b.txt", "b\n")], "found");
    assert_eq!(pending(&w), before + 2);
    // A taker killed after it claimed a file: its stale claim is taken in by the next.
    w.commit(&repo, &[("c.txt", "c\n")], "claimed");
    let file = std::fs::read_dir(&spool)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let claim = spool.join(".taken-99999-0");
    std::fs::rename(&file, &claim).unwrap();
    assert_eq!(pending(&w), before + 2, "a fresh claim is its taker's");
    let old = std::process::Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(&claim)
        .status()
        .unwrap();
    assert!(old.success());
    assert_eq!(pending(&w), before + 3);
    assert!(!claim.exists());
}
