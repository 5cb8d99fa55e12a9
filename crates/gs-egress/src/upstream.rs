//! The user's own proxy as the upstream of ours: where the machine reaches the internet only
//! through a proxy (`HTTPS_PROXY` in the environment of the process that runs git-sandbox), each
//! connection the policy allows is a `CONNECT` tunnel through it. The run never sees it.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A proxy to tunnel through: `http://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub host: String,
    pub port: u16,
}

impl Upstream {
    /// From a proxy URL as `HTTPS_PROXY` holds one (`http://host:port`, a trailing `/` allowed;
    /// no credentials); the error names what is wrong.
    pub fn parse(url: &str) -> Result<Upstream, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("the proxy {url:?} is not an http:// URL"))?;
        let rest = rest.trim_end_matches('/');
        if rest.contains('@') {
            return Err(format!(
                "the proxy {url:?} holds credentials, which git-sandbox does not pass on"
            ));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("the proxy {url:?} names no port"))?;
        let port = super::pattern::port(port)?;
        if host.is_empty() {
            return Err(format!("the proxy {url:?} names no host"));
        }
        Ok(Upstream {
            host: host.trim_matches(['[', ']']).to_string(),
            port,
        })
    }

    /// The user's proxy from an environment (`HTTPS_PROXY`, then `https_proxy`, `HTTP_PROXY`,
    /// `http_proxy`): `None` when none is set or it cannot be used.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Option<Upstream> {
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|k| get(k).filter(|v| !v.trim().is_empty()))
            .and_then(|v| Upstream::parse(v.trim()).ok())
    }
}

/// A tunnel to `host:port` through `up`.
pub fn tunnel(up: &Upstream, host: &str, port: u16, within: Duration) -> Result<TcpStream, String> {
    let addr = (up.host.as_str(), up.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("your proxy {}:{} cannot be resolved", up.host, up.port))?;
    let mut s = TcpStream::connect_timeout(&addr, within)
        .map_err(|e| format!("your proxy {}:{} cannot be reached: {e}", up.host, up.port))?;
    let _ = s.set_read_timeout(Some(within));
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .map_err(|e| format!("your proxy: {e}"))?;
    // Its answer's head, byte by byte: what follows it is the origin's.
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || s.read(&mut b).map_err(|e| format!("your proxy: {e}"))? == 0 {
            return Err("your proxy closed the tunnel before answering".into());
        }
        head.push(b[0]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or("");
    let ok = line
        .split(' ')
        .nth(1)
        .is_some_and(|code| code.starts_with('2') && code.len() == 3);
    if !ok {
        return Err(format!("your proxy refused the tunnel: {line}"));
    }
    let _ = s.set_read_timeout(None);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_url_is_read_or_refused_with_the_reason() {
        assert_eq!(
            Upstream::parse("http://proxy.corp:3128/"),
            Ok(Upstream {
                host: "proxy.corp".into(),
                port: 3128
            })
        );
        for (bad, says) in [
            ("https://p:1", "not an http://"),
            ("http://u:p@p:1", "credentials"),
            ("http://p", "no port"),
            ("http://p:0", "not a port"),
        ] {
            assert!(Upstream::parse(bad).unwrap_err().contains(says), "{bad}");
        }
        let env = |k: &str| (k == "https_proxy").then(|| "http://127.0.0.1:8080".to_string());
        assert_eq!(Upstream::from_env(env).map(|u| u.port), Some(8080));
    }
}
