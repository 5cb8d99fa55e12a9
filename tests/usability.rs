//! Small things a careful user notices: ambiguous arguments, names instead of ids, counts,
//! quoted paths.

mod common;

use common::World;

#[test]
fn analyze_takes_a_revision_before_a_directory_of_the_same_name() {
    let w = World::new();
    let repo = w.new_repo("both");
    w.commit(&repo, &[("lib.py", "def a():\n    return 1\n")], "lib");
    // An untracked directory named like the branch, with different code.
    std::fs::create_dir(repo.join("main")).unwrap();
    std::fs::write(
        repo.join("main/x.py"),
        "def f():\n    pass\n\n\ndef g():\n    pass\n\n\ndef h():\n    pass\n",
    )
    .unwrap();
    let rev = w.sandbox(&repo, &["analyze", "HEAD", "--json"]);
    assert_eq!(rev.code, 0, "{rev:?}");
    let o = w.sandbox(&repo, &["analyze", "main", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json(), rev.json(), "main is the revision");
    assert_eq!(
        o.stderr,
        "note: main is both a revision and a directory; analysed the revision (write ./main for the directory)\n"
    );
    let o = w.sandbox(&repo, &["analyze", "./main", "--json"]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{o:?}");
    assert_eq!(o.json()["files_analyzed"], 1);
    assert_eq!(o.json()["functions_found"], 3);
    // A directory that is no revision, from inside the repository and from outside any.
    let o = w.sandbox(&repo, &["analyze", "main/", "--json"]);
    assert_eq!((o.code, o.json()["functions_found"].as_u64()), (0, Some(3)));
    let o = w.sandbox(&w.work(), &["analyze", repo.join("main").to_str().unwrap()]);
    assert_eq!(o.code, 0, "{o:?}");
    // Neither: the revision's error, in plain words.
    let o = w.sandbox(&repo, &["analyze", "mian"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.stderr.starts_with("error: unknown revision \"mian\""),
        "{o:?}"
    );
    let o = w.sandbox(&w.work(), &["analyze", "mian"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("is not a directory"), "{o:?}");
}

#[test]
fn events_name_the_repository() {
    let w = World::new();
    let repo = w.new_repo("named-repo");
    assert_eq!(w.sandbox(&repo, &["run", "--command", "true"]).code, 0);
    let o = w.sandbox(&repo, &["events", "--kind", "run.completed"]);
    assert_eq!(o.code, 0, "{o:?}");
    let line = o.stdout.lines().next().expect("one event");
    assert!(line.contains(" run.completed "), "{o:?}");
    assert!(line.contains(" named-repo "), "{o:?}");
    assert!(!line.contains("repo_"), "the name, not the id: {o:?}");
    let o = w.sandbox(&repo, &["events", "--kind", "run.completed", "--json"]);
    let e: serde_json::Value = serde_json::from_str(o.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(e["repository"], "named-repo");
    assert!(
        e["repository_id"].as_str().unwrap().starts_with("repo_"),
        "{e}"
    );
}
