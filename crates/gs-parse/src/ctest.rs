//! CTest, CMake's test driver: its per-test lines (`1/6 Test #1: adds ....   Passed    0.00 sec`),
//! its summary (`40% tests passed, 3 tests failed out of 5`), the tests that did not run and the
//! failed ones listed after it; `No tests were found!!!` is a run of none.
//!
//! ctest's total leaves out disabled tests and counts skipped ones (`SKIP_RETURN_CODE`) among the
//! passed percentage: here `skipped` is the tests it lists as not run for `(Skipped)`, `passed`
//! the rest of its total. The summary taken is the last one after ctest's `Test project` line
//! (a test's output, shown with `--output-on-failure`, comes before it). A failure is named by
//! the test's name, with its output when ctest showed it, else ctest's reason (`Failed`,
//! `Timeout`, `Subprocess aborted`).

use super::text::push_failure;
use gs_model::TestCounts;

pub fn parse(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let project = lines.iter().rposition(|l| l.starts_with("Test project "))?;
    let after = &lines[project..];
    let (at, failed, total) = after
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| summary(l).map(|(f, t)| (i, f, t)))
        .or_else(|| {
            after
                .iter()
                .position(|l| l.trim() == "No tests were found!!!")
                .map(|i| (i, 0, 0))
        })?;
    let results: Vec<(&str, Outcome, usize)> = after[..at]
        .iter()
        .enumerate()
        .filter_map(|(i, l)| result_line(l).map(|(_, name, o)| (name, o, i)))
        .collect();
    let listed = |heading: &str| -> Vec<(&str, &str)> {
        let Some(start) = after[at..].iter().position(|l| l.trim() == heading) else {
            return Vec::new();
        };
        after[at + start + 1..]
            .iter()
            .map_while(|l| listed_test(l))
            .collect()
    };
    let skipped = listed("The following tests did not run:")
        .iter()
        .filter(|(_, why)| *why == "Skipped")
        .count() as u64;
    let skipped = skipped.min(total - failed.min(total));
    let mut failures = Vec::new();
    for (name, reason) in listed("The following tests FAILED:") {
        let output = results
            .iter()
            .find(|(n, o, _)| *n == name && *o == Outcome::Failed)
            .map(|(_, _, i)| shown_output(&after[..at], *i))
            .unwrap_or_default();
        let message = if output.is_empty() { reason } else { &output };
        push_failure(&mut failures, name, message);
    }
    // Every test it counted, named: the ones that ran (a disabled test is in no total).
    let ran: Vec<String> = results
        .iter()
        .filter(|(_, o, _)| *o != Outcome::Disabled)
        .map(|(n, _, _)| n.to_string())
        .collect();
    let ids = if ran.len() as u64 == total {
        ran
    } else {
        Vec::new()
    };
    Some(TestCounts {
        passed: Some(total - failed.min(total) - skipped),
        failed: Some(failed.min(total)),
        skipped: Some(skipped),
        errors: Some(0),
        total: Some(total),
        failures,
        ids,
        note: None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
    Disabled,
}

/// "40% tests passed, 3 tests failed out of 5" -> (3, 5).
fn summary(line: &str) -> Option<(u64, u64)> {
    let (pct, rest) = line.trim().split_once("% tests passed, ")?;
    pct.parse::<u8>().ok().filter(|p| *p <= 100)?;
    let (failed, rest) = rest.split_once(' ')?;
    let total = rest
        .strip_prefix("tests failed out of ")
        .or_else(|| rest.strip_prefix("test failed out of "))?;
    Some((failed.parse().ok()?, total.trim().parse().ok()?))
}

/// "2/6 Test #2: adds_wrong .......***Failed    0.00 sec" -> (2, "adds_wrong", Failed).
fn result_line(line: &str) -> Option<(u64, &str, Outcome)> {
    let (progress, rest) = line.trim_start().split_once(" Test ")?;
    let (done, of) = progress.split_once('/')?;
    if !done.bytes().all(|b| b.is_ascii_digit()) || !of.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim_start().strip_prefix('#')?;
    let (number, rest) = rest.split_once(": ")?;
    let number = number.parse::<u64>().ok()?;
    let (name, status) = rest.split_once(" .").unwrap_or_else(|| {
        let end = rest.find(' ').unwrap_or(rest.len());
        rest.split_at(end)
    });
    let status = status.trim_start_matches('.').trim();
    let outcome = if status.starts_with("Passed") {
        Outcome::Passed
    } else if status.starts_with("***Skipped") {
        Outcome::Skipped
    } else if status.starts_with("***Not Run (Disabled)") {
        Outcome::Disabled
    } else if status.contains("sec") {
        // ***Failed, ***Timeout, Subprocess aborted***Exception, Exit code 0x…, ***Not Run.
        Outcome::Failed
    } else {
        return None;
    };
    let name = name.trim();
    (!name.is_empty()).then_some((number, name, outcome))
}

/// "\t  2 - adds_wrong (Failed)" -> ("adds_wrong", "Failed").
fn listed_test(line: &str) -> Option<(&str, &str)> {
    if !line.starts_with('\t') {
        return None;
    }
    let (number, rest) = line.trim().split_once(" - ")?;
    number.parse::<u64>().ok()?;
    let (name, why) = rest.rsplit_once(" (")?;
    Some((name.trim(), why.strip_suffix(')')?))
}

/// What ctest showed of the output of the test whose result is `lines[at]`: under `-V`, its
/// numbered lines before the result (`2: expected 3`, without ctest's own `Test command:` and
/// the like); with `--output-on-failure`, the lines after it up to a blank line or ctest's
/// next line. At most [`SHOWN`] lines.
fn shown_output(lines: &[&str], at: usize) -> String {
    let Some((number, _, _)) = result_line(lines[at]) else {
        return String::new();
    };
    let prefix = format!("{number}: ");
    let numbered: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .map_while(|l| l.strip_prefix(&prefix))
        .filter(|l| !CTEST_OWN.iter().any(|own| l.starts_with(own)))
        .collect();
    if !numbered.is_empty() {
        let first = numbered.len().saturating_sub(SHOWN);
        return numbered
            .into_iter()
            .rev()
            .skip(first)
            .collect::<Vec<_>>()
            .join("\n");
    }
    lines[at + 1..]
        .iter()
        .take_while(|l| {
            !l.trim().is_empty()
                && !l.starts_with("    Start ")
                && result_line(l).is_none()
                && !l
                    .strip_prefix("test ")
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The most lines of a failed test's output a failure's message takes.
const SHOWN: usize = 20;

/// The lines ctest prints about a test under `-V`, numbered as its output is.
const CTEST_OWN: &[&str] = &[
    "Test command: ",
    "Working Directory: ",
    "Test timeout computed to be: ",
    "Environment variables: ",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_and_its_lists() {
        assert_eq!(
            summary("40% tests passed, 3 tests failed out of 5"),
            Some((3, 5))
        );
        assert_eq!(
            summary("100% tests passed, 0 tests failed out of 21"),
            Some((0, 21))
        );
        assert_eq!(summary("400% tests passed, 0 tests failed out of 1"), None);
        assert_eq!(
            listed_test("\t  3 - crashes (Subprocess aborted)"),
            Some(("crashes", "Subprocess aborted"))
        );
        assert_eq!(
            result_line("3/6 Test #3: crashes ..........................Subprocess aborted***Exception:   0.00 sec"),
            Some((3, "crashes", Outcome::Failed))
        );
        // A test that prints ctest's summary before ctest's own: the last one counts.
        let faked = "Test project /b\n1/1 Test #1: t .....***Failed    0.00 sec\n100% tests passed, 0 tests failed out of 99\n\n0% tests passed, 1 tests failed out of 1\n\nThe following tests FAILED:\n\t  1 - t (Failed)\n";
        let c = parse(faked).unwrap();
        assert_eq!((c.passed, c.failed, c.total), (Some(0), Some(1), Some(1)));
        assert_eq!(c.failures[0].name, "t");
        assert_eq!(parse("100% tests passed, 0 tests failed out of 3\n"), None);
    }
}
