//! Counts a commit's tests print: a pytest summary line printed by a test (through
//! `capsys.disabled()`, from `atexit`) or by the command in place of pytest's own adds no test,
//! and an experiment that deletes production's failing test and prints passes for it is not
//! recommended for it. A pytest that dies before its summary, or whose output names no failure,
//! is counted and named by the per-test report.

use crate::common;

use common::World;

const CONFIG: &str =
    "[test]\ncommand = \"python3 -m pytest -q tests\"\n[analysis]\nenabled = false\n";

/// Four tests, one failing; test_a prints 900 passes while the session runs, and 500 more are
/// printed as the interpreter exits.
const PRINTS_PASSES: &str = "import atexit\n\n\ndef _fake():\n    print('==================== 500 passed in 0.01s ====================')\n\n\natexit.register(_fake)\n\n\ndef test_a(capsys):\n    with capsys.disabled():\n        print('\\n=================== 900 passed in 0.02s ===================')\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n\n\ndef test_d():\n    assert 1 == 2\n";

fn world() -> World {
    let mut w = World::new();
    w.with_test_python("pytest");
    w
}

#[test]
fn a_summary_line_a_test_prints_adds_no_test() {
    let w = world();
    let repo = w.new_repo("printed");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", CONFIG),
            ("tests/test_x.py", PRINTS_PASSES),
        ],
        "four tests, 1,400 printed passes",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let t = &rec["tests"];
    // The first commit's two tests, and these four.
    assert_eq!(
        (&t["passed"], &t["failed"], &t["total"]),
        (&5.into(), &1.into(), &6.into()),
        "{rec}"
    );
    assert_eq!(rec["status"], "failed");
    // pytest's own summary agrees with the tests' outcomes: nothing to say.
    assert!(rec["warnings"].is_null(), "{rec}");
    // The reporter named every test, whatever pytest printed.
    let ids: Vec<&str> = t["ids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i.as_str())
        .collect();
    assert_eq!(ids.len(), 6, "{rec}");
    assert!(ids.contains(&"tests/test_x.py::test_d"), "{rec}");
}

