//! go test, plain and `-v` (and `-json`, read through its `Output` fields): the `--- PASS/FAIL/SKIP:`
//! result lines, the per-package `ok`/`FAIL`/`?` lines, and test output for messages.
//!
//! Counts are over leaf tests (a test with subtests counts through its subtests). Plain `go test`
//! prints only failures, so passed, skipped and total are None there. A package that fails to build
//! or fails without a failing test (timeout, panic in TestMain, os.Exit) counts as one error, named
//! by its import path.

use std::collections::{HashMap, HashSet};

use super::text::{join_message, push_failure, MAX_MESSAGE};
use gs_model::TestCounts;

#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

/// Results and output of one package's block of lines (go prints each package's output together).
#[derive(Default)]
struct Block {
    order: Vec<String>,
    status: HashMap<String, Outcome>,
    output: HashMap<String, String>,
    current: Option<String>,
    panic: Option<String>,
}

impl Block {
    fn note(&mut self, name: &str, line: &str) {
        let buf = self.output.entry(name.to_string()).or_default();
        if buf.len() <= MAX_MESSAGE && !line.trim().is_empty() {
            if !buf.is_empty() {
                buf.push('\n');
            }
            buf.push_str(line.trim());
        }
    }
}

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    skipped: u64,
    errors: u64,
}

/// `--- FAIL: TestX/sub (0.00s)` -> (Fail, "TestX/sub").
fn result_line(line: &str) -> Option<(Outcome, &str)> {
    let t = line.trim_start().strip_prefix("--- ")?;
    let (outcome, rest) = if let Some(r) = t.strip_prefix("PASS: ") {
        (Outcome::Pass, r)
    } else if let Some(r) = t.strip_prefix("FAIL: ") {
        (Outcome::Fail, r)
    } else if let Some(r) = t.strip_prefix("SKIP: ") {
        (Outcome::Skip, r)
    } else {
        return None;
    };
    let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n).trim();
    (!name.is_empty()).then_some((outcome, name))
}

/// `ok  \tpkg\t0.01s`, `FAIL\tpkg [build failed]`, `?   \tpkg\t[no test files]`.
fn package_line(line: &str) -> Option<(bool, &str, &str)> {
    let (ok, rest) = if let Some(r) = line.strip_prefix("ok  \t") {
        (true, r)
    } else if let Some(r) = line.strip_prefix("FAIL\t") {
        (false, r)
    } else if let Some(r) = line.strip_prefix("?   \t") {
        (true, r)
    } else {
        return None;
    };
    let end = rest.find(['\t', ' ']).unwrap_or(rest.len());
    let pkg = &rest[..end];
    (!pkg.is_empty()).then_some((ok, pkg, &rest[end..]))
}

/// `go test -json` output: one JSON event per line; the `Output` fields rebuild the `-v` text.
/// Lines that are not JSON (build errors on stderr) are kept as they are.
fn json_to_text(text: &str) -> Option<String> {
    let first = text.lines().find(|l| !l.trim().is_empty())?;
    if !(first.starts_with('{') && first.contains("\"Action\"")) {
        return None;
    }
    let mut out = String::with_capacity(text.len() / 2);
    for line in text.lines() {
        if line.starts_with('{') {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                if let Some(s) = v.get("Output").and_then(|o| o.as_str()) {
                    out.push_str(s);
                }
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let converted = json_to_text(text);
    let text = converted.as_deref().unwrap_or(text);
    let mut recognised = false;
    let mut verbose = false;
    let mut totals = Totals::default();
    let mut failures = Vec::new();
    let mut block = Block::default();
    // "# pkg" build-output headers: pkg -> first lines of compiler output.
    let mut build: HashMap<String, Vec<String>> = HashMap::new();
    let mut build_current: Option<String> = None;

    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("=== ") {
            verbose = true;
            let mut words = rest.split_whitespace();
            let verb = words.next().unwrap_or("");
            if matches!(verb, "RUN" | "CONT" | "NAME") {
                block.current = words.next().map(str::to_string);
            }
            continue;
        }
        if let Some((outcome, name)) = result_line(line) {
            recognised = true;
            verbose |= outcome != Outcome::Fail;
            if !block.status.contains_key(name) {
                block.order.push(name.to_string());
            }
            block.status.insert(name.to_string(), outcome);
            block.current = (outcome == Outcome::Fail).then(|| name.to_string());
            continue;
        }
        if let Some((ok, pkg, tail)) = package_line(line) {
            recognised = true;
            build_current = None;
            let before = failures.len();
            let failed_tests = finish(&mut block, &mut totals, &mut failures);
            if !ok && failed_tests == 0 {
                totals.errors += 1;
                let msg = if tail.contains("[build failed]") || tail.contains("[setup failed]") {
                    build
                        .get(pkg)
                        .map(|l| join_message(l.iter().map(String::as_str)))
                        .unwrap_or_default()
                } else {
                    block.panic.clone().unwrap_or_default()
                };
                failures.truncate(before);
                push_failure(&mut failures, pkg, &msg);
            }
            block = Block::default();
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let pkg = rest.split_whitespace().next().unwrap_or("").to_string();
            build_current = Some(pkg.clone());
            build.entry(pkg).or_default();
            continue;
        }
        if let Some(pkg) = &build_current {
            if let Some(lines) = build.get_mut(pkg) {
                if lines.len() < 5 {
                    lines.push(line.to_string());
                }
            }
            continue;
        }
        if line.starts_with("panic: ") {
            if block.panic.is_none() {
                block.panic = Some(line.to_string());
            }
            if let Some(cur) = block.current.take() {
                // What follows a panic is the goroutine dump: keep only the panic line.
                block.note(&cur, line);
            }
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            if let Some(cur) = block.current.clone() {
                block.note(&cur, line);
            }
        }
    }
    finish(&mut block, &mut totals, &mut failures);
    if !recognised {
        return None;
    }
    let (passed, skipped, total) = if verbose {
        let total = totals.passed + totals.failed + totals.skipped + totals.errors;
        (Some(totals.passed), Some(totals.skipped), Some(total))
    } else {
        (None, None, None)
    };
    Some(TestCounts {
        passed,
        failed: Some(totals.failed),
        skipped,
        errors: Some(totals.errors),
        total,
        failures,
        ..Default::default()
    })
}

/// The packages (import paths) a go test log names as failed (`FAIL\tpkg …`), each with the
/// tests that failed in it (its `--- FAIL:` lines; none for a package that failed to build).
pub fn failed_packages(text: &str) -> Vec<(String, Vec<String>)> {
    let converted = json_to_text(text);
    let text = converted.as_deref().unwrap_or(text);
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut tests: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some((Outcome::Fail, name)) = result_line(line) {
            tests.push(name.to_string());
        } else if let Some((ok, pkg, _)) = package_line(line) {
            let names = std::mem::take(&mut tests);
            if !ok && !out.iter().any(|(p, _)| p == pkg) {
                out.push((pkg.to_string(), names));
            }
        }
    }
    out
}

