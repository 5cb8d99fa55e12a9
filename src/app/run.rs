//! Running the experiment for commits: config from the commit, the cache by tree + config,
//! a throw-away checkout, tests and analysis side by side, change stats, then the record as a
//! note (batched, compare-and-swap) and in the index, with events.

pub mod analyze;
pub mod cargo_selection;
pub mod checks;
pub mod commit_config;
pub mod commits;
pub mod exec;
pub mod experiment_meta;
pub mod explain;
pub mod failures;
pub mod go_selection;
pub mod jsselect;
pub mod logs;
pub mod metrics;
pub mod results;
pub mod selection;
pub mod setup;
pub mod summary;
pub mod testcov;
pub mod views;

use crate::app::run::commit_config::{cache_dirs, config_for, experiment_of};
use crate::app::run::results::NoteReader;
use crate::app::{AppError, Context, Result};
use crate::config::Config;
use crate::git::{self, checkout, CommitInfo};
use crate::model::EventKind;
use crate::model::{RunRecord, Status, RUN_SCHEMA};
use crate::runner::{self, caches, workspace};
use crate::store::RepoRow;
use crate::util::time;
use gix::ObjectId;
use std::collections::HashMap;
use std::time::Instant;

mod attempt;
mod branch;
mod flaky;
mod options;
mod parallel;
mod reports;

use branch::run_of;
use reports::{coverage_of, COVERAGE_REPORTS, JUNIT_DIRS};

pub use options::{FirstFailure, Outcome, Progress, RunOptions};
pub use parallel::run_commits_parallel;

/// Results are written as notes in batches of this many (or sooner when a batch gets old), so a
/// range costs few notes commits (and packs) yet a kill loses little.
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
    sandbox: std::cell::OnceCell<runner::Sandbox>,
    seen: SeenTrees,
    /// The repository's known-flaky tests, read when a failure may be retried.
    flaky: Option<std::collections::HashSet<String>>,
    /// The config (and its result key) of the trees just seen: a commit's config follows from
    /// its tree and the run's options, so a batch of commits on one tree reads it once. Kept for
    /// [`CONFIG_FOR`], since the toolchain's fingerprint is part of it.
    configs: HashMap<ObjectId, (Instant, Config, String)>,
    /// The index's rows of the commits about to run, read [`BATCH`] commits at a time (one
    /// query, not one per commit); each taken once, when its commit runs.
    own: HashMap<String, Option<RunRecord>>,
    /// The ancestry of the run's branch, walked as far as its commits needed.
    branch_walk: branch::BranchWalk,
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

