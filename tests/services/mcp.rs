//! `git sandbox mcp` driven by real MCP clients: the official Python SDK (`mcp` on PyPI,
//! installed by ./test) runs a whole agent's session (tests/services/mcp/agent.py), and raw JSON-RPC
//! lines check that malformed input leaves the server running.

use crate::common;

use common::fake_github::FakeGitHub;
use common::{World, BIN};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn an_agent_works_through_a_whole_experiment_over_mcp() {
    let python = common::tools::python("mcp.client.stdio");
    let w = World::new();
    let repo = w.new_repo("agentwork");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/mcp/agent.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(BIN).arg(&repo).current_dir(&repo);
    w.apply_env(&mut cmd);
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "the agent's session failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    // It ran every step and reported its answers' sizes.
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap();
    assert!(report["answers"].as_u64().unwrap() > 40, "{report}");
}

#[test]
fn two_agents_work_in_workspaces_over_mcp_and_one_is_promoted() {
    let python = common::tools::python("mcp.client.stdio");
    let w = World::new();
    let repo = w.new_repo("workspaces");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/services/mcp/workspace_agent.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(BIN).arg(&repo).current_dir(&repo);
    w.apply_env(&mut cmd);
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "the agents' sessions failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(stdout.contains("\"agents\": 2"), "{stdout}");
}

/// A server on stdin/stdout with raw JSON-RPC lines.
struct Raw {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Raw {
    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn reply(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }
}

impl Raw {
    fn start(w: &World, dir: &std::path::Path) -> Raw {
        Raw::start_env(w, dir, &[])
    }

