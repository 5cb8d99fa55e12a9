//! The daemon's HTTP API (`daemon --http`), over real HTTP on 127.0.0.1: every endpoint, every
//! role, bad input, and server-sent events resumed after a dropped connection.

use crate::common;

use common::http::{request, Reply};
use common::World;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Command;

fn get(addr: &str, path: &str, token: Option<&str>) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    request(addr, "GET", path, &headers, b"")
}

fn post(addr: &str, path: &str, token: Option<&str>, body: &Value) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    request(addr, "POST", path, &headers, body.to_string().as_bytes())
}

/// An error answer: its status, a one-line message, its kind.
fn error(r: &Reply, status: u16, needle: &str) {
    assert_eq!(r.status, status, "{r:?}");
    let v = r.json();
    let e = v["error"].as_str().unwrap();
    assert!(!e.contains('\n') && e.contains(needle), "{r:?}");
    assert!(v["kind"].is_string() && v["hints"].is_array(), "{r:?}");
}

struct Setup {
    w: World,
    repo: std::path::PathBuf,
    read: String,
    run: String,
    admin: String,
}

fn setup() -> Setup {
    let w = World::new();
    let repo = w.new_repo("api");
    for name in ["fast", "doomed"] {
        let o = w.sandbox(&repo, &["experiment", "start", name]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    w.git(&repo, &["switch", "-q", "experiment/fast"]);
    w.commit(
        &repo,
        &[(
            "tests/test_more.py",
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        self.assertTrue(True)\n",
        )],
        "More tests",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    let (read, run, admin) = (w.token("read"), w.token("run"), w.token("admin"));
    Setup {
        w,
        repo,
        read,
        run,
        admin,
    }
}

#[test]
fn the_runs_the_api_causes_are_recorded_with_the_api_trigger() {
    let w = World::new();
    let repo = w.new_repo("api-trigger");
    // Nothing watched: only what the API asks for runs.
    let toml = "[test]\ncommand = \"python3 -m unittest discover -s tests\"\n[watch]\nbranches = [\"nothing\"]\n";
    w.commit(&repo, &[(".sandbox.toml", toml)], "Watch nothing");
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "agent"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/agent"]);
    w.commit(
        &repo,
        &[("tests/test_more.py", "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        pass\n")],
        "More tests",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    assert!(w.note(&repo, "experiment/agent").is_none());
    let run = w.token("run");
    let (_d, addr) = w.serve();
    let ev = post(
        &addr,
        "/api/v1/experiments/api-trigger/agent/eval",
        Some(&run),
        &json!({}),
    );
    assert_eq!(ev.status, 200, "{ev:?}");
    for rev in ["experiment/agent", "main"] {
        let note = w.note(&repo, rev).unwrap();
        assert_eq!(note["trigger"], "api", "{rev}: {note}");
    }
}

#[test]
fn every_endpoint_by_role_and_bad_input() {
    let s = setup();
    let (_d, addr) = s.w.serve();
    let a = addr.as_str();
    let (read, run, admin) = (
        Some(s.read.as_str()),
        Some(s.run.as_str()),
        Some(s.admin.as_str()),
    );
    let main = s.w.git(&s.repo, &["rev-parse", "main"]).trim().to_string();

    // The daemons serving this index, and the queue. The daemon writes its row at its first
    // heartbeat, which may come just after it starts serving.
    assert!(
        s.w.wait_until(10, || get(a, "/api/v1/daemons", read).json()["daemons"][0]
            .is_object()),
        "the daemon never showed in /api/v1/daemons"
    );
    let ds = get(a, "/api/v1/daemons", read).json();
    let me = &ds["daemons"][0];
    assert_eq!(me["state"], "running", "{ds}");
    assert_eq!(me["workers"], 1);
    assert_eq!(me["http"], a);
    assert!(!me["host"].as_str().unwrap().is_empty());
    let status = s.w.sandbox(&s.w.work(), &["status", "--json"]).json();
    assert_eq!(status["daemons"][0]["state"], "running", "{status}");

    // Only health and the description answer without a token.
    assert_eq!(get(a, "/api/v1/health", None).json()["status"], "ok");
    let doc = get(a, "/api/v1/openapi.json", None).json();
    assert_eq!(doc["openapi"], "3.1.0");
    let promote = &doc["paths"]["/api/v1/experiments/{repo}/{name}/promote"]["post"];
    assert!(promote["responses"]["409"].is_object(), "{promote}");
    assert!(
        doc["paths"]["/api/v1/runs"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .len()
            >= 4
    );
    error(&get(a, "/api/v1/repositories", None), 401, "token");
    error(
        &get(a, "/api/v1/repositories", Some("gsbx_not_a_token")),
        401,
        "token",
    );
    let repos = get(a, "/api/v1/repositories", read).json();
    assert_eq!(repos["total"], 1);
    let id = repos["repositories"][0]["repository_id"]
        .as_str()
        .unwrap()
        .to_string();
    // One repository, by id or name: the list's element, with phase one's recall (no run yet
    // had a probe: none of none).
    error(&get(a, "/api/v1/repositories/api", None), 401, "token");
    for key in [id.as_str(), "api"] {
        let one = get(a, &format!("/api/v1/repositories/{key}"), read);
        assert_eq!(one.status, 200, "{one:?}");
        let one = one.json();
        for (k, v) in repos["repositories"][0].as_object().unwrap() {
            assert_eq!(&one[k], v, "{k}: {one}\nthe list's: {repos}");
        }
        assert_eq!(one["name"], "api", "{one}");
        let none = json!({"caught": 0, "of": 0, "share": null});
        assert_eq!(one["recall"], json!({"commits": none, "tests": none}));
    }
    assert!(doc["paths"]["/api/v1/repositories/{repo}"]["get"].is_object());

    // Queueing needs `run`; the daemon runs it; the record is served.
    error(
        &post(
            a,
            "/api/v1/runs",
            read,
            &json!({"repo": "api", "revision": "main"}),
        ),
        403,
        "needs a run token",
    );
    let queued = post(
        a,
        "/api/v1/runs",
        run,
        &json!({"repo": "api", "revision": "main"}),
    );
    assert_eq!(queued.status, 202, "{queued:?}");
    assert_eq!(queued.json()["commit"], main.as_str());
    let path = format!("/api/v1/commits/{id}/{main}");
    assert!(
        s.w.wait_until(120, || get(a, &path, read).status == 200),
        "main was never run"
    );
    let record = get(a, &path, read).json();
    assert_eq!(record["status"], "passed");
    assert_eq!(record["commit"], main.as_str());
    // Asking again is answered from the result at once.
    let again = post(
        a,
        "/api/v1/runs",
        run,
        &json!({"repo": id, "revision": "main"}),
    );
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.json()["cached"], true);
    // A revision that cannot name a commit is bad input, as GET /commits says; one that names
    // nothing is 404.
    let tree = post(
        a,
        "/api/v1/runs",
        run,
        &json!({"repo": "api", "revision": "main^{tree}"}),
    );
    error(&tree, 400, "main^{tree}");
    error(
        &get(a, &format!("/api/v1/commits/{id}/main^{{tree}}"), read),
        400,
        "tree",
    );
    let nowhere = json!({"repo": "api", "revision": "nowhere"});
    error(&post(a, "/api/v1/runs", run, &nowhere), 404, "nowhere");

    // Runs page by id; the log pages by line.
    let page = get(a, "/api/v1/runs?repo=api&limit=1", read).json();
    let run_id = page["runs"][0]["id"].as_i64().unwrap();
    assert_eq!(page["next"], run_id);
    assert_eq!(page["runs"][0]["repository"], "api");
    let none = get(a, &format!("/api/v1/runs?since={run_id}"), read).json();
    assert!(none["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["id"].as_i64().unwrap() > run_id));
    let failed = get(a, "/api/v1/runs?status=failed", read).json();
    assert_eq!(failed["runs"].as_array().unwrap().len(), 0);
    let log = get(a, &format!("/api/v1/runs/{run_id}/log?limit=2"), read).json();
    assert_eq!(log["page"]["lines"].as_array().unwrap().len(), 2);
    assert_eq!(log["page"]["next_offset"], 2);
    let grep = get(a, &format!("/api/v1/runs/{run_id}/log?grep=ok"), read).json();
    assert!(grep["page"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["text"].as_str().unwrap().contains("ok")));

    // Flaky tests and quarantines: none yet, then one quarantined from the command line.
    let flaky = get(a, &format!("/api/v1/repositories/{id}/flaky"), read).json();
    assert_eq!(
        (flaky["total"].clone(), flaky["days"].clone()),
        (json!(0), json!(30))
    );
    let o =
        s.w.sandbox(&s.repo, &["flaky", "quarantine", "tests/test_a.py::test_x"]);
    assert_eq!(o.code, 0, "{o:?}");
    let flaky = get(a, "/api/v1/repositories/api/flaky?days=7", read).json();
    assert_eq!(
        flaky["tests"][0]["name"], "tests/test_a.py::test_x",
        "{flaky}"
    );
    assert_eq!(flaky["tests"][0]["state"], "quarantined", "{flaky}");
    error(
        &get(a, "/api/v1/repositories/api/flaky?days=0", read),
        400,
        "days",
    );
    error(
        &get(a, "/api/v1/repositories/api/flaky?weeks=1", read),
        400,
        "weeks",
    );
    error(
        &get(a, "/api/v1/repositories/nowhere/flaky", read),
        404,
        "nowhere",
    );

    // Experiments: ranked, one, evaluated (`run`), promoted and killed (`admin`).
    let ranked = get(a, &format!("/api/v1/repositories/{id}/experiments"), read).json();
    let names: Vec<&str> = ranked["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{ranked}");
    assert_eq!(ranked["production"]["commit"], main.as_str());
    let one = get(a, "/api/v1/experiments/api/fast", read).json();
    assert_eq!(one["name"], "fast");
    error(
        &get(a, "/api/v1/experiments/api/nobody", read),
        404,
        "nobody",
    );
    error(
        &post(a, "/api/v1/experiments/api/fast/eval", read, &json!({})),
        403,
        "run token",
    );
    let ev = post(a, "/api/v1/experiments/api/fast/eval", run, &json!({}));
    assert_eq!(ev.status, 200, "{ev:?}");
    assert_eq!(ev.json()["recommendation"], "STRONGLY_RECOMMEND");
    error(
        &post(
            a,
            "/api/v1/experiments/api/fast/promote",
            run,
            &json!({"dry_run": true}),
        ),
        403,
        "admin token",
    );
    let dry = post(
        a,
        "/api/v1/experiments/api/fast/promote",
        admin,
        &json!({"dry_run": true}),
    );
    assert_eq!(dry.status, 200, "{dry:?}");
    assert_eq!(dry.json()["dry_run"], true);
    assert_eq!(
        s.w.git(&s.repo, &["rev-parse", "main"]).trim(),
        main,
        "a dry run moved main"
    );
    let bad = post(
        a,
        "/api/v1/experiments/api/fast/promote",
        admin,
        &json!({"strategy": "yolo"}),
    );
    error(&bad, 400, "yolo");
    let killed = post(a, "/api/v1/experiments/api/doomed/kill", admin, &json!({}));
    assert_eq!(killed.status, 200, "{killed:?}");
    assert_eq!(killed.json()["archive"], "refs/sandbox/archive/doomed");
    error(
        &post(a, "/api/v1/experiments/api/doomed/kill", admin, &json!({})),
        400,
        "killed",
    );

    // Creating a repository is `admin`'s, under the data dir, by a name only.
    error(
        &post(a, "/api/v1/repositories", run, &json!({"name": "second"})),
        403,
        "admin token",
    );
    let made = post(a, "/api/v1/repositories", admin, &json!({"name": "second"}));
    assert_eq!(made.status, 201, "{made:?}");
    assert!(std::path::Path::new(made.json()["path"].as_str().unwrap()).starts_with(s.w.data()));
    error(
        &post(
            a,
            "/api/v1/repositories",
            admin,
            &json!({"name": "../escape"}),
        ),
        400,
        "slash",
    );
    error(
        &post(
            a,
            "/api/v1/repositories",
            admin,
            &json!({"name": "x", "path": "/etc"}),
        ),
        400,
        "path",
    );

    // Events, filtered and paged.
    let ev = get(a, "/api/v1/events?kind=experiment.&repo=api", read).json();
    let kinds: Vec<&str> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"experiment.evaluated") && kinds.contains(&"experiment.killed"),
        "{kinds:?}"
    );

    // Bad input: unknown ids 404, bad parameters 400, bodies over the cap 413.
    error(&get(a, "/api/v1/runs?limit=abc", read), 400, "limit");
    error(&get(a, "/api/v1/runs?limit=0", read), 400, "limit");
    error(&get(a, "/api/v1/runs?bogus=1", read), 400, "bogus");
    error(&get(a, "/api/v1/runs/999999/log", read), 404, "999999");
    error(
        &get(a, "/api/v1/commits/nowhere/HEAD", read),
        404,
        "nowhere",
    );
    error(
        &get(a, &format!("/api/v1/commits/{id}/deadbeef"), read),
        404,
        "deadbeef",
    );
    let unknown = get(a, "/api/v1/repositories/nowhere/experiments", read);
    error(&unknown, 404, "nowhere");
    let summary = get(a, "/api/v1/repositories/nowhere", read);
    assert_eq!(
        (summary.status, summary.json()),
        (unknown.status, unknown.json()),
        "an unknown repository is the same 404 on each {{repo}} route"
    );
    let broken = request(
        a,
        "POST",
        "/api/v1/runs",
        &[
            ("Authorization", &format!("Bearer {}", s.run)),
            ("Content-Type", "application/json"),
        ],
        b"{\"repo\": ",
    );
    error(&broken, 400, "body");
    let big = vec![b' '; 70 * 1024];
    let r = request(
        a,
        "POST",
        "/api/v1/runs",
        &[
            ("Authorization", &format!("Bearer {}", s.run)),
            ("Content-Type", "application/json"),
        ],
        &big,
    );
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(get(a, "/api/v1/nothing-here", read).status, 404);

    // A revoked token stops working at once.
    let o = s.w.sandbox(&s.w.work(), &["token", "list", "--json"]);
    let read_name = o.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["role"] == "read")
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.w.sandbox(&s.w.work(), &["token", "revoke", &read_name])
            .code,
        0
    );
    error(&get(a, "/api/v1/repositories", read), 401, "token");
    // The token file keeps hashes only, readable by its owner alone.
    let file = s.w.path("config/git-sandbox/tokens.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&s.admin) && !text.contains(&s.run), "{text}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o077,
        0
    );
}

#[test]
fn a_run_requested_until_its_first_failure_answers_before_the_suite_ends() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("first");
    let commit = w.fails_fast_then_slow(&repo, 4.0);
    let (read, run) = (w.token("read"), w.token("run"));
    let (read, run) = (Some(read.as_str()), Some(run.as_str()));
    // Two workers: the probe beside the run takes the slot the run leaves free.
    let (_d, addr) = w.serve_with_workers(2);
    let a = addr.as_str();
    let ask = |extra: Value| {
        let mut b = json!({"repo": "first", "revision": commit});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        post(a, "/api/v1/runs", run, &b)
    };
    error(&ask(json!({"until": "soon"})), 400, "first_failure");
    error(&ask(json!({"timeout_seconds": 5})), 400, "until");
    error(
        &ask(json!({"until": "result", "timeout_seconds": 601})),
        400,
        "600",
    );

    let early = ask(json!({"until": "first_failure", "timeout_seconds": 120}));
    assert_eq!(early.status, 200, "{early:?}");
    let v = early.json();
    assert_eq!(v["provisional"], true, "{v}");
    assert_eq!(v["state"], "running", "{v}");
    assert!(v["result"].is_null(), "{v}");
    let test = v["first_failure"]["test"].as_str().unwrap().to_string();
    assert_eq!(test, "tests/test_c.py::test_fc", "{v}");
    // Known at the failing test, from the probe of test_c.py beside the suite: the suite's
    // own run (its sleeping tests) has not ended.
    let log = w.tests_log_so_far(&commit);
    assert!(!log.contains(" passed in "), "{log}");
    // Phase two (16 s of sleeping tests) still runs: no record yet.
    let path = format!("/api/v1/commits/first/{commit}");
    assert_eq!(get(a, &path, read).status, 404);
    // The event log and the dashboard's feed name the failing test.
    let events = get(a, "/api/v1/events?kind=run.first_failure", read).json();
    assert_eq!(
        events["events"][0]["data"]["test"],
        test.as_str(),
        "{events}"
    );
    let home = get(a, "/", read);
    assert!(home.body.contains(&test), "{home:?}");

    // The whole record comes later, and is the whole suite's.
    assert!(
        w.wait_until(120, || get(a, &path, read).status == 200),
        "the run never ended"
    );
    let record = get(a, &path, read).json();
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["tests"]["total"], 6, "{record}");
    let first = record["tests"]["first_failure_ms"].as_u64().unwrap();
    let one = record["tests"]["phases"][0]["duration_ms"]
        .as_u64()
        .unwrap();
    assert!(
        first + 3000 < one,
        "known 4 s before phase one ended: {record}"
    );
    assert_eq!(
        record["tests"]["phases"].as_array().unwrap().len(),
        2,
        "{record}"
    );
    let again = ask(json!({"until": "first_failure"}));
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.json()["cached"], true, "{again:?}");

    // The repository's summary is its element of the list, with phase one's recall: the faulty
    // commit's probe found test_fc, its one failing test.
    let list = get(a, "/api/v1/repositories", read).json();
    let one = get(a, "/api/v1/repositories/first", read).json();
    let element = list["repositories"][0].as_object().unwrap();
    for (k, v) in element {
        assert_eq!(&one[k], v, "{k}: {one}\nthe list's: {list}");
    }
    assert_eq!(one["failed_runs"], 1, "{one}");
    assert_eq!(
        one["recall"],
        json!({
            "commits": {"caught": 1, "of": 1, "share": 1.0},
            "tests": {"caught": 1, "of": 1, "share": 1.0},
        }),
        "{one}"
    );
}

