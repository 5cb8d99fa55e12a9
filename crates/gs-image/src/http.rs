//! The registry's HTTP: one request per connection, HTTP/1.1, TLS by rustls with the system's
//! roots. The registry is not trusted: it names the token realm and where blobs redirect, so
//! every connection — the first, a realm, each redirect — resolves its host here and connects
//! only to public addresses, and only over TLS, unless the user listed the host under
//! `[environment] insecure_registries` (a mirror on the user's network, a test's registry on
//! 127.0.0.1). Credentials go only to the host they were sent to: a redirect elsewhere drops them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Where the client may connect.
#[derive(Debug, Clone, Default)]
pub struct Net {
    /// Hosts (`host` or `host:port`) reached over plain HTTP and at any address.
    pub insecure: Vec<String>,
}

/// A URL as the registry protocol uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The path and query, from its `/`.
    pub target: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, String> {
        let bad = || format!("{text:?} is not an http(s) URL");
        let (tls, rest) = if let Some(r) = text.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = text.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad());
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') || authority.is_empty() {
            return Err(bad());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, p) = v6.split_once(']').ok_or_else(bad)?;
            (format!("[{h}]"), p.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| bad())?,
            None if tls => 443,
            None => 80,
        };
        if target.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad());
        }
        Ok(Url {
            tls,
            host: host.to_ascii_lowercase(),
            port,
            target,
        })
    }

    /// `Location`'s value, absolute or relative to this URL.
    pub fn join(&self, location: &str) -> Result<Url, String> {
        if location.starts_with("http://") || location.starts_with("https://") {
            return Url::parse(location);
        }
        if location.starts_with('/') && !location.starts_with("//") {
            return Url::parse(&format!("{}{location}", self.origin()));
        }
        Err(format!(
            "the registry redirected to {location:?}, which git-sandbox does not follow"
        ))
    }

    pub fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            format!("{scheme}://{}", self.host)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }

    fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.origin(), self.target)
    }
}

/// A response whose body is still on the wire.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub url: Url,
    body: Box<dyn Read + Send>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, up to `cap` bytes (more is an error naming `what`).
    pub fn bytes(mut self, cap: u64, what: &str) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        (&mut self.body)
            .take(cap + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("reading {what} from {}: {e}", self.url.host))?;
        if out.len() as u64 > cap {
            return Err(format!(
                "{what} from {} is larger than {cap} bytes",
                self.url.host
            ));
        }
        Ok(out)
    }

    pub fn body(&mut self) -> &mut (dyn Read + Send) {
        &mut *self.body
    }
}

const TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REDIRECTS: usize = 5;
const MAX_HEAD: usize = 64 * 1024;

impl Net {
    fn insecure(&self, url: &Url) -> bool {
        self.insecure
            .iter()
            .any(|h| *h == url.host || *h == url.authority())
    }

    /// `GET url` with `headers`, following redirects; `auth` goes only to `url`'s own host.
    pub fn get(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        auth: Option<&str>,
    ) -> Result<Response, String> {
        let mut at = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let auth = auth.filter(|_| at.host == url.host && at.port == url.port);
            let r = self.once(&at, headers, auth)?;
            if !matches!(r.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(r);
            }
            let to = r
                .header("location")
                .ok_or_else(|| format!("{} redirected without saying where", at.host))?
                .to_string();
            at = at.join(&to)?;
        }
        Err(format!(
            "{} redirected more than {MAX_REDIRECTS} times",
            url.host
        ))
    }

    fn once(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        auth: Option<&str>,
    ) -> Result<Response, String> {
        let insecure = self.insecure(url);
        if !url.tls && !insecure {
            return Err(format!(
                "{} is plain HTTP; git-sandbox reaches registries over HTTPS only, unless you list the host under [environment] insecure_registries in your user config",
                url.origin()
            ));
        }
        let stream = connect(url, insecure)?;
        let mut head = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: git-sandbox/{}\r\nConnection: close\r\n",
            url.target,
            if (url.tls && url.port == 443) || (!url.tls && url.port == 80) {
                url.host.clone()
            } else {
                url.authority()
            },
            env!("CARGO_PKG_VERSION")
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(a) = auth {
            head.push_str(&format!("Authorization: {a}\r\n"));
        }
        head.push_str("\r\n");
        let mut conn: Box<dyn ReadWrite> = if url.tls {
            let name = rustls::pki_types::ServerName::try_from(
                url.host.trim_matches(['[', ']']).to_string(),
            )
            .map_err(|_| format!("{} is not a name TLS can check", url.host))?;
            let client = rustls::ClientConnection::new(tls_config()?, name)
                .map_err(|e| format!("TLS to {}: {e}", url.host))?;
            Box::new(rustls::StreamOwned::new(client, stream))
        } else {
            Box::new(stream)
        };
        conn.write_all(head.as_bytes())
            .and_then(|_| conn.flush())
            .map_err(|e| format!("sending to {}: {e}", url.host))?;
        let mut reader = BufReader::with_capacity(1 << 16, conn);
        let (status, headers) =
            read_head(&mut reader).map_err(|e| format!("the answer of {}: {e}", url.host))?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let body: Box<dyn Read + Send> = if header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            Box::new(Chunked {
                inner: reader,
                left: 0,
                done: false,
            })
        } else if let Some(n) = header("content-length") {
            let n: u64 = n
                .trim()
                .parse()
                .map_err(|_| format!("{} sent a bad Content-Length", url.host))?;
            Box::new(reader.take(n))
        } else {
            Box::new(reader)
        };
        Ok(Response {
            status,
            headers,
            url: url.clone(),
            body,
        })
    }
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

