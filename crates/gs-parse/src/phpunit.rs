//! PHPUnit: the closing counts ("OK (2 tests, 2 assertions)", or after "FAILURES!", "ERRORS!",
//! "OK, but incomplete, skipped, or risky tests!": "Tests: 9, Assertions: 5, Errors: 1,
//! Failures: 3, Skipped: 1, Incomplete: 1, Risky: 1."), the "There were 3 failures:" and
//! "There was 1 error:" lists (`1) CalcTest::testAddsWrong` then the message), and with
//! `--testdox` the `✘ Adds wrong` entries with their `│ ` message.
//!
//! Skipped and incomplete count as skipped, errors as errors; passed is the rest of the tests
//! (risky tests and those with warnings, deprecations or notices passed). Failures are named
//! `Class::method` (with its data set), or `Class › Test name` with `--testdox`.

use super::text::{count_item, indent, join_block, leading_number, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    tests: u64,
    failures: u64,
    errors: u64,
    skipped: u64,
}

/// "OK (2 tests, 2 assertions)" or "Tests: 9, Assertions: 5, Errors: 1, Failures: 3, …".
fn summary_line(line: &str) -> Option<Totals> {
    let t = line.trim();
    if let Some(list) = t.strip_prefix("OK (").and_then(|r| r.strip_suffix(')')) {
        let (tests, first) = list.split_once(", ")?;
        let (n, word) = count_item(tests)?;
        let (_, second) = count_item(first)?;
        let ok = matches!(word, "test" | "tests") && matches!(second, "assertion" | "assertions");
        return ok.then_some(Totals {
            tests: n,
            ..Totals::default()
        });
    }
    let list = t.strip_prefix("Tests: ")?.strip_suffix('.')?;
    let mut items = list.split(", ");
    let tests = items.next()?.parse().ok()?;
    let (key, _) = items.next()?.split_once(": ")?;
    if key != "Assertions" {
        return None;
    }
    let mut totals = Totals {
        tests,
        ..Totals::default()
    };
    for item in items {
        let (key, n) = item.split_once(": ")?;
        let n: u64 = n.parse().ok()?;
        match key {
            "Failures" => totals.failures += n,
            "Errors" => totals.errors += n,
            "Skipped" | "Incomplete" => totals.skipped += n,
            _ => {}
        }
    }
    Some(totals)
}

/// "There were 3 failures:" / "There was 1 error:" -> Some(true); another list ("There was 1
/// risky test:") -> Some(false).
fn list_header(line: &str) -> Option<bool> {
    let rest = line
        .strip_prefix("There was ")
        .or_else(|| line.strip_prefix("There were "))?;
    let (_, what) = count_item(rest.strip_suffix(':')?)?;
    Some(matches!(what, "failure" | "failures" | "error" | "errors"))
}

/// "1) CalcTest::testAddsWrong" -> "CalcTest::testAddsWrong".
fn entry_header(line: &str) -> Option<&str> {
    if indent(line) != 0 {
        return None;
    }
    let (_, rest) = leading_number(line)?;
    let name = rest.strip_prefix(") ")?.trim();
    (!name.is_empty()).then_some(name)
}

/// "/path/tests/CalcTest.php:13": where a failure happened, which ends its message.
fn is_location(line: &str) -> bool {
    let t = line.trim();
    t.rsplit_once(':').is_some_and(|(path, n)| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && (path.contains('/') || path.contains('\\'))
            && !path.contains(' ')
    })
}

/// The message of a failure: the lines after its header up to its location.
fn entry_message<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let msg: Vec<&str> = lines
        .take(60)
        .take_while(|l| !is_location(l) && entry_header(l).is_none() && l.trim() != "--")
        .collect();
    join_block(msg)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sum: Option<Totals> = None;
    let mut failures = Vec::new();
    let mut in_list = false;
    // The class heading of --testdox output ("Calc").
    let mut heading = "";
    for (i, line) in lines.iter().enumerate() {
        if let Some(t) = summary_line(line) {
            let s = sum.get_or_insert_with(Totals::default);
            s.tests += t.tests;
            s.failures += t.failures;
            s.errors += t.errors;
            s.skipped += t.skipped;
            in_list = false;
            continue;
        }
        if let Some(wanted) = list_header(line) {
            in_list = wanted;
            continue;
        }
        if line.trim() == "--" {
            in_list = false;
            continue;
        }
        if in_list {
            if let Some(name) = entry_header(line) {
                let msg = entry_message(lines[i + 1..].iter().copied());
                push_failure(&mut failures, name, &msg);
            }
            continue;
        }
        if let Some(test) = line.strip_prefix(" ✘ ") {
            // The message is in `   │ ` lines.
            let body = lines[i + 1..]
                .iter()
                .take(60)
                .map_while(|l| l.trim_start().strip_prefix('│'))
                .map(|l| l.strip_prefix(' ').unwrap_or(l));
            let name = if heading.is_empty() {
                test.trim().to_string()
            } else {
                format!("{heading} › {}", test.trim())
            };
            push_failure(&mut failures, &name, &entry_message(body));
        } else if indent(line) == 0 && !line.trim().is_empty() {
            heading = line.trim_end();
        }
    }
    let s = sum?;
    Some(TestCounts {
        passed: Some(s.tests.saturating_sub(s.failures + s.errors + s.skipped)),
        failed: Some(s.failures),
        skipped: Some(s.skipped),
        errors: Some(s.errors),
        total: Some(s.tests),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_variants() {
        let t = summary_line("OK (1 test, 1 assertion)").unwrap();
        assert_eq!((t.tests, t.failures), (1, 0));
        let t = summary_line("Tests: 5, Assertions: 4, Warnings: 1, Deprecations: 2.").unwrap();
        assert_eq!((t.tests, t.failures, t.errors, t.skipped), (5, 0, 0, 0));
        assert!(summary_line("Tests: 3 failed, 1 passed, 4 total").is_none());
        assert!(summary_line("Tests:       3 failed, 2 passed, 5 total").is_none());
        assert!(summary_line("OK (fine)").is_none());
        assert!(parse("There were 2 failures:\n\n1) A::b\nx\n").is_none());
    }
}
