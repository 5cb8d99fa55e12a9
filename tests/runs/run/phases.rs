//! The probe with pytest: the test files a change reaches through imports run beside the suite,
//! the first failure is published at once, and the record is the suite's own run, in its own
//! order, whatever the probe saw.

use crate::common::projects::CALC_PYPROJECT;
use crate::common::World;
use std::path::Path;

const CONFIG: &str =
    "[test]\ncommand = \"python3 -m pytest -q\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n";

/// [`World::calc_package`] with two tests a file, and `calc/hidden.py`, which
/// `tests/test_dynamic.py` imports by name at run time (no import the graph can see).
fn project(w: &World, repo: &Path, sleep: f32) {
    let extra = [
        ("src/calc/hidden.py", "def secret():\n    return 42\n"),
        (
            "tests/test_dynamic.py",
            "import importlib\n\n\ndef test_secret():\n    assert importlib.import_module('calc.hidden').secret() == 42\n",
        ),
    ];
    w.calc_package(repo, CONFIG, sleep, true, &extra);
}

fn run_json(w: &World, repo: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    let o = w.sandbox(repo, &all);
    (o.json()[0].clone(), o.stderr)
}

/// The tests' output of `commit`'s run, as kept on this machine.
fn run_log(w: &World, commit: &str) -> String {
    crate::common::files_under(&w.data().join("logs"))
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(&format!("{commit}.log")))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default()
}

fn counts(rec: &serde_json::Value) -> Vec<serde_json::Value> {
    ["passed", "failed", "skipped", "errors", "total", "failures"]
        .iter()
        .map(|k| rec["tests"][k].clone())
        .collect()
}

