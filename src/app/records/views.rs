//! What the faces show from the index: repositories with their counts, the queue, pages of runs
//! and events, one run with its repository. Thin on purpose: the faces render these and never
//! open the store themselves.

use crate::app::{AppError, Context, Result};
use gs_model::RunRecord;
use gs_store::{Event, EventFilter, ExperimentCounts, FlakyTest, Job, RepoRow, RepoStats};
use std::collections::{BTreeMap, HashMap};

/// Every registered repository with its counts.
pub fn repositories(ctx: &Context) -> Result<Vec<RepoStats>> {
    Ok(ctx.index.repository_stats()?)
}

/// How much of what failed phase one held: `caught` of `of`, and the share (none of none: `None`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Share {
    pub caught: u64,
    pub of: u64,
    pub share: Option<f64>,
}

impl Share {
    fn new(caught: u64, of: u64) -> Share {
        Share {
            caught,
            of,
            share: (of > 0).then(|| caught as f64 / of as f64),
        }
    }
}

/// Phase one's recall in a repository's newest runs with a probe: by faulty commit (its probe
/// found at least one of the run's failures) and by failing test (phase one held it).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Recall {
    pub commits: Share,
    pub tests: Share,
}

impl Recall {
    pub fn of(s: &RepoStats) -> Recall {
        Recall {
            commits: Share::new(s.selection_caught, s.selection_caught + s.selection_missed),
            tests: Share::new(s.selection_tests_caught, s.selection_tests_failed),
        }
    }
}

/// One repository's counts, as [`repositories`] gives each, with its [`Recall`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RepoSummary {
    #[serde(flatten)]
    pub stats: RepoStats,
    pub recall: Recall,
}

/// The summary of the registered repository with id or name `key`.
pub fn repository_summary(ctx: &Context, key: &str) -> Result<Option<RepoSummary>> {
    let Some(row) = repository(ctx, key)? else {
        return Ok(None);
    };
    Ok(ctx
        .index
        .repository_stats_of(&row.repository_id)?
        .map(|stats| RepoSummary {
            recall: Recall::of(&stats),
            stats,
        }))
}

/// A registered repository by its id, its name or its path (`.` for the one here).
pub fn repository_at(ctx: &Context, key: &str) -> Result<Option<RepoRow>> {
    let path = std::fs::canonicalize(key)
        .ok()
        .map(|p| p.display().to_string());
    Ok(ctx
        .index
        .repositories()?
        .into_iter()
        .find(|r| r.repository_id == key || r.name == key || Some(&r.path) == path.as_ref()))
}

/// What the totals of `status` count: runs (a skipped commit is none), those that passed,
/// their mean duration; experiments by state; the queue and why its jobs wait; the registered
/// repositories the index does not have.
pub struct Totals {
    pub runs: u64,
    pub passed: u64,
    pub mean_duration_ms: Option<f64>,
    pub experiments_by_state: ExperimentCounts,
    pub queued: u64,
    pub running: u64,
    pub pending_by_trigger: BTreeMap<String, u64>,
    pub dead: u64,
    pub unindexed: Vec<String>,
}

/// The totals over every repository; `stats` are [`repositories`]' (the registered ones the
/// index has).
pub fn totals(ctx: &Context, stats: &[RepoStats]) -> Result<Totals> {
    let (runs, passed, mean_duration_ms) = ctx.index.run_totals()?;
    let (queued, running) = ctx.index.queue_depth()?;
    let unindexed = gs_store::registry::list(&ctx.paths.home)
        .into_iter()
        .filter(|e| !stats.iter().any(|s| s.repo.repository_id == e.id))
        .map(|e| e.path.display().to_string())
        .collect();
    Ok(Totals {
        runs,
        passed,
        mean_duration_ms,
        experiments_by_state: ctx.index.experiment_counts()?,
        queued,
        running,
        pending_by_trigger: ctx.index.pending_by_trigger()?,
        dead: ctx.index.dead_jobs()?,
        unindexed,
    })
}

/// Where the index is, as `status` shows it.
pub fn index_path(ctx: &Context) -> &std::path::Path {
    ctx.index.path()
}

/// A registered repository by its id or its name.
pub fn repository(ctx: &Context, key: &str) -> Result<Option<RepoRow>> {
    Ok(ctx
        .index
        .repositories()?
        .into_iter()
        .find(|r| r.repository_id == key || r.name == key))
}

/// The registered repositories the index has.
pub fn registered(ctx: &Context) -> Result<Vec<RepoRow>> {
    Ok(ctx.index.repositories()?)
}

/// A sandbox profile's layers (what the run's isolation summary names), when this machine's
/// index has it.
pub fn profile(ctx: &Context, id: &str) -> Result<Option<Vec<gs_model::Layer>>> {
    Ok(ctx.index.profile(id)?)
}

/// Each repository's id and name.
pub fn names(ctx: &Context) -> Result<HashMap<String, String>> {
    Ok(ctx
        .index
        .repositories()?
        .into_iter()
        .map(|r| (r.repository_id, r.name))
        .collect())
}

/// Jobs pending and running, over every repository.
pub fn queue_depth(ctx: &Context) -> Result<(u64, u64)> {
    Ok(ctx.index.queue_depth()?)
}