    fn start_env(w: &World, dir: &std::path::Path, env: &[(&str, &str)]) -> Raw {
        let mut cmd = Command::new(BIN);
        cmd.arg("mcp").current_dir(dir);
        w.apply_env(&mut cmd);
        cmd.envs(env.iter().copied());
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut s = Raw { child, out };
        s.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
        let init = s.reply();
        assert_eq!(
            init["result"]["serverInfo"]["name"], "git-sandbox",
            "{init}"
        );
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    /// Call a tool and return its answer's JSON (panics on a tool error).
    fn tool(&mut self, id: i64, name: &str, args: serde_json::Value) -> serde_json::Value {
        let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                     "params": {"name": name, "arguments": args}});
        self.send(&req.to_string());
        loop {
            let r = self.reply();
            if r["id"] == id {
                let text = r["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                assert_ne!(r["result"]["isError"], true, "{name}: {text}");
                return serde_json::from_str(text).unwrap_or_else(|_| panic!("{r}"));
            }
        }
    }
}

#[test]
fn a_run_cut_off_by_a_killed_server_is_run_by_the_next_one() {
    let w = World::new();
    let repo = w.new_repo("killed");
    let toml = std::fs::read_to_string(repo.join(".sandbox.toml")).unwrap();
    let slow = toml.replace(
        "command = \"python3 -m unittest discover -s tests -v\"",
        "command = \"sleep 4 && python3 -m unittest discover -s tests -v\"",
    );
    assert_ne!(slow, toml);
    let commit = w.commit(&repo, &[(".sandbox.toml", &slow)], "Slow tests");

    let mut first = Raw::start(&w, &repo);
    // The hook queued it already; asking again is no second job.
    let asked = first.tool(1, "run_request", serde_json::json!({"revision": commit}));
    assert_eq!(asked["queued"], false, "{asked}");
    assert!(
        asked["state"] == "pending" || asked["state"] == "running",
        "{asked}"
    );
    // Once it runs, kill the server (and its run) with SIGKILL.
    let running = w.wait_until(60, || {
        first.tool(
            2,
            "run_wait",
            serde_json::json!({"revision": commit, "timeout_seconds": 0}),
        )["state"]
            == "running"
    });
    assert!(running, "the server never started the run");
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    // The next server takes the queue over and runs it from the start.
    let mut second = Raw::start(&w, &repo);
    let done = second.tool(
        1,
        "run_wait",
        serde_json::json!({"revision": commit, "timeout_seconds": 120}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["result"]["status"], "passed", "{done}");
    assert_eq!(w.note(&repo, &commit).unwrap()["status"], "passed");
    drop(second.child.stdin.take());
    assert!(second.child.wait().unwrap().success());
}

#[test]
fn the_runs_an_agent_asks_for_are_recorded_with_the_mcp_trigger() {
    let w = World::new();
    let repo = w.new_repo("mcp-trigger");
    // Nothing watched: only what the agent asks for runs (the server's queue stays empty).
    let toml = "[test]\ncommand = \"python3 -m unittest discover -s tests\"\n[watch]\nbranches = [\"nothing\"]\n";
    w.commit(&repo, &[(".sandbox.toml", toml)], "Watch nothing");
    let o = w.sandbox(&repo, &["experiment", "start", "agent"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.git(&repo, &["switch", "-q", "experiment/agent"]);
    w.commit(
        &repo,
        &[("tests/test_more.py", "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        pass\n")],
        "More tests",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    assert!(w.note(&repo, "experiment/agent").is_none());

    let mut s = Raw::start(&w, &repo);
    let ev = s.tool(1, "experiment_eval", serde_json::json!({"name": "agent"}));
    assert_eq!(ev["recommendation"], "STRONGLY_RECOMMEND", "{ev}");
    for rev in ["experiment/agent", "main"] {
        let note = w.note(&repo, rev).unwrap();
        assert_eq!(note["trigger"], "mcp", "{rev}: {note}");
    }
}

#[test]
fn log_read_after_a_failed_setup_step_reads_the_setup_steps_output() {
    let w = World::new();
    let repo = w.new_repo("mcp-setup");
    let toml = "[test]\nsetup = \"echo fetching deps && exit 3\"\ncommand = \"true\"\n[analysis]\nenabled = false\n";
    w.commit(&repo, &[(".sandbox.toml", toml)], "A broken setup step");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let mut s = Raw::start(&w, &repo);
    for (id, args) in [
        (1, serde_json::json!({"revision": "HEAD"})),
        (2, serde_json::json!({"revision": "HEAD", "check": "setup"})),
    ] {
        let page = s.tool(id, "log_read", args);
        assert_eq!(page["setup_step"], true, "{page}");
        let text: Vec<&str> = page["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert!(text.contains(&"fetching deps"), "{page}");
    }
}

#[test]
fn run_wait_until_first_failure_answers_while_the_rest_of_the_suite_runs() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("mcp-first");
    let commit = w.fails_fast_then_slow(&repo, 4.0);
    let mut s = Raw::start(&w, &repo);

    // A value run_wait does not know is refused in one line that names the ones it does.
    let bad = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "run_wait", "arguments": {"revision": commit, "until": "soon"}}});
    s.send(&bad.to_string());
    let bad = loop {
        let r = s.reply();
        if r["id"] == 1 {
            break r;
        }
    };
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let text = bad["result"]["content"][0]["text"].as_str().unwrap();
    let problem = text.lines().next().unwrap();
    assert!(
        problem.starts_with("error: bad arguments for run_wait: ")
            && problem.contains("`soon`")
            && problem.contains("first_failure"),
        "{text}"
    );

    let asked = s.tool(2, "run_request", serde_json::json!({"revision": commit}));
    assert_eq!(asked["queued"], true, "{asked}");
    let early = s.tool(
        3,
        "run_wait",
        serde_json::json!({"revision": commit, "until": "first_failure", "timeout_seconds": 120}),
    );
    assert_eq!(early["provisional"], true, "{early}");
    assert_eq!(early["state"], "running", "{early}");
    assert!(early.get("result").is_none(), "{early}");
    assert_eq!(
        early["first_failure"]["test"], "tests/test_c.py::test_fc",
        "{early}"
    );
    // Known at the failing test, from the probe of test_c.py beside the suite: the suite's
    // own run (its sleeping tests) has not ended.
    let log = w.tests_log_so_far(&commit);
    assert!(!log.contains(" passed in "), "{log}");
    // Phase two (16 s of sleeping tests) has not ended.
    let now = s.tool(
        4,
        "run_wait",
        serde_json::json!({"revision": commit, "timeout_seconds": 0}),
    );
    assert_eq!(now["state"], "running", "{now}");

    // The whole result comes later, and is the whole suite's.
    let done = s.tool(
        5,
        "run_wait",
        serde_json::json!({"revision": commit, "timeout_seconds": 120}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["result"]["status"], "failed", "{done}");
    assert!(done.get("provisional").is_none(), "{done}");
    let note = w.note(&repo, &commit).unwrap();
    let t = &note["tests"];
    assert_eq!(
        (t["total"].clone(), t["failed"].clone()),
        (6.into(), 1.into()),
        "{note}"
    );
    assert_eq!(t["phases"].as_array().unwrap().len(), 2, "{note}");
    let (first, one) = (&t["first_failure_ms"], &t["phases"][0]["duration_ms"]);
    assert!(
        first.as_u64().unwrap() + 3000 < one.as_u64().unwrap(),
        "known 4 s before phase one ended: {note}"
    );
    assert_eq!(early["first_failure"]["ms"], *first, "{early}");
    // Asked for a result that is there, `until` answers with it at once.
    let again = s.tool(
        6,
        "run_wait",
        serde_json::json!({"revision": commit, "until": "first_failure", "timeout_seconds": 0}),
    );
    assert_eq!(again["state"], "done", "{again}");
}

#[test]
fn exec_passes_each_argument_as_one_word_and_refuses_a_nul() {
    let w = World::new();
    let repo = w.new_repo("mcp-exec-words");
    let mut s = Raw::start(&w, &repo);
    let words = ["two words", "it's", "\"q\"", "$HOME", "a\nb", "*", "", "é"];
    let mut command = vec!["printf", "[%s]"];
    command.extend(words);
    let r = s.tool(
        1,
        "exec",
        serde_json::json!({"revision": "HEAD", "command": command}),
    );
    let want: String = words.iter().map(|w| format!("[{w}]")).collect();
    assert_eq!(
        (r["exit_code"].as_i64(), r["output"].as_str()),
        (Some(0), Some(want.as_str())),
        "{r}"
    );

    // A NUL cannot be put on a command line: the call says so (it used to run an empty command
    // and answer exit code 0).
    let req = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "exec", "arguments": {"revision": "HEAD", "command": ["false", "a\u{0}b"]}}});
    s.send(&req.to_string());
    let r = loop {
        let r = s.reply();
        if r["id"] == 2 {
            break r;
        }
    };
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("error: ") && text.contains("NUL"),
        "{text}"
    );
}