/// Read server-sent events until `n` have come; their ids and parsed data.
fn read_events(r: &mut BufReader<std::net::TcpStream>, n: usize) -> Vec<(i64, Value)> {
    let mut out = Vec::new();
    let (mut id, mut data) = (None, None);
    let mut line = String::new();
    while out.len() < n {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let l = line.trim_end();
        if let Some(v) = l.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = l.strip_prefix("data:") {
            data = serde_json::from_str(v.trim()).ok();
        } else if l.is_empty() {
            if let (Some(i), Some(d)) = (id.take(), data.take()) {
                out.push((i, d));
            }
        }
    }
    out
}

fn open_stream(
    addr: &str,
    token: &str,
    last: Option<i64>,
    since: Option<i64>,
) -> BufReader<std::net::TcpStream> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "GET /api/v1/events/stream{} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n",
        since.map(|s| format!("?since={s}")).unwrap_or_default()
    );
    if let Some(l) = last {
        head.push_str(&format!("Last-Event-ID: {l}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    // Skip the head; chunk-size lines of the chunked body are neither `id:` nor `data:`.
    let mut l = String::new();
    loop {
        l.clear();
        r.read_line(&mut l).unwrap();
        if l == "\r\n" {
            break;
        }
    }
    r
}

#[test]
fn the_event_stream_resumes_after_a_dropped_connection() {
    let s = setup();
    let (_d, addr) = s.w.serve();
    let a = addr.as_str();
    // From the start of the log: the events so far, in order.
    let mut first = open_stream(a, &s.read, None, Some(0));
    let got = read_events(&mut first, 4);
    assert_eq!(got.len(), 4);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{got:?}");
    assert_eq!(got[0].1["id"], got[0].0);
    let last = got[3].0;
    drop(first);

    // While nobody listens, more happens.
    let queued = post(
        a,
        "/api/v1/runs",
        Some(&s.run),
        &json!({"repo": "api", "revision": "main"}),
    );
    assert_eq!(queued.status, 202, "{queued:?}");
    let main = s.w.git(&s.repo, &["rev-parse", "main"]).trim().to_string();
    assert!(s.w.wait_until(120, || get(
        a,
        &format!("/api/v1/commits/api/{main}"),
        Some(&s.read)
    )
    .status
        == 200));

    // Reconnecting with Last-Event-ID gives exactly what came after it, nothing twice.
    let expected: Vec<i64> = get(
        a,
        &format!("/api/v1/events?since={last}&limit=500"),
        Some(&s.read),
    )
    .json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert!(expected.len() >= 3, "{expected:?}");
    let mut second = open_stream(a, &s.read, Some(last), None);
    let resumed: Vec<i64> = read_events(&mut second, expected.len())
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(resumed, expected);

    // A new connection without a cursor starts from now, and sees the next event as it happens.
    let mut live = open_stream(a, &s.read, None, None);
    let o = s.w.sandbox(&s.repo, &["experiment", "start", "later"]);
    assert_eq!(o.code, 0, "{o:?}");
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|(_, e): &(i64, Value)| e["kind"] == "experiment.started")
    {
        let next = read_events(&mut live, 1);
        assert!(!next.is_empty() && seen.len() < 50, "{seen:?}");
        seen.extend(next);
    }
    assert!(seen[0].0 > *expected.last().unwrap(), "{seen:?}");
}

#[test]
fn a_listener_others_can_reach_needs_a_token() {
    let w = World::new();
    // Refused before anything is bound: no listener on other interfaces is ever opened here.
    let o = w.sandbox(&w.work(), &["daemon", "--http", "0.0.0.0:0"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("no API token exists"), "{problem}");
    assert!(hints[0].contains("git sandbox token create"), "{hints:?}");
    let o = w.sandbox(&w.work(), &["token", "create", "--role", "boss"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(o.error().0, "invalid --role \"boss\"");
    let o = w.sandbox(&w.work(), &["token", "revoke", "nobody"]);
    assert_eq!(o.code, 2, "{o:?}");
}

#[test]
fn schemathesis_finds_no_server_error_anywhere_the_description_allows() {
    let schemathesis = common::tools::venv_bin("schemathesis").join("schemathesis");
    let s = setup();
    let (_d, addr) = s.w.serve();
    // Real names for the path parameters, so that generated requests reach the handlers.
    let config = s.w.path("schemathesis.toml");
    std::fs::write(
        &config,
        "[parameters]\n\"path.repo\" = \"api\"\n\"path.name\" = \"doomed\"\n\"path.id\" = 1\n\"path.sha\" = \"main\"\n",
    )
    .unwrap();
    let o = Command::new(schemathesis)
        .arg("--config-file")
        .arg(&config)
        .args(["run", &format!("http://{addr}/api/v1/openapi.json")])
        .args(["-H", &format!("Authorization: Bearer {}", s.admin)])
        .args(["--checks", "not_a_server_error"])
        // An endless stream has no answer to wait for; tests/services/api.rs reads it above.
        .args(["--exclude-path", "/api/v1/events/stream"])
        .args([
            "-n",
            "20",
            "--seed",
            "7",
            "--no-color",
            "--request-timeout",
            "120",
        ])
        .current_dir(s.w.work())
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "schemathesis found failures:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("passed"), "{out}");
}

#[test]
fn a_workspace_is_made_worked_in_and_committed_over_http_by_role() {
    let s = setup();
    let (_d, addr) = s.w.serve();
    let a = addr.as_str();
    let base = "/api/v1/workspaces/api";
    let with = |method: &str, path: &str, token: &str, body: &Value| {
        let auth = format!("Bearer {token}");
        let headers = vec![
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        request(a, method, path, &headers, body.to_string().as_bytes())
    };
    // Making one needs `run`.
    let r = post(a, base, Some(&s.read), &json!({"name": "agent"}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = post(a, base, Some(&s.run), &json!({"name": "agent"}));
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["branch"], "experiment/agent");
    let r = post(a, base, Some(&s.run), &json!({"name": "agent"}));
    error(&r, 400, "already exists");

    // Write, read, run, diff.
    let file = format!("{base}/agent/files/notes/todo.txt");
    let r = with("PUT", &file, &s.read, &json!({"content": "no"}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = with("PUT", &file, &s.run, &json!({"content": "one\ntwo\n"}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["lines_added"], 2, "{r:?}");
    let r = get(a, &file, Some(&s.read));
    assert_eq!(r.json()["content"], "one\ntwo\n", "{r:?}");
    let r = get(a, &format!("{base}/agent/files/notes"), Some(&s.read));
    assert_eq!(r.json()["entries"][0]["name"], "todo.txt", "{r:?}");
    let r = with(
        "PUT",
        &format!("{base}/agent/files/..%2Fescape"),
        &s.run,
        &json!({"content": "x"}),
    );
    error(&r, 400, "climbs out");
    let exec = format!("{base}/agent/exec");
    let r = post(a, &exec, Some(&s.read), &json!({"command": ["true"]}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = post(
        a,
        &exec,
        Some(&s.run),
        &json!({"command": ["sh", "-c", "cat notes/todo.txt; echo three >> notes/todo.txt"]}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(
        (v["exit_code"].clone(), v["output"].clone()),
        (json!(0), json!("one\ntwo\n")),
        "{v}"
    );
    assert_eq!(v["edited"][0]["path"], "notes/todo.txt", "{v}");
    let r = post(a, &exec, Some(&s.run), &json!({"command": []}));
    error(&r, 400, "command is empty");
    let r = get(a, &format!("{base}/agent/diff"), Some(&s.read));
    assert!(
        r.json()["patch"].as_str().unwrap().contains("+three"),
        "{r:?}"
    );

    // Commit (queued for its run), then removal needs `admin`.
    let r = post(
        a,
        &format!("{base}/agent/commit"),
        Some(&s.run),
        &json!({"message": "notes"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let commit = r.json()["commit"].as_str().unwrap().to_string();
    assert_eq!(
        s.w.git(&s.repo, &["rev-parse", "experiment/agent"]).trim(),
        commit
    );
    let r = get(a, base, Some(&s.read));
    assert_eq!(r.json()["workspaces"][0]["base"], commit.as_str(), "{r:?}");
    let one = format!("{base}/agent");
    let r = with("DELETE", &one, &s.run, &json!({}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = with("DELETE", &one, &s.admin, &json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let r = get(a, &one, Some(&s.read));
    assert_eq!(r.status, 404, "{r:?}");
}