#[test]
fn the_tests_a_change_reaches_run_first_and_the_record_is_the_whole_suites() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases");
    project(&w, &repo, 2.0);
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    assert!(
        base["tests"].get("phases").is_none(),
        "a first run of the project runs once: {base}"
    );

    // Break the function one test file of six reaches.
    let broken = w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
        "break c",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["tests/test_c.py"]),
        "{rec}"
    );
    assert_eq!(t["phases"][0]["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["failed"], 0, "{rec}");
    assert!(
        t["phases"][1].get("files").is_none(),
        "phase two runs the rest: {rec}"
    );
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    assert!(
        first < t["duration_ms"].as_u64().unwrap(),
        "the failure is known before the suite ends: {rec}"
    );
    assert!(t.get("selection_missed").is_none(), "{rec}");
    assert!(
        stderr.contains("first failure after") && stderr.contains("tests/test_c.py::test_fc"),
        "run says so at once: {stderr}"
    );
    // The record is the user's command as it is: one session of the whole suite, in its own
    // order; the probe's output is kept beside it.
    let log = run_log(&w, rec["commit"].as_str().unwrap());
    assert!(
        log.matches(" passed in ").count() == 1
            && log.contains("2 failed, 9 passed in ")
            && !log.contains("[git-sandbox]"),
        "{log}"
    );
    assert_eq!(t["command"], "python3 -m pytest -q", "{rec}");
    assert_eq!(
        t["phases"][0]["command"], "python3 -m pytest -q tests/test_c.py",
        "{rec}"
    );
    assert_eq!(t["phases"][1]["passed"], 9, "{rec}");
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert!(
        events.stdout.contains("tests/test_c.py::test_fc"),
        "{events:?}"
    );

    // The next commit touches a (which test_a imports) and breaks hidden (which only a dynamic
    // import reaches): phase one runs test_c (it failed in the parent's run) first, then test_a,
    // and passes; phase two fails. The selection missed.
    w.commit(
        &repo,
        &[
            ("src/calc/c.py", "def fc(x):\n    return x + 1\n"),
            (
                "src/calc/a.py",
                "def fa(x):\n    # same\n    return x + 1\n",
            ),
            ("src/calc/hidden.py", "def secret():\n    return 41\n"),
        ],
        "touch a, break hidden",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection", "HEAD"]);
    assert_eq!(o.code, 0, "{o:?}");
    let text: String = o
        .stdout
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((_, rest)) if !l.starts_with(' ') => format!("COMMIT {rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_snapshot!("explain_selection", text);
    });
    let (missed, _) = run_json(&w, &repo, &[]);
    assert_eq!(missed["status"], "failed", "{missed}");
    assert_eq!(
        missed["tests"]["phases"][0]["files"],
        serde_json::json!(["tests/test_c.py", "tests/test_a.py"]),
        "{missed}"
    );
    assert_eq!(missed["tests"]["selection_missed"], true, "{missed}");
    // Phase one's recall: of the two faulty commits with a probe, break c's; of their three
    // failing tests, break c's two (test_secret was in phase two).
    let status = w.sandbox(&repo, &["status"]);
    assert!(
        status.stdout.contains(
            "phases: phase one caught 1 of 2 faulty commits with a probe (50%), 2 of 3 failing tests (67%)"
        ),
        "{status:?}"
    );
    let recall = |json: &serde_json::Value| {
        let r = &json["repositories"][0];
        [
            "selection_caught",
            "selection_missed",
            "selection_tests_caught",
            "selection_tests_failed",
        ]
        .map(|k| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {json}")))
    };
    let json = w.sandbox(&repo, &["status", "--json"]).json();
    assert_eq!(recall(&json), [1, 1, 2, 3], "{json}");

    // The same commit in one phase gives the same counts and names.
    w.user_config("[test]\nphases = false\n");
    let o = w.sandbox(&repo, &["run", "--json", "--force", &broken]);
    let one = o.json()[0].clone();
    assert!(one["tests"].get("phases").is_none(), "{one}");
    assert_eq!(
        counts(&one),
        counts(&rec),
        "one phase {one}\ntwo phases {rec}"
    );
    // A commit counts once, by its record: break c's is now a run without a probe.
    let json = w.sandbox(&repo, &["status", "--json"]).json();
    assert_eq!(recall(&json), [0, 1, 0, 1], "{json}");
    // The suite sleeps 8 s in the four files phase one leaves out.
    assert!(
        first < one["tests"]["duration_ms"].as_u64().unwrap(),
        "phase one knew it sooner than the whole suite: {first} ms, phases {}, one phase {}",
        rec["tests"]["phases"],
        one["tests"]["duration_ms"]
    );
}

/// `-x` stops the suite at its first failure in its own order: the record is that run, and the
/// probe's failure, which the run also had, is kept with its phase counts.
#[test]
fn a_run_that_stops_at_its_first_failure_is_recorded_as_the_command_ran_it() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-x");
    // test_a's and test_b's tests sleep a second each: the probe of test_c ends first.
    project(&w, &repo, 1.0);
    w.commit(
        &repo,
        &[(".sandbox.toml", &CONFIG.replace("-q", "-q -x"))],
        "stop at the first failure",
    );
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
        "break c",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    // test_a and test_b ran before test_c's first test failed and stopped the session.
    assert_eq!(
        (t["failed"].clone(), t["passed"].clone()),
        (1.into(), 4.into()),
        "{rec}"
    );
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["tests/test_c.py"])
    );
    assert_eq!(t["phases"][0]["failed"], 1, "{rec}");
    assert!(t.get("selection_missed").is_none(), "{rec}");
    assert!(t["first_failure_ms"].as_u64().is_some(), "{rec}");
    assert!(stderr.contains("tests/test_c.py::test_fc"), "{stderr}");
}

#[test]
fn a_change_the_graph_cannot_see_runs_the_whole_suite_in_one_phase() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-off");
    project(&w, &repo, 0.0);
    for (path, body) in [
        ("tests/conftest.py", "import pytest\n"),
        (
            "pyproject.toml",
            &format!("{CALC_PYPROJECT}addopts = \"-ra\"\n"),
        ),
        ("tests/data.json", "{}\n"),
    ] {
        w.commit(&repo, &[(path, body)], path);
        let o = w.sandbox(&repo, &["run", "--explain-selection"]);
        assert!(
            o.stdout
                .contains(&format!("one phase, the whole suite: {path} changed")),
            "{o:?}"
        );
        let (rec, _) = run_json(&w, &repo, &[]);
        assert_eq!(rec["status"], "passed", "{rec}");
        assert!(rec["tests"].get("phases").is_none(), "{path}: {rec}");
        assert_eq!(rec["tests"]["passed"], 11, "{rec}");
    }
    // The commit's config may turn phases off.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &CONFIG.replace("timeout", "phases = false\ntimeout"),
        )],
        "no phases",
    );
    w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
        "break c",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(o.stdout.contains("[test] phases = false"), "{o:?}");
}

