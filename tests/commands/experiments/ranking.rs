//! `compare` and `propose` over several experiments of one repository.

use super::*;

/// Experiments `more` (a passing test more than production), `same` (notes only) and `broken`
/// (a failing test), each one commit on its branch.
fn three_experiments(w: &World, repo: &Path) {
    for name in ["more", "same", "broken"] {
        start(w, repo, name);
    }
    w.commit_on(
        repo,
        "experiment/more",
        &[("tests/test_more.py", MORE_TESTS)],
        "more tests",
    );
    w.commit_on(repo, "experiment/same", &[("NOTES.md", "notes\n")], "notes");
    w.commit_on(
        repo,
        "experiment/broken",
        &[("tests/test_broken.py", BROKEN_TESTS)],
        "broken",
    );
}

#[test]
fn compare_ranks_three_experiments_by_verdict_and_shows_only_the_columns_that_differ() {
    let w = World::new();
    let repo = w.new_repo("ranked");
    three_experiments(&w, &repo);
    for name in ["more", "same", "broken"] {
        let o = w.sandbox(&repo, &["eval", name]);
        assert!(o.code == 0 || name == "broken", "{name}: {o:?}");
    }
    let o = w.sandbox(&repo, &["compare", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let v = o.json();
    let order: Vec<&str> = v["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["more", "same", "broken"], "{v}");
    assert_eq!(v["experiments"][0]["verdict"], "STRONGLY_RECOMMEND");
    assert_eq!(v["experiments"][2]["verdict"], "NOT_READY");
    assert_eq!(
        v["experiments"][2]["new_failures"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let o = w.sandbox(&repo, &["compare"]);
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("against main"), "{o:?}");
    let header = lines[1];
    assert!(
        header.contains("verdict") && header.contains("passed"),
        "{o:?}"
    );
    assert!(
        !header.contains("state"),
        "every experiment is active: no column for it: {o:?}"
    );
    assert!(
        lines[2].starts_with("1. more") && lines[4].starts_with("3. broken"),
        "{o:?}"
    );
    let all = w.sandbox(&repo, &["compare", "--all-columns"]);
    assert!(
        all.stdout.lines().nth(1).unwrap().contains("state"),
        "{all:?}"
    );

    // Named targets against a base: each row's difference from it.
    let o = w.sandbox(
        &repo,
        &["compare", "more", "broken", "--base", "main", "--json"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let v = o.json();
    assert_eq!(v["rows"][0]["vs_base"]["passed"], 1, "{v}");
    assert_eq!(v["rows"][1]["vs_base"]["failed"], 1, "{v}");
    let o = w.sandbox(&repo, &["compare", "nosuch"]);
    error_naming(&o, 2, "neither a revision nor an experiment");
}

#[test]
fn propose_lists_what_meets_the_minimum_best_first_and_promotes_each_only_if_it_still_holds() {
    let w = World::new();
    let repo = w.new_repo("proposals");
    three_experiments(&w, &repo);
    let main_before = rev(&w, &repo, "main");

    // Nothing was run or evaluated yet: propose does both, and moves nothing.
    let o = w.sandbox(&repo, &["propose", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let p = o.json();
    let names = |k: &str| -> Vec<String> {
        p[k].as_array()
            .unwrap()
            .iter()
            .map(|c| c["experiment"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("proposals"), ["more", "same"], "{p}");
    assert_eq!(names("not_proposed"), ["broken"], "{p}");
    assert_eq!(p["proposals"][0]["recommendation"], "STRONGLY_RECOMMEND");
    assert_eq!(rev(&w, &repo, "main"), main_before);
    let human = w.sandbox(&repo, &["propose"]);
    assert!(
        human
            .stdout
            .contains("3 active experiments evaluated against main; 2 meet RECOMMEND"),
        "{human:?}"
    );
    assert!(
        human.stdout.contains("  1. more  STRONGLY_RECOMMEND"),
        "{human:?}"
    );

    // Promoting: `more` goes in; against main with its test, `same` now has fewer passing tests
    // than production and no longer meets the minimum, so it is refused and changes nothing.
    let o = w.sandbox(&repo, &["propose", "--promote"]);
    assert_eq!(o.code, 1, "one was refused: {o:?}");
    assert!(o.stdout.contains("promoted more into main"), "{o:?}");
    assert!(
        o.stdout.contains("not promoted same: promote refused"),
        "{o:?}"
    );
    let main_after = rev(&w, &repo, "main");
    assert_ne!(main_after, main_before);
    assert_eq!(
        w.git(&repo, &["rev-parse", &format!("{main_after}^2")])
            .trim(),
        rev(&w, &repo, "experiment/more"),
        "main is the merge of `more`"
    );
    let list = w.sandbox(&repo, &["experiment", "list", "--json"]).json();
    let state = |n: &str| {
        list["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .map(|e| e["state"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(state("more"), "promoted");
    assert_eq!(state("same"), "active");
}
