//! Running the experiment for commits: config from the commit, the cache by tree + config,
//! a throw-away checkout, tests and analysis side by side, change stats, then the record as a
//! note (batched, compare-and-swap) and in the index, with events.

use super::{analyze, AppError, Context, Result};
use crate::config::{Config, ConfigFile};
use crate::git::{self, checkout, CommitInfo};
use crate::model::{RunRecord, Status, Tests, Trigger, RUN_SCHEMA};
use crate::runner::{self, detect, parse, process};
use crate::store::RepoRow;
use crate::util::{self, time};
use gix::ObjectId;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Results are written as notes in batches of this many (or sooner when a batch gets old), so a
/// range costs few notes commits yet a kill loses little.
const BATCH: usize = 16;
const BATCH_AGE_MS: u128 = 2000;

pub struct RunOptions<'a> {
    pub force: bool,
    pub trigger: Trigger,
    /// The branch the commits were named through, e.g. `refs/heads/experiment/x`.
    pub refname: Option<String>,
    /// Settings from flags, laid over everything else.
    pub flags: ConfigFile,
    pub interrupt: &'a AtomicBool,
}

/// What happened to one commit, for progress display.
pub enum Progress<'r> {
    Started {
        index: usize,
        commit: ObjectId,
    },
    Finished {
        index: usize,
        record: &'r RunRecord,
        reused: bool,
    },
}

pub struct Outcome {
    pub records: Vec<RunRecord>,
    /// The run was stopped by Ctrl-C before every commit was done.
    pub interrupted: bool,
}

pub fn run_commits(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commits: &[ObjectId],
    opts: &RunOptions<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome> {
    let mut notes = git::notes::Lookup::new(repo, git::NOTES_REF)?;
    let sandbox = std::cell::OnceCell::new();
    let mut records = Vec::with_capacity(commits.len());
    let mut pending: Vec<RunRecord> = Vec::new();
    let mut batch_started = Instant::now();
    let mut interrupted = false;
    for (index, &commit) in commits.iter().enumerate() {
        if opts.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        progress(Progress::Started { index, commit });
        let info = git::commit_info(repo, commit)?;
        let has_note = notes.has(repo, commit)?;
        let (record, reused) = run_one(ctx, repo, row, &info, opts, has_note, &sandbox)?;
        // A run cut short by Ctrl-C or a stopping daemon is no result: it runs again later.
        if record.tests.as_ref().and_then(|t| t.killed_by.as_deref()) == Some("interrupt") {
            interrupted = true;
            break;
        }
        progress(Progress::Finished {
            index,
            record: &record,
            reused,
        });
        if reused {
            records.push(record);
            continue;
        }
        if pending.is_empty() {
            batch_started = Instant::now();
        }
        pending.push(record);
        if pending.len() >= BATCH || batch_started.elapsed().as_millis() > BATCH_AGE_MS {
            records.extend(flush(ctx, repo, row, std::mem::take(&mut pending))?);
        }
    }
    records.extend(flush(ctx, repo, row, pending)?);
    if interrupted || opts.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
        interrupted = true;
    }
    Ok(Outcome {
        records,
        interrupted,
    })
}

/// The note body of a record: pretty JSON, so `git notes show` and `git log` read well.
pub fn note_body(r: &RunRecord) -> Vec<u8> {
    let mut body = serde_json::to_vec_pretty(r).expect("records always serialize");
    body.push(b'\n');
    body
}

