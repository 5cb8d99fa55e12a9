//! `[environment]`: the OCI image a commit's runs use as their root (`image`), the registries
//! the user lets images come from (`registries`, `insecure_registries`: the user's config only)
//! and how large an image may be (`image_mb`: a repository may only lower it).

use super::de::{de_relative_path, hinted};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentFile {
    /// `[registry/]name[:tag][@sha256:…]`; an empty string: the host's root (no image).
    #[serde(default, deserialize_with = "de_image")]
    pub image: Option<String>,
    /// User config only: [`super::parse_repository_file`] refuses it.
    #[serde(default, deserialize_with = "de_registries")]
    pub registries: Option<Vec<String>>,
    /// User config only, like `registries`.
    #[serde(default, deserialize_with = "de_registries")]
    pub insecure_registries: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_image_mb")]
    pub image_mb: Option<u64>,
    /// A devcontainer.json in the commit's tree (see [`super::devcontainer`]).
    #[serde(default, deserialize_with = "de_relative_path")]
    pub devcontainer: Option<String>,
    /// A Dockerfile in the commit's tree, built (its subset) into the runs' root.
    #[serde(default, deserialize_with = "de_relative_path")]
    pub dockerfile: Option<String>,
}

/// The resolved `[environment]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentConfig {
    /// The image the runs use as their root (`None`: the host's own root, read-only).
    pub image: Option<String>,
    pub registries: Vec<String>,
    pub insecure_registries: Vec<String>,
    /// The most an image may hold, pulled and unpacked alike, in MiB.
    pub image_mb: u64,
    /// The devcontainer.json the image, variables and setup come from (a path in the tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devcontainer: Option<String>,
    /// The Dockerfile the runs' root is built from (a path in the tree; its directory is not
    /// the context: the context is the tree's root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
    /// Variables the environment sets (a devcontainer's `containerEnv`): over the image's, under
    /// the sandbox's own. Part of the result key when set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The user a devcontainer names (`remoteUser`): recorded, never honoured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_user: Option<String>,
    /// A devcontainer's `build.args`: the values of the Dockerfile's `ARG`s of those names.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub build_args: BTreeMap<String, String>,
}

/// `image_mb` when unset.
pub const DEFAULT_IMAGE_MB: u64 = 4096;

impl Default for EnvironmentConfig {
    fn default() -> Self {
        EnvironmentConfig {
            image: None,
            registries: gs_image::DEFAULT_REGISTRIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            insecure_registries: Vec::new(),
            image_mb: DEFAULT_IMAGE_MB,
            devcontainer: None,
            dockerfile: None,
            env: BTreeMap::new(),
            remote_user: None,
            build_args: BTreeMap::new(),
        }
    }
}

impl EnvironmentFile {
    pub(super) fn apply(&self, c: &mut EnvironmentConfig) {
        if let Some(i) = &self.image {
            c.image = Some(i.clone()).filter(|s| !s.is_empty());
        }
        if let Some(r) = &self.registries {
            c.registries = r.clone();
        }
        if let Some(r) = &self.insecure_registries {
            c.insecure_registries = r.clone();
        }
        if let Some(m) = self.image_mb {
            c.image_mb = m;
        }
        if let Some(d) = &self.devcontainer {
            c.devcontainer = Some(d.clone());
        }
        if let Some(d) = &self.dockerfile {
            c.dockerfile = Some(d.clone());
        }
    }
}

/// What a committed file may change of the user's `policy`: the image, and a lower `image_mb`.
pub(super) fn narrow(policy: &EnvironmentConfig, asked: &EnvironmentConfig) -> EnvironmentConfig {
    EnvironmentConfig {
        image: asked.image.clone(),
        registries: policy.registries.clone(),
        insecure_registries: policy.insecure_registries.clone(),
        image_mb: asked.image_mb.min(policy.image_mb),
        devcontainer: asked.devcontainer.clone(),
        dockerfile: asked.dockerfile.clone(),
        env: BTreeMap::new(),
        remote_user: None,
        build_args: BTreeMap::new(),
    }
}

fn de_image<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(Some(s));
    }
    match gs_image::Reference::parse(&s) {
        Ok(_) => Ok(Some(s)),
        // The parser's message ends with how a reference is written.
        Err(e) => Err(match e.split_once("; write ") {
            Some((problem, fix)) => hinted(
                problem,
                format!("write {fix} (\"\" for the host's own root)"),
            ),
            None => serde::de::Error::custom(e),
        }),
    }
}

fn de_registries<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let list = Vec::<String>::deserialize(d)?;
    for s in &list {
        if !is_registry(s) {
            return Err(hinted(
                format!("{s:?} is not a registry host"),
                "name each registry by its host and, when not 443, its port, like \"ghcr.io\" or \"127.0.0.1:5000\"",
            ));
        }
    }
    Ok(Some(list))
}

fn de_image_mb<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(hinted(
            "must be at least 1",
            "write the most MiB an image may hold, like 4096",
        )),
        n => Ok(Some(n)),
    }
}

/// Whether `s` names a registry as a reference does: a host name with a dot or a port, or
/// `localhost`.
fn is_registry(s: &str) -> bool {
    gs_image::Reference::parse(&format!("{s}/x")).is_ok_and(|r| r.registry == s)
}

#[cfg(test)]
mod tests {
    use super::is_registry;

    #[test]
    fn a_registry_is_a_host_with_a_dot_or_a_port() {
        assert!(
            is_registry("ghcr.io") && is_registry("127.0.0.1:5000") && is_registry("localhost")
        );
        assert!(!is_registry("") && !is_registry("a/b") && !is_registry("plainname"));
    }
}
