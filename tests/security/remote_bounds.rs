//! What someone who can push to a repository's remote can and cannot do to the results here: a
//! record dated in the future, a note on a commit this clone lacks, an oversized note, and the
//! remote's `refs/sandbox/*` — each pushed by hand (plain git, no git-sandbox) and fetched.

use crate::common;

use common::World;
use serde_json::Value;
use std::path::{Path, PathBuf};

const FAILING: &str = "import unittest\n\n\nclass TestBad(unittest.TestCase):\n    def test_bad(self):\n        self.assertEqual(1, 2)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

fn show(w: &World, repo: &Path, commit: &str) -> Value {
    let o = w.sandbox(repo, &["show", "--json", commit]);
    assert_eq!(o.code, 0, "{o:?}");
    o.json()
}

/// The victim's repository with `commit` run (its tests fail) and pushed to `shared.git`, and an
/// attacker's plain clone of that remote holding its notes.
struct Scene {
    w: World,
    repo: PathBuf,
    attacker: PathBuf,
    failing: String,
}

fn scene() -> Scene {
    let w = World::new();
    let repo = w.new_repo("victim");
    let failing = w.commit(&repo, &[("tests/test_bad.py", FAILING)], "breaks it");
    w.sandbox(&repo, &["run"]);
    assert_eq!(show(&w, &repo, &failing)["status"], "failed");
    let shared = w.bare_remote(&repo, "shared.git");
    let o = w.sandbox(&repo, &["push"]);
    assert_eq!(o.code, 0, "{o:?}");
    let attacker = w.work().join("attacker");
    w.git(
        &w.work(),
        &[
            "clone",
            "-q",
            shared.to_str().unwrap(),
            attacker.to_str().unwrap(),
        ],
    );
    w.git(
        &attacker,
        &[
            "fetch",
            "-q",
            "origin",
            "+refs/notes/sandbox:refs/notes/sandbox",
        ],
    );
    Scene {
        w,
        repo,
        attacker,
        failing,
    }
}

impl Scene {
    /// The victim's own record of the failing commit, as stored.
    fn record(&self) -> Value {
        let line = self.w.git(
            &self.attacker,
            &["notes", "--ref=sandbox", "show", &self.failing],
        );
        serde_json::from_str(line.lines().find(|l| l.starts_with('{')).unwrap()).unwrap()
    }

    /// Add `line` to the note on `commit` in the attacker's clone and push the notes.
    fn push_note(&self, commit: &str, line: &str) {
        let file = self.w.path("forged-line");
        std::fs::write(&file, line).unwrap();
        self.w.git(
            &self.attacker,
            &[
                "notes",
                "--ref=sandbox",
                "append",
                "-F",
                file.to_str().unwrap(),
                commit,
            ],
        );
        self.w.git(
            &self.attacker,
            &[
                "push",
                "-q",
                "origin",
                "refs/notes/sandbox:refs/notes/sandbox",
            ],
        );
    }
}

