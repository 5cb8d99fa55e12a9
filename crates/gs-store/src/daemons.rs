//! The daemons that served this index: each writes its row at start, its heartbeat every 30 s
//! and its stop, so `status` and the dashboard can say which run, which stopped, and which were
//! lost (killed: no heartbeat for long, no stop).

use super::sql::params;
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct DaemonRow {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub workers: i64,
    /// Where it serves the dashboard and API, when it does.
    pub http: Option<String>,
    pub started_at: String,
    pub heartbeat_at: String,
    pub busy_workers: i64,
    pub stopped_at: Option<String>,
}

impl Index {
    pub fn daemon_started(&self, d: &DaemonRow) -> Result<()> {
        self.conn.execute(
            "INSERT INTO daemons (id, host, pid, workers, http, started_at, heartbeat_at, busy_workers)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 0)
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, stopped_at = NULL",
            params![d.id, d.host, d.pid, d.workers, d.http, d.started_at],
        )?;
        Ok(())
    }

    pub fn daemon_heartbeat(&self, id: &str, busy_workers: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE daemons SET heartbeat_at = ?2, busy_workers = ?3 WHERE id = ?1",
            params![id, gs_util::time::now_rfc3339(), busy_workers],
        )?;
        Ok(())
    }

    pub fn daemon_stopped(&self, id: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE daemons SET stopped_at = ?2, busy_workers = 0 WHERE id = ?1",
            params![id, gs_util::time::now_rfc3339()],
        )?;
        Ok(())
    }

    /// The daemons, the newest start first; at most `limit`.
    pub fn daemons(&self, limit: usize) -> Result<Vec<DaemonRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, host, pid, workers, http, started_at, heartbeat_at, busy_workers, stopped_at
             FROM daemons ORDER BY started_at DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok(DaemonRow {
                    id: r.get(0)?,
                    host: r.get(1)?,
                    pid: r.get(2)?,
                    workers: r.get(3)?,
                    http: r.get(4)?,
                    started_at: r.get(5)?,
                    heartbeat_at: r.get(6)?,
                    busy_workers: r.get(7)?,
                    stopped_at: r.get(8)?,
                })
            })?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }
}
