//! The MCP tools: their arguments (JSON Schema from the types), what each may change, and what
//! each calls in `app/`. A tool parses, calls, and renders a compact answer; no logic lives here
//! that the command line does not share.

use super::args::*;
use super::budget::{self, fit};
use super::workspace::*;
use crate::app::experiment::promote::{promote, PromoteOptions};
use crate::app::intake::queue::{self, Standing};
use crate::app::records::summary::Summary;
use crate::app::Repo;
use crate::app::{
    analysis::metrics, experiment::compare, experiment::eval, experiment::experiments,
    records::failures, records::logs, records::views, repo::repos, run::exec, AppError, Context,
};
use gs_model::{RunRecord, Trigger};
use gs_store::{EventFilter, RepoRow};
use gs_util as util;
use gs_util::time;
use schemars::JsonSchema;
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What every tool works on: the repository of this server, the index, and a flag that stops
/// long calls when the server ends.
pub struct Call<'a> {
    pub ctx: &'a Context,
    pub repo: &'a gix::Repository,
    pub row: &'a RepoRow,
    pub interrupt: &'a AtomicBool,
}

/// Why a call gave no answer.
pub enum CallError {
    /// No tool of that name (a protocol error).
    Unknown(String),
    /// The arguments do not match the tool's schema.
    Arguments(AppError),
    /// The use-case refused or failed.
    App(AppError),
}

impl From<AppError> for CallError {
    fn from(e: AppError) -> Self {
        CallError::App(e)
    }
}

pub(super) type Answer = Result<Value, CallError>;

/// A tool as `tools/list` describes it.
pub struct Def {
    pub name: &'static str,
    pub description: &'static str,
    /// It changes the repository, the index or the queue.
    pub writes: bool,
    /// It may destroy something (only with `writes`).
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    pub schema: fn() -> serde_json::Map<String, Value>,
}

fn schema<T: JsonSchema>() -> serde_json::Map<String, Value> {
    match serde_json::to_value(schemars::schema_for!(T)) {
        Ok(Value::Object(mut m)) => {
            m.remove("$schema");
            m.remove("title");
            m
        }
        _ => serde_json::Map::new(),
    }
}

macro_rules! tools {
    ($( $name:literal => $func:ident($args:ty), writes: $w:expr, destructive: $d:expr, idempotent: $i:expr, $desc:literal; )*) => {
        pub fn definitions() -> Vec<Def> {
            vec![$(Def {
                name: $name,
                description: $desc,
                writes: $w,
                destructive: $d,
                idempotent: $i,
                schema: schema::<$args>,
            }),*]
        }

        /// Run tool `name` with `args`.
        pub fn call(c: &Call<'_>, name: &str, args: Value) -> Answer {
            match name {
                $($name => $func(c, parse::<$args>($name, args)?),)*
                _ => Err(CallError::Unknown(name.to_string())),
            }
        }
    };
}

