//! Webhooks from GitHub, Gitea and Forgejo: a delivery is verified on its raw bytes
//! (`X-Hub-Signature-256`, HMAC-SHA256, constant time; two secrets while one is rotated) before
//! anything reads it, matched to a registered repository by its remote's URL, and recorded with
//! the fetch it asks for in one transaction keyed by its delivery id. Nothing runs inline: the
//! daemon fetches recorded deliveries and queues their new commits ([`process_pending`]).

use crate::app::{intake::fetch, Context, Repo, Result};
use gs_git as git;
use gs_model::EventKind;
use gs_store::Delivery;
use hmac::{Hmac, Mac};
use std::path::Path;

/// The largest body GitHub delivers (it drops larger payloads itself).
pub const MAX_BODY: usize = 25 * 1024 * 1024;

/// One delivery as the HTTP face hands it over: the headers that matter, the raw body, and what
/// a [`Verifier`] fed that body as it arrived found.
pub struct Request<'a> {
    /// `github`, `gitea` or `forgejo`: which headers named the event.
    pub source: &'a str,
    pub event: Option<&'a str>,
    pub delivery: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
    pub checked: Checked,
}

/// A body's signature check and its SHA-256, computed while it streamed in.
#[derive(Debug, Clone)]
pub struct Checked {
    pub signed: bool,
    /// Lower-case hex: the signature does not cover `X-GitHub-Delivery`, so a signed body sent
    /// again under a new delivery id is recognised by this.
    pub body_sha256: String,
}

/// HMAC-SHA256 under each secret and the body's SHA-256, fed chunk by chunk as the body arrives
/// (nothing is hashed a second time once it is all there).
pub struct Verifier {
    macs: Vec<Hmac<sha2::Sha256>>,
    digest: sha2::Sha256,
}

impl Verifier {
    pub fn new(secrets: &[Vec<u8>]) -> Verifier {
        use sha2::Digest;
        Verifier {
            macs: secrets
                .iter()
                .filter_map(|s| Hmac::<sha2::Sha256>::new_from_slice(s).ok())
                .collect(),
            digest: sha2::Sha256::new(),
        }
    }

    pub fn update(&mut self, chunk: &[u8]) {
        use sha2::Digest;
        for m in &mut self.macs {
            m.update(chunk);
        }
        self.digest.update(chunk);
    }

    /// Whether `header` (`sha256=<hex>`) is the HMAC of what was fed under one of the secrets,
    /// compared in constant time.
    pub fn finish(self, header: Option<&str>) -> Checked {
        use sha2::Digest;
        let body_sha256 = self
            .digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let sig = header
            .and_then(|h| h.trim().strip_prefix("sha256="))
            .and_then(from_hex);
        let signed = sig.is_some_and(|sig| {
            self.macs
                .into_iter()
                .fold(false, |ok, m| m.verify_slice(&sig).is_ok() | ok)
        });
        Checked {
            signed,
            body_sha256,
        }
    }
}

/// What became of a delivery; the HTTP face turns each into a status code.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Missing or wrong signature: nothing was read or queued.
    Unauthorized(String),
    BadRequest(String),
    /// `ping`: the hook works; nothing is started.
    Pong,
    /// An event we do not act on.
    Ignored(String),
    /// A known event that asks for nothing (a deleted branch, an unwatched one, a closed PR).
    NothingToDo(String),
    /// This delivery id was recorded before: nothing queued again.
    Duplicate,
    /// No registered repository has a remote with this URL.
    UnknownRepository(String),
    /// Recorded; the daemon fetches `refspec` and queues what is new.
    Queued {
        /// How many repositories here follow that remote (each fetches and runs).
        repositories: usize,
        refspec: String,
    },
}