/// Write records as notes (one notes commit), then index them.
fn flush(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    records: Vec<RunRecord>,
) -> Result<Vec<RunRecord>> {
    if records.is_empty() {
        return Ok(records);
    }
    let bodies: Vec<(ObjectId, Vec<u8>)> = records
        .iter()
        .map(|r| {
            let id = ObjectId::from_hex(r.commit.as_bytes()).expect("records hold full commit ids");
            (id, note_body(r))
        })
        .collect();
    let message = if records.len() == 1 {
        format!(
            "git-sandbox: {} {}",
            util::short(&records[0].commit),
            records[0].status
        )
    } else {
        format!("git-sandbox: results for {} commits", records.len())
    };
    git::notes::write_notes(repo, git::NOTES_REF, &bodies, &message)?;
    for r in &records {
        let run_id = ctx.index.put_run(&row.repository_id, r)?;
        let kind = if r.status == Status::Error {
            "run.failed"
        } else {
            "run.completed"
        };
        ctx.index.add_event(
            kind,
            Some(&row.repository_id),
            Some(run_id),
            Some(&r.commit),
            &serde_json::json!({"status": r.status, "duration_ms": r.duration_ms, "cached_from": r.cached_from, "error": r.error}),
        )?;
        ctx.index
            .complete_job(&row.repository_id, &r.commit, r.status != Status::Error)?;
    }
    ctx.index.touch_repository(&row.repository_id)?;
    Ok(records)
}

fn experiment_of(refname: Option<&str>) -> Option<String> {
    refname
        .and_then(|r| r.strip_prefix("refs/heads/experiment/"))
        .map(str::to_string)
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
        tests: None,
        analysis: None,
        changes: None,
    }
}

fn finish(mut r: RunRecord, started: i64) -> RunRecord {
    let now = time::now_millis();
    r.finished_at = time::rfc3339(now);
    r.duration_ms = (now - started).max(0) as u64;
    r
}

/// The effective config for a commit: the user's layers with the commit's own `.sandbox.toml`,
/// and, for a run of an experiment's branch, the `[config]` of its `experiment.toml`.
pub fn config_for(
    ctx: &Context,
    repo: &gix::Repository,
    info: &CommitInfo,
    experiment: Option<&str>,
    flags: &ConfigFile,
) -> Result<Config> {
    let text = git::read_blob_at(repo, info.tree, ".sandbox.toml")?;
    let label = format!("{}:.sandbox.toml", util::short(&info.id.to_string()));
    let text = match text {
        Some(bytes) => Some(String::from_utf8(bytes).map_err(|_| {
            AppError::Usage(format!(
                "{label}: the file is not UTF-8; save it as UTF-8 text"
            ))
        })?),
        None => None,
    };
    let mut layers = ctx.layers.with_repo_text(&label, text.as_deref())?;
    if let Some(name) = experiment {
        layers.experiment = super::experiments::config_overrides(repo, info, name)?;
    }
    layers.flags = flags.clone();
    Ok(layers.resolve())
}

