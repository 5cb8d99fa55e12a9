//! The pre-push gate (`[hooks] pre_push`): real `git push` to a real bare remote through the
//! pre-push hook `git sandbox new` installed.

use crate::common;

use common::World;
use std::path::{Path, PathBuf};

const FAILING: &str =
    "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n";
const PASSING: &str =
    "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

/// A new repository with a bare remote `origin`, and the gate set to `mode` in the user config.
fn pushing(w: &World, mode: &str) -> (PathBuf, PathBuf) {
    w.user_config(&format!("[hooks]\npre_push = \"{mode}\"\n"));
    let repo = w.new_repo("gated");
    assert!(
        repo.join(".git/hooks/pre-push").is_file(),
        "the gate's hook"
    );
    let remote = w.bare_remote(&repo, "remote.git");
    (repo, remote)
}

fn push(w: &World, repo: &Path) -> common::Out {
    w.git_out(repo, &["push", "-q", "origin", "main"], true)
}

fn remote_main(w: &World, remote: &Path) -> Option<String> {
    let o = w.git_out(
        remote,
        &["rev-parse", "--verify", "-q", "refs/heads/main"],
        false,
    );
    (o.code == 0).then(|| o.stdout.trim().to_string())
}

#[test]
fn block_refuses_a_failing_tip_and_lets_a_fixed_one_through() {
    let w = World::new();
    let (repo, remote) = pushing(&w, "block");
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let o = push(&w, &repo);
    assert_ne!(o.code, 0, "the push is refused: {o:?}");
    assert!(o.stderr.contains("the tip of main failed"), "{o:?}");
    assert!(o.stderr.contains(&bad[..7]), "{o:?}");
    assert!(o.stderr.contains("git push --no-verify"), "{o:?}");
    assert_eq!(remote_main(&w, &remote), None, "nothing reached the remote");

    // Fixed forward: the tip passes; the broken commit below it is named, not refused.
    let good = w.commit(&repo, &[("tests/test_more.py", PASSING)], "fixed");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = push(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("1 earlier new commit below the tip of main failed"),
        "{o:?}"
    );
    assert_eq!(remote_main(&w, &remote).as_deref(), Some(good.as_str()));

    // A tip with no result yet (a tree never run) is not gated by `block`.
    let unrun = w.commit(
        &repo,
        &[("tests/test_more.py", FAILING), ("NOTES.md", "new\n")],
        "broken again",
    );
    let o = push(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stderr.contains("has no result yet"), "{o:?}");
    assert_eq!(remote_main(&w, &remote).as_deref(), Some(unrun.as_str()));
}

#[test]
fn wait_runs_a_tip_without_a_result_and_warn_only_says() {
    let w = World::new();
    let (repo, remote) = pushing(&w, "wait");
    // Not run before the push: the gate runs it (there is no daemon) and refuses it.
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    let o = push(&w, &repo);
    assert_ne!(o.code, 0, "{o:?}");
    assert!(o.stderr.contains("the tip of main failed"), "{o:?}");
    assert_eq!(remote_main(&w, &remote), None);
    assert_eq!(
        w.note(&repo, &bad).unwrap()["status"],
        "failed",
        "kept as the commit's result"
    );
    let good = w.commit(&repo, &[("tests/test_more.py", PASSING)], "fixed");
    let o = push(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(w.note(&repo, &good).unwrap()["status"], "passed");
    assert_eq!(remote_main(&w, &remote).as_deref(), Some(good.as_str()));

    // `warn`: a failing tip is named and pushed.
    w.user_config("[hooks]\npre_push = \"warn\"\n");
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken again");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let o = push(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains("warning: the tip of main failed"),
        "{o:?}"
    );
    assert_eq!(remote_main(&w, &remote).as_deref(), Some(bad.as_str()));

    // Off (the default): not a word.
    w.user_config("");
    let again = w.commit(&repo, &[("README.md", "more\n")], "readme");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let o = push(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("git-sandbox"), "{o:?}");
    assert_eq!(remote_main(&w, &remote).as_deref(), Some(again.as_str()));
}

#[test]
fn a_bad_gate_setting_is_named_with_its_fix() {
    let w = World::new();
    w.user_config("[hooks]\npre_push = \"always\"\n");
    let o = w.sandbox(&w.work(), &["status"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("hooks.pre_push"), "{o:?}");
    assert!(
        hints.iter().any(|h| h.contains("off, warn, block, wait")),
        "{o:?}"
    );
}

#[test]
fn a_commit_can_tighten_the_gate_but_not_loosen_it() {
    let w = World::new();
    let (repo, remote) = pushing(&w, "block");
    // An earlier failing commit, then one that fails too and says the gate is off.
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let loosen = w.commit(
        &repo,
        &[
            (".sandbox.toml", "[hooks]\npre_push = \"off\"\n"),
            ("NOTES.md", "gate off\n"),
        ],
        "turn the gate off",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let o = push(&w, &repo);
    assert_ne!(o.code, 0, "the user's block stands: {o:?}");
    assert!(o.stderr.contains("the tip of main failed"), "{o:?}");
    assert!(o.stderr.contains(&loosen[..7]), "{o:?}");
    assert!(
        o.stderr.contains(&bad[..7]),
        "the earlier failure is named: {o:?}"
    );
    assert_eq!(remote_main(&w, &remote), None, "nothing reached the remote");

    // The other way is allowed: a user who only warns (or is off), a commit that blocks.
    for user in ["warn", "off"] {
        w.user_config(&format!("[hooks]\npre_push = \"{user}\"\n"));
        let tighten = w.commit(
            &repo,
            &[
                (".sandbox.toml", "[hooks]\npre_push = \"block\"\n"),
                ("NOTES.md", &format!("gate block under {user}\n")),
            ],
            "block pushes",
        );
        assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
        let o = push(&w, &repo);
        assert_ne!(o.code, 0, "user {user}: the commit's block holds: {o:?}");
        assert!(o.stderr.contains(&tighten[..7]), "{o:?}");
        assert_eq!(remote_main(&w, &remote), None);
    }
}
