//! A run record in a few hundred bytes: status, counts, the first failures, what limit ended it,
//! how it was sandboxed and the analysis in numbers. What agents (MCP) and dashboards read
//! instead of the whole record.

use gs_model::{LayerStatus, RunRecord};
use serde::Serialize;

/// How long a failure's first line may be in a summary.
const FIRST_LINE: usize = 160;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub commit: String,
    pub status: String,
    /// The commit whose run of the same tree and config this result is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<String>,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestSummary>,
    /// The named checks besides the tests, in the order declared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckLine>,
    /// The first failures: name and the first line of the message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureLine>,
    /// Failures not listed here.
    #[serde(skip_serializing_if = "is_zero")]
    pub failures_more: u64,
    /// The limit that ended the run early (`timeout`, `memory`, `output`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<gs_model::KilledBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationLine>,
    /// Line coverage in percent, when a report was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisLine>,
    #[serde(skip_serializing_if = "is_zero")]
    pub warnings: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TestSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework: Option<gs_model::Framework>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    pub errors: Option<u64>,
    pub total: Option<u64>,
    pub exit_code: Option<i32>,
}

/// One named check in a line: how it ended, whether it counts, and why it did not pass.
#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub name: String,
    pub status: String,
    pub required: bool,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Its error, else the last line it printed, when it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureLine {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct IsolationLine {
    pub degraded: bool,
    pub enforced: u64,
    /// Layers that were unavailable (`layer`) or off on purpose (`layer (off)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AnalysisLine {
    pub files: u64,
    pub code_lines: u64,
    pub functions: u64,
    pub complexity_mean: f64,
    pub complexity_max: u64,
    pub potential_issues: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The first line of `text`, at most [`FIRST_LINE`] bytes (cut at a character boundary, `…`).
pub fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.len() <= FIRST_LINE {
        return line.to_string();
    }
    let mut cut = FIRST_LINE;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &line[..cut])
}

impl Summary {
    /// The summary of `r`, listing at most `failures` failures.
    pub fn of(r: &RunRecord, failures: usize) -> Summary {
        let t = r.tests.as_ref();
        let listed: Vec<FailureLine> = t
            .map(|t| {
                t.failures
                    .iter()
                    .take(failures)
                    .map(|f| FailureLine {
                        name: f.name.clone(),
                        message: first_line(&f.message),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let known = t.map_or(0, |t| t.failures.len() as u64 + t.failures_omitted);
        let failed = t.map_or(0, |t| t.failed.unwrap_or(0) + t.errors.unwrap_or(0));
        Summary {
            commit: r.commit.clone(),
            status: r.status.to_string(),
            cached_from: r.cached_from.clone(),
            duration_ms: r.duration_ms,
            error: r.error.as_deref().map(first_line),
            tests: t.map(|t| TestSummary {
                framework: t.framework.clone(),
                passed: t.passed,
                failed: t.failed,
                skipped: t.skipped,
                errors: t.errors,
                total: t.total,
                exit_code: t.exit_code,
            }),
            checks: r
                .checks
                .iter()
                .map(|(name, c)| CheckLine {
                    name: name.to_string(),
                    status: c.status().to_string(),
                    required: c.required,
                    exit_code: c.run.exit_code,
                    duration_ms: c.run.duration_ms,
                    why: (c.status() != gs_model::Status::Passed).then(|| {
                        let last = c
                            .run
                            .output_tail
                            .lines()
                            .rev()
                            .find(|l| !l.trim().is_empty());
                        first_line(c.error.as_deref().or(last).unwrap_or(""))
                    }),
                })
                .collect(),
            failures_more: known.max(failed).saturating_sub(listed.len() as u64),
            failures: listed,
            limit_hit: t.and_then(|t| t.killed_by.clone()),
            isolation: t.and_then(|t| t.isolation.as_ref()).map(|i| IsolationLine {
                degraded: i.degraded,
                enforced: i.enforced,
                not_enforced: i
                    .not_enforced
                    .iter()
                    .map(|l| match l.status {
                        LayerStatus::Off => format!("{} (off)", l.layer),
                        _ => l.layer.clone(),
                    })
                    .collect(),
            }),
            coverage_percent: r.coverage.as_ref().map(|c| c.percent),
            analysis: r.analysis.as_ref().map(|a| AnalysisLine {
                files: a.files_analyzed,
                code_lines: a.code_lines,
                functions: a.functions_found,
                complexity_mean: (a.complexity_score * 100.0).round() / 100.0,
                complexity_max: a.complexity_max,
                potential_issues: a.potential_issues.len() as u64,
            }),
            warnings: r.warnings.len() as u64,
        }
    }
}
