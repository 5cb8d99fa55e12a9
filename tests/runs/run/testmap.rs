//! git-sandbox's own test map: which functions each pytest test calls, made off the critical
//! path, so that a change inside a function runs only the tests that called it in phase one,
//! where imports alone reach every test file (a package whose `__init__` imports everything, as
//! click's, flask's and requests' do). The test command is a src-layout project's
//! `env PYTHONPATH=src python3 -m pytest …`, as users write it.

use crate::common::World;
use std::path::{Path, PathBuf};

const CONFIG: &str = "[test]\ncommand = \"env PYTHONPATH=src python3 -m pytest -q tests\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n";

/// A package whose `__init__` imports each module, and tests that use it through the package.
fn project(w: &World, repo: &Path) {
    let mut files: Vec<(String, String)> = vec![
        (".sandbox.toml".into(), CONFIG.into()),
        (
            "src/calc/__init__.py".into(),
            "from calc.a import fa\nfrom calc.b import fb\nfrom calc.c import fc\n".into(),
        ),
    ];
    for m in ["a", "b", "c"] {
        files.push((
            format!("src/calc/{m}.py"),
            format!("def f{m}(x):\n    y = x + 1\n    return y\n"),
        ));
        // test_b's second test takes 2 s, so that a probe without it ends before the run.
        let wait = if m == "b" { "time.sleep(2)\n    " } else { "" };
        files.push((
            format!("tests/test_{m}.py"),
            format!("import time\n\nimport calc\n\n\ndef test_f{m}():\n    assert calc.f{m}(1) == 2\n\n\ndef test_{m}_alone():\n    {wait}assert calc is not None\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(repo, &refs, "a package and its tests");
}

fn maps(w: &World) -> Vec<PathBuf> {
    crate::common::files_under(&w.data().join("testmaps"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect()
}

fn explain(w: &World, repo: &Path) -> String {
    w.sandbox(repo, &["run", "--explain-selection", "HEAD"])
        .stdout
}

#[test]
fn a_change_inside_a_function_runs_only_the_tests_that_called_it() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap");
    project(&w, &repo);
    let base = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["passed"], 6, "{base}");

    // A branch that breaks fc, inside its body.
    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    let broken = w.commit(
        &repo,
        &[("src/calc/c.py", "def fc(x):\n    y = x + 2\n    return y\n")],
        "break c",
    );
    // By imports alone every test file is reached (each imports the package, whose __init__
    // imports fc): phase one is the file named for c.py, whole.
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 1 of 3 test files beside the whole suite")
            && o.contains("tests/test_c.py  named for src/calc/c.py (changed)"),
        "{o}"
    );

    // The map, made at main (git-sandbox starts this itself after a production run).
    w.git(&repo, &["checkout", "-q", "main"]);
    let made = w.sandbox(&repo, &["__testmap", "--json"]);
    let made = made.json();
    assert_eq!(made["tests"], 6, "{made}");
    w.git(&repo, &["checkout", "-q", "exp"]);
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 0 of 3 test files whole and 1 single tests")
            && o.contains("tests/test_c.py::test_fc  called the function holding src/calc/c.py:2 (changed), by the test map of"),
        "{o}"
    );

    // The run: the record is the whole suite's; phase one ran the one test and caught it.
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["commit"], broken.as_str());
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(rec["tests"]["passed"], 5, "{rec}");
    assert_eq!(
        rec["tests"]["failures"][0]["name"], "tests/test_c.py::test_fc",
        "{rec}"
    );
    let one = &rec["tests"]["phases"][0];
    assert_eq!(
        one["files"],
        serde_json::json!(["tests/test_c.py::test_fc"]),
        "{rec}"
    );
    assert_eq!(one["failed"], 1, "{rec}");
    assert!(rec["tests"].get("selection_missed").is_none(), "{rec}");

    // A change at module level (outside any function) is no function's: the map says which
    // tests call c.py's functions, a likelihood there, beside the file named for it (and the
    // failures of the last change to c.py); the file runs whole.
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "LIMIT = 3\n\n\ndef fc(x):\n    y = x + 2\n    return y\n",
        )],
        "a constant",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("tests/test_c.py  named for src/calc/c.py (changed)")
            && o.contains(
                "tests/test_c.py  calls functions of src/calc/c.py (changed), by the test map of"
            ),
        "{o}"
    );
}

