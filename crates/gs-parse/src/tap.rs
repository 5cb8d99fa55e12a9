//! node --test, and TAP in general: node's closing counts ("# tests 7", "# pass 3", … in TAP, or
//! "ℹ tests 7" from the spec reporter), `not ok N - description` lines with their YAML `error:`,
//! and the spec reporter's "✖ failing tests:" list. Plain TAP without node's counts (tape, prove
//! streams) is counted from its top-level `ok`/`not ok` lines.
//!
//! todo counts as skipped, cancelled as errors; `not ok` suites (failed only through a subtest)
//! are not listed. Failure names are TAP descriptions.

use super::text::{join_block, join_message, leading_number, number_after, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    tests: Option<u64>,
    pass: u64,
    fail: u64,
    cancelled: u64,
    skipped: u64,
    todo: u64,
}

/// node's closing counts: `# pass 3` (TAP) or `ℹ pass 3` (spec). Returns true when it was one.
fn footer_line(line: &str, t: &mut Totals) -> bool {
    let Some(rest) = line.strip_prefix("# ").or_else(|| line.strip_prefix("ℹ ")) else {
        return false;
    };
    let (key, _) = rest.split_once(' ').unwrap_or((rest, ""));
    let Some(n) = number_after(rest, key) else {
        return false;
    };
    match key {
        "tests" => t.tests = Some(t.tests.unwrap_or(0) + n),
        "pass" => t.pass += n,
        "fail" => t.fail += n,
        "cancelled" => t.cancelled += n,
        "skipped" => t.skipped += n,
        "todo" => t.todo += n,
        _ => return false,
    }
    true
}

/// A TAP result: `ok 3 - desc # SKIP reason` -> (ok, "desc", directive).
struct TapResult<'a> {
    ok: bool,
    description: String,
    directive: &'a str,
}

fn tap_result(line: &str) -> Option<TapResult<'_>> {
    let t = line.trim_start();
    let (ok, rest) = if let Some(r) = t.strip_prefix("not ok") {
        (false, r)
    } else if let Some(r) = t.strip_prefix("ok") {
        (true, r)
    } else {
        return None;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = match leading_number(rest) {
        Some((_, r)) => r.trim_start(),
        None => rest,
    };
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    // The directive starts at the first unescaped " #".
    let bytes = rest.as_bytes();
    let mut cut = rest.len();
    for i in 0..bytes.len() {
        if bytes[i] == b'#' && (i == 0 || bytes[i - 1] != b'\\') {
            cut = i;
            break;
        }
    }
    let description = rest[..cut].trim().replace("\\#", "#").replace("\\\\", "\\");
    Some(TapResult {
        ok,
        description,
        directive: rest[cut..].trim_start_matches('#').trim(),
    })
}

fn directive_is(directive: &str, word: &str) -> bool {
    directive
        .get(..word.len())
        .is_some_and(|d| d.eq_ignore_ascii_case(word))
}

/// Reads the YAML block after a `not ok` line: (is a suite, error message).
fn yaml_block(lines: &[&str], start: usize) -> (bool, String) {
    let Some(first) = lines.get(start) else {
        return (false, String::new());
    };
    if first.trim() != "---" {
        return (false, String::new());
    }
    let base = super::text::indent(first);
    let mut suite = false;
    let mut error: Vec<&str> = Vec::new();
    let mut in_error = false;
    let mut block = false;
    for line in lines.iter().skip(start + 1).take(500) {
        let t = line.trim();
        if t == "..." {
            break;
        }
        let ind = super::text::indent(line);
        // The block ended without its "...": stop at the next result or a shallower line.
        if !t.is_empty() && (ind < base || tap_result(line).is_some()) {
            break;
        }
        if ind <= base && !t.is_empty() {
            in_error = false;
            if let Some(v) = t.strip_prefix("error:") {
                let v = v.trim();
                if v.starts_with('|') || v.starts_with('>') {
                    in_error = true;
                    block = true;
                } else {
                    error.push(unquote(v));
                }
            } else if t == "type: 'suite'" || t == "failureType: 'subtestsFailed'" {
                suite = true;
            }
        } else if in_error {
            // Kept as written: an assertion's diff spans lines, with meaningful indentation.
            error.push(line);
        }
    }
    let msg = if block {
        join_block(error)
    } else {
        join_message(error)
    };
    (suite, msg)
}

