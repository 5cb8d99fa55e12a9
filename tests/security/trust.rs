//! A result is evidence: a result shown for a commit was made from that commit's tree with its
//! own config, or it is not shown. Amend, rebase, trial runs, bad notes, a lost index, a missing
//! test runner, adoption of a repository with history, and promotion of a merge that breaks.

use crate::common;

use common::World;
use serde_json::Value;
use std::path::Path;

const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";
const BROKEN_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

/// The raw note body under refs/notes/sandbox, if any.
fn raw_note(w: &World, repo: &Path, r: &str) -> Option<String> {
    let o = w.git_out(repo, &["notes", "--ref=sandbox", "show", r], true);
    (o.code == 0).then_some(o.stdout)
}

fn log_json(w: &World, repo: &Path, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["log", "--json"];
    a.extend_from_slice(args);
    let o = w.sandbox(repo, &a);
    assert_eq!(o.code, 0, "{o:?}");
    o.json().as_array().unwrap().clone()
}

fn amend_with(w: &World, repo: &Path, files: &[(&str, &str)]) -> String {
    for (rel, body) in files {
        std::fs::write(repo.join(rel), body).unwrap();
        w.git(repo, &["add", rel]);
    }
    w.git(repo, &["commit", "-q", "--amend", "--no-edit"]);
    rev(w, repo, "HEAD")
}

#[test]
fn an_amended_failing_commit_never_shows_the_old_pass() {
    let w = World::new();
    let repo = w.new_repo("amend");
    let passing = w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more tests");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    // As an older version did, or a user's global config does: git copies notes on amend.
    w.git(&repo, &["config", "notes.rewriteRef", "refs/notes/sandbox"]);
    let failing = amend_with(&w, &repo, &[("tests/test_more.py", BROKEN_TESTS)]);
    assert_ne!(passing, failing);
    let copied = raw_note(&w, &repo, "HEAD").expect("git copied the old note");
    assert!(copied.contains(&passing), "{copied}");

    // Every reader says: not run.
    let o = w.sandbox(&repo, &["show", "HEAD"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stderr.contains("has no result yet"), "{o:?}");
    assert!(!o.stdout.contains("passed"), "{o:?}");
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(
        // Queued by the hook, as an amend makes a new commit of a watched branch.
        log.stdout.starts_with("· ") && log.stdout.contains(" queued more tests"),
        "{log:?}"
    );
    let entries = log_json(&w, &repo, &["-n", "1"]);
    assert_eq!(entries[0]["result"], Value::Null, "{entries:?}");

    // Running it gives its own result, which replaces the copied note.
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()[0]["status"], "failed");
    assert_eq!(o.json()[0]["commit"], failing);
    let note = w.note(&repo, "HEAD").unwrap();
    assert_eq!(note["commit"], failing);
    assert_eq!(note["status"], "failed");
    let shown = w.sandbox(&repo, &["show"]);
    assert!(shown.stdout.contains("Status:   ✘ failed"), "{shown:?}");
}

#[test]
fn init_removes_our_ref_from_notes_rewrite_ref() {
    let w = World::new();
    let repo = w.new_repo("legacy");
    w.git(
        &repo,
        &["config", "--add", "notes.rewriteRef", "refs/notes/sandbox"],
    );
    w.git(
        &repo,
        &["config", "--add", "notes.rewriteRef", "refs/notes/commits"],
    );
    w.git(&repo, &["config", "notes.displayRef", "refs/notes/sandbox"]);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        w.git(&repo, &["config", "--get-all", "notes.rewriteRef"]),
        "refs/notes/commits\n",
        "the user's own rewriteRef stays"
    );
    assert_eq!(
        w.git(&repo, &["config", "--get-all", "notes.displayRef"]),
        "refs/notes/sandbox-summary\n"
    );
}