tools! {
    "experiment_start" => experiment_start(StartArgs), writes: true, destructive: false, idempotent: false,
        "Start an experiment: create branch experiment/<name> from a base (default the production branch) with the hypothesis committed on it. The work tree is not touched; commit on the branch with git as usual and every commit is verified.";
    "experiment_list" => experiment_list(NoArgs), writes: false, destructive: false, idempotent: true,
        "The experiments of this repository: state, head, last result, verdict, age and queued runs.";
    "experiment_status" => experiment_status(NameArgs), writes: false, destructive: false, idempotent: true,
        "One experiment: head, the head's result summary, the latest verdict and the runs pending or running.";
    "run_request" => run_request(RequestArgs), writes: true, destructive: false, idempotent: true,
        "Queue verification of a revision (a branch, commit id, HEAD~1 or an experiment's name). Idempotent by tree and config: a result made from the same tree under the same config is returned at once.";
    "run_wait" => run_wait(WaitArgs), writes: false, destructive: false, idempotent: true,
        "Wait up to timeout_seconds (default 60, at most 600) for a revision's result; returns its summary, or where it stands. With until: \"first_failure\", returns as soon as the run's first failing test is known (provisional: true, first_failure: test and ms); call again for the whole result.";
    "result_get" => result_get(ResultArgs), writes: false, destructive: false, idempotent: true,
        "A revision's result: status, counts, the first failures, duration, the limit that ended it, the sandbox and the analysis in numbers.";
    "failures_list" => failures_list(FailuresArgs), writes: false, destructive: false, idempotent: true,
        "The failing tests of a revision: name, file:line, the assertion line and the commit where each began to fail. Paged with offset and limit.";
    "log_read" => log_read(LogArgs), writes: false, destructive: false, idempotent: true,
        "The output of a revision's test run, a page at a time: from line offset (0-based), at most limit lines, only lines containing grep. Follow next_offset for the next page.";
    "analysis_get" => analysis_get(AnalysisArgs), writes: false, destructive: false, idempotent: true,
        "Code metrics of a revision: totals, files and the most complex functions, optionally only under path.";
    "analysis_diff" => analysis_diff(AnalysisDiffArgs), writes: false, destructive: false, idempotent: true,
        "What changed in the code from base to head: functions added and removed, complexity up and down, new potential issues.";
    "compare" => compare_tool(CompareArgs), writes: false, destructive: false, idempotent: true,
        "Experiments or revisions side by side against a base (default the production branch): one row each with its numbers and its difference from the base.";
    "experiment_eval" => experiment_eval(NameArgs), writes: true, destructive: false, idempotent: true,
        "Evaluate an experiment against production: the verdict (STRONGLY_RECOMMEND, RECOMMEND, CONSIDER, NOT_READY) with its criteria. Runs a head that has no result yet, and records the verdict as a note.";
    "experiment_promote" => experiment_promote(PromoteArgs), writes: true, destructive: true, idempotent: false,
        "Promote an experiment into production. dry_run defaults to true: the commit production would get is built and tested and nothing moves. Refused unless the verdict meets [promote] minimum and that exact tree passed.";
    "experiment_kill" => experiment_kill(KillArgs), writes: true, destructive: true, idempotent: false,
        "Kill an experiment: its branch moves to refs/sandbox/archive/<name> (kept, with its results), or is deleted with delete: true.";
    "exec" => exec_tool(ExecArgs), writes: true, destructive: false, idempotent: false,
        "Run a command (argv list) in a sandboxed throw-away checkout of a revision, under its limits; returns the exit code and the end of its output. Nothing is recorded.";
    "events_poll" => events_poll(EventsArgs), writes: false, destructive: false, idempotent: true,
        "Events of this repository (runs queued, started, completed, experiments evaluated, promoted, …): the newest, or those after a cursor. Pass the returned cursor to get only newer ones.";
    "flaky_list" => flaky_list(NoArgs), writes: false, destructive: false, idempotent: true,
        "Tests of this repository that both passed and failed on one tree under one config over the last 30 days (known-flaky: eval does not count their failures alone), and its quarantined tests: each with its state (flaky, cache_dependent, quarantined, released, untrusted), flake rate (failures over the runs of those trees), flips and last flip. Most flips first.";
    "workspace_new" => workspace_new(WorkspaceNewArgs), writes: true, destructive: false, idempotent: false,
        "Start a workspace: experiment <name> (branch experiment/<name> from `from`, default the production branch) and a live sandbox on it to work in. Commands run there sandboxed (workspace_exec) and files persist between calls; edit with workspace_write_file; workspace_commit turns it into a verified commit. The user's checkout is never touched.";
    "workspace_exec" => workspace_exec(WorkspaceExecArgs), writes: true, destructive: false, idempotent: false,
        "Run a command (argv list) in a workspace, over what earlier calls wrote, under the repository's limits; returns the exit code, the files it changed and the end of its output. What it writes is kept unless it was stopped (timeout, limit).";
    "workspace_read_file" => workspace_read_file(WorkspaceFileArgs), writes: false, destructive: false, idempotent: true,
        "A file of a workspace, as text. Paths are relative to its root; a path through a symlink, outside the workspace or at a special file is refused.";
    "workspace_write_file" => workspace_write_file(WorkspaceWriteArgs), writes: true, destructive: false, idempotent: true,
        "Write a file of a workspace (made, or replaced whole): returns its size and the lines added and removed. Refused through a symlink, outside the workspace, or over a directory.";
    "workspace_diff" => workspace_diff(WorkspaceArgs), writes: false, destructive: false, idempotent: true,
        "A workspace's changes against its base commit, as a unified git diff (binary files named), with the counts.";
    "workspace_commit" => workspace_commit(WorkspaceCommitArgs), writes: true, destructive: false, idempotent: false,
        "Commit a workspace's changes on its branch experiment/<name> (ignored files left out) and queue its verification; the workspace goes on from the new commit. Then call run_wait with the commit.";
    "workspace_list" => workspace_list(NoArgs), writes: false, destructive: false, idempotent: true,
        "The workspaces of this repository: base commit, branch, size, last use, commands run, CPU spent and budget.";
    "workspace_rm" => workspace_rm(WorkspaceRmArgs), writes: true, destructive: true, idempotent: false,
        "Remove a workspace and what it holds; its branch stays, unless kill: true (its experiment killed, the branch archived).";
    "config_get" => config_get(ConfigArgs), writes: false, destructive: false, idempotent: true,
        "The effective config of a revision (default the production branch): test command, limits, analysis, promote policy; and what this machine's sandbox enforces.";
}

