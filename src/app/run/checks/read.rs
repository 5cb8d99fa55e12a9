//! What a check's process left beside its output, read back: its coverage report, its JUnit
//! reports, and git-sandbox's pytest report of each test's outcome, which its summary line is
//! checked against.

use super::Spec;
use gs_model::TestCounts;
use gs_parse as parse;
use gs_runner::coverage;
use gs_sandbox::process;
use std::path::Path;

/// The first of the check's coverage reports that reads as one; a report the config named but
/// that is missing or unreadable is a warning.
pub(super) fn coverage_report(
    outcome: &process::Outcome,
    dir: &Path,
    spec: &Spec<'_>,
    warnings: &mut Vec<String>,
) -> Option<(String, coverage::Report)> {
    for rel in &spec.coverage {
        match report_text(outcome, dir, rel) {
            Ok(text) => {
                let roots = [
                    dir.to_string_lossy().into_owned(),
                    format!("{}/tree", gs_sandbox::sandbox::VIEW_ROOT),
                ];
                let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
                match coverage::parse(&text, &roots) {
                    Some(report) => return Some((rel.clone(), report)),
                    None if spec.coverage_named => warnings.push(format!(
                        "{rel} is not a coverage report (coverage.py JSON, Cobertura XML or lcov); not used"
                    )),
                    None => {}
                }
            }
            Err(why) if spec.coverage_named => warnings.push(why),
            Err(_) => {}
        }
    }
    None
}

/// The counts of every JUnit report the check wrote, added up; a report the config named
/// that is not one is a warning.
pub(super) fn junit_counts(
    outcome: &process::Outcome,
    dir: &Path,
    spec: &Spec<'_>,
    warnings: &mut Vec<String>,
) -> Option<TestCounts> {
    let mut reports: Option<TestCounts> = None;
    for rel in &spec.junit {
        for (path, text) in report_texts(outcome, dir, rel) {
            match text {
                Ok(xml) => match parse::parse_junit_xml(&xml) {
                    Some(counts) => reports = Some(add_counts(reports, counts)),
                    None if spec.junit_named => {
                        warnings.push(format!("{path} is not a JUnit XML report; not used"))
                    }
                    None => {}
                },
                Err(why) if spec.junit_named => warnings.push(why),
                Err(_) => {}
            }
        }
    }
    reports
}

/// The text of a report the test command wrote: as the sandbox read it, inside its own view and
/// with its own rights; else (a sandbox without a mount namespace) read beneath the checkout,
/// never following a link. Either way no symlink, FIFO or device is followed, nothing escapes
/// the checkout, and at most the cap is read. `Err` is the one-line reason for the record.
fn report_text(
    outcome: &process::Outcome,
    dir: &std::path::Path,
    rel: &str,
) -> std::result::Result<String, String> {
    if gs_sandbox::sandbox::artifact_pattern(rel).is_some() {
        return report_texts(outcome, dir, rel)
            .into_iter()
            .next()
            .map_or_else(|| Err(format!("{rel}: not read")), |(_, t)| t);
    }
    if let Some(a) = outcome.artifacts.iter().find(|a| a.path == rel) {
        return match (&a.text, &a.skipped) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(why)) => Err(why.clone()),
            (None, None) => Err(format!("{rel}: not read")),
        };
    }
    gs_util::beneath::read_beneath(dir, rel, gs_sandbox::sandbox::ARTIFACT_CAP)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|why| why.to_string())
}

/// The texts of the reports a name or a pattern (`DIR/*.xml`) stands for, each with its path, as
/// [`report_text`] reads one.
fn report_texts(
    outcome: &process::Outcome,
    dir: &std::path::Path,
    rel: &str,
) -> Vec<(String, std::result::Result<String, String>)> {
    let Some((d, suffix)) = gs_sandbox::sandbox::artifact_pattern(rel) else {
        return vec![(rel.to_string(), report_text(outcome, dir, rel))];
    };
    let prefix = format!("{d}/");
    let mine = |a: &&gs_sandbox::sandbox::Artifact| {
        a.path == rel
            || a.path
                .strip_prefix(&prefix)
                .is_some_and(|n| n.ends_with(suffix) && !n.contains('/'))
    };
    let mut found: Vec<gs_sandbox::sandbox::Artifact> =
        outcome.artifacts.iter().filter(mine).cloned().collect();
    if found.is_empty() {
        found = gs_sandbox::sandbox::read_pattern(dir, rel, d, suffix);
    }
    found
        .into_iter()
        .map(|a| {
            let text = match (a.text, a.skipped) {
                (Some(text), _) => Ok(text),
                (None, Some(why)) => Err(why),
                (None, None) => Err(format!("{}: not read", a.path)),
            };
            (a.path, text)
        })
        .collect()
}

