//! The OCI Distribution protocol, pull side: manifests (an index resolved to this host's
//! platform), blobs streamed into the store and verified against their digests as they come, and
//! the registry's auth — anonymous bearer tokens as Docker Hub, GHCR and Quay hand them out,
//! basic credentials from the user's `~/.docker/config.json` (never from a repository).

use crate::http::{Net, Response, Url};
use crate::reference::Reference;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;

/// Manifests and configs are small; anything larger is refused.
pub const MAX_DOCUMENT: u64 = 4 << 20;

pub const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub urls: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default)]
    pub variant: Option<String>,
}

/// An index or a manifest, told apart by what it holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
}

/// The image's config, as much of it as a run uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ImageConfig {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub config: Option<RunConfig>,
    pub rootfs: RootFs,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunConfig {
    #[serde(rename = "Env", default)]
    pub env: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", default)]
    pub working_dir: Option<String>,
    #[serde(rename = "User", default)]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RootFs {
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// This host's platform as OCI names it.
pub fn host_platform() -> (&'static str, &'static str) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    ("linux", arch)
}

/// One registry conversation: the token it handed out is kept for the next request.
pub struct Session<'a> {
    pub net: &'a Net,
    pub reference: &'a Reference,
    /// `Basic …` for this registry, from the user's Docker config.
    pub basic: Option<String>,
    /// Whether only a credential helper could have given credentials (not supported).
    pub helper: Option<String>,
    bearer: Option<String>,
    /// Requests made, redirects not counted.
    pub requests: u32,
}

