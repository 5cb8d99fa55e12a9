//! A worker: takes an assigned batch of jobs (one repository's), runs it through
//! `app::intake::queue::run_jobs` (the same pipeline as `git sandbox run`), logs how each job ended and
//! reports back. Failing tests are results; only infrastructure errors are retried, with
//! back-off.

use super::supervise::{Body, Life};
use super::{Msg, Shared};
use crate::app::intake::fleet::{self, Missing};
use crate::app::intake::queue::{self, JobEnd};
use crate::app::run::audit;
use crate::app::Context;
use gix::ObjectId;
use gs_store::{Job, RepoRow};
use std::sync::{mpsc, Arc, Mutex};

/// How long a job whose commit is not here yet waits before it is offered again.
const DEFER: std::time::Duration = std::time::Duration::from_secs(5);

/// Jobs of one repository for one worker, oldest first, each with the (repository, tree) it
/// runs: the scheduler never runs two jobs of one tree at once in different workers.
pub struct Assignment {
    pub row: RepoRow,
    pub jobs: Vec<(Job, TreeKey)>,
}

pub type TreeKey = (String, String);

impl Assignment {
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.jobs.iter().map(|(j, _)| j.id)
    }
}

/// The tree of `commit` in `repo` (None when the commit is not there).
pub fn tree_of(repo: &gix::Repository, commit: &str) -> Option<String> {
    let id = ObjectId::from_hex(commit.as_bytes()).ok()?;
    gs_git::commit_info(repo, id)
        .ok()
        .map(|i| i.tree.to_string())
}

/// A worker's loop: batches until the scheduler closes the channel.
pub fn body(
    rx: Arc<Mutex<mpsc::Receiver<Assignment>>>,
    tx: tokio::sync::mpsc::Sender<Msg>,
    shared: Arc<Shared>,
) -> Body {
    Box::new(move |_: &Life| {
        let ctx = Context::load().map_err(|e| format!("the worker cannot start: {e}"))?;
        loop {
            let waited = std::time::Instant::now();
            let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok(a) = next else { return Ok(()) };
            let _t = gs_util::trace::wanted().then(|| {
                let ms = waited.elapsed().as_secs_f64() * 1000.0;
                gs_util::trace::line("worker: waited for a batch", ms);
                gs_util::trace::span("worker: batch")
            });
            // A bug must cost one batch, not a worker: the scheduler counts on every Done. Jobs
            // that ended before it are not moved (their claims ended).
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_batch(&ctx, &a, &shared)
            }));
            let ran = ran.unwrap_or_else(|_| {
                for (job, _) in &a.jobs {
                    let _ = ctx
                        .index
                        .retry_job(job, "the worker panicked; see the daemon's log");
                }
                true
            });
            let _ = tx.blocking_send(Msg::Done {
                jobs: a.jobs.into_iter().map(|(j, key)| (j.id, key)).collect(),
                ran,
            });
        }
    })
}

/// Run a batch; returns whether some commit's tests had to run.
fn run_batch(ctx: &Context, a: &Assignment, shared: &Shared) -> bool {
    // On a shared index a commit may have been made on another machine: fetched if the clone
    // lacks it; not pushed yet, it waits for its own machine (the claim does not count).
    let all: Vec<&Job> = a.jobs.iter().map(|(j, _)| j).collect();
    let jobs: Vec<Job> = if ctx.index.is_shared() {
        here(ctx, &a.row, &all)
    } else {
        all.into_iter().cloned().collect()
    };
    let end = queue::run_jobs(ctx, &a.row, &jobs, &shared.abort);
    let mut made = Vec::new();
    for (job, end) in jobs.iter().zip(end.ends) {
        // Every log line of a job carries its repository and commit.
        let span = tracing::info_span!(
            "job",
            id = job.id,
            repository = %a.row.name,
            commit = %gs_util::short(&job.commit_id)
        );
        let _in_job = span.enter();
        match end {
            JobEnd::Done(Some(r)) => {
                super::log(&format!("{} ({} ms)", r.status, r.duration_ms));
                made.push(*r);
            }
            JobEnd::Failed { error, retry } => super::warn(&format!(
                "{error}{}",
                if retry {
                    " (will retry)"
                } else {
                    " (giving up)"
                }
            )),
            JobEnd::Done(None) | JobEnd::Taken | JobEnd::Interrupted | JobEnd::Released => {}
        }
    }
    // A production commit due a test map has one made by a process of its own, at idle
    // priority (see `app::run::testmap`).
    crate::app::run::testmap::after(ctx, &a.row, &made);
    // Once the batch's results are out: a branch due an audit has its newest warm result made
    // again cold (see `app::run::audit`).
    match audit::after(ctx, &a.row, &made, &shared.abort) {
        Ok(done) => {
            for d in done {
                let said = format!(
                    "audit of {} at {}: warm {}, cold {} ({})",
                    d.branch,
                    gs_util::short(&d.commit),
                    d.warm,
                    d.cold.map_or("no result".to_string(), |c| c.to_string()),
                    d.state.outcome.as_deref().unwrap_or("")
                );
                if d.state.outcome.as_deref() == Some("disagreed") {
                    super::warn(&format!(
                        "{said}: discarded {}, made again {} result(s)",
                        d.state.discarded.join(", "),
                        d.state.rerun.len()
                    ));
                } else {
                    super::log(&said);
                }
            }
        }
        Err(e) => super::warn(&format!("cache audit: {e}")),
    }
    end.ran
}

/// The jobs whose commits are in this machine's clone (fetched, once, if some were not); a
/// job whose commit cannot be had is deferred or retried, and left out.
fn here(ctx: &Context, row: &RepoRow, jobs: &[&Job]) -> Vec<Job> {
    let commits: Vec<&str> = jobs.iter().map(|j| j.commit_id.as_str()).collect();
    let found = fleet::ensure_commits(ctx, row, &commits);
    let mut kept = Vec::with_capacity(jobs.len());
    for (job, found) in jobs.iter().zip(found) {
        let span = tracing::info_span!(
            "job",
            id = job.id,
            repository = %row.name,
            commit = %gs_util::short(&job.commit_id)
        );
        let _in_job = span.enter();
        match found {
            Ok(()) => kept.push((*job).clone()),
            Err(Missing::NotHere) => {
                let later =
                    gs_util::time::rfc3339(gs_util::time::now_millis() + DEFER.as_millis() as i64);
                let _ = ctx.index.defer_job(
                    job,
                    &later,
                    "the commit is not in this machine's clone nor on its remote yet",
                );
                super::log(&format!(
                    "not here yet (not on the remote); offered again in {} s",
                    DEFER.as_secs()
                ));
            }
            Err(Missing::Failed(e)) => {
                let retry = ctx.index.retry_job(job, &e).unwrap_or(false);
                super::warn(&format!(
                    "cannot fetch the commit: {e}{}",
                    if retry {
                        " (will retry)"
                    } else {
                        " (giving up)"
                    }
                ));
            }
        }
    }
    kept
}
