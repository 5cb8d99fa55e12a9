//! Experiments' metadata out of the tree: a start that commits and runs nothing, overrides in
//! the result key, old branches migrated, the metadata ref carried by push and fetch.

use super::*;

#[test]
fn starting_an_experiment_makes_no_commit_and_runs_nothing() {
    let w = World::new();
    let repo = w.new_repo("cheap");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let main = rev(&w, &repo, "main");
    let note = w.note(&repo, &main).unwrap();
    let config = overrides(&w, "slow", "[test]\ncommand = \"sleep 5\"\n");
    let o = w.sandbox(
        &repo,
        &[
            "experiment",
            "start",
            "idea",
            "--hypothesis",
            "cheap to start",
            "--config",
            &config,
            "--json",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["commit"], main.as_str());
    assert_eq!(rev(&w, &repo, "experiment/idea"), main);
    assert_no_bookkeeping(&w, &repo, "experiment/idea");

    // No commits yet: an active experiment with nothing of its own to show.
    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    let e = &list["experiments"][0];
    assert_eq!(e["state"], "active", "{list}");
    assert_eq!(e["hypothesis"], "cheap to start");
    assert_eq!(e["runs"], 0);
    assert_eq!(e["metadata_from"], "local");
    let show = w
        .sandbox(&repo, &["experiment", "show", "idea", "--json"])
        .json();
    assert_eq!(show["commits"], serde_json::json!([]), "{show}");
    let status = w.sandbox(&repo, &["status", "--json"]).json();
    assert_eq!(status["queue"]["pending"], 0, "{status}");

    // Its branch names production's commit, whose result stands: its own config applies to
    // the experiment's own commits, so nothing runs.
    let o = w.sandbox(&repo, &["run", "experiment/idea", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["commit"], main.as_str());
    assert_eq!(r["started_at"], note["started_at"], "not run again: {r}");
    assert_eq!(w.note(&repo, &main).unwrap(), note);
}

#[test]
fn two_experiments_with_other_configs_on_one_tree_share_no_result() {
    let w = World::new();
    let repo = w.new_repo("twins");
    for (name, word) in [("left", "echo left"), ("right", "echo right")] {
        let config = overrides(&w, name, &format!("[test]\ncommand = \"{word}\"\n"));
        let o = w.sandbox(&repo, &["experiment", "start", name, "--config", &config]);
        assert_eq!(o.code, 0, "{o:?}");
        w.commit_on(
            &repo,
            &format!("experiment/{name}"),
            &[("NOTES.md", "the same\n")],
            &format!("the same change on {name}"),
        );
    }
    assert_eq!(
        rev(&w, &repo, "experiment/left^{tree}"),
        rev(&w, &repo, "experiment/right^{tree}")
    );
    assert_ne!(
        rev(&w, &repo, "experiment/left"),
        rev(&w, &repo, "experiment/right")
    );
    for name in ["left", "right"] {
        let o = w.sandbox(&repo, &["run", &format!("experiment/{name}"), "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        let r = &o.json()[0];
        assert_eq!(r["tests"]["command"], format!("echo {name}"), "{r}");
        assert!(r["cached_from"].is_null(), "{r}");
    }
}

/// A branch as `experiment start` made them before the metadata left the tree: the metadata
/// committed as `experiments/<name>/experiment.toml`, then one commit of work.
fn old_style(w: &World, repo: &Path, name: &str) -> String {
    let main = rev(w, repo, "main");
    w.git(repo, &["branch", &format!("experiment/{name}"), "main"]);
    let meta = format!(
        "name = \"{name}\"\nhypothesis = \"kept in the tree\"\ncreated_at = \"2026-11-01T00:00:00.000Z\"\nauthor = \"A <a@example.com>\"\nbase_commit = \"{main}\"\nbase = \"main\"\n\n[config]\n"
    );
    w.commit_on(
        repo,
        &format!("experiment/{name}"),
        &[(&format!("experiments/{name}/experiment.toml"), &meta)],
        &format!("Start experiment {name}"),
    );
    w.commit_on(
        repo,
        &format!("experiment/{name}"),
        &[("tests/test_more.py", MORE_TESTS)],
        "Add a test",
    )
}

#[test]
fn an_old_experiment_is_migrated_and_promotion_leaves_its_file_behind() {
    let w = World::new();
    let repo = w.new_repo("old");
    old_style(&w, &repo, "merged");

    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    let e = &list["experiments"][0];
    assert_eq!(e["name"], "merged", "{list}");
    assert_eq!(e["hypothesis"], "kept in the tree");
    assert_eq!(e["created_at"], "2026-11-01T00:00:00.000Z");
    assert_eq!(e["metadata_from"], "local");
    let moved = w.git(
        &repo,
        &["show", "refs/sandbox/experiments/merged:experiment.toml"],
    );
    assert!(
        moved.contains("hypothesis = \"kept in the tree\""),
        "{moved}"
    );

    // By merge: the merge commit drops the file.
    let o = w.sandbox(&repo, &["promote", "merged", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_no_bookkeeping(&w, &repo, "main");
    assert!(!repo.join("experiments/merged").exists());
    assert!(repo.join("tests/test_more.py").exists());

    // By fast-forward: production gets the head and a commit that drops it.
    let head = old_style(&w, &repo, "forward");
    let o = w.sandbox(&repo, &["promote", "forward", "--strategy", "ff", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(rev(&w, &repo, "main^"), head);
    assert_no_bookkeeping(&w, &repo, "main");
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
}

#[test]
fn push_and_fetch_carry_the_metadata_and_a_remotes_copy_never_overrides_ours() {
    let a = World::new();
    let repo = a.new_repo("carried");
    let shared = a.bare_remote(&repo, "shared.git");
    let url = shared.to_str().unwrap();
    let o = a.sandbox(
        &repo,
        &["experiment", "start", "faster", "--hypothesis", "from A"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let o = a.sandbox(&repo, &["push", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let updated = o.json()["updated"].to_string();
    assert!(
        updated.contains("refs/sandbox/experiments/faster"),
        "{updated}"
    );

    let b = World::new();
    let clone = b.clone_and_init(url, "clone");
    assert_eq!(b.sandbox(&clone, &["fetch"]).code, 0);
    let list = b.sandbox(&clone, &["experiment", "list", "--json"]).json();
    let e = &list["experiments"][0];
    assert_eq!(e["name"], "faster", "{list}");
    assert_eq!(e["state"], "active");
    assert_eq!(e["hypothesis"], "from A");
    assert_eq!(e["metadata_from"]["remote"], "origin");

    // B's own experiment of that name: ours, whatever the remote's copy says, fetch or not.
    let o = b.sandbox(
        &clone,
        &["experiment", "start", "faster", "--hypothesis", "from B"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(b.sandbox(&clone, &["fetch"]).code, 0);
    let list = b.sandbox(&clone, &["experiment", "list", "--json"]).json();
    assert_eq!(list["experiments"][0]["hypothesis"], "from B", "{list}");
    assert_eq!(list["experiments"][0]["metadata_from"], "local");
    let show = b
        .sandbox(&clone, &["experiment", "show", "faster", "--json"])
        .json();
    assert_eq!(show["metadata"]["hypothesis"], "from B", "{show}");
}
