//! Rollback: `promote --watch` (or `[promote] rollback = true`) watches production's run of the
//! promoted commit and, when it fails, puts a commit reverting the promotion on production — a
//! fast-forward, never a rewrite — and marks the experiment rolled back with why.

use crate::common;

use common::World;
use std::path::Path;

const VALUE_TEST: &str = "import pathlib\nimport unittest\n\n\nclass TestValue(unittest.TestCase):\n    def test_value(self):\n        self.assertEqual(pathlib.Path('value.txt').read_text().strip(), 'ok')\n";

fn on_branch(w: &World, repo: &Path, branch: &str, files: &[(&str, &str)], msg: &str) -> String {
    w.git(repo, &["switch", "-q", branch]);
    let id = w.commit(repo, files, msg);
    w.git(repo, &["switch", "-q", "main"]);
    id
}

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

#[test]
fn a_promotion_that_breaks_production_is_reverted_and_the_experiment_marked_rolled_back() {
    let w = World::new();
    w.alerts_to_file();
    let repo = w.new_repo("rollback");
    w.commit(
        &repo,
        &[("value.txt", "ok\n"), ("tests/test_value.py", VALUE_TEST)],
        "a value and its test",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let before = rev(&w, &repo, "main");
    let before_tree = rev(&w, &repo, "main^{tree}");

    assert_eq!(
        w.sandbox(&repo, &["experiment", "start", "breaker"]).code,
        0
    );
    on_branch(
        &w,
        &repo,
        "experiment/breaker",
        &[("value.txt", "broken\n")],
        "break it",
    );
    let o = w.sandbox(
        &repo,
        &["promote", "breaker", "--force", "--watch", "--json"],
    );
    assert_eq!(o.code, 1, "rolled back: {o:?}");
    let p = o.json();
    let promoted = p["commit"].as_str().unwrap().to_string();
    let rb = &p["rolled_back"];
    assert_eq!(rb["promoted"], promoted.as_str(), "{p}");
    assert!(
        rb["reason"]
            .as_str()
            .unwrap()
            .contains("is failed (test_value"),
        "{p}"
    );
    // Production is the revert on top of the promotion: its old tree, its history kept.
    let revert = rev(&w, &repo, "main");
    assert_eq!(rb["revert"], revert.as_str());
    assert_eq!(
        rev(&w, &repo, "main^"),
        promoted,
        "a fast-forward, no rewrite"
    );
    assert_eq!(rev(&w, &repo, "main^{tree}"), before_tree);
    assert_eq!(rev(&w, &repo, "main^^"), before);
    let message = w.git(&repo, &["log", "-1", "--format=%B", "main"]);
    assert!(
        message.starts_with("Roll back experiment breaker"),
        "{message}"
    );
    assert!(
        message.contains(&format!("Git-Sandbox-Rollback: {promoted}")),
        "{message}"
    );
    // Production's run of the revert: served from the tree it had before.
    assert_eq!(rb["result"]["status"], "passed", "{p}");
    assert_eq!(rb["result"]["cached_from"], before.as_str(), "{p}");
    // The user's checkout followed (it was clean), so the work tree is whole again.
    assert_eq!(
        std::fs::read_to_string(repo.join("value.txt")).unwrap(),
        "ok\n"
    );

    // The experiment says so, with why; it cannot be promoted again.
    let shown = w
        .sandbox(&repo, &["experiment", "show", "breaker", "--json"])
        .json();
    assert_eq!(shown["status"], "rolled_back", "{shown}");
    assert_eq!(shown["state"], "rolled_back", "{shown}");
    assert!(
        shown["rollback"]["reason"]
            .as_str()
            .unwrap()
            .contains("test_value"),
        "{shown}"
    );
    let human = w.sandbox(&repo, &["experiment", "show", "breaker"]);
    assert!(
        human.stdout.contains("State:      rolled_back"),
        "{human:?}"
    );
    assert!(human.stdout.contains("Rolled back:"), "{human:?}");
    let status = w.sandbox(&repo, &["status"]);
    assert!(status.stdout.contains("1 rolled_back"), "{status:?}");
    let again = w.sandbox(&repo, &["promote", "breaker"]);
    assert_eq!(again.code, 2, "{again:?}");
    let (problem, hints) = again.error();
    assert!(
        problem.contains("was promoted and rolled back"),
        "{problem}"
    );
    assert!(
        hints[0].contains("--from refs/heads/experiment/breaker"),
        "{hints:?}"
    );

    // The rollback was announced.
    let kinds: Vec<String> = w
        .alerts_received()
        .iter()
        .map(|a| a["kind"].to_string())
        .collect();
    assert!(
        kinds.iter().any(|k| k == "\"experiment.rolled_back\""),
        "{kinds:?}"
    );

    // With `[promote] rollback = true` a passing promotion is watched and stays.
    w.commit(
        &repo,
        &[(".sandbox.toml", "[promote]\nrollback = true\n")],
        "watch promotions",
    );
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "fine"]).code, 0);
    on_branch(
        &w,
        &repo,
        "experiment/fine",
        &[("notes.txt", "fine\n")],
        "notes",
    );
    let o = w.sandbox(&repo, &["promote", "fine"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("Watched: production's run of"), "{o:?}");
    let shown = w
        .sandbox(&repo, &["experiment", "show", "fine", "--json"])
        .json();
    assert_eq!(shown["status"], "promoted", "{shown}");
    // With --json, stdout is the JSON alone.
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "fine2"]).code, 0);
    on_branch(
        &w,
        &repo,
        "experiment/fine2",
        &[("more.txt", "more\n")],
        "more",
    );
    let o = w.sandbox(&repo, &["promote", "fine2", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let p = o.json();
    assert_eq!(p["watched"], true, "{p}");
    assert!(p["rolled_back"].is_null(), "{p}");

    // A pull request is GitHub's to merge: --watch says so and changes nothing.
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "pr"]).code, 0);
    let o = w.sandbox(
        &repo,
        &["promote", "pr", "--strategy", "pull-request", "--watch"],
    );
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.error().0.contains("--watch cannot watch a pull request"),
        "{o:?}"
    );
}