/// Counts the block's leaf tests into `totals` and lists its failures; returns how many failed.
fn finish(block: &mut Block, totals: &mut Totals, failures: &mut Vec<gs_model::Failure>) -> u64 {
    let mut parents: HashSet<&str> = HashSet::new();
    let mut failing_parents: HashSet<&str> = HashSet::new();
    for name in &block.order {
        let failed = block.status.get(name) == Some(&Outcome::Fail);
        for (i, _) in name.match_indices('/') {
            parents.insert(&name[..i]);
            if failed {
                failing_parents.insert(&name[..i]);
            }
        }
    }
    let mut failed = 0;
    for name in &block.order {
        let outcome = block.status[name];
        let leaf = !parents.contains(name.as_str());
        // A parent counts only when it failed on its own (no failing subtest explains it).
        let failed_on_its_own =
            outcome == Outcome::Fail && !failing_parents.contains(name.as_str());
        if !leaf && !failed_on_its_own {
            continue;
        }
        match outcome {
            Outcome::Pass => totals.passed += 1,
            Outcome::Skip => totals.skipped += 1,
            Outcome::Fail => {
                totals.failed += 1;
                failed += 1;
                let msg = block.output.get(name).map_or("", String::as_str);
                push_failure(failures, name, msg);
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::super::testutil::counts;
    use super::*;

    #[test]
    fn parent_failing_on_its_own_counts() {
        let out = "=== RUN   TestP\n=== RUN   TestP/a\n    x_test.go:9: parent broke\n\
                   --- FAIL: TestP (0.00s)\n    --- PASS: TestP/a (0.00s)\nFAIL\nFAIL\tm/p\t0.1s\n";
        let c = parse(out).unwrap();
        assert_eq!(counts(&c), [Some(1), Some(1), Some(0), Some(0), Some(2)]);
        assert_eq!(c.failures[0].name, "TestP");
    }

    #[test]
    fn failed_packages_are_named_with_their_failed_tests() {
        let out = "=== RUN   TestA\n--- FAIL: TestA (0.00s)\n    a_test.go:5: no\n=== RUN   TestB/x\n    --- FAIL: TestB/x (0.00s)\nFAIL\nFAIL\texample.com/m/a\t0.01s\nok  \texample.com/m/b\t0.01s\n# example.com/m/c\nc/c.go:3:1: syntax error\nFAIL\texample.com/m/c [build failed]\n?   \texample.com/m\t[no test files]\nFAIL\n";
        assert_eq!(
            failed_packages(out),
            [
                (
                    "example.com/m/a".to_string(),
                    vec!["TestA".to_string(), "TestB/x".to_string()]
                ),
                ("example.com/m/c".to_string(), vec![]),
            ]
        );
    }
}
