//! The supervisor and its sandbox helper, driven through the library: exit codes, output, the
//! timeout, the output cap (the helper is the real binary).

use git_sandbox::config::Config;
use git_sandbox::runner::process::{run, Output, Spec};
use git_sandbox::runner::Sandbox;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn sandbox() -> Sandbox {
    Sandbox {
        helper: env!("CARGO_BIN_EXE_git-sandbox").into(),
        ..Sandbox::default()
    }
}

fn spec<'a>(
    cmd: &'a str,
    dir: &'a Path,
    log: &'a Path,
    flag: &'a AtomicBool,
    sb: &'a Sandbox,
    limits: &'a git_sandbox::config::Limits,
) -> Spec<'a> {
    Spec {
        command: cmd,
        cwd: dir,
        root: dir,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        timeout: Duration::from_secs(10),
        output: Output::Capture { log, cap: 1 << 20 },
        limits,
        sandbox: sb,
        interrupt: flag,
        artifacts: &[],
        lower: None,
        run_uid: None,
        cache_layers: &[],
        cache_out: None,
        cache_paths: &[],
    }
}

#[test]
fn exit_codes_output_and_env_scrub() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let o = run(spec(
        "echo hello; echo oops >&2; echo ${GITHUB_TOKEN:-none}; exit 3",
        d.path(),
        &log,
        &flag,
        &sb,
        &limits,
    ));
    assert_eq!(o.exit_code, Some(3), "{o:?}");
    assert_eq!(o.killed_by, None);
    assert_eq!(o.output_tail, "hello\noops\nnone");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "hello\noops\nnone\n"
    );
    assert!(!o.isolation.layers.is_empty());
}

#[test]
fn timeout_kills_the_whole_group() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let marker = d.path().join("survivor");
    let cmd = format!("(sleep 3; touch {}) & sleep 30", marker.display());
    let (sb, limits) = (sandbox(), Config::default().limits);
    let mut s = spec(&cmd, d.path(), &log, &flag, &sb, &limits);
    s.timeout = Duration::from_millis(300);
    let o = run(s);
    assert_eq!(o.killed_by.as_deref(), Some("timeout"));
    assert!(o.duration < Duration::from_secs(3), "{:?}", o.duration);
    std::thread::sleep(Duration::from_millis(3500));
    assert!(!marker.exists(), "a background child outlived the timeout");
}

#[test]
fn endless_output_is_capped_and_stopped() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let mut s = spec("yes", d.path(), &log, &flag, &sb, &limits);
    s.output = Output::Capture {
        log: &log,
        cap: 100_000,
    };
    let o = run(s);
    assert_eq!(o.killed_by.as_deref(), Some("output"));
    assert!(o.truncated);
    assert_eq!(o.output.len(), 100_000);
    assert!(std::fs::metadata(&log).unwrap().len() < 100_200);
}

#[test]
fn missing_command_is_exit_127() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let o = run(spec(
        "definitely-not-a-command-xyz",
        d.path(),
        &log,
        &flag,
        &sb,
        &limits,
    ));
    assert_eq!(o.exit_code, Some(127));
}

#[test]
fn a_helper_that_cannot_start_is_a_spawn_error() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let sb = Sandbox {
        helper: d.path().join("no-such-helper"),
        ..Sandbox::default()
    };
    let limits = Config::default().limits;
    let o = run(spec("true", d.path(), &log, &flag, &sb, &limits));
    assert!(o
        .spawn_error
        .unwrap()
        .contains("cannot start the sandbox helper"));
}

#[test]
fn a_test_command_gets_sigpipe_and_no_blocked_signals() {
    // `yes | head -1` must end with `yes` killed by SIGPIPE (exit 141), as in a terminal: an
    // ignored SIGPIPE inherited through execve would leave it writing into a closed pipe instead
    // (exit 1, "Broken pipe"), and `sh` cannot reset a signal ignored on entry.
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let o = run(spec(
        "{ yes; echo \"yes=$?\" >status; } | head -1; cat status; \
         sed -n 's/^\\(Sig[IB][gl][nk]\\):[[:space:]]*/\\1 /p' /proc/self/status",
        d.path(),
        &log,
        &flag,
        &sb,
        &limits,
    ));
    assert_eq!(o.exit_code, Some(0), "{o:?}");
    assert!(o.duration < Duration::from_secs(5), "{:?}", o.duration);
    let lines: Vec<&str> = o.output_tail.lines().collect();
    assert_eq!(lines[..2], ["y", "yes=141"], "{o:?}");
    let mask = |name: &str| {
        let line = lines.iter().find(|l| l.starts_with(name)).expect(name);
        u64::from_str_radix(line.split(' ').nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk"), 0, "blocked signals: {o:?}");
    const SIGPIPE: u32 = 13;
    assert_eq!(
        mask("SigIgn") & (1 << (SIGPIPE - 1)),
        0,
        "SIGPIPE ignored: {o:?}"
    );
}