/// How the errors of a host that could not be reached (not resolved, no connection) read, and
/// only those: a pull offline falls back on what it resolved last, a refusal never does.
const UNRESOLVED: &str = "cannot be resolved: ";
const CONNECTING: &str = "connecting to ";

/// Whether `error` (from a request) says the host could not be reached at all.
pub fn is_unreachable(error: &str) -> bool {
    error.contains(UNRESOLVED)
        || error.starts_with(CONNECTING)
        || error.contains(&format!(": {CONNECTING}"))
}

/// Connect to `url`'s host at an address it may have: public ones only, unless `insecure`.
fn connect(url: &Url, insecure: bool) -> Result<TcpStream, String> {
    let host = url.host.trim_matches(['[', ']']);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, url.port)],
        Err(_) => (host, url.port)
            .to_socket_addrs()
            .map_err(|e| format!("{host} {UNRESOLVED}{e}"))?
            .collect(),
    };
    let allowed: Vec<&SocketAddr> = addrs
        .iter()
        .filter(|a| insecure || gs_egress::public(a.ip()))
        .collect();
    if allowed.is_empty() {
        let shown: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        return Err(format!(
            "{host} resolves to {} (loopback, private or link-local), which git-sandbox does not connect to for a registry; list {} under [environment] insecure_registries in your user config if you mean it",
            shown.join(", "),
            url.authority()
        ));
    }
    let mut last = String::new();
    for a in allowed {
        match TcpStream::connect_timeout(a, Duration::from_secs(15)) {
            Ok(s) => {
                let _ = s.set_read_timeout(Some(TIMEOUT));
                let _ = s.set_write_timeout(Some(TIMEOUT));
                return Ok(s);
            }
            Err(e) => last = format!("{CONNECTING}{host} ({a}): {e}"),
        }
    }
    Err(last)
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(
                    "this machine has no trusted certificate authorities (install ca-certificates)"
                        .into(),
                );
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

fn read_head(reader: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>), String> {
    let mut raw = Vec::new();
    loop {
        let before = raw.len();
        let n = reader
            .read_until(b'\n', &mut raw)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection closed before the answer's head".into());
        }
        if raw.len() > MAX_HEAD {
            return Err("the answer's head is over 64 KiB".into());
        }
        if &raw[before..] == b"\r\n" || &raw[before..] == b"\n" {
            break;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(&raw) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err("not an HTTP answer".into()),
    }
    let status = resp.code.ok_or("no status")?;
    let headers = resp
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    Ok((status, headers))
}

/// A chunked body.
struct Chunked<R> {
    inner: R,
    left: u64,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let bad =
            || std::io::Error::new(std::io::ErrorKind::InvalidData, "a bad chunk in the answer");
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            (&mut self.inner).take(1024).read_line(&mut line)?;
            let size = line.trim().split(';').next().unwrap_or("");
            self.left = u64::from_str_radix(size, 16).map_err(|_| bad())?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(bad());
        }
        self.left -= n as u64;
        if self.left == 0 {
            let mut crlf = String::new();
            (&mut self.inner).take(2).read_line(&mut crlf)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_host_that_cannot_be_reached_is_unreachable() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let url = Url::parse(&format!("http://127.0.0.1:{port}/v2/")).unwrap();
        let refused = connect(&url, true).unwrap_err();
        assert!(is_unreachable(&refused), "{refused}");
        let nowhere = Url::parse("https://no-such-host.invalid/v2/").unwrap();
        let unresolved = connect(&nowhere, false).unwrap_err();
        assert!(is_unreachable(&unresolved), "{unresolved}");
        assert!(is_unreachable(&format!("ghcr.io's token realm: {refused}")));
        // A refusal is not: it must never fall back on an earlier digest.
        let private = connect(&url, false).unwrap_err();
        assert!(!is_unreachable(&private), "{private}");
    }

    #[test]
    fn urls_are_read_and_locations_joined() {
        let u = Url::parse("https://auth.docker.io/token?service=x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("auth.docker.io", 443, "/token?service=x")
        );
        let r = Url::parse("http://127.0.0.1:5000/v2/").unwrap();
        assert_eq!(
            r.join("/v2/x/blobs/y").unwrap().to_string(),
            "http://127.0.0.1:5000/v2/x/blobs/y"
        );
        assert_eq!(r.join("https://cdn.example/b").unwrap().host, "cdn.example");
        assert!(r.join("//evil/x").is_err());
        assert!(Url::parse("ftp://x").is_err());
        assert!(Url::parse("https://user@host/").is_err());
        assert_eq!(Url::parse("http://[::1]:5000/v2/").unwrap().host, "[::1]");
    }

    #[test]
    fn loopback_and_private_addresses_are_refused_unless_the_host_is_insecure() {
        let net = Net::default();
        for url in [
            "https://127.0.0.1:6379/",
            "https://10.0.0.1/",
            "https://169.254.169.254/",
            "https://[::1]/",
            "https://localhost:1/",
        ] {
            let e = net.get(&Url::parse(url).unwrap(), &[], None).err().unwrap();
            assert!(e.contains("insecure_registries"), "{url}: {e}");
        }
        let e = net
            .get(&Url::parse("http://example.com/").unwrap(), &[], None)
            .err()
            .unwrap();
        assert!(e.contains("plain HTTP"), "{e}");
    }
}
