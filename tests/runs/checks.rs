//! Named checks (`[checks.NAME]`): a linter and a type checker beside the tests, run in the
//! commit's own tree with real commands, each with its own status in the note, and shown by
//! `show`, `log` and `eval`.

use crate::common;

use common::World;

const TESTS: &str = "[test]\ncommand = \"python3 -m unittest discover -s tests -v\"\n";

/// A lint that fails while `app.py` holds a TODO (so it reads the commit's tree), an optional
/// type check that always fails, and the template's tests.
fn checks_config(types_required: bool) -> String {
    format!(
        "[checks.lint]\ncommand = \"echo linting; if grep -n TODO app.py; then echo 'app.py: a TODO is left'; exit 1; fi\"\n\n\
         [checks.types]\ncommand = \"echo 'types: 1 error'; exit 3\"\nrequired = {types_required}\n\n{TESTS}"
    )
}

#[test]
fn each_check_has_its_own_status_and_only_required_ones_fail_the_run() {
    let w = World::new();
    let repo = w.new_repo("checks");
    let todo = w.commit(
        &repo,
        &[
            (".sandbox.toml", &checks_config(false)),
            ("app.py", "def f():\n    return 1  # TODO\n"),
        ],
        "a TODO left",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "a failing required check fails the run: {o:?}");
    assert!(o.stdout.contains("lint failed"), "{o:?}");
    assert!(o.stdout.contains("types failed (optional)"), "{o:?}");
    let note = w.note(&repo, &todo).expect("a note");
    assert_eq!(note["status"], "failed");
    assert_eq!(note["tests"]["status"], "passed", "{note}");
    assert_eq!(note["tests"]["passed"], 2, "{note}");
    let lint = &note["checks"]["lint"];
    assert_eq!(lint["status"], "failed", "{note}");
    assert_eq!(lint["required"], true);
    assert_eq!(lint["exit_code"], 1);
    assert!(
        lint["output_tail"]
            .as_str()
            .unwrap()
            .contains("app.py: a TODO is left"),
        "{lint}"
    );
    let types = &note["checks"]["types"];
    assert_eq!(types["status"], "failed");
    assert_eq!(types["required"], false);
    assert_eq!(types["exit_code"], 3);
    assert!(
        note.get("checks").unwrap().get("test").is_none(),
        "the tests stay in `tests`"
    );
    // The checks keep the order the config declares (lint, then types), in the note as written.
    let raw = w.git(&repo, &["notes", "--ref", "sandbox", "show", &todo]);
    assert!(raw.find("\"lint\"").unwrap() < raw.find("\"types\"").unwrap());

    // Plain `git log` shows them, in the summary note.
    let summary = w.git(&repo, &["notes", "--ref", "sandbox-summary", "show", &todo]);
    assert!(
        summary.contains("Sandbox-Checks: lint failed, types failed (optional)"),
        "{summary}"
    );

    // Each check's output is kept in a log of its own, which `show` names.
    let show = w.sandbox(&repo, &["show", &todo]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(show.stdout.contains("Checks:"), "{show:?}");
    assert!(show.stdout.contains("✘ lint "), "{show:?}");
    assert!(show.stdout.contains("(optional)"), "{show:?}");
    assert!(show.stdout.contains("a TODO is left"), "{show:?}");
    let log = w
        .log_of(&todo)
        .with_file_name(format!("{todo}.check-lint.log"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("linting") && text.contains("2:    return 1  # TODO"),
        "{text}"
    );

    // Fixed: the optional check still fails, and that does not fail the run.
    let fixed = w.commit(&repo, &[("app.py", "def f():\n    return 1\n")], "no TODO");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let note = w.note(&repo, &fixed).unwrap();
    assert_eq!(note["status"], "passed", "{note}");
    assert_eq!(note["checks"]["lint"]["status"], "passed");
    assert_eq!(note["checks"]["types"]["status"], "failed");
    let log = w.sandbox(&repo, &["log", "-n", "1"]);
    assert!(log.stdout.contains("types failed (optional)"), "{log:?}");

    // The same tree again is served from that result, checks and all.
    let again = w.commit(&repo, &[], "empty");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let note = w.note(&repo, &again).unwrap();
    assert_eq!(note["cached_from"], fixed);
    assert_eq!(note["checks"]["types"]["exit_code"], 3);

    // Making the type check required is another config: it runs again and fails the run.
    let strict = w.commit(
        &repo,
        &[(".sandbox.toml", &checks_config(true))],
        "types required",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let note = w.note(&repo, &strict).unwrap();
    assert_eq!(note["cached_from"], serde_json::Value::Null);
    assert_eq!(note["status"], "failed");
    assert_eq!(note["checks"]["types"]["required"], true);
}

#[test]
fn parallel_checks_run_at_the_same_time_and_a_slow_one_times_out_alone() {
    let w = World::new();
    let repo = w.new_repo("parallel");
    // Each prints when it started and ended (seconds since the epoch, from inside the sandbox).
    let timed = |name: &str| {
        format!(
            "[checks.{name}]\ncommand = \"date +%s.%N; sleep 1.5; date +%s.%N\"\nparallel = true\n\n"
        )
    };
    let config = format!(
        "{}{}[checks.slow]\ncommand = \"sleep 30\"\ntimeout = \"1s\"\nrequired = false\n\n{TESTS}",
        timed("a"),
        timed("b")
    );
    let c = w.commit(&repo, &[(".sandbox.toml", &config)], "parallel checks");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(
        o.code, 0,
        "an optional check that times out fails nothing: {o:?}"
    );
    let note = w.note(&repo, &c).unwrap();
    let span = |name: &str| -> (f64, f64) {
        let out = note["checks"][name]["output_tail"].as_str().unwrap();
        let times: Vec<f64> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert_eq!(times.len(), 2, "{name}: {out}");
        (times[0], times[1])
    };
    let (a, b) = (span("a"), span("b"));
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "the parallel checks overlapped: a {a:?}, b {b:?}"
    );
    let slow = &note["checks"]["slow"];
    assert_eq!(slow["status"], "timeout", "{slow}");
    assert_eq!(slow["killed_by"], "timeout");
    assert!(
        slow["error"]
            .as_str()
            .unwrap()
            .contains("raise [checks.slow] timeout"),
        "{slow}"
    );
}

#[test]
fn a_broken_check_in_a_commit_is_an_error_naming_the_file_line_and_fix() {
    let w = World::new();
    let repo = w.new_repo("broken");
    let c = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[checks.lint]\ncommand = \"true\"\n\n[checks.types]\ntimeout = \"1m\"\n",
        )],
        "a check without a command",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_ne!(o.code, 0, "{o:?}");
    let note = w.note(&repo, &c).unwrap();
    assert_eq!(note["status"], "error");
    let error = note["error"].as_str().unwrap();
    assert!(
        error.contains(".sandbox.toml") && error.contains("the check `types` has no command"),
        "{error}"
    );
    assert!(error.contains("add command = "), "{error}");

    // In the user's own config the same mistake stops every command before it does anything.
    w.user_config("[checks.\"Lint Me\"]\ncommand = \"true\"\n");
    let o = w.sandbox(&repo, &["status"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("is not a check name"), "{o:?}");
    assert!(hints.iter().any(|h| h.contains("lower-case")), "{o:?}");
}

const CALC: &str =
    "def add(a, b):\n    return a + b\n\n\ndef unused(x):\n    y = x * 2\n    return y\n";
const CALC_TEST: &str = "import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n";

#[test]
fn line_coverage_from_a_real_coverage_py_report_is_recorded_with_the_changed_files() {
    let mut w = World::new();
    w.with_test_python("coverage");
    let repo = w.new_repo("coverage");
    // The report is not named: coverage.json is where `coverage json` writes it.
    let c = w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"python3 -m coverage run --include=calc.py -m unittest discover -s tests && python3 -m coverage json --include=calc.py -o coverage.json\"\n",
            ),
            ("calc.py", CALC),
            ("tests/test_calc.py", CALC_TEST),
        ],
        "calc, half tested",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let note = w.note(&repo, &c).unwrap();
    let cov = &note["coverage"];
    assert_eq!(cov["format"], "coverage.py", "{note}");
    assert_eq!(cov["report"], "coverage.json");
    assert_eq!(cov["check"], "test");
    // Five statements; the test runs the two definitions and `return a + b`.
    assert_eq!(
        (cov["lines_covered"].as_u64(), cov["lines_total"].as_u64()),
        (Some(3), Some(5)),
        "{cov}"
    );
    assert_eq!(cov["percent"], 60.0);
    assert_eq!(cov["changed_files"][0]["path"], "calc.py", "{cov}");
    assert_eq!(cov["changed_files"][0]["percent"], 60.0);
    let show = w.sandbox(&repo, &["show", &c]);
    assert!(
        show.stdout.contains("Coverage: 60.00% of 5 lines"),
        "{show:?}"
    );
    let summary = w.git(&repo, &["notes", "--ref", "sandbox-summary", "show", &c]);
    assert!(summary.contains("coverage 60.0%"), "{summary}");

    // A report the config names but the command never wrote is said, not guessed.
    let named = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"python3 -m unittest discover -s tests\"\ncoverage = \"reports/coverage.xml\"\n")],
        "a report that is not written",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let note = w.note(&repo, &named).unwrap();
    assert!(note.get("coverage").is_none(), "{note}");
    assert!(
        note["warnings"]
            .to_string()
            .contains("reports/coverage.xml"),
        "{note}"
    );

    // A report committed to the tree is not this run's: it is never taken for one.
    let committed = w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"python3 -m unittest discover -s tests\"\n",
            ),
            (
                "coverage.json",
                "{\"totals\": {\"covered_lines\": 5, \"num_statements\": 5}, \"files\": {}}",
            ),
        ],
        "a stale report committed",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    assert!(w.note(&repo, &committed).unwrap().get("coverage").is_none());
}

