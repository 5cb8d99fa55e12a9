//! A client's request head, read as hostile: bounded in size, lines and time; a request line of
//! printable ASCII; no folded or nameless header lines; framing that cannot be read two ways
//! (one `Content-Length` at most, never with `Transfer-Encoding`, which may only be `chunked`).
//! The proxy answers `CONNECT host:port` and absolute-form `http://` requests; anything else is
//! refused with the reason.

use std::io::Read;

/// The most a request head may hold, and the most header lines.
pub const MAX_HEAD: usize = 32 * 1024;
pub const MAX_HEADERS: usize = 100;

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`: a tunnel.
    Connect { host: String, port: u16 },
    /// `GET http://host[:port]/path`: forwarded in origin-form.
    Http {
        host: String,
        port: u16,
        /// The body's length (`Content-Length`; none: 0). Only that many bytes after the head
        /// reach the origin: what a client sends past them (a second request, perhaps for
        /// another site at the same address) never does.
        body: u64,
        /// The request line in origin-form, and the headers to send on (hop-by-hop ones gone,
        /// `Host` the target's, `Connection: close`), ending with the empty line.
        head: Vec<u8>,
    },
}

/// A request head and what the client sent after it.
#[derive(Debug)]
pub struct Request {
    pub target: Target,
    pub rest: Vec<u8>,
}

/// Read a head from `r` (its timeouts set by the caller); the error is the reason to refuse it.
pub fn read(r: &mut impl Read) -> Result<Request, String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("a request head over {MAX_HEAD} bytes"));
        }
        match r.read(&mut chunk) {
            Ok(0) => return Err("the client closed before its request ended".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("no whole request in time ({e})")),
        }
    };
    if end > MAX_HEAD {
        return Err(format!("a request head over {MAX_HEAD} bytes"));
    }
    let rest = buf[end + 4..].to_vec();
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "a request head that is not text")?;
    Ok(Request {
        target: parse(head)?,
        rest,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse(head: &str) -> Result<Target, String> {
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    if !line.bytes().all(|b| (0x21..0x7f).contains(&b) || b == b' ') {
        return Err("a request line with control or non-ASCII bytes".into());
    }
    let mut words = line.split(' ');
    let (method, target, version) = match (words.next(), words.next(), words.next(), words.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(format!("a malformed request line {line:?}")),
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!("an unknown HTTP version {version:?}"));
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    for l in lines {
        if l.starts_with(' ') || l.starts_with('\t') {
            return Err("a folded header line".into());
        }
        let (name, value) = l
            .split_once(':')
            .ok_or_else(|| format!("a header line without a name: {l:?}"))?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("a malformed header name {name:?}"));
        }
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(format!("control bytes in the header {name}"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
        if headers.len() > MAX_HEADERS {
            return Err(format!("more than {MAX_HEADERS} header lines"));
        }
    }
    framing(&headers)?;
    if method == "CONNECT" {
        let (host, port) = super::pattern::split_authority(target)?;
        let port = port.ok_or_else(|| format!("CONNECT {target} names no port"))?;
        return Ok(Target::Connect { host, port });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(if target.starts_with('/') {
            "a request for the proxy itself (origin-form): send it to the proxy in absolute-form, as HTTP_PROXY does".into()
        } else {
            format!("an unsupported request target {target:?} (http:// or CONNECT only)")
        });
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err("credentials in the request target".into());
    }
    let (host, port) = super::pattern::split_authority(authority)?;
    let port = port.unwrap_or(80);
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Ok(Target::Http {
        body: body_length(&headers)?,
        head: forwarded(method, &path, version, authority, &headers),
        host,
        port,
    })
}

/// Refuse framing two readers could read two ways (request smuggling).
fn framing(headers: &[(String, String)]) -> Result<(), String> {
    let count = |n: &str| {
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(n))
            .count()
    };
    let value = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    };
    if count("content-length") > 1 {
        return Err("two Content-Length headers".into());
    }
    if count("transfer-encoding") > 0 {
        if count("content-length") > 0 {
            return Err("Content-Length together with Transfer-Encoding".into());
        }
        if count("transfer-encoding") > 1 || value("transfer-encoding") != Some("chunked") {
            return Err("a Transfer-Encoding other than chunked".into());
        }
    }
    if let Some(v) = value("content-length") {
        if v.is_empty() || v.len() > 18 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("an invalid Content-Length {v:?}"));
        }
    }
    // Hop-by-hop headers are dropped on the way; one that names the framing would drop it.
    for (_, v) in headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
    {
        for named in v.split(',').map(str::trim) {
            if ["content-length", "transfer-encoding", "host"]
                .iter()
                .any(|h| named.eq_ignore_ascii_case(h))
            {
                return Err(format!("a Connection header naming {named}"));
            }
        }
    }
    Ok(())
}

