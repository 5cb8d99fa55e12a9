//! Flaky tests: a test whose outcome comes from outside the tree — a dial this test sets
//! before each run, in a directory on the runs' `PATH` (a run's home is fresh every time, so a
//! counter kept there would not do) — passes on odd runs and fails on even ones. `flaky` finds
//! it from the runs of one tree, `run --retry-flaky` runs a commit again when only it failed,
//! and `eval` does not count its failure.

use crate::common;

use common::World;
use std::path::Path;

/// The flaky test: it asks the dial (`dial` on PATH prints `pass` or `fail`).
const FLAKY_TEST: &str = "import subprocess\nimport unittest\n\n\nclass TestFlaky(unittest.TestCase):\n    def test_stable(self):\n        self.assertTrue(True)\n\n    def test_flaky(self):\n        said = subprocess.run(['dial'], capture_output=True, text=True).stdout.strip()\n        self.assertEqual(said, 'pass', f'the dial says {said}')\n";

/// What the flaky test will see, run after run: `dial`, first on the world's `PATH` (in a
/// directory outside /tmp, which runs see as their own), prints the next outcome this test
/// queued ([`Dial::queue`]), else `pass`. It reads a FIFO a thread of this test writes one
/// outcome to per open, so that even the runs of one command (`--retry-flaky`) see the
/// outcomes in order.
struct Dial {
    _dir: tempfile::TempDir,
    queue: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

impl Dial {
    fn on(w: &mut World) -> Dial {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let fifo = dir.path().join("outcome");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let dial = dir.path().join("dial");
        std::fs::write(&dial, format!("#!/bin/sh\ncat '{}'\n", fifo.display())).unwrap();
        for (p, mode) in [
            (dir.path(), 0o755),
            (dial.as_path(), 0o755),
            (fifo.as_path(), 0o666),
        ] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let q = queue.clone();
        // Lives as long as the test binary: blocked in open between readers.
        std::thread::spawn(move || loop {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                return;
            };
            let next = q
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| "pass".into());
            let _ = writeln!(f, "{next}");
            drop(f);
            // One outcome per reader: wait until this one has closed its end (a writer's
            // non-blocking open fails with ENXIO once no reader is left).
            while std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .is_ok()
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        // On the world's PATH (a test Python's, when it has one), first.
        let path = w
            .extra_env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| std::env::var("PATH").unwrap_or_default());
        w.extra_env
            .push(("PATH".into(), format!("{}:{path}", dir.path().display())));
        Dial { _dir: dir, queue }
    }

    /// What the next readers of the dial see, in order.
    fn queue(&self, outcomes: &[&str]) {
        let mut q = self.queue.lock().unwrap();
        q.clear();
        q.extend(outcomes.iter().map(|o| o.to_string()));
    }
}

