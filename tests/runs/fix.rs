//! `git sandbox fix`: a formatter run in the sandbox on each commit of a range, what it wrote
//! taken into the commits (checked with git itself), the branch moved once, and nothing run the
//! second time.

use crate::common::World;
use std::path::Path;

/// Strips trailing blanks from the `.txt` files; writes a log the tree ignores and a file under
/// a cached directory; where `make-link` exists, adds a link to a file outside the tree.
const FORMATTER: &str = "[checks.fmt]\ncommand = \"for f in *.txt; do sed -i 's/ *$//' $f; done; echo ran > fmt.log; mkdir -p node_modules && echo x > node_modules/x; if [ -f make-link ]; then ln -s /etc/passwd evil.lnk; fi\"\nfix = true\nrequired = false\n\n[checks.lint]\ncommand = \"true\"\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

fn commit_as(w: &World, repo: &Path, files: &[(&str, &str)], message: &str) -> String {
    commit_env(w, repo, files, message, &[])
}

/// Write `files` and commit them with `env` (an author, a date); the new commit.
fn commit_env(
    w: &World,
    repo: &Path,
    files: &[(&str, &str)],
    message: &str,
    env: &[(&str, &str)],
) -> String {
    for (p, body) in files {
        std::fs::write(repo.join(p), body).unwrap();
    }
    w.git(repo, &["add", "-A"]);
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(repo).args(["commit", "-qm", message]);
    w.apply_env(&mut cmd);
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    rev(w, repo, "HEAD")
}