/// A commit id as lists show it.
fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn summary(r: &RunRecord, failures: usize) -> Value {
    serde_json::to_value(Summary::of(r, failures)).expect("summaries serialize")
}

fn resolve(c: &Call<'_>, rev: &str) -> Result<(gix::ObjectId, Option<String>), CallError> {
    Ok(compare::resolve(c.repo, rev)?)
}

fn name_ok(name: &str) -> Result<(), CallError> {
    repos::check_name(name).map_err(CallError::Arguments)
}

fn standing_answer(commit: gix::ObjectId, s: &Standing, detail: bool) -> Value {
    let mut v = json!({"commit": commit.to_string(), "state": s.state()});
    match s {
        Standing::Done(r) => v["result"] = summary(r, 5),
        Standing::NotQueued => {
            v["hint"] =
                "nothing will run it: call run_request (or commit on a watched branch)".into()
        }
        Standing::Queued(_) => {}
        Standing::Failing { test, ms } => {
            v["provisional"] = true.into();
            v["first_failure"] = json!({"test": test, "ms": ms});
            v["next"] =
                "the rest of the suite still runs: call run_wait again for the whole result".into();
        }
    }
    fit(v, budget::budget(detail))
}

fn experiment_start(c: &Call<'_>, a: StartArgs) -> Answer {
    if repos::check_name(&a.name).is_err() {
        let slug = util::slug(&a.name);
        return Err(CallError::Arguments(
            AppError::usage(format!(
                "bad experiment name {:?}: use letters, digits, '-', '_' and '.'",
                a.name
            ))
            .hint(format!("call it {slug:?}")),
        ));
    }
    let s = experiments::start(
        Repo::new(c.ctx, c.repo, c.row),
        &a.name,
        a.hypothesis.as_deref(),
        a.base.as_deref(),
        None,
        None,
    )?;
    Ok(json!({
        "experiment": s.experiment,
        "branch": s.branch.trim_start_matches("refs/heads/"),
        "commit": s.commit,
        "base": s.base,
        "base_commit": s.base_commit,
        "next": format!("commit on {} (git switch {}); each commit is verified", s.branch.trim_start_matches("refs/heads/"), s.branch.trim_start_matches("refs/heads/")),
    }))
}

fn queue_of(c: &Call<'_>) -> Result<std::collections::BTreeMap<String, (u64, u64)>, CallError> {
    Ok(views::queued_by_ref(c.ctx, c.row)?)
}

fn experiment_list(c: &Call<'_>, _: NoArgs) -> Answer {
    let all = experiments::list(Repo::new(c.ctx, c.repo, c.row))?;
    let queued = queue_of(c)?;
    let now = time::now_millis();
    let rows: Vec<Value> = all
        .iter()
        .map(|o| {
            let e = &o.experiment;
            let (pending, running) = queued
                .get(&experiments::branch_ref(&e.name))
                .copied()
                .unwrap_or_default();
            let last = o.latest_result.as_deref().map(|r| {
                let t = r.tests.as_ref();
                json!({"status": r.status, "passed": t.and_then(|t| t.passed), "failed": t.and_then(|t| t.failed)})
            });
            json!({
                "name": e.name,
                "state": o.status,
                "head": o.head.as_deref().map(short),
                "runs": o.runs,
                "last": last,
                "verdict": o.latest_evaluation.as_ref().map(|v| v.recommendation),
                "age": time::parse_rfc3339(&e.created_at).map(|t| time::age(t, now)),
                "pending": pending,
                "running": running,
            })
        })
        .collect();
    Ok(fit(
        json!({"total": rows.len(), "experiments": rows}),
        budget::COMPACT,
    ))
}