#[test]
fn rebase_exec_run_leaves_one_readable_result_per_commit() {
    let w = World::new();
    let repo = w.new_repo("rebase");
    for i in 0..3 {
        w.commit(&repo, &[("f.txt", &format!("{i}\n"))], &format!("c{i}"));
    }
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~3..HEAD"]).code, 0);
    // A user whose config copies notes on rewrite, in git's default concatenate mode.
    w.git(&repo, &["config", "notes.rewriteRef", "refs/notes/sandbox"]);
    let o = w.git_out(
        &repo,
        &[
            "rebase",
            "-q",
            "--force-rebase",
            "-x",
            "git sandbox run",
            "HEAD~3",
        ],
        true,
    );
    assert_eq!(o.code, 0, "{o:?}");
    let entries = log_json(&w, &repo, &["-n", "3"]);
    assert_eq!(entries.len(), 3);
    for e in &entries {
        let r = &e["result"];
        assert_eq!(r["status"], "passed", "{e}");
        assert_eq!(r["commit"], e["commit"], "a result of its own commit: {e}");
        // git glued the old commit's record onto the new one; both are single lines.
        let raw = raw_note(&w, &repo, e["commit"].as_str().unwrap()).unwrap();
        assert!(
            raw.lines().filter(|l| !l.trim().is_empty()).count() <= 2,
            "{raw}"
        );
    }
    let text = w.sandbox(&repo, &["log", "-n", "3"]);
    assert!(!text.stdout.contains("not run"), "{text:?}");
}

#[test]
fn a_trial_run_is_printed_but_never_recorded_and_eval_ignores_it() {
    let w = World::new();
    let repo = w.new_repo("trial");
    let o = w.sandbox(&repo, &["experiment", "start", "shaky"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.git(&repo, &["switch", "-q", "experiment/shaky"]);
    let head = w.commit(&repo, &[("tests/test_more.py", BROKEN_TESTS)], "broken");
    w.git(&repo, &["switch", "-q", "main"]);

    let o = w.sandbox(
        &repo,
        &["run", "experiment/shaky", "--command", "true", "--json"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["status"], "passed");
    assert!(o.stderr.contains("trial run"), "{o:?}");
    assert!(w.note(&repo, &head).is_none(), "a trial writes no note");
    // Nothing records a failing trial, so `run` itself shows how it failed.
    let o = w.sandbox(
        &repo,
        &[
            "run",
            "experiment/shaky",
            "--command",
            "echo trial-said-this; exit 3",
        ],
    );
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stderr
            .contains("output (last lines):\n    trial-said-this")
            && o.stderr.contains(".trial.log"),
        "{o:?}"
    );
    assert!(w.note(&repo, &head).is_none(), "a trial writes no note");
    let o = w.sandbox(&repo, &["show", &head]);
    assert_eq!(o.code, 1, "no result is shown for it: {o:?}");

    let o = w.sandbox(&repo, &["eval", "shaky", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let ev = o.json();
    assert_eq!(ev["recommendation"], "NOT_READY", "{ev}");
    assert_eq!(ev["head"]["status"], "failed", "{ev}");
    let o = w.sandbox(&repo, &["promote", "shaky"]);
    assert_eq!(o.code, 1, "{o:?}");
}

#[test]
fn a_missing_test_runner_is_an_error_and_never_cached() {
    let w = World::new();
    let repo = w.new_repo("runner");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"python3 -m no_such_runner_xyz\"\n",
        )],
        "use a runner that is not installed",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{rec}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("no_such_runner_xyz") && error.contains("not installed"),
        "{error}"
    );
    assert!(o.stderr.contains("not installed"), "{o:?}");
    // Not served from cache: it runs again.
    let again = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(again["status"], "error");
    assert_eq!(again["cached_from"], Value::Null);
    assert_ne!(again["started_at"], rec["started_at"], "it ran again");

    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"cargo-nope-xyz test\"\n",
        )],
        "a command that does not exist",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["status"], "error", "{rec}");
    assert!(
        rec["error"]
            .as_str()
            .unwrap()
            .contains("was not found (exit 127"),
        "{rec}"
    );
}

