//! Python unittest (and runners built on it, like Django's): "Ran N tests in Xs" followed by
//! "OK (skipped=2)" / "FAILED (failures=2, errors=1, …)", and the `FAIL:`/`ERROR:` blocks.
//!
//! Expected failures count as skipped, unexpected successes as failed; the total is N. Several
//! runs in one output are summed.

use super::text::{join_message, leading_number, push_failure};
use crate::model::TestCounts;

/// A 70-character `=====` or `-----` rule (any length ≥ 40 of one of those chars).
fn is_rule(line: &str, c: char) -> bool {
    let t = line.trim_end();
    t.len() >= 40 && t.chars().all(|x| x == c)
}

/// "Ran 8 tests in 0.001s" -> 8.
fn ran_line(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("Ran ")?;
    let (n, tail) = leading_number(rest)?;
    (tail.starts_with(" test ") || tail.starts_with(" tests ")).then_some(n)
}

#[derive(Default)]
struct Outcome {
    failures: u64,
    errors: u64,
    skipped: u64,
    unexpected: u64,
}

/// "OK", "OK (skipped=1)", "FAILED (failures=2, errors=1)", "NO TESTS RAN".
fn outcome_line(line: &str) -> Option<Outcome> {
    let t = line.trim();
    let rest = if t == "OK" || t == "FAILED" || t == "NO TESTS RAN" {
        ""
    } else {
        let rest = t
            .strip_prefix("OK (")
            .or_else(|| t.strip_prefix("FAILED ("))?;
        rest.strip_suffix(')')?
    };
    let mut o = Outcome::default();
    for item in rest.split(", ").filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=')?;
        let (n, tail) = leading_number(value)?;
        if !tail.is_empty() {
            return None;
        }
        match key {
            "failures" => o.failures += n,
            "errors" => o.errors += n,
            "skipped" | "expected failures" => o.skipped += n,
            "unexpected successes" => o.unexpected += n,
            _ => return None,
        }
    }
    Some(o)
}

/// The exception at the end of a traceback block: the lines after the last
/// "Traceback (most recent call last):" that are not indented frames.
fn block_message(block: &[&str]) -> String {
    let start = block
        .iter()
        .rposition(|l| l.starts_with("Traceback (most recent call last):"))
        .map(|i| i + 1)
        .unwrap_or(0);
    let tail = block[start..]
        .iter()
        .skip_while(|l| l.starts_with(' ') || l.starts_with('\t'))
        .copied();
    join_message(tail)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = false;
    let (mut total, mut failed, mut errors, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();

    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        // A failure block: ===== / "FAIL: name" / ----- / traceback … until the next rule.
        if is_rule(line, '=') {
            let head = lines.get(i + 1).copied().unwrap_or("");
            let name = head
                .strip_prefix("FAIL: ")
                .or_else(|| head.strip_prefix("ERROR: "))
                .or_else(|| head.strip_prefix("UNEXPECTED SUCCESS: "));
            if let (Some(name), true) = (name, lines.get(i + 2).is_some_and(|l| is_rule(l, '-'))) {
                let body_start = i + 3;
                let mut end = body_start;
                while end < lines.len() && !is_rule(lines[end], '=') && !is_rule(lines[end], '-') {
                    end += 1;
                }
                let msg = block_message(&lines[body_start..end.min(body_start + 2000)]);
                push_failure(&mut failures, name, &msg);
                i = end;
                continue;
            }
        }
        if let Some(n) = ran_line(line) {
            // The outcome is the next non-blank line.
            let outcome = lines[i + 1..]
                .iter()
                .take(3)
                .find(|l| !l.trim().is_empty())
                .and_then(|l| outcome_line(l));
            if let Some(o) = outcome {
                found = true;
                total += n;
                failed += o.failures + o.unexpected;
                errors += o.errors;
                skipped += o.skipped;
            }
        }
        i += 1;
    }
    if !found {
        return None;
    }
    let passed = total.saturating_sub(failed + errors + skipped);
    Some(TestCounts {
        passed: Some(passed),
        failed: Some(failed),
        skipped: Some(skipped),
        errors: Some(errors),
        total: Some(total),
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::counts;
    use super::super::text::clean;
    use super::*;

    fn run(fixture: &str) -> TestCounts {
        parse(&clean(fixture)).expect("unittest summary recognised")
    }

    #[test]
    fn all_pass() {
        for fixture in [
            include_str!("../../../tests/fixtures/output/unittest/all_pass.txt"),
            include_str!("../../../tests/fixtures/output/unittest/all_pass_v.txt"),
        ] {
            let c = run(fixture);
            assert_eq!(counts(&c), [Some(3), Some(0), Some(0), Some(0), Some(3)]);
            assert!(c.failures.is_empty());
        }
    }

    #[test]
    fn some_fail() {
        for fixture in [
            include_str!("../../../tests/fixtures/output/unittest/some_fail.txt"),
            include_str!("../../../tests/fixtures/output/unittest/some_fail_v.txt"),
        ] {
            let c = run(fixture);
            // Ran 8: failures=2, errors=1, skipped=2 + expected failures=1.
            assert_eq!(counts(&c), [Some(2), Some(2), Some(3), Some(1), Some(8)]);
            let names: Vec<_> = c.failures.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "test_divide_by_zero (tests.test_calc.TestCalc.test_divide_by_zero)",
                    "test_wrong_sum (tests.test_calc.TestCalc.test_wrong_sum)",
                    "test_split (tests.test_calc.TestStrings.test_split)",
                ]
            );
            assert_eq!(c.failures[0].message, "ZeroDivisionError: division by zero");
            assert_eq!(c.failures[1].message, "AssertionError: 2 != 3 : sum is off");
            assert!(c.failures[2].message.starts_with(
                "AssertionError: Lists differ: ['a', 'b'] != ['a', 'b', 'c']\nSecond list"
            ));
        }
    }

    #[test]
    fn import_error() {
        let c = run(include_str!(
            "../../../tests/fixtures/output/unittest/import_error.txt"
        ));
        assert_eq!(counts(&c), [Some(0), Some(0), Some(0), Some(1), Some(1)]);
        assert_eq!(
            c.failures[0].name,
            "tests.test_broken (unittest.loader._FailedTest.tests.test_broken)"
        );
        assert_eq!(
            c.failures[0].message,
            "ModuleNotFoundError: No module named 'not_a_real_module_xyz'"
        );
    }

    #[test]
    fn outcome_variants() {
        assert!(outcome_line("NO TESTS RAN").is_some());
        let o = outcome_line("OK (skipped=1, unexpected successes=2)").unwrap();
        assert_eq!((o.skipped, o.unexpected), (1, 2));
        assert!(outcome_line("OK (bananas=1)").is_none());
        assert!(outcome_line("OKAY").is_none());
        assert!(parse("Ran 3 tests in 0.1s\n").is_none());
    }
}
