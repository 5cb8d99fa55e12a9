//! `run`, `show`, `log`, `exec`, `reindex`: real repositories, real test commands, real notes.

use crate::common;

#[path = "run/analysis.rs"]
mod analysis;
#[path = "run/attempts.rs"]
mod attempts;
#[path = "run/cargo_phases.rs"]
mod cargo_phases;
#[path = "run/go_phases.rs"]
mod go_phases;
#[path = "run/notes.rs"]
mod notes;
#[path = "run/phases.rs"]
mod phases;
#[path = "run/phases_js.rs"]
mod phases_js;
#[path = "run/phases_mocha.rs"]
mod phases_mocha;
#[path = "run/testmap.rs"]
mod testmap;

use common::World;
use std::path::Path;

/// The run directories under a scratch dir (not the kept checkouts, which outlive runs).
fn run_dirs(scratch: &Path) -> usize {
    std::fs::read_dir(scratch)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("git-sandbox-") && !n.starts_with("git-sandbox-cache-")
        })
        .count()
}

fn set_config(w: &World, repo: &Path, toml: &str) -> String {
    w.commit(repo, &[(".sandbox.toml", toml)], "configure")
}

#[test]
fn run_head_writes_a_note_and_an_index_row_and_touches_nothing_else() {
    let w = World::new();
    let repo = w.new_repo("r1");
    let jobs_before =
        w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]["pending_jobs"].clone();
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.starts_with("✔ "), "{o:?}");
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let note = w.note(&repo, "HEAD").expect("a note on HEAD");
    assert_eq!(note["schema"], "git-sandbox/run/v1");
    assert_eq!(note["commit"], head);
    assert_eq!(
        note["tree"],
        w.git(&repo, &["rev-parse", "HEAD^{tree}"]).trim()
    );
    assert_eq!(note["status"], "passed");
    assert_eq!(note["trigger"], "manual");
    assert_eq!(note["ref"], "refs/heads/main");
    assert_eq!(note["cached_from"], serde_json::Value::Null);
    assert_eq!(note["tests"]["framework"], "unittest");
    assert_eq!(note["tests"]["passed"], 2);
    assert_eq!(note["tests"]["failed"], 0);
    assert_eq!(note["tests"]["total"], 2);
    assert_eq!(note["tests"]["exit_code"], 0);
    assert!(
        note["analysis"]["functions_found"].as_u64().unwrap() >= 3,
        "{note}"
    );
    assert_eq!(note["analysis"]["languages"]["python"]["files"], 1);
    let template_files = w
        .git(&repo, &["ls-tree", "-r", "--name-only", "HEAD"])
        .lines()
        .count();
    assert!(template_files >= 5, "{template_files}");
    assert_eq!(
        note["changes"]["files_changed"].as_u64(),
        Some(template_files as u64),
        "the initial commit adds every template file"
    );
    // The user's checkout is untouched: no changes, no extra worktree, no queued job from our own writes.
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(w.git(&repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(
        w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]["pending_jobs"],
        jobs_before
    );
    // show --json is the note as this machine reads it: its signature checked and replaced by
    // who vouches for it (this machine).
    let mut shown = w.sandbox(&repo, &["show", "--json"]).json();
    assert_eq!(shown["verified"]["here"], true, "{shown}");
    shown.as_object_mut().unwrap().remove("verified");
    let mut signed = note.clone();
    assert!(
        signed
            .as_object_mut()
            .unwrap()
            .remove("signature")
            .is_some(),
        "the note is signed: {note}"
    );
    assert_eq!(shown, signed);
    // Plain git log shows the short summary (notes.displayRef), not the JSON.
    let log = w.git(&repo, &["log", "-1"]);
    assert!(
        log.contains(
            "Notes (sandbox-summary):\n    Sandbox: passed, 2 passed 0 failed (unittest), "
        ),
        "{log}"
    );
    assert!(!log.contains("\"schema\""), "{log}");
    let human = w.sandbox(&repo, &["show"]);
    assert!(human.stdout.contains("Status:   ✔ passed"), "{human:?}");
    assert!(
        human.stdout.contains("Tests: 2 passed (unittest)"),
        "{human:?}"
    );
}

