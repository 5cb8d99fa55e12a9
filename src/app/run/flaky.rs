//! `run --retry-flaky N`: a commit that failed only in known-flaky tests, run again.

use super::{run_one, was_interrupted, Along, RunOptions, Source};
use crate::app::Repo;
use crate::app::Result;
use gs_git::CommitInfo;
use gs_model::{RunRecord, Status};

/// Run a failed commit again while every test that failed on it is known to be flaky, up to
/// `opts.retry_flaky` times, each time forced. A failing run made now is kept as flaky
/// evidence before the next (the index keeps one result per commit, its executions all).
#[allow(clippy::too_many_arguments)]
pub(super) fn retry_flaky(
    at: Repo<'_>,
    info: &CommitInfo,
    opts: &RunOptions<'_>,
    along: &mut Along,
    mut record: RunRecord,
    mut source: Source,
) -> Result<(RunRecord, Source)> {
    let Repo { ctx, row, .. } = at;
    if along.flaky.is_none() {
        let names = ctx.index.flaky_tests(&row.repository_id)?;
        along.flaky = Some(names.into_iter().map(|t| t.name).collect());
    }
    let known = along.flaky.clone().expect("read above");
    let forced = RunOptions {
        force: true,
        retry_flaky: 0,
        ..opts.clone()
    };
    let mut retried = record.retried.clone().unwrap_or(gs_model::Retried {
        attempts: 0,
        flaky: Vec::new(),
    });
    for _ in 0..opts.retry_flaky {
        let Some(names) = record.failed_only_in(&known) else {
            break;
        };
        if source == Source::Made {
            ctx.index.add_execution(&row.repository_id, &record)?;
        }
        for n in names {
            if !retried.flaky.contains(&n) {
                retried.flaky.push(n);
            }
        }
        retried.attempts += 1;
        let (again, _) = run_one(at, info, &forced, along)?;
        if was_interrupted(&again) {
            return Ok((again, Source::Made));
        }
        (record, source) = (again, Source::Made);
        record.retried = Some(retried.clone());
        if record.status != Status::Failed {
            break;
        }
    }
    Ok((record, source))
}