fn flaky(w: &World, repo: &Path) -> Vec<serde_json::Value> {
    let o = w.sandbox(repo, &["flaky", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.json().as_array().unwrap().clone()
}

#[test]
fn a_test_that_flips_on_one_tree_is_found_retried_and_not_counted_by_eval() {
    let mut w = World::new();
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("flaky");
    w.commit(
        &repo,
        &[("tests/test_flaky.py", FLAKY_TEST)],
        "a stable and a flaky test",
    );
    // Run 1 passes; nothing is flaky yet (one run of the tree says nothing).
    dial.queue(&["pass"]);
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(flaky(&w, &repo).is_empty());
    let none = w.sandbox(&repo, &["flaky"]);
    assert!(none.stdout.contains("No flaky tests"), "{none:?}");

    // Run 2 of the same tree fails in test_flaky alone: the same tree, two outcomes.
    dial.queue(&["fail"]);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let failures = o.json()[0]["tests"]["failures"].clone();
    assert_eq!(failures.as_array().unwrap().len(), 1, "{failures}");
    let name = failures[0]["name"].as_str().unwrap().to_string();
    assert!(name.contains("test_flaky"), "{name}");
    let found = flaky(&w, &repo);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["name"], name.as_str());
    assert_eq!(found[0]["flips"], 1);
    assert_eq!(found[0]["runs"], 2);
    assert_eq!(found[0]["failures"], 1);
    assert_eq!(found[0]["last_outcome"], "failed");
    assert_eq!(found[0]["repository"], "flaky");

    // Run 3 passes again: a second flip. The table names it.
    dial.queue(&["pass"]);
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0);
    let found = flaky(&w, &repo);
    assert_eq!(found[0]["flips"], 2, "{found:?}");
    assert_eq!(found[0]["last_outcome"], "passed");
    let table = w.sandbox(&repo, &["flaky"]);
    assert!(table.stdout.contains("test_flaky"), "{table:?}");
    assert!(table.stdout.contains("1 flaky test"), "{table:?}");

    // Run 4 fails, and only the known-flaky test did: --retry-flaky runs it again (run 5
    // passes), and the record says it was retried.
    dial.queue(&["fail", "pass"]);
    let o = w.sandbox(&repo, &["run", "--force", "--retry-flaky", "2", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["status"], "passed", "{r}");
    assert_eq!(r["retried"]["attempts"], 1, "{r}");
    assert_eq!(r["retried"]["flaky"][0], name.as_str());
    let shown = w.sandbox(&repo, &["show"]);
    assert!(
        shown
            .stdout
            .contains("Retried:  1 time after only known-flaky or quarantined tests failed"),
        "{shown:?}"
    );
    // The failing run before the retry is evidence; the retry's pass is not (a retry never
    // makes a test flaky): runs 1–4 passed, failed, passed, failed.
    assert_eq!(flaky(&w, &repo)[0]["flips"], 3);

    // Without --retry-flaky a failure stays a failure (run 6).
    dial.queue(&["fail", "pass"]);
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 1);
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0); // run 7: main passes again

    // An experiment whose head fails only in the flaky test, on a tree that has passed it, is
    // judged as if it had passed.
    let o = w.sandbox(&repo, &["experiment", "start", "tidy"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.git(&repo, &["switch", "-q", "experiment/tidy"]);
    w.commit(&repo, &[("NOTES.md", "tidier\n")], "notes");
    w.git(&repo, &["switch", "-q", "main"]);
    for (run, status) in [(8, "failed"), (9, "passed"), (10, "failed")] {
        dial.queue(&[if status == "failed" { "fail" } else { "pass" }]);
        let o = w.sandbox(&repo, &["run", "--force", "experiment/tidy", "--json"]);
        assert_eq!(
            o.json()[0]["status"],
            status,
            "run {run} of the branch: {o:?}"
        );
    }
    // The head's record is cold (nothing here is cached): eval judges it as it is.
    dial.queue(&["fail", "fail", "fail"]);
    let o = w.sandbox(&repo, &["eval", "tidy", "--json"]);
    let ev = o.json();
    assert_ne!(ev["recommendation"], "NOT_READY", "{ev}");
    assert!(
        ev["reason"].as_str().unwrap().contains(&format!(
            "not counted: the failure of known-flaky test {name}"
        )),
        "{ev}"
    );
    assert_eq!(ev["criteria"][0]["pass"], true, "{ev}");
    assert_eq!(
        ev["criteria"][0]["value"]["flaky_not_counted"][0],
        name.as_str()
    );
}

#[test]
fn a_known_flaky_test_that_fails_every_retry_on_a_tree_is_a_failure_in_eval() {
    let mut w = World::new();
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("flaky");
    w.commit(
        &repo,
        &[("tests/test_flaky.py", FLAKY_TEST)],
        "a stable and a flaky test",
    );
    // Runs 1 to 3 of one tree pass, fail and pass: test_flaky is known to be flaky.
    dial.queue(&["pass", "fail", "pass"]);
    for (args, code) in [
        (&["run"][..], 0),
        (&["run", "--force"], 1),
        (&["run", "--force"], 0),
    ] {
        let o = w.sandbox(&repo, args);
        assert_eq!(o.code, code, "{args:?} {o:?}");
    }
    let name = flaky(&w, &repo)[0]["name"].as_str().unwrap().to_string();
    // An experiment that breaks it for good: the same test, failing every time.
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "broken"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/broken"]);
    let always = FLAKY_TEST.replace("(said, 'pass'", "(said, 'never'");
    assert_ne!(always, FLAKY_TEST);
    let head = w.commit(&repo, &[("tests/test_flaky.py", &always)], "break it");
    w.git(&repo, &["switch", "-q", "main"]);
    let o = w.sandbox(&repo, &["eval", "broken", "--json"]);
    let ev = o.json();
    assert_eq!(ev["recommendation"], "NOT_READY", "{ev}");
    assert!(
        !ev["reason"].as_str().unwrap().contains("not counted"),
        "{ev}"
    );
    assert_eq!(ev["criteria"][0]["pass"], false, "{ev}");
    // Its tree was given the chance: run again there, and it failed every time.
    let note = w.note(&repo, &head).unwrap();
    assert_eq!(note["status"], "failed", "{note}");
    assert_eq!(note["retried"]["attempts"], 2, "{note}");
    assert_eq!(note["retried"]["flaky"][0], name.as_str(), "{note}");
}

#[test]
fn flaky_names_a_repository_it_does_not_know_with_the_fix() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["flaky", "--repo", "nope"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains("no registered repository \"nope\""),
        "{problem}"
    );
    assert!(hints[0].contains("git sandbox list"), "{hints:?}");
}

