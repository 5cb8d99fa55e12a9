//! The network a run gets: its own namespace, and git-sandbox's proxy as its one way out, to the
//! hosts the user allows. Every listener here is the test's own, on 127.0.0.1, reached by names
//! the user's `[network] resolve` maps there; the host's index is a real PostgreSQL on 127.0.0.1.

use super::common::postgres::Postgres;
use super::common::World;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Tries each target it is given and prints one line per target: `KIND=TARGET -> RESULT`.
const PROBE: &str = r#"import os, socket, sys, urllib.request

def direct(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return "open"
    except OSError as e:
        return "refused " + type(e).__name__

def connect(target):
    proxy = os.environ.get("HTTPS_PROXY", "")
    if not proxy:
        return "no proxy"
    host, port = proxy.rsplit("/", 1)[-1].split(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    got = b""
    while b"\r\n" not in got:
        more = s.recv(300)
        if not more:
            break
        got += more
    return got.split(b"\r\n")[0].decode()

def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode().strip()
    except Exception as e:
        return "error " + str(e)[:120]

def dns(name):
    try:
        socket.getaddrinfo(name, 443)
        return "resolved"
    except OSError:
        return "no dns"

for arg in sys.argv[1:]:
    kind, target = arg.split("=", 1)
    if kind == "direct":
        r = direct(*target.rsplit(":", 1))
    else:
        r = {"connect": connect, "get": get, "dns": dns}[kind](target)
    print("%s -> %s" % (arg, r), flush=True)
"#;

/// An HTTP origin on 127.0.0.1 that answers every request with `hello from origin`; how many
/// connections it accepted.
fn origin() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).is_ok_and(|n| n == 1) {
                    head.push(b[0]);
                }
                let body = "hello from origin\n";
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    (port, seen)
}

fn user_config(w: &World, toml: &str) {
    w.user_config(toml);
    w.own(&w.path("config"));
}

/// Commit `toml` as the repository's config and run HEAD; returns the record.
fn run_with(w: &World, repo: &std::path::Path, toml: &str) -> Value {
    w.commit(repo, &[(".sandbox.toml", toml)], "config");
    let o = w.sandbox(repo, &["run", "--json"]);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    o.json()[0].clone()
}

fn line<'a>(out: &'a str, target: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{target} -> ")))
        .unwrap_or_else(|| panic!("no line for {target} in:\n{out}"))
}

/// With `network = true`, the tests reach `pkgs.test` (allowed, mapped to the test's origin) and
/// nothing else: not a host only the commit added, not the origin by its IP literal, not the
/// host's PostgreSQL by a direct connection, by CONNECT, or by `localhost`, and there is no DNS.
/// The record lists what was contacted and what was refused.
#[test]
fn the_tests_reach_the_allowed_host_through_the_proxy_and_nothing_else() {
    let pg = Postgres::start();
    let w = World::new();
    let (port, seen) = origin();
    let pgp = pg.port();
    user_config(
        &w,
        &format!(
            "[limits]\nnetwork = true\n[network]\nallow = [\"pkgs.test:{port}\"]\n\
             resolve = {{ \"pkgs.test\" = \"127.0.0.1\", \"sneaky.test\" = \"127.0.0.1\" }}\n"
        ),
    );
    let repo = w.new_repo("net");
    let targets = [
        format!("get=http://pkgs.test:{port}/"),
        format!("get=http://sneaky.test:{port}/"),
        format!("connect=127.0.0.1:{port}"),
        format!("direct=127.0.0.1:{port}"),
        format!("direct=127.0.0.1:{pgp}"),
        format!("connect=127.0.0.1:{pgp}"),
        format!("connect=localhost:{pgp}"),
        "dns=example.com".to_string(),
    ];
    let command = format!(
        "python3 probe.py {} && curl -sS --max-time 5 http://pkgs.test:{port}/ && curl -sS --max-time 5 --proxytunnel --proxy \\\"$HTTP_PROXY\\\" http://pkgs.test:{port}/",
        targets.join(" ")
    );
    w.commit(
        &repo,
        &[
            ("probe.py", PROBE),
            (
                ".sandbox.toml",
                &format!(
                    "[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n\
                     [network]\nallow = [\"pkgs.test:{port}\", \"sneaky.test:{port}\"]\n"
                ),
            ),
        ],
        "probe the network",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    let rec = o.json()[0].clone();
    let out = std::fs::read_to_string(w.log_of(rec["commit"].as_str().unwrap())).unwrap();
    assert_eq!(rec["status"], "passed", "{out}\n{rec}");
    assert_eq!(
        line(&out, &targets[0]),
        format!("{} -> hello from origin", targets[0])
    );
    assert!(line(&out, &targets[1]).contains("403"), "{out}");
    assert!(
        line(&out, &targets[2]).contains("HTTP/1.1 403"),
        "an IP literal: {out}"
    );
    for direct in &targets[3..5] {
        assert!(line(&out, direct).contains("refused"), "{out}");
    }
    for connect in &targets[5..7] {
        assert!(
            line(&out, connect).starts_with(&format!("{connect} -> HTTP/1.1 403")),
            "{out}"
        );
    }
    assert_eq!(line(&out, &targets[7]), "dns=example.com -> no dns");
    assert_eq!(
        out.matches("hello from origin").count(),
        3,
        "curl, forwarded and tunnelled: {out}"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "only the proxy reached the origin"
    );

    let net = &rec["tests"]["network"];
    assert_eq!(net["policy"], "proxy", "{rec}");
    assert_eq!(
        net["allow"],
        serde_json::json!([format!("pkgs.test:{port}")]),
        "{net}"
    );
    let contacted = net["contacted"].as_array().unwrap();
    assert_eq!(contacted.len(), 1, "{net}");
    assert_eq!(contacted[0]["host"], "pkgs.test");
    assert_eq!(contacted[0]["port"], port);
    assert_eq!(contacted[0]["requests"], 3, "{net}");
    let refused: Vec<(String, u64)> = net["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap().to_string(),
                r["port"].as_u64().unwrap(),
            )
        })
        .collect();
    for (host, p) in [
        ("sneaky.test", port),
        ("127.0.0.1", port),
        ("127.0.0.1", pgp),
        ("localhost", pgp),
    ] {
        assert!(
            refused.contains(&(host.to_string(), p as u64)),
            "{host}:{p} not listed as refused: {net}"
        );
    }
    let shown = w.sandbox(&repo, &["show"]).stdout;
    assert!(
        shown.contains(&format!("network:  through the proxy, to pkgs.test:{port}; contacted pkgs.test:{port} (3 requests")),
        "{shown}"
    );
}

