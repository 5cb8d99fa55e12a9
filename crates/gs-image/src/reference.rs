//! An image reference as users write it: `[registry/]name[:tag][@sha256:…]`, with Docker's
//! shorthand (`python:3.12-slim` is `docker.io/library/python:3.12-slim`).

use std::fmt;

/// A parsed, normalised reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// The registry as the user's allow list names it (`docker.io`, `ghcr.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// The repository within it (`library/python`).
    pub repository: String,
    /// The tag, when one was written or implied (`latest` when neither a tag nor a digest was).
    pub tag: Option<String>,
    /// `sha256:` and 64 hex digits, when pinned.
    pub digest: Option<String>,
}

/// Docker Hub's name for itself in references, and the host its API is served from.
pub const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_API: &str = "registry-1.docker.io";

impl Reference {
    /// Parse `text`, or say what is wrong with it and how a reference is written.
    pub fn parse(text: &str) -> Result<Reference, String> {
        let bad = |why: String| {
            Err(format!(
                "{text:?} is not an image reference: {why}; write [REGISTRY/]NAME[:TAG][@sha256:DIGEST], like \"python:3.12-slim\" or \"ghcr.io/owner/image@sha256:…\""
            ))
        };
        if text.is_empty() || text.len() > 512 {
            return bad("it is empty or longer than 512 characters".into());
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad("it holds a space or a control character".into());
        }
        let (rest, digest) = match text.split_once('@') {
            Some((r, d)) => (r, Some(d)),
            None => (text, None),
        };
        if let Some(d) = digest {
            if let Err(e) = check_digest(d) {
                return bad(e);
            }
        }
        // A tag follows the last ':' after the last '/'.
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !ok {
                return bad(format!(
                    "the tag {t:?} is not letters, digits, '_', '.' and '-' (up to 128)"
                ));
            }
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_ascii_lowercase(), path.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        let registry = if registry == "index.docker.io" || registry == DOCKER_HUB_API {
            DOCKER_HUB.to_string()
        } else {
            registry
        };
        if let Err(e) = check_registry(&registry) {
            return bad(e);
        }
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        if let Err(e) = check_repository(&repository) {
            return bad(e);
        }
        let tag = match (tag, digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, None) => Some("latest".to_string()),
            (None, Some(_)) => None,
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest: digest.map(str::to_string),
        })
    }

    /// The host (and port) the registry's API answers on.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// What a manifest request asks for: the digest when pinned, else the tag.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The registry's host name without a port, as the allow lists match it.
    pub fn registry_host(&self) -> &str {
        host_of(&self.registry)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// `registry[:port]` without its port (an IPv6 literal keeps its brackets).
pub fn host_of(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry.find(']').map_or(registry, |i| &registry[..=i]);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// Whether `d` is `sha256:` and 64 lower-case hex digits.
pub fn check_digest(d: &str) -> Result<(), String> {
    match d.strip_prefix("sha256:") {
        Some(h)
            if h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "the digest {d:?} is not \"sha256:\" and 64 lower-case hex digits"
        )),
    }
}

fn check_registry(r: &str) -> Result<(), String> {
    let (host, port) = if let Some(rest) = r.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, p)) => {
                if h.parse::<std::net::Ipv6Addr>().is_err() {
                    return Err(format!("the registry {r:?} is not a host name"));
                }
                (h, p.strip_prefix(':'))
            }
            None => return Err(format!("the registry {r:?} is not a host name")),
        }
    } else {
        match r.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (r, None),
        }
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (host.parse::<std::net::Ipv6Addr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }));
    if !host_ok {
        return Err(format!("the registry {r:?} is not a host name"));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("the registry {r:?} has no valid port"));
        }
    }
    Ok(())
}

fn check_repository(path: &str) -> Result<(), String> {
    let component_ok = |c: &str| {
        let b = c.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
            && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
            && b.iter().all(|&x| {
                x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, b'.' | b'_' | b'-')
            })
            && !c.contains("..")
    };
    if path.len() > 255 || !path.split('/').all(component_ok) {
        return Err(format!(
            "the name {path:?} is not lower-case letters, digits and separators ('.', '_', '-') between '/'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Reference {
        Reference::parse(s).unwrap()
    }

    #[test]
    fn docker_shorthand_names_docker_hub_and_its_library() {
        let r = p("python:3.12-slim");
        assert_eq!(r.to_string(), "docker.io/library/python:3.12-slim");
        assert_eq!(r.api_host(), "registry-1.docker.io");
        assert_eq!(p("busybox").to_string(), "docker.io/library/busybox:latest");
        assert_eq!(p("owner/app:1").to_string(), "docker.io/owner/app:1");
        assert_eq!(p("index.docker.io/owner/app").registry, "docker.io");
    }

    #[test]
    fn a_registry_is_a_first_part_with_a_dot_a_port_or_localhost() {
        let r = p("127.0.0.1:5000/tiny/box:v1");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("127.0.0.1:5000", "tiny/box")
        );
        assert_eq!(r.registry_host(), "127.0.0.1");
        assert_eq!(p("localhost/x").registry, "localhost");
        assert_eq!(p("ghcr.io/o/i").registry, "ghcr.io");
        assert_eq!(p("[::1]:5000/x:1").registry_host(), "[::1]");
    }

    #[test]
    fn a_digest_pins_and_a_tag_beside_it_is_kept() {
        let d = format!("sha256:{}", "a".repeat(64));
        let r = p(&format!("ghcr.io/o/i@{d}"));
        assert_eq!((r.tag.clone(), r.manifest_ref()), (None, d.as_str()));
        let r = p(&format!("ghcr.io/o/i:1.0@{d}"));
        assert_eq!(
            (r.tag.as_deref(), r.manifest_ref()),
            (Some("1.0"), d.as_str())
        );
    }

    #[test]
    fn bad_references_say_what_is_wrong_and_how_to_write_one() {
        for (bad, why) in [
            ("", "empty"),
            ("Python", "lower-case"),
            ("python:", "the tag"),
            ("python:-x", "the tag"),
            ("python@sha256:abc", "64 lower-case hex"),
            ("python@md5:abc", "64 lower-case hex"),
            ("a..b/c", "not a host name"),
            ("ex.com:99999/x", "no valid port"),
            ("x/../y", "lower-case"),
            ("py thon", "space"),
            ("ghcr.io/", "lower-case"),
        ] {
            let e = Reference::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("write [REGISTRY/]NAME"), "{e}");
        }
    }
}