/// A JUnit report naming `tests.test_hooks.test_x[a b]` the way records made before names had
/// one form did (a suite other than pytest's keeps its dotted names to this day).
const OLD_FORM: &str = r#"<?xml version="1.0"?><testsuites><testsuite name="legacy" tests="1" failures="1"><testcase classname="tests.test_hooks" name="test_x[a b]"><failure message="boom"/></testcase></testsuite></testsuites>"#;

#[test]
fn a_test_named_the_junit_way_and_by_node_id_is_one_flaky_test() {
    let mut w = World::new();
    let dial = Dial::on(&mut w);
    dial.queue(&["1", "2", "3"]);
    let repo = w.new_repo("one-name");
    // Runs 1, 2, 3 of the tree: failed (JUnit's name), passed, failed (pytest's console name).
    let script = "n=$(dial); \
        case $n in 1) mkdir -p reports && cp old.xml reports/junit.xml; exit 1;; \
        2) echo '1 passed in 0.01s';; \
        *) echo '=== short test summary info ==='; echo 'FAILED tests/test_hooks.py::test_x[a b] - boom'; echo '=== 1 failed in 0.01s ==='; exit 1;; esac";
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"sh run.sh\"\njunit = \"reports/junit.xml\"\n",
            ),
            ("run.sh", script),
            ("old.xml", OLD_FORM),
        ],
        "a test reported two ways",
    );
    let first = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(
        first.json()[0]["tests"]["failures"][0]["name"],
        "tests.test_hooks.test_x[a b]",
        "{first:?}"
    );
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0);
    let third = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(
        third.json()[0]["tests"]["failures"][0]["name"],
        "tests/test_hooks.py::test_x[a b]",
        "{third:?}"
    );
    let found = flaky(&w, &repo);
    assert_eq!(found.len(), 1, "one test, one entry: {found:?}");
    assert_eq!(found[0]["name"], "tests/test_hooks.py::test_x[a b]");
    assert_eq!(found[0]["failures"], 2, "{found:?}");
    assert_eq!(found[0]["flips"], 2, "{found:?}");
}

/// The quarantine entry of `name` in `flaky --json`.
fn quarantine_of(w: &World, repo: &Path, name: &str) -> serde_json::Value {
    let found = flaky(w, repo);
    let e = found.iter().find(|t| t["name"] == name);
    e.unwrap_or_else(|| panic!("{name} not listed: {found:?}"))
        .clone()
}

