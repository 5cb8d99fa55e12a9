//! git-sandbox's egress proxy: a sandboxed run's one way out to the network. The supervisor
//! serves it on a listening socket made inside the run's own network namespace (its loopback);
//! everything a client sends is hostile. It answers `CONNECT` and absolute-form `http://`
//! requests for the hosts the [`Policy`] allows (ports 80 and 443 unless a pattern names one),
//! resolves names itself, and connects only to public addresses, unless the user's `resolve`
//! table maps the name (a mirror on the user's network, a test's listener on 127.0.0.1). A TLS
//! tunnel's server name must be the host it was opened to. What was contacted and refused is
//! counted in [`Traffic`].

pub mod door;
mod pattern;
mod relay;
mod request;
mod tls;
mod upstream;

pub use pattern::HostPattern;
pub use upstream::Upstream;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bounds on what clients may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Client connections at once; one more is answered 503.
    pub connections: usize,
    /// How long a client may take to send its request head.
    pub head: Duration,
    /// How long a connection may pass no byte either way.
    pub idle: Duration,
    /// How long connecting to an origin may take.
    pub connect: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 64,
            head: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            connect: Duration::from_secs(10),
        }
    }
}

/// What a run may reach.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The hosts allowed; `None`: any host with a public address, on ports 80 and 443.
    pub allow: Option<Vec<HostPattern>>,
    /// Names connected to these addresses, loopback and private ones included (the user's).
    pub resolve: BTreeMap<String, IpAddr>,
    /// The user's own proxy (their `HTTPS_PROXY`), which carries our connections out; never
    /// told to the run.
    pub upstream: Option<Upstream>,
    pub limits: Limits,
}

/// What the proxy saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    pub contacted: Vec<Contacted>,
    pub refused: Vec<Refused>,
}

/// A host the run reached, and one it was refused: as the run record keeps them.
pub use gs_model::{Contacted, Refused};

/// The most refusals listed (a hostile run could make millions).
const MAX_REFUSED: usize = 100;

/// The state the connections share.
struct Shared {
    policy: Policy,
    traffic: Mutex<Traffic>,
    active: AtomicUsize,
    stopping: AtomicBool,
    /// Every open socket, to shut down on stop.
    open: Mutex<BTreeMap<u64, TcpStream>>,
    next: AtomicUsize,
}

impl Shared {
    fn refuse(&self, host: &str, port: u16, reason: &str) {
        let mut t = self.traffic.lock().unwrap_or_else(|p| p.into_inner());
        let r = Refused {
            host: host.to_string(),
            port,
            reason: reason.to_string(),
        };
        if t.refused.len() < MAX_REFUSED && !t.refused.contains(&r) {
            t.refused.push(r);
        }
    }

    fn count(&self, host: &str, port: u16, requests: u64, bytes_in: u64, bytes_out: u64) {
        let mut t = self.traffic.lock().unwrap_or_else(|p| p.into_inner());
        let i = match t
            .contacted
            .iter()
            .position(|c| c.host == host && c.port == port)
        {
            Some(i) => i,
            None => {
                t.contacted.push(Contacted {
                    host: host.to_string(),
                    port,
                    ..Contacted::default()
                });
                t.contacted.len() - 1
            }
        };
        let c = &mut t.contacted[i];
        c.requests += requests;
        c.bytes_in += bytes_in;
        c.bytes_out += bytes_out;
    }

    /// Keep a clone of `s` to shut down on stop; the key to forget it by.
    fn track(&self, s: &TcpStream) -> Option<u64> {
        let c = s.try_clone().ok()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed) as u64;
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, c);
        Some(id)
    }

    fn forget(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        }
    }
}

/// A proxy serving one run.
pub struct Proxy {
    shared: Arc<Shared>,
    listener: TcpListener,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Serve what comes on `listener` (bound and listening) until [`Proxy::stop`].
    pub fn serve(listener: TcpListener, policy: Policy) -> Proxy {
        let shared = Arc::new(Shared {
            policy,
            traffic: Mutex::new(Traffic::default()),
            active: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            open: Mutex::new(BTreeMap::new()),
            next: AtomicUsize::new(0),
        });
        let accept = listener.try_clone().ok().map(|l| {
            let shared = shared.clone();
            std::thread::spawn(move || accept_loop(l, shared))
        });
        Proxy {
            shared,
            listener,
            accept,
        }
    }

