//! The supervisor and its sandbox helper, driven through the library: exit codes, output, the
//! timeout, the output cap (the helper is the real binary).

use gs_config::Config;
use gs_sandbox::Sandbox;
use gs_sandbox::{process::run, process::Output, process::Spec};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The real binary as the helper, forked from a fork server as `git sandbox run` does.
fn sandbox() -> Sandbox {
    let sb = Sandbox {
        helper: env!("CARGO_BIN_EXE_git-sandbox").into(),
        ..Sandbox::default()
    };
    sb.warm();
    sb
}

fn spec<'a>(
    cmd: &'a str,
    dir: &'a Path,
    log: &'a Path,
    flag: &'a AtomicBool,
    sb: &'a Sandbox,
    limits: &'a gs_config::Limits,
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
        work_layers: &[],
        watch: None,
        // These runs' network is the host's or none, as their limits say.
        egress: if limits.network {
            gs_sandbox::Egress::Host
        } else {
            gs_sandbox::Egress::Closed
        },
    }
}

#[test]
fn the_first_failure_is_told_while_the_command_still_runs() {
    use gs_sandbox::process::Watch;
    use gs_sandbox::{first_fail::Found, first_fail::Runner};
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let told = std::cell::RefCell::new(Vec::new());
    let on_found = |f: Found, at: std::time::Instant| told.borrow_mut().push((f, at));
    let started = std::time::Instant::now();
    let o = run(Spec {
        watch: Some(Watch {
            runner: Runner::Cargo,
            on_found: &on_found,
        }),
        ..spec(
            "echo 'test a ... ok'; echo 'test b ... FAILED'; sleep 2; echo 'test c ... FAILED'",
            d.path(),
            &log,
            &flag,
            &sb,
            &limits,
        )
    });
    let ended = started + o.duration;
    let told = told.into_inner();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, Found::Failing(Some("b".into())));
    assert!(told[0].1 + Duration::from_millis(1500) < ended, "{told:?}");
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
fn a_command_holding_a_nul_is_refused_not_cut_short() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    // Cut at its NUL the command would be `sh -c ""`, which passes.
    let o = run(spec("\0exit 3", d.path(), &log, &flag, &sb, &limits));
    assert_ne!(o.exit_code, Some(0), "{o:?}");
    let e = o.spawn_error.expect("refused");
    assert!(e.contains("NUL") && !e.contains('\n'), "{e}");
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
    assert_eq!(o.killed_by, Some(gs_model::KilledBy::Timeout));
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
    assert_eq!(o.killed_by, Some(gs_model::KilledBy::Output));
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

/// This process's children whose command line names the fork server's subcommand and that are
/// not in a session of their own (the helpers it forks are, until they exec), with their state.
fn fork_servers() -> Vec<i32> {
    children()
        .into_iter()
        .filter(|c| c.server && c.session != c.pid && c.state != 'Z')
        .map(|c| c.pid)
        .collect()
}

/// The fork servers once `n` of them are seen (a server is known by its command line, which is
/// the test's own between its fork and its exec: under load, for a moment); else those seen
/// after 5 s.
fn fork_servers_settled(n: usize) -> Vec<i32> {
    for _ in 0..100 {
        let seen = fork_servers();
        if seen.len() == n {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    fork_servers()
}

struct Child {
    pid: i32,
    session: i32,
    state: char,
    server: bool,
}

fn children() -> Vec<Child> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid pgrp session …: the comm may hold spaces.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 4 || f[1] != me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        out.push(Child {
            pid,
            session: f[3].parse().unwrap_or(0),
            state: f[0].chars().next().unwrap_or('?'),
            server: cmdline
                .split(|&b| b == 0)
                .any(|a| a == b"__sandbox-forkserver"),
        });
    }
    out
}