#[test]
fn a_quarantined_test_still_runs_passes_only_by_a_retry_and_is_released_by_clean_runs() {
    let mut w = World::new();
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("quarantine");
    w.commit(&repo, &[("tests/test_flaky.py", FLAKY_TEST)], "tests");
    dial.queue(&["fail"]);
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let name = o.json()[0]["tests"]["failures"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();

    let o = w.sandbox(&repo, &["flaky", "quarantine", &name, "--runs", "2"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("Quarantined"), "{o:?}");
    // Git data: a signed file on a ref that push carries.
    let file = w.git(&repo, &["show", "refs/sandbox/quarantine:quarantine.toml"]);
    assert!(file.contains(&name), "{file}");
    let sig = w.git(
        &repo,
        &["show", "refs/sandbox/quarantine:quarantine.toml.sig"],
    );
    // SSHSIG, base64 (as records are signed).
    assert!(sig.starts_with("U1NIU0lH"), "{sig}");
    let q = quarantine_of(&w, &repo, &name);
    assert_eq!(q["state"], "quarantined", "{q}");
    assert_eq!(q["quarantine"]["detail"], "0 of 2 clean runs", "{q}");

    // It still runs and is reported; a failure only of it is run again (no --retry-flaky, no
    // [test] retries), and the run passes because the retry did.
    dial.queue(&["fail", "pass"]);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["retried"]["attempts"], 1, "{r}");
    assert_eq!(r["retried"]["flaky"][0], name.as_str(), "{r}");
    let each = serde_json::json!([{"test": name, "outcomes": ["failed", "passed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    // A retry that fails too is a failure.
    dial.queue(&["fail", "fail"]);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()[0]["status"], "failed");
    assert_eq!(o.json()[0]["retried"]["attempts"], 1);
    let each = serde_json::json!([{"test": name, "outcomes": ["failed", "failed"]}]);
    assert_eq!(o.json()[0]["retried"]["tests"], each);
    let shown = w.sandbox(&repo, &["show"]);
    assert!(shown.stdout.contains(": failed, failed"), "{shown:?}");

    // Clean runs on two other trees release it: the retry's pass on the first tree does not
    // count (the test failed there), and a retry never makes a test flaky.
    dial.queue(&["pass"]);
    w.commit(&repo, &[("NOTES.md", "b\n")], "tree b");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let q = quarantine_of(&w, &repo, &name);
    assert_eq!(q["quarantine"]["detail"], "1 of 2 clean runs", "{q}");
    assert_eq!(q["state"], "quarantined", "{q}");
    assert_eq!(
        q["flips"], 0,
        "only retries passed it on the first tree: {q}"
    );
    dial.queue(&["pass"]);
    w.commit(&repo, &[("NOTES.md", "c\n")], "tree c");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let q = quarantine_of(&w, &repo, &name);
    assert_eq!(q["quarantine"]["state"], "released", "{q}");
    assert_eq!(
        q["quarantine"]["detail"], "2 clean runs on different trees",
        "{q}"
    );
    // Released, its failure is a failure again: nothing retries it.
    dial.queue(&["fail", "pass"]);
    w.commit(&repo, &[("NOTES.md", "d\n")], "tree d");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.json()[0]["retried"].is_null(), "{o:?}");
    // A second run of that tree passes it: two runs, two outcomes, flaky on record.
    dial.queue(&["pass"]);
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0);
    assert_eq!(quarantine_of(&w, &repo, &name)["state"], "flaky");

    // [test] retries in the user's config is --retry-flaky's default: the known-flaky test's
    // failure is run again.
    w.user_config("[test]\nretries = 1\n");
    dial.queue(&["fail", "pass"]);
    w.commit(&repo, &[("NOTES.md", "e\n")], "tree e");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["retried"]["attempts"], 1, "{o:?}");

    // By hand: until a date, then released.
    let o = w.sandbox(&repo, &["flaky", "quarantine", &name, "--until", "7d"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(quarantine_of(&w, &repo, &name)["state"], "quarantined");
    let o = w.sandbox(&repo, &["flaky", "release", &name]);
    assert_eq!(o.code, 0, "{o:?}");
    let q = quarantine_of(&w, &repo, &name);
    assert_eq!(q["quarantine"]["state"], "released", "{q}");
    assert!(q["quarantine"]["detail"]
        .as_str()
        .unwrap()
        .starts_with("released by"));
    let table = w.sandbox(&repo, &["flaky"]);
    assert!(table.stdout.contains("FAILED/RUNS"), "{table:?}");

    // Bad input: one line, the fix, nothing written.
    let tip = w.git(&repo, &["rev-parse", "refs/sandbox/quarantine"]);
    for (args, problem) in [
        (
            vec!["flaky", "release", "tests/nope.py::test_x"],
            "is not quarantined",
        ),
        (
            vec!["flaky", "quarantine", &name, "--until", "yesterday"],
            "is no date",
        ),
        (
            vec!["flaky", "quarantine", &name, "--until", "2001-01-01"],
            "has passed",
        ),
    ] {
        let o = w.sandbox(&repo, &args);
        assert_eq!(o.code, 2, "{args:?} {o:?}");
        let (said, hints) = o.error();
        assert!(said.contains(problem), "{said}");
        assert!(!hints.is_empty(), "{o:?}");
    }
    assert_eq!(w.git(&repo, &["rev-parse", "refs/sandbox/quarantine"]), tip);
}

#[test]
fn a_new_test_runs_three_times_and_one_that_wobbles_is_marked_flaky_at_birth() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("births");
    let stable = "def test_one():\n    assert True\n";
    w.commit(
        &repo,
        &[
            // No probe beside the run: it would ask the dial too.
            (
                ".sandbox.toml",
                "[test]\ncommand = \"python3 -m pytest -q tests\"\nphases = false\n",
            ),
            ("tests/test_stable.py", stable),
        ],
        "a stable test",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");

    // The next commit adds two tests, one asking the dial: the suite's own run passes (the
    // commit's status), the second run of the new tests fails, the third passes.
    dial.queue(&["pass", "fail", "pass"]);
    let added = w.commit(&repo, &[("tests/test_flaky.py", FLAKY_TEST)], "new tests");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["status"], "passed", "{r}");
    let born = &r["tests"]["new_tests"];
    assert_eq!(born["runs"], 3, "{r}");
    assert_eq!(born["tested"], 2, "{r}");
    let flaky_at_birth = born["flaky"].as_array().unwrap();
    assert_eq!(flaky_at_birth.len(), 1, "{born}");
    assert!(flaky_at_birth[0]["test"]
        .as_str()
        .unwrap()
        .ends_with("test_flaky"));
    assert_eq!(
        flaky_at_birth[0]["outcomes"],
        serde_json::json!(["passed", "failed", "passed"])
    );
    // The note says so, and show.
    assert_eq!(w.note(&repo, &added).unwrap()["tests"]["new_tests"], *born);
    let shown = w.sandbox(&repo, &["show"]);
    assert!(
        shown
            .stdout
            .contains("2 new tests run 3 times; flaky at birth:"),
        "{shown:?}"
    );
    // Runs apart from the suite are no evidence of flakiness on record.
    assert!(flaky(&w, &repo).is_empty());

    // A new test that holds: ran again, nothing marked.
    w.commit(&repo, &[("tests/test_more.py", stable)], "one more");
    let o = w.sandbox(&repo, &["run", "--json"]);
    let born = &o.json()[0]["tests"]["new_tests"];
    assert_eq!(
        (born["tested"].clone(), born["flaky"].clone()),
        (1.into(), serde_json::Value::Null),
        "{born}"
    );

    // A repository that says one run: no extra runs.
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"python3 -m pytest -q tests\"\nphases = false\nnew_test_runs = 1\n",
            ),
            ("tests/test_last.py", stable),
        ],
        "one run is enough",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.json()[0]["tests"]["new_tests"].is_null(), "{o:?}");
}