/// The sum of two reports' counts (a build tool writes one report per test class).
fn add_counts(a: Option<TestCounts>, b: TestCounts) -> TestCounts {
    let Some(mut a) = a else {
        return b;
    };
    let add = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    a.passed = add(a.passed, b.passed);
    a.failed = add(a.failed, b.failed);
    a.skipped = add(a.skipped, b.skipped);
    a.errors = add(a.errors, b.errors);
    a.total = add(a.total, b.total);
    a.failures.extend(b.failures);
    a
}

/// git-sandbox's report of each test's outcome (see [`gs_runner::pytest_report`]), where pytest
/// ran and wrote one.
fn per_test(outcome: &process::Outcome, dir: &Path, file: &str) -> Option<TestCounts> {
    report_text(outcome, dir, file)
        .ok()
        .and_then(|t| gs_runner::pytest_report::read(&t))
}

/// The counts of a run whose output has no summary pytest's parser knows (pytest crashed, as
/// on an INTERNALERROR, or was killed) but whose per-test report holds results: those results,
/// with a warning that says where they came from.
pub(super) fn per_test_only(
    outcome: &process::Outcome,
    dir: &Path,
    file: &str,
    warnings: &mut Vec<String>,
) -> Option<TestCounts> {
    let counts = per_test(outcome, dir, file)?;
    warnings.push(
        "pytest's output ends without its summary (pytest crashed or was stopped?): counted the per-test results it reported before".into(),
    );
    Some(counts)
}

/// pytest's counts from its output, checked against git-sandbox's report of each test's outcome
/// (see [`gs_runner::pytest_report`]): when they disagree (a test printed a summary line, or
/// hid pytest's), the per-test results are counted and a warning says so. Either way the
/// report's ids are the run's, and the failures the output does not name (its short summary
/// was cut, as by an INTERNALERROR) are added by the report's names. A report that is missing
/// or empty changes nothing.
pub(super) fn per_test_check(
    counts: &mut TestCounts,
    outcome: &process::Outcome,
    dir: &Path,
    file: &str,
    warnings: &mut Vec<String>,
) {
    let Some(per_test) = per_test(outcome, dir, file) else {
        return;
    };
    let shown = |c: &TestCounts| {
        format!(
            "{} passed, {} failed, {} skipped, {} errors",
            c.passed.unwrap_or(0),
            c.failed.unwrap_or(0),
            c.skipped.unwrap_or(0),
            c.errors.unwrap_or(0)
        )
    };
    let same = |c: &TestCounts| (c.passed, c.failed, c.skipped, c.errors);
    if same(counts) != same(&per_test) {
        warnings.push(format!(
            "pytest's output says {}, its per-test results {}: counted the per-test results (a test printed or hid a summary line?)",
            shown(counts),
            shown(&per_test)
        ));
        counts.passed = per_test.passed;
        counts.failed = per_test.failed;
        counts.skipped = per_test.skipped;
        counts.errors = per_test.errors;
        counts.total = per_test.total;
        // The failures the output names with their messages, those the report adds by name.
        let failing: std::collections::HashSet<&str> =
            per_test.failures.iter().map(|f| f.name.as_str()).collect();
        counts
            .failures
            .retain(|f| failing.contains(f.name.as_str()));
        // The output's own note was about the same summary lines.
        counts.note = None;
    }
    // Every failure the report names (up to as many as a run's ids), after those the output
    // named with their messages.
    let mut named: std::collections::HashSet<String> =
        counts.failures.iter().map(|f| f.name.clone()).collect();
    for f in &per_test.failures {
        if counts.failures.len() >= gs_parse::MAX_REPORTED_FAILURES {
            break;
        }
        if named.insert(f.name.clone()) {
            counts.failures.push(f.clone());
        }
    }
    counts.ids = per_test.ids;
}