/// The jobs running now.
pub fn running(ctx: &Context) -> Result<Vec<Job>> {
    Ok(ctx.index.running_jobs()?)
}

/// One repository's jobs pending and running, by ref.
pub fn queued_by_ref(ctx: &Context, row: &RepoRow) -> Result<BTreeMap<String, (u64, u64)>> {
    Ok(ctx.index.queued_by_ref(&row.repository_id)?)
}

/// Runs with their ids and repository ids: after `since` oldest first, else the newest.
pub fn runs(
    ctx: &Context,
    repository_id: Option<&str>,
    status: Option<&str>,
    since: Option<i64>,
    limit: usize,
) -> Result<Vec<(i64, String, RunRecord)>> {
    Ok(ctx.index.runs_page(repository_id, status, since, limit)?)
}

/// A repository's newest runs: commit, status, finish time.
pub fn recent_runs(
    ctx: &Context,
    row: &RepoRow,
    limit: usize,
) -> Result<Vec<(String, String, String)>> {
    Ok(ctx.index.recent_runs(&row.repository_id, limit)?)
}

/// The run with index id `id` and its repository.
pub fn run(ctx: &Context, id: i64) -> Result<(RepoRow, RunRecord)> {
    let (repository_id, record) = ctx
        .index
        .run_by_id(id)?
        .ok_or_else(|| AppError::not_found(format!("no run {id}")))?;
    let row = ctx
        .index
        .repositories()?
        .into_iter()
        .find(|r| r.repository_id == repository_id)
        .ok_or_else(|| {
            AppError::not_found(format!("run {id} belongs to no registered repository"))
        })?;
    Ok((row, record))
}

/// The events `f` selects.
pub fn events(ctx: &Context, f: &EventFilter) -> Result<Vec<Event>> {
    Ok(ctx.index.events(f)?)
}

/// The newest event's id (0 when there is none): where a stream from now starts.
pub fn newest_event(ctx: &Context) -> Result<i64> {
    let newest = events(
        ctx,
        &EventFilter {
            limit: Some(1),
            ..Default::default()
        },
    )?;
    Ok(newest.last().map_or(0, |e| e.id))
}

/// The tests of a repository that both passed and failed on one tree under one config, most
/// flips first (`kind: "flaky"`), then those whose outcome a build cache decided: a warm run and
/// a cold one of a tree disagreed (`kind: "cache_dependent"`, the cold outcome standing).
pub fn flaky_tests(ctx: &Context, row: &RepoRow) -> Result<Vec<FlakyTest>> {
    let mut all = ctx.index.flaky_tests(&row.repository_id)?;
    all.extend(ctx.index.cache_dependent_tests(&row.repository_id)?);
    Ok(all)
}

/// The days `flaky` looks back when not told.
pub const FLAKY_WINDOW_DAYS: u64 = 30;

/// One test of [`flaky_report`]: its flips over the window, if any, and its quarantine, if any.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlakyEntry {
    /// Its flips over the window (none, for a quarantined test that did not flip: `kind`
    /// then says `quarantined`).
    #[serde(flatten)]
    pub test: FlakyTest,
    /// `quarantined` (applied), `released`, `untrusted` (a copy nobody trusted signed: not
    /// applied), else the flips' kind: `flaky` or `cache_dependent`.
    pub state: String,
    /// Failures over the runs of trees that ran more than once in the window (`None`: none).
    pub rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<super::quarantine::Quarantined>,
}

impl From<FlakyTest> for FlakyEntry {
    /// A test that flipped, with its rate and no quarantine.
    fn from(t: FlakyTest) -> FlakyEntry {
        FlakyEntry {
            state: t.kind.clone(),
            rate: (t.runs > 0).then(|| t.failures as f64 / t.runs as f64),
            test: t,
            quarantine: None,
        }
    }
}

/// A repository's flaky tests over the last `days` (their flake rate: failures over the runs of
/// trees that ran more than once) with every quarantined test, each with its state: what
/// `flaky`, MCP `flaky_list` and `GET /api/v1/repositories/{repo}/flaky` answer.
pub fn flaky_report(
    ctx: &Context,
    repo: &gs_git::Repository,
    row: &RepoRow,
    days: u64,
) -> Result<Vec<FlakyEntry>> {
    let since_ms = gs_util::time::now_millis() - (days.min(36_500) as i64) * 86_400_000;
    let since = gs_util::time::rfc3339(since_ms);
    let (flaky, dependent) = ctx.index.outcome_flips(&row.repository_id, &since)?;
    let mut out: Vec<FlakyEntry> = flaky
        .into_iter()
        .chain(dependent)
        .map(FlakyEntry::from)
        .collect();
    for q in super::quarantine::list(ctx, repo, row)? {
        let state = match q.state {
            super::quarantine::ACTIVE => "quarantined",
            other => other,
        };
        match out.iter_mut().find(|e| e.test.name == q.entry.test) {
            // A flaky test that is quarantined says so; a released one stays flaky.
            Some(e) => {
                if q.state == super::quarantine::ACTIVE {
                    e.state = state.to_string();
                }
                e.quarantine = Some(q);
            }
            None => out.push(FlakyEntry {
                test: FlakyTest::new(&q.entry.test, "quarantined"),
                state: state.to_string(),
                rate: None,
                quarantine: Some(q),
            }),
        }
    }
    Ok(out)
}
