//! cargo-nextest: the "Summary [ 0.166s] 6 tests run: 3 passed, 3 failed, 1 skipped" line, the
//! FAIL/TIMEOUT/SIG… status lines listed after it (names as `binary-id test::path`), and panic
//! messages from the captured output printed after each failing test's status line.
//!
//! "timed out" counts as failed, "exec fail" as an error; skipped are nextest's skipped tests
//! (ignored and filtered ones, as it reports them). The total is the sum.

use std::collections::HashMap;

use super::cargo::panic_message;
use super::text::{count_item, push_failure, MAX_FAILURES};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    skipped: u64,
    errors: u64,
}

/// "Summary [   0.166s] 3/6 tests run: 1 passed (1 slow), 2 failed, 1 skipped"
fn summary_line(line: &str) -> Option<Totals> {
    let rest = line.trim().strip_prefix("Summary [")?;
    let (_, rest) = rest.split_once("] ")?;
    let (run, list) = rest.split_once(": ")?;
    if !(run.ends_with(" tests run") || run.ends_with(" test run")) {
        return None;
    }
    let mut t = Totals::default();
    let mut depth = 0i32;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    for item in items {
        let item = item.split_once(" (").map_or(item, |(a, _)| a);
        let (n, word) = count_item(item)?;
        match word {
            "passed" => t.passed += n,
            "failed" | "timed out" => t.failed += n,
            "skipped" => t.skipped += n,
            w if w.starts_with("exec fail") => t.errors += n,
            _ => {}
        }
    }
    Some(t)
}

/// A status line: `FAIL [   0.077s] (2/6) alpha tests::adds_wrong` -> ("FAIL", "alpha tests::adds_wrong").
fn status_line(line: &str) -> Option<(&str, &str)> {
    let t = line.trim();
    let open = t.find(" [")?;
    let status = &t[..open];
    if status.is_empty()
        || !status
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b' ')
    {
        return None;
    }
    let (bracket, rest) = t[open + 2..].split_once("] ")?;
    // "[   0.077s]", "[ 1m 05s]": a duration.
    if !bracket.trim_end().ends_with('s') || !bracket.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim();
    let name = match rest.strip_prefix('(').and_then(|r| r.split_once(") ")) {
        Some((progress, name)) if progress.contains('/') => name,
        _ => rest,
    };
    (!name.is_empty()).then_some((status, name))
}

fn is_failure_status(status: &str) -> bool {
    if status.starts_with("TRY ") || status.starts_with("FLAKY") {
        return false;
    }
    let last = status.rsplit(' ').next().unwrap_or(status);
    last.ends_with("FAIL") || last == "TIMEOUT" || last == "ABORT" || last.starts_with("SIG")
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let mut totals: Option<Totals> = None;
    let mut listed: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut messages: HashMap<String, String> = HashMap::new();
    // The failing test whose output is being read, and that output.
    let mut current: Option<(String, Vec<&str>)> = None;

    let finish = |current: &mut Option<(String, Vec<&str>)>, messages: &mut HashMap<_, _>| {
        if let Some((name, lines)) = current.take() {
            let msg = panic_message(lines.iter().copied()).unwrap_or_default();
            messages.entry(name).or_insert(msg);
        }
    };

    for line in text.lines() {
        if let Some(t) = summary_line(line) {
            finish(&mut current, &mut messages);
            let sum = totals.get_or_insert_with(Totals::default);
            sum.passed += t.passed;
            sum.failed += t.failed;
            sum.skipped += t.skipped;
            sum.errors += t.errors;
            continue;
        }
        if let Some((status, name)) = status_line(line) {
            finish(&mut current, &mut messages);
            if is_failure_status(status) {
                if totals.is_some() {
                    if listed.len() < MAX_FAILURES {
                        listed.push(name.to_string());
                    }
                } else {
                    if seen.len() < MAX_FAILURES {
                        seen.push(name.to_string());
                    }
                    current = Some((name.to_string(), Vec::new()));
                }
            }
            continue;
        }
        if let Some((_, lines)) = current.as_mut() {
            if lines.len() < 400 {
                lines.push(line);
            }
        }
    }
    finish(&mut current, &mut messages);
    let t = totals?;
    let mut failures = Vec::new();
    for name in if listed.is_empty() { &seen } else { &listed } {
        let msg = messages.get(name).map_or("", String::as_str);
        push_failure(&mut failures, name, msg);
    }
    Some(TestCounts {
        passed: Some(t.passed),
        failed: Some(t.failed),
        skipped: Some(t.skipped),
        errors: Some(t.errors),
        total: Some(t.passed + t.failed + t.skipped + t.errors),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_variants() {
        let t = summary_line(
            "     Summary [  61.2s] 5 tests run: 2 passed (1 slow, 1 flaky), 2 failed, 1 timed out, 3 skipped",
        )
        .unwrap();
        assert_eq!((t.passed, t.failed, t.skipped), (2, 3, 3));
        assert!(summary_line("Summary [x] nonsense").is_none());
        assert_eq!(
            status_line("  TIMEOUT [ 60.0s] a b"),
            Some(("TIMEOUT", "a b"))
        );
        assert!(is_failure_status("SIGSEGV"));
        assert!(!is_failure_status("TRY 1 FAIL"));
        assert!(!is_failure_status("PASS"));
    }
}
