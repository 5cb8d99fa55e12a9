//! A worker: takes an assigned job, runs the commit through `app::run` (the same pipeline as
//! `git sandbox run`), and reports back. Failing tests are results; only infrastructure errors
//! are retried, with back-off.

use super::{Msg, Shared};
use crate::app::run::{run_commits, RunOptions};
use crate::app::Context;
use crate::config::ConfigFile;
use crate::model::Trigger;
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
    let repo_id = Some(job.repository_id.as_str());
    let event = |kind: &str, data: serde_json::Value| {
        let _ = ctx
            .index
            .add_event(kind, repo_id, None, Some(&job.commit_id), &data);
    };
    if !ctx
        .index
        .transition_job(job.id, "assigned", "running")
        .unwrap_or(false)
    {
        return;
    }
    // `run.started` comes from the run itself (as for `git sandbox run`), only when it runs.
    event(
        "job.started",
        serde_json::json!({"job": job.id, "trigger": job.trigger, "attempt": job.attempts + 1}),
    );
    let result = (|| {
        let repo = crate::git::open(Path::new(&a.row.path))?;
        let commit = ObjectId::from_hex(job.commit_id.as_bytes())
            .map_err(|e| crate::app::AppError::usage(format!("bad commit id in the queue: {e}")))?;
        let trigger = Trigger::parse(&job.trigger);
        let opts = RunOptions {
            force: false,
            trigger,
            refname: job.refname.clone(),
            flags: ConfigFile::default(),
            interrupt: &shared.abort,
        };
        run_commits(ctx, &repo, &a.row, &[commit], &opts, &mut |_| {})
    })();
    match result {
        Ok(outcome) if outcome.interrupted => {
            let _ = ctx.index.transition_job(job.id, "running", "pending");
        }
        Ok(outcome) => {
            let ok = outcome
                .records
                .iter()
                .all(|r| r.status != crate::model::Status::Error);
            let _ = ctx
                .index
                .complete_job(&job.repository_id, &job.commit_id, ok);
            if let Some(r) = outcome.records.first() {
                super::log(&format!("{} ({} ms)", r.status, r.duration_ms));
            }
        }
        Err(e) => {
            let retry = ctx.index.retry_job(job.id, &e.to_string()).unwrap_or(false);
            event(
                "run.failed",
                serde_json::json!({"error": e.to_string(), "retry": retry}),
            );
            super::warn(&format!(
                "{e}{}",
                if retry {
                    " (will retry)"
                } else {
                    " (giving up)"
                }
            ));
        }
    }
}
