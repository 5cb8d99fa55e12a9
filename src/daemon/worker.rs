//! A worker: takes an assigned job, runs it through `app::queue::run_job` (the same pipeline as
//! `git sandbox run`), logs how it ended and reports back. Failing tests are results; only
//! infrastructure errors are retried, with back-off.

use super::{Msg, Shared};
use crate::app::fleet::{self, Missing};
use crate::app::queue::{self, JobEnd};
use crate::app::Context;
use crate::store::{Job, RepoRow};
use gix::ObjectId;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

/// How long a job whose commit is not here yet waits before it is offered again.
const DEFER: std::time::Duration = std::time::Duration::from_secs(5);

pub struct Assignment {
    pub job: Job,
    pub row: RepoRow,
    pub tree_key: (String, String),
}

pub fn tree_of(row: &RepoRow, commit: &str) -> Option<String> {
    let repo = crate::git::open(Path::new(&row.path)).ok()?;
    let id = ObjectId::from_hex(commit.as_bytes()).ok()?;
    crate::git::commit_info(&repo, id)
        .ok()
        .map(|i| i.tree.to_string())
}

pub fn work(
    rx: Arc<Mutex<mpsc::Receiver<Assignment>>>,
    tx: tokio::sync::mpsc::Sender<Msg>,
    shared: Arc<Shared>,
) {
    let ctx = match Context::load() {
        Ok(c) => c,
        Err(e) => {
            super::warn(&format!("worker cannot start: {e}"));
            return;
        }
    };
    loop {
        let next = rx.lock().expect("job queue").recv();
        let Ok(a) = next else { break };
        // A bug must cost one job, not a worker: the scheduler counts on every Done.
        let ran =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_job(&ctx, &a, &shared)));
        if ran.is_err() {
            let _ = ctx
                .index
                .retry_job(&a.job, "the worker panicked; see the daemon's log");
        }
        let _ = tx.blocking_send(Msg::Done {
            tree_key: a.tree_key,
            job: a.job.id,
        });
    }
}

fn run_job(ctx: &Context, a: &Assignment, shared: &Shared) {
    let job = &a.job;
    // Every log line of this job, the run's own included, carries its repository and commit.
    let span = tracing::info_span!(
        "job",
        id = job.id,
        repository = %a.row.name,
        commit = %crate::util::short(&job.commit_id)
    );
    let _in_job = span.enter();
    // On a shared index the commit may have been made on another machine: fetched if the clone
    // lacks it; not pushed yet, it waits for its own machine (the claim does not count).
    if ctx.index.is_shared() {
        match fleet::ensure_commit(ctx, &a.row, &job.commit_id) {
            Ok(()) => {}
            Err(Missing::NotHere) => {
                let later = crate::util::time::rfc3339(
                    crate::util::time::now_millis() + DEFER.as_millis() as i64,
                );
                let _ = ctx.index.defer_job(
                    job,
                    &later,
                    "the commit is not in this machine's clone nor on its remote yet",
                );
                super::log(&format!(
                    "not here yet (not on the remote); offered again in {} s",
                    DEFER.as_secs()
                ));
                return;
            }
            Err(Missing::Failed(e)) => {
                let retry = ctx.index.retry_job(job, &e.to_string()).unwrap_or(false);
                super::warn(&format!(
                    "cannot fetch the commit: {e}{}",
                    if retry {
                        " (will retry)"
                    } else {
                        " (giving up)"
                    }
                ));
                return;
            }
        }
    }
    match queue::run_job(ctx, &a.row, job, &shared.abort) {
        JobEnd::Done(Some(r)) => super::log(&format!("{} ({} ms)", r.status, r.duration_ms)),
        JobEnd::Failed { error, retry } => super::warn(&format!(
            "{error}{}",
            if retry {
                " (will retry)"
            } else {
                " (giving up)"
            }
        )),
        JobEnd::Done(None) | JobEnd::Taken | JobEnd::Interrupted => {}
    }
}