#[test]
fn malformed_json_rpc_unknown_tools_and_wrong_types_leave_the_server_running() {
    let w = World::new();
    let repo = w.new_repo("raw");
    let mut s = Raw::start(&w, &repo);

    // Not JSON at all, JSON that is no JSON-RPC message, a truncated object.
    s.send("this is not json");
    s.send(r#"{"hello": "world"}"#);
    s.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/li"#);
    // An unknown tool, and arguments of the wrong type.
    s.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}"#);
    s.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"log_read","arguments":{"revision":["main"],"limit":"ten"}}}"#);
    s.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    let mut by_id = std::collections::BTreeMap::new();
    while by_id.len() < 3 {
        let r = s.reply();
        if let Some(id) = r["id"].as_i64() {
            by_id.insert(id, r);
        }
    }
    assert!(
        by_id[&3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rm_rf"),
        "{}",
        by_id[&3]
    );
    let bad = &by_id[&4]["result"];
    assert_eq!(bad["isError"], true, "{bad}");
    let text = bad["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("error: bad arguments for log_read: "),
        "{text}"
    );
    assert!(text.contains("\nhint: "), "{text}");
    assert_eq!(by_id[&5]["result"]["tools"].as_array().unwrap().len(), 26);

    // Closing stdin ends the server cleanly.
    drop(s.child.stdin.take());
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_resource_read_answers_each_kind_of_error_with_its_code() {
    let w = World::new();
    let repo = w.new_repo("kinds");
    let mut s = Raw::start(&w, &repo);
    let mut read = |id: i64, rev: &str| {
        let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
                                     "params": {"uri": format!("sandbox://kinds/result/{rev}")}});
        s.send(&req.to_string());
        loop {
            let r = s.reply();
            if r["id"] == id {
                return r["error"].clone();
            }
        }
    };
    // A revision that cannot name a commit is bad input (invalid params, as a tool's bad
    // arguments); one that names nothing, or a commit with no result, is not found.
    let tree = read(1, "main^{tree}");
    assert_eq!(tree["code"], -32602, "{tree}");
    assert!(tree["message"].as_str().unwrap().contains("tree"), "{tree}");
    let nowhere = read(2, "nowhere");
    assert_eq!(nowhere["code"], -32002, "{nowhere}");
    assert!(
        nowhere["message"].as_str().unwrap().contains("nowhere"),
        "{nowhere}"
    );
}

