//! The index as the daemon sees it. When the database cannot be reached (down, restarting, cut
//! off) the daemon asks it nothing new: it keeps running the jobs it holds, tries the database
//! again after a back-off (1 s, doubling to 30 s), says so once in the log and in
//! `daemon status`, and says again when it is back. Nothing is lost meanwhile: what a run made
//! is in git, and a job whose lease could not be renewed returns to the queue.

use gs_store::StoreError;
use gs_util::backoff::Backoff;
use std::time::{Duration, Instant};

/// 1 s, doubling to 30 s: also how a lost `LISTEN` connection is opened again (`listen.rs`).
pub const RETRY: Backoff = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));

#[derive(Default)]
pub struct Health {
    away: Option<Away>,
}

struct Away {
    since: Instant,
    since_wall: String,
    error: String,
    next: Instant,
    backoff: Duration,
}

impl Health {
    /// Whether to ask the index something now (always while it answers).
    pub fn may_try(&self) -> bool {
        self.away.as_ref().is_none_or(|a| Instant::now() >= a.next)
    }

    /// Note how a call to the index went; a failure that is not about reaching it changes
    /// nothing here.
    pub fn record<T>(&mut self, r: &Result<T, StoreError>) {
        match r {
            Ok(_) => self.back(),
            Err(e) if e.is_unreachable() => self.lost(e.to_string()),
            Err(_) => {}
        }
    }

    fn back(&mut self) {
        if let Some(a) = self.away.take() {
            super::log(&format!(
                "the index answers again after {} s away",
                a.since.elapsed().as_secs()
            ));
        }
    }

    fn lost(&mut self, error: String) {
        let now = Instant::now();
        match &mut self.away {
            Some(a) => {
                a.backoff = RETRY.next(a.backoff);
                a.next = now + a.backoff;
                a.error = error;
            }
            None => {
                super::warn(&format!(
                    "the index cannot be reached ({error}); running what is held, trying again with back-off"
                ));
                self.away = Some(Away {
                    since: now,
                    since_wall: gs_util::time::now_rfc3339(),
                    error,
                    next: now + RETRY.first,
                    backoff: RETRY.first,
                });
            }
        }
    }

    /// For `daemon status`: `{"reachable": true}` or since when and why not.
    pub fn json(&self) -> serde_json::Value {
        match &self.away {
            None => serde_json::json!({"reachable": true}),
            Some(a) => serde_json::json!({
                "reachable": false, "since": a.since_wall, "error": a.error,
                "retry_in_ms": a.next.saturating_duration_since(Instant::now()).as_millis() as u64,
            }),
        }
    }
}
