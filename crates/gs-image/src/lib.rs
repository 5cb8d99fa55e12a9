//! git-sandbox's images: the environment a commit declares (`[environment] image`), pulled by
//! git-sandbox itself — no Docker daemon — from the registries the user allows, verified blob by
//! blob, stored once per home and unpacked once per layer as hostile input.
//!
//! - [`reference`]: `[registry/]name[:tag][@sha256:…]`, Docker's shorthand included.
//! - [`Registries`]: which registries the user allows; a reference to another is refused before
//!   any connection.
//! - [`http`]: the client — public addresses only (realms and redirects too), HTTPS only,
//!   unless the user calls a host insecure.
//! - [`registry`]: the Distribution protocol: tokens, manifests, an index resolved to this
//!   host's platform, blobs.
//! - [`store`]: the content store, pulls, `gc`.
//! - [`unpack`] and [`isolate`]: a layer unpacked without following anything it names, as
//!   uid 0 of a user namespace mapped onto unprivileged host uids.
//! - [`rootfs`]: a path looked up in an image's merged layers.

pub mod buildrun;
pub mod dockerfile;
pub mod export;
pub mod http;
pub mod isolate;
pub mod layer;
pub mod reference;
pub mod registry;
pub mod rootfs;
pub mod store;
pub mod unpack;

pub use reference::Reference;
pub use store::{Image, PullOptions, Pulled, Store};

/// The registries the user allows, and those reached over plain HTTP.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    pub allowed: Vec<String>,
    pub insecure: Vec<String>,
}

/// Registries allowed when the user's config names none.
pub const DEFAULT_REGISTRIES: &[&str] = &["docker.io", "ghcr.io", "quay.io"];

impl Registries {
    fn lists(list: &[String], r: &Reference) -> bool {
        list.iter().any(|h| {
            h.eq_ignore_ascii_case(&r.registry) || h.eq_ignore_ascii_case(r.registry_host())
        })
    }

    /// Whether `r` may be pulled; a refusal names the key that would allow it. Checked before
    /// anything connects anywhere.
    pub fn check(&self, r: &Reference) -> Result<(), String> {
        if Self::lists(&self.allowed, r) || Self::lists(&self.insecure, r) {
            return Ok(());
        }
        Err(format!(
            "the registry {} is not one you allow ({}); add \"{}\" to [environment] registries in your user config (~/.config/git-sandbox/config.toml) if you trust it",
            r.registry,
            if self.allowed.is_empty() { "none".to_string() } else { self.allowed.join(", ") },
            r.registry
        ))
    }

    /// The client's network policy: which hosts are reached over plain HTTP, at any address.
    pub fn net(&self) -> http::Net {
        http::Net {
            insecure: self
                .insecure
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlisted_registry_is_refused_naming_the_key() {
        let r = Registries {
            allowed: DEFAULT_REGISTRIES.iter().map(|s| s.to_string()).collect(),
            insecure: vec!["127.0.0.1:5000".into()],
        };
        assert!(r.check(&Reference::parse("python:3.12").unwrap()).is_ok());
        assert!(r.check(&Reference::parse("ghcr.io/o/i").unwrap()).is_ok());
        assert!(r
            .check(&Reference::parse("127.0.0.1:5000/x").unwrap())
            .is_ok());
        let e = r
            .check(&Reference::parse("evil.example/x").unwrap())
            .unwrap_err();
        assert!(
            e.contains("[environment] registries") && e.contains("evil.example"),
            "{e}"
        );
        let e = r
            .check(&Reference::parse("127.0.0.1:6379/x").unwrap())
            .unwrap_err();
        assert!(e.contains("127.0.0.1:6379"), "{e}");
    }
}
