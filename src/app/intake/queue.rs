//! The queue as its users see it: ask for a commit's result (the current one at once when the
//! same tree was run under the same config, else a job), see where a commit stands, wait for it,
//! and run one job (the daemon's workers, and `git sandbox mcp` when no daemon runs).

use crate::app::run::{run_commits, RunOptions};
use crate::app::{records::results, AppError, Context, Repo, Result};
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_model::{RunRecord, Status, Trigger};
use gs_store::{Job, RepoRow};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where a commit stands.
#[derive(Debug, Clone)]
pub enum Standing {
    /// It has a result made from its tree under the config it has now.
    Done(Box<RunRecord>),
    /// Its job is `pending`, `assigned` or `running`.
    Queued(String),
    /// Nobody asked for it (or its last job ended without a result under today's config).
    NotQueued,
    /// Its run is still going and has published its first failing test (or why the tests could
    /// not run), `ms` after the tests started: a provisional answer, the verdict still to come.
    Failing { test: String, ms: u64 },
}

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Until {
    /// The whole result.
    #[default]
    Result,
    /// The first failure, or the whole result when it comes first (a passing run).
    FirstFailure,
}

impl Standing {
    /// `done`, `pending`, `assigned`, `running` or `not_queued`.
    pub fn state(&self) -> &str {
        match self {
            Standing::Done(_) => "done",
            Standing::Queued(s) => s,
            Standing::NotQueued => "not_queued",
            Standing::Failing { .. } => "running",
        }
    }

    pub fn record(&self) -> Option<&RunRecord> {
        match self {
            Standing::Done(r) => Some(r),
            _ => None,
        }
    }
}

/// What a request did.
#[derive(Debug)]
pub struct Requested {
    pub standing: Standing,
    /// The result was there already (this commit's, or another commit's with the same tree and
    /// config): nothing was queued.
    pub cached: bool,
    /// A job was added (or an ended one queued again) by this request.
    pub queued: bool,
    /// Whether a daemon runs on this machine to take the job.
    pub daemon: bool,
}

/// Where `commit` stands: its current result (own, or a same-tree result under the same config),
/// else its job's state.
pub fn standing(at: Repo<'_>, commit: ObjectId, refname: Option<&str>) -> Result<Standing> {
    let Repo { ctx, row, .. } = at;
    if let Some(r) = results::current_record(at, commit, refname)? {
        return Ok(Standing::Done(Box::new(r)));
    }
    Ok(
        match ctx
            .index
            .job_state(&row.repository_id, &commit.to_string())?
        {
            Some(s) if matches!(s.as_str(), "pending" | "assigned" | "running") => {
                Standing::Queued(s)
            }
            _ => Standing::NotQueued,
        },
    )
}

/// Ask for `commit`'s result: idempotent by tree and config. A current result is returned at
/// once; a commit already queued stays queued; otherwise a job is added (one that ended without
/// a result under today's config is queued again) and the daemon, if one runs, is woken.
pub fn request(
    at: Repo<'_>,
    commit: ObjectId,
    refname: Option<&str>,
    trigger: Trigger,
) -> Result<Requested> {
    let Repo { ctx, row, .. } = at;
    let daemon = gs_ipc::running(&ctx.paths.home).is_some();
    let standing = standing(at, commit, refname)?;
    if !matches!(standing, Standing::NotQueued) {
        return Ok(Requested {
            cached: matches!(standing, Standing::Done(_)),
            standing,
            queued: false,
            daemon,
        });
    }
    let job = [(commit.to_string(), refname.map(str::to_string))];
    ctx.index
        .requeue(&row.repository_id, &job, trigger.as_str())?;
    gs_ipc::ping(&ctx.paths.home, &row.repository_id);
    Ok(Requested {
        standing: standing_after_queue(ctx, row, commit)?,
        cached: false,
        queued: true,
        daemon,
    })
}

fn standing_after_queue(ctx: &Context, row: &RepoRow, commit: ObjectId) -> Result<Standing> {
    Ok(
        match ctx
            .index
            .job_state(&row.repository_id, &commit.to_string())?
        {
            Some(s) => Standing::Queued(s),
            None => Standing::NotQueued,
        },
    )
}

