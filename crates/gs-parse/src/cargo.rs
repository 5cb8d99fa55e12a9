//! `cargo test` (libtest): every "test result:" line at the start of a line, summed over the test
//! binaries of a workspace and the doc-tests; failure names from each binary's "failures:" list
//! (or its "test x ... FAILED" lines) and messages from the panic in its "---- x stdout ----" block.
//!
//! ignored counts as skipped and measured (benches) as passed. A binary that started ("Running …",
//! "Doc-tests …") but printed no "test result:" (it crashed or was killed) counts as one error.
//! Also home of [`panic_message`], shared with nextest.

use std::collections::HashMap;

use super::text::{join_message, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

/// "test result: FAILED. 1 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.09s"
fn result_line(line: &str) -> Option<Totals> {
    let rest = line.strip_prefix("test result: ")?;
    let (_, list) = rest.split_once(". ")?;
    let mut t = Totals::default();
    let mut seen = 0;
    for item in list.split("; ") {
        let Some((n, word)) = super::text::count_item(item) else {
            continue;
        };
        match word {
            "passed" | "measured" => t.passed += n,
            "failed" => t.failed += n,
            "ignored" => t.ignored += n,
            _ => continue,
        }
        seen += 1;
    }
    (seen >= 2).then_some(t)
}

/// The message of a panic in a test's output: for
/// `thread 'x' panicked at src/lib.rs:3:5:` the lines after it (up to the backtrace or a note);
/// for the pre-1.73 form `thread 'x' panicked at 'msg', src/lib.rs:3:5` the quoted part.
/// `lines` may be indented (nextest indents captured output).
pub fn panic_message<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut it = lines.into_iter();
    while let Some(line) = it.next() {
        let t = line.trim();
        let Some(at) = t
            .find("' panicked at ")
            .or_else(|| t.find(") panicked at "))
        else {
            continue;
        };
        let rest = &t[at + "' panicked at ".len()..];
        if let Some(quoted) = rest.strip_prefix('\'') {
            let msg = quoted.rsplit_once("', ").map_or(quoted, |(m, _)| m);
            return Some(join_message([msg]));
        }
        let body = it.take_while(|l| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with("stack backtrace:") && !l.starts_with("note: ")
        });
        return Some(join_message(body.map(str::trim)));
    }
    None
}

/// State of the test binary being read.
#[derive(Default)]
struct Binary {
    started: bool,
    /// Names from the "failures:" list (read after the detail blocks).
    list: Vec<String>,
    in_list: bool,
    /// Names from "test x ... FAILED" lines.
    failed_lines: Vec<String>,
    /// name -> message from its "---- name stdout ----" block.
    messages: HashMap<String, String>,
    block: Option<(String, Vec<String>)>,
}

impl Binary {
    fn close_block(&mut self) {
        if let Some((name, lines)) = self.block.take() {
            let msg = panic_message(lines.iter().map(String::as_str))
                .unwrap_or_else(|| join_message(lines.iter().take(5).map(String::as_str)));
            self.messages.insert(name, msg);
        }
    }
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let mut totals: Option<Totals> = None;
    let mut errors = 0u64;
    let mut failures = Vec::new();
    let mut bin = Binary::default();

    for line in text.lines() {
        if line.starts_with("     Running ") || line.starts_with("   Doc-tests ") {
            if bin.started {
                errors += 1; // the previous binary never reached its summary
            }
            bin = Binary {
                started: true,
                ..Binary::default()
            };
            continue;
        }
        if let Some(t) = result_line(line) {
            bin.close_block();
            let sum = totals.get_or_insert_with(Totals::default);
            sum.passed += t.passed;
            sum.failed += t.failed;
            sum.ignored += t.ignored;
            let names = if bin.list.is_empty() {
                &bin.failed_lines
            } else {
                &bin.list
            };
            for name in names {
                let msg = bin.messages.get(name).map_or("", String::as_str);
                push_failure(&mut failures, name, msg);
            }
            bin = Binary::default();
            continue;
        }
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|r| r.strip_suffix(" stdout ----"))
        {
            bin.close_block();
            bin.in_list = false;
            bin.list.clear();
            bin.block = Some((name.to_string(), Vec::new()));
            continue;
        }
        if line == "failures:" {
            bin.close_block();
            bin.in_list = true;
            bin.list.clear();
            continue;
        }
        if bin.in_list {
            if let Some(name) = line.strip_prefix("    ") {
                if !name.trim().is_empty() && bin.list.len() < super::text::MAX_FAILURES {
                    bin.list.push(name.trim().to_string());
                }
                continue;
            }
            if !line.is_empty() {
                bin.in_list = false;
            }
        }
        if let Some((_, lines)) = bin.block.as_mut() {
            if lines.len() < 200 {
                lines.push(line.to_string());
            }
            continue;
        }
        if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|r| r.strip_suffix(" ... FAILED"))
        {
            if bin.failed_lines.len() < super::text::MAX_FAILURES {
                bin.failed_lines.push(name.to_string());
            }
        }
    }
    let t = totals?;
    // A binary started after the last summary and never finished (killed, crashed, cut off).
    if bin.started {
        errors += 1;
    }
    Some(TestCounts {
        passed: Some(t.passed),
        failed: Some(t.failed),
        skipped: Some(t.ignored),
        errors: Some(errors),
        total: Some(t.passed + t.failed + t.ignored + errors),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::counts;
    use super::*;

    #[test]
    fn crashed_binary_counts_as_error_and_old_panic_format() {
        let out = "     Running unittests src/lib.rs (target/debug/deps/a-1)\n\nrunning 1 test\n\
                   test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\
                   \n     Running tests/it.rs (target/debug/deps/it-2)\n\nrunning 2 tests\n\
                   error: test failed, to rerun pass `--test it`\n\nCaused by:\n  process didn't \
                   exit successfully (signal: 11, SIGSEGV: invalid memory reference)\n";
        let c = parse(out).unwrap();
        assert_eq!(counts(&c), [Some(1), Some(0), Some(0), Some(1), Some(2)]);
        let msg = panic_message(["thread 'x' panicked at 'oh no', src/lib.rs:3:5"]);
        assert_eq!(msg.as_deref(), Some("oh no"));
    }
}
