//! Revision arguments of `run` and `log` as git takes them: several revisions and ranges, `A..B`,
//! `A...B`, `^A`, `--all` (the watched branches), git's own order, errors in plain words.

use crate::common;

use common::{Out, World};
use std::path::Path;
use std::process::Command;

/// Commit (empty) with its own author and committer date.
fn commit_at(w: &World, repo: &Path, message: &str, date: &str) -> String {
    let mut cmd = Command::new("git");
    cmd.args(["commit", "-q", "--allow-empty", "-m", message])
        .current_dir(repo);
    w.apply_env(&mut cmd);
    cmd.env("GIT_COMMITTER_DATE", date)
        .env("GIT_AUTHOR_DATE", date);
    assert!(cmd.status().unwrap().success());
    w.git(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

fn run_json(w: &World, repo: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["run", "--command", "true", "--json"];
    all.extend_from_slice(args);
    let o = w.sandbox(repo, &all);
    assert_eq!(o.code, 0, "run {args:?}: {o:?}");
    commits_of(&o)
}

fn commits_of(o: &Out) -> Vec<String> {
    o.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["commit"].as_str().unwrap().to_string())
        .collect()
}

fn git_lines(w: &World, repo: &Path, args: &[&str]) -> Vec<String> {
    w.git(repo, args).lines().map(str::to_string).collect()
}

/// main: R c1 c2 c3; experiment/x from c1: e1 e2; scratch (not watched) from c2: s1.
struct History {
    root: String,
    c: [String; 3],
    e: [String; 2],
    s1: String,
}

fn history(w: &World, repo: &Path) -> History {
    let root = w.git(repo, &["rev-parse", "HEAD"]).trim().to_string();
    let c1 = commit_at(w, repo, "c1", "2026-01-02T00:00:00Z");
    let c2 = commit_at(w, repo, "c2", "2026-01-03T00:00:00Z");
    let c3 = commit_at(w, repo, "c3", "2026-01-04T00:00:00Z");
    w.git(repo, &["checkout", "-q", "-b", "experiment/x", &c1]);
    let e1 = commit_at(w, repo, "e1", "2026-01-05T00:00:00Z");
    let e2 = commit_at(w, repo, "e2", "2026-01-06T00:00:00Z");
    w.git(repo, &["checkout", "-q", "-b", "scratch", &c2]);
    let s1 = commit_at(w, repo, "s1", "2026-01-07T00:00:00Z");
    w.git(repo, &["checkout", "-q", "main"]);
    History {
        root,
        c: [c1, c2, c3],
        e: [e1, e2],
        s1,
    }
}

#[test]
fn run_takes_ranges_exclusions_and_the_watched_branches() {
    let w = World::new();
    let repo = w.new_repo("ranges");
    let h = history(&w, &repo);
    let root = h.root.as_str();
    let [c1, c2, c3] = [0, 1, 2].map(|i| h.c[i].as_str());
    let [e1, e2] = [0, 1].map(|i| h.e[i].as_str());

    // ROOT^..B: everything up to B, the first commit included (git itself refuses ROOT^).
    assert_eq!(
        run_json(&w, &repo, &[&format!("{root}^..{c2}")]),
        [root, c1, c2]
    );
    assert_eq!(run_json(&w, &repo, &["HEAD~3^..HEAD~2"]), [root, c1]);
    // Several ranges at once, oldest first; as in git, each exclusion applies to them all
    // (`A..B C..D` is `^A B ^C D`).
    let two = [format!("{c2}..{c3}"), format!("{c1}..{e2}")];
    assert_eq!(run_json(&w, &repo, &[&two[0], &two[1]]), [c3, e1, e2]);
    assert_eq!(
        run_json(&w, &repo, &[&two[0], &two[1]]),
        git_lines(&w, &repo, &["rev-list", "--reverse", &two[0], &two[1]])
    );
    // ^A B
    assert_eq!(run_json(&w, &repo, &[&format!("^{c1}"), c3]), [c2, c3]);
    // A...B: the commits of either side that are not in both.
    let mut sym = run_json(&w, &repo, &[&format!("{c3}...{e2}")]);
    sym.sort();
    let mut want = vec![c2, c3, e1, e2];
    want.sort();
    assert_eq!(sym, want);
    // Plain revisions are those commits only, in the order given.
    assert_eq!(run_json(&w, &repo, &[c3, c1, c3]), [c3, c1]);
    assert_eq!(run_json(&w, &repo, &[]), [c3], "HEAD");
    // --all: every commit of every watched branch (main, experiment/*), not of `scratch`.
    let all = run_json(&w, &repo, &["--all"]);
    let mut sorted = all.clone();
    sorted.sort();
    let mut want = vec![root, c1, c2, c3, e1, e2];
    want.sort();
    assert_eq!(sorted, want, "{all:?}");
    assert!(!all.contains(&h.s1));
    assert_eq!(
        all,
        git_lines(
            &w,
            &repo,
            &["rev-list", "--reverse", "main", "experiment/x"]
        ),
        "oldest first, in git's order"
    );
    // --all with an exclusion.
    assert_eq!(
        run_json(&w, &repo, &["--all", &format!("^{c2}")]),
        [c3, e1, e2]
    );
}

#[test]
fn an_empty_range_does_nothing_and_says_so() {
    let w = World::new();
    let repo = w.new_repo("empty");
    let o = w.sandbox(&repo, &["run", "HEAD..HEAD"]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (0, "", "HEAD..HEAD: no commits to run\n")
    );
    assert_eq!(w.note(&repo, "HEAD"), None, "nothing was run");
    let o = w.sandbox(&repo, &["run", "--json", "HEAD..HEAD"]);
    assert_eq!((o.code, o.stdout.trim()), (0, "[]"), "{o:?}");
    let o = w.sandbox(&repo, &["log", "HEAD..HEAD"]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (0, "", "HEAD..HEAD: no commits\n")
    );
}

#[test]
fn revision_errors_are_plain_words_with_the_fix() {
    let w = World::new();
    let repo = w.new_repo("errors");
    for i in 0..3 {
        w.commit(&repo, &[], &format!("c{i}"));
    }
    for (args, want) in [
        (
            vec!["run", "HEAD~10"],
            "error: HEAD~10: the history has only 4 commits (the first is HEAD~3)",
        ),
        (
            vec!["log", "main~4"],
            "error: main~4: the history has only 4 commits (the first is main~3)",
        ),
        (
            vec!["show", "HEAD~3^"],
            "error: HEAD~3^: the history of HEAD~3 has only 1 commit (the first is HEAD~3)",
        ),
        (
            vec!["run", "no-such-branch"],
            "error: unknown revision \"no-such-branch\"\nhint: name a commit, branch or tag that exists (see `git branch` and `git log --oneline`)",
        ),
        (
            vec!["log", "nope~2..HEAD"],
            "error: unknown revision \"nope\" (in \"nope~2\")\nhint: name a commit, branch or tag that exists (see `git branch` and `git log --oneline`)",
        ),
        (
            vec!["exec", "HEAD^2", "--", "true"],
            "error: HEAD^2: HEAD has only 1 parent\nhint: ^2 names the second parent of a merge",
        ),
        (
            vec!["run", "HEAD^{tree}"],
            "error: \"HEAD^{tree}\" names a tree, not a commit\nhint: name a commit, branch or tag",
        ),
    ] {
        let o = w.sandbox(&repo, &args);
        assert_eq!(
            (o.code, o.stdout.as_str(), o.stderr.trim_end()),
            (2, "", want),
            "{args:?}"
        );
    }
}

#[test]
fn log_lists_commits_in_git_logs_order() {
    let w = World::new();
    let repo = w.new_repo("order");
    // Commit dates out of order, and a merge: git log's order is by date with parents after
    // their children, which a plain parent walk does not give.
    commit_at(&w, &repo, "a1", "2026-01-05T00:00:00Z");
    w.git(
        &repo,
        &["checkout", "-q", "-b", "experiment/side", "HEAD~1"],
    );
    commit_at(&w, &repo, "b1", "2026-01-03T00:00:00Z");
    commit_at(&w, &repo, "b2", "2026-01-10T00:00:00Z");
    w.git(&repo, &["checkout", "-q", "main"]);
    commit_at(&w, &repo, "a2", "2026-01-02T00:00:00Z");
    let mut merge = Command::new("git");
    merge
        .args([
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "merge side",
            "experiment/side",
        ])
        .current_dir(&repo);
    w.apply_env(&mut merge);
    merge
        .env("GIT_COMMITTER_DATE", "2026-01-04T00:00:00Z")
        .env("GIT_AUTHOR_DATE", "2026-01-04T00:00:00Z");
    assert!(merge.status().unwrap().success());
    commit_at(&w, &repo, "a3", "2026-01-06T00:00:00Z");
    w.git(&repo, &["checkout", "-q", "-b", "scratch"]);
    commit_at(&w, &repo, "s1", "2026-01-07T00:00:00Z");
    w.git(&repo, &["checkout", "-q", "main"]);

    let log = |args: &[&str]| {
        let mut all = vec!["log", "--json"];
        all.extend_from_slice(args);
        let o = w.sandbox(&repo, &all);
        assert_eq!(o.code, 0, "{o:?}");
        commits_of(&o)
    };
    for args in [
        vec![],
        vec!["-n", "3"],
        vec!["main"],
        vec!["experiment/side", "main~1"],
        vec!["main~1..main"],
        vec!["^experiment/side", "main"],
        vec!["experiment/side...main~2"],
    ] {
        let mut git_args = vec!["log", "--format=%H", "-n", "20"];
        git_args.extend(args.iter().copied());
        assert_eq!(log(&args), git_lines(&w, &repo, &git_args), "log {args:?}");
    }
    // --all: the watched branches (main, experiment/*), not `scratch`.
    assert_eq!(
        log(&["--all"]),
        git_lines(
            &w,
            &repo,
            &["log", "--format=%H", "main", "experiment/side"]
        )
    );
    // The human view follows the same order.
    let o = w.sandbox(&repo, &["log", "-n", "4"]);
    let subjects: Vec<&str> = o
        .stdout
        .lines()
        .map(|l| {
            [" not run ", " queued "]
                .iter()
                .find_map(|s| l.split_once(s))
                .unwrap_or_else(|| panic!("{l}"))
                .1
        })
        .collect();
    assert_eq!(
        subjects,
        git_lines(&w, &repo, &["log", "-n", "4", "--format=%s"]),
        "{o:?}"
    );
}
