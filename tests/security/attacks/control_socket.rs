//! The daemon's control socket against other users, huge requests and piles of slow clients.

use crate::common::{Background, World, BIN};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

const NOBODY: u32 = 65534;

fn daemon_running(w: &World) -> bool {
    w.sandbox(&w.work(), &["daemon", "status"]).code == 0
}

/// The daemon under `umask 000`, its log beside the others.
fn spawn_daemon_umask0(w: &World) -> Background {
    let mut cmd = Command::new(BIN);
    cmd.args(["daemon", "--workers", "1"]).current_dir(w.work());
    w.apply_env(&mut cmd);
    let log = std::fs::File::create(w.path("daemon.log")).unwrap();
    cmd.stdout(Stdio::null()).stderr(log);
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    Background {
        child: cmd.spawn().unwrap(),
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o777
}

/// Let another user reach the socket's directory (as a careless setup would).
fn open_the_way(w: &World) {
    for dir in [w.tmp.path(), &w.data()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
}

/// As uid 65534: connect, send `line`, print the reply (or the error).
fn as_nobody(w: &World, line: &str) -> std::process::Output {
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX)\n\
                  s.settimeout(5)\n\
                  s.connect(sys.argv[1])\n\
                  s.sendall(sys.argv[2].encode() + b'\\n')\n\
                  print(s.recv(4096).decode().strip())\n";
    Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(w.data().join("daemon.sock"))
        .arg(line)
        .env_clear()
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap()
}

fn status_line(p: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{p}/status"))
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

#[test]
fn under_umask_000_the_socket_and_data_are_private_and_another_user_cannot_stop_it() {
    let w = World::new();
    let mut daemon = spawn_daemon_umask0(&w);
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    let data = w.data();
    assert_eq!(mode(&data.join("daemon.sock")), 0o600);
    assert_eq!(mode(&data), 0o700);
    for file in ["daemon.lock", "index.db", "index.db-wal", "index.db-shm"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    open_the_way(&w);
    let out = as_nobody(&w, "stop");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "the daemon stopped"
    );
    assert!(daemon_running(&w));
}

#[test]
fn a_peer_of_another_uid_is_refused_even_when_the_socket_is_open_to_all() {
    let w = World::new();
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    // The daemon makes its data directory private again whenever it opens it (it runs main's
    // commit meanwhile), so the way is opened again until a connection gets through.
    let sock = w.data().join("daemon.sock");
    let mut out = None;
    for _ in 0..50 {
        open_the_way(&w);
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
        let tried = as_nobody(&w, "stop");
        let closed = String::from_utf8_lossy(&tried.stderr).contains("PermissionError");
        out = Some(tried);
        if !closed {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = out.unwrap();
    let reply = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        reply.starts_with("error: uid 65534 may not control this daemon"),
        "{reply}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "the daemon stopped"
    );
    let status = w.sandbox(&w.work(), &["daemon", "status", "--json"]).json();
    assert_eq!(status["stopping"], false, "{status}");
}

#[test]
fn a_request_without_a_newline_does_not_grow_the_daemon() {
    let w = World::new();
    let daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    let pid = daemon.child.id();
    let before = status_line(pid, "VmHWM:");
    let mut stream = UnixStream::connect(w.data().join("daemon.sock")).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let chunk = vec![b'x'; 1024 * 1024];
    let mut sent = 0usize;
    for _ in 0..200 {
        if stream.write_all(&chunk).is_err() {
            break; // the daemon closed the connection: what we want
        }
        sent += chunk.len();
    }
    drop(stream);
    let peak = status_line(pid, "VmHWM:");
    assert!(
        peak < before + 32 * 1024,
        "the daemon's peak RSS grew from {before} kB to {peak} kB (sent {sent} bytes)"
    );
    assert!(sent < 200 * 1024 * 1024, "the daemon read all 200 MiB");
    let status = w.sandbox(&w.work(), &["daemon", "status", "--json"]).json();
    assert_eq!(status["workers"], 1, "the daemon answered: {status}");
}

#[test]
fn slow_clients_do_not_pile_up_threads() {
    let w = World::new();
    let daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    let pid = daemon.child.id();
    let sock = w.data().join("daemon.sock");
    let base = threads(pid);
    let clients: Vec<UnixStream> = (0..800)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // Let the daemon accept them all.
    std::thread::sleep(Duration::from_millis(300));
    let held = threads(pid);
    assert!(
        held <= base + 32,
        "{held} threads with 800 silent clients (from {base})"
    );
    drop(clients);
    let status = w.sandbox(&w.work(), &["daemon", "status", "--json"]).json();
    assert_eq!(status["workers"], 1, "the daemon answered: {status}");
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"ping\n").unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
    assert_eq!(reply, "ok\n");
}