#[test]
fn a_failing_test_fails_the_run_and_names_the_failure() {
    let w = World::new();
    let repo = w.new_repo("r2");
    w.commit(
        &repo,
        &[("tests/test_broken.py", "import unittest\n\nclass TestBroken(unittest.TestCase):\n    def test_math(self):\n        self.assertEqual(1 + 1, 3)\n")],
        "break it",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "failed");
    assert_eq!(rec["tests"]["failed"], 1);
    assert_eq!(rec["tests"]["passed"], 2);
    let names: Vec<&str> = rec["tests"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.contains("test_math")), "{names:?}");
    assert_eq!(rec["changes"]["files"][0]["path"], "tests/test_broken.py");
    assert_eq!(rec["changes"]["files"][0]["status"], "added");
    assert_eq!(rec["changes"]["insertions"], 5);
    let log = w.sandbox(&repo, &["log"]);
    let first = log.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("✘ ") && first.contains("failed break it"),
        "{log:?}"
    );
    assert!(
        log.stdout.lines().nth(1).unwrap().contains("not run"),
        "{log:?}"
    );
}

#[test]
fn the_same_tree_reuses_the_result_unless_forced() {
    let w = World::new();
    let repo = w.new_repo("r3");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let first = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // A new commit id with the same tree: only the message changes.
    w.git(&repo, &["commit", "-q", "--amend", "-m", "reworded"]);
    assert!(
        w.note(&repo, "HEAD").is_none(),
        "an amend carries no note: a result is the commit's own or found by tree"
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let rec = &o.json()[0];
    assert_eq!(rec["cached_from"], first);
    assert_eq!(rec["commit"], w.git(&repo, &["rev-parse", "HEAD"]).trim());
    assert_eq!(rec["tests"]["passed"], 2);
    // A second run of the same commit writes nothing new.
    let notes_before = w.git(&repo, &["rev-parse", "refs/notes/sandbox"]);
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    assert_eq!(
        w.git(&repo, &["rev-parse", "refs/notes/sandbox"]),
        notes_before
    );
    let forced = w.sandbox(&repo, &["run", "--force", "--json"]).json();
    assert_eq!(forced[0]["cached_from"], serde_json::Value::Null);
    // A different command is a different config: no reuse.
    let other = w
        .sandbox(&repo, &["run", "--command", "true", "--json"])
        .json();
    assert_eq!(other[0]["cached_from"], serde_json::Value::Null);
    assert_eq!(other[0]["tests"]["command"], "true");
}

#[test]
fn a_range_runs_each_commit_in_few_notes_commits() {
    let w = World::new();
    let repo = w.new_repo("r4");
    let base = set_config(
        &w,
        &repo,
        "[test]\ncommand = \"test -f marker || exit 1\"\n",
    );
    let mut ids = Vec::new();
    for i in 0..6 {
        let files: Vec<(String, String)> = if i == 3 {
            vec![]
        } else {
            vec![("marker".into(), format!("{i}"))]
        };
        if i == 3 {
            w.git(&repo, &["rm", "-q", "marker"]);
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        ids.push(w.commit(&repo, &refs, &format!("step {i}")));
    }
    let notes_commits = |w: &World| {
        w.git_out(&repo, &["rev-list", "--count", "refs/notes/sandbox"], true)
            .stdout
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
    };
    let packs = |w: &World| {
        let v = w.git(&repo, &["count-objects", "-v"]);
        v.lines()
            .find_map(|l| l.strip_prefix("packs: "))
            .map_or(0, |n| n.trim().parse::<u32>().unwrap())
    };
    let before = notes_commits(&w);
    let packs_before = packs(&w);
    // One worker (a range runs on one per core by default): one notes commit in all.
    let o = w.sandbox(
        &repo,
        &["run", "-j", "1", &format!("{base}..HEAD"), "--json"],
    );
    assert_eq!(o.code, 1, "step 3 has no marker: {o:?}");
    let recs = o.json();
    let recs = recs.as_array().unwrap();
    assert_eq!(recs.len(), 6);
    for (i, (rec, id)) in recs.iter().zip(&ids).enumerate() {
        assert_eq!(rec["commit"], id.as_str(), "oldest first");
        let expected = if i == 3 { "failed" } else { "passed" };
        assert_eq!(rec["status"], expected, "step {i}");
        assert_eq!(w.note(&repo, id).unwrap()["status"], expected);
        // Each record's changes are its own commit's, though the range diffs them one by one.
        let how = [
            "added", "modified", "modified", "deleted", "added", "modified",
        ][i];
        assert_eq!(rec["changes"]["files_changed"], 1, "step {i}: {rec}");
        assert_eq!(rec["changes"]["files"][0]["path"], "marker", "step {i}");
        assert_eq!(rec["changes"]["files"][0]["status"], how, "step {i}");
    }
    assert_eq!(
        notes_commits(&w) - before,
        1,
        "one notes commit for the whole range"
    );
    // Its objects (notes, fan-out trees, notes commits) went to git as one pack, which git
    // itself checks and reads.
    assert_eq!(
        packs(&w) - packs_before,
        1,
        "one pack for the range's results"
    );
    let fsck = w.git_out(&repo, &["fsck", "--strict", "--no-dangling"], true);
    assert_eq!(fsck.code, 0, "{fsck:?}");
    let shown = w.git(&repo, &["notes", "--ref=sandbox", "show", &ids[3]]);
    assert!(shown.contains("\"status\":\"failed\""), "{shown}");
    // The log shows them newest first.
    let log = w.sandbox(&repo, &["log", "-n", "6"]);
    assert!(
        log.stdout.lines().nth(2).unwrap().starts_with("✘"),
        "{log:?}"
    );
}

#[test]
fn bad_revisions_are_usage_errors() {
    let w = World::new();
    let repo = w.new_repo("r5");
    for (args, needle) in [
        (
            vec!["run", "no-such-branch"],
            "unknown revision \"no-such-branch\"",
        ),
        (vec!["show", "nope~3"], "unknown revision"),
        (vec!["exec", "missing", "--", "true"], "unknown revision"),
    ] {
        let o = w.sandbox(&repo, &args);
        assert_eq!(o.code, 2, "{args:?}: {o:?}");
        let (problem, hints) = o.error();
        assert!(problem.contains(needle), "{args:?}: {o:?}");
        assert_eq!(hints.len(), 1, "the fix on its own line: {o:?}");
    }
    let outside = w.sandbox(&w.work(), &["run"]);
    assert_eq!(outside.code, 2);
    assert!(
        outside.stderr.contains("not inside a git repository"),
        "{outside:?}"
    );
    let plain = w.work().join("plain");
    std::fs::create_dir(&plain).unwrap();
    w.git(&plain, &["init", "-q"]);
    w.commit(&plain, &[("a", "a")], "a");
    let o = w.sandbox(&plain, &["run"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("git sandbox init"), "{o:?}");
}

#[test]
fn a_broken_config_in_the_commit_is_an_error_record() {
    let w = World::new();
    let repo = w.new_repo("r6");
    set_config(&w, &repo, "[test]\ncommand = \"true\"\nreruns = 3\n");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "error");
    let err = rec["error"].as_str().unwrap();
    assert!(
        err.contains(".sandbox.toml:3: key `test.reruns`: unknown field"),
        "{err}"
    );
    assert!(o.stderr.contains("reruns"), "{o:?}");
    assert_eq!(w.note(&repo, "HEAD").unwrap()["status"], "error");
}

#[test]
fn a_missing_test_command_is_an_error_with_the_fix() {
    let w = World::new();
    let repo = w.new_repo("r7");
    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"no-such-test-runner --all\"\n",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1);
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "error");
    assert!(
        rec["error"].as_str().unwrap().contains("was not found"),
        "{rec}"
    );
    assert_eq!(rec["tests"]["exit_code"], 127);
}