/// The secrets deliveries are signed with: the non-empty lines of `[remote] webhook_secret_file`
/// (one, or two while rotating). The file must be private to its owner.
pub fn secrets(ctx: &Context) -> Result<Vec<Vec<u8>>> {
    let Some(file) = ctx.layers.resolve().remote.webhook_secret_file else {
        return Err(crate::app::AppError::usage("webhooks need a secret, and none is set")
            .hint("write one to a file (`openssl rand -hex 32 > ~/.config/git-sandbox/webhook-secret; chmod 600 ~/.config/git-sandbox/webhook-secret`), name it in your user config: [remote] webhook_secret_file = \"~/.config/git-sandbox/webhook-secret\", and give GitHub the same secret"));
    };
    let path = match file.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| Path::new(&h).join(rest))
            .unwrap_or_else(|| Path::new(&file).to_path_buf()),
        None => Path::new(&file).to_path_buf(),
    };
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(&path).map_err(|e| {
        crate::app::AppError::usage(format!(
            "cannot read the webhook secret file {}: {e}",
            path.display()
        ))
        .hint("create it, or fix [remote] webhook_secret_file in your user config")
    })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(crate::app::AppError::usage(format!(
            "the webhook secret file {} can be read by others",
            path.display()
        ))
        .hint(format!("chmod 600 {}", path.display())));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| crate::app::AppError::Io {
        context: format!("cannot read {}", path.display()),
        source: e,
    })?;
    let lines: Vec<Vec<u8>> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.as_bytes().to_vec())
        .collect();
    match lines.len() {
        0 => Err(crate::app::AppError::usage(format!(
            "the webhook secret file {} is empty",
            path.display()
        ))
        .hint("write the secret you gave GitHub into it, on one line")),
        1 | 2 => Ok(lines),
        n => Err(crate::app::AppError::usage(format!(
            "the webhook secret file {} holds {n} secrets",
            path.display()
        ))
        .hint("keep one line, or two while you rotate (the new one and the old one)")),
    }
}

/// Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under one of `secrets`,
/// compared in constant time.
pub fn verify(secrets: &[Vec<u8>], body: &[u8], header: Option<&str>) -> bool {
    let mut v = Verifier::new(secrets);
    v.update(body);
    v.finish(header).signed
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Take a delivery: verify it, read it, and record what it asks for. Never runs or fetches
/// anything itself, so it answers at once.
pub fn accept(ctx: &Context, req: &Request<'_>) -> Result<Outcome> {
    if !req.checked.signed {
        return Ok(Outcome::Unauthorized(match req.signature {
            None => "no X-Hub-Signature-256 header: set the webhook's secret".into(),
            Some(_) => "the signature does not match the body under any configured secret".into(),
        }));
    }
    let Some(event) = req.event else {
        return Ok(Outcome::BadRequest(
            "no X-GitHub-Event (or X-Gitea-Event) header".into(),
        ));
    };
    match event {
        "ping" => return Ok(Outcome::Pong),
        "push" | "pull_request" => {}
        other => {
            return Ok(Outcome::Ignored(format!(
                "event {other:?} starts nothing; subscribe to push and pull_request"
            )))
        }
    }
    let Some(id) = req.delivery.filter(|d| !d.is_empty() && d.len() <= 200) else {
        return Ok(Outcome::BadRequest(
            "no X-GitHub-Delivery (or X-Gitea-Delivery) header".into(),
        ));
    };
    let payload: serde_json::Value = match serde_json::from_slice(req.body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => return Ok(Outcome::BadRequest("the body is not a JSON object".into())),
        Err(e) => return Ok(Outcome::BadRequest(format!("the body is not JSON: {e}"))),
    };
    let body_sha256 = req.checked.body_sha256.as_str();
    if ctx.index.has_delivery(id, body_sha256)? {
        return Ok(Outcome::Duplicate);
    }
    let urls: Vec<&str> = ["clone_url", "ssh_url", "html_url", "git_url", "url"]
        .iter()
        .filter_map(|k| payload["repository"][k].as_str())
        .collect();
    let following = find_repositories(ctx, &urls)?;
    if following.is_empty() {
        return Ok(Outcome::UnknownRepository(format!(
            "no repository here has a remote at {}",
            urls.first()
                .copied()
                .unwrap_or("(no repository URL in the payload)")
        )));
    }
    let mut deliveries = Vec::new();
    let mut skipped = None;
    for (row, repo, remote_name) in following {
        match wanted(ctx, &repo, event, &payload, &remote_name)? {
            Ok((refspec, local_ref)) => deliveries.push(Delivery {
                id: id.to_string(),
                source: req.source.to_string(),
                event: event.to_string(),
                repository_id: row.repository_id.clone(),
                remote: remote_name,
                refspec,
                local_ref,
                body_sha256: Some(body_sha256.to_string()),
            }),
            Err(Ok(why)) => skipped = Some(Outcome::NothingToDo(why)),
            Err(Err(why)) => return Ok(Outcome::BadRequest(why)),
        }
    }
    let Some(first) = deliveries.first() else {
        return Ok(skipped.unwrap_or(Outcome::NothingToDo("nothing to run".into())));
    };
    let refspec = first.refspec.clone();
    let n = deliveries.len();
    if !ctx.index.record_delivery(&deliveries)? {
        return Ok(Outcome::Duplicate);
    }
    Ok(Outcome::Queued {
        repositories: n,
        refspec,
    })
}

/// What `event` asks one repository following `remote` to fetch: (refspec, local ref); else
/// `Ok(why)` when it asks for nothing, `Err(why)` when the payload is malformed.
#[allow(clippy::type_complexity)]
fn wanted(
    ctx: &Context,
    repo: &gs_git::Repository,
    event: &str,
    payload: &serde_json::Value,
    remote_name: &str,
) -> Result<std::result::Result<(String, String), std::result::Result<String, String>>> {
    Ok(match event {
        "push" => {
            let Some(refname) = payload["ref"].as_str() else {
                return Ok(Err(Err("a push without \"ref\"".into())));
            };
            if payload["deleted"].as_bool() == Some(true) {
                return Ok(Err(Ok(format!("{refname} was deleted: nothing to run"))));
            }
            let Some(branch) = refname.strip_prefix("refs/heads/") else {
                return Ok(Err(Ok(format!("{refname} is not a branch"))));
            };
            if !crate::app::select::watch_globs(ctx, repo)?.is_match(branch) {
                return Ok(Err(Ok(format!(
                    "branch {branch} is not watched ([watch] branches)"
                ))));
            }
            let local = format!("refs/remotes/{remote_name}/{branch}");
            Ok((format!("+{refname}:{local}"), local))
        }
        _ => {
            let action = payload["action"].as_str().unwrap_or("");
            // A merged pull request moved its base: fetch that (an experiment it promoted is
            // marked promoted, and the merge is run if the branch is watched).
            if action == "closed" && payload["pull_request"]["merged"].as_bool() == Some(true) {
                let Some(base) = payload["pull_request"]["base"]["ref"].as_str() else {
                    return Ok(Err(
                        Err("a merged pull_request without its base ref".into()),
                    ));
                };
                let local = format!("refs/remotes/{remote_name}/{base}");
                return Ok(Ok((format!("+refs/heads/{base}:{local}"), local)));
            }
            if !matches!(action, "opened" | "synchronize" | "reopened") {
                return Ok(Err(Ok(format!("pull request {action:?}: nothing to run"))));
            }
            let Some(n) = payload["number"].as_u64() else {
                return Ok(Err(Err("a pull_request without \"number\"".into())));
            };
            let local = format!("refs/remotes/{remote_name}/pull/{n}");
            Ok((format!("+refs/pull/{n}/head:{local}"), local))
        }
    })
}

/// `https://user@Host/Owner/Repo.git/`, `git@host:owner/repo`, `ssh://git@host:22/owner/repo`
/// → `host/owner/repo`.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim().to_ascii_lowercase();
    let (rest, scp) = match url.split_once("://") {
        Some((_, rest)) => (rest.to_string(), false),
        None => (url.clone(), true),
    };
    let (authority, path) = if scp {
        // scp-like: [user@]host:path
        match rest.split_once(':') {
            Some((a, p)) => (a.to_string(), p.to_string()),
            None => (String::new(), rest),
        }
    } else {
        match rest.split_once('/') {
            Some((a, p)) => (a.to_string(), p.to_string()),
            None => (rest, String::new()),
        }
    };
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or(host);
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    format!("{host}/{}", path.trim_start_matches('/'))
}

