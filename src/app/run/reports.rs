//! Where a run looks for the reports its tools write when the config names none, and the
//! record's coverage made from one.

use gs_runner as runner;

/// Where build tools write their JUnit XML reports when the config names none: Maven Surefire
/// and Failsafe, Gradle.
pub(super) const JUNIT_DIRS: &[&str] = &[
    "target/surefire-reports",
    "target/failsafe-reports",
    "build/test-results/test",
];

/// Where the usual tools write a line-coverage report when the config names none: coverage.py
/// (`coverage json`, `coverage xml`), lcov (c8, nyc, `cargo llvm-cov --lcov --output-path`),
/// istanbul's Cobertura.
pub(super) const COVERAGE_REPORTS: &[&str] = &[
    "coverage.json",
    "coverage.xml",
    "lcov.info",
    "coverage/lcov.info",
    "coverage/cobertura-coverage.xml",
];

/// The record's coverage: the report's totals and the files the commit changed.
pub(super) fn coverage_of(
    check: &str,
    report: &str,
    r: &runner::coverage::Report,
    changes: Option<&gs_model::Changes>,
) -> gs_model::Coverage {
    use gs_model::{percent, percent_of, FileCoverage};
    let changed: std::collections::HashSet<&str> = changes
        .map(|c| c.files.iter().map(|f| f.path.as_str()).collect())
        .unwrap_or_default();
    gs_model::Coverage {
        check: check.to_string(),
        report: report.to_string(),
        format: r.format.to_string(),
        // A report claiming more covered lines than it has is held to its count.
        lines_covered: r.covered.min(r.total),
        lines_total: r.total,
        branches_covered: r.branches.map(|b| b.0),
        branches_total: r.branches.map(|b| b.1),
        percent: r
            .percent
            .map(percent_of)
            .unwrap_or_else(|| percent(r.covered.min(r.total), r.total)),
        changed_files: r
            .files
            .iter()
            .filter(|f| changed.contains(f.path.as_str()))
            .take(gs_model::MAX_CHANGED_FILES)
            .map(|f| FileCoverage {
                path: f.path.clone(),
                lines_covered: f.covered,
                lines_total: f.total,
                percent: percent(f.covered, f.total),
            })
            .collect(),
    }
}
