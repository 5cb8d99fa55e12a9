//! The JavaScript rules over in-memory trees and real mocha output.

use super::*;

#[test]
fn what_configures_the_tests_is_known() {
    for p in [
        "package.json",
        "packages/a/package.json",
        "jest.config.js",
        "vitest.config.mts",
        "vite.config.ts",
        "babel.config.cjs",
        ".babelrc",
        "tsconfig.build.json",
        "pnpm-lock.yaml",
        "src/setupTests.ts",
        "eslint.config.mjs",
    ] {
        assert!(configuration(p), "{p}");
    }
    for p in ["src/a.ts", "src/config.ts", "README.md", "src/jester.js"] {
        assert!(!configuration(p), "{p}");
    }
}

#[test]
fn test_files_are_named_for_the_module_they_test() {
    for (test, module) in [
        ("test/res.send.js", "lib/response.js"),
        ("test/req.accepts.js", "lib/request.js"),
        ("test/app.router.js", "lib/application.js"),
        ("test/utils.js", "lib/utils.js"),
        ("test/Router.js", "lib/router/index.js"),
        ("src/utils.test.ts", "src/utils.ts"),
        ("tests/test-parser.js", "src/parser.mjs"),
    ] {
        let stem = module_stem(module).unwrap();
        assert!(named_for(test, &stem), "{test} for {module}");
    }
    for (test, module) in [
        ("test/exports.js", "lib/express.js"),
        ("test/app.js", "lib/view.js"),
        ("test/re.js", "lib/request.js"),
    ] {
        let stem = module_stem(module).unwrap();
        assert!(!named_for(test, &stem), "{test} for {module}");
    }
    assert_eq!(module_stem("lib/io.js"), None);
}

/// express's shape in small: every test file builds the app through `index.js`.
fn express_shape() -> Vec<(String, String)> {
    let mut base: Vec<(String, String)> = vec![
        (
            "package.json".into(),
            r#"{"name":"app","scripts":{"test":"mocha test/"},"devDependencies":{"mocha":"*"}}"#
                .into(),
        ),
        (
            "index.js".into(),
            "module.exports = require('./lib/app');\n".into(),
        ),
        (
            "lib/app.js".into(),
            "require('./response');\nrequire('./view');\nmodule.exports = {};\n".into(),
        ),
        ("lib/response.js".into(), "module.exports = 1;\n".into()),
        ("lib/view.js".into(), "module.exports = 2;\n".into()),
    ];
    for t in [
        "res.send",
        "res.json",
        "app.render",
        "app.use",
        "misc",
        "more",
    ] {
        base.push((format!("test/{t}.js"), "require('..');\n".into()));
    }
    base
}

