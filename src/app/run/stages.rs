//! One commit's run as a sequence of stages: its config, an earlier result, the gates that skip
//! it, the checkout, the setup step, the checks beside the analysis, and the record. Each stage
//! either goes on or ends the run early; [`run_one`] is the one exit, where every record made
//! now gets its changes and its end time.

use super::branch::{run_of, BranchWalk};
use super::reports::{coverage_of, COVERAGE_REPORTS, JUNIT_DIRS};
use super::{checks, setup, Along, RunOptions, SeenTrees, Source, CONFIG_FOR};
use crate::app::analysis::analyze;
use crate::app::config::commit_config::{cache_dirs, config_for, experiment_of};
use crate::app::config::image;
use crate::app::records::results::{self, NoteReader};
use crate::app::{AppError, Context, Repo, Result};
use gs_config::Config;
use gs_git as git;
use gs_git::ObjectId;
use gs_git::{checkout, CommitInfo};
use gs_model::{Analysis, EventKind, RunRecord, Status, RUN_SCHEMA};
use gs_runner::{caches, rundir};
use gs_store::RepoRow;
use gs_util::time;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a stage hands on: the next stage's input, or the end of the commit's run.
enum Step<T> {
    Next(T),
    End(End),
}

/// How a commit's run ended; its record is the one the stages filled.
enum End {
    /// Its own earlier result, taken as it is (its times are those of the run that made it).
    Reused(Source),
    /// A record made now. `diff`: its changes are still to be read (an early end; a checkout or
    /// setup that failed leaves them out, and a run that went through has read them already).
    Made { diff: bool },
}

/// The input of the next stage, or the run ends here.
macro_rules! next {
    ($step:expr) => {
        match $step {
            Step::Next(v) => v,
            Step::End(end) => return Ok(end),
        }
    };
}

/// The commit being run, as every stage sees it.
struct Commit<'a> {
    ctx: &'a Context,
    repo: &'a gs_git::Repository,
    row: &'a RepoRow,
    info: &'a CommitInfo,
    opts: &'a RunOptions<'a>,
    experiment: Option<String>,
    started: i64,
}

/// The record of one commit and where it came from.
pub(super) fn run_one(
    at: Repo<'_>,
    info: &CommitInfo,
    opts: &RunOptions<'_>,
    along: &mut Along,
) -> Result<(RunRecord, Source)> {
    let Repo { ctx, repo, row } = at;
    let c = Commit {
        ctx,
        repo,
        row,
        info,
        opts,
        experiment: experiment_of(opts.refname.as_deref()),
        started: time::now_millis(),
    };
    let mut record = base_record(info, opts, c.started);
    match stages(&c, along, &mut record)? {
        End::Reused(source) => Ok((record, source)),
        End::Made { diff } => {
            if diff {
                record.changes = git::diff::commit_changes(repo, info).ok();
            }
            let now = time::now_millis();
            record.finished_at = time::rfc3339(now);
            record.duration_ms = (now - c.started).max(0) as u64;
            Ok((record, Source::Made))
        }
    }
}