#[test]
fn the_server_refuses_to_start_outside_an_experiment_repository() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["mcp"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stdout.is_empty(), "{o:?}");
    assert!(o.stderr.starts_with("error: "), "{o:?}");
    assert!(o.stderr.contains("\nhint: "), "{o:?}");
    let o = w.sandbox(&w.work(), &["mcp", "--repo", "/nonexistent/place"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("/nonexistent/place"), "{o:?}");
}

#[test]
fn the_servers_runs_are_published_statuses_alerts_and_auto_push() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = w.new_repo("mcp-publish");
    // origin is on GitHub by its URL; git's insteadOf sends its pushes to a bare repository here.
    let root = w.path("gh-root");
    std::fs::create_dir_all(root.join("octo")).unwrap();
    w.git(&root.join("octo"), &["init", "-q", "--bare", "gh.git"]);
    w.git(
        &repo,
        &["remote", "add", "origin", "https://github.com/octo/gh.git"],
    );
    w.git(
        &repo,
        &[
            "config",
            &format!("url.{}/.insteadOf", root.display()),
            "https://github.com/",
        ],
    );
    let alerts = w.path("alerts.jsonl");
    w.user_config(&format!(
        "[github]\napi_url = \"{}\"\n[remote]\nauto_push = true\n[notify]\ncommand = \"cat >> {}; echo >> {}\"\n",
        gh.url(),
        alerts.display(),
        alerts.display()
    ));
    // The parent passes (no token here: no statuses for it).
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let bad = w.commit(
        &repo,
        &[(
            "tests/test_more.py",
            "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n",
        )],
        "Broken",
    );

    let mut s = Raw::start_env(&w, &repo, &[("GITHUB_TOKEN", "ghp_mcp_token_for_tests")]);
    let done = s.tool(
        1,
        "run_wait",
        serde_json::json!({"revision": bad, "timeout_seconds": 120}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["result"]["status"], "failed", "{done}");
    let statuses = || {
        gh.seen()
            .into_iter()
            .filter(|q| q.method == "POST" && q.path == format!("/repos/octo/gh/statuses/{bad}"))
            .count()
    };
    let regressed = || {
        w.alerts_received()
            .iter()
            .any(|a| a["kind"] == "run.regressed" && a["data"]["commit"] == bad.as_str())
    };
    let pushed = || {
        w.git_out(
            &root.join("octo/gh.git"),
            &["notes", "--ref=refs/notes/sandbox", "show", &bad],
            true,
        )
        .code
            == 0
    };
    let published = w.wait_until(30, || statuses() >= 2 && regressed() && pushed());
    assert!(
        published,
        "statuses posted: {}, regression alerted: {}, result pushed: {}",
        statuses(),
        regressed(),
        pushed()
    );
    drop(s.child.stdin.take());
    assert!(s.child.wait().unwrap().success());
}