impl<'a> Session<'a> {
    pub fn new(net: &'a Net, reference: &'a Reference, creds: Credentials) -> Session<'a> {
        Session {
            net,
            reference,
            basic: creds.basic,
            helper: creds.helper,
            bearer: None,
            requests: 0,
        }
    }

    fn base(&self) -> Result<Url, String> {
        let insecure = self.net.insecure.iter().any(|h| {
            h == self.reference.api_host()
                || h == crate::reference::host_of(self.reference.api_host())
        });
        let scheme = if insecure { "http" } else { "https" };
        Url::parse(&format!(
            "{scheme}://{}/v2/{}/",
            self.reference.api_host(),
            self.reference.repository
        ))
    }

    /// `GET` a path below `/v2/NAME/`, answering the registry's challenge once.
    fn get(&mut self, path: &str, accept: &[(&str, &str)]) -> Result<Response, String> {
        let base = self.base()?;
        let url = base.join(&format!("{}{path}", base.target))?;
        for attempt in 0..2 {
            let auth = self
                .bearer
                .as_ref()
                .map(|t| format!("Bearer {t}"))
                .or_else(|| self.basic.clone());
            self.requests += 1;
            let r = self.net.get(&url, accept, auth.as_deref())?;
            if r.status != 401 || attempt == 1 {
                return Ok(r);
            }
            let challenge = r.header("www-authenticate").unwrap_or("").to_string();
            self.answer(&challenge)?;
        }
        unreachable!("the loop returns on its second pass")
    }

    /// Get a token for the challenge (or use the basic credentials it asks for).
    fn answer(&mut self, challenge: &str) -> Result<(), String> {
        let who = &self.reference.registry;
        let Some(params) = challenge
            .strip_prefix("Bearer ")
            .or_else(|| challenge.strip_prefix("bearer "))
        else {
            if challenge.to_ascii_lowercase().starts_with("basic") && self.basic.is_some() {
                return Ok(()); // sent already: refused
            }
            return Err(self.denied());
        };
        let params = challenge_params(params);
        let realm = params
            .iter()
            .find(|(k, _)| k == "realm")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("{who} asked for a token without saying where to get one"))?;
        let mut query = Vec::new();
        if let Some((_, s)) = params.iter().find(|(k, _)| k == "service") {
            query.push(format!("service={}", encode(s)));
        }
        let scope = params
            .iter()
            .find(|(k, _)| k == "scope")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| format!("repository:{}:pull", self.reference.repository));
        query.push(format!("scope={}", encode(&scope)));
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = Url::parse(&format!("{realm}{sep}{}", query.join("&")))
            .map_err(|e| format!("{who}'s token realm: {e}"))?;
        self.requests += 1;
        let r = self.net.get(&url, &[], self.basic.as_deref())?;
        if r.status != 200 {
            return Err(if matches!(r.status, 401 | 403) {
                self.denied()
            } else {
                format!("{who}'s token service ({}) answered {}", url.host, r.status)
            });
        }
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let body = r.bytes(1 << 20, "the token")?;
        let t: Token = serde_json::from_slice(&body)
            .map_err(|e| format!("{who}'s token service sent no token: {e}"))?;
        let token = t
            .token
            .or(t.access_token)
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| format!("{who}'s token service sent no usable token"))?;
        self.bearer = Some(token);
        Ok(())
    }

    fn denied(&self) -> String {
        let who = &self.reference.registry;
        match &self.helper {
            Some(h) => format!(
                "{who} refused {} without credentials, and your Docker config keeps them in the credential helper docker-credential-{h}, which git-sandbox does not call; add an \"auths\" entry for {who} to ~/.docker/config.json (docker login --password-stdin writes one when no helper is set)",
                self.reference
            ),
            None => format!(
                "{who} refused {}: the image does not exist or needs credentials; check the name, or add an \"auths\" entry for {who} to ~/.docker/config.json",
                self.reference
            ),
        }
    }

    /// The manifest or index `reference` names (a tag or a digest), its bytes and digest.
    pub fn manifest(&mut self, reference: &str) -> Result<(Vec<u8>, String), String> {
        let r = self.get(&format!("manifests/{reference}"), &[("Accept", ACCEPT)])?;
        match r.status {
            200 => {}
            404 => {
                return Err(format!(
                    "{} has no image {}; check the name and tag",
                    self.reference.registry, self.reference
                ))
            }
            s => {
                return Err(format!(
                    "{} answered {s} for {}",
                    self.reference.registry, self.reference
                ))
            }
        }
        let told = r.header("docker-content-digest").map(str::to_string);
        let body = r.bytes(MAX_DOCUMENT, "the manifest")?;
        let digest = format!("sha256:{:x}", Sha256::digest(&body));
        if reference.starts_with("sha256:") && reference != digest {
            return Err(format!(
                "{} sent a manifest whose digest is {digest}, not the {reference} asked for; the image is refused",
                self.reference.registry
            ));
        }
        if let Some(t) = told.filter(|t| t.starts_with("sha256:") && *t != digest) {
            return Err(format!(
                "{} says the manifest is {t}, but its bytes are {digest}; the image is refused",
                self.reference.registry
            ));
        }
        Ok((body, digest))
    }

    /// Stream the blob `d` into `dest` (a new file), checking its size and digest as it comes.
    pub fn blob(&mut self, d: &Descriptor, dest: &Path) -> Result<(), String> {
        let mut r = self.get(&format!("blobs/{}", d.digest), &[])?;
        if r.status != 200 {
            return Err(format!(
                "{} answered {} for the blob {}",
                self.reference.registry, r.status, d.digest
            ));
        }
        let mut file =
            std::fs::File::create(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            let k = r.body().read(&mut buf).map_err(|e| {
                format!(
                    "reading the blob {} from {}: {e}",
                    d.digest, self.reference.registry
                )
            })?;
            if k == 0 {
                break;
            }
            n += k as u64;
            if n > d.size {
                return Err(format!("the blob {} is longer than the {} bytes its manifest says; the image is refused", d.digest, d.size));
            }
            hash.update(&buf[..k]);
            file.write_all(&buf[..k])
                .map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        let got = format!("sha256:{:x}", hash.finalize());
        if n != d.size || got != d.digest {
            return Err(format!(
                "the blob {} arrived as {n} bytes hashing to {got}; the image is refused",
                d.digest
            ));
        }
        file.sync_all()
            .map_err(|e| format!("{}: {e}", dest.display()))?;
        Ok(())
    }
}