#[test]
fn a_note_that_is_not_a_record_counts_as_not_run_everywhere() {
    let w = World::new();
    let repo = w.new_repo("garbage");
    let head = rev(&w, &repo, "HEAD");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    for garbage in [
        "{\"schema\": \"git-sandbox/run/v1\", \"commit\"",
        "\u{1}\u{2} binary?",
    ] {
        let o = w.git_out(
            &repo,
            &["notes", "--ref=sandbox", "add", "-f", "-m", garbage, "HEAD"],
            true,
        );
        assert_eq!(o.code, 0, "{o:?}");
        let log = w.sandbox(&repo, &["log"]);
        assert_eq!(log.code, 0, "{log:?}");
        assert!(log.stdout.contains("not run"), "{log:?}");
        assert_eq!(
            log.stderr.lines().count(),
            1,
            "reported once, on one line: {log:?}"
        );
        assert!(log.stderr.contains("no readable run record"), "{log:?}");
        let show = w.sandbox(&repo, &["show"]);
        assert_eq!(show.code, 1, "{show:?}");
        let o = w.sandbox(&w.work(), &["reindex", "--json"]);
        let report = o.json();
        let skipped = &report["repositories"][0]["skipped"];
        assert_eq!(skipped[0]["commit"], head, "{report}");
    }
    // A run replaces the bad note with a new result.
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(w.note(&repo, "HEAD").unwrap()["commit"], head);
}

#[test]
fn the_note_is_one_line_and_git_log_shows_a_short_summary() {
    let w = World::new();
    let repo = w.new_repo("format");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let raw = raw_note(&w, &repo, "HEAD").unwrap();
    assert_eq!(raw.lines().count(), 1, "{raw}");
    assert!(raw.len() < 3000, "a slim note: {} bytes", raw.len());
    let note: Value = serde_json::from_str(&raw).unwrap();
    let iso = &note["tests"]["isolation"];
    assert!(iso["profile"].as_str().unwrap().starts_with('p'), "{iso}");
    assert!(iso.get("layers").is_none(), "no full layer table: {iso}");
    assert!(
        !raw.contains(&*w.data().to_string_lossy()),
        "no host paths: {raw}"
    );
    assert!(!raw.contains("/sys/fs/cgroup"), "{raw}");
    let summary = w.git(&repo, &["notes", "--ref=sandbox-summary", "show", "HEAD"]);
    assert!(summary.lines().count() <= 3, "{summary}");
    assert!(
        summary.starts_with("Sandbox: passed, 2 passed 0 failed (unittest), "),
        "{summary}"
    );
    assert!(summary.contains("Sandbox-Analysis: "), "{summary}");
    // Both refs were written by one notes batch (one transaction): same message.
    let a = w.git(&repo, &["log", "-1", "--format=%s", "refs/notes/sandbox"]);
    let b = w.git(
        &repo,
        &["log", "-1", "--format=%s", "refs/notes/sandbox-summary"],
    );
    assert_eq!(a, b);
    // Two machines' records for one commit, merged line-wise: the newest is shown.
    let mut older = note.clone();
    older["finished_at"] = "2020-01-01T00:00:00.000Z".into();
    older["status"] = "failed".into();
    let merged = format!("{}\n{}", serde_json::to_string(&older).unwrap(), raw.trim());
    w.git(
        &repo,
        &["notes", "--ref=sandbox", "add", "-f", "-m", &merged, "HEAD"],
    );
    let shown = w.sandbox(&repo, &["show", "--json"]).json();
    assert_eq!(shown["status"], "passed");
}

