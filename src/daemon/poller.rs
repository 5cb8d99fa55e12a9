//! `[remote] poll`: GitHub does not redeliver a webhook by itself and a daemon behind NAT receives
//! none, so the daemon also asks each repository's remote what moved (`git ls-remote`: one round
//! trip, no REST quota), fetches it and queues the new commits. A remote that fails is logged when
//! its error changes (not on every poll) and recorded as an event.

use crate::app::{intake::fetch, Context};
use crate::model::EventKind;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Start polling every `every`; set `stop` to end it (it is not waited for: a remote may hang).
pub fn start(every: Duration, stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("poll".into())
        .spawn(move || run(every, &stop));
}

fn run(every: Duration, stop: &AtomicBool) {
    let ctx = match Context::load() {
        Ok(c) => c,
        Err(e) => {
            super::warn(&format!("polling cannot start: {e}"));
            return;
        }
    };
    let mut last_error: HashMap<String, String> = HashMap::new();
    loop {
        let round = Instant::now();
        for row in ctx.index.repositories().unwrap_or_default() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(repo) = crate::git::open(Path::new(&row.path)) else {
                continue;
            };
            match fetch::poll(&ctx, &repo, &row) {
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
        while round.elapsed() < every {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
