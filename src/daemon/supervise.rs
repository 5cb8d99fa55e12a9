//! The daemon's background loops under one supervisor. Each loop (a worker, the outbox, polling
//! remotes, webhook deliveries, the HTTP listener, PostgreSQL's `LISTEN`) has a name and a thread
//! of its own. One that fails (returns an error) or panics is logged with its name and started
//! again after a back-off (`util::backoff`; from the first wait again once it said it is healthy
//! or ran a minute). On stop the loops are told, and joined within the stop's deadline: a loop
//! still busy then (a remote that hangs) is named in the log and left to the process's exit.

use gs_util::backoff::Backoff;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A life that lasted this long ends its loop's run of failures.
const STEADY: Duration = Duration::from_secs(60);

/// What a loop's body is handed: whether to stop, and a way to say it works.
pub struct Life {
    stopped: Mutex<bool>,
    told: Condvar,
    /// The loop's failures in a row (reset when it says it is healthy).
    failures: AtomicU32,
    restarts: AtomicU32,
    error: Mutex<Option<String>>,
}

impl Life {
    fn new() -> Life {
        Life {
            stopped: Mutex::new(false),
            told: Condvar::new(),
            failures: AtomicU32::new(0),
            restarts: AtomicU32::new(0),
            error: Mutex::new(None),
        }
    }

    /// Whether the loop was told to stop.
    pub fn stopping(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleep `d`, or less when told to stop; returns whether it was.
    pub fn sleep(&self, d: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        let (stopped, _) = self
            .told
            .wait_timeout_while(stopped, d, |s| !*s)
            .unwrap_or_else(|p| p.into_inner());
        *stopped
    }

    /// The loop works again (connected, say): its next failure waits the first wait.
    pub fn healthy(&self) {
        self.failures.store(0, Ordering::Relaxed);
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.told.notify_all();
    }
}

/// A loop's body: one life, until it is told to stop (`Ok`) or fails (`Err`: why, one line).
pub type Body = Box<dyn FnMut(&Life) -> Result<(), String> + Send>;

struct Loop {
    name: String,
    life: Arc<Life>,
    handle: JoinHandle<()>,
}

/// The loops started, in the order they were.
#[derive(Default)]
pub struct Supervisor {
    loops: Vec<Loop>,
}

impl Supervisor {
    /// Start `body` as the loop `name`, started again after `backoff` whenever it fails.
    pub fn start(&mut self, name: &str, backoff: Backoff, body: Body) -> std::io::Result<()> {
        let life = Arc::new(Life::new());
        let handle = std::thread::Builder::new().name(name.into()).spawn({
            let (name, life) = (name.to_string(), life.clone());
            move || supervise(&name, backoff, body, &life)
        })?;
        self.loops.push(Loop {
            name: name.into(),
            life,
            handle,
        });
        Ok(())
    }

    /// Each loop's name, how often it was started again, and why it last failed (while it has
    /// not worked since), for `daemon status`.
    pub fn json(&self) -> serde_json::Value {
        let loops = self.loops.iter().map(|l| {
            let error = l.life.error.lock().unwrap_or_else(|p| p.into_inner());
            (
                l.name.clone(),
                serde_json::json!({
                    "running": !l.handle.is_finished(),
                    "restarts": l.life.restarts.load(Ordering::Relaxed),
                    "error": *error,
                }),
            )
        });
        serde_json::Value::Object(loops.collect())
    }

    /// Tell the loops `which` names to stop and join them, waiting until `deadline` at most (no
    /// deadline: until they end); returns the names of those still running then.
    pub fn stop(&mut self, which: impl Fn(&str) -> bool, deadline: Option<Instant>) -> Vec<String> {
        let (told, kept): (Vec<Loop>, Vec<Loop>) = std::mem::take(&mut self.loops)
            .into_iter()
            .partition(|l| which(&l.name));
        self.loops = kept;
        for l in &told {
            l.life.stop();
        }
        let mut left = Vec::new();
        for l in told {
            if let Some(deadline) = deadline {
                while !l.handle.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !l.handle.is_finished() {
                    left.push(l.name);
                    continue;
                }
            }
            let _ = l.handle.join();
        }
        left
    }
}

/// Run `body` until it ends when told to stop, starting it again after each failure.
fn supervise(name: &str, backoff: Backoff, mut body: Body, life: &Life) {
    loop {
        let began = Instant::now();
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(life)));
        let why = match ended {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(panic) => format!("panicked: {}", panic_text(&panic)),
        };
        if life.stopping() {
            super::warn(&format!("the {name} loop failed while stopping: {why}"));
            return;
        }
        if began.elapsed() >= STEADY {
            life.failures.store(0, Ordering::Relaxed);
        }
        let failures = life.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let wait = backoff.delay(failures);
        super::warn(&format!(
            "the {name} loop failed: {why}; starting it again in {} s",
            wait.as_secs_f64()
        ));
        *life.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        if life.sleep(wait) {
            return;
        }
        life.restarts.fetch_add(1, Ordering::Relaxed);
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_that_fails_is_started_again_and_a_stop_joins_it() {
        let mut s = Supervisor::default();
        let lives = Arc::new(AtomicU32::new(0));
        let counted = lives.clone();
        let quick = Backoff::doubling(Duration::from_millis(10), Duration::from_millis(20));
        s.start(
            "flaky",
            quick,
            Box::new(move |life| {
                match counted.fetch_add(1, Ordering::Relaxed) {
                    0 => return Err("no connection".into()),
                    1 => panic!("a bug"),
                    _ => {}
                }
                while !life.sleep(Duration::from_secs(60)) {}
                Ok(())
            }),
        )
        .unwrap();
        let since = Instant::now();
        while lives.load(Ordering::Relaxed) < 3 && since.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(lives.load(Ordering::Relaxed), 3);
        assert_eq!(s.json()["flaky"]["restarts"], 2);
        assert_eq!(s.json()["flaky"]["error"], "panicked: a bug");
        let left = s.stop(|_| true, Some(Instant::now() + Duration::from_secs(5)));
        assert!(left.is_empty(), "{left:?}");
        assert!(since.elapsed() < Duration::from_secs(5));
    }
}
