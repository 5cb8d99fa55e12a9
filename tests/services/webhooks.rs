//! Webhooks: GitHub's own example payloads (npm `@octokit/webhooks-examples`, installed by
//! `./test`), signed with HMAC-SHA256 and posted over real HTTP to `daemon --http`, whose
//! repository follows a remote through git (`url.insteadOf` stands the local bare repository in
//! for github.com). Good, bad, tampered, replayed, oversized, ping, unknown event, pull request,
//! a secret being rotated, and a delivery recorded before a crash.

use crate::common;

use common::World;
use hmac::{Hmac, Mac};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

const GITHUB_URL: &str = "https://github.com/Codertocat/Hello-World.git";
const SECRET: &str = "It's a Secret to Everybody";
const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

/// GitHub's recorded examples of `event`.
fn examples(event: &str) -> Vec<Value> {
    let path = common::tools::npm("@octokit/webhooks-examples/api.github.com/index.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    all.into_iter()
        .find(|e| e["name"] == event)
        .unwrap_or_else(|| panic!("no {event} examples"))["examples"]
        .as_array()
        .unwrap()
        .clone()
}

fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A JSON POST over a fresh connection; (status, body).
fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let r = common::http::request(addr, "POST", path, &all, body);
    (r.status, r.body)
}

struct Served {
    w: World,
    dev: PathBuf,
    clone: PathBuf,
    shared: PathBuf,
}

/// A developer's repository pushing to "github.com" (a bare repository here), and the daemon's
/// clone of it; the user config names the webhook secret file (with `secrets`, one per line).
fn served(secrets: &str) -> Served {
    let w = World::new();
    let shared = w.path("shared.git");
    w.git(
        &w.work(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            shared.to_str().unwrap(),
        ],
    );
    w.git(
        &w.work(),
        &[
            "config",
            "--global",
            &format!("url.{}.insteadOf", shared.display()),
            GITHUB_URL,
        ],
    );
    let dev = w.new_repo("dev");
    w.git(&dev, &["remote", "add", "origin", GITHUB_URL]);
    w.git(&dev, &["push", "-q", "origin", "main"]);
    let clone = w.work().join("served");
    w.git(
        &w.work(),
        &["clone", "-q", GITHUB_URL, clone.to_str().unwrap()],
    );
    assert_eq!(w.sandbox(&clone, &["init"]).code, 0);
    let secret_file = w.path("home/webhook-secret");
    std::fs::write(&secret_file, secrets).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    w.user_config(&format!(
        "[remote]\nwebhook_secret_file = \"{}\"\n",
        secret_file.display()
    ));
    Served {
        w,
        dev,
        clone,
        shared,
    }
}

