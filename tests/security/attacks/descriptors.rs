//! Descriptors of the launching process never reach the test: a shell that ran `exec 7<secret`
//! before `git sandbox run` (or before starting the daemon or the MCP server) lends the run
//! nothing. Each test starts the binary holding a root-only secret at fd 7, a root-only file open
//! for append at fd 8 and the write end of a pipe at fd 251, and the sandboxed command lists its
//! own descriptors, reads fd 7 and writes fd 8 and fd 251.

use crate::common::{World, BIN};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SECRET: &str = "host-secret-5b1e";
const WRITTEN: &str = "written-from-the-sandbox";

/// The command every test runs in its sandbox: its shell's own descriptors between two
/// markers, then the attempts (dash's redirections stop at fd 9: fd 251 is reopened by its path).
const PROBE: &str = "echo fds-begin; ls /proc/$$/fd; echo fds-end; cat <&7; \
                     echo written-from-the-sandbox >&8; \
                     echo written-from-the-sandbox >/proc/$$/fd/251; exit 0";

/// What the launching process holds: copies far from the numbers they are handed on at (so no
/// `dup2` in the child lands on one still to be moved), close-on-exec themselves.
struct Held {
    secret: OwnedFd,
    append: OwnedFd,
    append_path: PathBuf,
    pipe_r: std::io::PipeReader,
    pipe_w: OwnedFd,
}

fn high(fd: RawFd) -> OwnedFd {
    // SAFETY: duplicating a descriptor we hold; the copy is owned here.
    let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 300) };
    assert!(h >= 0);
    // SAFETY: a fresh descriptor.
    unsafe { OwnedFd::from_raw_fd(h) }
}

fn hold(w: &World) -> Held {
    let secret_path = w.path("secret");
    let append_path = w.path("appended");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).mode(0o600);
    opts.open(&secret_path)
        .unwrap()
        .write_all(SECRET.as_bytes())
        .unwrap();
    let append = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&append_path)
        .unwrap();
    let (pipe_r, pipe_w) = std::io::pipe().unwrap();
    Held {
        secret: high(File::open(&secret_path).unwrap().as_raw_fd()),
        append: high(append.as_raw_fd()),
        append_path,
        pipe_r,
        pipe_w: high(pipe_w.as_raw_fd()),
    }
}

