//! The sections of the user config that describe this machine, never a repository: where it
//! sends results (`[remote]`), how it talks to GitHub (`[github]`), which database holds its
//! index (`[index]`) and where it sends notifications (`[notify]`). A `.sandbox.toml` that sets
//! them is refused (`parse_repository_file`).

use super::de::{de_command, de_duration, hinted};
use super::{ser_duration, ser_opt_duration};
use serde::{Deserialize, Deserializer, Serialize};
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
    http_url(
        d,
        "write it like \"https://api.github.com\" (GitHub Enterprise: \"https://HOST/api/v3\")",
    )
}

fn de_webhook_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    http_url(d, "write it like \"https://hooks.example.com/git-sandbox\"")
}

fn http_url<'de, D: Deserializer<'de>>(d: D, fix: &str) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/') || r.contains(char::is_whitespace)) {
        return Err(hinted(format!("{s:?} is not an http(s) URL"), fix));
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

/// `[trust]`: whose records are evidence besides this machine's own. User config only: a
/// repository that could name its own signers could vouch for its own results.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustFile {
    /// A file in git's `allowed_signers` format naming the keys whose records count.
    #[serde(default, deserialize_with = "de_secret_file")]
    pub allowed_signers: Option<String>,
}

/// Whose signed records are evidence here (see `trust`). User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrustConfig {
    pub allowed_signers: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyFile {
    #[serde(default, deserialize_with = "de_webhook_url")]
    pub webhook: Option<String>,
    /// The file holding the key the webhook's body is signed with: never the key itself.
    #[serde(default, deserialize_with = "de_secret_file")]
    pub secret_file: Option<String>,
    #[serde(default, deserialize_with = "de_command")]
    pub command: Option<String>,
}

/// Notifications (`[notify]`): a signed JSON POST and/or a command, for a run that fails after
/// a pass, an evaluation whose verdict changes, and a promotion. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NotifyConfig {
    pub webhook: Option<String>,
    pub secret_file: Option<String>,
    pub command: Option<String>,
}

impl NotifyConfig {
    /// The channels alerts go to: `webhook`, `command`.
    pub fn channels(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.webhook.is_some() {
            out.push("webhook");
        }
        if self.command.is_some() {
            out.push("command");
        }
        out
    }
}

/// Results shared through git remotes. User config and environment only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteConfig {
    /// Push the notes to the remote after each run (batched by the daemon).
    pub auto_push: bool,
    /// How often the daemon asks each repository's remote (`git ls-remote`) what moved, and
    /// fetches and queues it; `None`: never.
    #[serde(serialize_with = "ser_opt_duration")]
    pub poll: Option<Duration>,
    /// The file holding the webhook secret(s) `daemon --http` verifies deliveries with.
    pub webhook_secret_file: Option<String>,
}

/// GitHub's REST API: where it is, where its repositories are (to know a remote is on it), how to
/// get a token, and whether to post commit statuses. User config and environment only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GithubConfig {
    pub api_url: String,
    pub web_url: String,
    /// A command that prints the token (`gh auth token`); `GITHUB_TOKEN` comes first.
    pub token_command: Option<String>,
    pub statuses: bool,
    /// A GitHub App's id, private key file and installation: check runs instead of statuses.
    pub app_id: Option<u64>,
    pub app_key_file: Option<String>,
    pub installation_id: Option<u64>,
}

/// Where the index lives. User config and environment only (`GIT_SANDBOX_INDEX` wins).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexConfig {
    /// A PostgreSQL URL; `None`: the SQLite file `index.db` in the data dir. Shown with its
    /// password masked.
    #[serde(serialize_with = "ser_redacted")]
    pub url: Option<String>,
    /// How long a daemon holds a job without renewing it before another may take it (60 s).
    #[serde(serialize_with = "ser_duration")]
    pub lease: Duration,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            url: None,
            lease: Duration::from_secs(60),
        }
    }
}

fn ser_redacted<S: serde::Serializer>(u: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match u {
        Some(u) => s.serialize_str(&redact_url(u)),
        None => s.serialize_none(),
    }
}

/// A URL with the password of its user part masked: `postgres://me:***@host/db`.
pub fn redact_url(u: &str) -> String {
    let Some((scheme, rest)) = u.split_once("://") else {
        return u.to_string();
    };
    let (auth, host) = match rest.split_once('@') {
        Some((a, h)) if !a.contains('/') => (a, h),
        _ => return u.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => u.to_string(),
    }
}
