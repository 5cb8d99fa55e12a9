//! On PostgreSQL, an idle daemon sleeps until a job is queued on any machine: a thread of its own
//! holds a connection that `LISTEN`s and wakes the scheduler on each notification. A lost
//! connection is opened again with back-off, and the scheduler is woken after each reconnect
//! (what was announced meanwhile was missed).

use super::Msg;
use std::time::Duration;

pub fn start(url: String, tx: tokio::sync::mpsc::Sender<Msg>) {
    let _ = std::thread::Builder::new()
        .name("listen".into())
        .spawn(move || run(&url, &tx));
}

fn run(url: &str, tx: &tokio::sync::mpsc::Sender<Msg>) {
    let mut backoff = super::health::RETRY.first;
    loop {
        let mut listener = match crate::store::Listener::open(url) {
            Ok(l) => l,
            Err(e) => {
                super::warn(&format!(
                    "cannot listen for new jobs ({e}); trying again in {} s",
                    backoff.as_secs()
                ));
                std::thread::sleep(backoff);
                backoff = super::health::RETRY.next(backoff);
                continue;
            }
        };
        backoff = super::health::RETRY.first;
        if tx.blocking_send(Msg::Jobs).is_err() {
            return;
        }
        loop {
            match listener.wait(Duration::from_secs(30)) {
                Ok(true) => {
                    if tx.blocking_send(Msg::Jobs).is_err() {
                        return;
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    super::warn(&format!("lost the connection that listens for jobs: {e}"));
                    break;
                }
            }
        }
    }
}