/// Two tests sharing a module's state: `test_b_alone` fails whenever `test_a_sets` ran before it
/// (every full-suite run), and passes alone.
const ORDER_TEST: &str = "SEEN = []\n\n\ndef test_a_sets():\n    SEEN.append(1)\n\n\ndef test_b_alone():\n    assert not SEEN, 'test_a_sets ran first'\n";

#[test]
fn a_test_flaky_in_full_suite_runs_is_retried_alone_and_one_failing_only_in_suite_order_never_is() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("alone");
    w.commit(
        &repo,
        &[
            // No probe (it would ask the dial too), no extra runs of new tests.
            (
                ".sandbox.toml",
                "[test]\ncommand = \"python3 -m pytest -q tests\"\nphases = false\nnew_test_runs = 1\n",
            ),
            ("tests/test_flaky.py", FLAKY_TEST),
        ],
        "a stable and a flaky test",
    );
    // Two full-suite runs of one tree, two outcomes: flaky on record.
    dial.queue(&["pass", "fail"]);
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let name = o.json()[0]["tests"]["failures"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(name, "tests/test_flaky.py::TestFlaky::test_flaky");
    assert_eq!(flaky(&w, &repo)[0]["name"], name.as_str());

    // The suite fails it again; the retry runs it alone (one read of the dial: `pass`), and
    // its pass excuses it. The record keeps the suite's own results.
    dial.queue(&["fail", "pass"]);
    let o = w.sandbox(&repo, &["run", "--force", "--retry-flaky", "2", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["status"], "passed", "{r}");
    assert_eq!(r["retried"]["alone"], true, "{r}");
    assert_eq!(r["retried"]["attempts"], 1, "{r}");
    let each = serde_json::json!([{"test": name, "outcomes": ["failed", "passed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    assert_eq!(r["tests"]["status"], "failed", "{r}");
    assert_eq!(r["tests"]["failures"][0]["name"], name.as_str(), "{r}");
    let shown = w.sandbox(&repo, &["show"]);
    assert!(
        shown.stdout.contains("the failing tests alone")
            && shown.stdout.contains("the suite's own run failed them"),
        "{shown:?}"
    );
    // The index keeps the suite's failure, not the lone pass: three runs, one flip.
    let f = &flaky(&w, &repo)[0];
    assert_eq!(
        (f["runs"].clone(), f["flips"].clone()),
        (3.into(), 1.into()),
        "{f}"
    );
    assert_eq!(f["failures"], 2, "{f}");

    // A test that fails every retry alone is a failure, and the command is not run again
    // after them (a further read of the dial would say `pass`).
    dial.queue(&["fail", "fail", "fail"]);
    let o = w.sandbox(&repo, &["run", "--force", "--retry-flaky", "2", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["retried"]["attempts"], 2, "{r}");
    let each = serde_json::json!([{"test": name, "outcomes": ["failed", "failed", "failed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    dial.queue(&[]);

    // A test failing only in suite order passes alone ...
    w.commit(&repo, &[("tests/test_order.py", ORDER_TEST)], "order");
    let order = "tests/test_order.py::test_b_alone";
    let alone = format!("python3 -m pytest -q {order}");
    let o = w.sandbox(&repo, &["run", "--command", &alone, "--json"]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    // ... but it is no flake in full-suite runs: even quarantined (which retries a failure
    // once), its retry is the whole command, and it fails there again.
    let o = w.sandbox(&repo, &["flaky", "quarantine", order, "--runs", "3"]);
    assert_eq!(o.code, 0, "{o:?}");
    let o = w.sandbox(&repo, &["run", "--retry-flaky", "2", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["status"], "failed", "{r}");
    assert!(r["retried"]["alone"].is_null(), "{r}");
    let each = serde_json::json!([{"test": order, "outcomes": ["failed", "failed", "failed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    // Its failures, the retries' among them, never make it flaky.
    assert!(
        flaky(&w, &repo)
            .iter()
            .all(|t| t["name"] != order || t["state"] != "flaky"),
        "{:?}",
        flaky(&w, &repo)
    );
}

#[test]
fn a_cargo_test_flaky_in_full_suite_runs_is_retried_alone_by_its_exact_name() {
    let mut w = World::new();
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("alone-cargo");
    let test = "#[test]\nfn stable() {}\n\n#[test]\nfn flaky() {\n    let said = std::process::Command::new(\"dial\").output().unwrap();\n    assert_eq!(String::from_utf8_lossy(&said.stdout).trim(), \"pass\");\n}\n";
    w.git(&repo, &["rm", "-q", "-r", "tests"]);
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"cargo test\"\nphases = false\ntimeout = \"300s\"\n[analysis]\nenabled = false\n",
            ),
            (
                "Cargo.toml",
                "[package]\nname = \"wobble\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            ("src/lib.rs", ""),
            ("tests/t.rs", test),
        ],
        "a stable and a flaky test",
    );
    // The first run is cold, the next two read its build cache: they flip, warm with warm.
    dial.queue(&["pass", "fail", "pass"]);
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(
        o.json()[0]["tests"]["failures"][0]["name"],
        "flaky",
        "{o:?}"
    );
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0);
    let f = &flaky(&w, &repo)[0];
    assert_eq!(
        (&f["name"], &f["kind"]),
        (&"flaky".into(), &"flaky".into()),
        "{f}"
    );

    // The suite fails it; `cargo test -- --exact flaky` alone passes it.
    dial.queue(&["fail", "pass"]);
    let o = w.sandbox(&repo, &["run", "--force", "--retry-flaky", "1", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["retried"]["alone"], true, "{r}");
    let each = serde_json::json!([{"test": "flaky", "outcomes": ["failed", "passed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    assert_eq!(r["tests"]["status"], "failed", "{r}");
}

#[test]
fn a_jest_test_flaky_in_full_suite_runs_is_retried_alone_by_its_whole_name() {
    let mut w = World::new();
    let path = std::env::var("PATH").unwrap_or_default();
    w.extra_env.push((
        "PATH".into(),
        format!("{}:{path}", common::tools::jest().display()),
    ));
    let dial = Dial::on(&mut w);
    let repo = w.new_repo("alone-jest");
    let test = "const { execSync } = require('child_process');\n\ndescribe('calc', () => {\n  test('adds (1+1)', () => {\n    expect(1 + 1).toBe(2);\n  });\n  test('asks the dial', () => {\n    expect(execSync('dial').toString().trim()).toBe('pass');\n  });\n});\n";
    w.git(&repo, &["rm", "-q", "-r", "tests"]);
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"jest --ci\"\nphases = false\nnew_test_runs = 1\n[analysis]\nenabled = false\n",
            ),
            ("package.json", r#"{"name":"calc","private":true}"#),
            ("calc.test.js", test),
        ],
        "a stable and a flaky jest test",
    );
    // The first run is cold (package.json: node_modules is a build cache), the next two warm.
    dial.queue(&["pass", "fail", "pass"]);
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let name = o.json()[0]["tests"]["failures"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(name, "calc › asks the dial");
    assert_eq!(w.sandbox(&repo, &["run", "--force"]).code, 0);
    assert_eq!(flaky(&w, &repo)[0]["kind"], "flaky");

    // The suite fails it; `jest --ci -t '^(?:calc asks the dial)$'` alone passes it.
    dial.queue(&["fail", "pass"]);
    let o = w.sandbox(&repo, &["run", "--force", "--retry-flaky", "1", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["retried"]["alone"], true, "{r}");
    let each = serde_json::json!([{"test": name, "outcomes": ["failed", "passed"]}]);
    assert_eq!(r["retried"]["tests"], each, "{r}");
    assert_eq!(r["tests"]["status"], "failed", "{r}");
}
