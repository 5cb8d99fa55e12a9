//! Tests of the whole engine: the per-construct fixtures under `tests/fixtures/analysis/<lang>/`,
//! bad input, the aggregator and the directory walk.
//!
//! Fixture format: the first line holds `expect:` and `key=value` pairs (`functions`, `classes`,
//! `code`, `comment`, `blank`, `errors`); a function's first line holds `cc=N` (`cc=N,M` when
//! several functions start on that line, in order) and optionally `params=N` and `lines=N` (the
//! function's length as the long-function check sees it).

use super::walk::MAX_FILE_BYTES;
use super::*;
use std::path::{Path, PathBuf};

fn fixture_root() -> PathBuf {
    // The fixtures stay in the workspace's tests/, two levels above this crate.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/analysis")
}

fn marker(line: &str, key: &str) -> Option<Vec<u64>> {
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let value = line[at..]
        .split(|c: char| !(c.is_ascii_digit() || c == ','))
        .next()?;
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|v| v.parse().ok())
        .collect()
}

fn check_fixture(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let bytes = std::fs::read(path).unwrap_or_default();
    let name = path.to_string_lossy().into_owned();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let got = analyze_file(&name, &bytes, &Options::default());
    let header = lines.first().copied().unwrap_or("");
    if !header.contains("expect:") {
        return vec![format!("{name}: no `expect:` header")];
    }
    let counts = [
        ("functions", got.functions.len() as u64),
        ("classes", got.classes),
        ("code", got.code_lines),
        ("comment", got.comment_lines),
        ("blank", got.blank_lines),
        ("errors", got.syntax_error_count),
    ];
    for (key, value) in counts {
        if let Some(want) = marker(header, key) {
            if want != [value] {
                problems.push(format!("{name}: {key} = {value}, want {}", want[0]));
            }
        }
    }
    if marker(header, "errors").is_none() && got.syntax_error_count > 0 {
        problems.push(format!(
            "{name}: unexpected syntax errors {:?}",
            got.syntax_errors
        ));
    }
    // Every function's first line says its complexity; every `cc=` marker names a function.
    let mut by_line: std::collections::BTreeMap<u64, Vec<&Function>> = Default::default();
    for f in &got.functions {
        by_line.entry(f.line).or_default().push(f);
    }
    for (i, line) in lines.iter().enumerate().skip(1) {
        let n = i as u64 + 1;
        let found: Vec<u64> = by_line
            .get(&n)
            .map(|fs| fs.iter().map(|f| f.complexity).collect())
            .unwrap_or_default();
        match marker(line, "cc") {
            Some(want) if want != found => {
                problems.push(format!("{name}:{n}: complexity {found:?}, want {want:?}"))
            }
            None if !found.is_empty() => {
                problems.push(format!("{name}:{n}: function without a cc= marker"))
            }
            _ => {}
        }
        for (key, of) in [
            ("params", (|f| f.parameters) as fn(&Function) -> u64),
            ("lines", |f| f.lines),
        ] {
            if let Some(want) = marker(line, key) {
                let found: Vec<u64> = by_line
                    .get(&n)
                    .map(|fs| fs.iter().map(|f| of(f)).collect())
                    .unwrap_or_default();
                if want != found {
                    problems.push(format!("{name}:{n}: {key} {found:?}, want {want:?}"));
                }
            }
        }
    }
    problems
}