/// Imports reach every test: a change to `lib/response.js` runs the files named for it, a
/// change to a file no test is named for runs what imports reach, and a changed test runs
/// itself.
#[test]
fn where_imports_reach_every_test_the_files_named_for_the_change_run() {
    use crate::mem::MemTree;
    let base = express_shape();
    let base: Vec<(&str, &str)> = base.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let pick = |after: &[(&str, Option<&str>)]| {
        let t = MemTree::commit(&base, after);
        let JsRunner { cmd } = runner(Some("npm test"), &t).unwrap().unwrap();
        let s = select(&t, &cmd).unwrap();
        (
            s.one_phase.map(|o| o.to_string()),
            s.files.into_keys().collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        pick(&[("lib/response.js", Some("module.exports = 3;\n"))]),
        (
            None,
            vec!["test/res.json.js".into(), "test/res.send.js".into()]
        )
    );
    // No test is named for view.js: everything it reaches, so one phase.
    let (why, _) = pick(&[("lib/view.js", Some("module.exports = 3;\n"))]);
    assert!(why.is_some_and(|w| w.contains("every")));
    // A changed test beside: it runs too.
    let (_, files) = pick(&[
        ("lib/response.js", Some("module.exports = 3;\n")),
        ("test/misc.js", Some("require('..');\n// more\n")),
    ]);
    assert_eq!(
        files,
        ["test/misc.js", "test/res.json.js", "test/res.send.js"]
    );
}

/// With git-sandbox's test map: a change inside a function the tests alone called runs the
/// files whose tests called it; one inside a function also called as the app is built (so
/// for every test) runs those likeliest, beside the files named for it; a change outside
/// functions, the named files as without a map.
#[test]
fn the_test_map_picks_the_files_that_called_the_changed_function() {
    use crate::mem::MemTree;
    const RESPONSE: &str = "exports.send = function (body) {\n  return body;\n};\n\nexports.json = function (obj) {\n  return JSON.stringify(obj);\n};\n";
    let mut base = express_shape();
    for (p, t) in base.iter_mut() {
        if p == "lib/response.js" {
            *t = RESPONSE.into();
        }
    }
    let base: Vec<(&str, &str)> = base.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    // send (lines 1-3) is called by test/misc.js's tests alone; json (5-7) outside any
    // test and by test/more.js's.
    let map = crate::testmap::TestMap::parse(
        br#"{"version":1,"functions":[["lib/response.js",1,3],["lib/response.js",5,7]],
            "outside":[1],"tests":{"test/misc.js":[0],"test/more.js":[1],"test/app.use.js":[]}}"#,
    )
    .unwrap();
    let order = std::cell::RefCell::new(Vec::new());
    let pick = |new: &str| {
        let mut t = MemTree::commit(&base, &[("lib/response.js", Some(new))]);
        t.map = Some(map.clone());
        let JsRunner { cmd } = runner(Some("npm test"), &t).unwrap().unwrap();
        let s = select(&t, &cmd).unwrap();
        assert_eq!(s.one_phase.as_ref().map(|o| o.to_string()), None);
        order.replace(s.phase_one().unwrap());
        s.files
            .into_iter()
            .map(|(f, whys)| (f, whys.iter().map(Why::signal).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pick(&RESPONSE.replace("return body;", "return body + 1;")),
        [("test/misc.js".to_string(), vec!["test_map"])]
    );
    assert_eq!(
        pick(&RESPONSE.replace("JSON.stringify(obj)", "String(obj)")),
        [
            ("test/more.js".to_string(), vec!["test_map"]),
            (
                "test/res.json.js".to_string(),
                vec!["name", "function_name"]
            ),
            ("test/res.send.js".to_string(), vec!["name"]),
        ]
    );
    // The file named for the changed function runs first.
    assert_eq!(
        order.take(),
        ["test/res.json.js", "test/res.send.js", "test/more.js"]
    );
    assert_eq!(
        pick(&format!("'use strict';\n{RESPONSE}")),
        [
            ("test/res.json.js".to_string(), vec!["name"]),
            ("test/res.send.js".to_string(), vec!["name"]),
        ]
    );
}

#[test]
fn mochas_failures_are_found_in_the_files_their_stacks_name() {
    // Real mocha 12 output (tests/fixtures/output/README.md).
    let log = include_str!("../../../../tests/fixtures/output/mocha/some_fail.txt");
    let tests: BTreeSet<String> = ["mfail/calc.test.js", "mfail/chai.test.js"]
        .map(String::from)
        .into();
    let calc = "mfail/calc.test.js".to_string();
    let chai = "mfail/chai.test.js".to_string();
    assert_eq!(
        mocha_failures(log, &tests),
        [
            ("calc adds wrong".into(), calc.clone()),
            ("calc async rejects".into(), calc.clone()),
            ("calc nested throws".into(), calc.clone()),
            ("calc nested deep equal".into(), calc.clone()),
            (
                "with hook \"before each\" hook for \"never runs\"".into(),
                calc
            ),
            ("chai equal".into(), chai.clone()),
            ("chai deep".into(), chai),
            // `string thrown`'s stack names no test file.
        ]
    );
    // express's suite, one line of lib/response.js changed.
    let log = include_str!("../../../../tests/fixtures/output/mocha/express_some_fail.txt");
    let tests: BTreeSet<String> = [
        "test/express.static.js",
        "test/res.sendStatus.js",
        "test/app.js",
    ]
    .map(String::from)
    .into();
    let found = mocha_failures(log, &tests);
    let files: BTreeSet<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
    assert_eq!(found.len(), 14);
    assert_eq!(
        files,
        ["test/express.static.js", "test/res.sendStatus.js"].into()
    );
}
