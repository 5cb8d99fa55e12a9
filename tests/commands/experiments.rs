//! `experiment start|list|show`, `eval`, `promote`, `kill`: the lifecycle of an experiment on
//! real repositories, with real test runs.

use crate::common;
#[path = "experiments/metadata.rs"]
mod metadata;
#[path = "experiments/ranking.rs"]
mod ranking;

use common::World;
use std::path::Path;

const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";
const BROKEN_TESTS: &str = "import unittest\n\n\nclass TestBroken(unittest.TestCase):\n    def test_math(self):\n        self.assertEqual(1 + 1, 3)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

fn ref_exists(w: &World, repo: &Path, r: &str) -> bool {
    w.git_out(repo, &["rev-parse", "--verify", "--quiet", r], true)
        .code
        == 0
}

fn start(w: &World, repo: &Path, name: &str) {
    let o = w.sandbox(repo, &["experiment", "start", name]);
    assert_eq!(o.code, 0, "{o:?}");
}

/// Production's tree holds nothing of experiments' bookkeeping.
fn assert_no_bookkeeping(w: &World, repo: &Path, rev: &str) {
    let files = w.git(repo, &["ls-tree", "-r", "--name-only", rev]);
    assert!(
        !files.lines().any(|f| f.starts_with("experiments/")),
        "{rev} holds bookkeeping: {files}"
    );
}