#[test]
fn a_commit_that_changes_more_files_than_the_record_lists_runs_in_one_phase() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-many");
    project(&w, &repo, 0.0);
    // 100 new modules sort before calc/c.py, whose change is the 101st: past the changed
    // files the record lists, and reached by tests/test_c.py alone.
    let mut files: Vec<(String, String)> = (0..100)
        .map(|i| (format!("src/calc/b{i:03}.py"), "X = 1\n".to_string()))
        .collect();
    files.push((
        "src/calc/c.py".into(),
        "def fc(x):\n    return x + 2\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.commit(&repo, &refs, "many modules, and break c");
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(
        o.stdout
            .contains("one phase, the whole suite: 101 files changed"),
        "{o:?}"
    );
}

/// Like click: a conftest.py that imports the package (so every change reaches every test
/// through it) and test files that all import the package's top; pytest-cov records which test
/// ran which line (`--cov-context=test`).
fn package_everyone_imports(w: &World, repo: &Path) {
    let config = "[test]\ncommand = \"python3 -m pytest -q -p no:cacheprovider --cov=calc --cov-context=test --cov-report=\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n";
    let mut files: Vec<(String, String)> = vec![
        (".sandbox.toml".into(), config.into()),
        ("pyproject.toml".into(), CALC_PYPROJECT.into()),
        (
            "src/calc/__init__.py".into(),
            "from .a import fa\nfrom .b import fb\nfrom .c import fc\n".into(),
        ),
        (
            "tests/conftest.py".into(),
            "import pytest\n\nimport calc\n\n\n@pytest.fixture\ndef calc_mod():\n    return calc\n"
                .into(),
        ),
    ];
    for m in ["a", "b", "c"] {
        // Each module's function calls the next one's (a → b → c), as click's core calls its
        // parser, so the import graph links them all.
        let next = match m {
            "a" => "from .b import fb\n\n\ndef fa(x):\n    return fb(x) + 1\n",
            "b" => "from .c import fc\n\n\ndef fb(x):\n    if x > 100:\n        return fc(x)\n    return x * 2\n",
            _ => "def fc(x):\n    total = x\n    return total - 1\n",
        };
        files.push((format!("src/calc/{m}.py"), next.into()));
    }
    // test_fa, first in the run's order and in no probe, takes 3 s: the probe of the tests a
    // change reaches ends before the run even on a busy machine (a probe the run outruns is
    // stopped and records no phases).
    files.push((
        "tests/test_a.py".into(),
        "import time\n\n\ndef test_fa(calc_mod):\n    time.sleep(3)\n    assert calc_mod.fa(1) == 3\n".into(),
    ));
    files.push((
        "tests/test_b.py".into(),
        "import calc\n\n\ndef test_fb_small():\n    assert calc.fb(2) == 4\n\n\ndef test_fb_big():\n    assert calc.fb(200) == 199\n".into(),
    ));
    files.push((
        "tests/test_c.py".into(),
        "import calc\n\n\ndef test_fc():\n    assert calc.fc(5) == 4\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(
        repo,
        &refs,
        "a package every test reaches through conftest.py",
    );
}

#[test]
fn per_test_coverage_picks_the_tests_that_ran_the_changed_lines() {
    let mut w = World::new();
    w.with_test_python("pytest_cov");
    let repo = w.new_repo("contexts");
    package_everyone_imports(&w, &repo);
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["passed"], 4, "{base}");

    // A line only test_fb_big and test_fc run (fc's body): through conftest.py and the
    // package's imports every test file reaches it, but two tests ran it.
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "def fc(x):\n    total = x\n    return total - 2\n",
        )],
        "break fc",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection", "HEAD"]);
    assert!(
        o.stdout
            .contains("phase one runs 1 of 3 test files whole and 1 single tests")
            && o.stdout.contains(
                "tests/test_b.py::test_fb_big  ran src/calc/c.py:3 (changed) in the parent's run"
            )
            && o.stdout
                .contains("tests/test_c.py  ran src/calc/c.py:3 (changed)"),
        "{o:?}"
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["tests/test_b.py::test_fb_big", "tests/test_c.py"]),
        "{rec}"
    );
    assert_eq!(t["phases"][0]["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["passed"], 2, "{rec}");
    assert_eq!(
        (t["passed"].clone(), t["failed"].clone()),
        (2.into(), 2.into()),
        "{rec}"
    );
    assert!(t.get("selection_missed").is_none(), "{rec}");
    // The kept data is the whole suite's, both phases': mending fc, the tests that ran its
    // line in phase one are picked by it (and they failed before as well).
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "def fc(x):\n    total = x\n    return total - 1\n",
        )],
        "mend fc",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection", "HEAD"]);
    assert!(
        o.stdout
            .contains("tests/test_b.py  ran src/calc/c.py:3 (changed)")
            && o.stdout
                .contains("tests/test_c.py  ran src/calc/c.py:3 (changed)"),
        "{o:?}"
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "passed", "{rec}");

    // A change outside function bodies runs at import, for every test: the import graph
    // reaches every test file, and the likelier signals pick phase one among them: the tests
    // that failed the last time c.py changed ("break fc" above), and the file named for it.
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "LIMIT = 3\n\n\ndef fc(x):\n    total = x\n    return total - 1\n",
        )],
        "a module-level line",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection", "HEAD"]);
    assert!(
        o.stdout
            .contains("phase one runs 2 of 3 test files beside the whole suite")
            && o.stdout
                .contains("tests/test_b.py  failed the last time src/calc/c.py changed (")
            && o.stdout
                .contains("tests/test_c.py  named for src/calc/c.py (changed)"),
        "{o:?}"
    );
}