/// The stages, in order, until one ends the run.
fn stages(c: &Commit<'_>, along: &mut Along, record: &mut RunRecord) -> Result<End> {
    let Along {
        reader,
        sandbox,
        seen,
        configs,
        own,
        branch_walk,
        analysis_index,
        ..
    } = along;
    let (config, key, image) = next!(config(c, configs, branch_walk, record)?);
    next!(earlier(c, reader, own, seen, &key, record)?);
    next!(gates(c, &config, record)?);
    c.event(
        EventKind::RunStarted,
        serde_json::json!({"trigger": c.opts.trigger, "trial": c.opts.is_trial()}),
    );
    // The first commit that runs starts the fork server (a range of cached results needs none).
    let sandbox = sandbox.get_or_init(|| {
        let s = c.ctx.sandbox();
        s.warm();
        s
    });
    // In an image, the commit's runs have it as their root.
    let in_image;
    let sandbox = match image {
        Some(i) => {
            in_image = gs_sandbox::Sandbox {
                image: Some(i.root),
                ..sandbox.clone()
            };
            &in_image
        }
        None => sandbox,
    };
    let scratch = checkout::scratch_root();
    let home_id = crate::app::home::home_id(&c.ctx.paths.home);
    let cache_home = c.ctx.paths.caches();
    let dirs = cache_dirs(&config, c.repo, c.info);
    let home_dirs = crate::app::config::commit_config::home_caches(c.repo, c.info);
    let branch = c
        .opts
        .refname
        .as_deref()
        .and_then(|r| r.strip_prefix("refs/heads/"));
    let cache = config.cache.enabled.then(|| caches::CacheUse {
        home: &cache_home,
        branch,
        read: !c.opts.clean,
        writes: caches::writes(run_of(c.opts, c.repo, branch_walk, c.info.id)),
        production: &config.promote.target,
        dirs: &dirs,
        home_dirs: &home_dirs,
        max_mb: config.cache.max_mb,
        variant: image::cache_variant(&config),
    });
    let logs = c.ctx.paths.logs().join(&c.row.repository_id);
    let bench = Bench {
        c,
        config: &config,
        sandbox,
        scratch: &scratch,
        home_id: &home_id,
        cache,
        analysis_index,
        setup_log: logs.join(if c.opts.is_trial() {
            format!("{}.trial.setup.log", c.info.id)
        } else {
            format!("{}.setup.log", c.info.id)
        }),
        logs,
    };
    let mut work = next!(bench.checkout(record));
    let setup = next!(bench.setup(&mut work, record));
    let (ran, analysis, changes) = bench.checks(work, setup, record);
    keep(c, ran, analysis, changes, record)?;
    Ok(End::Made { diff: false })
}

/// Stage 1: the commit's config and its result key, taken from its tree's when that was read
/// within [`CONFIG_FOR`], and its image, pulled (a tag resolved anew: its digest is part of the
/// key). A config that cannot be read, or an image that cannot be had, ends the run as an error.
fn config(
    c: &Commit<'_>,
    configs: &mut HashMap<ObjectId, (Instant, Config, String)>,
    branch_walk: &mut BranchWalk,
    record: &mut RunRecord,
) -> Result<Step<(Config, String, Option<image::ForRun>)>> {
    let (config, key) = match configs.get(&c.info.tree) {
        Some((at, config, key)) if at.elapsed() < CONFIG_FOR => (config.clone(), key.clone()),
        _ => match config_for(
            c.ctx,
            c.repo,
            c.info,
            c.experiment.as_deref(),
            &c.opts.flags,
        ) {
            Ok(config) => {
                let key = config.result_key();
                configs.insert(c.info.tree, (Instant::now(), config.clone(), key.clone()));
                (config, key)
            }
            Err(e @ (AppError::Config(_) | AppError::Usage(_))) => {
                record.status = Status::Error;
                record.error = Some(e.to_string());
                return Ok(Step::End(End::Made { diff: true }));
            }
            Err(e) => return Err(e),
        },
    };
    let (mut config, mut key) = (config, key);
    // A Dockerfile's steps with the network are kept by the build caches' rule: whether this
    // run may write its branch's is asked only then (it walks the branch; a range of results
    // already made needs no walk).
    let branch = c
        .opts
        .refname
        .as_deref()
        .and_then(|r| r.strip_prefix("refs/heads/"));
    let networked_build = config.environment.dockerfile.is_some() && config.limits.setup_network;
    let scope = crate::app::config::build::Scope {
        branch,
        production: &config.promote.target,
        writes: networked_build && caches::writes(run_of(c.opts, c.repo, branch_walk, c.info.id)),
        read: !c.opts.clean,
    };
    let image = match image::for_run(c.ctx, c.repo, c.info, &config, &scope) {
        Ok(Some(i)) => {
            config.toolchain = i.toolchain.clone();
            key = config.result_key();
            record.environment = Some(i.environment.clone());
            configs.insert(c.info.tree, (Instant::now(), config.clone(), key.clone()));
            Some(i)
        }
        Ok(None) => None,
        Err(e @ (AppError::Refused(_) | AppError::Usage(_))) => {
            record.status = Status::Error;
            record.error = Some(e.to_string());
            record.config_hash = Some(key);
            record.toolchain = config.toolchain.clone();
            return Ok(Step::End(End::Made { diff: true }));
        }
        Err(e) => return Err(e),
    };
    record.config_hash = Some(key.clone());
    record.toolchain = config.toolchain.clone();
    Ok(Step::Next((config, key, image)))
}