/// A TOML file of overrides for `experiment start --config`.
fn overrides(w: &World, name: &str, text: &str) -> String {
    let p = w.path(&format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// An `error:` line that names the problem (holding `needle`), then `hint:` lines only.
fn error_naming(o: &common::Out, code: i32, needle: &str) {
    assert_eq!(o.code, code, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains(needle) || hints.iter().any(|h| h.contains(needle)),
        "{o:?}"
    );
}

#[test]
fn start_eval_promote_end_to_end() {
    let w = World::new();
    let repo = w.new_repo("flow");
    let main_before = rev(&w, &repo, "main");

    let o = w.sandbox(
        &repo,
        &[
            "experiment",
            "start",
            "faster",
            "--hypothesis",
            "more tests catch more bugs",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "experiment/faster\n");
    // The branch starts at production with no commit; the metadata is kept outside the tree;
    // the user's checkout did not move.
    assert_eq!(w.git(&repo, &["branch", "--show-current"]).trim(), "main");
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(rev(&w, &repo, "main"), main_before);
    assert_eq!(rev(&w, &repo, "experiment/faster"), main_before);
    let meta = w.git(
        &repo,
        &["show", "refs/sandbox/experiments/faster:experiment.toml"],
    );
    for needle in [
        "name = \"faster\"",
        "hypothesis = \"more tests catch more bugs\"",
        &format!("base_commit = \"{main_before}\""),
        "author = \"Test Author <author@example.com>\"",
        "created_at = ",
        "[config]",
    ] {
        assert!(meta.contains(needle), "{needle} in {meta}");
    }

    // Bad input: the same name again, a bad name, a bad revision; nothing is created.
    error_naming(
        &w.sandbox(&repo, &["experiment", "start", "faster"]),
        2,
        "already exists",
    );
    error_naming(
        &w.sandbox(&repo, &["experiment", "start", "no/slash"]),
        2,
        "contains a slash",
    );
    error_naming(
        &w.sandbox(&repo, &["experiment", "start", "x", "--from", "nope"]),
        2,
        "unknown revision \"nope\"",
    );
    assert!(!ref_exists(&w, &repo, "refs/heads/experiment/x"));

    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["experiments"][0]["name"], "faster");
    assert_eq!(list["experiments"][0]["state"], "active");
    assert_eq!(
        list["experiments"][0]["hypothesis"],
        "more tests catch more bugs"
    );
    let human = w.sandbox(&repo, &["experiment", "list"]);
    assert!(
        human
            .stdout
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("faster  active"),
        "{human:?}"
    );

    let head = w.commit_on(
        &repo,
        "experiment/faster",
        &[("tests/test_more.py", MORE_TESTS)],
        "Add a test",
    );
    let o = w.sandbox(&repo, &["eval", "faster", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let ev = o.json();
    assert_eq!(ev["experiment"], "faster");
    assert_eq!(ev["head"]["commit"], head.as_str());
    assert_eq!(ev["base"]["commit"], main_before.as_str());
    assert_eq!(ev["base"]["ref"], "refs/heads/main");
    assert_eq!(ev["recommendation"], "STRONGLY_RECOMMEND", "{ev}");
    let names: Vec<&str> = ev["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["tests_pass", "passing_tests", "complexity", "has_data"]
    );
    for c in ev["criteria"].as_array().unwrap() {
        assert_eq!(c["pass"], true, "{c}");
        assert!(
            c.get("value").is_some() && c.get("threshold").is_some(),
            "{c}"
        );
    }
    assert_eq!(ev["criteria"][1]["value"], 3);
    assert_eq!(ev["criteria"][1]["threshold"], 2);
    assert!(ev["evaluated_at"].as_str().unwrap().ends_with('Z'));
    // Both heads were run as a side effect, and the evaluation is a note on the experiment's head.
    assert_eq!(w.note(&repo, &head).unwrap()["experiment"], "faster");
    assert_eq!(w.note(&repo, "main").unwrap()["status"], "passed");
    let note = w.git(&repo, &["notes", "--ref=sandbox-eval", "show", &head]);
    let note: serde_json::Value = serde_json::from_str(&note).unwrap();
    assert_eq!(note["schema"], "git-sandbox/eval/v1");
    assert_eq!(note["recommendation"], "STRONGLY_RECOMMEND");

    let show = w
        .sandbox(&repo, &["experiment", "show", "faster", "--json"])
        .json();
    assert_eq!(show["state"], "active");
    assert_eq!(show["head"], head.as_str());
    assert_eq!(show["runs"], 1);
    assert_eq!(
        show["commits"].as_array().unwrap().len(),
        1,
        "the test alone: starting made no commit"
    );
    assert_eq!(show["latest_result"]["tests"]["passed"], 3);
    assert_eq!(
        show["latest_evaluation"]["recommendation"],
        "STRONGLY_RECOMMEND"
    );
    assert_eq!(show["metadata"]["base"], "main");
    let human = w.sandbox(&repo, &["experiment", "show", "faster"]);
    assert!(
        human.stdout.contains("Evaluation: STRONGLY_RECOMMEND"),
        "{human:?}"
    );

    // A dry run builds and tests the merge, and moves nothing.
    let o = w.sandbox(&repo, &["promote", "faster", "--dry-run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let dry = o.json();
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["result"]["status"], "passed", "{dry}");
    assert_eq!(rev(&w, &repo, "main"), main_before);
    assert!(!repo.join("tests/test_more.py").exists());
    assert!(!ref_exists(&w, &repo, "refs/sandbox/promoted/faster"));
    let human = w.sandbox(&repo, &["promote", "faster", "--dry-run"]);
    assert!(
        human
            .stdout
            .contains("Would promote experiment faster into main")
            && human.stdout.contains("Nothing was changed"),
        "{human:?}"
    );
    let listed = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    assert_eq!(listed["experiments"][0]["state"], "active");

    // main is checked out and clean: the merge lands in the work tree too.
    let o = w.sandbox(&repo, &["promote", "faster", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let p = o.json();
    assert_eq!(p["strategy"], "merge");
    assert_eq!(p["recommendation"], "STRONGLY_RECOMMEND");
    assert_eq!(p["previous"], main_before.as_str());
    let merged = rev(&w, &repo, "main");
    assert_eq!(p["commit"], merged.as_str());
    assert_eq!(
        rev(
            &w,
            &repo,
            &format!("{}^{{tree}}", dry["commit"].as_str().unwrap())
        ),
        rev(&w, &repo, "main^{tree}"),
        "the dry run tested the tree main got"
    );
    assert_eq!(
        w.git(&repo, &["rev-parse", "main^1", "main^2"]),
        format!("{main_before}\n{head}\n")
    );
    let message = w.git(&repo, &["log", "-1", "--format=%B", "main"]);
    assert!(
        message.starts_with("Promote experiment faster (STRONGLY_RECOMMEND)"),
        "{message}"
    );
    assert!(
        repo.join("tests/test_more.py").exists(),
        "the checkout of main was updated"
    );
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_no_bookkeeping(&w, &repo, "main");
    assert_eq!(p["result"]["status"], "passed");
    assert_eq!(
        w.note(&repo, "main").unwrap()["tests"]["passed"],
        3,
        "the merged commit was run"
    );
    assert_eq!(
        w.sandbox(&repo, &["experiment", "show", "faster", "--json"])
            .json()["state"],
        "promoted"
    );
    error_naming(
        &w.sandbox(&repo, &["promote", "faster"]),
        2,
        "already promoted",
    );

    let status = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(status["totals"]["experiments"], 1);
    assert_eq!(status["totals"]["experiments_by_state"]["promoted"], 1);
    assert_eq!(status["totals"]["experiments_by_state"]["active"], 0);
    let human = w.sandbox(&w.work(), &["status"]);
    assert!(
        human
            .stdout
            .contains("experiments:   1 (0 active, 1 promoted, 0 killed)"),
        "{human:?}"
    );
}

#[test]
fn a_failing_experiment_is_refused_and_main_is_unchanged() {
    let w = World::new();
    let repo = w.new_repo("failing");
    start(&w, &repo, "broken");
    w.commit_on(
        &repo,
        "experiment/broken",
        &[("tests/test_broken.py", BROKEN_TESTS)],
        "Break it",
    );
    let main_before = rev(&w, &repo, "main");

    let o = w.sandbox(&repo, &["eval", "broken"]);
    assert_eq!(o.code, 1, "NOT_READY is a failure: {o:?}");
    assert!(o.stdout.starts_with("Evaluation: NOT_READY"), "{o:?}");
    assert!(o.stdout.contains("✘ tests_pass"), "{o:?}");

    let o = w.sandbox(&repo, &["promote", "broken"]);
    error_naming(&o, 1, "promote refused");
    let (problem, hints) = o.error();
    assert!(
        problem.contains("NOT_READY") && problem.contains("below the minimum RECOMMEND"),
        "{o:?}"
    );
    assert_eq!(
        hints,
        ["see `git sandbox eval broken`, fix it on experiment/broken, or pass --force"],
        "{o:?}"
    );
    assert_eq!(rev(&w, &repo, "main"), main_before);
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        w.sandbox(&repo, &["experiment", "show", "broken", "--json"])
            .json()["state"],
        "active"
    );

    // --force promotes anyway and says so in the merge commit.
    let o = w.sandbox(&repo, &["promote", "broken", "--force"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("warning: promoted with --force although the merged commit"),
        "{o:?}"
    );
    let message = w.git(&repo, &["log", "-1", "--format=%s", "main"]);
    assert_eq!(
        message.trim(),
        "Promote experiment broken (NOT_READY, forced)"
    );
}

#[test]
fn a_conflict_changes_nothing_and_says_how_to_resolve_it() {
    let w = World::new();
    let repo = w.new_repo("conflict");
    start(&w, &repo, "rewrite");
    w.commit_on(
        &repo,
        "experiment/rewrite",
        &[("README.md", "experiment's readme\n")],
        "Rewrite the README",
    );
    w.commit(
        &repo,
        &[("README.md", "production's readme\n")],
        "Change the README on main",
    );
    let main_before = rev(&w, &repo, "main");

    let o = w.sandbox(&repo, &["promote", "rewrite", "--force"]);
    error_naming(&o, 1, "conflicts in README.md");
    let (_, hints) = o.error();
    assert!(
        hints[0].contains("git switch experiment/rewrite && git merge main"),
        "{o:?}"
    );
    assert_eq!(rev(&w, &repo, "main"), main_before);
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "production's readme\n"
    );
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        w.sandbox(&repo, &["experiment", "show", "rewrite", "--json"])
            .json()["state"],
        "active"
    );
}

#[test]
fn a_dirty_checkout_of_production_is_refused() {
    let w = World::new();
    let repo = w.new_repo("dirty");
    start(&w, &repo, "more");
    w.commit_on(
        &repo,
        "experiment/more",
        &[("tests/test_more.py", MORE_TESTS)],
        "Add a test",
    );
    std::fs::write(repo.join("README.md"), "my unsaved work\n").unwrap();
    let main_before = rev(&w, &repo, "main");

    let o = w.sandbox(&repo, &["promote", "more"]);
    error_naming(&o, 1, "uncommitted changes");
    assert!(o.stderr.contains("git stash"), "{o:?}");
    assert_eq!(rev(&w, &repo, "main"), main_before);
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "my unsaved work\n"
    );
    assert!(!repo.join("tests/test_more.py").exists());

    // Somewhere else checked out, main moves and the user's work tree stays exactly as it was.
    w.git(&repo, &["stash", "-q"]);
    w.git(&repo, &["switch", "-q", "-c", "elsewhere"]);
    w.git(&repo, &["stash", "pop", "-q"]);
    let o = w.sandbox(&repo, &["promote", "more", "--strategy", "ff", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["worktree_updated"], serde_json::Value::Null);
    assert_eq!(
        rev(&w, &repo, "main"),
        rev(&w, &repo, "experiment/more"),
        "fast-forwarded, no merge commit"
    );
    assert_eq!(
        w.git(&repo, &["branch", "--show-current"]).trim(),
        "elsewhere"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "my unsaved work\n"
    );
    assert!(!repo.join("tests/test_more.py").exists());
}

#[test]
fn fast_forward_is_refused_when_production_moved() {
    let w = World::new();
    let repo = w.new_repo("ff");
    start(&w, &repo, "late");
    w.commit_on(
        &repo,
        "experiment/late",
        &[("tests/test_more.py", MORE_TESTS)],
        "Add a test",
    );
    w.commit(&repo, &[("notes.txt", "moved on\n")], "main moves on");
    let main_before = rev(&w, &repo, "main");
    let o = w.sandbox(&repo, &["promote", "late", "--strategy", "ff"]);
    error_naming(&o, 1, "cannot be fast-forwarded");
    assert_eq!(rev(&w, &repo, "main"), main_before);
    error_naming(
        &w.sandbox(&repo, &["promote", "late", "--strategy", "octopus"]),
        2,
        "invalid --strategy",
    );
}

#[test]
fn kill_archives_the_branch_and_keeps_its_results() {
    let w = World::new();
    let repo = w.new_repo("kill");
    start(&w, &repo, "dead-end");
    let head = w.commit_on(
        &repo,
        "experiment/dead-end",
        &[("tests/test_more.py", MORE_TESTS)],
        "Try something",
    );
    assert_eq!(w.sandbox(&repo, &["run", "experiment/dead-end"]).code, 0);

    // Checked out: refused, nothing moves.
    w.git(&repo, &["switch", "-q", "experiment/dead-end"]);
    error_naming(
        &w.sandbox(&repo, &["kill", "dead-end"]),
        1,
        "is checked out in",
    );
    w.git(&repo, &["switch", "-q", "main"]);

    let o = w.sandbox(&repo, &["kill", "dead-end"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout
            .contains("archived at refs/sandbox/archive/dead-end"),
        "{o:?}"
    );
    assert!(!ref_exists(&w, &repo, "refs/heads/experiment/dead-end"));
    assert_eq!(rev(&w, &repo, "refs/sandbox/archive/dead-end"), head);
    assert_eq!(
        w.note(&repo, &head).unwrap()["status"],
        "passed",
        "the result stays reachable"
    );
    let show = w
        .sandbox(&repo, &["experiment", "show", "dead-end", "--json"])
        .json();
    assert_eq!(show["state"], "killed");
    assert_eq!(show["head"], head.as_str());
    assert_eq!(show["latest_result"]["status"], "passed");

    error_naming(
        &w.sandbox(&repo, &["experiment", "start", "dead-end"]),
        2,
        "already exists",
    );
    error_naming(&w.sandbox(&repo, &["eval", "dead-end"]), 2, "was killed");
    error_naming(&w.sandbox(&repo, &["promote", "dead-end"]), 2, "was killed");
    error_naming(&w.sandbox(&repo, &["kill", "dead-end"]), 2, "--delete");

    assert_eq!(w.sandbox(&repo, &["kill", "dead-end", "--delete"]).code, 0);
    assert!(!ref_exists(&w, &repo, "refs/sandbox/archive/dead-end"));

    start(&w, &repo, "gone");
    let o = w.sandbox(&repo, &["kill", "gone", "--delete", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["archive"], serde_json::Value::Null);
    assert!(!ref_exists(&w, &repo, "refs/heads/experiment/gone"));
    assert!(!ref_exists(&w, &repo, "refs/sandbox/archive/gone"));
    let counts = w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]
        ["experiments_by_state"]
        .clone();
    assert_eq!(counts["killed"], 2);

    // Its branch deleted by hand, an experiment is its metadata: --delete removes that too.
    start(&w, &repo, "orphan");
    w.git(&repo, &["branch", "-q", "-D", "experiment/orphan"]);
    error_naming(&w.sandbox(&repo, &["kill", "orphan"]), 2, "--delete");
    assert_eq!(w.sandbox(&repo, &["kill", "orphan", "--delete"]).code, 0);
    assert!(!ref_exists(&w, &repo, "refs/sandbox/experiments/orphan"));
    start(&w, &repo, "orphan");
}

#[test]
fn unknown_experiments_are_usage_errors() {
    let w = World::new();
    let repo = w.new_repo("unknown");
    for args in [
        vec!["eval", "nope"],
        vec!["promote", "nope"],
        vec!["kill", "nope"],
        vec!["experiment", "show", "nope"],
    ] {
        let o = w.sandbox(&repo, &args);
        error_naming(&o, 2, "unknown experiment \"nope\"");
        // Not "start it": with none yet, the hint says so (a typo's fix lists the others).
        assert!(
            o.stderr
                .contains("hint: this repository has no experiments yet"),
            "{o:?}"
        );
    }
    error_naming(&w.sandbox(&repo, &["eval", "../x"]), 2, "invalid name");
    let o = w.sandbox(&repo, &["experiment", "list"]);
    assert!(o.stdout.contains("No experiments yet"), "{o:?}");
    // No production branch: say how to name one.
    w.git(&repo, &["branch", "-m", "main", "trunk"]);
    error_naming(
        &w.sandbox(&repo, &["experiment", "start", "x"]),
        2,
        "production branch \"main\" does not exist",
    );
    assert_eq!(
        w.sandbox(&repo, &["experiment", "start", "x", "--from", "trunk"])
            .code,
        0
    );
}

#[test]
fn reindex_rebuilds_experiments_and_evaluations_from_git() {
    let w = World::new();
    let repo = w.new_repo("reindex");
    start(&w, &repo, "kept");
    start(&w, &repo, "merged");
    start(&w, &repo, "dropped");
    w.commit_on(
        &repo,
        "experiment/merged",
        &[("tests/test_more.py", MORE_TESTS)],
        "Add a test",
    );
    assert_eq!(w.sandbox(&repo, &["promote", "merged"]).code, 0);
    assert_eq!(w.sandbox(&repo, &["kill", "dropped"]).code, 0);
    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    let o = w.sandbox(&w.work(), &["reindex", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["experiments"], 3);
    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    let states: std::collections::BTreeMap<String, String> = list["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(states["kept"], "active");
    assert_eq!(states["merged"], "promoted");
    assert_eq!(states["dropped"], "killed");
    let merged = list["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "merged")
        .unwrap()
        .clone();
    assert_eq!(
        merged["latest_evaluation"]["recommendation"],
        "STRONGLY_RECOMMEND"
    );
}

#[test]
fn the_experiment_config_applies_to_its_runs() {
    let w = World::new();
    let repo = w.new_repo("config");
    let config = overrides(
        &w,
        "custom",
        "[test]\ncommand = \"echo from-the-experiment\"\n",
    );
    let o = w.sandbox(
        &repo,
        &["experiment", "start", "custom", "--config", &config],
    );
    assert_eq!(o.code, 0, "{o:?}");
    w.commit_on(
        &repo,
        "experiment/custom",
        &[("NOTES.md", "notes\n")],
        "A change",
    );
    let o = w.sandbox(&repo, &["run", "experiment/custom", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["tests"]["command"], "echo from-the-experiment");
    assert_eq!(o.json()[0]["experiment"], "custom");

    // A broken file is refused when the experiment starts, not at its first run.
    let bad = overrides(&w, "bad", "[test]\ncommand = 3\n");
    let o = w.sandbox(&repo, &["experiment", "start", "bad", "--config", &bad]);
    error_naming(&o, 2, "command");
    assert!(!ref_exists(&w, &repo, "refs/heads/experiment/bad"));
}

/// Branches pushed as `experiment/NAME` without `experiment start` (agents make thousands) count
/// the commits production does not hold: none for one left behind or merged, its own for one
/// that moved on, production's newer commits never.
#[test]
fn a_branch_without_metadata_counts_only_the_commits_production_lacks() {
    let w = World::new();
    let repo = w.new_repo("agents");
    let ids = |o: &common::Out| -> Vec<String> {
        o.json()["commits"]
            .as_array()
            .unwrap_or_else(|| panic!("{o:?}"))
            .iter()
            .map(|c| c["commit"].as_str().unwrap().to_string())
            .collect()
    };
    w.git(&repo, &["branch", "experiment/behind"]);
    w.git(&repo, &["branch", "experiment/merged"]);
    let merged = w.commit_on(
        &repo,
        "experiment/merged",
        &[("m.txt", "m\n")],
        "merged work",
    );
    w.commit(&repo, &[("a.txt", "a\n")], "main moves");
    w.git(&repo, &["branch", "experiment/own"]);
    let y1 = w.commit_on(&repo, "experiment/own", &[("y.txt", "1\n")], "own 1");
    let y2 = w.commit_on(&repo, "experiment/own", &[("y.txt", "2\n")], "own 2");
    w.git(
        &repo,
        &["merge", "-q", "--no-ff", "-m", "merge", "experiment/merged"],
    );
    w.commit(&repo, &[("b.txt", "b\n")], "main moves again");

    let list = w.sandbox(&repo, &["experiment", "list", "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    let shown = |name: &str| w.sandbox(&repo, &["experiment", "show", name, "--json"]);
    assert_eq!(ids(&shown("behind")), Vec::<String>::new());
    assert_eq!(
        ids(&shown("merged")),
        Vec::<String>::new(),
        "{merged} is production's"
    );
    assert_eq!(ids(&shown("own")), vec![y2, y1]);
}