#[test]
fn a_record_dated_in_the_future_is_not_indexed_and_never_replaces_one_made_here() {
    let s = scene();
    let mut forged = s.record();
    forged["status"] = Value::from("passed");
    forged["started_at"] = Value::from("2099-01-01T00:00:00Z");
    forged["finished_at"] = Value::from("2099-01-01T00:00:01Z");
    s.push_note(&s.failing, &forged.to_string());

    let o = s.w.sandbox(&s.repo, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("not indexed: 1 record dated in the future"),
        "{o:?}"
    );
    // The note did merge (every machine's record is kept), but ours is what counts.
    let merged =
        s.w.git(&s.repo, &["notes", "--ref=sandbox", "show", &s.failing]);
    assert!(merged.contains("2099-01-01"), "{merged}");
    assert_eq!(show(&s.w, &s.repo, &s.failing)["status"], "failed");
    // Nor after rebuilding the index from the notes.
    let o = s.w.sandbox(&s.repo, &["reindex"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains("1 record dated more than a minute"),
        "{o:?}"
    );
    assert_eq!(show(&s.w, &s.repo, &s.failing)["status"], "failed");
}

#[test]
fn a_note_on_a_commit_this_clone_lacks_is_not_indexed_and_serves_no_tree() {
    let s = scene();
    // A commit never run here, whose tree the forged record claims passed.
    let never_run = s.w.commit(&s.repo, &[("notes.txt", "x\n")], "never run");
    let tree = rev(&s.w, &s.repo, &format!("{never_run}^{{tree}}"));
    // The attacker's note sits on a commit of its own that it never pushes.
    let ghost = s.w.commit(&s.attacker, &[("ghost.txt", "boo\n")], "ghost");
    let mut forged = s.record();
    forged["commit"] = Value::from(ghost.as_str());
    forged["tree"] = Value::from(tree.as_str());
    forged["status"] = Value::from("passed");
    s.push_note(&ghost, &forged.to_string());

    let o = s.w.sandbox(&s.repo, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("not indexed: 1 note on commits this clone does not have"),
        "{o:?}"
    );
    s.w.sandbox(&s.repo, &["run"]);
    let r = show(&s.w, &s.repo, &never_run);
    assert_eq!(r["status"], "failed", "{r}");
    assert!(
        r["cached_from"].is_null(),
        "served from the forged record: {r}"
    );
    let o = s.w.sandbox(&s.repo, &["reindex", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let skipped = o.json()["repositories"][0]["skipped"].to_string();
    assert!(skipped.contains(&ghost), "{skipped}");
    assert!(skipped.contains("not in this clone"), "{skipped}");
}

#[test]
fn a_300_kb_note_is_refused_with_one_line_and_the_notes_here_are_unchanged() {
    let s = scene();
    let before = rev(&s.w, &s.repo, "refs/notes/sandbox");
    let huge = format!(
        "{{\"schema\":\"git-sandbox/run/v1\",\"pad\":\"{}\"}}",
        "a".repeat(300 * 1024)
    );
    s.push_note(&s.failing, &huge);
    let o = s.w.sandbox(&s.repo, &["fetch"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains("over the 256 KB a record may be"),
        "{problem}"
    );
    assert!(problem.contains("yours are unchanged"), "{problem}");
    assert_eq!(hints.len(), 1, "{hints:?}");
    assert_eq!(rev(&s.w, &s.repo, "refs/notes/sandbox"), before);
    assert_eq!(show(&s.w, &s.repo, &s.failing)["status"], "failed");
}

#[test]
fn the_remotes_state_refs_land_beside_ours_and_change_no_experiment() {
    let s = scene();
    let o = s.w.sandbox(&s.repo, &["experiment", "start", "faster"]);
    assert_eq!(o.code, 0, "{o:?}");
    // Someone with push access marks it promoted and rolled back on the remote.
    let head = rev(&s.w, &s.attacker, "HEAD");
    for r in ["promoted", "rolled-back"] {
        s.w.git(
            &s.attacker,
            &[
                "push",
                "-q",
                "origin",
                &format!("{head}:refs/sandbox/{r}/faster"),
            ],
        );
    }
    let o = s.w.sandbox(&s.repo, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        rev(&s.w, &s.repo, "refs/sandbox/remotes/origin/promoted/faster"),
        head
    );
    let listed = s.w.git(
        &s.repo,
        &["for-each-ref", "--format=%(refname)", "refs/sandbox/"],
    );
    assert!(!listed.contains("refs/sandbox/promoted/"), "{listed}");
    let o =
        s.w.sandbox(&s.repo, &["experiment", "show", "faster", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["state"], "active", "{}", o.stdout);
    // And they are not pushed back as ours.
    let o = s.w.sandbox(&s.repo, &["push", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("refs/sandbox/remotes/"), "{}", o.stdout);
}