/// Wait up to `timeout` for `commit` to have a result; returns where it stands then: its result,
/// the `error` record of a run that could not make one, or its job's state. Returns early when it
/// is not queued at all (nothing would ever come) or when `interrupt` is set; and with
/// [`Until::FirstFailure`], as soon as its running run has published a failure.
#[allow(clippy::too_many_arguments)]
pub fn wait(
    at: Repo<'_>,
    commit: ObjectId,
    refname: Option<&str>,
    timeout: Duration,
    until: Until,
    interrupt: &AtomicBool,
) -> Result<Standing> {
    let Repo { ctx, repo, row } = at;
    let deadline = Instant::now() + timeout;
    loop {
        let s = standing(at, commit, refname)?;
        if let Standing::NotQueued = s {
            // A run that could not make a result (a broken `.sandbox.toml`, a setup that
            // failed) left an `error` record: that is what the waiter needs to see.
            let mut reader = results::NoteReader::new(repo)?;
            if let Some(r) = results::own_record(at, &mut reader, commit)?
                .filter(|r| r.status == Status::Error && r.is_evidence())
            {
                return Ok(Standing::Done(Box::new(r)));
            }
        }
        if until == Until::FirstFailure && s.state() == "running" {
            if let Some(f) = ctx
                .index
                .live_first_failure(&row.repository_id, &commit.to_string())?
                .filter(|f| f["withdrawn"] != true)
            {
                return Ok(Standing::Failing {
                    test: f["test"].as_str().unwrap_or("the tests").to_string(),
                    ms: f["ms"].as_u64().unwrap_or(0),
                });
            }
        }
        if !matches!(s, Standing::Queued(_))
            || Instant::now() >= deadline
            || interrupt.load(Ordering::Relaxed)
        {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(100).min(deadline - Instant::now()));
    }
}

/// How one job ended.
#[derive(Debug)]
pub enum JobEnd {
    /// Someone else took it first: nothing ran.
    Taken,
    /// Stopped from outside; the job is pending again.
    Interrupted,
    /// Handed back untouched, for another worker: an earlier job of its batch had to run its
    /// tests (the claim does not count).
    Released,
    /// It ran (a failing test is a result, not an error).
    Done(Option<Box<RunRecord>>),
    /// The run could not be made (an infrastructure error): retried later unless given up.
    Failed { error: String, retry: bool },
}

/// How a batch of jobs ended.
#[derive(Debug)]
pub struct BatchEnd {
    /// Each job's end, in the batch's order.
    pub ends: Vec<JobEnd>,
    /// Whether some commit's tests had to run (its result was not there already, nor its
    /// tree's).
    pub ran: bool,
}

/// Run one job this process claimed: [`run_jobs`] of one.
pub fn run_job(ctx: &Context, row: &RepoRow, job: &Job, interrupt: &AtomicBool) -> JobEnd {
    run_jobs(ctx, row, std::slice::from_ref(job), interrupt)
        .ends
        .pop()
        .expect("one end per job")
}

