//! Python unittest (and runners built on it, like Django's): "Ran N tests in Xs" followed by
//! "OK (skipped=2)" / "FAILED (failures=2, errors=1, …)", and the `FAIL:`/`ERROR:` blocks.
//!
//! Expected failures count as skipped, unexpected successes as failed; the total is N. A test
//! can print a summary of its own (from `atexit`, say, after the runner's): of the summaries
//! found, as many count as the command starts runners (see [`super::runner_invocations`]), the
//! worst ones (most failures and errors, then fewest passes), so a printed summary can add
//! failures but never passes.

use super::text::{join_message, leading_number, push_failure};
use gs_model::TestCounts;

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

/// One "Ran N tests" summary with its outcome line.
#[derive(Debug, Clone, Copy)]
struct Summary {
    total: u64,
    failed: u64,
    errors: u64,
    skipped: u64,
}

impl Summary {
    fn passed(&self) -> u64 {
        self.total
            .saturating_sub(self.failed + self.errors + self.skipped)
    }
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

/// The counts of an output from a command that starts `invocations` unittest runners (at
/// least one is assumed).
pub fn parse(text: &str, invocations: usize) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut summaries: Vec<Summary> = Vec::new();
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
                summaries.push(Summary {
                    total: n,
                    failed: o.failures + o.unexpected,
                    errors: o.errors,
                    skipped: o.skipped,
                });
            }
        }
        i += 1;
    }
    if summaries.is_empty() {
        return None;
    }
    // The worst first; a stable sort keeps the printed order among equals.
    summaries.sort_by(|a, b| {
        (b.failed + b.errors)
            .cmp(&(a.failed + a.errors))
            .then(a.passed().cmp(&b.passed()))
    });
    summaries.truncate(invocations.max(1));
    let sum = |f: fn(&Summary) -> u64| summaries.iter().map(f).fold(0u64, u64::saturating_add);
    let (total, failed, errors, skipped) = (
        sum(|s| s.total),
        sum(|s| s.failed),
        sum(|s| s.errors),
        sum(|s| s.skipped),
    );
    let passed = total.saturating_sub(failed + errors + skipped);
    Some(TestCounts {
        passed: Some(passed),
        failed: Some(failed),
        skipped: Some(skipped),
        errors: Some(errors),
        total: Some(total),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::counts;
    use super::*;

    /// Each runner the command starts adds its summary; with one runner, a summary a test prints
    /// itself adds nothing (the `atexit_fake_summary*.txt` rows of the fixture table).
    #[test]
    fn each_runner_the_command_starts_adds_its_summary() {
        let two = "Ran 3 tests in 0.1s\n\nOK\n\nRan 2 tests in 0.1s\n\nFAILED (failures=1)\n";
        let c = parse(two, 2).unwrap();
        assert_eq!(counts(&c), [Some(4), Some(1), Some(0), Some(0), Some(5)]);
        assert_eq!(counts(&parse(two, 1).unwrap())[4], Some(2));
    }

    #[test]
    fn outcome_variants() {
        assert!(outcome_line("NO TESTS RAN").is_some());
        let o = outcome_line("OK (skipped=1, unexpected successes=2)").unwrap();
        assert_eq!((o.skipped, o.unexpected), (1, 2));
        assert!(outcome_line("OK (bananas=1)").is_none());
        assert!(outcome_line("OKAY").is_none());
        assert!(parse("Ran 3 tests in 0.1s\n", 1).is_none());
    }
}