#[test]
fn timeouts_endless_output_and_bad_bytes() {
    let w = World::new();
    let repo = w.new_repo("r8");
    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"sleep 30\"\ntimeout = \"1s\"\n",
    );
    let started = std::time::Instant::now();
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(rec["status"], "timeout");
    assert_eq!(rec["tests"]["killed_by"], "timeout");

    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"yes\"\n[limits]\noutput_bytes = 200000\n",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["status"], "killed");
    assert_eq!(rec["tests"]["killed_by"], "output");
    assert_eq!(rec["tests"]["output_truncated"], true);
    let log = w.log_of(rec["commit"].as_str().unwrap());
    assert!(std::fs::metadata(log).unwrap().len() < 201_000);

    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"printf 'caf\\\\351 \\\\377\\\\n'\"\n",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed");
    assert_eq!(rec["tests"]["output_tail"], "caf\u{FFFD} \u{FFFD}");
    assert_eq!(
        rec["tests"]["passed"],
        serde_json::Value::Null,
        "nobody can parse it: counts are null"
    );
}

#[test]
fn the_test_command_does_not_see_secrets_or_the_users_home() {
    let mut w = World::new();
    let repo = w.new_repo("r9");
    set_config(&w, &repo, "[test]\ncommand = \"env; echo HOME=$HOME\"\n");
    w.extra_env
        .push(("GITHUB_TOKEN".into(), "ghp_supersecret".into()));
    w.extra_env
        .push(("AWS_SECRET_ACCESS_KEY".into(), "aws-secret".into()));
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let log = std::fs::read_to_string(w.log_of(rec["commit"].as_str().unwrap())).unwrap();
    assert!(
        !log.contains("supersecret") && !log.contains("aws-secret"),
        "{log}"
    );
    assert!(
        !log.contains(&format!("HOME={}\n", w.path("home").display())),
        "{log}"
    );
    assert!(log.contains("CI=true"), "{log}");
}