/// Start the daemon with `--http` on a free port; its address.
fn start_daemon(w: &World) -> (common::Background, String) {
    let before = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
    let d = w.spawn(
        &w.work(),
        &["daemon", "--workers", "1", "--http", "127.0.0.1:0"],
    );
    let mut addr = None;
    assert!(
        w.wait_until(30, || {
            let log = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
            addr = log[before.len().min(log.len())..]
                .lines()
                .find_map(|l| l.split("serving webhooks at http://").nth(1))
                .map(|a| a.trim_end_matches("/webhooks/github").to_string());
            addr.is_some()
        }),
        "the daemon did not start serving: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    (d, addr.unwrap())
}

fn push_payload(refname: &str, after: &str) -> Vec<u8> {
    let mut p = examples("push")
        .into_iter()
        .find(|e| e["ref"] == "refs/heads/master" && e["deleted"] == false)
        .expect("a branch push example");
    p["ref"] = Value::from(refname);
    p["after"] = Value::from(after);
    serde_json::to_vec(&p).unwrap()
}

fn deliver(addr: &str, event: &str, id: &str, body: &[u8], secret: &str) -> (u16, String) {
    post(
        addr,
        "/webhooks/github",
        &[
            ("X-GitHub-Event", event),
            ("X-GitHub-Delivery", id),
            ("X-Hub-Signature-256", &sign(secret, body)),
        ],
        body,
    )
}

fn result(w: &World, repo: &Path, commit: &str) -> Option<Value> {
    let o = w.sandbox(repo, &["show", "--json", commit]);
    (o.code == 0).then(|| o.json())
}

fn received(w: &World, repo: &Path) -> usize {
    let o = w.sandbox(repo, &["events", "--json", "--kind", "webhook.received"]);
    o.stdout.lines().filter(|l| !l.trim().is_empty()).count()
}

#[test]
fn a_signed_push_runs_its_commits_and_nothing_else_gets_in() {
    let s = served(&format!("{SECRET}\n"));
    let w = &s.w;
    let (_daemon, addr) = start_daemon(w);
    let c = w.commit(&s.dev, &[("tests/test_more.py", MORE_TESTS)], "more");
    w.git(&s.dev, &["push", "-q", "origin", "main"]);
    let body = push_payload("refs/heads/main", &c);

    // Missing, wrong and tampered signatures: 401, nothing recorded or run.
    let (code, _) = post(
        &addr,
        "/webhooks/github",
        &[("X-GitHub-Event", "push"), ("X-GitHub-Delivery", "d-0")],
        &body,
    );
    assert_eq!(code, 401);
    assert_eq!(
        deliver(&addr, "push", "d-0", &body, "not the secret").0,
        401
    );
    let mut tampered = body.clone();
    let at = tampered.len() / 2;
    tampered[at] ^= 1;
    let (code, _) = post(
        &addr,
        "/webhooks/github",
        &[
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", "d-0"),
            ("X-Hub-Signature-256", &sign(SECRET, &body)),
        ],
        &tampered,
    );
    assert_eq!(code, 401);
    assert_eq!(received(w, &s.clone), 0);

    // The real delivery: 202 at once, then fetched and run.
    let (code, text) = deliver(&addr, "push", "d-1", &body, SECRET);
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("\"queued\""), "{text}");
    assert!(
        w.wait_until(60, || result(w, &s.clone, &c).is_some()),
        "never run: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    // Both repositories here that follow the remote recorded it (the developer's and the clone).
    let recorded = received(w, &s.clone);
    assert_eq!(recorded, 2);
    let r = result(w, &s.clone, &c).unwrap();
    assert_eq!(r["status"], "passed", "{r}");
    assert_eq!(r["trigger"], "webhook", "{r}");
    assert_eq!(r["ref"], "refs/remotes/origin/main", "{r}");
    // The daemon's own branch and work tree were not touched.
    assert_ne!(
        w.git(&s.clone, &["rev-parse", "main"]).trim(),
        c,
        "a webhook must not move a local branch"
    );

    // A replay of the same delivery: recognised, nothing queued again.
    let (code, text) = deliver(&addr, "push", "d-1", &body, SECRET);
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("duplicate"), "{text}");
    assert_eq!(received(w, &s.clone), recorded);
    // The same signed body under a new delivery id (the signature does not cover the id): the
    // body's SHA-256 recognises it, nothing queued again.
    let (code, text) = deliver(&addr, "push", "d-1-again", &body, SECRET);
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("duplicate"), "{text}");
    assert_eq!(received(w, &s.clone), recorded);

    // ping: 200, nothing started. An event we do not act on: 204.
    let ping = serde_json::to_vec(&examples("ping")[0]).unwrap();
    let (code, text) = deliver(&addr, "ping", "d-ping", &ping, SECRET);
    assert_eq!(code, 200, "{text}");
    let issues = serde_json::to_vec(&examples("issues")[0]).unwrap();
    assert_eq!(deliver(&addr, "issues", "d-issues", &issues, SECRET).0, 204);

    // A deleted branch and an unwatched one queue nothing.
    let mut deleted: Value = serde_json::from_slice(&push_payload("refs/heads/gone", &c)).unwrap();
    deleted["deleted"] = Value::from(true);
    let deleted = serde_json::to_vec(&deleted).unwrap();
    let (code, text) = deliver(&addr, "push", "d-del", &deleted, SECRET);
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("nothing_to_do"), "{text}");
    let (code, text) = deliver(
        &addr,
        "push",
        "d-unwatched",
        &push_payload("refs/heads/wip", &c),
        SECRET,
    );
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("not watched"), "{text}");
    assert_eq!(received(w, &s.clone), recorded);

    // A repository nobody here follows: 404.
    let mut other: Value = serde_json::from_slice(&body).unwrap();
    for k in ["clone_url", "ssh_url", "html_url", "git_url", "url"] {
        other["repository"][k] = Value::from("https://github.com/someone/else.git");
    }
    let other = serde_json::to_vec(&other).unwrap();
    assert_eq!(deliver(&addr, "push", "d-other", &other, SECRET).0, 404);

    // Gitea and Forgejo send the same signature under their own event and delivery headers (a
    // body of their own: the same bytes again would be a replay).
    let mut gitea: Value = serde_json::from_slice(&body).unwrap();
    gitea["compare_url"] = Value::from("https://gitea.example/compare");
    let gitea = serde_json::to_vec(&gitea).unwrap();
    let (code, text) = post(
        &addr,
        "/webhooks/github",
        &[
            ("X-Gitea-Event", "push"),
            ("X-Gitea-Delivery", "gitea-1"),
            ("X-Hub-Signature-256", &sign(SECRET, &gitea)),
        ],
        &gitea,
    );
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("\"queued\""), "{text}");

    // Garbage that is signed: 400, not 500.
    assert_eq!(
        deliver(&addr, "push", "d-garbage", b"{not json", SECRET).0,
        400
    );
}

