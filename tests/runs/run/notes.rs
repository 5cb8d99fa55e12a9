//! Notes under pressure: writers at once, a lock a killed writer left, a note gone missing,
//! and the index rebuilt from notes.

use super::set_config;
use crate::common::World;
use std::path::Path;

#[test]
fn reindex_rebuilds_a_deleted_index_from_notes() {
    let w = World::new();
    let repo = w.new_repo("r11");
    w.commit(&repo, &[("x.py", "def f(a):\n    return a\n")], "more");
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1..HEAD"]).code, 0);
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1"]).code, 0);
    let before = w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]["runs"].clone();
    assert_eq!(before, 2);
    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    let o = w.sandbox(&w.work(), &["reindex", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["runs"], 2);
    let j = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(j["totals"]["runs"], 2);
    assert_eq!(j["totals"]["repositories"], 1);
    assert_eq!(
        w.sandbox(&repo, &["show", "HEAD", "--json"]).json()["status"],
        "passed"
    );
}

/// A reindex checks the signatures of many notes together: a record changed after it was
/// signed still counts for nothing among good ones, and a note of garbage is skipped with its
/// reason, as when each was checked alone.
#[test]
fn reindex_of_many_notes_still_tells_each_changed_or_garbled_one() {
    let w = World::new();
    let repo = w.new_repo("r13");
    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"true\"\n[analysis]\nenabled = false\n",
    );
    let base = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let ids: Vec<String> = (0..16)
        .map(|i| w.commit(&repo, &[("n.txt", &format!("{i}"))], &format!("c{i}")))
        .collect();
    let o = w.sandbox(&repo, &["run", &format!("{base}..main")]);
    assert_eq!(o.code, 0, "{o:?}");
    let note = |id: &str| {
        w.git(&repo, &["notes", "--ref=sandbox", "show", id])
            .trim_end()
            .to_string()
    };
    // One record changed under its signature, one note replaced by garbage.
    let changed = note(&ids[3]).replacen("\"status\":\"passed\"", "\"status\":\"failed\"", 1);
    assert_ne!(changed, note(&ids[3]));
    w.git(
        &repo,
        &[
            "notes",
            "--ref=sandbox",
            "add",
            "-f",
            "-m",
            &changed,
            &ids[3],
        ],
    );
    w.git(
        &repo,
        &[
            "notes",
            "--ref=sandbox",
            "add",
            "-f",
            "-m",
            "garbage",
            &ids[5],
        ],
    );
    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    let o = w.sandbox(&w.work(), &["reindex", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let j = o.json();
    assert_eq!(j["runs"], 15, "{j}");
    let skipped = &j["repositories"][0]["skipped"];
    assert_eq!(skipped.as_array().unwrap().len(), 1, "{j}");
    assert_eq!(skipped[0]["commit"], ids[5].as_str());
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("expected value"),
        "{j}"
    );
    // As the index holds them: the changed record vouched for by nobody, the others by this
    // machine.
    let ix = gs_store::Index::open(&w.data()).unwrap();
    let repository = &ix.repositories().unwrap()[0].repository_id;
    let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
    let rows = ix.runs_for_commits(repository, &asked).unwrap();
    assert_eq!(rows.len(), 15);
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| *i != 5) {
        let verified = rows[id].record.verified.as_ref();
        match i {
            3 => assert!(verified.is_none(), "{verified:?}"),
            _ => assert_eq!(verified.unwrap().signer, "this machine"),
        }
    }
}

#[test]
fn concurrent_note_writers_lose_nothing() {
    let w = World::new();
    let repo = w.new_repo("r12");
    set_config(
        &w,
        &repo,
        "[test]\ncommand = \"true\"\n[analysis]\nenabled = false\n",
    );
    let base = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let mut ours = Vec::new();
    for i in 0..20 {
        ours.push(w.commit(&repo, &[("n.txt", &format!("{i}"))], &format!("c{i}")));
    }
    // Commits on another branch that the "user" annotates by hand at the same time.
    w.git(&repo, &["checkout", "-q", "-b", "side", &base]);
    let mut theirs = Vec::new();
    for i in 0..15 {
        theirs.push(w.commit(&repo, &[("side.txt", &format!("{i}"))], &format!("s{i}")));
    }
    w.git(&repo, &["checkout", "-q", "main"]);
    let range = format!("{base}..main");
    std::thread::scope(|s| {
        let user = s.spawn(|| {
            for id in &theirs {
                let o = w.git_out(
                    &repo,
                    &["notes", "--ref=sandbox", "add", "-m", "by hand", id],
                    true,
                );
                assert_eq!(o.code, 0, "the user's git notes never fails: {o:?}");
            }
        });
        let o = w.sandbox(&repo, &["run", &range, "--force"]);
        assert_eq!(o.code, 0, "{o:?}");
        user.join().unwrap();
    });
    for id in &ours {
        assert_eq!(
            w.note(&repo, id).expect("our note survives")["status"],
            "passed"
        );
    }
    for id in &theirs {
        let o = w.git_out(&repo, &["notes", "--ref=sandbox", "show", id], true);
        assert_eq!(o.stdout, "by hand\n", "the user's note survives");
    }
}