#[test]
fn a_one_phase_run_knows_its_first_failure_at_the_failing_test_and_a_printed_one_is_none() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("first-at-once");
    // The whole suite runs (a first commit): its first test fails at once, its second sleeps.
    let config = "[test]\ncommand = \"python3 -m pytest -p no:cacheprovider\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n";
    let slow = "import time\n\n\ndef test_fails():\n    assert 1 == 2\n\n\ndef test_slow():\n    time.sleep(4)\n";
    w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(
        &repo,
        &[(".sandbox.toml", config), ("tests/test_a.py", slow)],
        "fails, then sleeps",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert!(t.get("phases").is_none(), "{rec}");
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    assert!(
        first + 3000 < t["duration_ms"].as_u64().unwrap(),
        "known before the sleeping test ended: {rec}"
    );
    assert!(
        stderr.contains("first failure after") && stderr.contains("tests/test_a.py::test_fails"),
        "{stderr}"
    );
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert!(
        events.stdout.contains("tests/test_a.py::test_fails")
            && events.stdout.contains(&format!("\"ms\":{first}")),
        "{events:?}"
    );

    // A passing suite whose test prints what failures look like (`-s`: its output is shown):
    // the verdict is the suite's, and no first failure is recorded.
    let printing = "def test_prints():\n    print('F')\n    print('tests/test_a.py::test_x FAILED')\n    print('FAILED tests/test_a.py::test_x - no')\n    print('test x ... FAILED')\n";
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                &config.replace("pytest -p", "pytest -s -p"),
            ),
            ("tests/test_a.py", printing),
        ],
        "prints failures, passes",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(rec["tests"]["passed"], 1, "{rec}");
    assert!(rec["tests"].get("first_failure_ms").is_none(), "{rec}");
    // Nor told while it ran: with capture off the output is the tests' own as much as
    // pytest's, so no line of it is taken for a failure.
    assert!(!stderr.contains("first failure"), "{stderr}");
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert_eq!(
        events.stdout.matches("\"run.first_failure\"").count(),
        1,
        "only the failing commit's: {events:?}"
    );
}

#[test]
fn capture_off_in_the_projects_pytest_config_tells_no_printed_failure() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("capture-off");
    // `-s` comes from pytest.ini's addopts, not the command.
    let config = "[test]\ncommand = \"python3 -m pytest -p no:cacheprovider\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n";
    let printing =
        "def test_prints():\n    print('E')\n    print('tests/test_a.py::test_x ERROR')\n";
    w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(
        &repo,
        &[
            (".sandbox.toml", config),
            ("pytest.ini", "[pytest]\naddopts = -rfE --capture=no\n"),
            ("tests/test_a.py", printing),
        ],
        "prints an error line, passes",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "passed", "{rec}");
    assert!(!stderr.contains("first failure"), "{stderr}");
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert!(!events.stdout.contains("run.first_failure"), "{events:?}");
}

