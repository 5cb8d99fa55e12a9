//! Notifications (`[notify]`): a run that fails after its parent passed is POSTed, signed, to a
//! listener this test opens on 127.0.0.1 (tried again after the listener first says 503) and
//! handed to a command.

use crate::common;

use common::World;
use hmac::{Hmac, Mac};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const FAILING: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n";

/// One request as received: its headers (lower-cased names) and body.
#[derive(Debug, Clone)]
struct Received {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A listener on 127.0.0.1 that answers 503 to the first request and 200 to the others.
fn listener() -> (String, Arc<Mutex<Vec<Received>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            let mut r = BufReader::new(stream.try_clone().unwrap());
            let mut headers = Vec::new();
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.trim().split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let first = {
                let mut s = keep.lock().unwrap();
                s.push(Received { headers, body });
                s.len() == 1
            };
            let status = if first {
                "503 Service Unavailable"
            } else {
                "200 OK"
            };
            let mut w = stream;
            let _ = write!(
                w,
                "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    (url, seen)
}

#[test]
fn a_regression_is_posted_signed_retried_and_handed_to_the_command() {
    let w = World::new();
    let (url, seen) = listener();
    let secret = w.path("notify-secret");
    std::fs::write(&secret, "s3cret-for-tests\n").unwrap();
    let out = w.path("alert.json");
    w.user_config(&format!(
        "[notify]\nwebhook = \"{url}\"\nsecret_file = \"{}\"\ncommand = \"cat > {}\"\n",
        secret.display(),
        out.display()
    ));
    let repo = w.new_repo("alerts");
    let good = w.commit(&repo, &[("README.md", "a\n")], "good");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    assert!(seen.lock().unwrap().is_empty(), "a pass is no news");
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);

    // The command got it at once; the webhook said 503 and waits for its next try.
    let handed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(handed["kind"], "run.regressed");
    assert_eq!(handed["data"]["commit"], bad.as_str());
    assert_eq!(handed["data"]["parent"], good.as_str());
    assert!(
        handed["text"].as_str().unwrap().contains("failed after"),
        "{handed}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    // A failure after a failure is no news either.
    w.commit(&repo, &[("README.md", "b\n")], "still broken");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);

    // The next command after the back-off (5 s) delivers it.
    std::thread::sleep(std::time::Duration::from_millis(5500));
    w.sandbox(&repo, &["run"]);
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "tried again once: {got:?}");
    assert_eq!(got[0].body, got[1].body, "the same delivery");
    assert_eq!(
        got[0].header("x-git-sandbox-delivery"),
        got[1].header("x-git-sandbox-delivery")
    );
    let r = &got[1];
    assert_eq!(r.header("x-git-sandbox-event"), Some("run.regressed"));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"s3cret-for-tests").unwrap();
    mac.update(&r.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        r.header("x-git-sandbox-signature-256"),
        Some(format!("sha256={expected}").as_str()),
        "signed with the secret"
    );
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["data"]["commit"], bad.as_str());
    assert_eq!(body["repository"]["name"], "alerts");

    // A repository cannot say where this machine's notifications go.
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[notify]\ncommand = \"true\"\n")],
        "tries to notify",
    );
    w.sandbox(&repo, &["run"]);
    let note = w.note(&repo, &c).unwrap();
    assert!(
        note["error"]
            .as_str()
            .unwrap()
            .contains("[notify] is read from your user config only"),
        "{note}"
    );
}

#[test]
fn a_changed_verdict_and_a_promotion_are_handed_to_the_command() {
    let w = World::new();
    w.alerts_to_file();
    let repo = w.new_repo("verdicts");
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "x"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/x"]);
    w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    assert_eq!(w.sandbox(&repo, &["eval", "x"]).code, 1, "NOT_READY");
    w.commit(
        &repo,
        &[("tests/test_more.py", &FAILING.replace("5)", "4)"))],
        "fixed",
    );
    assert_eq!(w.sandbox(&repo, &["eval", "x"]).code, 0);
    w.git(&repo, &["switch", "-q", "main"]);
    assert_eq!(w.sandbox(&repo, &["promote", "x"]).code, 0);
    let alerts = w.alerts_received();
    let kinds: Vec<&str> = alerts.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["eval.changed", "experiment.promoted"], "{alerts:?}");
    assert_eq!(alerts[0]["data"]["from"], "NOT_READY");
    assert_eq!(alerts[0]["data"]["experiment"], "x");
    assert_eq!(alerts[1]["data"]["target"], "main");
}

#[test]
fn a_regression_inside_one_range_is_news_and_a_note_written_again_is_not() {
    let w = World::new();
    w.alerts_to_file();
    let repo = w.new_repo("range");
    let base = w.commit(&repo, &[("README.md", "a\n")], "base");
    let good = w.commit(&repo, &[("README.md", "b\n")], "good");
    let bad = w.commit(&repo, &[("tests/test_more.py", FAILING)], "broken");
    // Both in one batch: the parent's pass is found among the results written with it.
    assert_eq!(
        w.sandbox(&repo, &["run", "-j", "1", &format!("{base}..HEAD")])
            .code,
        1
    );
    let got = w.alerts_received();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["data"]["commit"], bad.as_str());
    assert_eq!(got[0]["data"]["parent"], good.as_str());
    // The note dropped by a writer that does not compare-and-swap, then written again from the
    // index: the same result, no new alert.
    w.git(&repo, &["notes", "--ref", "sandbox", "remove", &bad]);
    assert_eq!(w.sandbox(&repo, &["run", &bad]).code, 1);
    assert!(w.note(&repo, &bad).is_some(), "written again");
    assert_eq!(w.alerts_received().len(), 1, "no second alert");
}
