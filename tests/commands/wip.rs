//! Work in progress: `run --staged` and `run --worktree` run what is not committed yet, without
//! touching the index or the work tree, and committing that tree later is served from the result.

use crate::common;

use common::World;
use std::path::Path;

const PASSING: &str =
    "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";
const FAILING: &str =
    "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n";

/// What a user would compare: the index file's bytes and `git status --porcelain=v2` (asked
/// with `--no-optional-locks`, so that git itself does not refresh the index it reports on).
fn state(w: &World, repo: &Path) -> (Vec<u8>, String, String) {
    (
        std::fs::read(repo.join(".git/index")).unwrap(),
        w.git(
            repo,
            &[
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "--untracked-files=all",
            ],
        ),
        std::fs::read_to_string(repo.join("tests/test_more.py")).unwrap(),
    )
}

fn notes(w: &World, repo: &Path) -> usize {
    w.git(repo, &["notes", "--ref", "sandbox", "list"])
        .lines()
        .count()
}

#[test]
fn staged_and_worktree_runs_leave_index_and_work_tree_byte_identical_and_a_commit_reuses_them() {
    let w = World::new();
    let repo = w.new_repo("wip");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let notes_before = notes(&w, &repo);
    // Staged: a passing test. In the work tree: the same file failing, and an untracked file.
    std::fs::write(repo.join("tests/test_more.py"), PASSING).unwrap();
    w.own(&repo);
    w.git(&repo, &["add", "tests/test_more.py"]);
    std::fs::write(repo.join("tests/test_more.py"), FAILING).unwrap();
    std::fs::write(repo.join("draft.txt"), "not added yet\n").unwrap();
    w.own(&repo);
    let before = state(&w, &repo);

    let o = w.sandbox(&repo, &["run", "--staged"]);
    assert_eq!(o.code, 0, "the staged test passes: {o:?}");
    assert!(o.stdout.contains("3 passed"), "{o:?}");
    assert!(
        o.stdout.contains("the index (staged changes) of main"),
        "{o:?}"
    );
    assert_eq!(state(&w, &repo), before, "index and work tree untouched");

    let o = w.sandbox(&repo, &["run", "--worktree", "--json"]);
    assert_eq!(o.code, 1, "the work tree's version fails: {o:?}");
    let record = &o.json()[0];
    assert_eq!(record["status"], "failed");
    assert_eq!(record["tests"]["failed"], 1);
    let snapshot = record["commit"].as_str().unwrap().to_string();
    assert_eq!(state(&w, &repo), before, "index and work tree untouched");
    assert_eq!(
        notes(&w, &repo),
        notes_before,
        "no note for work not committed"
    );
    assert!(
        w.git(&repo, &["branch", "--contains", &snapshot])
            .trim()
            .is_empty(),
        "no branch holds the snapshot"
    );

    // Committing exactly that tree gets the result at once, from the index.
    w.git(&repo, &["add", "-A"]);
    w.git(&repo, &["commit", "-qm", "as tried"]);
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stdout.contains("(cached)"), "{o:?}");
    let note = w.note(&repo, "HEAD").unwrap();
    assert_eq!(note["cached_from"], snapshot.as_str());
    assert_eq!(note["tree"], record["tree"]);
    assert_eq!(note["tests"]["failed"], 1);
}

#[test]
fn a_snapshot_refuses_revisions_and_an_unmerged_index() {
    let w = World::new();
    let repo = w.new_repo("conflict");
    let o = w.sandbox(&repo, &["run", "--staged", "HEAD"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("cannot be used with"), "{o:?}");

    w.git(&repo, &["checkout", "-q", "-b", "other"]);
    w.commit(&repo, &[("README.md", "other\n")], "other");
    w.git(&repo, &["checkout", "-q", "main"]);
    w.commit(&repo, &[("README.md", "main\n")], "main");
    let merge = w.git_out(&repo, &["merge", "-q", "other"], true);
    assert_ne!(merge.code, 0, "a conflict: {merge:?}");
    let index = std::fs::read(repo.join(".git/index")).unwrap();
    let o = w.sandbox(&repo, &["run", "--worktree"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("unmerged paths"), "{o:?}");
    assert!(hints.iter().any(|h| h.contains("resolve them")), "{o:?}");
    assert_eq!(std::fs::read(repo.join(".git/index")).unwrap(), index);
}

#[test]
fn the_daemon_never_writes_a_snapshots_result_as_a_lost_note() {
    let w = World::new();
    let repo = w.new_repo("wip-daemon");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(repo.join("tests/test_more.py"), PASSING).unwrap();
    w.own(&repo);
    w.git(&repo, &["add", "tests/test_more.py"]);
    let staged = w.sandbox(&repo, &["run", "--staged", "--json"]);
    assert_eq!(staged.code, 0, "{staged:?}");
    std::fs::write(repo.join("draft.txt"), "not added yet\n").unwrap();
    w.own(&repo);
    let worktree = w.sandbox(&repo, &["run", "--worktree", "--json"]);
    assert_eq!(worktree.code, 0, "{worktree:?}");
    let snapshots: Vec<String> = [&staged, &worktree]
        .iter()
        .map(|o| o.json()[0]["commit"].as_str().unwrap().to_string())
        .collect();
    // A real loss beside them: HEAD's note dropped by a writer that does not compare-and-swap.
    w.git(&repo, &["notes", "--ref=sandbox", "remove", "HEAD"]);
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(20, || w.note(&repo, "HEAD").is_some()),
        "HEAD's note not restored"
    );
    let events = w.sandbox(&w.work(), &["events", "--kind", "notes.restored", "--json"]);
    assert_eq!(events.code, 0, "{events:?}");
    let restored: Vec<serde_json::Value> = events
        .stdout
        .lines()
        .flat_map(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            e["data"]["commits"].as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(restored, [serde_json::json!(head)], "{events:?}");
    for s in &snapshots {
        assert!(w.note(&repo, s).is_none(), "a note for snapshot {s}");
    }
    let log = std::fs::read_to_string(w.path("daemon.log")).unwrap();
    assert!(log.contains("wrote 1 lost note again"), "{log}");
}