pub fn run_commits(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commits: &[ObjectId],
    opts: &RunOptions<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome> {
    let mut along = Along {
        reader: NoteReader::new(repo)?,
        sandbox: std::cell::OnceCell::new(),
        seen: SeenTrees::new(),
        flaky: None,
        configs: HashMap::new(),
        own: HashMap::new(),
        branch_walk: branch::BranchWalk::default(),
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
            results::write(ctx, repo, row, to_write)?;
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
        let (mut record, mut source) = run_one(ctx, repo, row, &info, opts, &mut along)?;
        if opts.retry_flaky > 0 && !trial && record.status == Status::Failed {
            (record, source) =
                flaky::retry_flaky(ctx, repo, row, &info, opts, &mut along, record, source)?;
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
        let n = results::rewrite_missing(ctx, repo, row, &written, false)?;
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

fn base_record(info: &CommitInfo, opts: &RunOptions<'_>, started: i64) -> RunRecord {
    RunRecord {
        schema: RUN_SCHEMA.into(),
        commit: info.id.to_string(),
        tree: info.tree.to_string(),
        parents: info.parents.iter().map(|p| p.to_string()).collect(),
        refname: opts.refname.clone(),
        experiment: experiment_of(opts.refname.as_deref()),
        trigger: opts.trigger,
        status: Status::Passed,
        started_at: time::rfc3339(started),
        finished_at: time::rfc3339(started),
        duration_ms: 0,
        cached_from: None,
        error: None,
        config_hash: None,
        superseded_by: None,
        cache_generations: Vec::new(),
        retried: None,
        toolchain: Default::default(),
        coverage: None,
        checks: Default::default(),
        tests: None,
        analysis: None,
        changes: None,
        warnings: Vec::new(),
        snapshot: opts.unnoted,
        by: None,
        verified: None,
    }
}

fn finish(mut r: RunRecord, started: i64) -> RunRecord {
    let now = time::now_millis();
    r.finished_at = time::rfc3339(now);
    r.duration_ms = (now - started).max(0) as u64;
    r
}

/// The record of one commit and where it came from.
fn run_one(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    info: &CommitInfo,
    opts: &RunOptions<'_>,
    along: &mut Along,
) -> Result<(RunRecord, Source)> {
    let Along {
        reader,
        sandbox,
        seen,
        configs,
        own: own_rows,
        branch_walk,
        ..
    } = along;
    let started = time::now_millis();
    let mut record = base_record(info, opts, started);
    let experiment = experiment_of(opts.refname.as_deref());
    let (config, key) = match configs.get(&info.tree) {
        Some((at, config, key)) if at.elapsed() < CONFIG_FOR => (config.clone(), key.clone()),
        _ => match config_for(ctx, repo, info, experiment.as_deref(), &opts.flags) {
            Ok(config) => {
                let key = config.result_key();
                configs.insert(info.tree, (Instant::now(), config.clone(), key.clone()));
                (config, key)
            }
            Err(e @ (AppError::Config(_) | AppError::Usage(_))) => {
                record.status = Status::Error;
                record.error = Some(e.to_string());
                record.changes = git::diff::commit_changes(repo, info).ok();
                return Ok((finish(record, started), Source::Made));
            }
            Err(e) => return Err(e),
        },
    };
    record.config_hash = Some(key.clone());
    record.toolchain = config.toolchain.clone();
    if !opts.force {
        // The commit's own result: its note, else the index (a deleted index, a crash between
        // writing the note and indexing it, a note a non-CAS writer dropped).
        let (noted, own) = match reader.read(ctx, repo, info.id)? {
            Some(crate::model::NoteRecord::Found(r)) => (Some(*r.clone()), Some(*r)),
            // A note that holds no record for this commit: not run. The index follows the
            // note, and the new result replaces it.
            Some(_) => {
                own_rows.remove(&record.commit);
                ctx.index.delete_run(&row.repository_id, &record.commit)?;
                (None, None)
            }
            None => (None, own_row(ctx, row, own_rows, &record.commit)?),
        };
        if let Some(r) = own.filter(|r| results::usable(r, info, &key)) {
            let source = if noted.as_ref() == Some(&r) {
                if own_row(ctx, row, own_rows, &r.commit)?.is_none() {
                    ctx.index.put_run(&row.repository_id, &r)?;
                }
                Source::Recorded
            } else if results::signed_here(ctx, &r)? {
                Source::Indexed
            } else {
                // Another machine's evidence whose note is not here: this machine signs only
                // what it made, so its note comes back with the next fetch.
                Source::Recorded
            };
            return Ok((r, source));
        }
        let hit = seen
            .get(&(info.tree, key.clone()))
            .filter(|r| r.cached_from.as_deref() != Some(record.commit.as_str()))
            .map(|r| RunRecord {
                commit: record.commit.clone(),
                parents: record.parents.clone(),
                ..r.clone()
            })
            .or_else(|| results::tree_hit(ctx, row, info, &key));
        if let Some(mut r) = hit {
            seen.insert((info.tree, key.clone()), r.clone());
            r.refname = record.refname;
            r.experiment = record.experiment;
            r.trigger = record.trigger;
            r.snapshot = record.snapshot;
            r.started_at = record.started_at;
            r.changes = git::diff::commit_changes(repo, info).ok();
            return Ok((finish(r, started), Source::Made));
        }
    }

    if opts.skip_superseded && config.watch.mode == "latest" {
        if let Some(tip) = superseded(repo, opts.refname.as_deref(), info.id) {
            record.status = Status::Skipped;
            record.superseded_by = Some(tip.to_string());
            record.changes = git::diff::commit_changes(repo, info).ok();
            return Ok((finish(record, started), Source::Made));
        }
    }
    // An experiment that has spent its CPU budget runs nothing more until it is raised.
    if let Some(name) = experiment.as_deref().filter(|_| !opts.is_trial()) {
        // The index keeps the budget (set when it was started, by `experiment budget`, or from
        // its metadata): read there, not through the experiment area above this one.
        let budget = ctx.index.experiment(&row.repository_id, name)?;
        if let Some(limit) = budget.and_then(|e| e.budget_ms) {
            let spent = ctx.index.experiment_cpu_ms(&row.repository_id, name)?;
            if spent >= limit {
                record.status = Status::Skipped;
                record.error = Some(format!(
                    "experiment {name} has spent its CPU budget ({} of {}); raise it with `git sandbox experiment budget {name} DURATION`",
                    crate::util::time::duration_text(spent),
                    crate::util::time::duration_text(limit)
                ));
                record.changes = git::diff::commit_changes(repo, info).ok();
                return Ok((finish(record, started), Source::Made));
            }
        }
    }
    let event = |kind: EventKind, data: serde_json::Value| {
        let _ = ctx.index.add_event(
            kind,
            Some(&row.repository_id),
            None,
            Some(&record.commit),
            &data,
        );
    };
    event(
        EventKind::RunStarted,
        serde_json::json!({"trigger": opts.trigger, "trial": opts.is_trial()}),
    );
    // The first commit that runs starts the fork server (a range of cached results needs none).
    let sandbox = sandbox.get_or_init(|| {
        let s = ctx.sandbox();
        s.warm();
        s
    });
    let scratch = checkout::scratch_root();
    let home_id = super::home::home_id(&ctx.paths.home);
    let cache_home = ctx.paths.caches();
    let dirs = cache_dirs(&config, repo, info);
    let branch = opts
        .refname
        .as_deref()
        .and_then(|r| r.strip_prefix("refs/heads/"));
    let cache_use = config.cache.enabled.then(|| caches::CacheUse {
        home: &cache_home,
        branch,
        read: !opts.clean,
        writes: caches::writes(run_of(opts, repo, branch_walk, info.id)),
        production: &config.promote.target,
        dirs: &dirs,
        max_mb: config.cache.max_mb,
    });
    let prepare = |overlay: bool| {
        workspace::prepare(
            repo,
            info.tree,
            &workspace::Options {
                scratch: &scratch,
                home_id: &home_id,
                data_dir: &ctx.paths.home,
                overlay,
                ceiling: config.limits.checkout_bytes(),
                interrupt: opts.interrupt,
                cache: cache_use,
            },
        )
    };
    let prepared = |overlay: bool| {
        let _t = crate::util::trace::span("workspace");
        let work = prepare(overlay)?;
        event(
            EventKind::CheckoutCompleted,
            serde_json::json!({"files": work.files, "kept": work.lower().is_some(), "how": format!("{:?}", work.prepared).to_lowercase(), "ms": time::now_millis() - started}),
        );
        Ok::<_, git::GitError>(work)
    };
    let mut work = match prepared(sandbox.overlay) {
        Ok(w) => w,
        Err(e) => {
            record.status = Status::Error;
            record.error = Some(format!("checkout failed: {e}"));
            return Ok((finish(record, started), Source::Made));
        }
    };
    let logs = ctx.paths.logs().join(&row.repository_id);
    let setup_log = logs.join(if opts.is_trial() {
        format!("{}.trial.setup.log", record.commit)
    } else {
        format!("{}.setup.log", record.commit)
    });
    let setup_of = |work: &mut workspace::Workspace| {
        setup::prepare(
            &config,
            repo,
            info.tree,
            work,
            cache_use.as_ref(),
            sandbox,
            setup::SetupOutput::Log(&setup_log),
            opts.interrupt,
        )
    };
    let mut ready = setup_of(&mut work);
    if let Err(setup::SetupError::Untrusted) = ready {
        // The kept checkout was altered outside git-sandbox: it is checked out afresh.
        work.release();
        work = match prepared(sandbox.overlay) {
            Ok(w) => w,
            Err(e) => {
                record.status = Status::Error;
                record.error = Some(format!("checkout failed: {e}"));
                return Ok((finish(record, started), Source::Made));
            }
        };
        ready = setup_of(&mut work);
    }
    let setup = match ready {
        Ok(s) => s,
        Err(e) => {
            record.status = Status::Error;
            record.error = Some(match e {
                setup::SetupError::Failed(why) => why,
                setup::SetupError::Untrusted => {
                    "the kept checkout could not be trusted twice in a row; run again".into()
                }
            });
            return Ok((finish(record, started), Source::Made));
        }
    };
    if let Some(s) = &setup {
        event(EventKind::SetupCompleted, serde_json::json!(s.record()));
    }
    let selection = if config.test.phases {
        let _t = crate::util::trace::span("selection");
        crate::app::run::selection::select(ctx, repo, row, info, &config).ok()
    } else {
        None
    };
    let phase_one = selection.as_ref().and_then(|s| s.phase_one());
    let phase_two = selection.as_ref().map(|s| s.rest.clone());
    let on_first_failure = |test: &str, ms: u64| {
        event(
            EventKind::RunFirstFailure,
            serde_json::json!({"test": test, "ms": ms}),
        );
        if let Some(tell) = opts.on_first_failure {
            tell(&record.commit, test, ms);
        }
    };
    let index_path = ctx.index.path().to_path_buf();
    let (mut ran, analysis) = std::thread::scope(|s| {
        let analysis = config.analysis.enabled.then(|| {
            let repo = repo.clone();
            let cfg = config.analysis.clone();
            let (tree, parent) = (info.tree, info.parents.first().copied());
            let index_path = index_path.clone();
            s.spawn(move || -> Result<(analyze::CommitAnalysis, i64)> {
                let started = time::now_millis();
                let index = crate::store::Index::open_file(&index_path)?;
                let a = analyze::analyze_commit(&index, &repo, tree, parent, &cfg)?;
                Ok((a, time::now_millis() - started))
            })
        });
        event(EventKind::TestStarted, serde_json::json!({}));
        let on_done = |name: &str, c: &checks::CheckResult| {
            let exit_code = c.tests.as_ref().and_then(|t| t.exit_code);
            if name == crate::config::TEST_CHECK {
                event(
                    EventKind::TestCompleted,
                    serde_json::json!({"status": c.status, "exit_code": exit_code}),
                );
            } else {
                event(
                    EventKind::CheckCompleted,
                    serde_json::json!({"check": name, "status": c.status, "exit_code": exit_code}),
                );
            }
        };
        // A report the commit holds, or one the build cache keeps from an earlier run, is not
        // this run's evidence: those places are not looked in.
        let stale = |p: &str| {
            git::path_in_tree(repo, info.tree, p)
                || dirs
                    .iter()
                    .any(|d| p == d || p.starts_with(&format!("{d}/")))
        };
        let coverage_candidates: Vec<String> = COVERAGE_REPORTS
            .iter()
            .filter(|p| !stale(p))
            .map(|p| p.to_string())
            .collect();
        let junit_candidates: Vec<String> = JUNIT_DIRS
            .iter()
            .filter(|d| !stale(d))
            .map(|d| format!("{d}/*.xml"))
            .chain(
                config
                    .test
                    .command
                    .as_deref()
                    .and_then(checks::ctest_report)
                    .filter(|p| !stale(p)),
            )
            .collect();
        let env = checks::Env {
            coverage_candidates: &coverage_candidates,
            junit_candidates: &junit_candidates,
            ctx,
            config: &config,
            sandbox,
            interrupt: opts.interrupt,
            logs: &logs,
            commit: &record.commit,
            trial: opts.is_trial(),
            on_done: &on_done,
            phase_one: phase_one.as_deref(),
            phase_two: phase_two.as_deref(),
            on_first_failure: &on_first_failure,
        };
        let mut ran = checks::run_all(&env, &work, setup.as_ref());
        if !work.confirm() {
            // The kept checkout turned out to have been altered outside git-sandbox: what the
            // checks saw was not the commit's tree. It is checked out afresh; run again.
            work.release();
            match prepared(sandbox.overlay) {
                Ok(mut again) => {
                    if let Some(s) = &setup {
                        s.lay_under(&mut again);
                    }
                    work = again;
                    ran = checks::run_all(&env, &work, setup.as_ref());
                }
                Err(e) => {
                    ran = checks::Ran {
                        test: checks::CheckResult::failed_checkout(format!("checkout failed: {e}")),
                        others: Vec::new(),
                    }
                }
            }
        }
        if ran.overlay_failed() && work.lower().is_some() {
            // The kept checkout was only bound read-only: run again in a fresh one, with the
            // setup step (if any) run just before each check.
            if let Ok(fresh) = prepare(false) {
                work = fresh;
                let inline = setup
                    .as_ref()
                    .map(|s| setup::Setup::inline(s.record(), &config));
                ran = checks::run_all(&env, &work, inline.as_ref());
            }
        }
        let analysis = analysis.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(AppError::usage("analysis crashed")))
        });
        let analysis = analysis.map(|r| {
            r.map(|(a, ms)| {
                event(
                    EventKind::AnalysisCompleted,
                    serde_json::json!({"files": a.analysis.files_analyzed, "functions": a.analysis.functions_found,
                        "how": a.how, "files_read": a.files, "files_parsed": a.parsed, "ms": ms}),
                );
                a.analysis
            })
        });
        (ran, analysis)
    });
    record.cache_generations = std::mem::take(&mut work.cache_generations);
    drop(work);
    record.status = ran.status();
    record.error = ran.error();
    record.warnings = ran.warnings();
    record.checks = ran.checks();
    let coverage = ran
        .coverage()
        .map(|(check, report, r)| (check.to_string(), report.to_string(), r.clone()));
    if let Some(data) = ran.test.contexts.take().filter(|_| !opts.is_trial()) {
        crate::app::run::testcov::keep(&ctx.paths.home, &row.repository_id, &record.commit, &data);
    }
    record.tests = ran.test.tests;
    record.analysis = match analysis {
        Some(Ok(a)) => Some(a),
        Some(Err(e)) => {
            record.error.get_or_insert(format!("analysis failed: {e}"));
            None
        }
        None => None,
    };
    record.changes = Some(git::diff::commit_changes(repo, info)?);
    record.coverage = coverage
        .map(|(check, report, r)| coverage_of(&check, &report, &r, record.changes.as_ref()));
    Ok((finish(record, started), Source::Made))
}

/// Whether a check of the run was cut short by Ctrl-C or a stopping daemon.
fn was_interrupted(r: &RunRecord) -> bool {
    r.tests
        .iter()
        .chain(r.checks.iter().map(|(_, c)| &c.run))
        .any(|t| t.killed_by.as_deref() == Some("interrupt"))
}

/// The commit `refname` points at now, when it is not `commit`: the branch moved past it.
fn superseded(repo: &gix::Repository, refname: Option<&str>, commit: ObjectId) -> Option<ObjectId> {
    let mut r = repo.find_reference(refname?).ok()?;
    let tip = r.peel_to_id().ok()?.detach();
    (tip != commit).then_some(tip)
}
