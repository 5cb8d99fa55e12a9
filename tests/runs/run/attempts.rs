//! A run that could not run its tests here (a tool missing on this machine) is an attempt: the
//! result of the same tree and config stays the commit's, in its note, its `git log` summary
//! and the index, and `show` tells of the attempt beside it.

use crate::common::World;
use std::path::{Path, PathBuf};

/// A tool shaped like pyenv's shims: `mytest` runs `mytest-real`, found through `PATH`. A
/// `PATH` without the real tool's directory (a program started by an MCP client, systemd or
/// cron) makes `mytest` exit 127, while the tool the config names, the shim (fingerprinted in
/// the config's key), is the same file. Returns the full `PATH` and the one without the real
/// tool. Under the user's home, which the sandbox hides but for the toolchains on `PATH`.
fn shim(w: &World) -> (String, String) {
    let dir = |d: &str| -> PathBuf {
        let p = w.path(&format!("home/tools/{d}"));
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let (shims, real) = (dir("shims"), dir("real"));
    let exe = |p: &Path, body: &str| {
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    exe(
        &shims.join("mytest"),
        "#!/bin/sh\nexec mytest-real \"$@\"\n",
    );
    exe(&real.join("mytest-real"), "#!/bin/sh\necho all good\n");
    w.own(&w.path("home/tools"));
    let rest = format!(
        "{}:{}",
        World::bin_dir().display(),
        std::env::var("PATH").unwrap()
    );
    (
        format!("{}:{}:{rest}", shims.display(), real.display()),
        format!("{}:{rest}", shims.display()),
    )
}

#[test]
fn a_run_that_could_not_run_its_tests_never_replaces_the_result() {
    let w = World::new();
    let repo = w.new_repo("attempts");
    let (full, short) = shim(&w);
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"mytest\"\n")],
        "configure",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &full)]);
    assert_eq!(o.code, 0, "{o:?}");
    let before = w.note(&repo, &c).unwrap();
    assert_eq!(before["status"], "passed", "{before}");

    // The same tree and config, started without the real tool on PATH.
    let o = w.sandbox_env(&repo, &["run", "--force", "--json"], &[("PATH", &short)]);
    assert!(
        o.stderr.contains("could not run here"),
        "the run says it could not run: {o:?}"
    );
    assert_eq!(o.json()[0]["status"], "passed", "the result stands: {o:?}");
    let note = w.note(&repo, &c).unwrap();
    assert_eq!(note, before, "the note keeps the result");
    assert_eq!(note["config_hash"], before["config_hash"]);
    let log = w.git(&repo, &["log", "-1", &c]);
    assert!(log.contains("Sandbox: passed"), "{log}");
    assert!(!log.contains("error"), "{log}");

    let shown = w.sandbox(&repo, &["show", "--json", &c]).json();
    assert_eq!(shown["status"], "passed", "{shown}");
    let attempt = &shown["could_not_run_here"];
    let reason = attempt["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("mytest") && reason.contains("127"),
        "show --json tells of the attempt: {shown}"
    );
    let human = w.sandbox(&repo, &["show", &c]);
    assert!(human.stdout.contains("Status:   ✔ passed"), "{human:?}");
    assert!(human.stdout.contains("could not run here: "), "{human:?}");

    // The index: the commit's run is the result, the attempt an attempt with its event.
    let entries = w.sandbox(&repo, &["log", "--json", "-n", "1", &c]).json();
    assert_eq!(entries[0]["result"]["status"], "passed", "{entries}");
    assert!(
        entries[0]["could_not_run_here"]["reason"].is_string(),
        "{entries}"
    );
    let line = w.sandbox(&repo, &["log", "-n", "1", &c]).stdout;
    assert!(
        line.starts_with("✔ ")
            && line.contains("passed configure")
            && line.contains("could not run here"),
        "{line}"
    );
    let status = w.sandbox(&repo, &["status", "--json"]).json();
    assert_eq!(status["totals"]["runs"], 1, "{status}");
    assert_eq!(status["totals"]["passed_runs"], 1, "{status}");
    let events = w.sandbox(&repo, &["events", "--kind", "run.attempt", "--json"]);
    let events: Vec<serde_json::Value> = events
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["commit"], c, "{events:?}");

    // Once the tests run again, their result ends the attempt.
    let o = w.sandbox_env(&repo, &["run", "--force"], &[("PATH", &full)]);
    assert_eq!(o.code, 0, "{o:?}");
    let shown = w.sandbox(&repo, &["show", "--json", &c]).json();
    assert!(shown.get("could_not_run_here").is_none(), "{shown}");
}