/// Stage 2 (not with `--force`): the commit's own result (its note, else the index: a deleted
/// index, a crash between writing the note and indexing it, a note a non-CAS writer dropped),
/// else the result of its tree under the same config, either of which ends the run.
fn earlier(
    c: &Commit<'_>,
    reader: &mut NoteReader,
    own_rows: &mut HashMap<String, Option<RunRecord>>,
    seen: &mut SeenTrees,
    key: &str,
    record: &mut RunRecord,
) -> Result<Step<()>> {
    if c.opts.force {
        return Ok(Step::Next(()));
    }
    let (ctx, repo, row, info) = (c.ctx, c.repo, c.row, c.info);
    let (noted, own) = match reader.read(ctx, repo, info.id)? {
        Some(gs_model::NoteRecord::Found(r)) => (Some(*r.clone()), Some(*r)),
        // A note that holds no record for this commit: not run. The index follows the note, and
        // the new result replaces it.
        Some(_) => {
            own_rows.remove(&record.commit);
            ctx.index.delete_run(&row.repository_id, &record.commit)?;
            (None, None)
        }
        None => (None, super::own_row(ctx, row, own_rows, &record.commit)?),
    };
    if let Some(r) = own.filter(|r| results::usable(r, info, key)) {
        let source = if noted.as_ref() == Some(&r) {
            if super::own_row(ctx, row, own_rows, &r.commit)?.is_none() {
                ctx.index.put_run(&row.repository_id, &r)?;
            }
            Source::Recorded
        } else if results::signed_here(ctx, &r)? {
            Source::Indexed
        } else {
            // Another machine's evidence whose note is not here: this machine signs only what
            // it made, so its note comes back with the next fetch.
            Source::Recorded
        };
        *record = r;
        return Ok(Step::End(End::Reused(source)));
    }
    let seen_key = (info.tree, key.to_string());
    let hit = seen
        .get(&seen_key)
        .filter(|r| r.cached_from.as_deref() != Some(record.commit.as_str()))
        .map(|r| RunRecord {
            commit: record.commit.clone(),
            parents: record.parents.clone(),
            ..r.clone()
        })
        .or_else(|| results::tree_hit(Repo::new(ctx, c.repo, row), info, key));
    let Some(mut r) = hit else {
        return Ok(Step::Next(()));
    };
    seen.insert(seen_key, r.clone());
    r.refname = record.refname.take();
    r.experiment = record.experiment.take();
    r.trigger = record.trigger;
    r.snapshot = record.snapshot;
    r.started_at = std::mem::take(&mut record.started_at);
    *record = r;
    Ok(Step::End(End::Made { diff: true }))
}

/// Stage 3: what skips the commit before anything runs: its branch moved past it (`[watch] mode
/// = "latest"`, the daemon's jobs), or its experiment has spent its CPU budget.
fn gates(c: &Commit<'_>, config: &Config, record: &mut RunRecord) -> Result<Step<()>> {
    if c.opts.skip_superseded && config.watch.mode == "latest" {
        if let Some(tip) = superseded(c.repo, c.opts.refname.as_deref(), c.info.id) {
            record.status = Status::Skipped;
            record.superseded_by = Some(tip.to_string());
            return Ok(Step::End(End::Made { diff: true }));
        }
    }
    let Some(name) = c.experiment.as_deref().filter(|_| !c.opts.is_trial()) else {
        return Ok(Step::Next(()));
    };
    // The index keeps the budget (set when it was started, by `experiment budget`, or from its
    // metadata): read there, not through the experiment area above this one.
    let budget = c.ctx.index.experiment(&c.row.repository_id, name)?;
    if let Some(limit) = budget.and_then(|e| e.budget_ms) {
        let spent = c.ctx.index.experiment_cpu_ms(&c.row.repository_id, name)?;
        if spent >= limit {
            record.status = Status::Skipped;
            record.error = Some(format!(
                "experiment {name} has spent its CPU budget ({} of {}); raise it with `git sandbox experiment budget {name} DURATION`",
                time::duration_text(spent),
                time::duration_text(limit)
            ));
            return Ok(Step::End(End::Made { diff: true }));
        }
    }
    Ok(Step::Next(()))
}

impl Commit<'_> {
    /// Record an event of this commit's run (an index that is away loses it).
    fn event(&self, kind: EventKind, data: serde_json::Value) {
        let commit = self.info.id.to_string();
        let _ = self.ctx.index.add_event(
            kind,
            Some(&self.row.repository_id),
            None,
            Some(&commit),
            &data,
        );
    }
}

