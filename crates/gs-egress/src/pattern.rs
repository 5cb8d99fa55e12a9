//! The hosts a policy names, and the host names a client asks for. A pattern is a host name
//! (`pypi.org`), `*.` and a domain (its subdomains, never the domain itself), or an IP literal
//! (itself alone), with `:PORT` for that one port (else ports 80 and 443). Names are ASCII
//! (punycode for the rest), compared in lower case; a trailing dot, an empty or over-long label,
//! or any other character is refused, not guessed at.

use std::fmt;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Name(String),
    Subdomains(String),
    Ip(IpAddr),
}

/// One entry of an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: Host,
    port: Option<u16>,
}

/// A host name as a client or a config wrote it, checked and in lower case.
pub fn name(s: &str) -> Result<String, String> {
    if !s.is_ascii() {
        return Err(format!(
            "the host name {s:?} is not ASCII: write its punycode (xn--) form"
        ));
    }
    let lower = s.to_ascii_lowercase();
    if lower.is_empty() {
        return Err("an empty host name".into());
    }
    if lower.ends_with('.') {
        return Err(format!("the host name {s:?} ends with a dot"));
    }
    if lower.len() > 253 {
        return Err(format!("the host name {s:?} is longer than 253 characters"));
    }
    // A last label of digits (or hex) is an address to the system's resolver (`127.1`,
    // `0x7f.1`): never a name, so never a way around the rule on addresses.
    let last = lower.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return Err(format!(
            "{s:?} is a numeric address in disguise, not a host name"
        ));
    }
    for label in lower.split('.') {
        let bad = label.is_empty()
            || label.len() > 63
            || label.starts_with('-')
            || label.ends_with('-')
            || !label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if bad {
            return Err(format!("{s:?} is not a valid host name"));
        }
    }
    Ok(lower)
}

/// A port as written: 1 to 65535.
pub fn port(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(format!("{s:?} is not a port (1 to 65535)")),
    }
}

/// `host:port`, `[v6]:port`, or a host alone; the host checked, the port if written.
pub fn split_authority(s: &str) -> Result<(String, Option<u16>), String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: an IPv6 address without its closing ]"))?;
        let ip: std::net::Ipv6Addr = ip
            .parse()
            .map_err(|_| format!("{s:?}: {ip:?} is not an IPv6 address"))?;
        let p = match after {
            "" => None,
            p => Some(port(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{s:?}: junk after ]"))?,
            )?),
        };
        return Ok((ip.to_string(), p));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Ok((host(h)?, Some(port(p)?))),
        None => Ok((host(s)?, None)),
    }
}

/// A host as a client names it: an IPv4 literal as written, else a checked name.
fn host(s: &str) -> Result<String, String> {
    match s.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => Ok(ip.to_string()),
        Err(_) => name(s),
    }
}

impl HostPattern {
    /// Parse one pattern; the error names what is wrong with it.
    pub fn parse(s: &str) -> Result<HostPattern, String> {
        let (wild, rest) = match s.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (h, port) = split_authority(rest)?;
        let host = match (wild, h.parse::<IpAddr>()) {
            (false, Ok(ip)) => Host::Ip(ip),
            (true, Ok(_)) => {
                return Err(format!("{s:?}: `*.` goes before a domain, not an address"))
            }
            (true, Err(_)) => Host::Subdomains(h),
            (false, Err(_)) => Host::Name(h),
        };
        Ok(HostPattern { host, port })
    }

    /// A name alone: no `*.`, no address, no port (what `resolve` maps).
    pub fn is_plain_name(&self) -> bool {
        matches!(self.host, Host::Name(_)) && self.port.is_none()
    }