#[test]
fn a_tree_with_no_result_records_its_error() {
    let w = World::new();
    let repo = w.new_repo("no-result");
    let (_, short) = shim(&w);
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"mytest\"\n")],
        "configure",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &short)]);
    assert_eq!(o.code, 1, "{o:?}");
    let note = w.note(&repo, &c).unwrap();
    assert_eq!(note["status"], "error", "{note}");
    assert!(
        note["error"]
            .as_str()
            .unwrap()
            .contains("was not found (exit 127"),
        "{note}"
    );
    let log = w.git(&repo, &["log", "-1", &c]);
    assert!(log.contains("Sandbox: error"), "{log}");
}

#[test]
fn a_tool_gone_from_path_keeps_the_result_made_with_it() {
    // The tool the config names is gone altogether: its fingerprint leaves the config's key, so
    // even a run that is not forced (an `eval` started by an MCP client) runs the commit again.
    // The settings are the same, and the result made with the tool stays.
    let w = World::new();
    let repo = w.new_repo("gone");
    let (full, _) = shim(&w);
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"mytest\"\n")],
        "configure",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &full)]);
    assert_eq!(o.code, 0, "{o:?}");
    let before = w.note(&repo, &c).unwrap();
    let bare = format!(
        "{}:{}",
        World::bin_dir().display(),
        std::env::var("PATH").unwrap()
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &bare)]);
    assert!(o.stderr.contains("could not run here"), "{o:?}");
    assert_eq!(w.note(&repo, &c).unwrap(), before);
    let log = w.git(&repo, &["log", "-1", &c]);
    assert!(log.contains("Sandbox: passed"), "{log}");
    let shown = w.sandbox_env(&repo, &["show", "--json", &c], &[("PATH", &bare)]);
    let shown = shown.json();
    assert_eq!(shown["status"], "passed", "{shown}");
    assert!(
        shown["could_not_run_here"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("was not found")),
        "{shown}"
    );
}

#[test]
fn a_setup_step_that_could_not_run_never_replaces_the_result() {
    // No kept checkout (`[cache] enabled = false`): the setup step runs inline, just before the
    // tests, with their network policy (none); here it cannot find its tool.
    let w = World::new();
    let repo = w.new_repo("setup-attempt");
    let (full, short) = shim(&w);
    let c = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\nsetup = \"mytest\"\ncommand = \"true\"\n[cache]\nenabled = false\n",
        )],
        "configure",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &full)]);
    assert_eq!(o.code, 0, "{o:?}");
    let before = w.note(&repo, &c).unwrap();
    assert_eq!(before["tests"]["setup"]["how"], "inline", "{before}");
    let o = w.sandbox_env(&repo, &["run", "--force"], &[("PATH", &short)]);
    assert!(o.stderr.contains("could not run here"), "{o:?}");
    assert_eq!(w.note(&repo, &c).unwrap(), before);
    let shown = w.sandbox(&repo, &["show", "--json", &c]).json();
    let reason = shown["could_not_run_here"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.starts_with("the setup step `mytest` failed") && reason.contains("no network"),
        "{shown}"
    );
}

#[test]
fn another_commit_of_the_tree_is_served_its_result_when_its_run_could_not_run() {
    let w = World::new();
    let repo = w.new_repo("same-tree");
    let (full, short) = shim(&w);
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"mytest\"\n")],
        "configure",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("PATH", &full)]);
    assert_eq!(o.code, 0, "{o:?}");
    // A new commit of the same tree, run by force where its tests cannot run.
    w.git(&repo, &["commit", "-q", "--amend", "-m", "reworded"]);
    let amended = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let o = w.sandbox_env(&repo, &["run", "--force"], &[("PATH", &short)]);
    assert!(o.stderr.contains("could not run here"), "{o:?}");
    let note = w.note(&repo, &amended).unwrap();
    assert_eq!(note["status"], "passed", "{note}");
    assert_eq!(note["cached_from"], c, "{note}");
    let shown = w.sandbox(&repo, &["show", "--json", &amended]).json();
    assert!(shown["could_not_run_here"]["reason"].is_string(), "{shown}");
}

/// A cargo project whose dependency cannot be downloaded (runs have no network): cargo stops
/// while resolving, before it compiles or runs any test. That is the environment's failure,
/// recorded as `error` naming what was needed, never as the commit's failing tests.
#[test]
fn a_toolchain_that_cannot_download_what_it_needs_is_an_error_never_a_failure() {
    let w = World::new();
    let repo = w.new_repo("offline-cargo");
    let c = w.commit(
        &repo,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"offline\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.99\"\n",
            ),
            ("src/lib.rs", "#[test]\nfn t() {}\n"),
            (".sandbox.toml", "[test]\ncommand = \"cargo test\"\n"),
        ],
        "a dependency",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let r = &o.json()[0];
    assert_eq!(r["status"], "error", "{o}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("stopped before running any test") && error.contains("itoa"),
        "{o}"
    );
    assert_eq!(r["commit"], c.as_str());
}