/// Where the commit runs: what the checkout, setup and checks stages share.
struct Bench<'b> {
    c: &'b Commit<'b>,
    config: &'b Config,
    sandbox: &'b gs_sandbox::Sandbox,
    scratch: &'b Path,
    home_id: &'b str,
    cache: Option<caches::CacheUse<'b>>,
    logs: PathBuf,
    setup_log: PathBuf,
    /// The analysis thread's index connection between commits (see `Along`).
    analysis_index: &'b std::sync::Mutex<Option<gs_store::Index>>,
}

impl Bench<'_> {
    /// A workspace for the commit's tree, in an overlay on a kept checkout when `overlay`.
    fn prepare(&self, overlay: bool) -> std::result::Result<rundir::RunDir, git::GitError> {
        rundir::prepare(
            self.c.repo,
            self.c.info.tree,
            &rundir::Options {
                scratch: self.scratch,
                home_id: self.home_id,
                data_dir: &self.c.ctx.paths.home,
                overlay,
                ceiling: self.config.limits.checkout_bytes(),
                interrupt: self.c.opts.interrupt,
                cache: self.cache,
            },
        )
    }

    /// [`Bench::prepare`] as the machine allows, told to the event log.
    fn prepared(&self) -> std::result::Result<rundir::RunDir, git::GitError> {
        let _t = gs_util::trace::span("run directory");
        let began = time::now_millis();
        let work = self.prepare(self.sandbox.overlay)?;
        self.c.event(
            EventKind::CheckoutCompleted,
            serde_json::json!({"files": work.files, "kept": work.lower().is_some(), "how": format!("{:?}", work.prepared).to_lowercase(), "ms": time::now_millis() - began}),
        );
        Ok(work)
    }

    /// Stage 4: the checkout. One that fails ends the run as an error.
    fn checkout(&self, record: &mut RunRecord) -> Step<rundir::RunDir> {
        match self.prepared() {
            Ok(w) => Step::Next(w),
            Err(e) => {
                record.status = Status::Error;
                record.error = Some(format!("checkout failed: {e}"));
                Step::End(End::Made { diff: false })
            }
        }
    }

    /// Stage 5: the setup step ready in `work` (`None`: the config has none). A kept checkout
    /// found altered outside git-sandbox is checked out afresh, once; a setup that fails ends the
    /// run as an error.
    fn setup(
        &self,
        work: &mut rundir::RunDir,
        record: &mut RunRecord,
    ) -> Step<Option<setup::Setup>> {
        let setup_of = |work: &mut rundir::RunDir| {
            setup::prepare(
                self.config,
                self.c.repo,
                self.c.info.tree,
                work,
                self.cache.as_ref(),
                self.sandbox,
                setup::SetupOutput::Log(&self.setup_log),
                self.c.opts.interrupt,
            )
        };
        let mut ready = setup_of(work);
        if let Err(setup::SetupError::Untrusted) = ready {
            work.release();
            *work = match self.checkout(record) {
                Step::Next(w) => w,
                Step::End(end) => return Step::End(end),
            };
            ready = setup_of(work);
        }
        match ready {
            Ok(setup) => {
                if let Some(s) = &setup {
                    self.c
                        .event(EventKind::SetupCompleted, serde_json::json!(s.record()));
                }
                Step::Next(setup)
            }
            Err(e) => {
                record.status = Status::Error;
                record.error = Some(match e {
                    setup::SetupError::Failed(why) => why,
                    setup::SetupError::Untrusted => {
                        "the kept checkout could not be trusted twice in a row; run again".into()
                    }
                });
                Step::End(End::Made { diff: false })
            }
        }
    }

    /// Stage 6: the checks (the tests with a probe beside them when they may) with the analysis beside them
    /// on a thread of its own. A kept checkout found altered, or an overlay that failed on it,
    /// runs them again in a fresh one. The workspace ends here; its cache generations stay.
    fn checks(
        &self,
        mut work: rundir::RunDir,
        setup: Option<setup::Setup>,
        record: &mut RunRecord,
    ) -> (
        checks::Ran,
        Option<Result<Analysis>>,
        Option<git::Result<gs_model::Changes>>,
    ) {
        let (c, config) = (self.c, self.config);
        let selection = if config.test.phases {
            let _t = gs_util::trace::span("selection");
            super::selection::select(Repo::new(c.ctx, c.repo, c.row), c.info, config).ok()
        } else {
            None
        };
        let phase_one = selection.as_ref().and_then(|s| s.phase_one());
        let parent_ids = || self.tests_of_parent();
        let flaky_on_record = || {
            let flaky = c.ctx.index.flaky_tests(&c.row.repository_id);
            flaky
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.name)
                .collect()
        };
        let commit = c.info.id.to_string();
        let on_first_failure = |test: &str, ms: u64| {
            c.event(
                EventKind::RunFirstFailure,
                serde_json::json!({"test": test, "ms": ms}),
            );
            if let Some(tell) = c.opts.on_first_failure {
                tell(&commit, test, ms);
            }
        };
        // A probe's hint the run's results did not confirm: said, so the log keeps no failure
        // the run did not have.
        let on_first_failure_withdrawn = |test: &str| {
            c.event(
                EventKind::RunFirstFailure,
                serde_json::json!({"test": test, "withdrawn": true}),
            );
        };
        let index_path = c.ctx.index.path().to_path_buf();
        let (ran, analysis, changes) = std::thread::scope(|s| {
            // The commit's changes for its record, read while the checks run (the other core
            // is mostly idle then) rather than after them.
            let changes = {
                let repo = c.repo.clone();
                let info = c.info;
                s.spawn(move || git::diff::commit_changes(&repo, info))
            };
            let analysis = config.analysis.enabled.then(|| {
                let repo = c.repo.clone();
                let cfg = config.analysis.clone();
                let (tree, parent) = (c.info.tree, c.info.parents.first().copied());
                let index_path = index_path.clone();
                let spare = self.analysis_index;
                s.spawn(move || -> Result<(analyze::CommitAnalysis, i64)> {
                    let started = time::now_millis();
                    let kept = spare.lock().ok().and_then(|mut k| k.take());
                    let index = match kept {
                        Some(index) => index,
                        None => gs_store::Index::open_file(&index_path)?,
                    };
                    let a = analyze::analyze_commit(&index, &repo, tree, parent, &cfg);
                    // A connection that failed is not trusted with the next commit.
                    if a.is_ok() {
                        if let Ok(mut k) = spare.lock() {
                            *k = Some(index);
                        }
                    }
                    Ok((a?, time::now_millis() - started))
                })
            });
            c.event(EventKind::TestStarted, serde_json::json!({}));
            let on_done = |name: &str, r: &checks::CheckResult| {
                let exit_code = r.tests.as_ref().and_then(|t| t.exit_code);
                if name == gs_config::TEST_CHECK {
                    c.event(
                        EventKind::TestCompleted,
                        serde_json::json!({"status": r.status, "exit_code": exit_code}),
                    );
                } else {
                    c.event(
                        EventKind::CheckCompleted,
                        serde_json::json!({"check": name, "status": r.status, "exit_code": exit_code}),
                    );
                }
            };
            let (coverage_candidates, junit_candidates) = self.report_candidates();
            let env = checks::Env {
                coverage_candidates: &coverage_candidates,
                junit_candidates: &junit_candidates,
                ctx: c.ctx,
                config,
                sandbox: self.sandbox,
                interrupt: c.opts.interrupt,
                logs: &self.logs,
                commit: &commit,
                trial: c.opts.is_trial(),
                on_done: &on_done,
                phase_one: phase_one.as_deref(),
                probe_first: selection.as_ref().map_or(&[][..], |s| &s.first),
                on_first_failure: &on_first_failure,
                on_first_failure_withdrawn: &on_first_failure_withdrawn,
                parent_ids: &parent_ids,
                retries: if c.opts.is_trial() {
                    0
                } else {
                    c.opts.retry_flaky.or(config.test.retries).unwrap_or(0)
                },
                flaky_on_record: &flaky_on_record,
            };
            let mut ran = checks::run_all(&env, &work, setup.as_ref());
            if !work.confirm() {
                // The kept checkout turned out to have been altered outside git-sandbox: what the
                // checks saw was not the commit's tree. It is checked out afresh; run again.
                work.release();
                match self.prepared() {
                    Ok(mut again) => {
                        if let Some(s) = &setup {
                            s.lay_under(&mut again);
                        }
                        work = again;
                        ran = checks::run_all(&env, &work, setup.as_ref());
                    }
                    Err(e) => {
                        ran = checks::Ran {
                            test: checks::CheckResult::failed_checkout(format!(
                                "checkout failed: {e}"
                            )),
                            others: Vec::new(),
                            retried: None,
                        }
                    }
                }
            }
            if ran.overlay_failed() && work.lower().is_some() {
                // The kept checkout was only bound read-only: run again in a fresh one, with the
                // setup step (if any) run just before each check.
                if let Ok(fresh) = self.prepare(false) {
                    work = fresh;
                    let inline = setup
                        .as_ref()
                        .map(|s| setup::Setup::inline(s.record(), config));
                    ran = checks::run_all(&env, &work, inline.as_ref());
                }
            }
            let analysis = analysis.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(AppError::usage("analysis crashed")))
            });
            let analysis = analysis.map(|r| {
                r.map(|(a, ms)| {
                    c.event(
                        EventKind::AnalysisCompleted,
                        serde_json::json!({"files": a.analysis.files_analyzed, "functions": a.analysis.functions_found,
                            "how": a.how, "files_read": a.files, "files_parsed": a.parsed, "ms": ms}),
                    );
                    a.analysis
                })
            });
            (ran, analysis, changes.join().ok())
        });
        record.cache_generations = std::mem::take(&mut work.cache_generations);
        drop(work);
        (ran, analysis, changes)
    }

    /// The tests the first parent's run named, when it has a result that named them.
    fn tests_of_parent(&self) -> Option<Vec<String>> {
        let c = self.c;
        let parent = c.info.parents.first()?.to_string();
        let run = c
            .ctx
            .index
            .run_for_commit(&c.row.repository_id, &parent)
            .ok()??;
        let tests = run.record.tests?;
        (run.record.status.is_result() && !tests.ids.is_empty()).then_some(tests.ids)
    }

    /// Where to look for this run's coverage and JUnit reports when the config names none: not
    /// where the commit holds one (a guess does not hide a committed file). A copy a build cache
    /// keeps from an earlier run is hidden from the run before its command starts (see
    /// `gs_sandbox`'s `hide_artifacts`), so a report there is this run's.
    fn report_candidates(&self) -> (Vec<String>, Vec<String>) {
        // The commit's root tree, read once for all the candidates.
        let (repo, root) = (self.c.repo, self.c.info.tree);
        let stale = |p: &str| git::path_in_tree(repo, root, p);
        let coverage = COVERAGE_REPORTS
            .iter()
            .filter(|p| !stale(p))
            .map(|p| p.to_string())
            .collect();
        let junit = JUNIT_DIRS
            .iter()
            .filter(|d| !stale(d))
            .map(|d| format!("{d}/*.xml"))
            .chain(
                self.config
                    .test
                    .command
                    .as_deref()
                    .and_then(checks::ctest_report)
                    .filter(|p| !stale(p)),
            )
            .collect();
        (coverage, junit)
    }
}

