//! Small things a careful user notices: ambiguous arguments, names instead of ids, counts,
//! quoted paths.

use crate::common;
#[path = "usability/results.rs"]
mod results;
#[path = "usability/shown.rs"]
mod shown;

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
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
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

#[test]
fn show_counts_like_git_and_quotes_paths_and_marks_binary_files() {
    let w = World::new();
    let repo = w.new_repo("paths");
    w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"true\"\n")],
        "quick",
    );
    let files = [
        ("café.txt", "one line\n"),
        ("tab\tname.txt", "one line\n"),
        ("say \"hi\".txt", "one line\n"),
    ];
    for (path, body) in files {
        std::fs::write(repo.join(path), body).unwrap();
    }
    std::fs::write(repo.join("logo.bin"), b"\x89PNG\0\0\x01\x02").unwrap();
    w.git(&repo, &["add", "-A"]);
    w.commit(&repo, &[], "odd names");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["show"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout.contains("\n 4 files changed, 3 insertions(+)\n"),
        "{o:?}"
    );
    assert!(o.stdout.contains("  added     logo.bin (Bin)\n"), "{o:?}");
    // Each path exactly as git quotes it (core.quotePath, the default).
    let quoted = w.git(&repo, &["show", "--name-only", "--format=", "HEAD"]);
    for path in quoted.lines().filter(|p| p.starts_with('"')) {
        assert!(
            o.stdout.contains(&format!("  added     {path} (+1 -0)\n")),
            "{path}: {o:?}"
        );
    }
    assert_eq!(quoted.lines().filter(|p| p.starts_with('"')).count(), 3);
    assert!(o.stdout.contains(r#""caf\303\251.txt""#), "{o:?}");
    // One file is one file.
    w.commit(&repo, &[("one.txt", "a\nb\n")], "one");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["show"]);
    assert!(
        o.stdout.contains("\n 1 file changed, 2 insertions(+)\n"),
        "{o:?}"
    );
}

#[test]
fn analysis_counts_have_their_plural_and_issue_paths_are_quoted() {
    let w = World::new();
    let dir = w.path("project/dir é");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("f.py"),
        "class One:\n    pass\n\n\ndef f(a, b, c, d, e, g, h):\n    return 1\n",
    )
    .unwrap();
    let o = w.sandbox(&w.work(), &["analyze", w.path("project").to_str().unwrap()]);
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[0], "1 file, 6 lines: 4 code, 0 comment, 2 blank",
        "{o:?}"
    );
    assert!(
        lines[1].starts_with("1 function, 1 class, complexity mean"),
        "{o:?}"
    );
    assert!(o.stdout.contains("\n1 potential issue:\n"), "{o:?}");
    assert!(
        o.stdout
            .contains("  \"dir \\303\\251/f.py\":5 too_many_parameters: "),
        "{o:?}"
    );
}

#[test]
fn analysis_reports_neither_test_suites_nor_a_parsers_limits_as_issues() {
    let w = World::new();
    let dir = w.path("mixed");
    let write = |rel: &str, body: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    // A 92-line describe of 30 tests: its own lines are two.
    let tests: String = (0..30)
        .map(|i| format!("  it('case {i}', () => {{\n    check({i});\n  }});\n"))
        .collect();
    write(
        "test/router.test.js",
        &format!("describe('router', () => {{\n{tests}}});\n"),
    );
    // C++ code a compiler accepts, in a .h file, with three regions tree-sitter cannot read.
    write(
        "include/fmt/base.h",
        include_str!("../fixtures/analysis/cpp/fmt_base.h"),
    );
    write(
        "broken.py",
        "def ok():\n    return 1\n\ndef f(:\n    pass\n\ndef g(:\n    pass\n",
    );
    let o = w.sandbox(&w.work(), &["analyze", dir.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("\n1 potential issue:\n"), "{o:?}");
    assert!(
        o.stdout.ends_with(
            "\n  broken.py:4 syntax_error: syntax error: missing `)` (and 1 more in this file)\n"
        ),
        "{o:?}"
    );
    assert!(
        o.stdout.contains(
            "\n1 file parsed in part (3 regions tree-sitter could not read): their metrics cover the rest\n"
        ),
        "{o:?}"
    );
    let o = w.sandbox(&w.work(), &["analyze", dir.to_str().unwrap(), "--json"]);
    let v = o.json();
    assert_eq!(
        v["partially_parsed"],
        serde_json::json!({"files": 1, "regions": 3})
    );
    assert_eq!(v["languages"]["cpp"]["functions"], 5, "{v}");
    assert_eq!(v["languages"]["javascript"]["functions"], 31, "{v}");
    assert_eq!(v["syntax_errors"], 2, "{v}");
}