/// Run a batch of jobs of one repository this process claimed (`assigned`, each's attempt its
/// fencing token), oldest first: `running`, then through the same pipeline as `git sandbox
/// run`, then `completed`/`failed`, or back to `pending` when interrupted. The commits go
/// through one pipeline (a notes commit per few results, a transaction per step of the batch),
/// and a batch stops after its first commit whose tests had to run: the rest are handed back
/// for idle workers to take. Every change of a job's state is fenced: once a claim was taken
/// back (its lease ran out) nothing here moves that job.
pub fn run_jobs(ctx: &Context, row: &RepoRow, jobs: &[Job], interrupt: &AtomicBool) -> BatchEnd {
    let all: Vec<&Job> = jobs.iter().collect();
    // The claims start and say so in one transaction (one commit of the index, not two).
    let held = in_one(ctx, || {
        let held = ctx.index.start_jobs(&all).unwrap_or_default();
        // `run.started` comes from the run itself (as for `git sandbox run`), only when it runs.
        add_events(
            ctx,
            jobs.iter().filter(|j| held.contains(&j.id)).map(|job| {
                let data = serde_json::json!({"job": job.id, "trigger": job.trigger, "attempt": job.attempts, "by": job.owner});
                (job, EventKind::JobStarted, data)
            }),
        );
        held
    });
    let mut ends: Vec<Option<JobEnd>> = jobs
        .iter()
        .map(|j| (!held.contains(&j.id)).then_some(JobEnd::Taken))
        .collect();
    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| ends[i].is_none()).collect();
    let mut ran = false;
    let repo = match gs_git::open_recent(std::path::Path::new(&row.path)) {
        Ok(repo) => repo,
        Err(e) => {
            let error = AppError::from(e).to_string();
            let ends: Vec<JobEnd> = ends
                .into_iter()
                .zip(jobs)
                .map(|(end, job)| {
                    end.unwrap_or_else(|| JobEnd::Failed {
                        retry: ctx.index.retry_job(job, &error).unwrap_or(false),
                        error: error.clone(),
                    })
                })
                .collect();
            close(ctx, jobs, &ends);
            return BatchEnd { ends, ran: false };
        }
    };
    let mut pos = 0;
    // After a failed run of several commits, each of them runs alone: the one that fails is
    // retried by itself, the others end with their results.
    let mut alone_until = 0;
    while pos < todo.len() {
        let first = &jobs[todo[pos]];
        let end = if pos < alone_until {
            pos + 1
        } else {
            todo[pos..]
                .iter()
                .position(|&i| jobs[i].trigger != first.trigger || jobs[i].refname != first.refname)
                .map_or(todo.len(), |n| pos + n)
        };
        let group = &todo[pos..end];
        let result = group
            .iter()
            .map(|&i| {
                ObjectId::from_hex(jobs[i].commit_id.as_bytes())
                    .map_err(|e| AppError::usage(format!("bad commit id in the queue: {e}")))
            })
            .collect::<Result<Vec<_>>>()
            .and_then(|commits| {
                let opts = RunOptions {
                    yield_after_run: true,
                    // Only what arrived by itself: a commit asked for by name (MCP) or by
                    // `[watch] backfill` runs whatever the branch did since.
                    skip_superseded: matches!(
                        Trigger::parse(&first.trigger),
                        Trigger::Hook | Trigger::Watch | Trigger::Webhook | Trigger::Poll
                    ),
                    ..RunOptions::new(
                        Trigger::parse(&first.trigger),
                        first.refname.clone(),
                        interrupt,
                    )
                };
                run_commits(Repo::new(ctx, &repo, row), &commits, &opts, &mut |_| {})
            });
        match result {
            Ok(outcome) => {
                ran |= outcome.ran > 0;
                let done = outcome.records.len();
                for (&i, r) in group.iter().zip(outcome.records) {
                    ends[i] = Some(JobEnd::Done(Some(Box::new(r))));
                }
                if done < group.len() {
                    // Interrupted, or stopped after a run: the rest go back to the queue.
                    for &i in &todo[pos + done..] {
                        ends[i] = Some(if outcome.interrupted {
                            JobEnd::Interrupted
                        } else {
                            JobEnd::Released
                        });
                    }
                    break;
                }
                pos = end;
            }
            Err(_) if group.len() > 1 => alone_until = end,
            Err(e) => {
                let i = group[0];
                let error = e.to_string();
                let retry = ctx.index.retry_job(&jobs[i], &error).unwrap_or(false);
                ends[i] = Some(JobEnd::Failed { error, retry });
                pos = end;
            }
        }
    }
    let ends: Vec<JobEnd> = ends
        .into_iter()
        .map(|e| e.unwrap_or(JobEnd::Taken))
        .collect();
    close(ctx, jobs, &ends);
    BatchEnd { ends, ran }
}

/// Move each job to its end's state (one statement per kind of end), and record how each claim
/// ended: with its attempt and owner, and whether the claim still held (a late end changes
/// nothing), so a claim's run can be told from the next one's.
fn close(ctx: &Context, jobs: &[Job], ends: &[JobEnd]) {
    let with = |want: &dyn Fn(&JobEnd) -> bool| -> Vec<&Job> {
        jobs.iter()
            .zip(ends)
            .filter(|(_, e)| want(e))
            .map(|(j, _)| j)
            .collect()
    };
    // A result is evidence whoever holds the job now; only the job's state is fenced.
    let passed = with(&|e| matches!(e, JobEnd::Done(Some(r)) if r.status != Status::Error));
    let errored = with(
        &|e| matches!(e, JobEnd::Done(r) if r.as_ref().is_none_or(|r| r.status == Status::Error)),
    );
    let back = with(&|e| matches!(e, JobEnd::Interrupted | JobEnd::Released));
    in_one(ctx, || close_in(ctx, jobs, ends, [passed, errored, back]));
}

/// Run `f` (statements whose errors it handles itself) in one transaction of the index: one
/// commit instead of one per statement. An index that cannot begin one gives the default, as
/// each statement would have.
fn in_one<T: Default>(ctx: &Context, f: impl FnOnce() -> T) -> T {
    let mut out = None;
    let _ = ctx
        .index
        .atomically(|| -> std::result::Result<(), gs_store::StoreError> {
            out = Some(f());
            Ok(())
        });
    out.unwrap_or_default()
}

