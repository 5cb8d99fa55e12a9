//! The probe with real jest and vitest: the test files a change reaches through imports run
//! beside the suite (given to the runner as a file list); the record is the suite's own run.

use crate::common::{tools, World};
use std::path::Path;

/// A world whose runs find jest and vitest on `PATH`.
fn world() -> World {
    let mut w = World::new();
    let path = std::env::var("PATH").unwrap_or_default();
    w.extra_env.push((
        "PATH".into(),
        format!(
            "{}:{}:{path}",
            tools::jest().display(),
            tools::vitest().display()
        ),
    ));
    w
}

fn run_json(w: &World, repo: &Path) -> (serde_json::Value, String) {
    let o = w.sandbox(repo, &["run", "--json"]);
    (o.json()[0].clone(), o.stderr)
}

fn explain(w: &World, repo: &Path) -> String {
    let o = w.sandbox(repo, &["run", "--explain-selection", "HEAD"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
}

/// Five modules `m/a` … `m/e` with a test file each (`test_file(m)` names it); `c` gets its
/// `add` from `util` (so a change to util reaches c's tests through c), and every test file but
/// c's sleeps `sleep_ms` first, so the whole suite is slow next to c's file.
fn project(
    w: &World,
    repo: &Path,
    mut files: Vec<(String, String)>,
    source: impl Fn(&str) -> (String, String),
    test: impl Fn(&str, u32) -> (String, String),
    sleep_ms: u32,
) {
    for m in ["a", "b", "c", "d", "e"] {
        files.push(source(m));
        files.push(test(m, if m == "c" { 0 } else { sleep_ms }));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(repo, &refs, "a package and its tests");
}

fn assert_first_failure_is_known_early(rec: &serde_json::Value, stderr: &str, name: &str) {
    let t = &rec["tests"];
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    let phase_two = t["phases"][1]["duration_ms"].as_u64().unwrap();
    assert!(
        first < t["duration_ms"].as_u64().unwrap() && phase_two > 0,
        "the failure is known before the suite ends: {rec}"
    );
    assert!(
        stderr.contains("first failure after") && stderr.contains(name),
        "run says so at once: {stderr}"
    );
}

/// What differs between jest and vitest in [`reached_files_run_first`].
struct Runner<S, T> {
    name: &'static str,
    files: Vec<(String, String)>,
    source: S,
    test: T,
    /// util's path and a body that breaks it.
    util: (&'static str, &'static str),
    /// c's test file (all phase one runs once util breaks), c's source, and c's first test's
    /// name as the runner reports it.
    c_test: &'static str,
    c_source: &'static str,
    failure: &'static str,
    /// The runner's config file and a new body for it.
    config: (&'static str, &'static str),
}

/// Build the project, run it, break util (which only c imports), and check that c's test file
/// runs first and fails first, and that the record is the whole suite's. Returns that record.
fn reached_files_run_first<S, T>(w: &World, repo: &Path, r: Runner<S, T>) -> serde_json::Value
where
    S: Fn(&str) -> (String, String),
    T: Fn(&str, u32) -> (String, String),
{
    project(w, repo, r.files, r.source, r.test, 1500);
    let (base, _) = run_json(w, repo);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["framework"], r.name, "{base}");
    assert_eq!(base["tests"]["passed"], 10, "{base}");

    w.commit(repo, &[r.util], "break util");
    let why = explain(w, repo);
    let (c, source, util) = (r.c_test, r.c_source, r.util.0);
    assert!(
        why.contains("phase one runs 1 of 5 test files")
            && why.contains(&format!("{c}  imports {source} → {util} (changed)")),
        "{why}"
    );
    let (rec, stderr) = run_json(w, repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert_eq!(t["phases"][0]["files"], serde_json::json!([c]), "{rec}");
    assert_eq!(t["phases"][0]["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["passed"], 8, "{rec}");
    assert_first_failure_is_known_early(&rec, &stderr, r.failure);
    // The record is the whole suite's, as one phase counts it.
    assert_eq!(
        (&t["passed"], &t["failed"], &t["total"]),
        (&8.into(), &2.into(), &10.into()),
        "{rec}"
    );

    // A change to the runner's config: the graph cannot say what it touches.
    w.commit(repo, &[r.config], "a runner config");
    let why = explain(w, repo);
    assert!(
        why.contains(&format!(
            "one phase, the whole suite: {} changed",
            r.config.0
        )),
        "{why}"
    );
    let (after, _) = run_json(w, repo);
    assert_eq!(after["tests"]["failed"], 2, "{after}");
    assert!(after["tests"].get("phases").is_none(), "{after}");
    rec
}

/// Two tests a module (`<m> adds one`, `<m> adds one again`); the first sleeps `{sleep}` ms.
fn test_body(import: &str) -> impl Fn(&str, u32) -> String + '_ {
    move |m, sleep| {
        format!(
            "{import}\n\ntest('{m} adds one', async () => {{\n  await new Promise((r) => setTimeout(r, {sleep}));\n  expect(f(1)).toBe(2);\n}});\n\ntest('{m} adds one again', () => {{\n  expect(f(2)).toBe(3);\n}});\n",
            import = import.replace("{m}", m)
        )
    }
}

#[test]
fn jest_runs_the_test_files_a_change_reaches_first() {
    let w = world();
    let repo = w.new_repo("jest-phases");
    let files = vec![
        (
            ".sandbox.toml".to_string(),
            "[test]\ncommand = \"npm test\"\ntimeout = \"180s\"\n[analysis]\nenabled = false\n"
                .to_string(),
        ),
        (
            "package.json".to_string(),
            r#"{"name":"calc","private":true,"scripts":{"test":"jest --ci"}}"#.to_string(),
        ),
        (
            "src/util.js".to_string(),
            "module.exports = { add: (x, y) => x + y };\n".to_string(),
        ),
    ];
    let source = |m: &str| {
        let body = if m == "c" {
            "const { add } = require('./util');\nmodule.exports = (x) => add(x, 1);\n"
        } else {
            "module.exports = (x) => x + 1;\n"
        };
        (format!("src/{m}.js"), body.to_string())
    };
    let body = test_body("const f = require('../src/{m}');");
    let test = |m: &str, sleep: u32| (format!("test/{m}.test.js"), body(m, sleep));
    let runner = Runner {
        name: "jest",
        files,
        source,
        test,
        util: (
            "src/util.js",
            "module.exports = { add: (x, y) => x + y + 1 };\n",
        ),
        c_test: "test/c.test.js",
        c_source: "src/c.js",
        failure: "c adds one",
        config: (
            "jest.config.js",
            "module.exports = { testTimeout: 9000 };\n",
        ),
    };
    let rec = reached_files_run_first(&w, &repo, runner);
    let names: Vec<&str> = rec["tests"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c adds one", "c adds one again"], "{rec}");

    // A test file that failed in the parent's run comes first again, found in jest's log.
    w.commit(
        &repo,
        &[("src/a.js", "module.exports = (x) => 1 + x;\n")],
        "touch a",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 2 of 5 test files")
            && why.contains("test/a.test.js  imports src/a.js (changed)")
            && why.contains(
                "test/c.test.js  failed in the parent's run: c adds one, c adds one again"
            ),
        "{why}"
    );
}

#[test]
fn vitest_runs_the_test_files_a_change_reaches_first() {
    let w = world();
    let repo = w.new_repo("vitest-phases");
    let files = vec![
        (
            ".sandbox.toml".to_string(),
            "[test]\ncommand = \"vitest run\"\ntimeout = \"180s\"\n[analysis]\nenabled = false\n"
                .to_string(),
        ),
        // Its --exclude globs are rooted at `dir`.
        (
            "vitest.config.ts".to_string(),
            "export default { test: { globals: true, dir: 'src' } };\n".to_string(),
        ),
        (
            "package.json".to_string(),
            r#"{"name":"calc","private":true,"type":"module"}"#.to_string(),
        ),
        (
            "src/util.ts".to_string(),
            "export const add = (x: number, y: number): number => x + y;\n".to_string(),
        ),
    ];
    // TypeScript's ESM style: `./util.js` names util.ts.
    let source = |m: &str| {
        let body = if m == "c" {
            "import { add } from './util.js';\n\nexport const f = (x: number) => add(x, 1);\n"
        } else {
            "export const f = (x: number) => x + 1;\n"
        };
        (format!("src/{m}.ts"), body.to_string())
    };
    let body = test_body("import { f } from './{m}';");
    let test = |m: &str, sleep: u32| (format!("src/{m}.test.ts"), body(m, sleep));
    let runner = Runner {
        name: "vitest",
        files,
        source,
        test,
        util: (
            "src/util.ts",
            "export const add = (x: number, y: number): number => x + y + 1;\n",
        ),
        c_test: "src/c.test.ts",
        c_source: "src/c.ts",
        failure: "src/c.test.ts > c adds one",
        config: (
            "vitest.config.ts",
            "export default { test: { globals: true, dir: 'src', testTimeout: 9000 } };\n",
        ),
    };
    reached_files_run_first(&w, &repo, runner);
}
