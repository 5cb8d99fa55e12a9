//! mocha: the epilogue its console reporters (spec, the default, and dot, list, …) print
//! ("2 passing (17ms)", "2 pending", "5 failing", then the numbered failures), and its `tap`
//! reporter (TAP 12, or 13 with `--reporter-option tapVersion=13`), recognised by mocha's own
//! footer: `# tests`, `# pass` and `# fail`, then the plan, without node's other counts.
//!
//! pending counts as skipped; the total is passed + failed + pending (mocha prints none). A failing
//! hook is one of mocha's "failing" (`suite "before each" hook for "t"`), so it counts as failed.
//! Failures are named by mocha's full title (the suites' titles and the test's, joined by spaces,
//! as its TAP reporter prints them), with the error message (and the diff mocha adds to it).

use super::text::{count_item, indent, join_block, leading_number, number_after, push_failure};
use gs_model::TestCounts;

/// Lines a failure's message is looked for in.
const LOOKAHEAD: usize = 200;

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    parse_spec(&lines).or_else(|| parse_tap(&lines))
}

/// Whether `text` is mocha's TAP (so that the generic TAP parser leaves it to this one).
pub fn is_tap(text: &str) -> bool {
    tap_footer(&text.lines().collect::<Vec<_>>()).is_some()
}

/// "  2 passing (17ms)" -> 2.
fn passing_line(line: &str) -> Option<u64> {
    let (n, rest) = count_item(line)?;
    let took = rest.strip_prefix("passing (")?.strip_suffix(')')?;
    (!took.is_empty() && !took.contains(' ')).then_some(n)
}

/// "  2 pending" -> 2 (for `word` "pending").
fn count_of(line: Option<&&str>, word: &str) -> Option<u64> {
    let (n, rest) = count_item(line?)?;
    (rest == word).then_some(n)
}

/// "  3) calc" (a failure in the epilogue's list) -> "calc".
fn failure_header(line: &str) -> Option<&str> {
    if indent(line) != 2 {
        return None;
    }
    let (_, rest) = leading_number(line.trim_start())?;
    let rest = rest.strip_prefix(") ")?.trim();
    (!rest.is_empty()).then_some(rest)
}

/// The full title of the failure whose header is `lines[start]`: mocha prints each further title
/// part on its own line, indented 5 + 2k spaces, and ends the last with ':'. Returns the title and
/// the index of the line after it; None when the last part has no ':' (the live list's
/// "  1) test" lines, not the epilogue's).
fn failure_title(lines: &[&str], start: usize, first: &str) -> Option<(String, usize)> {
    let mut parts = vec![first];
    let mut next = start + 1;
    while let Some(line) = lines.get(next) {
        if parts.len() > 50 || indent(line) != 5 + 2 * parts.len() || line.trim().is_empty() {
            break;
        }
        parts.push(line.trim());
        next += 1;
    }
    let last = parts.last_mut()?;
    *last = last.strip_suffix(':')?;
    Some((parts.join(" "), next))
}

/// The error under a failure's title: its message (first line as printed, further lines as the
/// error had them) and mocha's "+ expected - actual" diff, up to the stack trace.
fn failure_message(lines: &[&str], start: usize) -> String {
    let mut msg: Vec<&str> = Vec::new();
    let mut in_diff = false;
    for line in lines.iter().skip(start).take(LOOKAHEAD) {
        let t = line.trim();
        if failure_header(line).is_some() || passing_line(line).is_some() {
            break;
        }
        if indent(line) >= 4 && t.starts_with("at ") {
            break;
        }
        if msg.is_empty() {
            if !t.is_empty() {
                msg.push(t);
            }
            continue;
        }
        if t == "+ expected - actual" {
            in_diff = true;
            msg.push(t);
        } else if in_diff {
            // mocha indents each line of its diff by 6.
            msg.push(line.strip_prefix("      ").unwrap_or(t));
        } else {
            msg.push(line);
        }
    }
    join_block(msg)
}

fn parse_spec(lines: &[&str]) -> Option<TestCounts> {
    let mut found = false;
    let (mut passed, mut pending, mut failed) = (0u64, 0u64, 0u64);
    let mut listing = false;
    let mut failures = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(n) = passing_line(line) {
            found = true;
            passed += n;
            i += 1;
            if let Some(n) = count_of(lines.get(i), "pending") {
                pending += n;
                i += 1;
            }
            listing = false;
            if let Some(n) = count_of(lines.get(i), "failing") {
                failed += n;
                listing = true;
                i += 1;
            }
            continue;
        }
        if listing {
            if let Some(first) = failure_header(line) {
                if let Some((name, next)) = failure_title(lines, i, first) {
                    push_failure(&mut failures, &name, &failure_message(lines, next));
                    i = next;
                    continue;
                }
            }
        }
        i += 1;
    }
    if !found {
        return None;
    }
    Some(TestCounts {
        passed: Some(passed),
        failed: Some(failed),
        skipped: Some(pending),
        errors: Some(0),
        total: Some(passed + failed + pending),
        failures,
        ..Default::default()
    })
}