#[test]
fn an_oversized_body_is_refused_before_it_is_read() {
    let s = served(&format!("{SECRET}\n"));
    let (_daemon, addr) = start_daemon(&s.w);
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // 26 MB announced, a few bytes sent: the answer comes without the rest.
    let head = format!(
        "POST /webhooks/github HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: big\r\nX-Hub-Signature-256: sha256={}\r\nConnection: close\r\n\r\n{{",
        26 * 1024 * 1024,
        "0".repeat(64)
    );
    conn.write_all(head.as_bytes()).unwrap();
    assert_eq!(common::http::read_reply(&mut conn).status, 413);
    assert_eq!(received(&s.w, &s.clone), 0);
}

#[test]
fn a_pull_request_runs_its_head_and_a_rotated_secret_still_verifies() {
    // While rotating: the new secret first, the old one second; GitHub still signs with the old.
    let s = served(&format!("new-secret\n{SECRET}\n"));
    let w = &s.w;
    let (_daemon, addr) = start_daemon(w);
    // A pull request's head lives at refs/pull/N/head on GitHub.
    w.git(&s.dev, &["switch", "-q", "-c", "changes"]);
    let head = w.commit(&s.dev, &[("tests/test_more.py", MORE_TESTS)], "changes");
    w.git(
        &s.dev,
        &["push", "-q", "origin", "changes:refs/pull/2/head"],
    );
    let pr = examples("pull_request")
        .into_iter()
        .find(|e| e["action"] == "opened")
        .unwrap();
    assert_eq!(pr["number"], 2);
    let body = serde_json::to_vec(&pr).unwrap();
    let (code, text) = deliver(&addr, "pull_request", "pr-1", &body, SECRET);
    assert_eq!(code, 202, "{text}");
    assert!(
        w.wait_until(60, || result(w, &s.clone, &head).is_some()),
        "the pull request's head never ran: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    let r = result(w, &s.clone, &head).unwrap();
    assert_eq!(r["ref"], "refs/remotes/origin/pull/2", "{r}");
    assert_eq!(r["trigger"], "webhook", "{r}");
    // Closed: nothing to run.
    let closed = examples("pull_request")
        .into_iter()
        .find(|e| e["action"] == "closed")
        .unwrap();
    let (code, text) = deliver(
        &addr,
        "pull_request",
        "pr-2",
        &serde_json::to_vec(&closed).unwrap(),
        "new-secret",
    );
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("nothing_to_do"), "{text}");
}

