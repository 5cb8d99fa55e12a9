//! `run -j N`: one run's commits shared out among workers.

use super::{run_commits, Outcome, Progress, RunOptions};
use crate::app::{AppError, Context, Result};
use gix::ObjectId;
use gs_store::RepoRow;

/// [`run_commits`] with up to `jobs` commits at once (`run -j N`): commit i goes to worker
/// i mod N, each with its own index connection and repository handle (of the repository at
/// `dir`, registered as `row` by the caller), each writing its notes in batches as one run does. The records come back in the order
/// of `commits`.
pub fn run_commits_parallel(
    dir: &std::path::Path,
    row: &RepoRow,
    commits: &[ObjectId],
    opts: &RunOptions<'_>,
    jobs: usize,
    progress: &std::sync::Mutex<&mut (dyn FnMut(Progress<'_>) + Send)>,
) -> Result<Outcome> {
    let n = jobs.clamp(1, commits.len().max(1));
    let parts: Vec<Vec<ObjectId>> = (0..n)
        .map(|i| commits.iter().skip(i).step_by(n).copied().collect())
        .collect();
    let ends: Vec<Result<Outcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .map(|part| {
                s.spawn(move || {
                    let ctx = Context::load()?;
                    let repo = gs_git::discover(dir)?;
                    run_commits(&ctx, &repo, row, part, opts, &mut |p| {
                        (progress.lock().unwrap_or_else(|e| e.into_inner()))(p)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(AppError::usage("a run worker crashed")))
            })
            .collect()
    });
    let position: std::collections::HashMap<String, usize> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| (c.to_string(), i))
        .collect();
    let mut all = Outcome {
        records: Vec::new(),
        interrupted: false,
        invalid_notes: Vec::new(),
        restored: 0,
        ran: 0,
        attempts: Vec::new(),
    };
    for end in ends {
        let o = end?;
        all.records.extend(o.records);
        all.interrupted |= o.interrupted;
        all.invalid_notes.extend(o.invalid_notes);
        all.restored += o.restored;
        all.ran += o.ran;
        all.attempts.extend(o.attempts);
    }
    all.records
        .sort_by_key(|r| position.get(&r.commit).copied().unwrap_or(usize::MAX));
    // Each worker put back the notes a concurrent writer dropped before it ended, but a writer
    // may still have dropped those of a worker that ended early while the others ran on: once
    // all have ended, every note of the run is looked at again.
    if n > 1 && !opts.unnoted && !opts.is_trial() && !all.records.is_empty() {
        let ctx = Context::load()?;
        let repo = gs_git::discover(dir)?;
        for _ in 0..3 {
            let k =
                crate::app::run::results::rewrite_missing(&ctx, &repo, row, &all.records, false)?;
            all.restored += k;
            if k == 0 {
                break;
            }
        }
    }
    Ok(all)
}