#[test]
fn runs_at_once_each_get_their_own_output_and_exit_code_from_one_fork_server() {
    let d = tempfile::tempdir().unwrap();
    let (sb, limits) = (sandbox(), Config::default().limits);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (d, sb, limits) = (&d, &sb, &limits);
            s.spawn(move || {
                for i in 0..5 {
                    let dir = d.path().join(format!("t{t}-{i}"));
                    std::fs::create_dir(&dir).unwrap();
                    let log = dir.join("l.log");
                    let flag = AtomicBool::new(false);
                    let cmd = format!("echo run-$WHO; echo err-$WHO >&2; exit {}", t + i);
                    let mut sp = spec(&cmd, &dir, &log, &flag, sb, limits);
                    sp.env.push(("WHO".into(), format!("{t}-{i}")));
                    let o = run(sp);
                    assert_eq!(o.exit_code, Some(t + i), "{o:?}");
                    assert_eq!(o.output_tail, format!("run-{t}-{i}\nerr-{t}-{i}"), "{o:?}");
                    assert!(!o.isolation.layers.is_empty(), "{o:?}");
                }
            });
        }
    });
}

/// Run `name` alone in a process of its own (this binary, filtered to it), so that what it does
/// to its fork server and what it finds among its children is its own.
fn alone(name: &str) {
    if std::env::var_os("GS_TEST_ALONE").is_some() {
        return;
    }
    // libtest names a test by its module path inside the binary (`process::NAME` in a group).
    let full = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &full, "--test-threads=1", "--nocapture"])
        .env("GS_TEST_ALONE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}{stderr}");
    // A name that matches nothing runs nothing, and would pass.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{full} did not run alone: {stdout}{stderr}"
    );
}

#[test]
fn a_fork_server_killed_or_hung_costs_no_run_and_runs_none_twice() {
    const NAME: &str = "a_fork_server_killed_or_hung_costs_no_run_and_runs_none_twice";
    if std::env::var_os("GS_TEST_ALONE").is_none() {
        return alone(NAME);
    }
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let networked = gs_config::Limits {
        network: true,
        ..limits.clone()
    };
    let ran_with = |what: &str, limits: &gs_config::Limits| {
        let o = run(spec("echo ran; exit 7", d.path(), &log, &flag, &sb, limits));
        assert_eq!(
            (o.exit_code, o.output_tail.as_str()),
            (Some(7), "ran"),
            "{what}: {o:?}"
        );
    };
    let ran = |what: &str| ran_with(what, &limits);
    ran("first");
    let servers = fork_servers_settled(1);
    assert_eq!(servers.len(), 1, "one server, kept for the next run");
    ran("second");
    assert_eq!(fork_servers(), servers, "the same server");
    // Killed: the next run execs its helper, and the one after starts a new server.
    // SAFETY: signalling a child of this test process.
    unsafe { libc::kill(servers[0], libc::SIGKILL) };
    ran("after the server was killed");
    ran("with a new server");
    let now = fork_servers_settled(1);
    assert!(now.len() == 1 && now != servers, "{servers:?} then {now:?}");
    // Hung: the run waits for its answer a bounded time, then execs its helper. When the server
    // wakes it forks the request it had, but that helper gets no go: it exits 125 at once, and
    // never runs the command (which would exit 7). (The run has the network, so the helper
    // started ahead for the runs before, made without it, cannot serve it: it asks the server.)
    // SAFETY: signalling a child of this test process.
    unsafe { libc::kill(now[0], libc::SIGSTOP) };
    ran_with("while the server hung", &networked);
    // SAFETY: as above.
    unsafe { libc::kill(now[0], libc::SIGCONT) };
    ran("after it woke");
    std::thread::sleep(Duration::from_millis(500));
    let stale: Vec<i32> = children()
        .into_iter()
        .filter(|c| c.state == 'Z')
        .map(|c| c.pid)
        .collect();
    assert_eq!(stale.len(), 1, "the woken server's one helper: {stale:?}");
    let mut status = 0;
    // SAFETY: reaping our own child.
    assert_eq!(unsafe { libc::waitpid(stale[0], &mut status, 0) }, stale[0]);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 125,
        "status {status:#x}"
    );
}