fn flaky_list(c: &Call<'_>, _: NoArgs) -> Answer {
    let tests = views::flaky_report(c.ctx, c.repo, c.row, views::FLAKY_WINDOW_DAYS)?;
    Ok(fit(
        json!({"total": tests.len(), "tests": tests}),
        budget::COMPACT,
    ))
}

fn experiment_status(c: &Call<'_>, a: NameArgs) -> Answer {
    name_ok(&a.name)?;
    let d = experiments::show(Repo::new(c.ctx, c.repo, c.row), &a.name)?;
    let (pending, running) = queue_of(c)?
        .get(&experiments::branch_ref(&a.name))
        .copied()
        .unwrap_or_default();
    let o = &d.overview;
    let not_run = d.commits.iter().filter(|x| x.result.is_none()).count();
    Ok(fit(
        json!({
            "name": o.experiment.name,
            "state": o.status,
            "budget": o.budget,
            "branch": o.experiment.branch,
            "hypothesis": o.experiment.hypothesis,
            "head": o.head,
            "commits": d.commits.len(),
            "runs": o.runs,
            "not_run": not_run,
            "pending": pending,
            "running": running,
            "result": o.latest_result.as_deref().map(|r| summary(r, 5)),
            "verdict": o.latest_evaluation.as_ref().map(|v| json!({"recommendation": v.recommendation, "reason": v.reason, "head": short(&v.head.commit)})),
        }),
        budget::COMPACT,
    ))
}

fn run_request(c: &Call<'_>, a: RequestArgs) -> Answer {
    let (commit, refname) = resolve(c, &a.revision)?;
    let r = queue::request(
        Repo::new(c.ctx, c.repo, c.row),
        commit,
        refname.as_deref(),
        Trigger::Mcp,
    )?;
    let mut v = standing_answer(commit, &r.standing, a.detail);
    v["cached"] = r.cached.into();
    v["queued"] = r.queued.into();
    if !r.cached {
        v["runner"] = if r.daemon { "daemon" } else { "this server" }.into();
        v["next"] = "call run_wait with this revision".into();
    }
    Ok(fit(v, budget::budget(a.detail)))
}

fn run_wait(c: &Call<'_>, a: WaitArgs) -> Answer {
    let (commit, refname) = resolve(c, &a.revision)?;
    let secs = a.timeout_seconds.unwrap_or(60);
    if secs > 600 {
        return Err(CallError::Arguments(
            AppError::usage(format!(
                "bad arguments for run_wait: timeout_seconds {secs} is over 600"
            ))
            .hint("wait at most 600 seconds per call, and call again"),
        ));
    }
    let s = queue::wait(
        Repo::new(c.ctx, c.repo, c.row),
        commit,
        refname.as_deref(),
        Duration::from_secs(secs),
        a.until,
        c.interrupt,
    )?;
    Ok(standing_answer(commit, &s, a.detail))
}

/// The result shown for a revision: its own, or one of the same tree and config.
fn record_of(c: &Call<'_>, rev: &str) -> Result<(gix::ObjectId, RunRecord), CallError> {
    let (commit, _) = resolve(c, rev)?;
    let mut reader = crate::app::records::results::NoteReader::new(c.repo)?;
    match crate::app::records::results::find_evidence(
        Repo::new(c.ctx, c.repo, c.row),
        &mut reader,
        commit,
    )? {
        Some(r) => Ok((commit, r)),
        None => Err(CallError::App(
            AppError::usage(format!("{} has no result yet", short(&commit.to_string())))
                .hint("call run_request, then run_wait"),
        )),
    }
}