#[test]
fn fixtures_match_their_expectations() {
    let root = fixture_root();
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut langs = std::collections::BTreeSet::new();
    for dir in std::fs::read_dir(&root).expect("fixture dir").flatten() {
        for file in std::fs::read_dir(dir.path()).expect("lang dir").flatten() {
            let path = file.path();
            if lang::Grammar::for_path(&path.to_string_lossy()).is_none() {
                continue;
            }
            langs.insert(dir.file_name());
            problems.extend(check_fixture(&path));
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 30, "only {checked} fixtures");
    assert_eq!(langs.len(), 8, "{langs:?}");
}

#[test]
fn bad_input_never_panics() {
    let o = Options::default();
    let invalid_utf8 = b"def f(x):\n    return '\xff\xfe' if x else 1\n";
    let got = analyze_file("a.py", invalid_utf8, &o);
    assert_eq!(got.functions.len(), 1);
    assert_eq!(got.functions[0].complexity, 2);

    let mut bytes = b"fn \xc3(".to_vec();
    // Deep nesting, on many lines (one long line would be taken for minified code).
    bytes.extend(std::iter::repeat_n(&b"(\n"[..], 5000).flatten());
    let got = analyze_file("deep.rs", &bytes, &o);
    assert!(got.syntax_error_count > 0);

    assert_eq!(
        analyze_file("x.c", b"int main(){\0}", &o).skipped,
        Some(SkipReason::Binary)
    );
    let big = vec![b'\n'; MAX_FILE_BYTES as usize + 1];
    assert_eq!(
        analyze_file("x.go", &big, &o).skipped,
        Some(SkipReason::TooLarge)
    );
    assert_eq!(analyze_file("x.go", b"", &o).total_lines, 0);
    assert_eq!(
        analyze_file("x.md", b"# hi", &o).skipped,
        Some(SkipReason::Unsupported)
    );
    for g in lang::ALL_GRAMMARS {
        let ext = match g {
            lang::Grammar::Python => "py",
            lang::Grammar::Javascript => "js",
            lang::Grammar::Typescript => "ts",
            lang::Grammar::Tsx => "tsx",
            lang::Grammar::Rust => "rs",
            lang::Grammar::Go => "go",
            lang::Grammar::Java => "java",
            lang::Grammar::C => "c",
            lang::Grammar::Cpp => "cpp",
        };
        for junk in [
            &b"}}}{{{((("[..],
            b"\xff\xff\xff",
            b"\"\"\"",
            b"/*",
            b"\r\r\n\t",
        ] {
            let _ = analyze_file(&format!("j.{ext}"), junk, &o);
        }
    }
}

#[test]
fn syntax_errors_are_reported_with_lines_and_the_rest_is_still_analysed() {
    let src = b"def ok(a):\n    return a or 1\n\ndef broken(:\n    pass\n";
    let got = analyze_file("s.py", src, &Options::default());
    assert!(got.syntax_error_count >= 1);
    assert_eq!(got.syntax_errors[0].line, 4);
    assert!(got
        .functions
        .iter()
        .any(|f| f.name == "ok" && f.complexity == 2));
}

#[test]
fn file_results_round_trip_through_json() {
    let got = analyze_file(
        "a.py",
        b"def f(a, b):\n    return a and b\n",
        &Options::default(),
    );
    let json = serde_json::to_string(&got).unwrap();
    let back: FileAnalysis = serde_json::from_str(&json).unwrap();
    assert_eq!(got, back);
    assert!(json.contains("\"language\":\"python\""));
}

#[test]
fn aggregator_builds_the_record() {
    let o = Options {
        max_complexity: 2,
        max_function_lines: 3,
        max_parameters: 1,
        ..Options::default()
    };
    let src =
        b"def f(a, b):\n    if a and b:\n        return 1\n    return 2\n\nclass C:\n    pass\n";
    let mut agg = Aggregator::new(&o);
    agg.add("pkg/m.py", &analyze_file("pkg/m.py", src, &o));
    agg.add("b.bin", &analyze_file("b.bin.c", b"\0", &o));
    agg.add_skipped("vendor/x.go", SkipReason::Vendored);
    agg.add_manifest("requirements.txt", b"flask\n");
    agg.add_manifest(
        "node_modules/x/package.json",
        b"{\"dependencies\":{\"a\":\"1\"}}",
    );
    let a = agg.finish();
    assert_eq!(a.files_analyzed, 1);
    assert_eq!(a.functions_found, 1);
    assert_eq!(a.classes_found, 1);
    assert_eq!(a.complexity_max, 3);
    assert_eq!(a.complexity_score, 3.0);
    assert_eq!(a.total_lines, 7);
    assert_eq!(a.languages["python"].complexity_total, 3);
    let kinds: Vec<&str> = a.potential_issues.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["high_complexity", "long_function", "too_many_parameters"]
    );
    assert!(a
        .potential_issues
        .iter()
        .all(|i| i.path == "pkg/m.py" && i.line == 1));
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["frameworks"], serde_json::json!(["flask"]));
    assert_eq!(v["dependencies"], serde_json::json!({"python": ["flask"]}));
    assert_eq!(
        v["skipped"],
        serde_json::json!({"binary": 1, "vendored": 1})
    );
}

#[test]
fn parallel_results_keep_their_order_and_unreadable_items_are_none() {
    let n = 50;
    let got = analyze_parallel(
        n,
        |i| {
            if i == 7 {
                return None;
            }
            let body = "def f(x):\n    if x:\n        pass\n".repeat(i % 5 + 1);
            Some((format!("f{i}.py"), body.into_bytes()))
        },
        &Options::default(),
    );
    assert_eq!(got.len(), n);
    assert!(got[7].is_none());
    for (i, r) in got.iter().enumerate().filter(|(i, _)| *i != 7) {
        assert_eq!(r.as_ref().unwrap().functions.len(), i % 5 + 1);
    }
    assert!(analyze_parallel(0, |_| None, &Options::default()).is_empty());
}

