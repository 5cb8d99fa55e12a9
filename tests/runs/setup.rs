//! The setup step (`[test] setup`): run once per change of the tree's lockfiles, its output kept
//! as a layer under the tests of its branch (and, read-only, of branches that start from
//! production's), with the network only when the user's own config allows it.

use crate::common;

use common::World;
use serde_json::Value;
use std::path::Path;

fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    if let Some(w) = World::unprivileged() {
        out.push(("nobody", w));
    }
    out
}

/// A config whose setup stamps when it ran and copies the lockfile, and whose tests show both.
fn with_setup(setup: &str, command: &str) -> String {
    format!("[test]\nsetup = \"{setup}\"\ncommand = \"{command}\"\n[analysis]\nenabled = false\n")
}

const STAMPING: &str = "mkdir -p deps && cat /proc/sys/kernel/random/uuid > deps/stamp && cp package-lock.json deps/lock";
const SHOWING: &str = "cat deps/lock deps/stamp";

fn run(who: &str, w: &World, repo: &Path) -> Value {
    let o = w.sandbox(repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{who}: {o:?}");
    rec
}

fn how(rec: &Value) -> &str {
    rec["tests"]["setup"]["how"].as_str().unwrap()
}

fn lines(rec: &Value) -> Vec<String> {
    rec["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_setup_runs_once_per_lockfile_change_and_its_output_is_under_the_tests() {
    for (who, w) in worlds() {
        let repo = w.new_repo("setup");
        w.commit(
            &repo,
            &[
                (".sandbox.toml", &with_setup(STAMPING, SHOWING)),
                ("package-lock.json", "lock-1\n"),
            ],
            "a setup step",
        );
        let first = run(who, &w, &repo);
        assert_eq!(how(&first), "built", "{who}: {first}");
        let out = lines(&first);
        assert_eq!(out[0], "lock-1", "{who}: {first}");
        // A commit that leaves the lockfile alone reuses what the setup made.
        w.commit(&repo, &[("src.txt", "x")], "no new dependencies");
        let second = run(who, &w, &repo);
        assert_eq!(how(&second), "reused", "{who}: {second}");
        assert_eq!(lines(&second), out, "{who}: the same setup output");
        assert_eq!(
            second["tests"]["setup"]["key"],
            first["tests"]["setup"]["key"]
        );
        // A new lockfile runs it again.
        w.commit(
            &repo,
            &[("package-lock.json", "lock-2\n")],
            "new dependencies",
        );
        let third = run(who, &w, &repo);
        assert_eq!(how(&third), "built", "{who}: {third}");
        let out3 = lines(&third);
        assert_eq!(out3[0], "lock-2", "{who}");
        assert_ne!(out3[1], out[1], "{who}: ran afresh");
        // `exec` uses production's layer; the setup's output never reaches its stdout.
        let o = w.sandbox(&repo, &["exec", "HEAD", "--", "cat", "deps/lock"]);
        assert_eq!((o.code, o.stdout.as_str()), (0, "lock-2\n"), "{who}: {o:?}");
    }
}

#[test]
fn an_experiment_starts_from_productions_setup_and_never_changes_it() {
    let w = World::new();
    let repo = w.new_repo("setup-exp");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", &with_setup(STAMPING, SHOWING)),
            ("package-lock.json", "lock-1\n"),
        ],
        "a setup step",
    );
    let prod = lines(&run("root", &w, &repo));
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "deps"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/deps"]);
    w.commit(&repo, &[("a.txt", "1")], "same lockfile");
    let same = run("root", &w, &repo);
    assert_eq!(how(&same), "reused");
    assert_eq!(lines(&same), prod, "production's layer, read-only");
    w.commit(
        &repo,
        &[("package-lock.json", "lock-exp\n")],
        "own lockfile",
    );
    let own = run("root", &w, &repo);
    assert_eq!(how(&own), "built");
    assert_eq!(lines(&own)[0], "lock-exp");
    // Production's next run still has its own.
    w.git(&repo, &["switch", "-q", "main"]);
    w.commit(&repo, &[("b.txt", "1")], "production again");
    let again = run("root", &w, &repo);
    assert_eq!(how(&again), "reused");
    assert_eq!(lines(&again), prod);
}

#[test]
fn a_failing_setup_is_an_error_that_says_why_and_is_not_kept() {
    let w = World::new();
    let repo = w.new_repo("setup-fails");
    let head = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &with_setup(
                "mkdir -p deps && echo half > deps/x && echo npm ERR! no network && exit 3",
                "true",
            ),
        )],
        "a setup that fails",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{rec}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("the setup step `mkdir -p deps")
            && error.contains("exited with 3: npm ERR! no network")
            && error.contains("setup_network = true")
            && error.contains(&format!("{head}.setup.log")),
        "{error}"
    );
    assert!(!error.contains('\n'), "one line: {error}");
    // Nothing half-made is reused: the next run builds again (and fails again).
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.json()[0]["status"], "error", "{o:?}");
}

