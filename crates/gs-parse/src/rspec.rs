//! RSpec, any formatter (progress, documentation, …): the summary line ("8 examples, 3 failures,
//! 3 pending", ", 1 error occurred outside of examples"), the "Failures:" list (`  1) Calc adds
//! wrong` then the failure) and the "An error occurred while loading ./spec/x_spec.rb." blocks.
//!
//! pending (and skipped) examples count as skipped; passed is examples less failures and pending.
//! Errors outside examples (a spec file that failed to load, a failing `before(:suite)` hook) count
//! as errors, named by the file (or "in a `before(:suite)` hook"). The total is the examples.

use super::text::{count_item, indent, join_block, leading_number, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    examples: u64,
    failures: u64,
    pending: u64,
    errors: u64,
}

/// "8 examples, 3 failures, 3 pending" (", 1 error occurred outside of examples").
fn summary_line(line: &str) -> Option<Totals> {
    let mut items = line.trim().split(", ");
    let (examples, w) = count_item(items.next()?)?;
    let (failures, f) = count_item(items.next()?)?;
    if !matches!(w, "example" | "examples") || !matches!(f, "failure" | "failures") {
        return None;
    }
    let mut t = Totals {
        examples,
        failures,
        ..Totals::default()
    };
    for item in items {
        match count_item(item)? {
            (n, "pending") => t.pending += n,
            (n, w) if w.starts_with("error") && w.ends_with("outside of examples") => t.errors += n,
            _ => return None,
        }
    }
    Some(t)
}

/// "  1) Calc adds wrong" -> "Calc adds wrong".
fn entry_header(line: &str) -> Option<&str> {
    if indent(line) != 2 {
        return None;
    }
    let (_, rest) = leading_number(line.trim_start())?;
    let name = rest.strip_prefix(") ")?.trim();
    (!name.is_empty()).then_some(name)
}

/// "An error occurred while loading ./spec/x_spec.rb. - Did you mean?" -> "./spec/x_spec.rb";
/// "An error occurred in a `before(:suite)` hook." -> "in a `before(:suite)` hook".
fn outside_error(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("An error occurred ")?.trim_end();
    let rest = rest.strip_suffix(" - Did you mean?").unwrap_or(rest);
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    Some(rest.strip_prefix("while loading ").unwrap_or(rest))
}

/// The lines of a failure or error, up to its backtrace (`# ./spec/x_spec.rb:7:in …`).
fn block_message(lines: &[&str], start: usize) -> String {
    let mut msg = Vec::new();
    for line in lines.iter().skip(start).take(60) {
        let t = line.trim();
        if t.starts_with("# ")
            || t.starts_with("Finished in ")
            || entry_header(line).is_some()
            || outside_error(line).is_some()
        {
            break;
        }
        // The "Did you mean?" suggestions of a load error.
        if t.starts_with("rspec ./") {
            continue;
        }
        msg.push(*line);
    }
    join_block(msg)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sum: Option<Totals> = None;
    let mut failures = Vec::new();
    let mut outside = Vec::new();
    let mut in_failures = false;
    for (i, line) in lines.iter().enumerate() {
        if let Some(t) = summary_line(line) {
            let s = sum.get_or_insert_with(Totals::default);
            s.examples += t.examples;
            s.failures += t.failures;
            s.pending += t.pending;
            s.errors += t.errors;
            in_failures = false;
            continue;
        }
        match line.trim_end() {
            "Failures:" => in_failures = true,
            "Pending: (Failures listed here are expected and do not affect your suite's status)"
            | "Pending:"
            | "Failed examples:" => in_failures = false,
            l if l.starts_with("Finished in ") => in_failures = false,
            _ => {
                if let Some(name) = outside_error(line) {
                    outside.push((name, block_message(&lines, i + 1)));
                } else if in_failures {
                    if let Some(name) = entry_header(line) {
                        push_failure(&mut failures, name, &block_message(&lines, i + 1));
                    }
                }
            }
        }
    }
    let s = sum?;
    for (name, msg) in outside {
        push_failure(&mut failures, name, &msg);
    }
    Some(TestCounts {
        passed: Some(s.examples.saturating_sub(s.failures + s.pending)),
        failed: Some(s.failures),
        skipped: Some(s.pending),
        errors: Some(s.errors),
        total: Some(s.examples),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_variants() {
        let t = summary_line("1 example, 0 failures").unwrap();
        assert_eq!((t.examples, t.failures, t.pending, t.errors), (1, 0, 0, 0));
        let t =
            summary_line("3 examples, 1 failure, 2 errors occurred outside of examples").unwrap();
        assert_eq!((t.examples, t.failures, t.errors), (3, 1, 2));
        assert!(summary_line("3 examples, 1 failure, 2 bananas").is_none());
        assert!(summary_line("3 passed, 1 failed").is_none());
        assert!(parse("Failures:\n\n  1) x\n").is_none());
    }
}
