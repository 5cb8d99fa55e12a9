//! Retries: a commit that failed only in known-flaky or quarantined tests, run again
//! (`run --retry-flaky N`, `[test] retries`) — the whole command, where its failing tests could
//! not be retried alone in its run (see `checks/alone.rs`): a runner that names no test, or a
//! test quarantined but not flaky in full-suite runs.

use super::{run_one, was_interrupted, Along, RunOptions, Source};
use crate::app::records::quarantine;
use crate::app::Repo;
use crate::app::Result;
use gs_git::CommitInfo;
use gs_model::{RunRecord, Status};

/// The tests a failure only of which is run again: the known-flaky ones, then those under a
/// quarantine that applies.
pub(super) struct Excusable {
    pub flaky: std::collections::HashSet<String>,
    pub quarantined: std::collections::HashSet<String>,
}

/// How often a failed run of `info` is retried: `run --retry-flaky N`, else the commit's
/// `[test] retries`; at least once when it failed only in quarantined tests.
fn retries(opts: &RunOptions<'_>, along: &Along, info: &CommitInfo) -> u32 {
    opts.retry_flaky
        .or_else(|| along.configs.get(&info.tree)?.1.test.retries)
        .unwrap_or(0)
}

/// Run a failed commit again while every test that failed on it is known to be flaky or is
/// quarantined, up to its retries (a quarantine asks for one at least), each time forced. A
/// failing run made now is kept as flaky evidence before the next (the index keeps one result
/// per commit, its executions all).
pub(super) fn retry_flaky(
    at: Repo<'_>,
    info: &CommitInfo,
    opts: &RunOptions<'_>,
    along: &mut Along,
    mut record: RunRecord,
    mut source: Source,
) -> Result<(RunRecord, Source)> {
    let Repo { ctx, row, repo } = at;
    // Its failing tests were retried alone, and one failed every retry: a failure.
    if record.retried.as_ref().is_some_and(|r| r.alone) {
        return Ok((record, source));
    }
    let asked = retries(opts, along, info);
    if along.flaky.is_none() {
        let names = ctx.index.flaky_tests(&row.repository_id)?;
        along.flaky = Some(Excusable {
            flaky: names.into_iter().map(|t| t.name).collect(),
            quarantined: quarantine::applied(ctx, repo, row)?,
        });
    }
    let known = along.flaky.as_ref().expect("read above");
    let all: std::collections::HashSet<String> =
        known.flaky.union(&known.quarantined).cloned().collect();
    let quarantined_only = record
        .failed_only_in(&known.quarantined)
        .is_some_and(|names| !names.is_empty());
    let times = if quarantined_only {
        asked.max(1)
    } else {
        asked
    };
    let forced = RunOptions {
        force: true,
        retry_flaky: Some(0),
        ..opts.clone()
    };
    let mut retried = record.retried.clone().unwrap_or(gs_model::Retried {
        attempts: 0,
        alone: false,
        flaky: Vec::new(),
        tests: Vec::new(),
    });
    for _ in 0..times {
        let Some(names) = record.failed_only_in(&all) else {
            break;
        };
        if source == Source::Made {
            ctx.index.add_execution(&row.repository_id, &record)?;
        }
        for n in names {
            if !retried.flaky.contains(&n) {
                retried.flaky.push(n.clone());
                retried.tests.push(gs_model::TestOutcomes {
                    test: n,
                    outcomes: vec!["failed".into()],
                });
            }
        }
        retried.attempts += 1;
        let (again, _) = run_one(at, info, &forced, along)?;
        if was_interrupted(&again) {
            return Ok((again, Source::Made));
        }
        for t in &mut retried.tests {
            t.outcomes.push(outcome_of(&again, &t.test).into());
        }
        (record, source) = (again, Source::Made);
        record.retried = Some(retried.clone());
        if record.status != Status::Failed {
            break;
        }
    }
    Ok((record, source))
}

/// How `test` ended in the run `r`: named among its failures, or passed by a run whose
/// failures are all named; else unknown.
fn outcome_of(r: &RunRecord, test: &str) -> &'static str {
    let failed = r.tests.as_ref().is_some_and(|t| {
        t.failures
            .iter()
            .any(|f| gs_model::test_name::canonical(&f.name) == test)
    });
    if failed {
        "failed"
    } else if r.status == Status::Passed || r.failures_complete() {
        "passed"
    } else {
        "unknown"
    }
}