/// Returns the record and whether it is an existing result of this very commit (nothing to write).
fn run_one(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    info: &CommitInfo,
    opts: &RunOptions<'_>,
    has_note: bool,
    sandbox: &std::cell::OnceCell<runner::Sandbox>,
) -> Result<(RunRecord, bool)> {
    let started = time::now_millis();
    let mut record = base_record(info, opts, started);
    let experiment = experiment_of(opts.refname.as_deref());
    let config = match config_for(ctx, repo, info, experiment.as_deref(), &opts.flags) {
        Ok(c) => c,
        Err(e @ (AppError::Config(_) | AppError::Usage(_))) => {
            record.status = Status::Error;
            record.error = Some(e.to_string());
            record.changes = git::diff::commit_changes(repo, info).ok();
            return Ok((finish(record, started), false));
        }
        Err(e) => return Err(e),
    };
    let key = config.result_key();
    record.config_hash = Some(key.clone());
    let tree_hex = info.tree.to_string();
    if !opts.force {
        // The commit's own result: from the index, or from its note when the index lost it
        // (a deleted index, or a crash between writing the note and indexing it).
        let existing = match ctx
            .index
            .run_for_commit(&row.repository_id, &record.commit)?
        {
            Some(run) => Some(run.record),
            None if has_note => git::notes::read_note(repo, git::NOTES_REF, info.id)?
                .and_then(|body| serde_json::from_slice::<RunRecord>(&body).ok())
                .filter(|r| r.commit == record.commit)
                .inspect(|r| {
                    let _ = ctx.index.put_run(&row.repository_id, r);
                }),
            None => None,
        };
        if let Some(r) = existing {
            if r.tree == tree_hex
                && r.config_hash.as_deref() == Some(&key)
                && r.status != Status::Error
            {
                // With its note in place there is nothing to write; without (a writer that
                // does not compare-and-swap replaced the notes ref), the note is written again.
                return Ok((r, has_note));
            }
        }
        if let Some(hit) = ctx
            .index
            .run_for_tree(&row.repository_id, &tree_hex, Some(&key))?
        {
            let mut r = hit.record;
            r.cached_from = Some(r.commit.clone());
            r.commit = record.commit;
            r.parents = record.parents;
            r.refname = record.refname;
            r.experiment = record.experiment;
            r.trigger = record.trigger;
            r.started_at = record.started_at;
            r.changes = git::diff::commit_changes(repo, info).ok();
            return Ok((finish(r, started), false));
        }
    }

    let work = match checkout::checkout_tree(
        repo,
        info.tree,
        &checkout::scratch_root(),
        opts.interrupt,
        config.limits.checkout_mb.saturating_mul(1024 * 1024),
    ) {
        Ok(w) => w,
        Err(e) => {
            record.status = Status::Error;
            record.error = Some(format!("checkout failed: {e}"));
            return Ok((finish(record, started), false));
        }
    };
    let event = |kind: &str, data: serde_json::Value| {
        let _ = ctx.index.add_event(
            kind,
            Some(&row.repository_id),
            None,
            Some(&record.commit),
            &data,
        );
    };
    event(
        "checkout.completed",
        serde_json::json!({"files": work.files, "ms": time::now_millis() - started}),
    );
    let log = ctx
        .paths
        .logs()
        .join(&row.repository_id)
        .join(format!("{}.log", record.commit));
    let index_path = ctx.index.path().to_path_buf();
    let (tests, analysis) = std::thread::scope(|s| {
        let analysis = config.analysis.enabled.then(|| {
            let repo = repo.clone();
            let cfg = config.analysis.clone();
            let tree = info.tree;
            let index_path = index_path.clone();
            s.spawn(move || -> Result<crate::model::Analysis> {
                let index = crate::store::Index::open_file(&index_path)?;
                analyze::analyze_tree(&index, &repo, tree, &cfg)
            })
        });
        let sandbox = sandbox.get_or_init(|| ctx.sandbox());
        event("test.started", serde_json::json!({}));
        let tests = run_tests(&config, &work, &log, sandbox, opts.interrupt);
        event(
            "test.completed",
            serde_json::json!({"status": tests.0, "exit_code": tests.1.as_ref().and_then(|t| t.exit_code)}),
        );
        let analysis = analysis.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(AppError::Usage("analysis crashed".into())))
        });
        if let Some(Ok(a)) = &analysis {
            event(
                "analysis.completed",
                serde_json::json!({"files": a.files_analyzed, "functions": a.functions_found}),
            );
        }
        (tests, analysis)
    });
    drop(work);
    let (status, tests, error) = tests;
    record.status = status;
    record.tests = tests;
    record.error = error;
    record.analysis = match analysis {
        Some(Ok(a)) => Some(a),
        Some(Err(e)) => {
            record.error.get_or_insert(format!("analysis failed: {e}"));
            None
        }
        None => None,
    };
    record.changes = Some(git::diff::commit_changes(repo, info)?);
    Ok((finish(record, started), false))
}