    /// Whether it allows `host` (a checked name or an address, as [`split_authority`] gives
    /// it) on `port`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        port_ok
            && match &self.host {
                Host::Name(n) => n == host,
                Host::Subdomains(d) => host
                    .strip_suffix(d.as_str())
                    .is_some_and(|r| r.ends_with('.') && r.len() > 1),
                Host::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
            }
    }

    /// Whether everything `other` allows, this allows too (a committed file's pattern is kept
    /// only when one of the user's covers it).
    pub fn covers(&self, other: &HostPattern) -> bool {
        let port_ok = match (self.port, other.port) {
            (None, None) => true,
            (None, Some(p)) => p == 80 || p == 443,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        port_ok
            && match (&self.host, &other.host) {
                (Host::Name(a), Host::Name(b)) => a == b,
                (Host::Ip(a), Host::Ip(b)) => a == b,
                (Host::Subdomains(d), Host::Name(n)) => n
                    .strip_suffix(d.as_str())
                    .is_some_and(|r| r.ends_with('.') && r.len() > 1),
                (Host::Subdomains(d), Host::Subdomains(e)) => {
                    e == d || e.strip_suffix(d.as_str()).is_some_and(|r| r.ends_with('.'))
                }
                _ => false,
            }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => f.write_str(n)?,
            Host::Subdomains(d) => write!(f, "*.{d}")?,
            Host::Ip(IpAddr::V6(ip)) if self.port.is_some() => write!(f, "[{ip}]")?,
            Host::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap()
    }

    #[test]
    fn patterns_match_names_subdomains_and_ports() {
        assert!(p("pypi.org").matches("pypi.org", 443));
        assert!(p("pypi.org").matches("pypi.org", 80));
        assert!(!p("pypi.org").matches("pypi.org", 8080));
        assert!(!p("pypi.org").matches("evilpypi.org", 443));
        assert!(p("*.pythonhosted.org").matches("files.pythonhosted.org", 443));
        assert!(!p("*.pythonhosted.org").matches("pythonhosted.org", 443));
        assert!(!p("*.pythonhosted.org").matches("xpythonhosted.org", 443));
        assert!(p("registry.npmjs.org:8443").matches("registry.npmjs.org", 8443));
        assert!(!p("registry.npmjs.org:8443").matches("registry.npmjs.org", 443));
        assert!(p("10.0.0.5").matches("10.0.0.5", 443));
        assert!(!p("10.0.0.5").matches("10.0.0.6", 443));
        assert_eq!(p("PyPI.org:443").to_string(), "pypi.org:443");
        assert_eq!(p("[::1]:80").to_string(), "[::1]:80");
    }

    #[test]
    fn bad_names_are_refused_not_guessed_at() {
        for (bad, says) in [
            ("pypi.org.", "ends with a dot"),
            ("bücher.example", "not ASCII"),
            ("*", "not a valid host name"),
            ("a..b", "not a valid host name"),
            ("-a.b", "not a valid host name"),
            ("a_b.c", "not a valid host name"),
            ("pypi.org:0", "not a port"),
            ("pypi.org:99999", "not a port"),
            ("pypi.org:+80", "not a port"),
            ("[::1", "closing ]"),
            ("", "empty host name"),
            ("127.1", "numeric address in disguise"),
            ("0x7f000001", "numeric address in disguise"),
        ] {
            let e = HostPattern::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(
            name(&"a".repeat(64)).unwrap_err(),
            format!("{:?} is not a valid host name", "a".repeat(64))
        );
    }

    #[test]
    fn a_pattern_covers_what_it_allows_and_no_more() {
        assert!(p("pypi.org").covers(&p("pypi.org")));
        assert!(p("pypi.org").covers(&p("pypi.org:443")));
        assert!(!p("pypi.org:443").covers(&p("pypi.org")));
        assert!(!p("pypi.org").covers(&p("pypi.org:22")));
        assert!(p("*.example.org").covers(&p("a.example.org")));
        assert!(p("*.example.org").covers(&p("*.a.example.org")));
        assert!(!p("*.example.org").covers(&p("example.org")));
        assert!(!p("a.example.org").covers(&p("*.example.org")));
        assert!(!p("*.org").covers(&p("10.0.0.1")));
    }
}
