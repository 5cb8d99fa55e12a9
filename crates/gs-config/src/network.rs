//! `[network]`: the hosts a run may reach through the supervisor's proxy (`allow` for the tests,
//! `setup_allow` for the setup step), and the user's `resolve` table (names the proxy connects to
//! an address of the user's choosing, loopback and private ones included). A repository or an
//! experiment may only narrow the user's lists; `resolve` is the user's alone.

use super::de::hinted;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    #[serde(default, deserialize_with = "de_patterns")]
    pub allow: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_patterns")]
    pub setup_allow: Option<Vec<String>>,
    /// User config only: [`super::parse_repository_file`] refuses it.
    #[serde(default, deserialize_with = "de_resolve")]
    pub resolve: Option<BTreeMap<String, IpAddr>>,
    /// User config only: certificate authorities (PEM files) the run's TLS clients trust beside
    /// the system's (a company's TLS-inspecting proxy, an internal mirror).
    #[serde(default, deserialize_with = "de_ca_files")]
    pub ca_files: Option<Vec<String>>,
}

/// The resolved `[network]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetworkConfig {
    /// The hosts the tests may reach with `[limits] network = true`; `None`: any public host.
    pub allow: Option<Vec<String>>,
    /// The hosts the setup step may reach with `setup_network = true`; `None`: the registries
    /// of the setup's toolchains ([`SETUP_REGISTRIES`]).
    pub setup_allow: Option<Vec<String>>,
    pub resolve: BTreeMap<String, IpAddr>,
    pub ca_files: Vec<String>,
}

impl NetworkConfig {
    /// Whether anything was set (only then is it part of the result key).
    pub fn is_set(&self) -> bool {
        self.allow.is_some()
            || self.setup_allow.is_some()
            || !self.resolve.is_empty()
            || !self.ca_files.is_empty()
    }

    /// What the setup step may reach: `setup_allow`, else the built-in registries.
    pub fn setup_hosts(&self) -> Vec<String> {
        self.setup_allow
            .clone()
            .unwrap_or_else(|| SETUP_REGISTRIES.iter().map(|s| s.to_string()).collect())
    }
}

impl super::Config {
    /// The setup step's network as the keys of what it builds take it (a setup layer, a
    /// Dockerfile's `RUN`): none, the host's, or the proxy's hosts and the user's `resolve`.
    pub fn setup_network_key(&self) -> String {
        match (self.limits.setup_network, self.limits.network_host) {
            (false, _) => "false\0".into(),
            (true, true) => "true\0host\0".into(),
            (true, false) => format!(
                "true\0proxy\0{}\0{:?}\0",
                self.network.setup_hosts().join(","),
                self.network.resolve
            ),
        }
    }
}

/// What a setup step with `setup_network = true` and no `setup_allow` may reach: the package
/// registries of the toolchains it installs with (PyPI, npm, crates.io, the Go module proxy).
pub const SETUP_REGISTRIES: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "index.crates.io",
    "static.crates.io",
    "crates.io",
    "proxy.golang.org",
    "sum.golang.org",
];

fn de_patterns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let list = Vec::<String>::deserialize(d)?;
    let mut out = Vec::new();
    for s in list {
        let p = gs_egress::HostPattern::parse(&s).map_err(|e| {
            hinted::<D::Error>(
                e,
                "write a host name, \"*.\" and a domain for its subdomains, and \":PORT\" for one port (like \"pypi.org\", \"*.pythonhosted.org\", \"registry.npmjs.org:443\")",
            )
        })?;
        out.push(p.to_string());
    }
    Ok(Some(out))
}

fn de_resolve<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, IpAddr>>, D::Error> {
    let table = BTreeMap::<String, String>::deserialize(d)?;
    let mut out = BTreeMap::new();
    for (name, addr) in table {
        let host = gs_egress::HostPattern::parse(&name)
            .ok()
            .filter(|p| p.is_plain_name())
            .ok_or_else(|| {
                hinted::<D::Error>(
                    format!("{name:?} is not a host name"),
                    "map a plain host name to an address, like \"pypi.internal\" = \"10.0.0.5\"",
                )
            })?;
        let ip: IpAddr = addr.parse().map_err(|_| {
            hinted::<D::Error>(
                format!("{addr:?} (for {name:?}) is not an IP address"),
                "write an IPv4 or IPv6 address, like \"10.0.0.5\"",
            )
        })?;
        out.insert(host.to_string(), ip);
    }
    Ok(Some(out))
}

fn de_ca_files<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let list = Vec::<String>::deserialize(d)?;
    for s in &list {
        if !(s.starts_with('/') || s.starts_with("~/")) {
            return Err(hinted(
                format!("{s:?} is not an absolute path"),
                "name each PEM file by its absolute path or from your home, like \"~/certs/corp-ca.pem\"",
            ));
        }
    }
    Ok(Some(list))
}

/// The user's list narrowed by what a committed file asked for: each pattern it asked for that
/// one of the user's covers (`None` for the user: any public host, so all of them).
pub(super) fn narrow(
    policy: &Option<Vec<String>>,
    asked: &Option<Vec<String>>,
) -> Option<Vec<String>> {
    let Some(asked) = asked else {
        return policy.clone();
    };
    let Some(policy) = policy else {
        return Some(asked.clone());
    };
    let parse = |s: &String| gs_egress::HostPattern::parse(s).ok();
    let policy: Vec<gs_egress::HostPattern> = policy.iter().filter_map(parse).collect();
    Some(
        asked
            .iter()
            .filter(|a| parse(a).is_some_and(|a| policy.iter().any(|p| p.covers(&a))))
            .cloned()
            .collect(),
    )
}

/// `[limits] network`: `false`, `true` (through the supervisor's proxy), or `"host"` (the host's
/// own network namespace; the user's config only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    Off,
    Proxy,
    Host,
}

pub(super) fn de_network<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NetworkMode>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Text(String),
    }
    let fix = "write true (the hosts [network] allow names, through git-sandbox's proxy), false, or \"host\" (the host's own network, in your user config only)";
    match Raw::deserialize(d)
        .map_err(|_: D::Error| hinted::<D::Error>("not a network setting", fix))?
    {
        Raw::Bool(false) => Ok(Some(NetworkMode::Off)),
        Raw::Bool(true) => Ok(Some(NetworkMode::Proxy)),
        Raw::Text(t) if t == "host" => Ok(Some(NetworkMode::Host)),
        Raw::Text(t) => Err(hinted(format!("invalid network setting {t:?}"), fix)),
    }
}
