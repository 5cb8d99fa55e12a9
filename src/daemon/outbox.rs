//! The daemon's outbox loop: one thread delivers what the outbox holds (commit statuses,
//! notifications, `[remote] auto_push`) every 2 s, so posts to GitHub are serialized per token
//! and kept under its rate limits. What it cannot deliver now waits in the index (and outlives
//! a restart). Told to stop (after the workers wrote their last results), it delivers what is
//! due for a last few seconds.

use super::supervise::{Body, Life};
use crate::app::publish::{Drained, Outbox, BRIEFLY};
use crate::app::Context;
use std::time::{Duration, Instant};

/// The outbox loop: it delivers every 2 s until told to stop, then for a last
/// [`BRIEFLY`].
pub fn body() -> Body {
    Box::new(|life: &Life| {
        let ctx = Context::load().map_err(|e| format!("the outbox cannot deliver: {e}"))?;
        let mut outbox = Outbox::default();
        let mut last_errors = Vec::new();
        while !life.stopping() {
            let d = outbox.drain(&ctx, Instant::now() + Duration::from_secs(30));
            report(d, &mut last_errors);
            if life.sleep(Duration::from_secs(2)) {
                break;
            }
        }
        report(
            outbox.drain(&ctx, Instant::now() + BRIEFLY),
            &mut last_errors,
        );
        Ok(())
    })
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
