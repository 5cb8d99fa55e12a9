//! The command line as a git subcommand: closed pipes, man pages, completions.

mod common;

use common::{World, BIN};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

const SIGPIPE: i32 = 13;

/// Run the binary with stdout into a pipe whose reader is already gone: every write fails.
fn into_closed_pipe(
    w: &World,
    dir: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    let out = cmd.stdout(writer).stderr(Stdio::piped()).output().unwrap();
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_read_command_dies_quietly_of_sigpipe_on_a_closed_pipe() {
    let w = World::new();
    let repo = w.new_repo("pipes");
    std::fs::write(repo.join(".sandbox.toml"), "[test]\ncommand = \"true\"\n").unwrap();
    w.git(&repo, &["add", ".sandbox.toml"]);
    w.commit(&repo, &[("a.py", "def f():\n    return 1\n")], "a");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["experiment", "start", "idea"]);
    assert_eq!(o.code, 0, "{o:?}");
    let cases: &[&[&str]] = &[
        &["log"],
        &["log", "--json"],
        &["status"],
        &["list"],
        &["show"],
        &["show", "--json"],
        &["events"],
        &["events", "--json"],
        &["experiment", "list"],
        &["experiment", "show", "idea"],
        &["analyze"],
        &["analyze", "--json"],
        &["doctor"],
        &["daemon", "status"],
        &["--help"],
        &["help", "run"],
        &["run", "--help"],
        &["--version"],
    ];
    for args in cases {
        let (code, signal, stderr) = into_closed_pipe(&w, &repo, args);
        assert_eq!(
            (code, signal, stderr.as_str()),
            (None, Some(SIGPIPE), ""),
            "git sandbox {args:?} into a closed pipe"
        );
    }
}

#[test]
fn log_into_head_ends_like_git_log() {
    let w = World::new();
    let repo = w.new_repo("head");
    for i in 0..30 {
        w.commit(&repo, &[], &format!("commit {i}"));
    }
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "git-sandbox log -n 1000 | head -1; echo \"status ${PIPESTATUS[0]}\"",
    ])
    .current_dir(&repo);
    w.apply_env(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr, "");
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap().contains("commit 29"), "{stdout}");
    let status = lines.next().unwrap();
    assert!(status == "status 141" || status == "status 0", "{stdout}");
}
