//! The daemons that served this index, as `status`, the API and the dashboard show them:
//! running (a heartbeat within the last 90 s), stopped, or lost (killed: no heartbeat since, no
//! stop).

use crate::app::Context;
use gs_store::DaemonRow;
use gs_util::time;
use serde::Serialize;

/// How often a daemon writes its heartbeat (and rescans every repository).
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(30);
/// A daemon whose last heartbeat is older than this, and that did not stop, was lost.
const LOST_AFTER_MS: i64 = 3 * HEARTBEAT.as_millis() as i64;

#[derive(Debug, Clone, Serialize)]
pub struct Daemon {
    #[serde(flatten)]
    pub row: DaemonRow,
    /// `running`, `stopped` or `lost`.
    pub state: &'static str,
}

/// The owner id of a claim made by this process: its home's id, a kind and the pid
/// (`<home-id>/daemon/<pid>/<started ms>`).
pub fn owner_id(home: &std::path::Path, kind: &str) -> String {
    format!(
        "{}/{kind}/{}/{}",
        crate::app::home::home_id(home),
        std::process::id(),
        time::now_millis()
    )
}

/// Record that this process starts serving as a daemon `id` (its owner id).
pub fn started(ctx: &Context, id: &str, workers: usize, http: Option<String>) {
    let now = time::now_millis();
    let host = crate::app::home::host();
    let pid = std::process::id();
    let _ = ctx.index.daemon_started(&DaemonRow {
        id: id.to_string(),
        host,
        pid: pid as i64,
        workers: workers as i64,
        http,
        started_at: time::rfc3339(now),
        heartbeat_at: time::rfc3339(now),
        busy_workers: 0,
        stopped_at: None,
    });
}

/// The newest daemons (at most 20), each with its state now.
pub fn list(ctx: &Context) -> crate::app::Result<Vec<Daemon>> {
    let now = time::now_millis();
    Ok(ctx
        .index
        .daemons(20)?
        .into_iter()
        .map(|row| Daemon {
            state: state_of(&row, now),
            row,
        })
        .collect())
}

/// `stopped` when it said so, `lost` when its heartbeat is too old, else `running`.
fn state_of(row: &DaemonRow, now: i64) -> &'static str {
    let beat = time::parse_rfc3339(&row.heartbeat_at).unwrap_or(0);
    if row.stopped_at.is_some() {
        "stopped"
    } else if now - beat > LOST_AFTER_MS {
        "lost"
    } else {
        "running"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_without_heartbeat_or_stop_is_lost() {
        let now = time::now_millis();
        let mut row = DaemonRow {
            id: "h:1:0".into(),
            host: "h".into(),
            pid: 1,
            workers: 2,
            http: None,
            started_at: time::rfc3339(now - 600_000),
            heartbeat_at: time::rfc3339(now - 10_000),
            busy_workers: 0,
            stopped_at: None,
        };
        assert_eq!(state_of(&row, now), "running");
        row.heartbeat_at = time::rfc3339(now - 200_000);
        assert_eq!(state_of(&row, now), "lost");
        row.stopped_at = Some(time::rfc3339(now));
        assert_eq!(state_of(&row, now), "stopped");
    }
}