fn close_in(ctx: &Context, jobs: &[Job], ends: &[JobEnd], [passed, errored, back]: [Vec<&Job>; 3]) {
    let mut held = std::collections::HashSet::new();
    held.extend(ctx.index.finish_jobs(&passed, true).unwrap_or_default());
    held.extend(ctx.index.finish_jobs(&errored, false).unwrap_or_default());
    held.extend(ctx.index.release_jobs(&back).unwrap_or_default());
    add_events(
        ctx,
        jobs.iter().zip(ends).flat_map(|(job, end)| {
            let how = match end {
                JobEnd::Taken => return Vec::new(),
                JobEnd::Interrupted => "interrupted",
                JobEnd::Released => "released",
                JobEnd::Done(_) => "done",
                JobEnd::Failed { .. } => "failed",
            };
            let held = (!matches!(end, JobEnd::Failed { .. })).then(|| held.contains(&job.id));
            let mut out = vec![(
                job,
                EventKind::JobEnded,
                serde_json::json!({"job": job.id, "attempt": job.attempts, "by": job.owner, "end": how, "held": held}),
            )];
            if let JobEnd::Failed { error, retry } = end {
                let data = serde_json::json!({"error": error, "retry": retry});
                out.push((job, EventKind::RunFailed, data));
            }
            out
        }),
    );
}

/// Record events about jobs, in one statement.
fn add_events<'j>(
    ctx: &Context,
    events: impl IntoIterator<Item = (&'j Job, EventKind, serde_json::Value)>,
) {
    let events: Vec<gs_store::NewEvent> = events
        .into_iter()
        .map(|(job, kind, data)| gs_store::NewEvent {
            kind,
            repository_id: Some(&job.repository_id),
            run_id: None,
            commit: Some(&job.commit_id),
            data,
        })
        .collect();
    let _ = ctx.index.add_events(&events);
}

/// Who claims jobs, and for how long a claim holds without being renewed.
#[derive(Clone)]
pub struct Claimant {
    pub owner: String,
    pub lease: Duration,
}

impl Claimant {
    /// A claimant of this process, of `kind` (`daemon`, `mcp`), with the configured lease.
    pub fn new(ctx: &Context, kind: &str) -> Claimant {
        Claimant {
            owner: crate::app::repo::daemons::owner_id(&ctx.paths.home, kind),
            lease: ctx.layers.resolve().index.lease,
        }
    }

    /// When a claim made or renewed now runs out.
    pub fn lease_until(&self) -> String {
        gs_util::time::rfc3339(gs_util::time::now_millis() + self.lease.as_millis() as i64)
    }

    /// Claim up to `limit` ready jobs of `repositories`.
    pub fn claim(&self, ctx: &Context, limit: usize, repositories: &[&str]) -> Result<Vec<Job>> {
        Ok(ctx
            .index
            .claim_jobs(&self.owner, limit, &self.lease_until(), repositories)?)
    }

    /// Renew the leases of the jobs `ids` this claimant holds.
    pub fn renew(&self, ctx: &Context, ids: &[i64]) -> Result<usize> {
        Ok(ctx
            .index
            .renew_leases(&self.owner, &self.lease_until(), ids)?)
    }
}

/// Queue again what another MCP server of this machine held of this repository's jobs: the
/// caller took the runner lock, so that server was cut off.
pub fn reclaim_from_mcp_servers(ctx: &Context, row: &RepoRow) -> Result<()> {
    let home = crate::app::home::home_id(&ctx.paths.home);
    ctx.index.reap(gs_store::Held::OwnerPrefixIn(
        &format!("{home}/mcp/"),
        &row.repository_id,
    ))?;
    Ok(())
}

/// Run the ready jobs of one repository, one at a time, oldest first, until none is left or
/// `interrupt` is set (for `git sandbox mcp` when no daemon runs). A thread renews the lease of
/// the job that runs. Returns how many ran.
pub fn run_ready(ctx: &Context, row: &RepoRow, interrupt: &AtomicBool) -> Result<usize> {
    let me = Claimant::new(ctx, "mcp");
    let mut ran = 0;
    while !interrupt.load(Ordering::Relaxed) {
        let Some(job) = me
            .claim(ctx, 1, &[row.repository_id.as_str()])?
            .into_iter()
            .next()
        else {
            break;
        };
        let done = AtomicBool::new(false);
        let end = std::thread::scope(|s| {
            s.spawn(|| renew_until(&me, job.id, &done));
            let end = run_job(ctx, row, &job, interrupt);
            done.store(true, Ordering::Relaxed);
            end
        });
        if let JobEnd::Done(_) = end {
            ran += 1;
        }
    }
    Ok(ran)
}

/// Renew the lease of job `id` every third of a lease until `done` (on a connection of its own).
fn renew_until(me: &Claimant, id: i64, done: &AtomicBool) {
    let Ok(ctx) = Context::load() else { return };
    let every = me.lease / 3;
    let mut last = Instant::now();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if last.elapsed() >= every {
            last = Instant::now();
            let _ = me.renew(&ctx, &[id]);
        }
    }
}