/// The registered repositories with a remote at one of `urls`, each with that remote's name.
fn find_repositories(
    ctx: &Context,
    urls: &[&str],
) -> Result<Vec<(gs_store::RepoRow, gs_git::Repository, String)>> {
    let wanted: Vec<String> = urls.iter().map(|u| normalize_url(u)).collect();
    let mut out = Vec::new();
    for row in ctx.index.repositories()? {
        let Ok(repo) = git::open(Path::new(&row.path)) else {
            continue;
        };
        let dir = git::repo_root(&repo);
        for r in git::remote::remotes(&dir).unwrap_or_default() {
            let Some(url) = git::cli::get_config(&dir, &format!("remote.{r}.url")) else {
                continue;
            };
            if wanted.contains(&normalize_url(&url)) {
                out.push((row, repo, r));
                break;
            }
        }
    }
    Ok(out)
}

/// Fetch what each recorded delivery announced and queue its new commits (trigger `webhook`).
/// Returns, per delivery handled, its id and how many commits it queued or why it failed; a
/// delivery that failed stays recorded for the next call, unless `give_up` says it has been
/// tried enough, and then it is closed with its error.
pub fn process_pending(
    ctx: &Context,
    give_up: &mut dyn FnMut(&str) -> bool,
) -> Result<Vec<(String, std::result::Result<usize, String>)>> {
    let mut out = Vec::new();
    for d in ctx.index.pending_deliveries()? {
        let result = (|| -> Result<usize> {
            let Some(row) = ctx.index.repository_by_id(&d.repository_id)? else {
                return Ok(0);
            };
            let repo = git::open(Path::new(&row.path))?;
            fetch::fetch_announced(
                Repo::new(ctx, &repo, &row),
                &d.remote,
                &d.refspec,
                &d.local_ref,
            )
        })();
        match &result {
            Ok(_) => ctx.index.finish_delivery(&d, None)?,
            Err(e) if give_up(&format!("{}/{}", d.id, d.repository_id)) => {
                let text = e.to_string();
                ctx.index.finish_delivery(&d, Some(&text))?;
                ctx.index.add_event(
                    EventKind::WebhookFailed,
                    Some(&d.repository_id),
                    None,
                    None,
                    &serde_json::json!({"delivery": d.id, "error": text}),
                )?;
            }
            Err(_) => {}
        }
        out.push((d.id, result.map_err(|e| e.to_string())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_documented_signature_verifies_and_a_changed_byte_does_not() {
        let secret = b"It's a Secret to Everybody".to_vec();
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(verify(
            std::slice::from_ref(&secret),
            b"Hello, World!",
            Some(good)
        ));
        assert!(!verify(
            std::slice::from_ref(&secret),
            b"Hello, World?",
            Some(good)
        ));
        assert!(!verify(&[b"other".to_vec()], b"Hello, World!", Some(good)));
        // During a rotation either secret verifies.
        assert!(verify(
            &[b"new".to_vec(), secret],
            b"Hello, World!",
            Some(good)
        ));
        assert!(!verify(&[b"x".to_vec()], b"", None));
        assert!(!verify(&[b"x".to_vec()], b"", Some("sha1=abc")));
        assert!(!verify(&[b"x".to_vec()], b"", Some("sha256=zz")));
    }

    #[test]
    fn urls_of_one_repository_normalize_alike() {
        let n = normalize_url("https://github.com/Codertocat/Hello-World.git");
        assert_eq!(n, "github.com/codertocat/hello-world");
        for u in [
            "git@github.com:Codertocat/Hello-World.git",
            "ssh://git@github.com:22/Codertocat/Hello-World",
            "https://x-access-token:t@github.com/Codertocat/Hello-World/",
            "git://github.com/Codertocat/Hello-World.git",
        ] {
            assert_eq!(normalize_url(u), n, "{u}");
        }
        assert_ne!(normalize_url("https://github.com/Codertocat/Other"), n);
    }
}
