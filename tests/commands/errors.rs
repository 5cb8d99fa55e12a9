//! How errors reach the user: an `error:` line and `hint:` lines on stderr, or one JSON object on
//! stdout under `--json`, and an exit code from the error's kind.

use crate::common;

use common::{Out, World};

/// The `--json` error of `o`: nothing on stderr, `{error, kind, hints}` on stdout.
fn json_error(o: &Out, code: i32, kind: &str) -> serde_json::Value {
    assert_eq!(o.code, code, "{o:?}");
    assert_eq!(o.stderr, "", "the error is on stdout only: {o:?}");
    let e = o.json();
    assert_eq!(e["kind"], kind, "{e}");
    assert!(e["error"].as_str().is_some_and(|s| !s.is_empty()), "{e}");
    assert!(e["hints"].is_array(), "{e}");
    let mut keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["error", "hints", "kind"], "{e}");
    e
}

#[test]
fn a_bad_revision_is_usage_with_the_fix_as_a_hint() {
    let w = World::new();
    let repo = w.new_repo("e1");
    let o = w.sandbox(&repo, &["show", "mian"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(
        o.stderr,
        "error: unknown revision \"mian\"\nhint: name a commit, branch or tag that exists (see `git branch` and `git log --oneline`)\n"
    );
    assert_eq!(o.stdout, "");

    let e = json_error(&w.sandbox(&repo, &["show", "mian", "--json"]), 2, "usage");
    assert_eq!(e["error"], "unknown revision \"mian\"");
    assert_eq!(
        e["hints"][0],
        "name a commit, branch or tag that exists (see `git branch` and `git log --oneline`)"
    );
}

#[test]
fn json_errors_of_show_run_and_eval() {
    let w = World::new();
    let repo = w.new_repo("e2");

    // No result yet: a reported failure, exit 1, with the command that makes one.
    let e = json_error(&w.sandbox(&repo, &["show", "--json"]), 1, "failed");
    assert!(
        e["error"].as_str().unwrap().ends_with("has no result yet"),
        "{e}"
    );
    assert_eq!(e["hints"][0], "run it with `git sandbox run HEAD`");
    let o = w.sandbox(&repo, &["show"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.error().1, ["run it with `git sandbox run HEAD`"]);

    let e = json_error(
        &w.sandbox(&repo, &["run", "--timeout", "soon", "--json"]),
        2,
        "usage",
    );
    assert_eq!(e["error"], "invalid --timeout \"soon\"");
    assert_eq!(
        e["hints"][0],
        "write a duration like \"90s\", \"5m\" or \"1h\""
    );
    json_error(&w.sandbox(&repo, &["run", "HEAD~5", "--json"]), 2, "usage");

    let e = json_error(&w.sandbox(&repo, &["eval", "nope", "--json"]), 2, "usage");
    assert_eq!(e["error"], "unknown experiment \"nope\"");
    assert_eq!(
        e["hints"][0],
        "this repository has no experiments yet (`git sandbox experiment start NAME` starts one)"
    );
    // A subcommand's --json counts too.
    json_error(
        &w.sandbox(&repo, &["experiment", "show", "nope", "--json"]),
        2,
        "usage",
    );
}

#[test]
fn parse_errors_stay_clap_s() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["show", "--json", "--no-such-flag"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(o.stdout, "", "{o:?}");
    assert!(o.stderr.starts_with("error: unexpected argument"), "{o:?}");
}

#[test]
fn a_daemon_that_cannot_bind_is_not_bad_usage() {
    // The socket's place is taken by a directory.
    let w = World::new();
    std::fs::create_dir_all(w.data().join("daemon.sock")).unwrap();
    let o = w.sandbox(&w.work(), &["daemon", "--workers", "1"]);
    assert_eq!(o.code, 128, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.starts_with("cannot listen on"), "{o:?}");
    assert_eq!(hints.len(), 1, "{o:?}");
    assert!(hints[0].contains("daemon.sock if no daemon runs"), "{o:?}");

    // A data directory too deep for a socket address (108 bytes).
    let w = World::new();
    let deep = w.path(&"d".repeat(120));
    let o = w.sandbox_env(
        &w.work(),
        &["daemon", "--workers", "1"],
        &[("GIT_SANDBOX_HOME", deep.to_str().unwrap())],
    );
    assert_eq!(o.code, 128, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("the socket path is longer than"), "{o:?}");
    assert_eq!(hints, ["set GIT_SANDBOX_HOME to a shorter path"]);
}

#[test]
fn a_config_error_names_its_commit_once() {
    let w = World::new();
    let repo = w.new_repo("broken-config");
    let head = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"true\"\ncomand = \"x\"\n",
        )],
        "A typo",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "{o:?}");
    let line = o
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {o:?}"));
    let short = &head[..7];
    assert!(
        line.starts_with(&format!(
            "error: {short}:.sandbox.toml:3: key `test.comand`: unknown field"
        )),
        "{o:?}"
    );
    assert!(
        line.ends_with("(`git sandbox config --example` prints every key)"),
        "what an installed binary can show: {o:?}"
    );
    assert_eq!(line.matches(short).count(), 1, "{o:?}");
}

#[test]
fn an_unknown_experiment_is_told_with_the_experiments_there_are() {
    let w = World::new();
    let repo = w.new_repo("names");
    for name in ["beta", "alpha"] {
        assert_eq!(w.sandbox(&repo, &["experiment", "start", name]).code, 0);
    }
    let o = w.sandbox(&repo, &["kill", "nope"]);
    assert_eq!(o.code, 2, "{o:?}");
    insta::assert_snapshot!(o.stderr);
}