fn result_get(c: &Call<'_>, a: ResultArgs) -> Answer {
    let (_, r) = record_of(c, &a.revision)?;
    let k = a.failures.unwrap_or(5);
    let mut v = summary(&r, k);
    if a.detail {
        if let Some(t) = &r.tests {
            v["command"] = t.command.clone().into();
            v["output_tail"] = t.output_tail.clone().into();
            v["limits"] = serde_json::to_value(&t.limits).unwrap_or_default();
        }
    }
    Ok(fit(v, budget::budget(a.detail)))
}

fn failures_list(c: &Call<'_>, a: FailuresArgs) -> Answer {
    let limit = positive("failures_list", "limit", a.limit, 10)?;
    let (commit, r) = record_of(c, &a.revision)?;
    let f = failures::of(Repo::new(c.ctx, c.repo, c.row), commit, &r)?;
    let offset = a.offset.unwrap_or(0);
    let budget = budget::budget(a.detail);
    let mut v = json!({
        "commit": f.commit, "status": f.status, "failed": f.failed,
        "not_listed": f.not_listed, "failures": [],
    });
    let mut next = None;
    for (i, item) in f.failures.iter().enumerate().skip(offset) {
        let item = serde_json::to_value(item).expect("failures serialize");
        if i - offset >= limit || budget::size(&v) + budget::size(&item) + 40 > budget {
            next = Some(i);
            break;
        }
        v["failures"].as_array_mut().expect("an array").push(item);
    }
    v["next_offset"] = next.into();
    Ok(fit(v, budget))
}

fn log_read(c: &Call<'_>, a: LogArgs) -> Answer {
    let limit = positive("log_read", "limit", a.limit, 100)?;
    let (commit, r) = record_of(c, &a.revision)?;
    let budget = budget::budget(a.detail);
    // The page's frame (commit, counts, cursor) takes about 200 bytes.
    let mut room = budget.saturating_sub(220);
    let page = logs::read(
        c.ctx,
        c.row,
        &r,
        &logs::PageRequest {
            offset: a.offset.unwrap_or(0),
            limit,
            grep: a.grep.clone(),
            check: a.check.clone(),
        },
        |line| {
            let n = serde_json::to_string(line).map_or(usize::MAX, |s| s.len() + 1);
            if n > room {
                return false;
            }
            room -= n;
            true
        },
    )?;
    let mut v = json!({
        "commit": commit.to_string(),
        "total_lines": page.total_lines,
        "lines": page.lines,
        "next_offset": page.next_offset,
        "output_truncated": page.output_truncated,
    });
    if page.setup_step {
        v["setup_step"] = true.into();
    }
    Ok(fit(v, budget))
}

fn analysis_get(c: &Call<'_>, a: AnalysisArgs) -> Answer {
    let limit = positive("analysis_get", "limit", a.limit, 10)?;
    let (commit, _) = resolve(c, &a.revision)?;
    let m = metrics::of(c.ctx, c.repo, commit, a.path.as_deref())?;
    let an = &m.analysis;
    let issues: Vec<_> = an
        .potential_issues
        .iter()
        .filter(|i| {
            a.path
                .as_deref()
                .is_none_or(|p| metrics::is_under(&i.path, p))
        })
        .collect();
    let v = json!({
        "commit": commit.to_string(),
        "path": a.path,
        "totals": {
            "files": m.files.len(),
            "code_lines": m.files.iter().map(|f| f.code_lines).sum::<u64>(),
            "functions": m.functions.len(),
            "complexity_max": m.functions.first().map_or(0, |f| f.complexity),
            "potential_issues": issues.len(),
            "languages": an.languages.keys().collect::<Vec<_>>(),
        },
        "most_complex": m.functions.iter().take(limit).collect::<Vec<_>>(),
        "files": m.files.iter().take(limit).collect::<Vec<_>>(),
        "files_more": m.files.len().saturating_sub(limit),
        "issues": issues.iter().take(limit).collect::<Vec<_>>(),
    });
    Ok(fit(v, budget::budget(a.detail)))
}

