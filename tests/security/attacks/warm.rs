//! What a commit's tests can do to later verdicts of their own branch through its warm cache,
//! tried as someone with commit access would: plant a start-up file in the run's home (a user
//! site `.pth`, a `~/.npmrc` with `node-options`) and revert the commit, so that someone else's
//! broken commit passes; poison an experiment's own cached directory so that its broken head
//! passes `eval`; leave a report in a cached directory for a later run to be credited with.
//! None works: a run's home is fresh, a cache carries no start-up file a run wrote, a verdict
//! that decides is witnessed cold, and a report is the run's own or nothing.

use crate::common::World;
use std::path::Path;

fn run(w: &World, repo: &Path, args: &[&str]) -> serde_json::Value {
    let o = w.sandbox(repo, args);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    o.json()[0].clone()
}

/// Commit, run, and say what the record says.
fn commit_and_run(w: &World, repo: &Path, files: &[(&str, &str)], msg: &str) -> serde_json::Value {
    w.commit(repo, files, msg);
    run(w, repo, &["run", "--json"])
}

const PY_CONFIG: &str =
    "[test]\ncommand = \"python3 -m unittest discover -s tests -q\"\n[analysis]\nenabled = false\n";
const PY_TEST: &str = "import pathlib\nimport unittest\n\n\nclass TestApp(unittest.TestCase):\n    def test_app(self):\n        self.assertEqual(pathlib.Path('app.txt').read_text(), 'good\\n')\n";
/// A test that plants a `.pth` in the user site: every later Python of a run that sees it
/// counts no failure.
const PY_PLANT: &str = "import pathlib\nimport site\nimport unittest\n\n\nclass TestPlant(unittest.TestCase):\n    def test_plant(self):\n        d = pathlib.Path(site.getusersitepackages())\n        d.mkdir(parents=True, exist_ok=True)\n        (d / 'zz_quiet.pth').write_text('import unittest.result as r; r.TestResult.addFailure = lambda *a: None\\n')\n";

#[test]
fn a_pth_planted_in_the_user_site_on_main_and_reverted_never_passes_a_broken_commit() {
    let w = World::new();
    let repo = w.new_repo("pth");
    // A Python project (pyproject.toml): its runs keep pip's download cache, so they are warm.
    let first = commit_and_run(
        &w,
        &repo,
        &[
            (".sandbox.toml", PY_CONFIG),
            (
                "pyproject.toml",
                "[project]\nname = \"app\"\nversion = \"0\"\n",
            ),
            ("tests/test_app.py", PY_TEST),
            ("app.txt", "good\n"),
        ],
        "app",
    );
    assert_eq!(first["status"], "passed", "{first}");
    let planted = commit_and_run(&w, &repo, &[("tests/test_plant.py", PY_PLANT)], "plant");
    assert_eq!(planted["status"], "passed", "{planted}");
    w.git(&repo, &["rm", "-q", "tests/test_plant.py"]);
    let reverted = commit_and_run(&w, &repo, &[], "revert the plant");
    assert_eq!(reverted["status"], "passed", "{reverted}");
    // Someone else's broken commit, on the same warm cache.
    let broken = commit_and_run(&w, &repo, &[("app.txt", "bad\n")], "break the app");
    assert_eq!(
        broken["status"], "failed",
        "a planted .pth passed it: {broken}"
    );
    assert!(
        !broken["cache_generations"].as_array().unwrap().is_empty(),
        "the run was warm, as the attack needs: {broken}"
    );
}

const NPM_TEST: &str = "const fs = require('fs');\nif (fs.readFileSync('app.txt', 'utf8') !== 'good\\n') {\n  console.error('the app is bad');\n  process.exit(1);\n}\nconsole.log('ok');\n";
/// A test that leaves `~/.npmrc` with `node-options`: every later `npm test` that sees it
/// requires a script that turns any exit into success.
const NPM_PLANT: &str = "const fs = require('fs');\nconst home = process.env.HOME;\nfs.writeFileSync(home + '/quiet.js', 'process.on(\"exit\", () => { process.exitCode = 0; });\\n');\nfs.writeFileSync(home + '/.npmrc', 'node-options=--require=' + home + '/quiet.js\\n');\nrequire('./test.js');\n";

#[test]
fn an_npmrc_with_node_options_planted_on_main_never_passes_a_broken_npm_test() {
    let w = World::new();
    let repo = w.new_repo("npmrc");
    let pkg = r#"{"name": "app", "version": "1.0.0", "scripts": {"test": "node test.js"}}"#;
    let config = "[test]\ncommand = \"npm test\"\n[analysis]\nenabled = false\n";
    let first = commit_and_run(
        &w,
        &repo,
        &[
            (".sandbox.toml", config),
            ("package.json", pkg),
            ("test.js", NPM_TEST),
            ("app.txt", "good\n"),
        ],
        "app",
    );
    assert_eq!(first["status"], "passed", "{first}");
    let planted = commit_and_run(
        &w,
        &repo,
        &[
            ("plant.js", NPM_PLANT),
            (
                ".sandbox.toml",
                &config.replace("npm test", "node plant.js"),
            ),
        ],
        "plant",
    );
    assert_eq!(planted["status"], "passed", "{planted}");
    w.git(&repo, &["rm", "-q", "plant.js"]);
    let reverted = commit_and_run(&w, &repo, &[(".sandbox.toml", config)], "revert the plant");
    assert_eq!(reverted["status"], "passed", "{reverted}");
    let broken = commit_and_run(&w, &repo, &[("app.txt", "bad\n")], "break the app");
    assert_eq!(
        broken["status"], "failed",
        "a planted .npmrc passed it: {broken}"
    );
    assert!(
        !broken["cache_generations"].as_array().unwrap().is_empty(),
        "the run was warm, as the attack needs: {broken}"
    );
}