#[test]
fn a_deleted_index_comes_back_from_git_with_every_repository() {
    let w = World::new();
    let created = w.new_repo("created");
    // A repository adopted with init, outside the data dir.
    let adopted = w.work().join("adopted");
    std::fs::create_dir_all(&adopted).unwrap();
    w.git(&adopted, &["init", "-q", "-b", "main"]);
    w.commit(&adopted, &[("a.py", "def f():\n    return 1\n")], "first");
    assert_eq!(w.sandbox(&adopted, &["init"]).code, 0);
    let adopted_head = rev(&w, &adopted, "HEAD");
    assert_eq!(w.sandbox(&adopted, &["run"]).code, 0);
    assert_eq!(w.sandbox(&created, &["run"]).code, 0);
    assert_eq!(
        w.sandbox(&created, &["experiment", "start", "idea"]).code,
        0
    );
    assert_eq!(w.sandbox(&created, &["eval", "idea"]).code, 0);

    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    let status = w.sandbox(&w.work(), &["status"]);
    assert!(
        status.stderr.contains("not in the index") && status.stderr.contains("reindex"),
        "{status:?}"
    );
    let o = w.sandbox(&w.work(), &["reindex", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let report = o.json();
    assert_eq!(
        report["repositories"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    let list = w.sandbox(&w.work(), &["list", "--json"]).json();
    assert_eq!(list["total"], 2, "{list}");
    let exps = w
        .sandbox(&created, &["experiment", "list", "--json"])
        .json();
    assert_eq!(exps["experiments"][0]["name"], "idea");
    assert!(
        exps["experiments"][0]["latest_evaluation"]["recommendation"].is_string(),
        "{exps}"
    );
    // The tree cache works again: a reworded commit reuses the result of its tree.
    w.git(&adopted, &["commit", "-q", "--amend", "-m", "reworded"]);
    let rec = w.sandbox(&adopted, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["cached_from"], adopted_head, "{rec}");
}

#[test]
fn a_command_in_a_repository_the_index_lost_imports_its_results() {
    let w = World::new();
    let repo = w.new_repo("heal");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    // No reindex: the next command in the repository brings its results back.
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(log.stdout.starts_with("✔ "), "{log:?}");
    let status = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(status["totals"]["runs"], 1, "{status}");
}

#[test]
fn init_writes_the_detected_command_never_the_python_template() {
    let w = World::new();
    let go = w.work().join("go-project");
    std::fs::create_dir_all(&go).unwrap();
    w.git(&go, &["init", "-q", "-b", "main"]);
    w.commit(
        &go,
        &[("go.mod", "module example.com/x\n\ngo 1.21\n")],
        "go",
    );
    let o = w.sandbox(&go, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    let cfg = std::fs::read_to_string(go.join(".git/sandbox.toml")).unwrap();
    assert!(cfg.contains("command = \"go test ./...\""), "{cfg}");
    assert!(!cfg.contains("unittest"), "{cfg}");

    // Nothing detectable: no command, and a run of the project passes on its analysis alone.
    let plain = w.work().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    w.git(&plain, &["init", "-q", "-b", "main"]);
    w.commit(&plain, &[("README", "hello\n")], "readme");
    assert_eq!(w.sandbox(&plain, &["init"]).code, 0);
    let cfg = std::fs::read_to_string(plain.join(".git/sandbox.toml")).unwrap();
    assert!(!cfg.lines().any(|l| l.starts_with("command")), "{cfg}");
    let o = w.sandbox(&plain, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["tests"], Value::Null);
}

#[test]
fn init_never_writes_into_a_hooks_directory_the_project_tracks() {
    let w = World::new();
    let repo = w.work().join("husky");
    std::fs::create_dir_all(repo.join(".githooks")).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    let hook = "#!/bin/sh\necho project hook\n";
    w.commit(&repo, &[(".githooks/post-commit", hook)], "our hooks");
    w.git(&repo, &["config", "core.hooksPath", ".githooks"]);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        std::fs::read_to_string(repo.join(".githooks/post-commit")).unwrap(),
        hook
    );
    assert!(!repo.join(".githooks/post-commit.pre-sandbox").exists());
    assert!(
        o.stderr.contains("hint: ") && o.stderr.contains("git-sandbox notify --hook post-commit"),
        "{o:?}"
    );
    assert_eq!(
        w.git(&repo, &["status", "--porcelain", "--", ".githooks"]),
        ""
    );
}

#[test]
fn adopting_a_repository_with_history_runs_none_of_it_unless_asked() {
    let w = World::new();
    let repo = w.work().join("history");
    std::fs::create_dir_all(&repo).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..30 {
        w.commit(&repo, &[("n.txt", &i.to_string())], &format!("old {i}"));
    }
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let pending = |w: &World| {
        w.sandbox(&w.work(), &["status", "--json"]).json()["queue"]["pending"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(pending(&w), 0);
    // The daemon's start-up scan finds nothing to run either.
    let daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || w.sandbox(&w.work(), &["daemon", "status"]).code == 0));
    let new = w.commit(&repo, &[("n.txt", "new")], "after adoption");
    assert!(w.wait_until(30, || w.note(&repo, &new).is_some()));
    let noted = w.git(&repo, &["notes", "--ref=sandbox", "list"]);
    assert_eq!(noted.lines().count(), 1, "only the new commit: {noted}");
    drop(daemon);

    // [watch] backfill = N queues the last N commits, and status says why they are queued.
    let w2 = World::new();
    std::fs::write(w2.path("config/git-sandbox/config.toml"), "").ok();
    std::fs::create_dir_all(w2.path("config/git-sandbox")).unwrap();
    std::fs::write(
        w2.path("config/git-sandbox/config.toml"),
        "[watch]\nbackfill = 3\n",
    )
    .unwrap();
    let repo2 = w2.work().join("history2");
    std::fs::create_dir_all(&repo2).unwrap();
    w2.git(&repo2, &["init", "-q", "-b", "main"]);
    for i in 0..10 {
        w2.commit(&repo2, &[("n.txt", &i.to_string())], &format!("old {i}"));
    }
    let o = w2.sandbox(&repo2, &["init"]);
    assert!(o.stdout.contains("queued the last 3 commits"), "{o:?}");
    let status = w2.sandbox(&w2.work(), &["status", "--json"]).json();
    assert_eq!(
        status["queue"]["pending_by_trigger"]["backfill"], 3,
        "{status}"
    );
    let text = w2.sandbox(&w2.work(), &["status"]);
    assert!(text.stdout.contains("3 pending (3 backfill)"), "{text:?}");
}

#[test]
fn promote_tests_the_merge_before_production_moves() {
    let w = World::new();
    let repo = w.new_repo("semantic");
    w.commit(&repo, &[("limits.py", "LIMIT = 10\n")], "a limit");
    assert_eq!(
        w.sandbox(&repo, &["experiment", "start", "uses-limit"])
            .code,
        0
    );
    w.git(&repo, &["switch", "-q", "experiment/uses-limit"]);
    w.commit(
        &repo,
        &[(
            "tests/test_limit.py",
            "import sys, unittest\nsys.path.insert(0, '.')\nfrom limits import LIMIT\n\n\nclass TestLimit(unittest.TestCase):\n    def test_limit_is_ten(self):\n        self.assertEqual(LIMIT, 10)\n",
        )],
        "rely on the limit",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    // Production changes the limit: no textual conflict, but the merge breaks the new test.
    w.commit(&repo, &[("limits.py", "LIMIT = 20\n")], "raise the limit");
    let main_before = rev(&w, &repo, "main");
    let o = w.sandbox(&repo, &["eval", "uses-limit"]);
    assert_eq!(o.code, 0, "both sides pass on their own: {o:?}");

    let o = w.sandbox(&repo, &["promote", "uses-limit"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stderr.contains("promote refused")
            && o.stderr.contains("is failed")
            && o.stderr.contains("test_limit_is_ten")
            && o.stderr.contains("nothing was changed"),
        "{o:?}"
    );
    assert_eq!(
        rev(&w, &repo, "main"),
        main_before,
        "production did not move"
    );
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    let e = w
        .sandbox(&repo, &["experiment", "show", "uses-limit", "--json"])
        .json();
    assert_eq!(e["state"], "active");

    let o = w.sandbox(&repo, &["promote", "uses-limit", "--force"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stderr.contains("the merge broke"), "{o:?}");
    assert_ne!(rev(&w, &repo, "main"), main_before);
}

#[test]
fn a_pushed_experiment_branch_lists_only_its_own_commits() {
    let w = World::new();
    let repo = w.new_repo("pushed");
    for i in 0..4 {
        w.commit(&repo, &[("m.txt", &i.to_string())], &format!("main {i}"));
    }
    // An agent pushes a branch by hand, without `experiment start`.
    w.git(&repo, &["switch", "-q", "-c", "experiment/by-hand"]);
    let own = w.commit(&repo, &[("x.txt", "x")], "agent's work");
    w.git(&repo, &["switch", "-q", "main"]);
    let o = w.sandbox(&repo, &["experiment", "show", "by-hand", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let d = o.json();
    let commits: Vec<&str> = d["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap())
        .collect();
    assert_eq!(commits, vec![own.as_str()], "{d}");
    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    assert_eq!(list["experiments"][0]["name"], "by-hand");
}

#[test]
fn the_daemon_runs_an_amended_commit_instead_of_trusting_the_copied_note() {
    let w = World::new();
    let repo = w.new_repo("amend-daemon");
    w.git(&repo, &["config", "notes.rewriteRef", "refs/notes/sandbox"]);
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || w.sandbox(&w.work(), &["daemon", "status"]).code == 0));
    let passing = w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more tests");
    assert!(w.wait_until(30, || w.note(&repo, &passing).is_some()));
    assert_eq!(w.note(&repo, &passing).unwrap()["status"], "passed");
    let failing = amend_with(&w, &repo, &[("tests/test_more.py", BROKEN_TESTS)]);
    assert!(
        w.wait_until(30, || w
            .note(&repo, &failing)
            .is_some_and(|n| n["commit"] == failing.as_str())),
        "the daemon ran the amended commit"
    );
    assert_eq!(w.note(&repo, &failing).unwrap()["status"], "failed");
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(log.stdout.starts_with("✘ "), "{log:?}");
}

#[test]
fn the_daemon_queues_again_a_commit_whose_note_went_bad_and_replaces_it() {
    let w = World::new();
    let repo = w.new_repo("bad-note-daemon");
    let head = rev(&w, &repo, "HEAD");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.git_out(
        &repo,
        &[
            "notes",
            "--ref=sandbox",
            "add",
            "-f",
            "-m",
            "half a {record",
            "HEAD",
        ],
        true,
    );
    assert_eq!(o.code, 0, "{o:?}");
    // The daemon's start-up scan meets it: not run, so queued and run again.
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(30, || raw_note(&w, &repo, "HEAD")
            .is_some_and(|n| n.starts_with('{') && n.contains(&head))),
        "the bad note was replaced: {:?}",
        raw_note(&w, &repo, "HEAD")
    );
    assert_eq!(w.note(&repo, "HEAD").unwrap()["status"], "passed");
}

#[test]
fn with_a_daemon_a_rebase_leaves_each_rewritten_commit_its_own_result() {
    let w = World::new();
    let repo = w.new_repo("rebase-daemon");
    w.git(&repo, &["config", "notes.rewriteRef", "refs/notes/sandbox"]);
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || w.sandbox(&w.work(), &["daemon", "status"]).code == 0));
    let ids: Vec<String> = (0..3)
        .map(|i| w.commit(&repo, &[("f.txt", &format!("{i}\n"))], &format!("c{i}")))
        .collect();
    assert!(w.wait_until(30, || ids.iter().all(|id| w.note(&repo, id).is_some())));
    // Rewrite all three: the middle one now breaks the tests.
    w.git(
        &repo,
        &["rebase", "-q", "--force-rebase", "-x", "true", "HEAD~3"],
    );
    w.git(&repo, &["checkout", "-q", "HEAD~1"]);
    let broken = {
        std::fs::write(repo.join("tests/test_more.py"), BROKEN_TESTS).unwrap();
        w.git(&repo, &["add", "tests/test_more.py"]);
        w.git(&repo, &["commit", "-q", "--amend", "--no-edit"]);
        rev(&w, &repo, "HEAD")
    };
    let tip = w.git(&repo, &["rev-parse", "main"]).trim().to_string();
    w.git(
        &repo,
        &["rebase", "-q", "--onto", &broken, "main~1", "main"],
    );
    let new_ids: Vec<String> = w
        .git(&repo, &["rev-list", "--reverse", "main~3..main"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_ne!(new_ids.last().unwrap(), &tip);
    // The daemon runs every rewritten commit itself; no copied note is ever read as its result.
    assert!(
        w.wait_until(60, || new_ids.iter().all(|id| {
            log_json(&w, &repo, &["-n", "1", id])[0]["result"]["commit"] == id.as_str()
        })),
        "{}",
        w.sandbox(&repo, &["log", "-n", "4"]).stdout
    );
    let entries = log_json(&w, &repo, &["-n", "3"]);
    assert_eq!(entries[0]["result"]["status"], "failed", "{entries:?}");
    assert_eq!(entries[1]["result"]["status"], "failed", "{entries:?}");
    assert_eq!(entries[2]["result"]["status"], "passed", "{entries:?}");
}
