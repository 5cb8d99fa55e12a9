//! On PostgreSQL, an idle daemon sleeps until a job is queued on any machine: a thread of its own
//! holds a connection that `LISTEN`s and wakes the scheduler on each notification. A lost
//! connection ends the loop's life: the supervisor opens it again with back-off, and the scheduler is woken after each reconnect
//! (what was announced meanwhile was missed).

use super::supervise::{Body, Life};
use super::Msg;
use std::time::Duration;

/// The listen loop: one connection that `LISTEN`s, until it is lost (an error: the supervisor
/// opens it again after [`super::health::RETRY`]) or the loop is told to stop.
pub fn body(url: String, tx: tokio::sync::mpsc::Sender<Msg>) -> Body {
    Box::new(move |life: &Life| {
        let mut listener = gs_store::Listener::open(&url)
            .map_err(|e| format!("cannot listen for new jobs: {e}"))?;
        life.healthy();
        if tx.blocking_send(Msg::Jobs).is_err() {
            return Ok(());
        }
        // Short waits: a stop is seen within one.
        while !life.stopping() {
            match listener.wait(Duration::from_secs(1)) {
                Ok(true) => {
                    if tx.blocking_send(Msg::Jobs).is_err() {
                        return Ok(());
                    }
                }
                Ok(false) => {}
                Err(e) => return Err(format!("lost the connection that listens for jobs: {e}")),
            }
        }
        Ok(())
    })
}
