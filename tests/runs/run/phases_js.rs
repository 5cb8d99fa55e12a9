//! Two-phase runs with real jest and vitest: the test files a change reaches through imports run
//! first (given to the runner as a file list), the rest after, one record for the suite.

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
            "const { add } = require('./util');\nmodule.exports = (x) => add(x, 1);\n".to_string()
        } else {
            "module.exports = (x) => x + 1;\n".to_string()
        };
        (format!("src/{m}.js"), body)
    };
    let test = |m: &str, sleep: u32| {
        (
            format!("test/{m}.test.js"),
            format!(
                "const f = require('../src/{m}');\n\ntest('{m} adds one', async () => {{\n  await new Promise((r) => setTimeout(r, {sleep}));\n  expect(f(1)).toBe(2);\n}});\n\ntest('{m} adds one again', () => {{\n  expect(f(2)).toBe(3);\n}});\n"
            ),
        )
    };
    project(&w, &repo, files, source, test, 1500);
    let (base, _) = run_json(&w, &repo);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["framework"], "jest", "{base}");
    assert_eq!(base["tests"]["passed"], 10, "{base}");

    // Break util, which only c imports.
    w.commit(
        &repo,
        &[(
            "src/util.js",
            "module.exports = { add: (x, y) => x + y + 1 };\n",
        )],
        "break util",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 1 of 5 test files")
            && why.contains("test/c.test.js  imports src/c.js → src/util.js (changed)"),
        "{why}"
    );
    let (rec, stderr) = run_json(&w, &repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["test/c.test.js"]),
        "{rec}"
    );
    assert_eq!(t["phases"][0]["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["passed"], 8, "{rec}");
    assert_first_failure_is_known_early(&rec, &stderr, "c adds one");
    // The record is the whole suite's, as one phase counts it.
    assert_eq!(
        (&t["passed"], &t["failed"], &t["total"]),
        (&8.into(), &2.into(), &10.into()),
        "{rec}"
    );
    let names: Vec<&str> = t["failures"]
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

    // A change to the runner's config: the graph cannot say what it touches.
    w.commit(
        &repo,
        &[(
            "jest.config.js",
            "module.exports = { testTimeout: 9000 };\n",
        )],
        "a jest config",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("one phase, the whole suite: jest.config.js changed"),
        "{why}"
    );
    let (rec, _) = run_json(&w, &repo);
    assert_eq!(rec["tests"]["failed"], 2, "{rec}");
    assert!(rec["tests"].get("phases").is_none(), "{rec}");
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
    let test = |m: &str, sleep: u32| {
        (
            format!("src/{m}.test.ts"),
            format!(
                "import {{ f }} from './{m}';\n\ntest('{m} adds one', async () => {{\n  await new Promise((r) => setTimeout(r, {sleep}));\n  expect(f(1)).toBe(2);\n}});\n\ntest('{m} adds one again', () => {{\n  expect(f(2)).toBe(3);\n}});\n"
            ),
        )
    };
    project(&w, &repo, files, source, test, 1500);
    let (base, _) = run_json(&w, &repo);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["passed"], 10, "{base}");

    w.commit(
        &repo,
        &[(
            "src/util.ts",
            "export const add = (x: number, y: number): number => x + y + 1;\n",
        )],
        "break util",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("src/c.test.ts  imports src/c.ts → src/util.ts (changed)"),
        "{why}"
    );
    let (rec, stderr) = run_json(&w, &repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert_eq!(
        t["phases"][0]["files"],
        serde_json::json!(["src/c.test.ts"]),
        "{rec}"
    );
    assert_eq!(t["phases"][0]["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["passed"], 8, "{rec}");
    assert_first_failure_is_known_early(&rec, &stderr, "src/c.test.ts > c adds one");
    assert_eq!(
        (&t["passed"], &t["failed"], &t["total"]),
        (&8.into(), &2.into(), &10.into()),
        "{rec}"
    );

    // A change to the config: one phase.
    w.commit(
        &repo,
        &[(
            "vitest.config.ts",
            "export default { test: { globals: true, dir: 'src', testTimeout: 9000 } };\n",
        )],
        "a vitest config",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("one phase, the whole suite: vitest.config.ts changed"),
        "{why}"
    );
    let (rec, _) = run_json(&w, &repo);
    assert_eq!(rec["tests"]["failed"], 2, "{rec}");
    assert!(rec["tests"].get("phases").is_none(), "{rec}");
}