/// The attack the proxy closes: with `setup_network = true` (the manual's npm recipe), a
/// commit's setup step reached the host's loopback, where the index (PostgreSQL, trust auth)
/// took a forged "passed". Now the setup's network leads only to its registries: the index is
/// out of reach directly, through the proxy, and by name.
#[test]
fn a_setup_step_with_the_network_cannot_reach_the_hosts_index() {
    let pg = Postgres::start();
    let url = pg.database("attacked");
    let mut w = World::new();
    w.extra_env.push(("GIT_SANDBOX_INDEX".into(), url));
    user_config(&w, "[limits]\nsetup_network = true\n");
    let repo = w.new_repo("setup-attack");
    let pgp = pg.port();
    let setup = format!(
        "python3 probe.py direct=127.0.0.1:{pgp} direct=localhost:{pgp} connect=127.0.0.1:{pgp} connect=localhost:{pgp} > reached.txt"
    );
    w.commit(
        &repo,
        &[
            ("probe.py", PROBE),
            (
                ".sandbox.toml",
                &format!(
                    "[test]\nsetup = \"{setup}\"\ncommand = \"cat reached.txt\"\n[analysis]\nenabled = false\n"
                ),
            ),
        ],
        "a setup step that reaches for the index",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{o:?}");
    let out = rec["tests"]["output_tail"].as_str().unwrap();
    for direct in ["127.0.0.1", "localhost"] {
        assert!(
            line(out, &format!("direct={direct}:{pgp}")).contains("refused"),
            "{out}"
        );
    }
    for connect in ["127.0.0.1", "localhost"] {
        let l = line(out, &format!("connect={connect}:{pgp}"));
        assert!(l.contains("HTTP/1.1 403"), "{out}");
    }
    // The tests themselves had no network at all.
    assert_eq!(rec["tests"]["network"], Value::Null, "{rec}");
    // A step built here says what its proxy refused it.
    if rec["tests"]["setup"]["how"] == "built" {
        let traffic = &rec["tests"]["setup"]["traffic"];
        assert_eq!(traffic["policy"], "proxy", "{rec}");
        assert_eq!(traffic["contacted"], serde_json::json!([]), "{rec}");
        let refused: Vec<&str> = traffic["refused"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap())
            .collect();
        assert!(
            refused.contains(&"127.0.0.1") && refused.contains(&"localhost"),
            "{traffic}"
        );
        let shown = w.sandbox(&repo, &["show"]).stdout;
        assert!(
            shown.contains("setup network: through the proxy, to pypi.org"),
            "{shown}"
        );
    }
}

/// `[network] ca_files`: a company's own certificate authority, named in the user's config (in a
/// home the run never sees), is trusted by the run's TLS clients beside the system's store: curl
/// reaches an HTTPS origin whose certificate it signed, through the proxy. A repository cannot
/// name one.
#[test]
fn the_users_ca_files_are_trusted_inside_and_only_the_user_names_them() {
    let w = World::new();
    let dir = w.path("home/certs");
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("corp.pem"), dir.join("corp.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=corp.test",
            "-addext",
            "subjectAltName=DNS:corp.test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("no openssl to make a certificate: skipped");
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = std::process::Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        w.wait_until(10, || std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok())
    );
    user_config(
        &w,
        &format!(
            "[limits]\nnetwork = true\n[network]\nallow = [\"corp.test:{port}\"]\n\
             resolve = {{ \"corp.test\" = \"127.0.0.1\" }}\nca_files = [\"{}\"]\n",
            cert.display()
        ),
    );
    let repo = w.new_repo("ca");
    let fetch =
        format!("curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}' https://corp.test:{port}/");
    let config = format!(
        "[test]\ncommand = \"{fetch} && test ! -e {}\"\n[analysis]\nenabled = false\n",
        cert.display()
    );
    let rec = run_with(&w, &repo, &config);
    assert_eq!(
        rec["status"], "passed",
        "curl trusted the CA, the home stayed hidden: {rec}"
    );
    assert_eq!(rec["tests"]["output_tail"], "200", "{rec}");
    // Without it, the origin's certificate is not trusted.
    user_config(
        &w,
        &format!(
            "[limits]\nnetwork = true\n[network]\nallow = [\"corp.test:{port}\"]\n\
             resolve = {{ \"corp.test\" = \"127.0.0.1\" }}\n"
        ),
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(rec["status"], "failed", "{rec}");
    // A repository that names a CA file is refused, key by key.
    let rec = run_with(
        &w,
        &repo,
        "[test]\ncommand = \"true\"\n[network]\nca_files = [\"/etc/hostname\"]\n",
    );
    assert_eq!(rec["status"], "error", "{rec}");
    assert!(
        rec["error"]
            .as_str()
            .unwrap()
            .contains("key `network.ca_files`: a repository cannot set this"),
        "{rec}"
    );
}
