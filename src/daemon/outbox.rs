//! The daemon's outbox task: one thread delivers what the outbox holds (commit statuses,
//! notifications, `[remote] auto_push`) every 2 s, so posts to GitHub are serialized per token
//! and kept under its rate limits. What it cannot deliver now waits in the index (and outlives
//! a restart). Told to stop (after the workers wrote their last results), it delivers what is
//! due for a last few seconds.

use crate::app::publish::{Drained, Outbox, BRIEFLY};
use crate::app::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn start(stop: Arc<AtomicBool>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("outbox".into())
        .spawn(move || run(&stop))
        .ok()
}

fn run(stop: &AtomicBool) {
    let ctx = match Context::load() {
        Ok(c) => c,
        Err(e) => {
            super::warn(&format!("the outbox cannot deliver: {e}"));
            return;
        }
    };
    let mut outbox = Outbox::default();
    let mut last_errors = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let d = outbox.drain(&ctx, Instant::now() + Duration::from_secs(30));
        report(d, &mut last_errors);
        let pause = Instant::now() + Duration::from_secs(2);
        while Instant::now() < pause && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    report(
        outbox.drain(&ctx, Instant::now() + BRIEFLY),
        &mut last_errors,
    );
}

/// Log what was given up; an error that keeps coming (a bad `[github]` setting) once.
fn report(d: Drained, last_errors: &mut Vec<String>) {
    for f in d.failed {
        super::warn(&f);
    }
    if d.errors != *last_errors {
        for e in &d.errors {
            super::warn(e);
        }
        *last_errors = d.errors;
    }
}