#[test]
fn the_setup_has_the_network_only_when_the_users_own_config_allows_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Through the proxy (the only way out), to a name the user maps to the listener.
    let connect = format!(
        "python3 -c 'import os, socket; h, p = os.environ[\\\"HTTP_PROXY\\\"].rsplit(\\\"/\\\", 1)[1].split(\\\":\\\"); s = socket.create_connection((h, int(p)), 3); s.sendall(b\\\"CONNECT local.test:{port} HTTP/1.1\\\\r\\\\n\\\\r\\\\n\\\"); assert b\\\" 200 \\\" in s.recv(100)' 2>/dev/null"
    );
    let w = World::new();
    let repo = w.new_repo("setup-net");
    // The repository asks for the network for its setup: it does not get it.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &format!(
                "{}[limits]\nsetup_network = true\n",
                with_setup(
                    &connect,
                    &format!("{connect} && echo test-online || echo test-offline")
                )
            ),
        )],
        "setup reaches a local server",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    assert!(
        rec["error"].as_str().unwrap().contains("has no network"),
        "{rec}"
    );
    // The user allows it: the setup reaches the server, the tests still cannot.
    let cfg = w.path("config/git-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "[limits]\nsetup_network = true\n[network]\nsetup_allow = [\"local.test:{port}\"]\n\
             resolve = {{ \"local.test\" = \"127.0.0.1\" }}\n"
        ),
    )
    .unwrap();
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{o:?}");
    assert_eq!(rec["tests"]["setup"]["network"], true, "{rec}");
    assert_eq!(rec["tests"]["output_tail"], "test-offline", "{rec}");
    drop(listener);
}

#[test]
fn the_build_step_runs_before_the_tests_for_every_tree_and_a_broken_build_fails_the_run() {
    let w = World::new();
    let repo = w.new_repo("build");
    let cfg = "[test]\nbuild = \"python3 gen.py\"\ncommand = \"python3 -m unittest discover -s tests -v\"\n";
    w.commit(
        &repo,
        &[
            (".sandbox.toml", cfg),
            ("version.txt", "1\n"),
            (
                "gen.py",
                "v = open('version.txt').read().strip()\nopen('generated.py', 'w').write('VERSION = %r\\n' % v)\n",
            ),
            (
                "tests/test_generated.py",
                "import unittest\nimport generated\n\nclass T(unittest.TestCase):\n    def test_built_from_this_tree(self):\n        self.assertEqual(generated.VERSION, open('version.txt').read().strip())\n",
            ),
        ],
        "a build step",
    );
    let rec = run("root", &w, &repo);
    assert_eq!(rec["tests"]["passed"], 3, "{rec}");
    assert_eq!(
        rec["tests"]["command"], "python3 -m unittest discover -s tests -v",
        "the command is recorded as written: {rec}"
    );
    // A new tree is built again: what the tests import is this tree's.
    w.commit(&repo, &[("version.txt", "2\n")], "version 2");
    let rec = run("root", &w, &repo);
    assert_eq!(rec["tests"]["passed"], 3, "{rec}");
    // A build that fails fails the run, and says so.
    w.commit(
        &repo,
        &[("gen.py", "raise SystemExit('no generator')\n")],
        "broken build",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "failed", "{o:?}");
    assert!(
        rec["error"]
            .as_str()
            .is_some_and(|e| e.contains("the build step `python3 gen.py` failed")),
        "{rec}"
    );
}

#[test]
fn a_mirror_in_the_callers_environment_reaches_the_run_without_its_credentials() {
    let mut w = World::new();
    w.extra_env.extend([
        (
            "PIP_INDEX_URL".to_string(),
            "https://pypi.corp.example/simple".to_string(),
        ),
        (
            "UV_INDEX_URL".to_string(),
            "https://me:s3cret@pypi.corp.example/simple".to_string(),
        ),
    ]);
    let repo = w.new_repo("mirror");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &with_setup("true", "echo pip=$PIP_INDEX_URL uv=$UV_INDEX_URL"),
        )],
        "show the mirrors",
    );
    let rec = run("root", &w, &repo);
    assert_eq!(
        lines(&rec),
        ["pip=https://pypi.corp.example/simple uv="],
        "{rec}"
    );
    // The setup's layer is keyed by the mirror it installed from.
    let mirrored = rec["tests"]["setup"]["key"].clone();
    w.extra_env.retain(|(k, _)| k != "PIP_INDEX_URL");
    let rec = w.sandbox(&repo, &["run", "--json", "--force"]).json()[0].clone();
    assert_ne!(rec["tests"]["setup"]["key"], mirrored, "{rec}");
}
