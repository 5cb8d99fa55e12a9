//! The outbox: what leaves this machine after something happened — commit statuses or check
//! runs on GitHub, notifications (`[notify]`), and the pushes of `[remote] auto_push`. An
//! [`Event`] queues them in the index, in the step that records what happened (a result: the
//! same transaction that indexes it), and [`Outbox::drain`] delivers what is due: the daemon's
//! outbox task, else `run` and `mcp` for a few seconds before they end (what is left waits in
//! the index for the daemon or the next command). One retry policy for all of them ([`RETRY`],
//! [`ATTEMPTS`]); nothing here fails or slows a run.

pub mod alert_queue;
mod alerts;
pub mod bounds;
pub mod exchange;
pub mod github;
mod push;
pub mod remote;
mod statuses;

use super::Context;
use gs_model::{EventKind, RunRecord};
use gs_store::RepoRow;
use gs_util::backoff::Backoff;
use std::path::Path;
use std::time::{Duration, Instant};

/// A delivery that failed in a way worth another try waits 5 s, doubling, at most an hour.
pub const RETRY: Backoff = Backoff::doubling(Duration::from_secs(5), Duration::from_secs(3600));
/// Attempts of one delivery before it is given up (with why, in the index).
pub const ATTEMPTS: i64 = 10;

/// How long `run` and `mcp` deliver before they end, when no daemon does.
pub const BRIEFLY: Duration = Duration::from_secs(10);

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// When (seconds since the epoch) a delivery that failed `attempts` times before this one is
/// tried again.
fn retry_at(attempts: i64) -> i64 {
    now_epoch() + RETRY.delay(attempts.max(0) as u32 + 1).as_secs() as i64
}

/// Where a repository's results go: its repository on GitHub (`owner`, `name`) when statuses
/// are wanted there and a token is configured, and whether its notes are pushed (`[remote]
/// auto_push`, a remote to push to). Asked of git before the transaction that records them.
pub struct Destinations {
    github: Option<(String, String)>,
    push: bool,
}

impl Destinations {
    pub fn of(ctx: &Context, repo: &gs_git::Repository) -> Destinations {
        Destinations {
            github: crate::app::publish::github::github_repo(ctx, repo),
            push: push::wanted(ctx, &gs_git::repo_root(repo)),
        }
    }
}

/// What happened that may have to leave this machine.
pub enum Event<'a> {
    /// Results were written as notes and are about to be indexed (the index still holds what
    /// it held before them: a record it holds already is no news).
    Recorded {
        to: &'a Destinations,
        row: &'a RepoRow,
        records: &'a [RunRecord],
    },
    /// News for people (`[notify]`): a changed verdict, a promotion, a rollback.
    News {
        kind: EventKind,
        row: Option<&'a RepoRow>,
        data: serde_json::Value,
    },
}

/// Queue what `event` sends: for results, their statuses on GitHub (a repository there, with a
/// token), a notification for each that failed after its parent passed, and a push of the
/// notes (`[remote] auto_push`); for news, a notification on each channel. Never fails the
/// caller: the worst is that nothing is sent.
pub fn emit(ctx: &Context, event: Event<'_>) {
    match event {
        Event::Recorded { to, row, records } => {
            if records.is_empty() {
                return;
            }
            if let Some(github) = &to.github {
                crate::app::publish::github::queue_statuses(ctx, github, row, records);
            }
            crate::app::publish::alert_queue::regressions(ctx, row, records);
            if to.push {
                push::queue(ctx, row);
            }
        }
        Event::News { kind, row, data } => {
            crate::app::publish::alert_queue::queue(ctx, kind, row, data)
        }
    }
}

/// Queue a push of every repository's notes (`[remote] auto_push`): what the daemon does when
/// it starts, for results made while nobody pushed.
pub fn queue_pushes(ctx: &Context, rows: &[&RepoRow]) {
    for row in rows {
        if push::wanted(ctx, Path::new(&row.path)) {
            push::queue(ctx, row);
        }
    }
}

/// What one drain delivered, and what it could not.
#[derive(Debug, Default)]
pub struct Drained {
    /// Statuses posted, notifications and pushes delivered.
    pub delivered: usize,
    /// Commit statuses still waiting (a rate limit, GitHub unreachable, no token yet).
    pub statuses_waiting: i64,
    /// Given up, or an auto-push that failed this time: one line each.
    pub failed: Vec<String>,
    /// Why a kind of delivery could not be tried at all (a bad `[github]` setting), one line
    /// each.
    pub errors: Vec<String>,
}

/// The deliverer, with what it remembers between drains (GitHub's client and rate limit).
#[derive(Default)]
pub struct Outbox {
    poster: statuses::Poster,
}

impl Outbox {
    /// Deliver what is due, until `deadline`: commit statuses, then notifications and pushes.
    pub fn drain(&mut self, ctx: &Context, deadline: Instant) -> Drained {
        let mut out = Drained::default();
        match self.poster.post_due(ctx, deadline) {
            Ok(p) => {
                out.delivered += p.posted;
                out.statuses_waiting = p.waiting;
                out.failed.extend(p.failed);
            }
            Err(e) => out.errors.push(format!("commit statuses not posted: {e}")),
        }
        // Notifications get a moment of their own even when GitHub took the whole time.
        let deadline = deadline.max(Instant::now() + Duration::from_secs(2));
        match alerts::deliver_due(ctx, deadline) {
            Ok(d) => {
                out.delivered += d.sent;
                out.failed.extend(d.failed);
            }
            Err(e) => out.errors.push(format!("notifications not delivered: {e}")),
        }
        out
    }
}

/// Drain for at most [`BRIEFLY`] when no daemon runs on this machine to do it (`None` when
/// one does): what a command that made results or news does before it ends.
pub fn drain_briefly(ctx: &Context) -> Option<Drained> {
    if gs_ipc::running(&ctx.paths.home).is_some() {
        return None;
    }
    Some(Outbox::default().drain(ctx, Instant::now() + BRIEFLY))
}