#[test]
fn coverage_with_branches_is_recorded_as_the_tool_totals_it() {
    let w = World::new();
    let repo = w.new_repo("branch-coverage");
    // A real coverage.py report of a run with `branch = true`, written by the command where
    // `coverage json` writes it; `coverage report` printed `TOTAL 17 6 12 3 55.17%` for it.
    let c = w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"cp captured.json coverage.json\"\n",
            ),
            (
                "captured.json",
                include_str!("../fixtures/coverage/coveragepy-branch.json"),
            ),
        ],
        "a branch-coverage report",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let cov = w.note(&repo, &c).unwrap()["coverage"].clone();
    assert_eq!(
        cov["percent"], 55.17,
        "the tool's TOTAL, not statements alone: {cov}"
    );
    assert_eq!(
        (cov["lines_covered"].as_u64(), cov["lines_total"].as_u64()),
        (Some(11), Some(17))
    );
    assert_eq!(
        (
            cov["branches_covered"].as_u64(),
            cov["branches_total"].as_u64()
        ),
        (Some(5), Some(12)),
        "{cov}"
    );
    let show = w.sandbox(&repo, &["show", &c]);
    assert!(
        show.stdout
            .contains("Coverage: 55.17% (11 of 17 statements, 5 of 12 branches)"),
        "{show:?}"
    );
}

