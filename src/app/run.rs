//! Running the experiment for commits: config from the commit, the cache by tree + config,
//! a throw-away checkout, tests and analysis side by side, change stats, then the record as a
//! note (batched, compare-and-swap) and in the index, with events.

pub mod audit;
pub mod checks;
pub mod exec;
pub mod fix;
pub mod selection;
pub mod setup;
pub mod slots;
pub mod testcov;
pub mod testmap;

use crate::app::records::results::{self, NoteReader};
use crate::app::{Context, Repo, Result};
use gs_config::Config;
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{RunRecord, Status};
use gs_store::RepoRow;
use std::collections::HashMap;
use std::time::Instant;

mod attempt;
mod branch;
mod flaky;
mod options;
mod parallel;
mod reports;
mod stages;

use stages::run_one;

pub use options::{FirstFailure, Outcome, Progress, RunOptions};
pub use parallel::{default_workers, run_commits_parallel};

/// How many results are written as notes at once (sooner when a batch gets old).
///
/// A range then costs few notes commits (and packs), yet a kill loses little.
const BATCH: usize = 128;
const BATCH_AGE_MS: u128 = 2000;

/// The results of trees found or made in this run, by (tree, config key), as records served to
/// another commit (`cached_from` their maker): later commits of the same tree (empty commits,
/// reverts) are served without asking the index again.
type SeenTrees = HashMap<(ObjectId, String), RunRecord>;

/// What the commits of one run share.
struct Along {
    reader: NoteReader,
    /// Made when the first commit has to run.
    sandbox: std::cell::OnceCell<gs_sandbox::Sandbox>,
    seen: SeenTrees,
    /// The repository's known-flaky tests, read when a failure may be retried.
    flaky: Option<flaky::Excusable>,
    /// The config (and its result key) of the trees just seen: a commit's config follows from
    /// its tree and the run's options, so a batch of commits on one tree reads it once. Kept for
    /// [`CONFIG_FOR`], since the toolchain's fingerprint is part of it.
    configs: HashMap<ObjectId, (Instant, Config, String)>,
    /// The index's rows of the commits about to run, read [`BATCH`] commits at a time (one
    /// query, not one per commit); each taken once, when its commit runs.
    own: HashMap<String, Option<RunRecord>>,
    /// The ancestry of the run's branch, walked as far as its commits needed.
    branch_walk: branch::BranchWalk,
    /// The analysis thread's connection to the index, kept for the next commit's: opening one
    /// (its schema read) cost more than the analysis of a one-file commit.
    analysis_index: std::sync::Mutex<Option<gs_store::Index>>,
}

impl Along {
    /// Read the index's rows of `next` (the commits about to run) unless the first is read.
    fn read_ahead(&mut self, ctx: &Context, row: &RepoRow, next: &[ObjectId]) -> Result<()> {
        let Some(first) = next.first() else {
            return Ok(());
        };
        if self.own.contains_key(&first.to_string()) {
            return Ok(());
        }
        let ids: Vec<String> = next.iter().take(BATCH).map(|c| c.to_string()).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut found = ctx.index.runs_for_commits(&row.repository_id, &refs)?;
        for id in ids {
            let run = found.remove(&id).map(|r| r.record);
            self.own.insert(id, run);
        }
        Ok(())
    }
}

/// The index's record of `commit`: read ahead (and taken from `own`), else asked for now.
fn own_row(
    ctx: &Context,
    row: &RepoRow,
    own: &mut HashMap<String, Option<RunRecord>>,
    commit: &str,
) -> Result<Option<RunRecord>> {
    match own.remove(commit) {
        Some(run) => Ok(run),
        None => Ok(ctx
            .index
            .run_for_commit(&row.repository_id, commit)?
            .map(|run| run.record)),
    }
}

/// How long a tree's config is taken from [`Along::configs`] rather than read again.
const CONFIG_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a commit's record came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Its own result, with its note in place: nothing to write.
    Recorded,
    /// Its own result from the index, whose note is gone or unreadable: written again.
    Indexed,
    /// Made now (or taken from the tree cache): to be written.
    Made,
}

/// Start checking the kept checkout this process's first run will likely use, on another
/// thread, while the commits are chosen (see `gs_runner::rundir::check_ahead`).
pub fn check_ahead(ctx: &Context, repo: &gs_git::Repository) {
    let scratch = gs_git::checkout::scratch_root();
    let home_id = crate::app::home::home_id(&ctx.paths.home);
    gs_runner::rundir::check_ahead(repo, &scratch, &home_id);
}

