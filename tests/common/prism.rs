//! GitHub's own API description as a contract: Prism (npm `@stoplight/prism-cli`) mocks
//! `api.github.com` from `@octokit/openapi` on 127.0.0.1, started once per test process, and
//! every request the fake GitHub receives is sent to it as well; what Prism finds wrong with a
//! request (a missing field, a wrong enum, an unknown path) is a violation the test fails on.
//! `./test` installs both packages (tests/common/tools.rs).

use std::io::{Read, Write};
use std::sync::OnceLock;

/// `127.0.0.1:PORT` of the running Prism mock, started on first use.
pub fn addr() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let prism = super::tools::npm(".bin/prism");
        let spec = super::tools::npm("@octokit/openapi/generated/api.github.com.json");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (tx, rx) = std::sync::mpsc::channel();
        // Spawned from a thread that lives as long as the process: Prism is killed with it.
        std::thread::spawn(move || {
            use std::os::unix::process::CommandExt;
            let mut cmd = std::process::Command::new(&prism);
            cmd.args(["mock", "-h", "127.0.0.1", "-p", &port.to_string()])
                .arg(&spec)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: prctl in the child before exec, async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let child = cmd.spawn().expect("start prism");
            tx.send(()).unwrap();
            let _keep = child;
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "prism did not start within 180 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        addr
    })
}

/// What GitHub's description says is wrong with this request, if anything.
pub fn violation(method: &str, path: &str, body: &[u8]) -> Option<String> {
    let addr = addr();
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: token contract-check\r\nAccept: application/vnd.github+json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status: u16 = text.split_whitespace().nth(1)?.parse().ok()?;
    let (headers, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let request_violations: Vec<&str> = headers
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("sl-violations:"))
        .filter(|l| l.contains("\"request\""))
        .collect();
    if matches!(status, 400 | 404 | 405 | 422) || !request_violations.is_empty() {
        return Some(format!(
            "{method} {path}: Prism answered {status}: {} {}",
            request_violations.join(" "),
            rest.chars().take(600).collect::<String>()
        ));
    }
    None
}