#[cfg(unix)]
#[test]
fn directory_walk_skips_git_vendored_symlink_loops_and_counts() {
    let base = std::env::temp_dir().join(format!("gs-analysis-walk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let mk = |rel: &str, body: &[u8]| {
        let p = base.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    mk("src/a.py", b"def f():\n    return 1\n");
    mk(
        "src/b.rs",
        b"fn g(x: bool) -> u8 { if x { 1 } else { 2 } }\n",
    );
    mk(".git/objects/x.py", b"def h(): pass\n");
    mk("vendor/v.go", b"package v\n");
    mk("gen/g.py", b"def gen(): pass\n");
    mk("README.md", b"# readme\n");
    mk("Cargo.toml", b"[dependencies]\naxum = \"0.8\"\n");
    std::os::unix::fs::symlink(&base, base.join("src/loop")).unwrap();
    let o = Options {
        exclude: gs_util::glob::Globs::excludes(&["gen/**"]).unwrap(),
        ..Options::default()
    };
    let a = analyze_dir(&base, &o).unwrap();
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(a.files_analyzed, 2);
    assert_eq!(a.functions_found, 2);
    assert_eq!(a.complexity_max, 2);
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(
        v["skipped"],
        serde_json::json!({"excluded": 1, "unsupported": 2, "vendored": 1})
    );
    assert_eq!(v["frameworks"], serde_json::json!(["axum"]));
    assert!(analyze_dir(Path::new("/nonexistent/dir"), &o).is_err());
}

#[test]
fn a_tally_takes_out_exactly_what_a_file_put_in() {
    let o = Options {
        max_complexity: 1,
        max_parameters: 0,
        ..Options::default()
    };
    let a = analyze_file(
        "a.py",
        b"def f(a):\n    if a:\n        return 1\n\ndef g(:\n",
        &o,
    );
    let b = analyze_file(
        "b.rs",
        b"fn h(x: bool) -> u8 { if x { 1 } else { 2 } }\n",
        &o,
    );
    let flask = vec!["flask".to_string()];
    let mut only_b = Tally::default();
    only_b.file(Sign::Add, "b.rs", &b, &o);
    only_b.manifest(Sign::Add, "python", &flask);

    let mut t = Tally::default();
    t.file(Sign::Add, "a.py", &a, &o);
    t.skipped(Sign::Add, SkipReason::Binary);
    t.manifest(Sign::Add, "python", &flask);
    t.manifest(Sign::Add, "npm", &[]);
    t.file(Sign::Add, "b.rs", &b, &o);
    assert_eq!(t.analysis().complexity_max, 2);
    assert!(t.analysis().potential_issues.len() >= 3);
    // Out again, in another order: as if they had never been added.
    t.manifest(Sign::Remove, "npm", &[]);
    t.skipped(Sign::Remove, SkipReason::Binary);
    t.file(Sign::Remove, "a.py", &a, &o);
    assert_eq!(t, only_b);
    assert_eq!(
        serde_json::to_value(t.analysis()).unwrap(),
        serde_json::to_value(only_b.analysis()).unwrap()
    );
    t.file(Sign::Remove, "b.rs", &b, &o);
    t.manifest(Sign::Remove, "python", &flask);
    assert_eq!(t, Tally::default());
}

#[test]
fn a_parse_stopped_at_the_time_limit_leaves_nothing_for_the_next_file() {
    let big = "const a = require('./x');\n".repeat(20_000);
    let stopped = parse_within(
        lang::Grammar::Javascript,
        big.as_bytes(),
        std::time::Duration::ZERO,
    );
    assert!(stopped.is_none(), "the limit stops the parse");
    let small = b"const b = 1;\n";
    let tree = parse(lang::Grammar::Javascript, small).unwrap();
    assert_eq!(
        tree.root_node().end_byte(),
        small.len(),
        "the small file's own tree"
    );
}

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(fixture_root().join(rel)).expect("fixture")
}

/// The issues of one file, as the record lists them, and the record's `extra` fields.
fn record_of(path: &str, file: &FileAnalysis) -> (Vec<gs_model::Issue>, serde_json::Value) {
    let mut agg = Aggregator::new(&Options::default());
    agg.add(path, file);
    let a = agg.finish();
    let v = serde_json::to_value(&a).unwrap();
    (a.potential_issues, v)
}

fn long_functions(issues: &[gs_model::Issue]) -> Vec<&str> {
    issues
        .iter()
        .filter(|i| i.kind == "long_function")
        .map(|i| i.message.as_str())
        .collect()
}

#[test]
fn a_describe_is_as_long_as_its_own_lines_not_its_tests() {
    let path = "test/router.test.js";
    let file = analyze_file(
        path,
        &fixture("javascript/mocha.test.js"),
        &Options::default(),
    );
    let describe = file
        .functions
        .iter()
        .find(|f| f.name == "describe('router')")
        .expect("named after its call");
    assert_eq!(
        (describe.line, describe.lines),
        (75, 3),
        "201 lines, 198 of tests"
    );
    assert!(file
        .functions
        .iter()
        .any(|f| f.name == "it('matches route 35')"));
    assert!(file
        .functions
        .iter()
        .any(|f| f.name == "it.only('reads :id')"));
    let (issues, _) = record_of(path, &file);
    assert_eq!(
        long_functions(&issues),
        ["function `buildRequest` is 67 lines long (max 60)"],
        "the helper is a long function of the test file; the describe is not"
    );
}

#[test]
fn a_long_test_and_callbacks_of_other_calls_are_measured_whole() {
    let body = "  step();\n".repeat(70);
    let src = format!(
        "describe('api', () => {{\n  it('does everything', async () => {{\n{body}  }});\n}});\n\
         app.get('/', function (req, res) {{\n{body}}});\n\
         describe('each', () => {{\n  [1, 2].forEach(function (n) {{\n{body}  }});\n}});\n"
    );
    for path in ["a.test.js", "a.test.ts", "a.test.tsx"] {
        let file = analyze_file(path, src.as_bytes(), &Options::default());
        let (issues, _) = record_of(path, &file);
        assert_eq!(
            long_functions(&issues),
            [
                "function `it('does everything')` is 72 lines long (max 60)",
                "function `(anonymous)` is 72 lines long (max 60)",
                "function `describe('each')` is 74 lines long (max 60)",
                "function `(anonymous)` is 72 lines long (max 60)",
            ],
            "{path}"
        );
    }
}

#[test]
fn the_runners_modifiers_are_suite_calls_too() {
    let file = analyze_file(
        "suite.test.ts",
        &fixture("typescript/suite.test.ts"),
        &Options::default(),
    );
    let names: Vec<&str> = file.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "describe.each(\"add($a, $b)\")",
            "make",
            "test(\"is ordered\")",
            "test.skipIf(\"is slow\")",
            "(anonymous)",
            "it.each(\"returns $y for $x\")",
            "test.concurrent(\"runs alone\")",
        ]
    );
}

