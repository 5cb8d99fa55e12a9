//! The queue as its users see it: ask for a commit's result (the current one at once when the
//! same tree was run under the same config, else a job), see where a commit stands, wait for it,
//! and run one job (the daemon's workers, and `git sandbox mcp` when no daemon runs).

use super::run::{run_commits, RunOptions};
use super::{results, AppError, Context, Result};
use crate::config::ConfigFile;
use crate::model::{RunRecord, Status, Trigger};
use crate::store::{Job, RepoRow};
use gix::ObjectId;
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
}

impl Standing {
    /// `done`, `pending`, `assigned`, `running` or `not_queued`.
    pub fn state(&self) -> &str {
        match self {
            Standing::Done(_) => "done",
            Standing::Queued(s) => s,
            Standing::NotQueued => "not_queued",
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
pub fn standing(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commit: ObjectId,
    refname: Option<&str>,
) -> Result<Standing> {
    if let Some(r) = results::current_record(ctx, repo, row, commit, refname)? {
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
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commit: ObjectId,
    refname: Option<&str>,
    trigger: Trigger,
) -> Result<Requested> {
    let daemon = crate::ipc::running(&ctx.paths.home).is_some();
    let standing = standing(ctx, repo, row, commit, refname)?;
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
    crate::ipc::ping(&ctx.paths.home, &row.repository_id);
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
/// is not queued at all (nothing would ever come) or when `interrupt` is set.
pub fn wait(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    commit: ObjectId,
    refname: Option<&str>,
    timeout: Duration,
    interrupt: &AtomicBool,
) -> Result<Standing> {
    let deadline = Instant::now() + timeout;
    loop {
        let s = standing(ctx, repo, row, commit, refname)?;
        if let Standing::NotQueued = s {
            // A run that could not make a result (a broken `.sandbox.toml`, a setup that
            // failed) left an `error` record: that is what the waiter needs to see.
            let mut reader = results::NoteReader::new(repo)?;
            if let Some(r) = results::own_record(ctx, repo, row, &mut reader, commit)?
                .filter(|r| r.status == Status::Error)
            {
                return Ok(Standing::Done(Box::new(r)));
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
    /// It ran (a failing test is a result, not an error).
    Done(Option<Box<RunRecord>>),
    /// The run could not be made (an infrastructure error): retried later unless given up.
    Failed { error: String, retry: bool },
}

/// Run one job this process claimed (`assigned`, its attempt the fencing token): `running`, then
/// through the same pipeline as `git sandbox run`, then `completed`/`failed`, or back to
/// `pending` when interrupted. Every change of the job's state is fenced: once the claim was
/// taken back (its lease ran out) nothing here moves the job.
pub fn run_job(ctx: &Context, row: &RepoRow, job: &Job, interrupt: &AtomicBool) -> JobEnd {
    let repo_id = Some(job.repository_id.as_str());
    let event = |kind: &str, data: serde_json::Value| {
        let _ = ctx
            .index
            .add_event(kind, repo_id, None, Some(&job.commit_id), &data);
    };
    if !ctx.index.start_job(job).unwrap_or(false) {
        return JobEnd::Taken;
    }
    // `run.started` comes from the run itself (as for `git sandbox run`), only when it runs.
    event(
        "job.started",
        serde_json::json!({"job": job.id, "trigger": job.trigger, "attempt": job.attempts, "by": job.owner}),
    );
    let result = (|| {
        let repo = crate::git::open(std::path::Path::new(&row.path))?;
        let commit = ObjectId::from_hex(job.commit_id.as_bytes())
            .map_err(|e| AppError::usage(format!("bad commit id in the queue: {e}")))?;
        let opts = RunOptions {
            force: false,
            trigger: Trigger::parse(&job.trigger),
            refname: job.refname.clone(),
            flags: ConfigFile::default(),
            interrupt,
        };
        run_commits(ctx, &repo, row, &[commit], &opts, &mut |_| {})
    })();
    // Every end of a claim is an event (with its attempt and owner, and whether the claim still
    // held: a late end changes nothing), so a claim's run can be told from the next one's.
    let ended = |how: &str, held: Option<bool>| {
        event(
            "job.ended",
            serde_json::json!({"job": job.id, "attempt": job.attempts, "by": job.owner, "end": how, "held": held}),
        )
    };
    match result {
        Ok(outcome) if outcome.interrupted => {
            ended("interrupted", ctx.index.release_job(job).ok());
            JobEnd::Interrupted
        }
        Ok(outcome) => {
            // A result is evidence whoever holds the job now; only the job's state is fenced.
            let ok = outcome.records.iter().all(|r| r.status != Status::Error);
            ended("done", ctx.index.finish_job(job, ok).ok());
            JobEnd::Done(outcome.records.into_iter().next().map(Box::new))
        }
        Err(e) => {
            let retry = ctx.index.retry_job(job, &e.to_string()).unwrap_or(false);
            ended("failed", None);
            event(
                "run.failed",
                serde_json::json!({"error": e.to_string(), "retry": retry}),
            );
            JobEnd::Failed {
                error: e.to_string(),
                retry,
            }
        }
    }
}

/// Who claims jobs, and for how long a claim holds without being renewed.
pub struct Claimant {
    pub owner: String,
    pub lease: Duration,
}

impl Claimant {
    /// A claimant of this process, of `kind` (`daemon`, `mcp`), with the configured lease.
    pub fn new(ctx: &Context, kind: &str) -> Claimant {
        Claimant {
            owner: super::daemons::owner_id(&ctx.paths.home, kind),
            lease: ctx.layers.resolve().index.lease,
        }
    }

    /// When a claim made or renewed now runs out.
    pub fn lease_until(&self) -> String {
        crate::util::time::rfc3339(crate::util::time::now_millis() + self.lease.as_millis() as i64)
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