#[test]
fn a_plan_too_large_for_the_fork_server_is_run_by_an_execd_helper() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let (sb, limits) = (sandbox(), Config::default().limits);
    let big = "x".repeat(124 << 10);
    let mut s = spec("echo ${#BIG}", d.path(), &log, &flag, &sb, &limits);
    s.env.push(("BIG".into(), big));
    let o = run(s);
    assert_eq!(
        (o.exit_code, o.output_tail.as_str()),
        (Some(0), "126976"),
        "{o:?}"
    );
}

#[test]
fn each_run_gets_the_network_its_policy_says_whatever_helper_was_started_ahead() {
    // Helpers are started ahead of the next run with their namespaces made for the run before;
    // one made without the network must never serve a run that has it, nor the other way.
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    let sb = sandbox();
    let host = std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .filter(|l| l.contains(':'))
        .count();
    assert!(host > 1, "this test needs a host interface besides lo");
    // None, the host's, or the proxy's (its own namespace with the proxy on its loopback).
    for mode in [0, 0, 1, 1, 2, 0, 1, 2, 2, 0, 0] {
        let network = mode == 1;
        let limits = gs_config::Limits {
            network,
            ..Config::default().limits
        };
        let mut s = spec(
            "grep -c : /proc/net/dev; echo \"$HTTP_PROXY\"",
            d.path(),
            &log,
            &flag,
            &sb,
            &limits,
        );
        if mode == 2 {
            s.egress = gs_sandbox::Egress::Proxy {
                allow: None,
                resolve: Default::default(),
            };
        }
        let o = run(s);
        let mut lines = o.output_tail.lines();
        let seen: usize = lines.next().unwrap_or("").trim().parse().unwrap_or(0);
        let proxy = lines.next().unwrap_or("");
        assert_eq!(seen, if network { host } else { 1 }, "mode {mode}: {o:?}");
        assert_eq!(
            proxy.starts_with("http://127.0.0.1:"),
            mode == 2,
            "mode {mode}: {o:?}"
        );
        let layer = o
            .isolation
            .layers
            .iter()
            .find(|l| l.layer == "network")
            .map(|l| l.detail.clone())
            .unwrap_or_default();
        assert_eq!(
            layer.contains("own network namespace"),
            !network,
            "mode {mode}: {layer}"
        );
        assert_eq!(
            o.network.is_some(),
            mode != 0,
            "mode {mode}: {:?}",
            o.network
        );
    }
}

#[test]
fn a_helper_started_ahead_by_one_thread_never_runs_another_threads_command() {
    // Without a fork server (a one-off exec, the MCP server's exec tool) a helper started ahead is
    // exec'd by the calling thread, and its parent-death signal follows that thread: if another
    // thread's run took it, that run would be killed when the first thread ends.
    const NAME: &str = "a_helper_started_ahead_by_one_thread_never_runs_another_threads_command";
    if std::env::var_os("GS_TEST_ALONE").is_none() {
        return alone(NAME);
    }
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("l.log");
    let flag = AtomicBool::new(false);
    // The helper by another path: no fork server was started for it.
    let helper = d.path().join("git-sandbox");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_git-sandbox"), &helper).unwrap();
    let sb = Sandbox {
        helper,
        ..Sandbox::default()
    };
    let limits = Config::default().limits;
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (sb, limits, log) = (&sb, &limits, &log);
        s.spawn(move || {
            gs_sandbox::process::start_ahead(sb, limits, &Output::Capture { log, cap: 1 << 20 });
            made_tx.send(()).unwrap();
            // This thread ends while the other thread's command runs.
            let _ = end_rx.recv();
        });
        made_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let _ = end_tx.send(());
        });
        let o = run(spec("sleep 1; echo ran", d.path(), log, &flag, sb, limits));
        assert_eq!(
            (o.exit_code, o.signal, o.output_tail.as_str()),
            (Some(0), None, "ran"),
            "{o:?}"
        );
    });
}