/// What the user's Docker config says of a registry.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub basic: Option<String>,
    pub helper: Option<String>,
}

/// The credentials `~/.docker/config.json` (or `$DOCKER_CONFIG/config.json`) holds for `registry`.
pub fn docker_credentials(
    registry: &str,
    home: Option<&Path>,
    docker_config: Option<&Path>,
) -> Credentials {
    let path = match (docker_config, home) {
        (Some(d), _) => d.join("config.json"),
        (None, Some(h)) => h.join(".docker/config.json"),
        (None, None) => return Credentials::default(),
    };
    let Ok(text) = std::fs::read(&path) else {
        return Credentials::default();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return Credentials::default();
    };
    let keys: Vec<String> = if registry == crate::reference::DOCKER_HUB {
        vec![
            "https://index.docker.io/v1/".into(),
            "index.docker.io".into(),
            "docker.io".into(),
            "registry-1.docker.io".into(),
        ]
    } else {
        vec![registry.to_string(), format!("https://{registry}")]
    };
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    for k in &keys {
        let Some(a) = v.get("auths").and_then(|a| a.get(k)) else {
            continue;
        };
        if let Some(s) = a
            .get("auth")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
        {
            if b64.decode(s).is_ok_and(|d| d.contains(&b':')) {
                return Credentials {
                    basic: Some(format!("Basic {s}")),
                    helper: None,
                };
            }
        }
        if let (Some(u), Some(p)) = (
            a.get("username").and_then(|s| s.as_str()),
            a.get("password").and_then(|s| s.as_str()),
        ) {
            return Credentials {
                basic: Some(format!("Basic {}", b64.encode(format!("{u}:{p}")))),
                helper: None,
            };
        }
    }
    let helper = keys
        .iter()
        .find_map(|k| {
            v.get("credHelpers")
                .and_then(|h| h.get(k))
                .and_then(|s| s.as_str())
        })
        .or_else(|| v.get("credsStore").and_then(|s| s.as_str()))
        .map(str::to_string);
    Credentials {
        basic: None,
        helper,
    }
}

/// `key="value", key=value` pairs of a challenge.
fn challenge_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((k, after)) = rest.split_once('=') else {
            break;
        };
        let k = k.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (v, next) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(i) => (&q[..i], &q[i + 1..]),
                None => (q, ""),
            }
        } else {
            match after.find(',') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        };
        out.push((k, v.to_string()));
        rest = next.trim_start_matches([',', ' ']);
    }
    out
}

fn encode(s: &str) -> String {
    gs_util::percent_encode(s, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_read_as_docker_hub_writes_it() {
        let p = challenge_params(
            r#"realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull""#,
        );
        assert_eq!(
            p[0],
            ("realm".into(), "https://auth.docker.io/token".into())
        );
        assert_eq!(p[1].1, "registry.docker.io");
        assert_eq!(p[2].1, "repository:library/python:pull");
        assert_eq!(encode("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
    }

    #[test]
    fn credentials_come_from_the_docker_config_and_a_helper_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("config.json"),
            r#"{"auths":{"ghcr.io":{"auth":"dTpw"},"https://index.docker.io/v1/":{"username":"u","password":"p"}},"credHelpers":{"quay.io":"secretservice"}}"#,
        )
        .unwrap();
        let c = |r| docker_credentials(r, None, Some(d.path()));
        assert_eq!(c("ghcr.io").basic.as_deref(), Some("Basic dTpw"));
        assert_eq!(c("docker.io").basic.as_deref(), Some("Basic dTpw"));
        assert_eq!(c("quay.io").helper.as_deref(), Some("secretservice"));
        assert!(c("other.example").basic.is_none());
    }
}
