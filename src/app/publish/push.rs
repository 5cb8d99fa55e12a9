//! `[remote] auto_push` through the outbox: a result queues one push of its repository's notes
//! (one row per repository while it waits, however many results come meanwhile), and the drain
//! pushes it; a push that fails is tried again by the outbox's policy ([`super::RETRY`]).

use super::super::Context;
use crate::app::Repo;
use gs_store::{AlertRow, RepoRow};
use std::path::Path;

/// The outbox rows of auto-pushes (beside `webhook` and `command`) are on this channel and the
/// id of the machine's data dir: on a shared index, each machine pushes the notes of its own
/// clone, which only it holds.
pub const CHANNEL_PREFIX: &str = "remote:";
const KIND: &str = "remote.push";

/// This machine's channel.
pub fn channel(ctx: &Context) -> String {
    format!(
        "{CHANNEL_PREFIX}{}",
        super::super::home::home_id(&ctx.paths.home)
    )
}

/// Whether the notes of the repository in `dir` are pushed: `[remote] auto_push` is on and it
/// has a remote.
pub fn wanted(ctx: &Context, dir: &Path) -> bool {
    ctx.layers.resolve().remote.auto_push
        && !gs_git::remote::remotes(dir).is_ok_and(|r| r.is_empty())
}

/// Queue a push of the repository's notes. Never fails the caller.
pub fn queue(ctx: &Context, row: &RepoRow) {
    let _ = ctx.index.queue_alert_once(
        &channel(ctx),
        KIND,
        &row.repository_id,
        // A new request for each result: a push that began before it does not count for it.
        &serde_json::json!({ "asked": gs_util::random_hex(8) }),
    );
}

/// Push one repository's notes; `Err((worth retrying, why))`. A repository that is gone (or
/// forgotten) has nothing left to push.
pub fn deliver(ctx: &Context, a: &AlertRow) -> Result<(), (bool, String)> {
    let Some(Ok(Some(row))) = a
        .repository_id
        .as_deref()
        .map(|id| ctx.index.repository_by_id(id))
    else {
        return Ok(());
    };
    let Ok(repo) = gs_git::open(Path::new(&row.path)) else {
        return Ok(());
    };
    crate::app::publish::remote::auto_push(Repo::new(ctx, &repo, &row))
        .map_err(|problem| (true, format!("{}: {problem}", row.name)))
}

/// The line a caller shows for a push that failed.
pub fn failed(why: &str) -> String {
    format!("auto-push of the results failed ({why}); it is tried again (by the daemon or the next run), or run `git sandbox push`")
}