/// A failure that needs another file's tests to run first: `tests/test_0_sets.py` runs before
/// `tests/test_d.py` in the suite's own order and changes what `calc.d` returns. The probe of
/// test_d alone passes; the record is the suite's, failed, exactly as with no selection at all,
/// and the probe's pass missed it. Lines a test prints in the probe's words change nothing, and
/// modules named as git-sandbox's plugins were in the tree are not loaded.
#[test]
fn a_failure_that_needs_the_suites_order_is_recorded_with_the_selection_on() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("order");
    let sets = "import os\n\n\ndef test_sets(capsys):\n    os.environ['CALC_ORDER'] = 'set'\n    with capsys.disabled():\n        print('\\n[git-sandbox] phase one ended: 9 tests, 9 passed, 0 failed, 0 errors, 0 skipped')\n";
    let not_ours = "raise SystemExit('a module of the commit was loaded as git-sandbox plugin')\n";
    let extra = [
        ("tests/test_0_sets.py", sets),
        ("_git_sandbox_phases.py", not_ours),
        ("_git_sandbox_report.py", not_ours),
    ];
    // A second a file (but test_c): the probe of one file ends well before the suite.
    w.calc_package(&repo, CONFIG, 1.0, true, &extra);
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["passed"], 11, "{base}");
    let broken = w.commit(
        &repo,
        &[(
            "src/calc/d.py",
            "import os\n\n\ndef fd(x):\n    return x + 1 + (os.environ.get('CALC_ORDER') == 'set')\n",
        )],
        "d depends on what ran before",
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    let t = &rec["tests"];
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(
        (t["passed"].clone(), t["failed"].clone()),
        (9.into(), 2.into()),
        "{rec}"
    );
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["tests/test_d.py"]),
        "{rec}"
    );
    // The probe passed test_d alone: it caught none of the run's failures.
    assert_eq!(t["selection_missed"], true, "{rec}");
    let probe_log = crate::common::files_under(&w.data().join("logs"))
        .into_iter()
        .find(|p| {
            p.to_string_lossy()
                .ends_with(&format!("{broken}.probe.log"))
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    assert!(probe_log.contains("2 passed"), "{probe_log}");

    // The other way round: test_d fails alone, and passes after test_0_sets. The probe's
    // failure is told at once, then withdrawn: the record is the suite's pass.
    let alone = w.commit(
        &repo,
        &[(
            "src/calc/d.py",
            "import os\n\n\ndef fd(x):\n    return x + 1 + (os.environ.get('CALC_ORDER') != 'set')\n",
        )],
        "d fails alone",
    );
    let (pass, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(pass["status"], "passed", "{pass}");
    assert!(pass["tests"].get("first_failure_ms").is_none(), "{pass}");
    assert_eq!(pass["tests"]["phases"][0]["failed"], 0, "{pass}");
    assert!(
        stderr.contains("tests/test_d.py::test_fd"),
        "told at once: {stderr}"
    );
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    let withdrawn: Vec<serde_json::Value> = events
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["commit"] == alone.as_str())
        .collect();
    assert_eq!(
        withdrawn.last().map(|e| e["data"].clone()),
        Some(serde_json::json!({"test": "tests/test_d.py::test_fd", "withdrawn": true})),
        "{events:?}"
    );

    // With no selection at all, the same counts and failures.
    w.user_config("[test]\nphases = false\n");
    let one = w
        .sandbox(&repo, &["run", "--json", "--force", &broken])
        .json()[0]
        .clone();
    assert!(one["tests"].get("phases").is_none(), "{one}");
    assert_eq!(
        counts(&one),
        counts(&rec),
        "one phase {one}\nwith the probe {rec}"
    );
}

#[test]
fn a_failure_nobody_can_name_is_not_told_as_a_first_failure() {
    let w = World::new();
    let repo = w.new_repo("unnamed");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"echo nothing a parser reads; exit 1\"\n",
        )],
        "an unparsed failing command",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    assert!(!stderr.contains("first failure"), "{stderr}");
}

