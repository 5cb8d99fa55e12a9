//! GitHub's REST API, for what git cannot do (commit statuses; repositories). A thin client over
//! octocrab's raw requests, so every answer's status and rate-limit headers are ours to read:
//! a rate-limited answer says how long to wait (`retry-after`, `x-ratelimit-reset`), never
//! sleeps here. The token is held by octocrab and sent only in the `Authorization` header.

pub mod app;

use serde_json::Value;
use std::time::Duration;

/// What GitHub answered.
#[derive(Debug)]
pub enum Answer {
    Ok(Value),
    /// A primary or secondary rate limit: try again after this long.
    RateLimited(Duration),
    /// A final answer that is not success (401, 404, 422, …), with GitHub's message.
    Rejected {
        status: u16,
        message: String,
    },
    /// No answer (network, TLS, a 5xx): worth trying again later.
    Unreachable(String),
}

pub struct Client {
    octo: octocrab::Octocrab,
    rt: tokio::runtime::Runtime,
}

impl Client {
    /// A client for the API at `api_url` (`https://api.github.com`, an Enterprise server's
    /// `/api/v3`, or a local stand-in in tests), authenticated with `token`.
    pub fn new(api_url: &str, token: &str) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
        let octo = rt.block_on(async {
            octocrab::Octocrab::builder()
                .base_uri(api_url)
                .map_err(|e| format!("bad [github] api_url {api_url:?}: {e}"))?
                .personal_token(token.to_string())
                .set_connect_timeout(Some(Duration::from_secs(10)))
                .set_read_timeout(Some(Duration::from_secs(30)))
                .build()
                .map_err(|e| format!("cannot build the GitHub client: {e}"))
        })?;
        Ok(Client { octo, rt })
    }

    /// `POST {api}{path}` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Answer {
        self.rt.block_on(async {
            let res = match self.octo._post(path, Some(body)).await {
                Ok(r) => r,
                Err(e) => return Answer::Unreachable(one_line(&e.to_string())),
            };
            let status = res.status().as_u16();
            let wait = rate_wait(status, res.headers(), now_epoch());
            let text = self.octo.body_to_string(res).await.unwrap_or_default();
            if let Some(w) = wait {
                return Answer::RateLimited(w);
            }
            let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match status {
                200..=299 => Answer::Ok(json),
                500..=599 => Answer::Unreachable(format!("GitHub answered {status}")),
                _ => {
                    // GitHub's 422 says what was invalid in `errors`.
                    let mut message = json["message"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| one_line(&text));
                    if let Some(detail) = json["errors"][0]["message"].as_str() {
                        message = format!("{message} ({detail})");
                    }
                    Answer::Rejected { status, message }
                }
            }
        })
    }

    /// `POST /user/repos`, or `POST /orgs/{org}/repos`: a new, empty repository.
    pub fn create_repo(&self, org: Option<&str>, name: &str, private: bool) -> Answer {
        let body = serde_json::json!({
            "name": name,
            "private": private,
            "description": "Experiments run by git-sandbox",
            "auto_init": false,
        });
        match org {
            Some(o) => self.post(&format!("/orgs/{o}/repos"), &body),
            None => self.post("/user/repos", &body),
        }
    }

    /// `POST /app/installations/{id}/access_tokens` (this client authenticated with the app's
    /// JWT): an installation token.
    pub fn installation_token(&self, installation_id: u64) -> Answer {
        self.post(
            &format!("/app/installations/{installation_id}/access_tokens"),
            &serde_json::json!({}),
        )
    }

    /// `POST /repos/{owner}/{repo}/check-runs`.
    pub fn create_check_run(&self, owner: &str, repo: &str, run: &Value) -> Answer {
        self.post(&format!("/repos/{owner}/{repo}/check-runs"), run)
    }

    /// `POST /repos/{owner}/{repo}/statuses/{sha}`.
    pub fn create_status(&self, owner: &str, repo: &str, sha: &str, status: &Value) -> Answer {
        self.post(&format!("/repos/{owner}/{repo}/statuses/{sha}"), status)
    }
}

fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.chars().take(300).collect()
}

fn now_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long a 403/429 answer asks us to wait: `retry-after` seconds, else until
/// `x-ratelimit-reset` when `x-ratelimit-remaining` is 0, else (a secondary limit without
/// headers) a minute. `None` for any other answer.
pub fn rate_wait(status: u16, headers: &http::HeaderMap, now: u64) -> Option<Duration> {
    if status != 403 && status != 429 {
        return None;
    }
    let num = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    if let Some(s) = num("retry-after") {
        return Some(Duration::from_secs(s.max(1)));
    }
    if num("x-ratelimit-remaining") == Some(0) {
        if let Some(reset) = num("x-ratelimit-reset") {
            return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
        }
    }
    // A 403 without any rate-limit header is a permission answer, not a limit.
    (status == 429 || headers.contains_key("x-ratelimit-remaining"))
        .then(|| Duration::from_secs(60))
}

/// `owner/repo` of a remote URL on the GitHub at `web_url` (`https://github.com`): HTTPS, SSH
/// and scp-like forms; `None` for a remote elsewhere.
pub fn repo_of(url: &str, web_url: &str) -> Option<(String, String)> {
    let host = web_url
        .split_once("://")
        .map_or(web_url, |(_, r)| r)
        .split('/')
        .next()?
        .split(':')
        .next()?
        .to_ascii_lowercase();
    let (rest, scp) = match url.split_once("://") {
        Some((_, r)) => (r, false),
        None => (url, true),
    };
    let (authority, path) = if scp {
        rest.split_once(':')?
    } else {
        rest.split_once('/')?
    };
    let h = authority.rsplit('@').next()?.split(':').next()?;
    if !h.eq_ignore_ascii_case(&host) {
        return None;
    }
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let (owner, repo) = path.split_once('/')?;
    (!owner.is_empty() && !repo.is_empty() && !repo.contains('/'))
        .then(|| (owner.to_string(), repo.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_on_github_name_their_repository() {
        let gh = "https://github.com";
        for u in [
            "https://github.com/o/r.git",
            "https://x-access-token:t@github.com/o/r",
            "git@github.com:o/r.git",
            "ssh://git@github.com/o/r.git",
        ] {
            assert_eq!(repo_of(u, gh), Some(("o".into(), "r".into())), "{u}");
        }
        assert_eq!(repo_of("https://gitlab.com/o/r.git", gh), None);
        assert_eq!(repo_of("/srv/git/r.git", gh), None);
        assert_eq!(
            repo_of("https://ghe.corp/o/r.git", "https://ghe.corp/"),
            Some(("o".into(), "r".into()))
        );
    }

    #[test]
    fn rate_limits_say_how_long_to_wait() {
        let mut h = http::HeaderMap::new();
        assert_eq!(rate_wait(200, &h, 0), None);
        assert_eq!(
            rate_wait(403, &h, 0),
            None,
            "a plain 403 is a permission answer"
        );
        assert_eq!(rate_wait(429, &h, 0), Some(Duration::from_secs(60)));
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(rate_wait(403, &h, 0), Some(Duration::from_secs(7)));
        let mut h = http::HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "1000".parse().unwrap());
        assert_eq!(rate_wait(403, &h, 990), Some(Duration::from_secs(10)));
    }
}