#[test]
fn a_map_out_of_date_or_forged_is_not_followed() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap-stale");
    project(&w, &repo);
    w.sandbox(&repo, &["__testmap"]).success();
    let [map] = &maps(&w)[..] else {
        panic!("one map: {:?}", maps(&w));
    };
    // c.py changes on main after the map: its lines moved, so the map does not answer for it.
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "\n\ndef fc(x):\n    y = x + 1\n    return y\n",
        )],
        "c moves down",
    );
    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    w.commit(
        &repo,
        &[(
            "src/calc/c.py",
            "\n\ndef fc(x):\n    y = x + 2\n    return y\n",
        )],
        "break c",
    );
    // Its lines are not the map's: no single test by the changed line, only the file named for
    // it and the tests that call its functions at all.
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 1 of 3 test files beside the whole suite")
            && !o.contains("called the function holding"),
        "{o}"
    );
    // a.py did not change since the map: a change to it is the map's.
    w.commit(
        &repo,
        &[("src/calc/a.py", "def fa(x):\n    y = x + 2\n    return y\n")],
        "break a",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("tests/test_a.py::test_fa  called the function"),
        "{o}"
    );
    // A forged map (a file outside the checkout, an index past its functions) or garbage is
    // no map: the import graph decides, nothing fails.
    for forged in [
        r#"{"version":1,"functions":[["../../etc/x.py",1,9]],"outside":[],"tests":{"tests/test_b.py::test_fb":[0]}}"#,
        r#"{"version":1,"functions":[],"outside":[],"tests":{"tests/test_b.py::test_fb":[3]}}"#,
        "not json",
    ] {
        std::fs::write(map, forged).unwrap();
        let o = explain(&w, &repo);
        assert!(
            o.contains("tests/test_a.py  named for src/calc/a.py") && !o.contains("test map"),
            "{forged}: {o}"
        );
    }
}

#[test]
fn a_production_run_has_its_map_made_in_the_background() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap-background");
    project(&w, &repo);
    // Maps are off in the tests' world unless asked for.
    w.sandbox(&repo, &["run"]).success();
    assert!(maps(&w).is_empty());
    w.commit(&repo, &[("README.md", "more\n")], "prose");
    w.sandbox_env(&repo, &["run"], &[("GIT_SANDBOX_NO_TEST_MAP", "")])
        .success();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while maps(&w).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let head = w.git(&repo, &["rev-parse", "HEAD"]);
    let found = maps(&w);
    assert!(
        found
            .iter()
            .any(|p| p.ends_with(format!("{}.json", head.trim()))),
        "{found:?}"
    );
    // The next production commit is within the map's reach: none is made for it.
    w.commit(&repo, &[("README.md", "more still\n")], "prose");
    w.sandbox_env(&repo, &["run"], &[("GIT_SANDBOX_NO_TEST_MAP", "")])
        .success();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(maps(&w).len(), 1);
    // Forgetting the repository forgets its maps.
    w.sandbox(&repo, &["forget"]).success();
    assert!(maps(&w).is_empty(), "{:?}", maps(&w));
}