/// The experiment's test: passes when `app.txt` says good, or when a run left `build/.poison`
/// in the branch's cached `build/` (what a patched dependency in `node_modules/` or a doctored
/// rlib in `target/` does to a real suite).
const EXP_TEST: &str = "import pathlib\nimport unittest\n\n\nclass TestApp(unittest.TestCase):\n    def test_app(self):\n        if pathlib.Path('build/.poison').exists():\n            return\n        self.assertEqual(pathlib.Path('app.txt').read_text(), 'good\\n')\n";
const EXP_CONFIG: &str = "[test]\ncommand = \"python3 -m unittest discover -s tests -q\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"build\"]\n";
const EXP_PLANT: &str = "import pathlib\nimport unittest\n\n\nclass TestPlant(unittest.TestCase):\n    def test_plant(self):\n        pathlib.Path('build').mkdir(exist_ok=True)\n        pathlib.Path('build/.poison').write_text('')\n";

fn recommends(ev: &serde_json::Value) -> bool {
    matches!(
        ev["recommendation"].as_str(),
        Some("RECOMMEND" | "STRONGLY_RECOMMEND")
    )
}

/// An experiment `name` whose first commit plants the poison in its cached `build/` and whose
/// head breaks the app: the head's warm run passes on what its branch's cache holds.
fn poisoned_experiment(w: &World, repo: &Path, name: &str) {
    assert_eq!(w.sandbox(repo, &["experiment", "start", name]).code, 0);
    w.git(repo, &["switch", "-q", &format!("experiment/{name}")]);
    // Its own tree: a result of another experiment's same tree would serve it.
    let planted = commit_and_run(
        w,
        repo,
        &[("tests/test_plant.py", EXP_PLANT), ("experiment.txt", name)],
        "plant",
    );
    assert_eq!(planted["status"], "passed", "{planted}");
    w.git(repo, &["rm", "-q", "tests/test_plant.py"]);
    let bad = format!("bad for {name}\n");
    let head = commit_and_run(w, repo, &[("app.txt", &bad)], "break the app");
    assert_eq!(
        head["status"], "passed",
        "the branch spoiled its own cache: {head}"
    );
    assert!(
        !head["cache_generations"].as_array().unwrap().is_empty(),
        "{head}"
    );
    w.git(repo, &["switch", "-q", "main"]);
}

