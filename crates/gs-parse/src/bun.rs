//! bun test: the closing counts (" 2 pass", " 1 skip", " 1 todo", " 4 fail", " 1 error", then
//! "Ran 8 tests across 2 files."), and the result lines — `(fail) calc > adds wrong [0.32ms]`, or
//! `✗ …` with colour — each printed after its error.
//!
//! todo counts as skipped. An "Unhandled error between tests" (a test file that failed to load, or
//! an error thrown outside any test) is one of bun's "fail" and also its "error": it counts as an
//! error only, named by its file. The total is bun's "Ran N tests".

use super::text::{count_item, indent, join_block, leading_number, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    pass: u64,
    fail: u64,
    skip: u64,
    error: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

/// `(fail) calc > adds wrong [0.32ms]` / `✗ calc > adds wrong [0.32ms]` -> (Fail, "calc > adds wrong").
fn result_line(line: &str) -> Option<(Outcome, &str)> {
    let marks = [
        ("(pass) ", Outcome::Pass),
        ("✓ ", Outcome::Pass),
        ("(fail) ", Outcome::Fail),
        ("✗ ", Outcome::Fail),
        ("(skip) ", Outcome::Skip),
        ("» ", Outcome::Skip),
        ("(todo) ", Outcome::Skip),
        ("✎ ", Outcome::Skip),
    ];
    let (rest, outcome) = marks
        .iter()
        .find_map(|(m, o)| line.strip_prefix(m).map(|r| (r, *o)))?;
    let rest = rest.trim();
    let name = match rest.rsplit_once(" [") {
        Some((name, took)) if took.ends_with("s]") => name,
        _ => rest,
    };
    Some((outcome, name.trim()))
}

/// "Ran 8 tests across 2 files. [10.00ms]" -> 8.
fn ran_line(line: &str) -> Option<u64> {
    let (n, rest) = leading_number(line.strip_prefix("Ran ")?)?;
    let rest = rest
        .strip_prefix(" tests across ")
        .or_else(|| rest.strip_prefix(" test across "))?;
    let (_, rest) = leading_number(rest)?;
    (rest.starts_with(" files.") || rest.starts_with(" file.")).then_some(n)
}

/// "bfail/calc.test.ts:" (the header of a file's results).
fn file_header(line: &str) -> Option<&str> {
    let name = line.strip_suffix(':')?;
    (!name.is_empty() && indent(line) == 0 && !name.contains(' ')).then_some(name)
}

/// A code frame line (`4 |   test(…`) or the caret line under it.
fn is_code_frame(line: &str) -> bool {
    let t = line.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && t[digits..].starts_with(" |")) || (!t.is_empty() && t.trim_end() == "^")
}

/// The error printed before a `(fail)` line, in `lines[from..to]`: what follows the code frame, up
/// to the stack trace.
fn error_before(lines: &[&str], from: usize, to: usize) -> String {
    let window = &lines[from.min(to)..to];
    let start = window
        .iter()
        .rposition(|l| is_code_frame(l))
        .map_or(0, |p| p + 1);
    let mut msg = Vec::new();
    for line in &window[start..] {
        if indent(line) >= 4 && line.trim().starts_with("at ") {
            break;
        }
        msg.push(*line);
    }
    if let Some(first) = msg.iter_mut().find(|l| !l.trim().is_empty()) {
        *first = first.strip_prefix("error: ").unwrap_or(first);
    }
    join_block(msg)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = false;
    let mut sum = Totals::default();
    let mut total = 0u64;
    // The counts lines just before "Ran N tests".
    let mut block = Totals::default();
    let mut failures = Vec::new();
    let mut unhandled: Vec<(String, String)> = Vec::new();
    let mut file = "";
    // Where the output of the test whose result comes next starts.
    let mut since = 0;
    let mut recap = false;

    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        if let Some(n) = ran_line(line) {
            found = true;
            total += n;
            sum.pass += block.pass;
            sum.fail += block.fail;
            sum.skip += block.skip;
            sum.error += block.error;
            block = Totals::default();
            recap = false;
        } else if let Some((n, word)) = count_item(line).filter(|_| line.starts_with(' ')) {
            match word {
                "pass" => block.pass += n,
                "fail" => block.fail += n,
                "skip" | "todo" => block.skip += n,
                "error" | "errors" => block.error += n,
                _ => {}
            }
        } else if t.is_empty() {
            block = Totals::default();
        } else if let Some((outcome, name)) = result_line(line) {
            if outcome == Outcome::Fail {
                let msg = if recap {
                    String::new()
                } else {
                    error_before(&lines, since, i)
                };
                push_failure(&mut failures, name, &msg);
            }
            since = i + 1;
        } else if t == "# Unhandled error between tests" {
            // Between two rules of dashes.
            let body = lines
                .iter()
                .skip(i + 2)
                .take(40)
                .take_while(|l| !l.starts_with("----"))
                .count();
            let msg = error_before(&lines, i + 2, i + 2 + body);
            let name = if file.is_empty() {
                "Unhandled error between tests"
            } else {
                file
            };
            unhandled.push((name.to_string(), msg));
            i += 2 + body + 1;
            since = i;
            continue;
        } else if t.ends_with(" failed:")
            && leading_number(t).is_some_and(|(_, r)| r == " tests failed:" || r == " test failed:")
        {
            recap = true;
        } else if let Some(name) = file_header(line) {
            file = name;
            since = i + 1;
        }
        i += 1;
    }
    if !found {
        return None;
    }
    for (name, msg) in &unhandled {
        push_failure(&mut failures, name, msg);
    }
    Some(TestCounts {
        passed: Some(sum.pass),
        failed: Some(sum.fail.saturating_sub(sum.error)),
        skipped: Some(sum.skip),
        errors: Some(sum.error),
        total: Some(total),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_the_ran_line() {
        assert!(parse(" 2 pass\n 0 fail\n").is_none());
        assert!(parse("Ran 3 tests in 0.1s\n").is_none());
        assert_eq!(ran_line("Ran 1 test across 1 file. [1ms]"), Some(1));
    }
}
