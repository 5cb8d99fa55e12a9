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