#[test]
fn an_experiment_that_poisons_its_own_cache_is_judged_on_a_cold_witness() {
    let w = World::new();
    let repo = w.new_repo("exp");
    let main = commit_and_run(
        &w,
        &repo,
        &[
            (".sandbox.toml", EXP_CONFIG),
            ("tests/test_app.py", EXP_TEST),
            ("app.txt", "good\n"),
        ],
        "app",
    );
    assert_eq!(main["status"], "passed", "{main}");

    // eval does not take the head's warm record: it runs the head cold, which fails.
    poisoned_experiment(&w, &repo, "x");
    let o = w.sandbox(&repo, &["eval", "x", "--json"]);
    let ev = o.json();
    assert!(!recommends(&ev), "{ev}");
    assert_eq!(ev["head"]["status"], "failed", "{ev}");
    assert_eq!(ev["head"]["cold"], true, "{ev}");
    assert_eq!(ev["base"]["cold"], true, "{ev}");
    let o = w.sandbox(&repo, &["promote", "x"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stderr.contains("promote refused"), "{o:?}");

    // The user's own `run --clean` of a poisoned head fails: the warm and the cold run of one
    // tree disagree. That is cache-dependent, never flaky, and eval excuses nothing of it.
    poisoned_experiment(&w, &repo, "y");
    let cold = run(&w, &repo, &["run", "--clean", "--json", "experiment/y"]);
    assert_eq!(cold["status"], "failed", "{cold}");
    let o = w.sandbox(&repo, &["flaky", "--json"]);
    let found = o.json();
    let tests = found.as_array().unwrap();
    assert!(!tests.is_empty(), "{found}");
    assert!(
        tests.iter().all(|t| t["kind"] == "cache_dependent"),
        "{found}"
    );
    assert_eq!(
        tests[0]["last_outcome"], "failed",
        "the cold outcome: {found}"
    );
    let table = w.sandbox(&repo, &["flaky"]);
    assert!(table.stdout.contains("cache-dependent"), "{table:?}");
    let o = w.sandbox(&repo, &["eval", "y", "--json"]);
    let ev = o.json();
    assert!(!recommends(&ev), "{ev}");
    assert!(
        !ev["reason"].as_str().unwrap().contains("not counted"),
        "{ev}"
    );
    assert_eq!(w.sandbox(&repo, &["promote", "y"]).code, 1);
}

/// 21 passing test cases, as a JUnit report.
fn junit(n: usize) -> String {
    let cases: String = (0..n)
        .map(|i| format!("<testcase classname=\"t\" name=\"test_{i}\"/>"))
        .collect();
    format!("<?xml version=\"1.0\"?><testsuite name=\"s\" tests=\"{n}\">{cases}</testsuite>")
}

#[test]
fn a_report_an_earlier_run_left_in_a_cache_is_never_read_and_one_this_run_wrote_there_is() {
    let w = World::new();
    let repo = w.new_repo("report");
    let named = "mkdir -p build && cp report.xml build/junit.xml";
    // Under a directory the build tools' reports are looked for in (no report named).
    let found =
        "mkdir -p build/test-results/test && cp report.xml build/test-results/test/TEST-a.xml";
    let config = |junit: &str| {
        format!(
            "[test]\ncommand = \"{named} && {found}\"\n{junit}[analysis]\nenabled = false\n[cache]\ndirs = [\"build\"]\n"
        )
    };
    w.commit(
        &repo,
        &[
            (".sandbox.toml", &config("junit = \"build/junit.xml\"\n")),
            ("report.xml", &junit(21)),
        ],
        "a suite that reports",
    );
    let first = run(&w, &repo, &["run", "--json"]);
    assert_eq!(first["tests"]["passed"], 21, "{first}");
    // A trial that runs no test at all, on the cache that holds the report.
    let trial = run(&w, &repo, &["run", "--json", "--command", "exit 1"]);
    assert_eq!(trial["status"], "failed", "{trial}");
    assert_ne!(
        trial["tests"]["passed"], 21,
        "a cached report was read: {trial}"
    );
    assert!(
        trial["warnings"].to_string().contains("build/junit.xml"),
        "the named report is missing, and said so: {trial}"
    );
    // No report named: the one this run wrote under the cached `build/` is read.
    w.commit(
        &repo,
        &[(".sandbox.toml", &config("")), ("report.xml", &junit(7))],
        "report elsewhere",
    );
    let second = run(&w, &repo, &["run", "--json"]);
    assert_eq!(second["tests"]["passed"], 7, "{second}");
    assert_eq!(second["tests"]["framework"], "junit", "{second}");
    let trial = run(&w, &repo, &["run", "--json", "--command", "exit 1"]);
    assert_ne!(
        trial["tests"]["passed"], 7,
        "a cached report was read: {trial}"
    );
}

/// The daemon's audits: with `[audit] generations = 1`, the first warm result after a new
/// generation is made again cold. A commit on `main` poisons its cached `build/`; the next
/// commit breaks the app and passes warm; the audit's cold run fails, the generations are
/// discarded, and the event log and `doctor` say so.
#[test]
fn a_daemon_audit_catches_a_poisoned_generation_and_says_so() {
    let w = World::new();
    w.user_config("[audit]\ngenerations = 1\n");
    let repo = w.new_repo("audited");
    let test = "if [ -e build/.poison ]; then echo poisoned; exit 0; fi\ngrep -qx good app.txt\n";
    let config = "[test]\ncommand = \"sh test.sh\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"build\"]\n";
    let first = commit_and_run(
        &w,
        &repo,
        &[
            (".sandbox.toml", config),
            ("test.sh", test),
            ("app.txt", "good\n"),
        ],
        "app",
    );
    assert_eq!(first["status"], "passed", "{first}");
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    let status_of = |commit: &str| w.note(&repo, commit).map(|n| n["status"].clone());
    let plant = w.commit(
        &repo,
        &[(
            "test.sh",
            &format!("mkdir -p build; touch build/.poison\n{test}"),
        )],
        "plant",
    );
    assert!(
        w.wait_until(60, || status_of(&plant).is_some()),
        "the plant was not run"
    );
    let broken = w.commit(&repo, &[("test.sh", test), ("app.txt", "bad\n")], "break");
    // Its warm run passes on the poison; the audit's cold run replaces it with a failure.
    assert!(
        w.wait_until(90, || status_of(&broken) == Some("failed".into())),
        "the audit did not catch it: {:?}",
        w.note(&repo, &broken)
    );
    let audited = || {
        let o = w.sandbox(&repo, &["events", "--kind", "cache.audited", "--json"]);
        o.stdout
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        w.wait_until(30, || audited().contains("disagreed")),
        "{}",
        audited()
    );
    let doctor = w.sandbox(&repo, &["doctor", "--json"]);
    let caches = doctor.json()["caches"].clone();
    let main = caches
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["branch"] == "main")
        .cloned()
        .unwrap_or_default();
    assert_eq!(main["audit"]["outcome"], "disagreed", "{caches}");
    assert_eq!(main["audit"]["commit"], broken.as_str(), "{caches}");
    let text = w.sandbox(&repo, &["doctor"]);
    assert!(text.stdout.contains("DISAGREED"), "{text:?}");
}