/// The request body's length: its `Content-Length`, or 0; a chunked body is refused (its end
/// would have to be parsed to keep what follows it from the origin).
fn body_length(headers: &[(String, String)]) -> Result<u64, String> {
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Err("a chunked request body: send it with a Content-Length".into());
    }
    Ok(headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0))
}

/// The head to send on: origin-form, the target's `Host`, no hop-by-hop headers (those named
/// by `Connection` too), and `Connection: close` (one request per connection).
fn forwarded(
    method: &str,
    path: &str,
    version: &str,
    authority: &str,
    headers: &[(String, String)],
) -> Vec<u8> {
    let named: Vec<String> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    let hop = |k: &str| {
        let k = k.to_ascii_lowercase();
        matches!(
            k.as_str(),
            "connection"
                | "proxy-connection"
                | "proxy-authorization"
                | "keep-alive"
                | "host"
                | "te"
                | "upgrade"
        ) || named.contains(&k)
    };
    let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for (k, v) in headers.iter().filter(|(k, _)| !hop(k)) {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(text: &str) -> Result<Target, String> {
        read(&mut text.as_bytes()).map(|r| r.target)
    }

    #[test]
    fn connect_and_absolute_form_are_read_and_rewritten() {
        assert_eq!(
            req("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"),
            Ok(Target::Connect {
                host: "pypi.org".into(),
                port: 443
            })
        );
        let Ok(Target::Http {
            host, port, head, ..
        }) = req(
            "GET http://pkgs.test:8080/a?b HTTP/1.1\r\nHost: other\r\nProxy-Connection: keep-alive\r\nConnection: X-Drop\r\nX-Drop: 1\r\nAccept: */*\r\n\r\n",
        ) else {
            panic!()
        };
        assert_eq!((host.as_str(), port), ("pkgs.test", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: pkgs.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn ambiguous_or_malformed_requests_are_refused_with_the_reason() {
        for (text, says) in [
            ("GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", "two Content-Length"),
            ("GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "together with Transfer-Encoding"),
            ("GET http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "other than chunked"),
            ("GET http://a.test/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "folded"),
            ("GET http://a.test/ HTTP/1.1\r\nnocolon\r\n\r\n", "without a name"),
            ("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "origin-form"),
            ("GET https://a.test/ HTTP/1.1\r\n\r\n", "unsupported request target"),
            ("GET http://a.test./ HTTP/1.1\r\n\r\n", "ends with a dot"),
            ("GET http://bücher.test/ HTTP/1.1\r\n\r\n", "request line with control or non-ASCII"),
            ("GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", "credentials"),
            ("CONNECT a.test HTTP/1.1\r\n\r\n", "names no port"),
            ("CONNECT a.test:0 HTTP/1.1\r\n\r\n", "not a port"),
            ("GET http://a.test/ HTTP/2\r\n\r\n", "unknown HTTP version"),
            ("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "chunked request body"),
            ("GET http://a.test/ HTTP/1.1\r\nConnection: Content-Length\r\nContent-Length: 3\r\n\r\n", "Connection header naming Content-Length"),
            ("GET http://127.1/ HTTP/1.1\r\n\r\n", "numeric"),
            ("GET http://0x7f.1/ HTTP/1.1\r\n\r\n", "numeric"),
        ] {
            let e = req(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let flood = format!(
            "GET http://a.test/ HTTP/1.1\r\n{}\r\n",
            "X-A: b\r\n".repeat(101)
        );
        assert!(req(&flood)
            .unwrap_err()
            .contains("more than 100 header lines"));
        let big = format!(
            "GET http://a.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert!(req(&big).unwrap_err().contains("over 32768 bytes"));
        assert!(req("GET http://a.test/ HTTP/1.1\r\n")
            .unwrap_err()
            .contains("closed before"));
    }
}
