//! The daemon's HTTP listener against piles of connections: half-sent heads, more connections
//! than it serves, and large unsigned webhook bodies at once. Every connection goes to the
//! listener this test started on 127.0.0.1; every loop is bounded in count and time.

use crate::common::World;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `daemon::doors::MAX_CONNECTIONS`, `HEADER_TIMEOUT` and `BODY_TIMEOUT`.
const MAX_CONNECTIONS: usize = 256;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Turn webhooks on (a secret in the user config).
fn with_webhooks(w: &World) {
    let secret = w.path("home/webhook-secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    w.user_config(&format!(
        "[remote]\nwebhook_secret_file = \"{}\"\n",
        secret.display()
    ));
}

/// Whether `GET /health` is answered 200 within 3 s (a closed connection is not).
fn healthy(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got.starts_with(b"HTTP/1.1 200")
}

/// A request head that never ends.
fn half_sent(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .unwrap();
    s
}

/// Whether the server closed `s` before `by` (EOF or reset), rather than leaving it open.
fn closed_by(s: &mut TcpStream, by: Instant) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn kb(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

#[test]
fn half_sent_heads_are_closed_after_the_header_timeout() {
    let w = World::new();
    let (_d, addr) = w.serve();
    let started = Instant::now();
    let mut slow: Vec<TcpStream> = (0..100).map(|_| half_sent(&addr)).collect();
    let by = started + HEADER_TIMEOUT + Duration::from_secs(5);
    let open = slow
        .iter_mut()
        .map(|s| closed_by(s, by))
        .filter(|c| !c)
        .count();
    assert_eq!(
        open,
        0,
        "{open} of 100 half-sent heads still open after {} s",
        started.elapsed().as_secs()
    );
    assert!(healthy(&addr), "the listener still serves");
}

#[test]
fn beyond_the_connection_cap_a_new_connection_is_closed() {
    let w = World::new();
    let (_d, addr) = w.serve();
    let held: Vec<TcpStream> = (0..MAX_CONNECTIONS).map(|_| half_sent(&addr)).collect();
    // Let the listener take them all (well inside the header timeout).
    std::thread::sleep(Duration::from_millis(500));
    let mut extra = TcpStream::connect(&addr).unwrap();
    extra
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut got = Vec::new();
    let _ = extra.read_to_end(&mut got);
    assert!(
        got.is_empty(),
        "connection {} was served: {}",
        MAX_CONNECTIONS + 1,
        String::from_utf8_lossy(&got)
    );
    // Their slots come back when they go.
    drop(held);
    assert!(
        w.wait_until(10, || healthy(&addr)),
        "the listener does not serve again once the connections went"
    );
}

#[test]
fn large_unsigned_bodies_at_once_get_503_and_memory_stays_bounded() {
    let w = World::new();
    with_webhooks(&w);
    let (d, addr) = w.serve();
    let status = format!("/proc/{}/status", d.child.id());
    assert!(healthy(&addr));
    let before = kb(&std::fs::read_to_string(&status).unwrap(), "VmRSS:");

    const SIZE: usize = 24 * 1024 * 1024;
    const N: usize = 12;
    let mut conns: Vec<TcpStream> = (0..N)
        .map(|i| {
            let mut s = TcpStream::connect(&addr).unwrap();
            let head = format!(
                "POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {SIZE}\r\n\
                 X-GitHub-Event: push\r\nX-GitHub-Delivery: big-{i}\r\n\
                 X-Hub-Signature-256: sha256={}\r\n\r\n",
                "0".repeat(64)
            );
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Those beyond the bytes in flight are answered 503 before their bodies are sent.
    let mut busy = 0;
    let mut admitted = Vec::new();
    for mut s in conns.drain(..) {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut first = [0u8; 12];
        match s.read(&mut first) {
            Ok(n) if n > 0 => {
                let line = String::from_utf8_lossy(&first[..n]).into_owned();
                assert!(line.contains("503"), "unexpected answer: {line}");
                busy += 1;
            }
            _ => admitted.push(s),
        }
    }
    // The rest send their bodies at once: each is read, hashed, and refused (401).
    let body = std::sync::Arc::new(vec![b' '; SIZE]);
    let senders: Vec<_> = admitted
        .into_iter()
        .map(|mut s| {
            let body = body.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let _ = s.write_all(&body);
                crate::common::http::read_reply(&mut s).status
            })
        })
        .collect();
    let answers: Vec<u16> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    let peak = kb(&std::fs::read_to_string(&status).unwrap(), "VmHWM:");
    assert!(
        busy >= N - 3,
        "only {busy} of {N} large unsigned bodies were turned away (answers of the rest: {answers:?})"
    );
    assert!(
        answers.iter().all(|&c| c == 401),
        "unsigned bodies: {answers:?}"
    );
    let grew_mb = peak.saturating_sub(before) / 1024;
    eprintln!("{busy} of {N} turned away; peak RSS {before} kB -> {peak} kB (+{grew_mb} MB)");
    assert!(
        grew_mb < 120,
        "the daemon's memory grew by {grew_mb} MB for {N} unsigned bodies of 24 MB"
    );
    assert!(healthy(&addr));
}

#[test]
fn a_body_that_stops_coming_is_answered_and_closed_after_the_body_timeout() {
    let w = World::new();
    with_webhooks(&w);
    let (_d, addr) = w.serve();
    let mut s = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    s.write_all(
        format!(
            "POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\
             X-GitHub-Event: push\r\nX-GitHub-Delivery: slow\r\nX-Hub-Signature-256: sha256={}\r\n\r\n{{\"ref\":",
            "0".repeat(64)
        )
        .as_bytes(),
    )
    .unwrap();
    s.set_read_timeout(Some(BODY_TIMEOUT + Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "after {} s: {text:?}",
        started.elapsed().as_secs()
    );
    assert!(started.elapsed() >= BODY_TIMEOUT, "{text}");
    assert!(healthy(&addr));
}