/// mocha's TAP footer, summed: (pass, fail). It is `# tests N`, `# pass N`, `# fail N` and then the
/// plan; node's TAP adds `# suites`, `# skipped`, … (and tape prints its plan before the counts).
fn tap_footer(lines: &[&str]) -> Option<(u64, u64)> {
    let (mut tests, mut pass, mut fail) = (None::<u64>, 0u64, 0u64);
    let mut plan_after_fail = false;
    let mut after_fail = false;
    for line in lines {
        if let Some(rest) = line.strip_prefix("# ") {
            let key = rest.split(' ').next().unwrap_or("");
            let Some(n) = number_after(rest, key) else {
                continue;
            };
            match key {
                "tests" => tests = Some(tests.unwrap_or(0) + n),
                "pass" => pass += n,
                "fail" => {
                    fail += n;
                    after_fail = true;
                    continue;
                }
                "suites" | "skipped" | "todo" | "cancelled" | "duration_ms" => return None,
                _ => {}
            }
        } else if after_fail && is_plan(line) {
            plan_after_fail = true;
        }
        if !line.trim().is_empty() {
            after_fail = false;
        }
    }
    (tests.is_some() && plan_after_fail).then_some((pass, fail))
}

/// `1..N`.
fn is_plan(line: &str) -> bool {
    line.strip_prefix("1..")
        .and_then(leading_number)
        .is_some_and(|(_, rest)| rest.trim().is_empty())
}

/// `ok 2 title # SKIP -` -> (true, "title", skipped), `not ok 4 title` -> (false, "title", false).
fn tap_result(line: &str) -> Option<(bool, &str, bool)> {
    let (ok, rest) = if let Some(r) = line.strip_prefix("not ok ") {
        (false, r)
    } else {
        (true, line.strip_prefix("ok ")?)
    };
    let (_, rest) = leading_number(rest)?;
    let title = rest.strip_prefix(' ').unwrap_or(rest);
    // mocha drops '#' from titles, so the first " # " starts the directive.
    match title.split_once(" # ") {
        Some((t, directive)) => Some((ok, t.trim(), directive.starts_with("SKIP"))),
        None => Some((ok, title.trim(), false)),
    }
}

/// The message under a `not ok` line: TAP 13's YAML `message:`, or TAP 12's indented message
/// (followed by the stack, which starts by repeating the message after the error's name).
fn tap_message(lines: &[&str], start: usize) -> String {
    let block: Vec<&str> = lines
        .iter()
        .skip(start)
        .take(LOOKAHEAD)
        .take_while(|l| l.starts_with("  ") || l.is_empty())
        .copied()
        .collect();
    if block.first().map(|l| l.trim()) == Some("---") {
        let Some(at) = block.iter().position(|l| l.trim().starts_with("message:")) else {
            return String::new();
        };
        let key_indent = indent(block[at]);
        let value = block[at].trim()["message:".len()..].trim();
        if !value.is_empty() && !value.starts_with('|') && !value.starts_with('>') {
            return join_block([unquote(value)]);
        }
        let body = block[at + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || indent(l) > key_indent)
            .copied();
        return join_block(body);
    }
    let first = block.first().map_or("", |l| l.trim());
    let stack = (1..block.len())
        .find(|&j| {
            let t = block[j].trim_end();
            !first.is_empty() && t.ends_with(first) && t[..t.len() - first.len()].ends_with(": ")
        })
        .or_else(|| {
            block
                .iter()
                .position(|l| indent(l) >= 4 && l.trim().starts_with("at "))
        })
        .unwrap_or(block.len());
    join_block(block[..stack].iter().copied())
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .unwrap_or(s)
}

fn parse_tap(lines: &[&str]) -> Option<TestCounts> {
    let (pass, fail) = tap_footer(lines)?;
    let mut skipped = 0u64;
    let mut failures = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match tap_result(line) {
            Some((_, _, true)) => skipped += 1,
            Some((false, title, false)) => {
                push_failure(&mut failures, title, &tap_message(lines, i + 1));
            }
            _ => {}
        }
    }
    Some(TestCounts {
        passed: Some(pass),
        failed: Some(fail),
        skipped: Some(skipped),
        errors: Some(0),
        total: Some(pass + fail + skipped),
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::counts;
    use super::super::text::clean;
    use super::*;

    /// Why mocha's TAP has a parser of its own: the generic TAP one reads its footer (which leaves
    /// pending out) and finds no `error:` under its `not ok` lines.
    #[test]
    fn generic_tap_would_miss_pending_and_messages() {
        for fixture in [
            include_str!("../../../tests/fixtures/output/mocha/some_fail_tap.txt"),
            include_str!("../../../tests/fixtures/output/mocha/some_fail_tap13.txt"),
        ] {
            let generic = super::super::tap::parse(&clean(fixture)).unwrap();
            assert_eq!(
                counts(&generic),
                [Some(2), Some(8), Some(0), Some(0), Some(8 + 2)]
            );
            assert!(generic.failures.iter().all(|f| f.message.is_empty()));
        }
    }

    #[test]
    fn node_tap_and_load_errors_are_not_mocha() {
        for other in [
            include_str!("../../../tests/fixtures/output/node/some_fail.txt"),
            include_str!("../../../tests/fixtures/output/node/all_pass.txt"),
            include_str!("../../../tests/fixtures/output/mocha/load_error.txt"),
        ] {
            assert!(parse(&clean(other)).is_none());
            assert!(!is_tap(&clean(other)));
        }
        // tape prints its plan before the counts.
        let tape =
            "TAP version 13\n# a\nok 1 x\nnot ok 2 y\n\n1..2\n# tests 2\n# pass  1\n# fail  1\n";
        assert!(parse(tape).is_none());
        assert!(is_tap(include_str!(
            "../../../tests/fixtures/output/mocha/some_fail_tap.txt"
        )));
    }
}