#[test]
fn exec_runs_in_a_checkout_of_the_revision_and_passes_the_exit_code() {
    let w = World::new();
    let repo = w.new_repo("r10");
    let first = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    w.commit(&repo, &[("later.txt", "later")], "later");
    let o = w.sandbox(
        &repo,
        &[
            "exec",
            &first,
            "--",
            "sh",
            "-c",
            "ls; test -e later.txt && echo has-later; exit 3",
        ],
    );
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stdout.contains("README.md"), "{o:?}");
    assert!(!o.stdout.contains("has-later"), "{o:?}");
    let o = w.sandbox(&repo, &["exec", "HEAD", "--", "cat", "later.txt"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "later"));
    // The user's checkout is still clean.
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
}

#[test]
fn exec_again_and_again_runs_its_command_each_time_and_is_never_killed() {
    // Each exec starts its helper ahead, while the workspace is prepared; that helper must live
    // as long as the run (a helper's parent-death signal follows the thread that started it).
    // A helper started from a thread that ended was killed in about one exec in thirty here.
    let w = World::new();
    let repo = w.new_repo("r10b");
    for i in 0..40 {
        let o = w.sandbox(
            &repo,
            &["exec", "HEAD", "--", "sh", "-c", "echo ran; exit 3"],
        );
        assert_eq!((o.code, o.stdout.as_str()), (3, "ran\n"), "exec {i}: {o:?}");
    }
}

#[test]
fn pytest_is_detected_and_parsed() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("r13");
    w.commit(
        &repo,
        &[(".sandbox.toml", "[analysis]\nenabled = false\n")],
        "detect the command",
    );
    w.commit(
        &repo,
        &[("tests/test_py.py", "import pytest\n\ndef test_ok():\n    assert True\n\ndef test_bad():\n    assert 1 == 2\n\n@pytest.mark.skip\ndef test_skip():\n    pass\n")],
        "pytest tests",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["tests"]["framework"], "pytest", "{rec}");
    assert_eq!(rec["tests"]["passed"], 3, "{rec}");
    assert_eq!(rec["tests"]["failed"], 1);
    assert_eq!(rec["tests"]["skipped"], 1);
    assert_eq!(
        rec["tests"]["failures"][0]["name"],
        "tests/test_py.py::test_bad"
    );
    assert_eq!(rec["status"], "failed");
}

#[test]
fn demo_runs_end_to_end() {
    // As on a fresh machine: git has no identity configured.
    let mut w = World::new();
    w.identity = false;
    let o = w.sandbox(&w.work(), &["demo"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        // main's two commits, the experiment's one (starting it made none), and the merge (the
        // experiment's tree).
        o.stdout
            .contains("Done: 4 commits with a result (3 run, 1 from the cache); all passed."),
        "{o:?}"
    );
    // Step 4 shows the note as `git log` does: the result's summary under the commit.
    let step4 = o.stdout.split("[4/8]").nth(1).unwrap();
    let step4 = step4.split("[5/8]").next().unwrap();
    assert!(step4.contains("Add total() with tests\n"), "{step4}");
    assert!(
        step4.contains("   Sandbox: passed, 4 passed 0 failed (unittest), "),
        "{step4}"
    );
    assert!(step4.contains("   Sandbox-Analysis: 2 files, "), "{step4}");
    assert!(o.stdout.contains("[8/8] promote it"), "{o:?}");
    assert!(
        o.stdout
            .contains("Experiment average: STRONGLY_RECOMMEND, promoted into main"),
        "{o:?}"
    );
    let j = w.sandbox(&w.work(), &["status", "--json"]).json();
    // The two commits, the experiment's one, and the merge commit of the promotion.
    assert_eq!(j["totals"]["runs"], 4);
    // Nothing is left for a daemon: what the hooks queued has run.
    assert_eq!(j["queue"]["pending"], 0, "{j}");
    assert_eq!(j["totals"]["success_rate"], 1.0);
    assert_eq!(j["totals"]["experiments_by_state"]["promoted"], 1);
}

#[test]
fn ctrl_c_stops_the_run_records_nothing_and_removes_the_checkout() {
    let mut w = World::new();
    let scratch = w.path("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    let repo = w.new_repo("r15");
    set_config(&w, &repo, "[test]\ncommand = \"sleep 30\"\n");
    let mut run = w.spawn(&repo, &["run"]);
    let started = w.wait_until(20, || {
        w.sandbox(&w.work(), &["events", "--kind", "test.started", "--json"])
            .stdout
            .contains("test.started")
    });
    assert!(started);
    assert_eq!(
        run_dirs(&scratch),
        1,
        "the run's directory exists while the test runs"
    );
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) };
    let status = run.child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        w.note(&repo, "HEAD").is_none(),
        "an interrupted run is no result"
    );
    assert_eq!(run_dirs(&scratch), 0, "the run's directory is gone");
}