    /// Stop: no more connections, those open are cut; what was seen.
    pub fn stop(mut self) -> Traffic {
        use std::os::fd::AsRawFd;
        self.shared.stopping.store(true, Ordering::SeqCst);
        // SAFETY: shutting down our own listening socket wakes the blocked accept (EINVAL).
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for s in self
            .shared
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        // The connections' threads end with their sockets; give them a moment to count.
        for _ in 0..100 {
            if self.shared.active.load(Ordering::SeqCst) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut t = self
            .shared
            .traffic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        t.contacted
            .sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
        t
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut client) = client else {
            // EINVAL after the shutdown; a transient error (EMFILE) waits a little.
            if shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        if shared.active.fetch_add(1, Ordering::SeqCst) >= shared.policy.limits.connections {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let _ = respond(
                &mut client,
                503,
                "too many connections through the proxy at once",
            );
            continue;
        }
        let shared = shared.clone();
        std::thread::spawn(move || {
            let id = shared.track(&client);
            handle(client, &shared);
            shared.forget(id);
            shared.active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

fn respond(client: &mut TcpStream, code: u16, why: &str) -> std::io::Result<()> {
    use std::io::Write;
    let text = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let body = format!("git-sandbox proxy: {why}\n");
    // One write: a client that reads the status line once gets all of it.
    let whole = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(whole.as_bytes())
}

/// One client connection: its request, the policy, the origin, the relay.
fn handle(mut client: TcpStream, shared: &Shared) {
    let limits = &shared.policy.limits;
    let _ = client.set_read_timeout(Some(limits.head));
    let req = match request::read(&mut client) {
        Ok(r) => r,
        Err(why) => {
            shared.refuse("", 0, &why);
            let _ = respond(&mut client, 400, &why);
            return;
        }
    };
    let (host, port) = match &req.target {
        request::Target::Connect { host, port } | request::Target::Http { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    let refuse = |client: &mut TcpStream, code: u16, why: String| {
        shared.refuse(&host, port, &why);
        let _ = respond(client, code, &format!("{host}:{port}: {why}"));
    };
    if let Some(why) = not_allowed(&shared.policy, &host, port) {
        return refuse(&mut client, 403, why);
    }
    // A tunnel to a web port carries anything, a request for another site at the same address
    // too: port 80 takes requests, not tunnels (unless the user maps the name to an address).
    if matches!(req.target, request::Target::Connect { .. })
        && port == 80
        && !shared.policy.resolve.contains_key(&host)
    {
        return refuse(
            &mut client,
            403,
            "a tunnel to port 80: send plain HTTP requests to the proxy instead".into(),
        );
    }
    let origin = match origin(&shared.policy, &host, port) {
        Ok(o) => o,
        Err((code, why)) => return refuse(&mut client, code, why),
    };
    let origin_id = shared.track(&origin);
    let mut up_limit = None;
    let first = match req.target {
        request::Target::Http { head, body, .. } => {
            // The head and its body, no more (see `Target::Http::body`).
            let now = (body as usize).min(req.rest.len());
            let mut first = head;
            first.extend_from_slice(&req.rest[..now]);
            up_limit = Some(body - now as u64);
            first
        }
        request::Target::Connect { .. } => {
            use std::io::Write;
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                shared.forget(origin_id);
                return;
            }
            let mut first = req.rest;
            if port == 443 {
                if let Err(why) = check_hello(&mut client, &mut first, &host, limits.head) {
                    shared.forget(origin_id);
                    shared.refuse(&host, port, &why);
                    return;
                }
            }
            first
        }
    };
    let (bytes_out, bytes_in) = relay::relay(client, origin, &first, up_limit, limits.idle);
    shared.forget(origin_id);
    shared.count(&host, port, 1, bytes_in, bytes_out);
}

/// Why the policy refuses `host:port`, if it does.
fn not_allowed(policy: &Policy, host: &str, port: u16) -> Option<String> {
    match &policy.allow {
        Some(list) if !list.iter().any(|p| p.matches(host, port)) => {
            Some("not in [network] allow".into())
        }
        None if port != 80 && port != 443 => Some(
            "only ports 80 and 443 are open to any host; name the port in [network] allow".into(),
        ),
        _ if host.parse::<IpAddr>().is_ok()
            && !policy.allow.iter().flatten().any(|p| p.matches(host, port)) =>
        {
            Some("an IP address that [network] allow does not list".into())
        }
        _ => None,
    }
}

/// A connection to `host:port`: straight to its address, or through the user's own proxy (a
/// name it maps, or that resolves here, still has its address checked); the status and reason
/// to refuse with.
fn origin(policy: &Policy, host: &str, port: u16) -> Result<TcpStream, (u16, String)> {
    let within = policy.limits.connect;
    let checked = addresses(policy, host, port);
    if let Some(up) = &policy.upstream {
        let mapped = policy.resolve.contains_key(host);
        match checked {
            // Refused here (private, loopback): refused, whoever would carry it.
            Err(why) if !why.starts_with("cannot resolve") => return Err((403, why)),
            // The user's own mapping is reached straight.
            Ok(_) if mapped => {}
            // Public, or not resolvable here: the user's proxy carries it.
            _ => return upstream::tunnel(up, host, port, within).map_err(|e| (502, e)),
        }
    }
    let addrs = checked.map_err(|why| (403, why))?;
    addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, within).ok())
        .ok_or((502, "the origin could not be reached".into()))
}

/// Where to connect for `host`: the user's mapping, else its public addresses.
fn addresses(policy: &Policy, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    if let Some(ip) = policy.resolve.get(host) {
        return Ok(vec![SocketAddr::new(*ip, port)]);
    }
    // An address the user's list names (the policy let it through only then) is taken as is.
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let all: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve it ({e})"))?
        .collect();
    let public: Vec<SocketAddr> = all.iter().copied().filter(|a| public(a.ip())).collect();
    match (public.is_empty(), all.first()) {
        (false, _) => Ok(public),
        (true, Some(a)) => Err(format!(
            "it resolves to {} (loopback, private or link-local), which a run may not reach; map it in your [network] resolve if you mean it",
            a.ip()
        )),
        (true, None) => Err("it resolves to no address".into()),
    }
}

/// Whether an address is on the public internet: not loopback, private, link-local, CGNAT,
/// unspecified, multicast or broadcast, in either family or IPv4-mapped.
pub fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            // IPv4 inside IPv6: compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) forms.
            let embedded = |v6: &std::net::Ipv6Addr| {
                let o = v6.octets();
                std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15])
            };
            if (s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified())
                || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
            {
                return public(IpAddr::V4(embedded(&v6)));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// Read the tunnel's first TLS record into `first` and require its server name to be `host`.
fn check_hello(
    client: &mut TcpStream,
    first: &mut Vec<u8>,
    host: &str,
    within: Duration,
) -> Result<(), String> {
    use std::io::Read;
    let _ = client.set_read_timeout(Some(within));
    let mut chunk = [0u8; 4096];
    loop {
        let want = tls::record_len(first).unwrap_or(5);
        if first.len() >= want || first.len() > 16 * 1024 + 5 {
            break;
        }
        if first.first().is_some_and(|b| *b != 0x16) {
            break;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => first.extend_from_slice(&chunk[..n]),
        }
    }
    match tls::client_hello(first) {
        tls::Hello::Named(n) if n == host => Ok(()),
        tls::Hello::Named(n) => Err(format!(
            "TLS server name {n} is not {host}, the host the tunnel was opened to"
        )),
        tls::Hello::Unnamed => Err("a TLS ClientHello without a server name".into()),
        tls::Hello::NotTls => Err("not TLS on port 443".into()),
        tls::Hello::Malformed => Err("a malformed TLS ClientHello".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses_are_told_from_the_rest() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
        ] {
            assert!(!public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["151.101.0.223", "2a04:4e42::223", "::ffff:151.101.0.223"] {
            assert!(public(ip.parse().unwrap()), "{ip}");
        }
    }
}