/// A lock file at `path` as a writer killed two minutes ago leaves it.
fn stale_lock(path: &Path) {
    std::fs::write(path, "").unwrap();
    let o = std::process::Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(path)
        .status()
        .unwrap();
    assert!(o.success());
}

#[test]
fn a_stale_lock_left_by_a_killed_writer_does_not_block_notes() {
    let w = World::new();
    let repo = w.new_repo("r14");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    w.commit(&repo, &[("z.txt", "z")], "after a crash");
    let lock = repo.join(".git/refs/notes/sandbox.lock");
    stale_lock(&lock);
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(w.note(&repo, "HEAD").is_some());
    assert!(!lock.exists());

    // With the notes refs packed (git gc), a killed writer's packed-refs.lock blocks every ref
    // update, git's own too; once it is old, the next write clears it.
    w.git(&repo, &["pack-refs", "--all"]);
    w.commit(&repo, &[("y.txt", "y")], "after another crash");
    let packed = repo.join(".git/packed-refs.lock");
    stale_lock(&packed);
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(w.note(&repo, "HEAD").is_some());
    assert!(!packed.exists());
}

#[test]
fn a_run_writes_a_missing_note_again() {
    let w = World::new();
    let repo = w.new_repo("r18");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    // `git notes add` does not compare-and-swap: a racing one can drop our note. Simulate it.
    w.git(&repo, &["notes", "--ref=sandbox", "remove", "HEAD"]);
    let again = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(
        again["cached_from"],
        serde_json::Value::Null,
        "its own result, not a copy"
    );
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    assert_eq!(w.note(&repo, &head).unwrap()["commit"], head.as_str());
}

/// `log` takes a run of this machine from the index without reading its note only while the
/// notes are as the index holds them: a note replaced behind its back (garbage, another
/// commit's record) is what `log` then shows, until a run or `reindex` brings them in line.
#[test]
fn log_reads_the_notes_once_they_are_not_as_the_index_holds_them() {
    let w = World::new();
    let repo = w.new_repo("r19");
    w.commit(&repo, &[("x.py", "def f(a):\n    return a\n")], "more");
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1", "HEAD"]).code, 0);
    let notes_tip = || {
        rusqlite::Connection::open(w.data().join("index.db"))
            .unwrap()
            .query_row("SELECT notes_tip FROM repositories", [], |r| {
                r.get::<_, Option<String>>(0)
            })
            .unwrap()
    };
    let tip = || {
        w.git(&repo, &["rev-parse", "refs/notes/sandbox"])
            .trim()
            .to_string()
    };
    // Every run wrote its note and indexed it: the index holds the notes as they are.
    assert_eq!(notes_tip(), Some(tip()));
    let statuses = || {
        let o = w.sandbox(&repo, &["log", "-n", "2", "--json"]);
        let entries = o.json();
        let status = |i: usize| entries[i]["result"]["status"].as_str().map(str::to_string);
        (status(0), status(1), o.stderr.clone())
    };
    assert_eq!(statuses().0.as_deref(), Some("passed"));
    assert_eq!(statuses().1.as_deref(), Some("passed"));

    // A note that holds no record: HEAD was not run, whatever the index says.
    w.git(
        &repo,
        &[
            "notes",
            "--ref=sandbox",
            "add",
            "-f",
            "-m",
            "garbage",
            "HEAD",
        ],
    );
    let (head, parent, said) = statuses();
    assert_eq!(head, None, "{said}");
    assert_eq!(parent.as_deref(), Some("passed"));
    assert!(said.contains("no readable run record"), "{said}");
    // Another commit's record copied onto HEAD holds nothing for HEAD.
    w.git(
        &repo,
        &["notes", "--ref=sandbox", "copy", "-f", "HEAD~1", "HEAD"],
    );
    assert_eq!(statuses().0, None);

    // Run again: the note is HEAD's own; the index's notes tip stays where it was (a note moved
    // in between that it did not index), and the notes are read until `reindex`.
    assert_eq!(w.sandbox(&repo, &["run", "HEAD"]).code, 0);
    assert_eq!(statuses().0.as_deref(), Some("passed"));
    assert_ne!(notes_tip(), Some(tip()));
    assert_eq!(w.sandbox(&w.work(), &["reindex"]).code, 0);
    assert_eq!(notes_tip(), Some(tip()));
    assert_eq!(statuses().0.as_deref(), Some("passed"));
}
