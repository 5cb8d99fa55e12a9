//! The sections of the user config that describe this machine, never a repository: where it
//! sends results (`[remote]`), how it talks to GitHub (`[github]`), and which database holds its
//! index (`[index]`). A `.sandbox.toml` that sets them is refused (`parse_repository_file`).

use super::file::{de_command, de_duration, hinted};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubFile {
    #[serde(default, deserialize_with = "de_http_url")]
    pub api_url: Option<String>,
    #[serde(default, deserialize_with = "de_http_url")]
    pub web_url: Option<String>,
    #[serde(default, deserialize_with = "de_command")]
    pub token_command: Option<String>,
    pub statuses: Option<bool>,
    /// A GitHub App (then check runs are posted instead of statuses).
    pub app_id: Option<u64>,
    #[serde(default, deserialize_with = "de_secret_file")]
    pub app_key_file: Option<String>,
    pub installation_id: Option<u64>,
}

fn de_http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/') || r.contains(char::is_whitespace)) {
        return Err(hinted(
            format!("{s:?} is not an http(s) URL"),
            "write it like \"https://api.github.com\" (GitHub Enterprise: \"https://HOST/api/v3\")",
        ));
    }
    Ok(Some(s.trim_end_matches('/').to_string()))
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteFile {
    pub auto_push: Option<bool>,
    #[serde(default, deserialize_with = "de_poll")]
    pub poll: Option<Duration>,
    /// A file holding the webhook secret (two lines while rotating): never the secret itself.
    #[serde(default, deserialize_with = "de_secret_file")]
    pub webhook_secret_file: Option<String>,
}

fn de_secret_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if !(s.starts_with('/') || s.starts_with("~/")) {
        return Err(hinted(
            format!("{s:?} is not an absolute path"),
            "name the file by its absolute path or from your home, like \"~/.config/git-sandbox/webhook-secret\"",
        ));
    }
    Ok(Some(s))
}

/// How often the daemon asks each repository's remote what moved: at least 5 s (`git ls-remote`
/// is one round trip, but a remote is somebody else's machine).
fn de_poll<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let t = de_duration(d)?;
    if t.is_some_and(|t| t < Duration::from_secs(5)) {
        return Err(hinted(
            "polling a remote more often than every 5 s",
            "write \"60s\" or more (a push is seen at once with a webhook)",
        ));
    }
    Ok(t)
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexFile {
    /// `postgres://USER@HOST:PORT/DB`: the index in PostgreSQL, shared by many daemons.
    #[serde(default, deserialize_with = "de_index_url")]
    pub url: Option<String>,
    /// How long a daemon holds a job without renewing it before another daemon may take it.
    #[serde(default, deserialize_with = "de_lease")]
    pub lease: Option<Duration>,
}

/// A job's lease: renewed every third of it, so at least 3 s (and at most a day).
fn de_lease<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let t = de_duration(d)?;
    if t.is_some_and(|t| t < Duration::from_secs(3) || t > Duration::from_secs(86_400)) {
        return Err(hinted(
            "a lease shorter than 3 s or longer than a day",
            "write \"60s\" (the default): a killed daemon's jobs return to the queue after it",
        ));
    }
    Ok(t)
}

/// A PostgreSQL connection URL (the only database but the embedded SQLite file).
pub fn check_index_url(s: &str) -> Result<(), (String, String)> {
    let rest = s
        .strip_prefix("postgres://")
        .or_else(|| s.strip_prefix("postgresql://"));
    if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
        return Err((
            format!("{:?} is not a PostgreSQL URL", super::redact_url(s)),
            "write it like \"postgres://sandbox@db.example:5432/sandbox\" (without it, the index is the SQLite file in the data dir)".into(),
        ));
    }
    Ok(())
}

fn de_index_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    check_index_url(&s).map_err(|(p, f)| hinted(p, f))?;
    Ok(Some(s))
}