#[test]
fn junit_reports_are_found_where_build_tools_write_them_and_never_from_the_tree() {
    let w = World::new();
    let repo = w.new_repo("surefire");
    // A real pytest JUnit report, copied by the command to where Maven Surefire writes its own
    // (one file per test class).
    let report = include_str!("../fixtures/output/junit/pytest_some_fail.xml");
    let copy = |n: usize| {
        let files: Vec<String> = (0..n)
            .map(|i| format!("cp report.xml target/surefire-reports/TEST-{i}.xml"))
            .collect();
        format!(
            "[test]\ncommand = \"mkdir -p target/surefire-reports && {} && echo built\"\n",
            files.join(" && ")
        )
    };
    let one = w.commit(
        &repo,
        &[(".sandbox.toml", &copy(1)), ("report.xml", report)],
        "one report",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "the report has failures: {o:?}");
    let t1 = w.note(&repo, &one).unwrap()["tests"].clone();
    assert_eq!(t1["framework"], "junit", "{t1}");
    let total = t1["total"].as_u64().unwrap();
    assert!(total > 0 && t1["failed"].as_u64().unwrap() > 0, "{t1}");
    let two = w.commit(&repo, &[(".sandbox.toml", &copy(2))], "two reports");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let t2 = w.note(&repo, &two).unwrap()["tests"].clone();
    assert_eq!(
        t2["total"].as_u64(),
        Some(2 * total),
        "every class's report counts: {t2}"
    );
    assert_eq!(
        t2["failures"].as_array().unwrap().len(),
        2 * t1["failures"].as_array().unwrap().len()
    );

    // Reports committed to the tree are not this run's: the directory is not looked in.
    // (The template ignores target/: added with -f, as a project that commits it would.)
    std::fs::create_dir_all(repo.join("target/surefire-reports")).unwrap();
    std::fs::write(repo.join("target/surefire-reports/TEST-old.xml"), report).unwrap();
    w.own(&repo);
    w.git(
        &repo,
        &["add", "-f", "target/surefire-reports/TEST-old.xml"],
    );
    let stale = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"echo nothing to test\"\n",
        )],
        "a stale report committed",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let t = w.note(&repo, &stale).unwrap()["tests"].clone();
    assert_eq!(t["total"], serde_json::Value::Null, "{t}");
}
