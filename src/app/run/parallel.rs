//! `run -j N`: one run's commits shared out among workers.

use super::{run_commits, Outcome, Progress, RunOptions};
use crate::app::{AppError, Context, Repo, Result};
use gs_git::ObjectId;
use gs_store::RepoRow;

/// How many runs at once when nobody said (`run -j`, the daemon's `--workers`): one per core;
/// with the user's `[limits] cpu_cores`, as many as the cores hold at that share each (2 cores,
/// `cpu_cores = 0.5`: 4), at least one and at most four per core. Only the user's value counts:
/// a commit's `.sandbox.toml` lowering its share does not raise the machine's parallelism.
pub fn default_workers(policy: &gs_config::Limits) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match policy.cpu_millicores {
        0 => cores,
        m => ((cores as u64 * 1000 / m) as usize).clamp(1, 4 * cores),
    }
}

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
                    run_commits(Repo::new(&ctx, &repo, row), part, opts, &mut |p| {
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
            let k = crate::app::records::results::rewrite_missing(
                Repo::new(&ctx, &repo, row),
                &all.records,
                false,
            )?;
            all.restored += k;
            if k == 0 {
                break;
            }
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::default_workers;

    #[test]
    fn the_default_workers_share_the_cores_at_the_users_cpu_cores() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let at = |cpu_millicores| {
            default_workers(&gs_config::Limits {
                cpu_millicores,
                ..gs_config::Config::default().limits
            })
        };
        assert_eq!(at(0), cores, "no quota: one per core");
        assert_eq!(at(500), 2 * cores);
        assert_eq!(at(1000), cores);
        assert_eq!(
            at(cores as u64 * 1000 + 500),
            1,
            "more than the machine: still one"
        );
        assert_eq!(at(10), 4 * cores, "at most four per core");
    }
}
