//! A worker: takes an assigned job, runs it through `app::queue::run_job` (the same pipeline as
//! `git sandbox run`), logs how it ended and reports back. Failing tests are results; only
//! infrastructure errors are retried, with back-off.

use super::{Msg, Shared};
use crate::app::queue::{self, JobEnd};
use crate::app::Context;
use crate::store::{Job, RepoRow};
use gix::ObjectId;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

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
                .retry_job(a.job.id, "the worker panicked; see the daemon's log");
        }
        let _ = tx.blocking_send(Msg::Done {
            tree_key: a.tree_key,
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