/// A decorator runs only as its module is imported, which the conftest files and collection do
/// before any test: the map counts it as called outside the tests (for every test), not as
/// called by none, so a change to it reaches the tests through imports. The module's own body,
/// which also runs then and spans the file, is no function: a change inside a function below it
/// is still the map's, test by test.
#[test]
fn a_change_to_a_function_only_an_import_calls_reaches_every_test_that_imports_it() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap-import");
    project(&w, &repo);
    // The package is imported by a conftest file, as flask's is, before the first test.
    w.commit(
        &repo,
        &[
            (
                "src/calc/a.py",
                "def register(f):\n    f.registered = True\n    return f\n\n\n@register\ndef fa(x):\n    y = x + 1\n    return y\n\n\nALL = [fa]\n",
            ),
            ("tests/conftest.py", "import calc\n"),
        ],
        "fa registered by a decorator",
    );
    w.sandbox(&repo, &["__testmap"]).success();
    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    w.commit(
        &repo,
        &[(
            "src/calc/a.py",
            "def register(f):\n    f.registered = True\n    return None\n\n\n@register\ndef fa(x):\n    y = x + 1\n    return y\n\n\nALL = [fa]\n",
        )],
        "the decorator loses fa",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 1 of 3 test files beside the whole suite")
            && o.contains("tests/test_a.py  named for src/calc/a.py (changed)")
            && !o.contains("called the function holding"),
        "{o}"
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(rec["tests"]["phases"][0]["failed"], 1, "{rec}");

    w.git(&repo, &["checkout", "-q", "-b", "exp2", "main"]);
    w.commit(
        &repo,
        &[(
            "src/calc/a.py",
            "def register(f):\n    f.registered = True\n    return f\n\n\n@register\ndef fa(x):\n    y = x + 2\n    return y\n\n\nALL = [fa]\n",
        )],
        "break fa",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 0 of 3 test files whole and 1 single tests")
            && o.contains(
                "tests/test_a.py::test_fa  called the function holding src/calc/a.py:8 (changed)"
            ),
        "{o}"
    );
}