fn analysis_diff(c: &Call<'_>, a: AnalysisDiffArgs) -> Answer {
    let (head, _) = resolve(c, &a.head)?;
    let base = match &a.base {
        Some(b) => resolve(c, b)?.0,
        None => {
            let config = experiments::production_config(c.ctx, c.repo)?;
            experiments::production_tip(c.repo, &config)?.1
        }
    };
    let path = a.path.as_deref();
    let d = metrics::diff(
        &metrics::of(c.ctx, c.repo, base, path)?,
        &metrics::of(c.ctx, c.repo, head, path)?,
    );
    let v = serde_json::to_value(&d).expect("deltas serialize");
    Ok(fit(v, budget::budget(a.detail)))
}

fn compare_tool(c: &Call<'_>, a: CompareArgs) -> Answer {
    if a.targets.is_empty() {
        return Err(CallError::Arguments(
            AppError::usage("bad arguments for compare: targets is empty")
                .hint("name experiments or revisions, e.g. [\"faster-parser\", \"HEAD~1\"]"),
        ));
    }
    let cmp = compare::compare(c.ctx, c.repo, c.row, &a.targets, a.base.as_deref())?;
    let v = serde_json::to_value(&cmp).expect("comparisons serialize");
    Ok(fit(v, budget::budget(a.detail)))
}

fn experiment_eval(c: &Call<'_>, a: NameArgs) -> Answer {
    name_ok(&a.name)?;
    let ev = eval::evaluate(
        Repo::new(c.ctx, c.repo, c.row),
        &a.name,
        Trigger::Mcp,
        c.interrupt,
    )?;
    Ok(fit(
        json!({
            "experiment": ev.experiment,
            "recommendation": ev.recommendation,
            "reason": ev.reason,
            "head": {"commit": ev.head.commit, "status": ev.head.status, "passed": ev.head.passed, "failed": ev.head.failed},
            "base": {"ref": ev.base.refname, "commit": ev.base.commit, "status": ev.base.status, "passed": ev.base.passed},
            "criteria": ev.criteria.iter().map(|k| json!({"name": k.name, "pass": k.pass, "value": k.value, "threshold": k.threshold})).collect::<Vec<_>>(),
        }),
        budget::COMPACT,
    ))
}

fn experiment_promote(c: &Call<'_>, a: PromoteArgs) -> Answer {
    name_ok(&a.name)?;
    if let Some(s) = a
        .strategy
        .as_deref()
        .filter(|s| !["merge", "ff"].contains(s))
    {
        return Err(CallError::Arguments(
            AppError::usage(format!("bad arguments for experiment_promote: strategy {s:?}"))
                .hint("use merge or ff (a pull request is opened with `git sandbox promote NAME --strategy pull-request`)"),
        ));
    }
    let opts = PromoteOptions {
        strategy: a.strategy.clone(),
        force: false,
        dry_run: a.dry_run.unwrap_or(true),
        watch: None,
        trigger: Trigger::Mcp,
    };
    if crate::app::experiment::promote::strategy(c.ctx, c.repo, &opts)? == "pull-request" {
        return Err(CallError::App(
            AppError::usage("this repository promotes by pull request ([promote] strategy)")
                .hint("pass strategy: merge or ff, or run `git sandbox promote NAME --strategy pull-request`"),
        ));
    }
    let p = promote(Repo::new(c.ctx, c.repo, c.row), &a.name, &opts, c.interrupt)?;
    Ok(fit(
        json!({
            "experiment": p.experiment,
            "dry_run": p.dry_run,
            "promoted": !p.dry_run,
            "target": p.target,
            "strategy": p.strategy,
            "recommendation": p.recommendation,
            "minimum": p.minimum,
            "previous": p.previous,
            "commit": p.commit,
            "result": p.result.as_ref().map(|r| summary(r, 5)),
            "next": if p.dry_run { "call again with dry_run: false to move production" } else { "done" },
        }),
        budget::COMPACT,
    ))
}

fn experiment_kill(c: &Call<'_>, a: KillArgs) -> Answer {
    name_ok(&a.name)?;
    let k = experiments::kill(Repo::new(c.ctx, c.repo, c.row), &a.name, a.delete)?;
    Ok(serde_json::to_value(&k).expect("kills serialize"))
}

