//! The probe with real mocha (express's runner): the test files a change reaches through imports
//! run beside the suite, given to mocha as its spec in place of the one the command names; the
//! record is the suite's own run, the same as in one phase. Through `npm test`, `pnpm test` and
//! `yarn test` as well, each with the real package manager, which pass jest's and vitest's
//! files on too.

use crate::common::{tools, World};
use std::path::Path;

/// A world whose runs find mocha, pnpm and yarn on `PATH`.
fn world() -> World {
    let mut w = World::new();
    let path = std::env::var("PATH").unwrap_or_default();
    let bins = [tools::mocha(), tools::pnpm(), tools::yarn()];
    let bins: Vec<String> = bins.iter().map(|b| b.display().to_string()).collect();
    w.extra_env
        .push(("PATH".into(), format!("{}:{path}", bins.join(":"))));
    w
}

fn run_json(w: &World, repo: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    let o = w.sandbox(repo, &all);
    (o.json()[0].clone(), o.stderr)
}

fn explain(w: &World, repo: &Path) -> String {
    let o = w.sandbox(repo, &["run", "--explain-selection", "HEAD"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
}

/// express's test script, as its package.json has it.
const EXPRESS_SCRIPT: &str =
    "mocha --require test/support/env --reporter spec --check-leaks test/ test/acceptance/";

/// express's layout in small: `lib/<m>.js` and `test/<m>.js` for five modules, `c` adding with
/// `lib/util.js`, an acceptance test of `e` in `test/acceptance/`, and the env file mocha
/// requires first. Every test file but c's sleeps `sleep_ms` first.
fn project(w: &World, repo: &Path, command: &str, sleep_ms: u32) {
    let config = format!(
        "[test]\ncommand = \"{command}\"\ntimeout = \"180s\"\n[analysis]\nenabled = false\n"
    );
    let package =
        format!(r#"{{"name":"calc","private":true,"scripts":{{"test":"{EXPRESS_SCRIPT}"}}}}"#);
    let mut files: Vec<(String, String)> = vec![
        (".sandbox.toml".into(), config),
        ("package.json".into(), package),
        (
            "test/support/env.js".into(),
            "process.env.NODE_ENV = 'test';\n".into(),
        ),
        (
            "lib/util.js".into(),
            "exports.add = (x, y) => x + y;\n".into(),
        ),
        (
            "test/acceptance/e.js".into(),
            "const assert = require('assert');\nconst f = require('../../lib/e');\n\ndescribe('e end to end', () => {\n  it('adds one', () => assert.strictEqual(f(41), 42));\n});\n".into(),
        ),
    ];
    for m in ["a", "b", "c", "d", "e"] {
        let source = if m == "c" {
            "const { add } = require('./util');\n\nmodule.exports = (x) => add(x, 1);\n"
        } else {
            "module.exports = (x) => x + 1;\n"
        };
        files.push((format!("lib/{m}.js"), source.into()));
        let sleep = if m == "c" { 0 } else { sleep_ms };
        files.push((
            format!("test/{m}.js"),
            format!(
                "const assert = require('assert');\nconst f = require('../lib/{m}');\n\ndescribe('{m}', () => {{\n  it('adds one', async () => {{\n    await new Promise((r) => setTimeout(r, {sleep}));\n    assert.strictEqual(f(1), 2);\n  }});\n\n  it('adds one again', () => {{\n    assert.strictEqual(f(2), 3);\n  }});\n}});\n"
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(repo, &refs, "a package and its tests");
}

const BROKEN_UTIL: (&str, &str) = ("lib/util.js", "exports.add = (x, y) => x + y + 1;\n");

fn counts(rec: &serde_json::Value) -> Vec<serde_json::Value> {
    ["passed", "failed", "skipped", "errors", "total", "failures"]
        .iter()
        .map(|k| rec["tests"][k].clone())
        .collect()
}

#[test]
fn mocha_runs_the_test_files_a_change_reaches_first_through_npm_test() {
    let w = world();
    let repo = w.new_repo("mocha-phases");
    project(&w, &repo, "npm test", 1500);
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["framework"], "mocha", "{base}");
    assert_eq!(base["tests"]["passed"], 11, "{base}");

    // util is c's alone: phase one runs test/c.js, in place of `test/ test/acceptance/`.
    let broken = w.commit(&repo, &[BROKEN_UTIL], "break util");
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 1 of 6 test files")
            && why.contains("test/c.js  imports lib/c.js → lib/util.js (changed)"),
        "{why}"
    );
    let (rec, stderr) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    let one = &t["phases"][0];
    assert_eq!(one["files"], serde_json::json!(["test/c.js"]), "{rec}");
    assert_eq!(
        one["command"],
        "PATH=\"$PWD/node_modules/.bin:$PATH\" mocha --require test/support/env --reporter spec --check-leaks test/c.js",
        "{rec}"
    );
    assert_eq!(one["failed"], 2, "{rec}");
    assert_eq!(t["phases"][1]["passed"], 9, "{rec}");
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    assert!(
        first < t["duration_ms"].as_u64().unwrap(),
        "the failure is known before the suite ends: {rec}"
    );
    assert!(
        stderr.contains("first failure after") && stderr.contains("c adds one"),
        "mocha's live line names it at once: {stderr}"
    );

    // The same commit in one phase: the same record.
    w.user_config("[test]\nphases = false\n");
    let (whole, _) = run_json(&w, &repo, &["--force", &broken]);
    assert!(whole["tests"].get("phases").is_none(), "{whole}");
    assert_eq!(counts(&whole), counts(&rec), "one phase {whole}\ntwo {rec}");
    assert_eq!(
        counts(&rec)[..5],
        serde_json::json!([9, 2, 0, 0, 11]).as_array().unwrap()[..],
        "{rec}"
    );
    w.user_config("");

    // test/c.js failed in the parent's run: found by its stack in mocha's log.
    w.commit(
        &repo,
        &[("lib/a.js", "module.exports = (x) => 1 + x;\n")],
        "touch a",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 2 of 6 test files")
            && why.contains("test/a.js  imports lib/a.js (changed)")
            && why.contains("test/c.js  failed in the parent's run: c adds one, c adds one again"),
        "{why}"
    );

    // The env file mocha requires: nothing imports it.
    w.commit(
        &repo,
        &[("test/support/env.js", "process.env.NODE_ENV = 'testing';\n")],
        "env",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains(
            "one phase, the whole suite: test/support/env.js changed and no file imports it"
        ),
        "{why}"
    );
}

/// pnpm and yarn run the same script; phase one runs mocha itself with the project's bins on
/// PATH, as they do.
#[test]
fn pnpm_test_and_yarn_test_running_mocha_have_a_probe() {
    let w = world();
    for (name, command) in [("pnpm", "pnpm test"), ("yarn", "yarn run test")] {
        let repo = w.new_repo(&format!("mocha-{name}"));
        project(&w, &repo, command, 300);
        let (base, _) = run_json(&w, &repo, &[]);
        assert_eq!(base["status"], "passed", "{command}: {base}");
        w.commit(&repo, &[BROKEN_UTIL], "break util");
        let (rec, _) = run_json(&w, &repo, &[]);
        let t = &rec["tests"];
        assert_eq!(
            (&t["phases"][0]["files"], &t["phases"][0]["failed"]),
            (&serde_json::json!(["test/c.js"]), &2.into()),
            "{command}: {rec}"
        );
        assert_eq!(
            (&t["failed"], &t["total"]),
            (&2.into(), &11.into()),
            "{rec}"
        );
    }
}

/// What keeps a mocha command in one phase, said by `--explain-selection`.
#[test]
fn a_mocha_command_that_takes_no_file_list_says_why() {
    let w = world();
    let repo = w.new_repo("mocha-one-phase");
    project(&w, &repo, "npm test", 0);
    for (config, script, why) in [
        (
            "npx mocha --watch",
            None,
            "the test command `npx mocha --watch` takes no file list: mocha's `--watch` watches",
        ),
        (
            "yarn test",
            Some("mocha test/ && eslint ."),
            "the test command `yarn test` takes no file list: the test script `mocha test/ && eslint .` is a shell line",
        ),
        (
            "pnpm test",
            Some("tap test/*.js"),
            "is a shell line",
        ),
        (
            "pnpm test",
            Some("node --test"),
            "the test script `node --test` is not a plain jest, vitest or mocha command",
        ),
    ] {
        let mut files = vec![(
            ".sandbox.toml".to_string(),
            format!("[test]\ncommand = \"{config}\"\n[analysis]\nenabled = false\n"),
        )];
        if let Some(s) = script {
            files.push((
                "package.json".into(),
                format!(r#"{{"name":"calc","private":true,"scripts":{{"test":"{s}"}}}}"#),
            ));
        }
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, b)| (p.as_str(), b.as_str())).collect();
        w.commit(&repo, &refs, config);
        w.commit(&repo, &[BROKEN_UTIL], "break util");
        let said = explain(&w, &repo);
        assert!(said.contains("one phase, the whole suite") && said.contains(why), "{config}: {said}");
        w.commit(&repo, &[("lib/util.js", "exports.add = (x, y) => x + y;\n")], "mend util");
    }
    // A config whose spec is code.
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"npx mocha\"\n[analysis]\nenabled = false\n",
            ),
            (
                ".mocharc.js",
                "module.exports = { spec: require('./specs') };\n",
            ),
        ],
        "mocharc",
    );
    w.commit(&repo, &[BROKEN_UTIL], "break util");
    let said = explain(&w, &repo);
    assert!(
        said.contains(".mocharc.js is code that may set mocha's spec"),
        "{said}"
    );
}

/// jest through `yarn test` and vitest through `pnpm test`: phase one's files reach the script
/// the way each package manager passes arguments on (yarn appends them, `pnpm test` after a
/// `--` it drops).
#[test]
fn yarn_test_and_pnpm_test_pass_phase_ones_files_to_jest_and_vitest() {
    let mut w = world();
    let path = w.extra_env.pop().map(|(_, p)| p).unwrap_or_default();
    let (jest, vitest) = (tools::jest(), tools::vitest());
    w.extra_env.push((
        "PATH".into(),
        format!("{}:{}:{path}", jest.display(), vitest.display()),
    ));
    for (command, script, want) in [
        (
            "yarn test",
            "jest --ci",
            r"yarn test --passWithNoTests '/test/c\.test\.js$'",
        ),
        (
            "pnpm test",
            "vitest run --globals",
            "pnpm test -- --passWithNoTests test/c.test.js",
        ),
    ] {
        let repo = w.new_repo(&format!("pm-{}", &command[..4]));
        let config = format!(
            "[test]\ncommand = \"{command}\"\ntimeout = \"180s\"\n[analysis]\nenabled = false\n"
        );
        let package =
            format!(r#"{{"name":"calc","private":true,"scripts":{{"test":"{script}"}}}}"#);
        let mut files = vec![
            (".sandbox.toml".to_string(), config),
            ("package.json".to_string(), package),
            (
                "lib/util.js".to_string(),
                "exports.add = (x, y) => x + y;\n".to_string(),
            ),
        ];
        for m in ["a", "b", "c"] {
            let source = if m == "c" {
                "const { add } = require('./util');\n\nmodule.exports = (x) => add(x, 1);\n"
            } else {
                "module.exports = (x) => x + 1;\n"
            };
            files.push((format!("lib/{m}.js"), source.into()));
            files.push((
                format!("test/{m}.test.js"),
                format!("const f = require('../lib/{m}');\n\ntest('{m} adds one', () => {{\n  expect(f(1)).toBe(2);\n}});\n"),
            ));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
        w.commit(&repo, &refs, "a package and its tests");
        let (base, _) = run_json(&w, &repo, &[]);
        assert_eq!(base["status"], "passed", "{command}: {base}");
        w.commit(&repo, &[BROKEN_UTIL], "break util");
        let (rec, _) = run_json(&w, &repo, &[]);
        let one = &rec["tests"]["phases"][0];
        assert_eq!(
            (&one["files"], &one["command"], &one["failed"]),
            (
                &serde_json::json!(["test/c.test.js"]),
                &want.into(),
                &1.into()
            ),
            "{command}: {rec}"
        );
        assert_eq!(
            (&rec["tests"]["failed"], &rec["tests"]["total"]),
            (&1.into(), &3.into()),
            "{command}: {rec}"
        );
    }
}

/// git-sandbox's own test map for mocha: which test file called which function. Every test
/// loads the package, whose `index.js` loads every module (as express's do), so imports reach
/// every test file and no test file is named for `lib/util.js`: without a map the commit runs in
/// one phase; with the map made at main, phase one is the one file whose tests called the
/// changed function. The test command is mocha's own, run by node, with the map's script
/// preloaded through `NODE_OPTIONS` in a run of its own. What a test file's describe body calls
/// as mocha loads it counts for that file: a change there that throws stops the whole suite as
/// it loads, and phase one, holding that file, stops too (caught, not a miss).
#[test]
fn the_test_map_runs_the_files_whose_tests_called_the_changed_function() {
    let w = world();
    let repo = w.new_repo("mocha-map");
    let config = "[test]\ncommand = \"mocha --reporter dot test/\"\ntimeout = \"180s\"\n[analysis]\nenabled = false\n";
    let package = r#"{"name":"calc","private":true,"scripts":{"test":"mocha test/"}}"#;
    let util = "exports.add = function (x, y) {\n  return x + y;\n};\n";
    let table = "exports.rows = function () {\n  return [1, 2, 3];\n};\n\nexports.count = function () {\n  return 3;\n};\n";
    let mut files: Vec<(String, String)> = vec![
        (".sandbox.toml".into(), config.into()),
        ("package.json".into(), package.into()),
        ("lib/util.js".into(), util.into()),
        (
            "index.js".into(),
            "for (const m of ['a', 'b', 'c', 'd', 'e']) {\n  exports[m] = require('./lib/' + m);\n}\nrequire('./lib/util');\nexports.table = require('./lib/table');\n".into(),
        ),
        ("lib/table.js".into(), table.into()),
        // As mocha loads f, before any test runs: an example app f alone loads calls `rows`
        // (as express's acceptance tests load theirs), f's describe body calls `count`.
        (
            "examples/rows.js".into(),
            "module.exports = require('..').table.rows();\n".into(),
        ),
        (
            "test/f.js".into(),
            "const assert = require('assert');\nconst calc = require('..');\nconst rows = require('../examples/rows');\n\ndescribe('f', () => {\n  const count = calc.table.count();\n  it('has three rows', () => assert.strictEqual(rows.length, count));\n});\n".into(),
        ),
    ];
    for m in ["a", "b", "c", "d", "e"] {
        // a's loading takes a second (the run's, not phase one's: the probe of a change that
        // stops the suite as it loads has that long to stop too).
        let wait = if m == "a" {
            "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);\n"
        } else {
            ""
        };
        let body = if m == "c" {
            "const { add } = require('./util');\n\nmodule.exports = function (x) {\n  return add(x, 1);\n};\n"
        } else {
            "module.exports = function (x) {\n  return x + 1;\n};\n"
        };
        files.push((format!("lib/{m}.js"), body.into()));
        files.push((
            format!("test/{m}.js"),
            format!("{wait}const assert = require('assert');\nconst calc = require('..');\n\ndescribe('{m}', () => {{\n  it('adds one', () => assert.strictEqual(calc.{m}(1), 2));\n}});\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(&repo, &refs, "a package and its tests");
    let (base, _) = run_json(&w, &repo, &[]);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["passed"], 6, "{base}");

    w.git(&repo, &["checkout", "-q", "-b", "exp"]);
    w.commit(
        &repo,
        &[("lib/util.js", &util.replace("x + y", "x + y + 1"))],
        "break add",
    );
    let why = explain(&w, &repo);
    assert!(why.contains("one phase, the whole suite"), "{why}");

    // The map, made at main (git-sandbox starts this itself after a production run).
    w.git(&repo, &["checkout", "-q", "main"]);
    let made = w.sandbox(&repo, &["__testmap", "--json"]);
    assert_eq!(made.code, 0, "{made:?}");
    assert_eq!(made.json()["tests"], 6, "one entry per test file: {made:?}");
    w.git(&repo, &["checkout", "-q", "exp"]);
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 1 of 6 test files")
            && why.contains("test/c.js  called the function holding lib/util.js:2 (changed), by the test map of"),
        "{why}"
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    let one = &rec["tests"]["phases"][0];
    assert_eq!(one["files"], serde_json::json!(["test/c.js"]), "{rec}");
    assert_eq!(one["failed"], 1, "{rec}");
    assert!(rec["tests"].get("selection_missed").is_none(), "{rec}");

    // A change to a module's own body (it runs as the module loads, for every test) is left
    // to imports: one phase again.
    w.git(&repo, &["checkout", "-q", "-b", "exp2", "main"]);
    w.commit(
        &repo,
        &[("lib/util.js", &format!("'use strict';\n{util}"))],
        "strict",
    );
    let why = explain(&w, &repo);
    assert!(why.contains("one phase, the whole suite"), "{why}");

    // A function f's describe body calls is changed: phase one is f, by the map.
    w.git(&repo, &["checkout", "-q", "-b", "exp4", "main"]);
    w.commit(
        &repo,
        &[("lib/table.js", &table.replace("return 3;", "return 4;"))],
        "four",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 1 of 6 test files")
            && why.contains("test/f.js  called the function holding lib/table.js:6 (changed), by the test map of"),
        "{why}"
    );

    // The function the example app calls as f loads it now throws: the suite stops as mocha
    // loads f, naming no test. Phase one is f, by the map, and stops the same way.
    w.git(&repo, &["checkout", "-q", "-b", "exp3", "main"]);
    w.commit(
        &repo,
        &[(
            "lib/table.js",
            &table.replace("return [1, 2, 3];", "throw new Error('no table');"),
        )],
        "no table",
    );
    let why = explain(&w, &repo);
    assert!(
        why.contains("phase one runs 1 of 6 test files")
            && why.contains(
                "test/f.js  calls functions of lib/table.js (changed), by the test map of"
            ),
        "{why}"
    );
    let (rec, _) = run_json(&w, &repo, &[]);
    assert_eq!(rec["status"], "failed", "{rec}");
    assert_eq!(rec["tests"]["failures"], serde_json::json!([]), "{rec}");
    let one = &rec["tests"]["phases"][0];
    assert_eq!(one["files"], serde_json::json!(["test/f.js"]), "{rec}");
    assert_ne!(one["exit_code"], 0, "{rec}");
    assert!(rec["tests"].get("selection_missed").is_none(), "{rec}");
}
