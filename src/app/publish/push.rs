//! `[remote] auto_push` through the outbox: a result queues one push of its repository's notes
//! (one row per repository while it waits, however many results come meanwhile), and the drain
//! pushes it; a push that fails is tried again by the outbox's policy ([`super::RETRY`]).

use super::super::Context;
use crate::store::{AlertRow, RepoRow};
use std::path::Path;

/// The outbox rows of auto-pushes (beside `webhook` and `command`).
pub const CHANNEL: &str = "remote";
const KIND: &str = "remote.push";

/// Queue a push of the repository's notes when `[remote] auto_push` is on and it has a remote.
/// Never fails the caller.
pub fn queue(ctx: &Context, dir: &Path, row: &RepoRow) {
    if !ctx.layers.resolve().remote.auto_push
        || crate::git::remote::remotes(dir).is_ok_and(|r| r.is_empty())
    {
        return;
    }
    let _ = ctx
        .index
        .queue_alert_once(CHANNEL, KIND, &row.repository_id, &serde_json::json!({}));
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
    let Ok(repo) = crate::git::open(Path::new(&row.path)) else {
        return Ok(());
    };
    super::super::remote::auto_push(ctx, &repo, &row)
        .map_err(|problem| (true, format!("{}: {problem}", row.name)))
}

/// The line a caller shows for a push that failed.
pub fn failed(why: &str) -> String {
    format!("auto-push of the results failed ({why}); it is tried again (by the daemon or the next run), or run `git sandbox push`")
}