impl Held {
    /// Start `cmd` with the held files at fd 7, 8 and 251, open across exec as a shell's are.
    fn hand_to(&self, cmd: &mut Command) {
        let moves = [
            (self.secret.as_raw_fd(), 7),
            (self.append.as_raw_fd(), 8),
            (self.pipe_w.as_raw_fd(), 251),
        ];
        // SAFETY: only dup2 between fork and exec (a dup2 to another number clears
        // close-on-exec on the copy).
        unsafe {
            cmd.pre_exec(move || {
                for (from, to) in moves {
                    if libc::dup2(from, to) != to {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Nothing reached the host through the held files: the append file is empty and nothing
    /// came down the pipe (its write ends gone once `drop`ped, here and in the child).
    fn untouched(self, who: &str, what: &str) {
        let appended = std::fs::read_to_string(&self.append_path).unwrap();
        assert!(
            !appended.contains(WRITTEN),
            "{who} {what}: the sandbox wrote a host file through fd 8"
        );
        let Held {
            mut pipe_r, pipe_w, ..
        } = self;
        drop(pipe_w);
        set_nonblocking(pipe_r.as_raw_fd());
        let mut got = Vec::new();
        let _ = pipe_r.read_to_end(&mut got);
        assert!(
            !String::from_utf8_lossy(&got).contains(WRITTEN),
            "{who} {what}: the sandbox wrote into the launching process's pipe (fd 251)"
        );
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: setting a flag on our own descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// The descriptors the sandboxed shell listed, and the output; panics when the probe did not run.
fn listed(who: &str, what: &str, output: &str) -> Vec<String> {
    assert!(
        !output.contains(SECRET),
        "{who} {what}: the sandbox read the host secret through fd 7:\n{output}"
    );
    let mut lines = output.lines().skip_while(|l| l.trim() != "fds-begin");
    assert!(
        lines.next().is_some(),
        "{who} {what}: the probe did not run:\n{output}"
    );
    lines
        .take_while(|l| l.trim() != "fds-end")
        .map(|l| l.trim().to_string())
        .collect()
}

fn assert_only_stdio(who: &str, what: &str, output: &str) {
    assert_eq!(
        listed(who, what, output),
        ["0", "1", "2"],
        "{who} {what}: the sandboxed command holds more than stdin, stdout and stderr:\n{output}"
    );
}

/// The worlds to attack in: root, and `nobody` when we are root.
fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    match World::unprivileged() {
        Some(w) => out.push(("nobody", w)),
        None => eprintln!("not root: the unprivileged variant runs as this user only"),
    }
    out
}

fn config() -> String {
    let quoted = PROBE.replace('\\', "\\\\").replace('"', "\\\"");
    format!("[test]\ncommand = \"{quoted}\"\ntimeout = \"30s\"\n[analysis]\nenabled = false\n")
}

fn binary(w: &World, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    cmd
}

fn output_tail(rec: &serde_json::Value) -> String {
    rec["tests"]["output_tail"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {rec}"))
        .to_string()
}

#[test]
fn run_and_exec_hand_the_command_only_stdin_stdout_and_stderr() {
    for (who, w) in worlds() {
        let repo = w.new_repo("fds");
        let commit = w.commit(&repo, &[(".sandbox.toml", &config())], "list descriptors");

        let held = hold(&w);
        let mut cmd = binary(&w, &repo, &["run", "--json", &commit]);
        held.hand_to(&mut cmd);
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{who}: {stdout}\n{o:?}");
        let rec: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_only_stdio(who, "run", &output_tail(&rec[0]));
        held.untouched(who, "run");

        let held = hold(&w);
        let mut cmd = binary(&w, &repo, &["exec", "HEAD", "--", "sh", "-c", PROBE]);
        held.hand_to(&mut cmd);
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{who} exec: {o:?}");
        assert_only_stdio(who, "exec", &stdout);
        held.untouched(who, "exec");
    }
}

#[test]
fn a_daemon_started_with_open_descriptors_lends_them_to_no_run() {
    for (who, w) in worlds() {
        let repo = w.new_repo("fdd");
        let held = hold(&w);
        let mut cmd = binary(&w, &w.work(), &["daemon", "--workers", "1"]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        held.hand_to(&mut cmd);
        let mut daemon = crate::common::Background {
            child: cmd.spawn().unwrap(),
        };
        let up = w.wait_until(30, || w.sandbox(&w.work(), &["daemon", "status"]).code == 0);
        assert!(up, "{who}: the daemon did not come up");
        let commit = w.commit(&repo, &[(".sandbox.toml", &config())], "list descriptors");
        assert!(
            w.wait_until(60, || w.note(&repo, &commit).is_some()),
            "{who}: the daemon did not run {commit}"
        );
        let note = w.note(&repo, &commit).unwrap();
        assert_only_stdio(who, "daemon", &output_tail(&note));
        let _ = daemon.child.kill();
        let _ = daemon.child.wait();
        held.untouched(who, "daemon");
    }
}

/// One MCP call over raw JSON-RPC lines; the tool's answer.
fn mcp_call(
    stdin: &mut std::process::ChildStdin,
    out: &mut BufReader<std::process::ChildStdout>,
    id: i64,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{req}").unwrap();
    stdin.flush().unwrap();
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the server ended");
        let r: serde_json::Value = serde_json::from_str(&line).unwrap();
        if r["id"] == id {
            return r;
        }
    }
}

fn tool_answer(r: &serde_json::Value) -> serde_json::Value {
    assert_ne!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("{}");
    serde_json::from_str(text).unwrap_or_else(|_| panic!("{r}"))
}

#[test]
fn an_mcp_server_started_with_open_descriptors_lends_them_to_no_run() {
    for (who, w) in worlds() {
        let repo = w.new_repo("fdm");
        // Queued by the hook; the server runs the queue.
        let commit = w.commit(&repo, &[(".sandbox.toml", &config())], "list descriptors");
        let held = hold(&w);
        let mut cmd = binary(&w, &repo, &["mcp"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        held.hand_to(&mut cmd);
        let mut server = crate::common::Background {
            child: cmd.spawn().unwrap(),
        };
        let mut stdin = server.child.stdin.take().unwrap();
        let mut out = BufReader::new(server.child.stdout.take().unwrap());
        let init = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "fds", "version": "1"}});
        mcp_call(&mut stdin, &mut out, 0, "initialize", init);
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        let call = |name: &str, args: serde_json::Value| serde_json::json!({"name": name, "arguments": args});

        let r = mcp_call(
            &mut stdin,
            &mut out,
            1,
            "tools/call",
            call(
                "exec",
                serde_json::json!({"revision": commit, "command": ["sh", "-c", PROBE]}),
            ),
        );
        let exec = tool_answer(&r);
        assert_only_stdio(who, "mcp exec", exec["output"].as_str().unwrap_or_default());

        let r = mcp_call(
            &mut stdin,
            &mut out,
            2,
            "tools/call",
            call(
                "run_wait",
                serde_json::json!({"revision": commit, "timeout_seconds": 120}),
            ),
        );
        let done = tool_answer(&r);
        assert_eq!(done["state"], "done", "{who}: {done}");
        let note = w.note(&repo, &commit).unwrap();
        assert_only_stdio(who, "mcp run", &output_tail(&note));
        drop(stdin);
        let _ = server.child.wait();
        held.untouched(who, "mcp");
    }
}