#[test]
fn fix_rewrites_exactly_the_commits_whose_trees_the_check_changed_and_runs_nothing_again() {
    let w = World::new();
    let repo = w.new_repo("fix");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", FORMATTER),
            (".gitignore", "*.log\n"),
            ("package.json", "{}\n"),
            ("base.txt", "clean\n"),
        ],
        "a formatter",
    );
    w.git(&repo, &["switch", "-q", "-c", "topic"]);
    let c0 = commit_as(&w, &repo, &[("b.txt", "ok\n")], "clean one");
    std::os::unix::fs::symlink("b.txt", repo.join("link")).unwrap();
    w.git(&repo, &["add", "link"]);
    let c1 = commit_env(
        &w,
        &repo,
        &[("a.txt", "hello   \n"), ("make-link", "")],
        "messy one\n\nwith a body",
        &[
            ("GIT_AUTHOR_NAME", "Ada"),
            ("GIT_AUTHOR_EMAIL", "ada@example.com"),
            ("GIT_AUTHOR_DATE", "2001-02-03T04:05:06+01:00"),
        ],
    );
    let c2 = commit_as(&w, &repo, &[("c.txt", "fine\n")], "after it");
    w.git(&repo, &["switch", "-q", "main"]);

    let o = w.sandbox(&repo, &["fix", "main..topic", "--check", "fmt", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let fixed = o.json();
    assert_eq!(fixed["old_tip"], c2.as_str());
    assert_eq!(fixed["written"], 2, "{fixed}");
    // The clean commit keeps its id; the messy one and the one after it are made again.
    assert_eq!(rev(&w, &repo, "topic~2"), c0);
    assert_ne!(rev(&w, &repo, "topic~1"), c1);
    assert_ne!(rev(&w, &repo, "topic"), c2);
    let show = |r: &str| w.git(&repo, &["show", r]);
    assert_eq!(show("topic~1:a.txt"), "hello\n");
    assert_eq!(show("topic:a.txt"), "hello\n");
    assert_eq!(show("topic:c.txt"), "fine\n");
    // Authors, dates and messages are kept.
    let who = |r: &str| {
        w.git(
            &repo,
            &["log", "-1", "--format=%an %ae %ad|%cd|%B", "--date=raw", r],
        )
    };
    assert_eq!(who("topic~1"), who(&c1));
    assert_eq!(who("topic"), who(&c2));
    // Links stay links, the check's own link is one (not what it points at); the ignored log
    // and the cached directory are not taken.
    let ls = w.git(&repo, &["ls-tree", "-r", "topic"]);
    assert!(ls.contains("120000 blob") && ls.contains("\tlink"), "{ls}");
    assert_eq!(show("topic:evil.lnk"), "/etc/passwd");
    assert!(
        ls.contains("120000")
            && ls
                .lines()
                .any(|l| l.ends_with("\tevil.lnk") && l.starts_with("120000")),
        "{ls}"
    );
    assert!(
        !ls.contains("fmt.log") && !ls.contains("node_modules"),
        "{ls}"
    );
    let c1_report = &fixed["commits"][1];
    let not_taken = c1_report["not_taken"].to_string();
    assert!(not_taken.contains("fmt.log: ignored"), "{not_taken}");
    assert!(
        not_taken.contains("node_modules/x: under a cached directory"),
        "{not_taken}"
    );
    // The branch moved once: its old tip is the reflog's previous entry.
    assert_eq!(rev(&w, &repo, "topic@{1}"), c2);

    // Again: every tree is known, nothing runs and nothing moves.
    let tip = rev(&w, &repo, "topic");
    let o = w.sandbox(&repo, &["fix", "main..topic", "--check", "fmt", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let again = o.json();
    assert_eq!(again["new_tip"], tip.as_str(), "{again}");
    assert!(
        again["commits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cached"] == true),
        "{again}"
    );
    let text = w.sandbox(&repo, &["fix", "main..topic", "--check", "fmt"]);
    assert!(text.stdout.contains("Nothing to fix"), "{text:?}");

    // On the branch, with a change in the work tree: refused, nothing moved.
    w.git(&repo, &["switch", "-q", "topic"]);
    let c3 = commit_as(&w, &repo, &[("d.txt", "x   \n")], "another");
    std::fs::write(repo.join("c.txt"), "edited\n").unwrap();
    let o = w.sandbox(&repo, &["fix", "HEAD~1..", "--check", "fmt"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.error().0.contains("uncommitted changes"), "{o:?}");
    assert_eq!(rev(&w, &repo, "topic"), c3);
    w.git(&repo, &["checkout", "--", "c.txt"]);
    // Clean: the branch and the work tree move together.
    let o = w.sandbox(&repo, &["fix", "HEAD~1..", "--check", "fmt"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("1 commit rewritten"), "{o:?}");
    assert_eq!(std::fs::read_to_string(repo.join("d.txt")).unwrap(), "x\n");
    assert_eq!(
        w.git(&repo, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );

    // --fixup: the commit stays, a fixup! commit on the tip carries its fix.
    let c4 = commit_as(&w, &repo, &[("e.txt", "y  \n")], "pushed already");
    let o = w.sandbox(&repo, &["fix", "HEAD~1..", "--check", "fmt", "--fixup"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(rev(&w, &repo, "HEAD~1"), c4);
    assert_eq!(
        w.git(&repo, &["log", "-1", "--format=%s"]).trim(),
        "fixup! pushed already"
    );
    assert_eq!(std::fs::read_to_string(repo.join("e.txt")).unwrap(), "y\n");

    // Bad input: one line each, the fix, nothing moved.
    let tip = rev(&w, &repo, "topic");
    for (args, code, problem) in [
        (
            vec!["fix", "main..topic", "--check", "nope"],
            2,
            "no check `nope`",
        ),
        (
            vec!["fix", "main..topic", "--check", "lint"],
            1,
            "not marked fix = true",
        ),
        (
            vec!["fix", &format!("main..{c4}"), "--check", "fmt"],
            2,
            "is no branch",
        ),
        (
            vec!["fix", "main...topic", "--check", "fmt"],
            2,
            "is no range",
        ),
        (
            vec!["fix", "topic..topic", "--check", "fmt"],
            2,
            "holds no commit",
        ),
    ] {
        let o = w.sandbox(&repo, &args);
        assert_eq!(o.code, code, "{args:?} {o:?}");
        let (said, hints) = o.error();
        assert!(said.contains(problem), "{said}");
        assert!(!hints.is_empty(), "{o:?}");
    }
    assert_eq!(rev(&w, &repo, "topic"), tip);
}