/// A run with more failures than its record lists (the first 50): the probe's first failure is
/// one the run's output named past them, and it is still the run's, so it is kept as the hint.
#[test]
fn a_probe_failure_past_the_records_first_fifty_is_still_the_runs() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-many");
    // test_a and test_b wait 3 s each before they assert: the run's own first failure (in
    // test_b) comes after 6 s at the soonest.
    let many: String = (0..60)
        .map(|i| format!("\n\ndef test_many_{i}():\n    assert fb(1) == 2\n"))
        .collect();
    let many = format!("from calc.b import fb\n{many}");
    w.calc_package(
        &repo,
        CONFIG,
        3.0,
        false,
        &[("tests/test_b_many.py", &many)],
    );
    // c breaks: the parent's failure, which phase one runs first.
    w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
        "break c",
    );
    assert_eq!(run_json(&w, &repo, &[]).0["status"], "failed");
    // b breaks too: 61 failures in test_b and test_b_many come before test_c's in the run's
    // order, so the record lists test_b's and test_b_many's, and counts test_c's.
    w.commit(
        &repo,
        &[("src/calc/b.py", "def fb(x):\n    return x + 2\n")],
        "break b",
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    let t = &rec["tests"];
    assert_eq!(t["failed"], 62, "{rec}");
    assert_eq!(t["failures"].as_array().map(Vec::len), Some(50), "{rec}");
    assert!(!t["failures"].to_string().contains("test_fc"), "{rec}");
    assert_eq!(
        t["phases"][0]["files"][0], "tests/test_c.py",
        "the parent's failure first: {rec}"
    );
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    assert!(
        first < 6000,
        "the probe's failure of test_c, not the run's own past 6 s: {rec}"
    );
    assert!(
        stderr.contains("first failure after") && stderr.contains("tests/test_c.py::test_fc"),
        "{stderr}"
    );
}

/// A suite that stops as it loads (a module every test imports raises) ends the run before the
/// probe, which started with it and stops at the same error a moment later, could end: the probe
/// runs on for a while (as long as the run took, up to a second) so that phase one says it
/// failed too, where it was
/// stopped and said nothing before.
#[test]
fn a_suite_that_stops_as_it_loads_still_has_phase_ones_verdict() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-crash");
    project(&w, &repo, 0.0);
    // Loading takes a second; the probe (run with test files named) a third more.
    w.commit(
        &repo,
        &[(
            "tests/conftest.py",
            "import sys\nimport time\n\ntime.sleep(1.0)\nif any(a.endswith('.py') for a in sys.argv[1:]):\n    time.sleep(0.3)\n",
        )],
        "slow to load",
    );
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "raise RuntimeError('c cannot load')\n\n\ndef fc(x):\n    return x + 1\n",
        )],
        "c raises as it loads",
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    let one = &t["phases"][0];
    assert_eq!(
        one["files"],
        serde_json::json!(["tests/test_c.py"]),
        "{rec}"
    );
    assert!(one["exit_code"].as_i64().is_some_and(|c| c != 0), "{rec}");
    assert!(t.get("selection_missed").is_none(), "{rec}");
}

/// Phase one's failures are counted over every failure of the run pytest's report names, not
/// the first 1,000 an output parser lists: a change that fails 1,200 tests, all in phase one,
/// has phase one catching 1,200 of 1,200 (`status`'s recall by test reads this count).
#[test]
fn phase_one_counts_every_failure_the_report_names_past_a_thousand() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("phases-thousands");
    let many = "import pytest\n\nfrom calc.c import fc\n\n\n@pytest.mark.parametrize('i', range(1200))\ndef test_fc_many(i):\n    assert fc(i) == i + 1\n";
    w.calc_package(&repo, CONFIG, 0.0, false, &[("tests/test_c_many.py", many)]);
    w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
        "break c",
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    let t = &rec["tests"];
    assert_eq!(t["failed"], 1201, "{}", t["output_tail"]);
    let one = &t["phases"][0];
    assert!(
        one["files"].to_string().contains("tests/test_c_many.py"),
        "{}",
        t["phases"]
    );
    assert_eq!(one["failed"], 1201, "{}", t["phases"]);
    assert_eq!(t["phases"][1]["failed"], 0, "{}", t["phases"]);
}
