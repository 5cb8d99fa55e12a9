//! The daemon's commit-status poster: one thread, so posts to GitHub are serialized per token and
//! kept under its rate limits; it looks for due statuses every 2 s. What it cannot post now waits
//! in the index (and outlives a restart). The same thread delivers the notifications
//! (`[notify]`) that are due.

use crate::app::{alerts, github, Context};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn start(stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("statuses".into())
        .spawn(move || {
            let ctx = match Context::load() {
                Ok(c) => c,
                Err(e) => {
                    super::warn(&format!("commit statuses cannot be posted: {e}"));
                    return;
                }
            };
            let mut poster = github::Poster::default();
            let mut last_error = String::new();
            while !stop.load(Ordering::Relaxed) {
                match poster.post_due(&ctx, Instant::now() + Duration::from_secs(30)) {
                    Ok(p) => {
                        for f in p.failed {
                            super::warn(&f);
                        }
                        last_error.clear();
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if text != last_error {
                            super::warn(&format!("commit statuses: {text}"));
                            last_error = text;
                        }
                    }
                }
                match alerts::deliver_due(&ctx, Instant::now() + Duration::from_secs(30)) {
                    Ok(d) => {
                        for f in d.failed {
                            super::warn(&f);
                        }
                    }
                    Err(e) => super::warn(&format!("notifications: {e}")),
                }
                std::thread::sleep(Duration::from_secs(2));
            }
        });
}