#[test]
fn a_rewritten_commit_without_its_note_finds_the_result_by_tree() {
    let w = World::new();
    let repo = w.new_repo("r16");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let old = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // Rewrite without carrying notes (as a plain cherry-pick or a tool without rewriteRef would).
    let new = w
        .git(&repo, &["commit-tree", "HEAD^{tree}", "-m", "rewritten"])
        .trim()
        .to_string();
    w.git(&repo, &["reset", "-q", "--hard", &new]);
    assert!(w.note(&repo, "HEAD").is_none());
    let shown = w.sandbox(&repo, &["show", "--json"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    let j = shown.json();
    assert_eq!(j["cached_from"], old.as_str());
    assert_eq!(j["commit"], w.git(&repo, &["rev-parse", "HEAD"]).trim());
    assert_eq!(j["status"], "passed");
}

#[test]
fn a_commit_that_changes_nothing_reuses_its_parents_result() {
    let w = World::new();
    let repo = w.new_repo("r17");
    let parent = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    w.git(
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "nothing changed"],
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["cached_from"], parent.as_str());
    assert_eq!(rec["changes"]["files_changed"], 0);
    assert_eq!(rec["status"], "passed");
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(log.stdout.contains("(cached)"), "{log:?}");
}

#[test]
fn a_checkout_left_by_a_killed_run_is_removed_by_the_next_one() {
    let mut w = World::new();
    let scratch = w.path("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    let repo = w.new_repo("r19");
    set_config(&w, &repo, "[test]\ncommand = \"sleep 30\"\n");
    let mut run = w.spawn(&repo, &["run"]);
    assert!(w.wait_until(20, || run_dirs(&scratch) == 1));
    assert!(w.wait_until(20, || {
        w.sandbox(&w.work(), &["events", "--kind", "test.started", "--json"])
            .stdout
            .contains("test.started")
    }));
    run.child.kill().unwrap(); // kill -9: no destructor runs
    run.child.wait().unwrap();
    assert_eq!(run_dirs(&scratch), 1, "the killed run left its directory");
    // Its kept checkout gone too (or not to be trusted): the next run makes it again, in a
    // directory of its own, before its run directory — and still sweeps the scratch dir.
    for e in std::fs::read_dir(&scratch).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("git-sandbox-cache-")
        {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    let o = w.sandbox(&repo, &["run", "--command", "true"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(run_dirs(&scratch), 0, "the next run removed it");
}

#[test]
fn run_j_runs_commits_of_a_range_side_by_side_and_reports_them_in_order() {
    let w = World::new();
    let repo = w.new_repo("parallel");
    let base = set_config(
        &w,
        &repo,
        "[test]\ncommand = \"date +%s.%N; sleep 1; date +%s.%N\"\n[analysis]\nenabled = false\n",
    );
    let ids: Vec<String> = (0..4)
        .map(|i| w.commit(&repo, &[("f.txt", &i.to_string())], &format!("c{i}")))
        .collect();
    let o = w.sandbox(
        &repo,
        &["run", "-j", "2", "--json", &format!("{base}..HEAD")],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let records = o.json();
    let commits: Vec<&str> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["commit"].as_str().unwrap())
        .collect();
    assert_eq!(commits, ids, "oldest first, as given");
    let spans: Vec<(f64, f64)> = ids
        .iter()
        .map(|id| {
            let note = w.note(&repo, id).expect("each commit has its note");
            let out = note["tests"]["output_tail"].as_str().unwrap().to_string();
            let t: Vec<f64> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
            assert_eq!(t.len(), 2, "{out}");
            (t[0], t[1])
        })
        .collect();
    let overlapping = (0..spans.len())
        .flat_map(|i| (i + 1..spans.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| spans[i].0 < spans[j].1 && spans[j].0 < spans[i].1)
        .count();
    assert!(overlapping >= 1, "two commits ran at once: {spans:?}");
    let o = w.sandbox(
        &repo,
        &["run", "-j", "0", "--json", &format!("{base}..HEAD")],
    );
    assert_eq!(o.code, 2, "-j 0 is not a number of jobs: {o:?}");
    assert!(o.stderr.contains("--jobs"), "{o:?}");
    // Again with more jobs than commits: every result is there already.
    let o = w.sandbox(&repo, &["run", "-j", "8", &format!("{base}..HEAD")]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout.lines().count(), 4, "{o:?}");
}

#[test]
fn a_changed_tool_is_another_cache_key_and_explain_cache_says_so() {
    let w = World::new();
    let repo = w.new_repo("toolchain");
    // Under the user's home, which the sandbox hides but for the toolchains on PATH.
    let tools = w.path("home/tools/bin");
    std::fs::create_dir_all(&tools).unwrap();
    let tool = tools.join("mytool");
    let write_tool = |version: &str| {
        std::fs::write(&tool, format!("#!/bin/sh\necho mytool {version}\n")).unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    write_tool("1");
    w.own(&tools);
    let path = format!(
        "{}:{}:{}",
        tools.display(),
        World::bin_dir().display(),
        std::env::var("PATH").unwrap()
    );
    let env = [("PATH", path.as_str())];
    let c = set_config(&w, &repo, "[test]\ncommand = \"mytool\"\n");
    let o = w.sandbox_env(&repo, &["run"], &env);
    assert_eq!(o.code, 0, "{o:?}");
    let note = w.note(&repo, &c).unwrap();
    assert!(
        note["toolchain"]["mytool"]
            .as_str()
            .unwrap()
            .starts_with(&tool.display().to_string()),
        "the record names the tool it ran: {note}"
    );
    let o = w.sandbox_env(&repo, &["run", "--explain-cache"], &env);
    assert!(o.stdout.contains("keeps its own result"), "{o:?}");
    let empty = w.commit(&repo, &[], "same tree");
    let o = w.sandbox_env(&repo, &["run", "--explain-cache"], &env);
    assert!(
        o.stdout.contains(&format!("is served from {}", &c[..7])),
        "{o:?}"
    );

    // The tool changes: neither commit's result stands, and `--explain-cache` says why.
    write_tool("2, a newer one");
    let o = w.sandbox_env(
        &repo,
        &["run", "--explain-cache", "--json", &c, &empty],
        &env,
    );
    assert_eq!(o.code, 0, "{o:?}");
    let why = o.json();
    assert_eq!(why[0]["decision"], "run", "{why}");
    assert_eq!(why[1]["decision"], "run", "{why}");
    let reasons = why[0]["reasons"].to_string();
    assert!(reasons.contains("mytool was"), "{reasons}");
    assert!(
        w.note(&repo, &empty).is_none(),
        "--explain-cache runs nothing"
    );
    let o = w.sandbox_env(&repo, &["run", "--json"], &env);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["cached_from"], serde_json::Value::Null, "made again: {r}");
    assert!(
        r["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("mytool 2"),
        "{r}"
    );
}

#[test]
fn the_steps_timings_go_to_the_log_at_debug_level_and_leave_the_record_alone() {
    let w = World::new();
    let repo = w.new_repo("timings");
    let o = w.sandbox_env(
        &repo,
        &["run", "HEAD"],
        &[("GIT_SANDBOX_LOG", "timings=debug")],
    );
    assert_eq!(o.code, 0, "{o:?}");
    // Each step of the hot path with its milliseconds, the sandbox helper's among them.
    for step in [
        "step=\"run directory\"",
        "step=\"helper: ",
        "step=\"command, until it exits\"",
        "step=\"sandbox in all\"",
    ] {
        assert!(
            o.stderr
                .lines()
                .any(|l| l.contains("DEBUG") && l.contains(step) && l.contains(" ms=")),
            "{step}: {}",
            o.stderr
        );
    }
    let logged = w.note(&repo, "HEAD").unwrap();
    // Without a log filter none of it is printed, and the same run records the same fields.
    let w = World::new();
    let repo = w.new_repo("timings");
    let o = w.sandbox(&repo, &["run", "HEAD"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("ms="), "{}", o.stderr);
    let plain = w.note(&repo, "HEAD").unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&logged), keys(&plain));
}
