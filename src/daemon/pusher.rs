//! `[remote] auto_push`: the daemon's results go to each repository's remote in batches. Workers'
//! finished jobs name their repository here; a batch waits a moment for more, then pushes the
//! notes of each repository once. A push that fails is tried again a minute later (and at the
//! next batch of that repository); every repository is pushed once at start-up, so results made
//! while the daemon was down, or pushed by nobody before a kill, still leave.

use crate::app::{remote, Context};
use std::collections::HashSet;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a batch waits for more finished runs before it pushes.
const BATCH: Duration = Duration::from_secs(2);
/// How long a failed push waits before it is tried again.
const RETRY: Duration = Duration::from_secs(60);

/// Start the pusher: send it repository ids; drop the sender to let it push what it holds and
/// end.
pub fn start() -> (mpsc::Sender<String>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<String>();
    let handle = std::thread::Builder::new()
        .name("auto-push".into())
        .spawn(move || run(rx))
        .expect("spawning a thread");
    (tx, handle)
}

fn run(rx: mpsc::Receiver<String>) {
    let ctx = match Context::load() {
        Ok(c) => c,
        Err(e) => {
            super::warn(&format!("auto-push cannot start: {e}"));
            return;
        }
    };
    let mut failed: HashSet<String> = HashSet::new();
    let mut retry_at: Option<Instant> = None;
    let mut open = true;
    while open {
        let mut batch: HashSet<String> = HashSet::new();
        let first = match retry_at {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match first {
            Ok(id) => {
                batch.insert(id);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
        }
        let until = Instant::now() + BATCH;
        while open {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(id) => {
                    batch.insert(id);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
            }
        }
        if retry_at.is_some_and(|at| at <= Instant::now()) || !open {
            batch.extend(failed.drain());
            retry_at = None;
        }
        for id in batch {
            if !push_one(&ctx, &id) {
                failed.insert(id);
                retry_at.get_or_insert_with(|| Instant::now() + RETRY);
            }
        }
    }
}

/// Push one repository's notes; false when it should be tried again.
fn push_one(ctx: &Context, repository_id: &str) -> bool {
    let Ok(Some(row)) = ctx.index.repository_by_id(repository_id) else {
        return true;
    };
    let Ok(repo) = crate::git::open(Path::new(&row.path)) else {
        return true;
    };
    match remote::auto_push(ctx, &repo, &row) {
        None => true,
        Some(w) => {
            super::warn(&format!("{}: {w}", row.name));
            false
        }
    }
}