fn exec_tool(c: &Call<'_>, a: ExecArgs) -> Answer {
    if a.command.is_empty() || a.command[0].is_empty() {
        return Err(CallError::Arguments(
            AppError::usage("bad arguments for exec: command is empty")
                .hint("pass the command and its arguments as a list, e.g. [\"make\", \"test\"]"),
        ));
    }
    let (commit, _) = resolve(c, &a.revision)?;
    let budget = budget::budget(a.detail);
    let executed = exec::exec(
        c.ctx,
        c.repo,
        commit,
        &a.command,
        a.timeout_seconds.map(Duration::from_secs),
        exec::Output::Capture(1 << 20),
        c.interrupt,
    )?;
    let o = executed.outcome;
    if let Some(e) = o.spawn_error {
        return Err(CallError::App(AppError::refused(format!(
            "the command could not be started: {e}"
        ))));
    }
    let (output, cut) = tail(&o.output, budget.saturating_sub(300));
    Ok(fit(
        json!({
            "commit": commit.to_string(),
            "exit_code": o.exit_code,
            "signal": o.signal,
            "killed_by": o.killed_by,
            "duration_ms": o.duration.as_millis() as u64,
            "timeout_seconds": executed.timeout.as_secs(),
            "output": output,
            "output_cut": cut || o.truncated,
        }),
        budget,
    ))
}

/// The end of a command's output, at most `room` bytes (the end is what tells), and whether it
/// was cut.
pub(super) fn tail(output: &[u8], room: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(output);
    if text.len() > room {
        let mut start = text.len() - room;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        (format!("…{}", &text[start..]), true)
    } else {
        (text.into_owned(), false)
    }
}

fn events_poll(c: &Call<'_>, a: EventsArgs) -> Answer {
    let limit = positive("events_poll", "limit", a.limit, 20)?;
    let budget = budget::budget(a.detail);
    let events = views::events(
        c.ctx,
        &EventFilter {
            repository_id: Some(c.row.repository_id.clone()),
            run_id: None,
            kind: a.kind.clone(),
            not_kind: None,
            // Without a cursor, the newest ones; with one, those after it, oldest first.
            since: a.cursor,
            limit: Some(limit as u64),
        },
    )?;
    let mut v = json!({"events": [], "cursor": a.cursor.unwrap_or(0)});
    let mut more = false;
    for e in events {
        let item = json!({"id": e.id, "time": e.time, "kind": e.kind, "commit": e.commit.as_deref().map(short), "data": e.data});
        if budget::size(&v) + budget::size(&item) + 40 > budget {
            more = true;
            break;
        }
        v["cursor"] = e.id.into();
        v["events"].as_array_mut().expect("an array").push(item);
    }
    v["more"] = more.into();
    Ok(fit(v, budget))
}

fn config_get(c: &Call<'_>, a: ConfigArgs) -> Answer {
    let (commit, refname) = match &a.revision {
        Some(r) => resolve(c, r)?,
        None => {
            let config = experiments::production_config(c.ctx, c.repo)?;
            let (target, tip) = experiments::production_tip(c.repo, &config)?;
            (tip, Some(format!("refs/heads/{target}")))
        }
    };
    let config =
        crate::app::config::commit_config::config_at(c.ctx, c.repo, commit, refname.as_deref())?;
    let probe = c.ctx.probe();
    let layers = &probe.isolation.layers;
    let enforced: Vec<&str> = layers
        .iter()
        .filter(|l| l.status == gs_model::LayerStatus::Enforced)
        .map(|l| l.layer.as_str())
        .collect();
    let missing: Vec<Value> = layers
        .iter()
        .filter(|l| l.status != gs_model::LayerStatus::Enforced)
        .map(|l| json!({"layer": l.layer, "detail": l.detail}))
        .collect();
    let mut v = json!({
        "commit": commit.to_string(),
        "test": {"command": config.test.command, "timeout_ms": config.test.timeout.as_millis() as u64, "setup": config.test.setup},
        "limits": config.limits,
        "promote": config.promote,
        "sandbox": {"degraded": probe.isolation.degraded, "enforced": enforced, "not_enforced": missing},
    });
    if a.detail {
        v["config"] = serde_json::to_value(&config).unwrap_or_default();
    }
    Ok(fit(v, budget::budget(a.detail)))
}