#[test]
fn a_delivery_recorded_before_a_crash_is_fetched_and_run_after_it() {
    let s = served(&format!("{SECRET}\n"));
    let w = &s.w;
    let c = w.commit(&s.dev, &[("tests/test_more.py", MORE_TESTS)], "more");
    w.git(&s.dev, &["push", "-q", "origin", "main"]);
    // The remote is away when the delivery arrives: recorded, answered, not yet fetched.
    let away = w.path("shared-away.git");
    std::fs::rename(&s.shared, &away).unwrap();
    let (mut daemon, addr) = start_daemon(w);
    let (code, text) = deliver(
        &addr,
        "push",
        "crash-1",
        &push_payload("refs/heads/main", &c),
        SECRET,
    );
    assert_eq!(code, 202, "{text}");
    // The daemon dies without a chance to clean up.
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
    assert!(result(w, &s.clone, &c).is_none());
    // The remote is back; a new daemon fetches the delivery it had recorded, with no redelivery.
    std::fs::rename(&away, &s.shared).unwrap();
    let (_daemon, _) = start_daemon(w);
    assert!(
        w.wait_until(60, || result(w, &s.clone, &c).is_some()),
        "the recorded delivery was lost: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
}

#[test]
fn webhooks_without_a_secret_are_off_and_a_secret_others_can_read_is_refused() {
    let w = World::new();
    // Without a secret the listener serves the API and the dashboard; webhooks say they are off.
    let (d, addr) = w.serve();
    let (status, body) = deliver(&addr, "ping", "d-1", b"{}", "anything");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("webhook_secret_file"), "{body}");
    drop(d);
    let secret = w.path("home/secret");
    std::fs::write(&secret, "s\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    w.user_config(&format!(
        "[remote]\nwebhook_secret_file = \"{}\"\n",
        secret.display()
    ));
    let o = w.sandbox(&w.work(), &["daemon", "--http", "127.0.0.1:0"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.ends_with("can be read by others"), "{problem}");
    assert_eq!(hints, vec![format!("chmod 600 {}", secret.display())]);
    let o = w.sandbox(&w.work(), &["daemon", "--http", "localhost"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(o.error().0, "invalid --http \"localhost\"");
}

#[test]
fn a_merged_pull_request_marks_the_experiment_it_proposed_promoted() {
    let s = served(&format!("{SECRET}\n"));
    let w = &s.w;
    // The daemon's clone proposed experiment/x (as `promote --strategy pull-request` does).
    assert_eq!(w.sandbox(&s.clone, &["experiment", "start", "x"]).code, 0);
    w.git(&s.clone, &["switch", "-q", "experiment/x"]);
    w.commit(&s.clone, &[("tests/test_more.py", MORE_TESTS)], "more");
    w.git(&s.clone, &["switch", "-q", "main"]);
    w.git(&s.clone, &["push", "-q", "origin", "experiment/x"]);
    w.git(
        &s.clone,
        &["update-ref", "refs/sandbox/pull/x", "experiment/x"],
    );
    let (_daemon, addr) = start_daemon(w);
    // Somebody merges it on GitHub.
    w.git(&s.dev, &["fetch", "-q", "origin", "experiment/x"]);
    w.git(
        &s.dev,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "Merge pull request #2",
            "FETCH_HEAD",
        ],
    );
    w.git(&s.dev, &["push", "-q", "origin", "main"]);
    let mut pr = examples("pull_request")
        .into_iter()
        .find(|e| e["action"] == "closed")
        .unwrap();
    pr["pull_request"]["merged"] = Value::from(true);
    pr["pull_request"]["base"]["ref"] = Value::from("main");
    pr["pull_request"]["head"]["ref"] = Value::from("experiment/x");
    let (code, text) = deliver(
        &addr,
        "pull_request",
        "merged-1",
        &serde_json::to_vec(&pr).unwrap(),
        SECRET,
    );
    assert_eq!(code, 202, "{text}");
    let state = || {
        w.sandbox(&s.clone, &["experiment", "show", "x", "--json"])
            .json()["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        w.wait_until(60, || state() == "promoted"),
        "still {}: {}",
        state(),
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
}