/// Stage 7: what the checks and the analysis found, into the record, with the commit's changes
/// (which the coverage of the lines it changed needs).
fn keep(
    c: &Commit<'_>,
    mut ran: checks::Ran,
    analysis: Option<Result<Analysis>>,
    changes: Option<git::Result<gs_model::Changes>>,
    record: &mut RunRecord,
) -> Result<()> {
    record.status = ran.status();
    record.error = ran.error();
    record.warnings = ran.warnings();
    record.checks = ran.checks();
    record.retried = ran.retried.take();
    let coverage = ran
        .coverage()
        .map(|(check, report, r)| (check.to_string(), report.to_string(), r.clone()));
    if let Some(data) = ran.test.contexts.take().filter(|_| !c.opts.is_trial()) {
        super::testcov::keep(
            &c.ctx.paths.home,
            &c.row.repository_id,
            &record.commit,
            &data,
        );
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
    // Read beside the checks; read here if that thread died.
    let changes = changes.unwrap_or_else(|| git::diff::commit_changes(c.repo, c.info));
    record.changes = Some(changes?);
    record.coverage = coverage
        .map(|(check, report, r)| coverage_of(&check, &report, &r, record.changes.as_ref()));
    Ok(())
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
        environment: None,
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

/// The commit `refname` points at now, when it is not `commit`: the branch moved past it.
fn superseded(
    repo: &gs_git::Repository,
    refname: Option<&str>,
    commit: ObjectId,
) -> Option<ObjectId> {
    let tip = git::objects::ref_peeled(repo, refname?)?;
    (tip != commit).then_some(tip)
}
