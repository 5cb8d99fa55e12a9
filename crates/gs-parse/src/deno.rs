//! deno test: the closing line ("FAILED | 2 passed (1 step) | 5 failed (1 step) | 1 ignored (147ms)",
//! or "ok | …"), and the " ERRORS " section: `name => ./file.ts:3:6` then `error: …`.
//!
//! Counts are over tests, not steps (a test fails through its steps; a failed step is listed as
//! `test ... step`). ignored counts as skipped; "filtered out" and "measured" (benches) are left
//! out. A module that threw outside any test (`./file.ts (uncaught error)`) is one of deno's
//! "failed": it counts as an error only, named by the module.

use std::collections::HashSet;

use super::text::{count_item, indent, join_block, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

/// "FAILED | 2 passed (1 step) | 5 failed (1 step) | 1 ignored (147ms)" -> the counts.
fn summary_line(line: &str) -> Option<Totals> {
    let t = line.trim();
    let list = t
        .strip_prefix("ok | ")
        .or_else(|| t.strip_prefix("FAILED | "))?;
    let mut totals = Totals::default();
    let mut seen = 0;
    for item in list.split(" | ") {
        let (n, words) = count_item(item)?;
        let word = words.split(" (").next().unwrap_or(words);
        match word {
            "passed" => totals.passed += n,
            "failed" => totals.failed += n,
            "ignored" => totals.ignored += n,
            "measured" | "filtered out" => continue,
            _ => return None,
        }
        seen += 1;
    }
    (seen >= 2).then_some(totals)
}

/// An entry of the ERRORS section: `adds wrong => ./dfail/calc_test.ts:3:6` -> ("adds wrong",
/// false); `./dbroken/throws_test.ts (uncaught error)` -> ("./dbroken/throws_test.ts", true).
fn entry_header(line: &str) -> Option<(&str, bool)> {
    if indent(line) != 0 {
        return None;
    }
    let t = line.trim_end();
    if let Some(module) = t.strip_suffix(" (uncaught error)") {
        return Some((module, true));
    }
    let (name, place) = t.rsplit_once(" => ")?;
    (!name.is_empty() && place.contains(':')).then_some((name, false))
}

/// The error of an entry: from `error: ` up to the stack, without the code frame (the source line
/// and the caret under it) deno prints before the stack.
fn entry_message(lines: &[&str], start: usize) -> Option<String> {
    let first = lines.get(start)?.strip_prefix("error: ")?;
    let mut msg = vec![first];
    for line in lines.iter().skip(start + 1).take(60) {
        let t = line.trim();
        if (indent(line) >= 4 && t.starts_with("at ")) || entry_header(line).is_some() {
            break;
        }
        if t == "FAILURES" {
            break;
        }
        msg.push(line);
    }
    while msg.last().is_some_and(|l| l.trim().is_empty()) {
        msg.pop();
    }
    if msg.len() >= 2 && msg.last().is_some_and(|l| is_caret(l)) {
        msg.truncate(msg.len() - 2);
    }
    Some(join_block(msg))
}

/// A line of only `^` or `~` (under the source line of a code frame).
fn is_caret(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == '^' || c == '~')
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sum: Option<Totals> = None;
    let mut failures = Vec::new();
    let mut uncaught: HashSet<&str> = HashSet::new();
    let mut in_errors = false;
    for (i, line) in lines.iter().enumerate() {
        if let Some(t) = summary_line(line) {
            let s = sum.get_or_insert_with(Totals::default);
            s.passed += t.passed;
            s.failed += t.failed;
            s.ignored += t.ignored;
            in_errors = false;
            continue;
        }
        match line.trim() {
            "ERRORS" => in_errors = true,
            "FAILURES" => in_errors = false,
            _ if in_errors => {
                let Some((name, is_uncaught)) = entry_header(line) else {
                    continue;
                };
                let Some(msg) = entry_message(&lines, i + 1) else {
                    continue;
                };
                if is_uncaught {
                    uncaught.insert(name);
                }
                push_failure(&mut failures, name, &msg);
            }
            _ => {}
        }
    }
    let s = sum?;
    let errors = uncaught.len() as u64;
    Some(TestCounts {
        passed: Some(s.passed),
        failed: Some(s.failed.saturating_sub(errors)),
        skipped: Some(s.ignored),
        errors: Some(errors),
        total: Some(s.passed + s.failed + s.ignored),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_variants() {
        let t =
            summary_line("ok | 3 passed | 0 failed | 2 filtered out | 1 measured (5ms)").unwrap();
        assert_eq!((t.passed, t.failed, t.ignored), (3, 0, 0));
        assert!(summary_line("ok | nothing here").is_none());
        assert!(summary_line("FAILED | 2 passed").is_none());
        assert!(parse("ok | 1 passed\n").is_none());
    }
}