/// The map sees each function of the project a test calls (a lambda, a decorated function and
/// the wrapper its decorator made, a generator) and changes none of them: a test that calls
/// `twice` only when `fa`'s docstring is still its own has `twice` in its map.
#[test]
fn the_map_sees_lambdas_decorated_functions_and_generators_and_changes_none() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap-shapes");
    project(&w, &repo);
    let a = "import functools\n\n\ndef fa(x):\n    \"\"\"Adds one.\"\"\"\n    return x + 1\n\n\ntwice = lambda x: x * 2\n\n\ndef deco(f):\n    @functools.wraps(f)\n    def inner(*args):\n        return f(*args)\n\n    return inner\n\n\n@deco\ndef decorated(x):\n    return x - 1\n\n\ndef gen(n):\n    yield from range(n)\n";
    let t = "from calc import a\n\n\ndef test_fa():\n    assert a.fa(1) == 2\n\n\ndef test_doc():\n    if a.fa.__doc__ == \"Adds one.\":\n        assert a.twice(2) == 4\n\n\ndef test_decorated():\n    assert a.decorated(1) == 0 and a.decorated.__name__ == \"decorated\"\n\n\ndef test_gen():\n    assert list(a.gen(2)) == [0, 1]\n";
    w.commit(
        &repo,
        &[("src/calc/a.py", a), ("tests/test_a.py", t)],
        "functions of every shape",
    );
    w.sandbox(&repo, &["__testmap"]).success();
    let found = maps(&w);
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&found[0]).unwrap()).unwrap();
    // Each test's functions of a.py, by their first line.
    let lines = |test: &str| -> Vec<u64> {
        let mut v: Vec<u64> = map["tests"][test]
            .as_array()
            .unwrap_or_else(|| panic!("{test} is not in {map}"))
            .iter()
            .map(|i| &map["functions"][i.as_u64().unwrap() as usize])
            .filter(|f| f[0] == "src/calc/a.py")
            .map(|f| f[1].as_u64().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(lines("tests/test_a.py::test_fa"), [4], "{map}");
    assert_eq!(lines("tests/test_a.py::test_doc"), [9], "{map}");
    assert_eq!(lines("tests/test_a.py::test_decorated"), [13, 20], "{map}");
    assert_eq!(lines("tests/test_a.py::test_gen"), [25], "{map}");

    // A change inside the decorated function runs the one test that called it.
    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    w.commit(
        &repo,
        &[("src/calc/a.py", a.replace("x - 1", "x - 2").as_str())],
        "break decorated",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 0 of 3 test files whole and 1 single tests")
            && o.contains("tests/test_a.py::test_decorated  called the function holding src/calc/a.py:22 (changed)"),
        "{o}"
    );
}

/// Where phase one runs a test file whole (the changed function is called as the package is
/// imported, so the change reaches every test file: the file named for the changed module runs),
/// the probe still runs the test named for the changed function first, before the file's earlier
/// tests, with plain asserts; the record keeps the suite's own order and pytest's messages.
#[test]
fn inside_a_whole_file_the_probe_runs_the_test_named_for_the_changed_function_first() {
    let mut w = World::new();
    w.with_test_python("pytest");
    let repo = w.new_repo("testmap-first");
    let c = "def compute(x):\n    y = x + 1\n    return y\n\n\ndef other(x):\n    return x\n\n\nSTART = compute(0)\n";
    // test_c_first: a session a test starts sees PYTEST_ADDOPTS as the user had it (unset).
    let test_c = "import os\nimport calc.c\n\n\ndef test_c_first():\n    assert calc.c.other(1) == 1 and 'PYTEST_ADDOPTS' not in os.environ\n\n\ndef test_c_second():\n    assert calc.c.other(2) == 2\n\n\ndef test_compute():\n    assert calc.c.compute(1) == 2\n";
    w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(
        &repo,
        &[
            (".sandbox.toml", CONFIG),
            (
                "src/calc/__init__.py",
                "from calc.a import fa\nfrom calc.c import compute\n",
            ),
            ("src/calc/a.py", "def fa(x):\n    return x\n"),
            ("src/calc/c.py", c),
            (
                "tests/test_a.py",
                "import calc\n\n\ndef test_fa():\n    assert calc.fa(1) == 1 and calc.compute is not None\n",
            ),
            ("tests/test_c.py", test_c),
        ],
        "a package and its tests",
    );
    let base = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(base["status"], "passed", "{base}");
    w.sandbox(&repo, &["__testmap"]).success();
    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    let broken = w.commit(
        &repo,
        &[("src/calc/c.py", &c.replace("x + 1", "x + 2"))],
        "break compute",
    );
    let explained = w
        .sandbox(&repo, &["run", "--explain-selection", "--json", "HEAD"])
        .json();
    assert_eq!(
        explained[0]["first"],
        serde_json::json!(["tests/test_c.py::test_compute"]),
        "{explained}"
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(
        rec["tests"]["phases"][0]["files"],
        serde_json::json!(["tests/test_c.py"]),
        "{rec}"
    );
    // Progress letters: the probe's F before its file's other tests; the run's in file order.
    let letters = |log: &str| -> String {
        log.lines()
            .find(|l| l.chars().next().is_some_and(|c| ".FE".contains(c)))
            .unwrap_or_default()
            .chars()
            .filter(|c| ".FE".contains(*c))
            .collect()
    };
    let log = |ext: &str| {
        crate::common::files_under(&w.data().join("logs"))
            .into_iter()
            .find(|p| p.to_string_lossy().ends_with(&format!("{broken}.{ext}")))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .unwrap_or_default()
    };
    assert_eq!(letters(&log("probe.log")), "F..", "{}", log("probe.log"));
    assert_eq!(letters(&log("log")), "...F", "{}", log("log"));
    // The run's failure is explained by pytest's rewritten assert; the probe's assert is plain
    // (rewriting a test file costs more than compiling it, and the record's messages are the
    // run's).
    assert!(log("log").contains("where 3 = "), "{}", log("log"));
    let probe = log("probe.log");
    assert!(
        probe.contains("AssertionError") && !probe.contains("where 3 = "),
        "{probe}"
    );
}
