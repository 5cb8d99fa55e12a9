//! The proxy against real sockets on 127.0.0.1: an origin of the test's own, reached by a name the
//! policy's `resolve` maps there, and clients that speak to the proxy by hand.

use gs_egress::{HostPattern, Policy, Proxy};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// An origin that echoes what it is sent, after a line `origin`.
fn echo_origin() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.write_all(b"origin\n");
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn proxy(allow: &[String], connections: usize) -> (Proxy, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut policy = Policy {
        allow: Some(
            allow
                .iter()
                .map(|a| HostPattern::parse(a).unwrap())
                .collect(),
        ),
        ..Policy::default()
    };
    policy
        .resolve
        .insert("pkgs.test".into(), "127.0.0.1".parse().unwrap());
    policy.limits.connections = connections;
    (Proxy::serve(l, policy), port)
}

fn client(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

fn status(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") && c.read(&mut b).is_ok_and(|n| n == 1) {
        got.push(b[0]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// A ClientHello record naming `name`.
fn hello(name: &str) -> Vec<u8> {
    let mut list = vec![0u8];
    list.extend((name.len() as u16).to_be_bytes());
    list.extend(name.as_bytes());
    let mut ext = (list.len() as u16).to_be_bytes().to_vec();
    ext.extend(list);
    let mut exts = 0u16.to_be_bytes().to_vec();
    exts.extend((ext.len() as u16).to_be_bytes());
    exts.extend(ext);
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend((exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut hs = vec![1];
    hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend(body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend((hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}

#[test]
fn a_tunnel_on_443_needs_the_server_name_it_was_opened_to() {
    // The origin listens on an ephemeral port; the policy names "pkgs.test:443", and resolve
    // maps the name, so the tunnel's port stays 443 while the test's origin is reached by a
    // port-forwarding listener on 127.0.0.1:443 only when the test may bind it (root).
    let origin = echo_origin();
    let Ok(l443) = TcpListener::bind("127.0.0.1:443") else {
        eprintln!("cannot bind 127.0.0.1:443 here: the TLS tunnel test is skipped");
        return;
    };
    std::thread::spawn(move || {
        for s in l443.incoming().flatten() {
            let mut o = TcpStream::connect(("127.0.0.1", origin)).unwrap();
            let mut s2 = s.try_clone().unwrap();
            let mut o2 = o.try_clone().unwrap();
            std::thread::spawn(move || std::io::copy(&mut s2, &mut o2));
            let mut s = s;
            std::thread::spawn(move || std::io::copy(&mut o, &mut s));
        }
    });
    let (p, port) = proxy(&["pkgs.test".into()], 8);
    let mut c = client(port);
    c.write_all(b"CONNECT pkgs.test:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert_eq!(status(&mut c), "HTTP/1.1 200 Connection established");
    let h = hello("pkgs.test");
    c.write_all(&h).unwrap();
    let mut got = vec![0u8; 7 + h.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got[..7], b"origin\n");
    assert_eq!(&got[7..], &h[..], "the hello reached the origin as sent");
    drop(c);

    let mut c = client(port);
    c.write_all(b"CONNECT pkgs.test:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert_eq!(status(&mut c), "HTTP/1.1 200 Connection established");
    c.write_all(&hello("elsewhere.example")).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    assert!(
        !rest.windows(7).any(|w| w == b"origin\n"),
        "nothing of the origin came back"
    );
    let t = p.stop();
    assert_eq!(t.contacted.len(), 1, "{t:?}");
    assert!(
        t.refused.iter().any(|r| r
            .reason
            .contains("TLS server name elsewhere.example is not pkgs.test")),
        "{t:?}"
    );
}

#[test]
fn a_plain_tunnel_to_a_named_port_relays_and_counts() {
    let origin = echo_origin();
    let (p, port) = proxy(&[format!("pkgs.test:{origin}")], 8);
    let mut c = client(port);
    c.write_all(format!("CONNECT pkgs.test:{origin} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(status(&mut c), "HTTP/1.1 200 Connection established");
    c.write_all(b"ping").unwrap();
    let mut got = [0u8; 11];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"origin\nping");
    drop(c);
    // Refused: another port of the same name, a name not listed, a literal address.
    for target in ["pkgs.test:22", "other.test:80", "127.0.0.1:80"] {
        let mut c = client(port);
        c.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        assert!(status(&mut c).starts_with("HTTP/1.1 403"), "{target}");
    }
    let t = p.stop();
    assert_eq!(t.contacted[0].host, "pkgs.test");
    assert_eq!((t.contacted[0].bytes_out, t.contacted[0].bytes_in), (4, 11));
    assert_eq!(t.refused.len(), 3, "{t:?}");
}

#[test]
fn stop_cuts_open_tunnels_at_once_and_a_client_past_the_cap_is_told() {
    let origin = echo_origin();
    let (p, port) = proxy(&[format!("pkgs.test:{origin}")], 1);
    let mut open = client(port);
    open.write_all(format!("CONNECT pkgs.test:{origin} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(status(&mut open), "HTTP/1.1 200 Connection established");
    let mut second = client(port);
    assert_eq!(status(&mut second), "HTTP/1.1 503 Service Unavailable");
    let t = Instant::now();
    let traffic = p.stop();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(traffic.contacted.len(), 1);
    let mut rest = Vec::new();
    let _ = open.read_to_end(&mut rest);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err() || {
            let mut c = client(port);
            c.write_all(b"GET http://pkgs.test/ HTTP/1.1\r\n\r\n")
                .is_err()
                || status(&mut c).is_empty()
        },
        "nothing is served after stop"
    );
}

#[test]
fn a_name_that_resolves_to_loopback_is_refused_unless_the_user_mapped_it() {
    let (p, port) = proxy(&["localhost:8080".into()], 8);
    let mut c = client(port);
    c.write_all(b"GET http://localhost:8080/ HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(status(&mut c).starts_with("HTTP/1.1 403"));
    let t = p.stop();
    assert!(
        t.refused[0]
            .reason
            .contains("loopback, private or link-local"),
        "{t:?}"
    );
}

/// Where the machine reaches the internet only through the user's own proxy, ours tunnels
/// through it; the run never learns of it.
#[test]
fn the_users_own_proxy_carries_what_the_policy_allows() {
    let origin = echo_origin();
    // The user's proxy: another of ours, which maps the origin's name.
    let (users, users_port) = proxy(&[format!("pkgs.test:{origin}")], 8);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let ours = Proxy::serve(
        l,
        Policy {
            allow: Some(vec![
                HostPattern::parse(&format!("pkgs.test:{origin}")).unwrap(),
                HostPattern::parse("localhost:80").unwrap(),
            ]),
            upstream: Some(
                gs_egress::Upstream::parse(&format!("http://127.0.0.1:{users_port}")).unwrap(),
            ),
            ..Policy::default()
        },
    );
    let mut c = client(port);
    c.write_all(format!("CONNECT pkgs.test:{origin} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(status(&mut c), "HTTP/1.1 200 Connection established");
    c.write_all(b"ping").unwrap();
    let mut got = [0u8; 11];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"origin\nping");
    drop(c);
    // A name that resolves to loopback here is refused before the upstream is asked.
    let mut c = client(port);
    c.write_all(b"CONNECT localhost:80 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(status(&mut c).starts_with("HTTP/1.1 403"));
    let t = ours.stop();
    assert_eq!(t.contacted.len(), 1, "{t:?}");
    assert_eq!(
        users.stop().contacted[0].host,
        "pkgs.test",
        "the tunnel went through it"
    );
}

/// A request reaches the origin with its body and nothing after it: a second request sent
/// behind the first (for another site at the same address, say) never does; a tunnel to port
/// 80 is refused.
#[test]
fn only_the_request_and_its_body_reach_the_origin() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        tx.send(got).unwrap();
    });
    let (p, port) = proxy(&[format!("pkgs.test:{origin}"), "plain.example".into()], 8);
    let mut c = client(port);
    c.write_all(
        format!(
            "POST http://pkgs.test:{origin}/up HTTP/1.1\r\nContent-Length: 4\r\n\r\nbodyGET /evil HTTP/1.1\r\nHost: other.example\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let got = String::from_utf8(rx.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(
        got,
        format!("POST /up HTTP/1.1\r\nHost: pkgs.test:{origin}\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody")
    );
    let mut c = client(port);
    c.write_all(b"CONNECT plain.example:80 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(status(&mut c).starts_with("HTTP/1.1 403"));
    let t = p.stop();
    assert!(
        t.refused
            .iter()
            .any(|r| r.reason.contains("a tunnel to port 80")),
        "{t:?}"
    );
}