#[test]
fn cpp_parse_errors_are_the_parsers_limits_not_issues() {
    let src = fixture("cpp/fmt_base.h");
    let path = "include/fmt/base.h";
    let file = analyze_file(path, &src, &Options::default());
    assert_eq!(file.language, Some(Lang::Cpp), "a .h file that shows C++");
    assert_eq!(file.syntax_error_count, 3);
    assert_eq!(
        file.functions.len(),
        5,
        "the parts that parsed are measured"
    );
    let as_c = analyze_file("base.c", &src, &Options::default());
    assert!(as_c.syntax_error_count > 50, "{}", as_c.syntax_error_count);

    let (issues, v) = record_of(path, &file);
    assert!(
        issues.iter().all(|i| i.kind != "syntax_error"),
        "{issues:?}"
    );
    assert_eq!(v["syntax_errors"], 0);
    assert_eq!(
        v["partially_parsed"],
        serde_json::json!({"files": 1, "regions": 3})
    );
}

#[test]
fn syntax_errors_are_one_issue_per_file_with_the_count() {
    let src = b"def ok(a):\n    return a\n\ndef one(:\n    pass\n\ndef two(:\n    pass\n";
    let file = analyze_file("s.py", src, &Options::default());
    assert!(file.syntax_error_count >= 2);
    let (issues, v) = record_of("s.py", &file);
    let errors: Vec<_> = issues.iter().filter(|i| i.kind == "syntax_error").collect();
    assert_eq!(errors.len(), 1, "{issues:?}");
    assert_eq!(errors[0].line, 4);
    let more = file.syntax_error_count - 1;
    assert!(
        errors[0]
            .message
            .ends_with(&format!("(and {more} more in this file)")),
        "{}",
        errors[0].message
    );
    assert_eq!(v["syntax_errors"], file.syntax_error_count);
    assert!(v.get("partially_parsed").is_none());

    // A parse abandoned at the time limit is the parser's limit, in any language.
    let gave_up = FileAnalysis {
        language: Some(Lang::Python),
        syntax_errors: vec![SyntaxError {
            line: 1,
            message: "could not be parsed (parser gave up)".into(),
        }],
        syntax_error_count: 1,
        parser_gave_up: true,
        ..FileAnalysis::default()
    };
    let (issues, v) = record_of("big.py", &gave_up);
    assert!(issues.is_empty(), "{issues:?}");
    assert_eq!(v["syntax_errors"], 0);
    assert_eq!(
        v["partially_parsed"],
        serde_json::json!({"files": 1, "regions": 1})
    );
    let o = Options::default();
    let mut t = Tally::default();
    t.file(Sign::Add, "big.py", &gave_up, &o);
    t.file(Sign::Add, "s.py", &file, &o);
    t.file(Sign::Remove, "big.py", &gave_up, &o);
    t.file(Sign::Remove, "s.py", &file, &o);
    assert_eq!(t, Tally::default());
}