/// The error under a spec reporter's `✖ name` line (indented `at`): its whole message (an
/// assertion's diff spans lines), up to the stack trace or the next entry.
fn spec_message(lines: &[&str], start: usize, at: usize) -> String {
    let mut block = Vec::new();
    let mut base = None;
    for line in lines.iter().skip(start).take(500) {
        let t = line.trim();
        let ind = super::text::indent(line);
        // An empty line ends the entry; an indented blank one is part of the message.
        if line.is_empty() || (!t.is_empty() && ind <= at) {
            break;
        }
        let base = *base.get_or_insert(ind);
        if ind > base && t.starts_with("at ") {
            break;
        }
        block.push(*line);
    }
    join_block(block)
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .unwrap_or(s)
}

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut footer = Totals::default();
    let mut has_footer = false;
    let mut tap_seen = false;
    // Plain TAP counts from top-level results.
    let mut top = Totals::default();
    let mut bail = 0u64;
    let mut failures = Vec::new();
    let mut spec_failing = false;

    for (i, line) in lines.iter().enumerate() {
        if footer_line(line, &mut footer) {
            has_footer = true;
            continue;
        }
        if line.starts_with("TAP version") || is_plan(line) {
            tap_seen = true;
            continue;
        }
        if line.starts_with("Bail out!") {
            bail += 1;
            continue;
        }
        if line.trim() == "✖ failing tests:" {
            spec_failing = true;
            continue;
        }
        if spec_failing {
            if let Some(rest) = line.trim_start().strip_prefix("✖ ") {
                let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n);
                let msg = spec_message(&lines, i + 1, super::text::indent(line));
                push_failure(&mut failures, name, &msg);
            }
            continue;
        }
        let Some(r) = tap_result(line) else {
            continue;
        };
        let todo = directive_is(r.directive, "todo");
        let skip = directive_is(r.directive, "skip");
        if super::text::indent(line) == 0 {
            match (r.ok, skip || todo) {
                (_, true) => top.skipped += 1,
                (true, false) => top.pass += 1,
                (false, false) => top.fail += 1,
            }
        }
        if !r.ok && !todo && !skip {
            let (suite, msg) = yaml_block(&lines, i + 1);
            if !suite {
                push_failure(&mut failures, &r.description, &msg);
            }
        }
    }

    if has_footer && footer.tests.is_some() {
        let t = footer;
        return Some(TestCounts {
            passed: Some(t.pass),
            failed: Some(t.fail),
            skipped: Some(t.skipped + t.todo),
            errors: Some(t.cancelled),
            total: t.tests,
            failures,
            ..Default::default()
        });
    }
    if !tap_seen || top.pass + top.fail + top.skipped + bail == 0 {
        return None;
    }
    Some(TestCounts {
        passed: Some(top.pass),
        failed: Some(top.fail),
        skipped: Some(top.skipped),
        errors: Some(bail),
        total: Some(top.pass + top.fail + top.skipped + bail),
        failures,
        ..Default::default()
    })
}

/// `1..N` (optionally with `# reason`).
fn is_plan(line: &str) -> bool {
    line.strip_prefix("1..")
        .and_then(leading_number)
        .is_some_and(|(_, rest)| rest.is_empty() || rest.trim_start().starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{counts, pairs};
    use super::super::text;
    use super::*;

    #[test]
    fn a_long_message_is_bounded() {
        let mut out = String::from("TAP version 13\nnot ok 1 - long\n  ---\n  error: |-\n");
        for i in 0..100 {
            out.push_str(&format!("    line {i}\n"));
        }
        out.push_str("  ...\n1..1\n");
        let c = parse(&out).unwrap();
        let msg = &c.failures[0].message;
        assert_eq!(msg.lines().count(), text::MAX_BLOCK_LINES + 1, "{msg}");
        assert!(msg.starts_with("line 0\nline 1\n") && msg.ends_with("line 19\n…"));
        let wide = out.replace("line", &"x".repeat(300));
        let msg = &parse(&wide).unwrap().failures[0].message;
        assert!(
            msg.len() <= text::MAX_BLOCK && msg.ends_with('…'),
            "{}",
            msg.len()
        );
    }

    #[test]
    fn plain_tap_without_node_footer() {
        let out = "TAP version 13\nok 1 - a\nnot ok 2 - b \\# c # TODO later\nnot ok 3 - d\n  ---\n  error: 'boom'\n  ...\nok 4 # SKIP\n1..4\n";
        let c = parse(out).unwrap();
        assert_eq!(counts(&c), [Some(1), Some(1), Some(2), Some(0), Some(4)]);
        assert_eq!(pairs(&c), [("d", "boom")]);
        assert!(parse("ok then\nnothing\n").is_none());
    }
}
