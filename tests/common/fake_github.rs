//! A stand-in for GitHub's REST API on 127.0.0.1 (GitHub cannot be reached from here): it keeps
//! every request it got, answers the calls the product makes as GitHub does (statuses,
//! repositories, pull requests), and can be told to answer the next requests with a rate limit
//! or an error first. The code under test talks to it unchanged, through `[github] api_url`.
//! Every request is also checked against GitHub's own API description (see `prism`): a test
//! whose fake saw a request GitHub would refuse fails when the fake is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: String,
    pub body: serde_json::Value,
}

/// (status, extra headers, body)
type Answer = (u16, Vec<(String, String)>, String);

#[derive(Default)]
struct State {
    /// Where created repositories become bare repositories (`OWNER/NAME.git`), if anywhere.
    repos: Option<std::path::PathBuf>,
    seen: Vec<Seen>,
    /// Requests GitHub's API description does not allow.
    violations: Vec<String>,
    /// Answers to give before the normal ones.
    scripted: Vec<Answer>,
}

pub struct FakeGitHub {
    addr: String,
    state: Arc<Mutex<State>>,
}

impl FakeGitHub {
    pub fn start() -> FakeGitHub {
        Self::start_with(None)
    }

    /// One whose `POST /user/repos` (as the user `octo`) and `POST /orgs/{org}/repos` make a
    /// bare repository `OWNER/NAME.git` under `root`, for a `url.ROOT/.insteadOf
    /// https://github.com/` rule to push to.
    pub fn with_repos(root: &std::path::Path) -> FakeGitHub {
        Self::start_with(Some(root.to_path_buf()))
    }

    fn start_with(repos: Option<std::path::PathBuf>) -> FakeGitHub {
        // The contract checker is up before the first request (it takes seconds to start).
        super::prism::addr();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(State {
            repos,
            ..State::default()
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        FakeGitHub { addr, state }
    }

    /// `http://127.0.0.1:PORT`, for `[github] api_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Answer the next request with `status`, `headers` and a GitHub-style message.
    pub fn answer_next(&self, status: u16, headers: &[(&str, &str)], message: &str) {
        self.state.lock().unwrap().scripted.push((
            status,
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            serde_json::json!({"message": message, "documentation_url": "https://docs.github.com/rest"})
                .to_string(),
        ));
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        let v = self.violations();
        if !v.is_empty() && !std::thread::panicking() {
            panic!(
                "requests GitHub's API description refuses:\n{}",
                v.join("\n")
            );
        }
    }
}

fn serve(conn: TcpStream, st: &Mutex<State>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0usize;
        let mut authorization = String::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "authorization" => authorization = v.trim().to_string(),
                    _ => {}
                }
            }
        }
        let mut raw = vec![0; length];
        if reader.read_exact(&mut raw).is_err() {
            return;
        }
        let violation = super::prism::violation(&method, &path, &raw);
        let body: serde_json::Value = serde_json::from_slice(&raw).unwrap_or_default();
        let (status, headers, text) = {
            let mut s = st.lock().unwrap();
            s.violations.extend(violation);
            s.seen.push(Seen {
                method: method.clone(),
                path: path.clone(),
                authorization,
                body: body.clone(),
            });
            if s.scripted.is_empty() {
                answer(&method, &path, &body, s.repos.as_deref())
            } else {
                s.scripted.remove(0)
            }
        };
        let mut out = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
            text.len()
        );
        for (k, v) in headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&text);
        if writer.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

fn create_repo(owner: &str, body: &serde_json::Value, root: Option<&std::path::Path>) -> Answer {
    let name = body["name"].as_str().unwrap_or("");
    if let Some(root) = root {
        let dir = root.join(owner).join(format!("{name}.git"));
        if dir.exists() {
            return (
                422,
                vec![],
                serde_json::json!({"message": "Repository creation failed.", "errors": [{"resource": "Repository", "code": "custom", "field": "name", "message": "name already exists on this account"}]}).to_string(),
            );
        }
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git init --bare {}", dir.display());
    }
    (
        201,
        vec![],
        serde_json::json!({
            "id": 1, "node_id": "R_1", "name": name, "full_name": format!("{owner}/{name}"),
            "private": body["private"], "owner": {"login": owner},
            "html_url": format!("https://github.com/{owner}/{name}"),
            "clone_url": format!("https://github.com/{owner}/{name}.git"),
            "ssh_url": format!("git@github.com:{owner}/{name}.git"),
            "default_branch": "main",
        })
        .to_string(),
    )
}

fn answer(
    method: &str,
    path: &str,
    body: &serde_json::Value,
    repos: Option<&std::path::Path>,
) -> Answer {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("POST", ["user", "repos"]) => create_repo("octo", body, repos),
        ("POST", ["app", "installations", _, "access_tokens"]) => (
            201,
            vec![],
            serde_json::json!({"token": "ghs_installation_token", "expires_at": "2099-01-01T00:00:00Z", "permissions": {"checks": "write"}, "repository_selection": "all"}).to_string(),
        ),
        ("POST", ["repos", owner, repo, "check-runs"]) => (
            201,
            vec![],
            serde_json::json!({
                "id": 4, "head_sha": body["head_sha"], "node_id": "CR_4", "external_id": "",
                "url": format!("https://api.github.com/repos/{owner}/{repo}/check-runs/4"),
                "html_url": format!("https://github.com/{owner}/{repo}/runs/4"),
                "details_url": null, "status": body["status"], "conclusion": body["conclusion"],
                "started_at": null, "completed_at": null, "name": body["name"],
            })
            .to_string(),
        ),
        ("POST", ["repos", owner, repo, "pulls"]) => (
            201,
            vec![],
            serde_json::json!({
                "id": 7, "number": 7, "state": "open", "title": body["title"], "body": body["body"],
                "html_url": format!("https://github.com/{owner}/{repo}/pull/7"),
                "head": {"ref": body["head"]}, "base": {"ref": body["base"]},
            })
            .to_string(),
        ),
        ("POST", ["orgs", org, "repos"]) => create_repo(org, body, repos),
        ("POST", ["repos", owner, repo, "statuses", sha]) => (
            201,
            vec![],
            serde_json::json!({
                "url": format!("https://api.github.com/repos/{owner}/{repo}/statuses/{sha}"),
                "id": 1, "node_id": "SC_1", "state": body["state"], "description": body["description"],
                "target_url": body["target_url"], "context": body["context"],
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            })
            .to_string(),
        ),
        _ => (
            404,
            vec![],
            serde_json::json!({"message": "Not Found"}).to_string(),
        ),
    }
}
