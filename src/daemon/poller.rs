//! `[remote] poll`: GitHub does not redeliver a webhook by itself and a daemon behind NAT receives
//! none, so the daemon also asks each repository's remote what moved (`git ls-remote`: one round
//! trip, no REST quota), fetches it and queues the new commits. A remote that fails is logged when
//! its error changes (not on every poll) and recorded as an event.

use super::supervise::{Body, Life};
use crate::app::{intake::fetch, Context, Repo};
use gs_model::EventKind;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The poll loop: every repository's remote, every `every`, until told to stop.
pub fn body(every: Duration) -> Body {
    Box::new(move |life: &Life| {
        let ctx = Context::load().map_err(|e| format!("polling cannot start: {e}"))?;
        let mut last_error: HashMap<String, String> = HashMap::new();
        loop {
            let round = Instant::now();
            for row in ctx.index.repositories().unwrap_or_default() {
                if life.stopping() {
                    return Ok(());
                }
                let Ok(repo) = gs_git::open(Path::new(&row.path)) else {
                    continue;
                };
                poll_one(&ctx, &repo, &row, &mut last_error);
            }
            if life.sleep(every.saturating_sub(round.elapsed())) {
                return Ok(());
            }
        }
    })
}

/// Poll one repository's remote; its error is said when it changed.
fn poll_one(
    ctx: &Context,
    repo: &gix::Repository,
    row: &gs_store::RepoRow,
    last_error: &mut HashMap<String, String>,
) {
    match fetch::poll(Repo::new(ctx, repo, row)) {
        Ok(p) => {
            last_error.remove(&row.repository_id);
            if p.queued > 0 {
                super::log(&format!(
                    "{}: the remote moved ({}); queued {} commits",
                    row.name,
                    p.fetched.join(", "),
                    p.queued
                ));
            }
        }
        Err(e) => {
            let text = e.to_string();
            if last_error.get(&row.repository_id) != Some(&text) {
                super::warn(&format!("{}: polling its remote failed: {text}", row.name));
                let _ = ctx.index.add_event(
                    EventKind::RemotePollFailed,
                    Some(&row.repository_id),
                    None,
                    None,
                    &serde_json::json!({"error": text}),
                );
                last_error.insert(row.repository_id.clone(), text);
            }
        }
    }
}