pub fn run_commits(
    at: Repo<'_>,
    commits: &[ObjectId],
    opts: &RunOptions<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome> {
    let Repo { ctx, repo, row } = at;
    let mut along = Along {
        reader: NoteReader::new(repo)?,
        sandbox: std::cell::OnceCell::new(),
        seen: SeenTrees::new(),
        flaky: None,
        configs: HashMap::new(),
        own: HashMap::new(),
        branch_walk: branch::BranchWalk::default(),
        analysis_index: std::sync::Mutex::new(None),
    };
    let trial = opts.is_trial();
    let mut records = Vec::with_capacity(commits.len());
    // Records waiting for their batch to be written, in order, with whether they were reused.
    let mut waiting: Vec<(usize, RunRecord, bool)> = Vec::new();
    let mut to_write: Vec<RunRecord> = Vec::new();
    let mut written: Vec<RunRecord> = Vec::new();
    let mut batch_started = Instant::now();
    let mut interrupted = false;
    let mut ran = 0;
    let mut pending = attempt::Pending::default();
    let mut kept_attempts = Vec::new();
    let mut flush = |waiting: &mut Vec<(usize, RunRecord, bool)>,
                     to_write: &mut Vec<RunRecord>,
                     records: &mut Vec<RunRecord>,
                     pending: &mut attempt::Pending,
                     progress: &mut dyn FnMut(Progress<'_>)|
     -> Result<()> {
        // Results first: a note reaches git even while the index is away.
        if opts.unnoted {
            results::index_only(ctx, row, to_write)?;
        } else {
            results::write(at, to_write)?;
        }
        kept_attempts.extend(pending.keep(ctx, row)?);
        written.append(to_write);
        for (index, record, reused) in waiting.drain(..) {
            progress(Progress::Finished {
                index,
                record: &record,
                reused,
            });
            records.push(record);
        }
        Ok(())
    };
    for (index, &commit) in commits.iter().enumerate() {
        if opts.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        progress(Progress::Started { index, commit });
        if !opts.force {
            along.read_ahead(ctx, row, &commits[index..])?;
        }
        let info = git::commit_info(repo, commit)?;
        let (mut record, mut source) = run_one(at, &info, opts, &mut along)?;
        if !trial && record.status == Status::Failed {
            (record, source) = flaky::retry_flaky(at, &info, opts, &mut along, record, source)?;
        }
        // What this machine made, it vouches for (and signs when it writes the note).
        if source == Source::Made {
            results::stamp(ctx, &mut record)?;
        }
        // A run cut short by Ctrl-C or a stopping daemon is no result: it runs again later.
        if was_interrupted(&record) {
            interrupted = true;
            break;
        }
        if !trial && source == Source::Made {
            (record, source) = pending.instead(ctx, repo, row, &info, record, &mut along)?;
        }
        let reused = source != Source::Made;
        if trial {
            progress(Progress::Finished {
                index,
                record: &record,
                reused,
            });
            records.push(record);
            continue;
        }
        if source != Source::Recorded {
            if to_write.is_empty() {
                batch_started = Instant::now();
            }
            to_write.push(record.clone());
        }
        let made = source == Source::Made
            && record.cached_from.is_none()
            && record.status != Status::Skipped;
        ran += made as usize;
        if made && record.status.is_result() {
            pending.ended.push(record.commit.clone());
        }
        // What later commits of the same tree and config are served from, as the index would.
        if let (true, Some(key)) = (made && results::first_hand(&record), &record.config_hash) {
            let mut served = record.clone();
            served.cached_from = Some(record.commit.clone());
            along.seen.insert((info.tree, key.clone()), served);
        }
        waiting.push((index, record, reused));
        if made && opts.yield_after_run {
            break;
        }
        if to_write.is_empty()
            || to_write.len() >= BATCH
            || batch_started.elapsed().as_millis() > BATCH_AGE_MS
        {
            flush(
                &mut waiting,
                &mut to_write,
                &mut records,
                &mut pending,
                progress,
            )?;
        }
    }
    flush(
        &mut waiting,
        &mut to_write,
        &mut records,
        &mut pending,
        progress,
    )?;
    // A writer that does not compare-and-swap (plain `git notes add`) may have dropped what we
    // wrote: put it back before reporting success.
    let mut restored = 0;
    for _ in 0..3 * usize::from(!opts.unnoted) {
        let n = results::rewrite_missing(at, &written, false)?;
        restored += n;
        if n == 0 {
            break;
        }
    }
    if interrupted || opts.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
        interrupted = true;
    }
    Ok(Outcome {
        records,
        interrupted,
        invalid_notes: along.reader.invalid,
        restored,
        ran,
        attempts: kept_attempts,
    })
}

/// Whether a check of the run was cut short by Ctrl-C or a stopping daemon.
fn was_interrupted(r: &RunRecord) -> bool {
    r.tests
        .iter()
        .chain(r.checks.iter().map(|(_, c)| &c.run))
        .any(|t| t.killed_by == Some(gs_model::KilledBy::Interrupt))
}