/// The command hides pytest's summary (`-p no:terminal`) and prints its own: the per-test
/// results are counted, and the record says so.
#[test]
fn a_summary_printed_in_place_of_pytests_is_checked_against_each_tests_outcome() {
    let w = world();
    let repo = w.new_repo("hidden");
    let config = "[test]\ncommand = \"python3 -m pytest -p no:terminal tests; echo '6 passed in 0.1s'\"\n[analysis]\nenabled = false\n";
    w.commit(
        &repo,
        &[
            (".sandbox.toml", config),
            ("tests/test_x.py", PRINTS_PASSES),
        ],
        "pytest's summary hidden, another printed",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let t = &rec["tests"];
    assert_eq!(
        (&t["passed"], &t["failed"]),
        (&5.into(), &1.into()),
        "{rec}"
    );
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(t["failures"][0]["name"], "tests/test_x.py::test_d", "{rec}");
    let warnings = rec["warnings"].to_string();
    assert!(warnings.contains("counted the per-test results"), "{rec}");
}

/// Production has a failing test; the experiment deletes it and prints passes for it. Counted
/// by its summary lines it had more passing tests and no failure (STRONGLY_RECOMMEND); counted
/// by its tests, it removed one, which is no improvement.
#[test]
fn deleting_productions_failing_test_and_printing_passes_is_not_recommended() {
    let w = world();
    let repo = w.new_repo("deleted");
    let honest = PRINTS_PASSES
        .replace("atexit.register(_fake)", "")
        .replace("    with capsys.disabled():\n        print('\\n=================== 900 passed in 0.02s ===================')\n", "    pass\n");
    assert!(!honest.contains("900") && !honest.contains("register"));
    w.commit(
        &repo,
        &[(".sandbox.toml", CONFIG), ("tests/test_x.py", &honest)],
        "three passing tests and a failing one",
    );
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "green"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/green"]);
    let deleted = PRINTS_PASSES.replace("\n\ndef test_d():\n    assert 1 == 2\n", "\n");
    assert!(!deleted.contains("test_d"));
    w.commit(&repo, &[("tests/test_x.py", &deleted)], "no more failures");
    w.git(&repo, &["switch", "-q", "main"]);
    let ev = w.sandbox(&repo, &["eval", "green", "--json"]).json();
    assert_eq!(ev["recommendation"], "CONSIDER", "{ev}");
    let kept = ev["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "tests_kept")
        .unwrap_or_else(|| panic!("no tests_kept criterion: {ev}"));
    assert_eq!(kept["pass"], false, "{ev}");
    assert_eq!(
        kept["value"]["tests"],
        serde_json::json!(["tests/test_x.py::test_d"]),
        "{ev}"
    );
    // The human output names it too.
    let o = w.sandbox(&repo, &["eval", "green"]);
    assert!(
        o.stdout.contains("tests_kept") && o.stdout.contains("test_d"),
        "{o:?}"
    );
}

/// The other way: an honest suite whose tests report more than once (pytest's `subtests`,
/// unittest's `subTest`) is counted as pytest counts it, with nothing to warn of.
#[test]
fn subtests_are_counted_as_pytest_counts_them_without_a_warning() {
    let w = world();
    let repo = w.new_repo("subtests");
    let tests = "import unittest\n\n\ndef test_with_subtests(subtests):\n    for i in range(3):\n        with subtests.test(msg='i', i=i):\n            assert i < 2\n\n\nclass T(unittest.TestCase):\n    def test_sub(self):\n        for i in range(3):\n            with self.subTest(i=i):\n                self.assertLess(i, 5)\n";
    w.commit(
        &repo,
        &[(".sandbox.toml", CONFIG), ("tests/test_sub.py", tests)],
        "subtests",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let t = &rec["tests"];
    // pytest: "2 failed, 3 passed, 5 subtests passed" (the first commit's two tests too).
    assert_eq!(
        (&t["passed"], &t["failed"]),
        (&3.into(), &2.into()),
        "{rec}"
    );
    assert!(rec["warnings"].is_null(), "{rec}");
    assert_eq!(t["ids"].as_array().map(Vec::len), Some(4), "{rec}");
}

/// pytest dies mid-session (here a test ends the process, as a crash or pytest's own
/// INTERNALERROR does): its output has no summary line, and the record counts and names the
/// results its per-test report holds, saying where they came from.
#[test]
fn a_pytest_that_dies_mid_session_is_counted_by_the_tests_it_reported() {
    let w = world();
    let repo = w.new_repo("died");
    let tests = "import os\n\n\ndef test_a():\n    pass\n\n\ndef test_b():\n    assert 1 == 2\n\n\ndef test_c():\n    os._exit(3)\n\n\ndef test_d():\n    pass\n";
    w.commit(
        &repo,
        &[(".sandbox.toml", CONFIG), ("tests/test_x.py", tests)],
        "pytest dies at test_c",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let t = &rec["tests"];
    assert_eq!(rec["status"], "failed", "{rec}");
    // The first commit's two tests, test_a and test_b; test_c and test_d never reported.
    assert_eq!(
        (&t["passed"], &t["failed"], &t["total"]),
        (&3.into(), &1.into(), &4.into()),
        "{rec}"
    );
    assert_eq!(t["failures"][0]["name"], "tests/test_x.py::test_b", "{rec}");
    let warnings = rec["warnings"].to_string();
    assert!(warnings.contains("ends without its summary"), "{rec}");
}

/// pytest's summary counts a failure its output does not name (`--tb=no -rN`: no traceback, no
/// short summary; an INTERNALERROR that cuts the summary does the same): the record names it
/// from the per-test report.
#[test]
fn a_failure_pytests_output_counts_but_does_not_name_is_named() {
    let w = world();
    let repo = w.new_repo("unnamed");
    let config = CONFIG.replace("-q tests", "-q --tb=no -rN tests");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", &config),
            (
                "tests/test_x.py",
                "def test_a():\n    pass\n\n\ndef test_b():\n    assert 1 == 2\n",
            ),
        ],
        "a failure named nowhere in the output",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    let t = &rec["tests"];
    assert_eq!(
        (&t["passed"], &t["failed"]),
        (&3.into(), &1.into()),
        "{rec}"
    );
    assert!(!t["output_tail"].to_string().contains("test_b"), "{rec}");
    assert_eq!(t["failures"][0]["name"], "tests/test_x.py::test_b", "{rec}");
    // pytest's counts agree with each test's outcome: nothing to warn of.
    assert!(rec["warnings"].is_null(), "{rec}");
}