/// Run the tests of a checkout: (status, tests section, error message).
fn run_tests(
    config: &Config,
    work: &checkout::Checkout,
    log: &std::path::Path,
    sandbox: &runner::Sandbox,
    interrupt: &AtomicBool,
) -> (Status, Option<Tests>, Option<String>) {
    let dir = work.path();
    let (command, framework) = match &config.test.command {
        Some(c) => (
            c.clone(),
            parse::framework_from_command(c).map(str::to_string),
        ),
        None => match detect::detect(&dir) {
            Some((c, f)) => (c, Some(f.to_string())),
            None => return (Status::Passed, None, None),
        },
    };
    let outcome = process::run(process::Spec {
        command: &command,
        cwd: &dir,
        root: work.root(),
        env: runner::env::sandbox_env(work.root()),
        timeout: config.test.timeout,
        output: process::Output::Capture {
            log,
            cap: config.limits.output_bytes,
        },
        limits: &config.limits,
        sandbox,
        interrupt,
    });
    let text = String::from_utf8_lossy(&outcome.output);
    let mut parsed = parse::parse_output(framework.as_deref(), &text);
    if let Some(junit) = &config.test.junit {
        if let Some(counts) = std::fs::read_to_string(dir.join(junit))
            .ok()
            .and_then(|xml| parse::parse_junit_xml(&xml))
        {
            parsed = Some(("junit", counts));
        }
    }
    let framework = parsed.as_ref().map(|(f, _)| f.to_string()).or(framework);
    let counts = parsed.map(|(_, c)| c).unwrap_or_default();
    let mut error = None;
    let status = if let Some(e) = &outcome.spawn_error {
        error = Some(e.clone());
        Status::Error
    } else {
        match outcome.killed_by.as_deref() {
            Some("timeout" | "cpu") => Status::Timeout,
            Some(_) => Status::Killed,
            None if outcome.exit_code == Some(127) && counts.total.is_none() => {
                error = Some(format!(
                    "the test command `{command}` was not found (exit 127); install it or set [test] command in .sandbox.toml"
                ));
                Status::Error
            }
            None if outcome.exit_code == Some(0)
                && counts.failed.unwrap_or(0) == 0
                && counts.errors.unwrap_or(0) == 0 =>
            {
                Status::Passed
            }
            None => Status::Failed,
        }
    };
    if outcome.killed_by.as_deref() == Some("cpu") {
        error = Some(format!(
            "the tests used up their {} CPU seconds and were stopped; raise [limits] cpu_seconds if they need more",
            config.limits.cpu_seconds
        ));
    } else if status == Status::Timeout {
        error = Some(format!(
            "the tests ran past the {}s timeout and were stopped; raise [test] timeout in .sandbox.toml if they need longer",
            config.test.timeout.as_secs_f64()
        ));
    }
    let tests = Tests {
        command,
        framework,
        exit_code: outcome.exit_code,
        passed: counts.passed,
        failed: counts.failed,
        skipped: counts.skipped,
        errors: counts.errors,
        total: counts.total,
        failures: counts.failures,
        duration_ms: outcome.duration.as_millis() as u64,
        output_tail: outcome.output_tail,
        killed_by: outcome.killed_by,
        resources: outcome.resources,
        log: outcome.log.map(|p: PathBuf| p.display().to_string()),
        output_truncated: outcome.truncated,
        isolation: Some(outcome.isolation),
    };
    (status, Some(tests), error)
}

/// Find the record for a commit: its own note, else (after a rewrite) a result for the same tree.
pub fn find_record(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commit: ObjectId,
) -> Result<Option<RunRecord>> {
    if let Some(body) = git::notes::read_note(repo, git::NOTES_REF, commit)? {
        if let Ok(r) = serde_json::from_slice::<RunRecord>(&body) {
            return Ok(Some(r));
        }
    }
    if let Some(run) = ctx
        .index
        .run_for_commit(&row.repository_id, &commit.to_string())?
    {
        return Ok(Some(run.record));
    }
    let info = git::commit_info(repo, commit)?;
    if let Some(hit) = ctx
        .index
        .run_for_tree(&row.repository_id, &info.tree.to_string(), None)?
    {
        let mut r = hit.record;
        r.cached_from = Some(r.commit.clone());
        r.commit = commit.to_string();
        r.parents = info.parents.iter().map(|p| p.to_string()).collect();
        return Ok(Some(r));
    }
    Ok(None)
}
