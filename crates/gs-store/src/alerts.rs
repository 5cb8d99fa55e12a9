//! Notifications waiting to be delivered (`[notify]` webhook and command): one row per channel,
//! delivered oldest first, each with its attempts and the time before which it must not be tried
//! again; done (or given up, with why) once delivered.

use super::sql::params;
use super::{Index, Result};

#[derive(Debug, Clone)]
pub struct AlertRow {
    pub id: i64,
    /// `webhook` or `command`; `remote:<home id>` for an auto-push from that machine.
    pub channel: String,
    pub kind: String,
    pub repository_id: Option<String>,
    /// The JSON body.
    pub payload: String,
    pub created_at: String,
    pub attempts: i64,
}

impl Index {
    /// Queue an alert on a channel.
    pub fn queue_alert(
        &self,
        channel: &str,
        kind: &str,
        repository_id: Option<&str>,
        payload: &serde_json::Value,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO alerts (channel, kind, repository_id, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                channel,
                kind,
                repository_id,
                payload.to_string(),
                gs_util::time::now_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Queue a row on `channel` for a repository unless one waits there already; that one is
    /// then due at once (a new reason to try it, whatever its back-off said) and takes
    /// `payload`, so that a delivery that began before this call is not taken for this one
    /// ([`Index::alert_done_unless_asked_again`]).
    pub fn queue_alert_once(
        &self,
        channel: &str,
        kind: &str,
        repository_id: &str,
        payload: &serde_json::Value,
    ) -> Result<()> {
        let waiting = self.conn.execute(
            "UPDATE alerts SET next_at = 0, payload = ?3 WHERE channel = ?1 AND repository_id = ?2 AND done_at IS NULL",
            params![channel, repository_id, payload.to_string()],
        )?;
        if waiting == 0 {
            self.queue_alert(channel, kind, Some(repository_id), payload)?;
        }
        Ok(())
    }

    /// Alerts due at `now` (seconds since the epoch), oldest first, at most `limit`. Of the
    /// channels that start with `machine_prefix`, each one machine's own (on a shared index),
    /// only `mine`.
    pub fn due_alerts(
        &self,
        now: i64,
        limit: usize,
        (machine_prefix, mine): (&str, &str),
    ) -> Result<Vec<AlertRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, channel, kind, repository_id, payload, created_at, attempts FROM alerts
             WHERE done_at IS NULL AND next_at <= ?1 AND (channel NOT LIKE ?3 OR channel = ?4)
             ORDER BY id LIMIT ?2",
        )?;
        let rows = stmt.query_map(
            params![now, limit as i64, format!("{machine_prefix}%"), mine],
            |r| {
                Ok(AlertRow {
                    id: r.get(0)?,
                    channel: r.get(1)?,
                    kind: r.get(2)?,
                    repository_id: r.get(3)?,
                    payload: r.get(4)?,
                    created_at: r.get(5)?,
                    attempts: r.get(6)?,
                })
            },
        )?;
        Ok(rows.collect::<super::sql::Result<_>>()?)
    }

    /// How many alerts wait to be delivered.
    pub fn pending_alerts(&self) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM alerts WHERE done_at IS NULL",
            params![],
            |r| r.get(0),
        )?)
    }

    /// The alert was delivered, or given up with `error`.
    pub fn alert_done(&self, id: i64, error: Option<&str>) -> Result<()> {
        self.conn.execute(
            "UPDATE alerts SET done_at = ?2, error = ?3, attempts = attempts + 1 WHERE id = ?1",
            params![id, gs_util::time::now_rfc3339(), error],
        )?;
        Ok(())
    }

    /// The alert was delivered, unless it was asked for again meanwhile (its payload changed:
    /// what was delivered may predate the new request). Returns whether it is done.
    pub fn alert_done_unless_asked_again(&self, a: &AlertRow) -> Result<bool> {
        let n = self.conn.execute(
            "UPDATE alerts SET done_at = ?2, error = NULL, attempts = attempts + 1 WHERE id = ?1 AND payload = ?3",
            params![a.id, gs_util::time::now_rfc3339(), a.payload],
        )?;
        Ok(n == 1)
    }

    /// Try the alert again at `next_at` (seconds since the epoch).
    pub fn alert_later(&self, id: i64, next_at: i64, error: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE alerts SET next_at = ?2, error = ?3, attempts = attempts + 1 WHERE id = ?1",
            params![id, next_at, error],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINE: (&str, &str) = ("remote:", "remote:a");

    #[test]
    fn one_push_waits_per_repository_and_machine_and_a_new_one_makes_it_due() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let push = |channel: &str, repo: &str| {
            let asked = serde_json::json!({ "asked": gs_util::random_hex(8) });
            index
                .queue_alert_once(channel, "remote.push", repo, &asked)
                .unwrap()
        };
        push("remote:a", "r");
        push("remote:a", "r");
        push("remote:a", "s");
        // Another machine's push is its own to make.
        push("remote:b", "r");
        let due = index.due_alerts(1, 10, MINE).unwrap();
        assert_eq!(due.len(), 2, "{due:?}");
        // Put off by a failure, it is due again once another result asks for it.
        index.alert_later(due[0].id, i64::MAX, "refused").unwrap();
        assert_eq!(index.due_alerts(1, 10, MINE).unwrap().len(), 1);
        push("remote:a", "r");
        let due = index.due_alerts(1, 10, MINE).unwrap();
        assert_eq!(due.len(), 2, "{due:?}");
        assert_eq!(due[0].attempts, 1, "its attempts are kept");
        // Asked again while it was being delivered: it stays, due.
        push("remote:a", "r");
        assert!(!index.alert_done_unless_asked_again(&due[0]).unwrap());
        let due = index.due_alerts(1, 10, MINE).unwrap();
        assert_eq!(due.len(), 2, "{due:?}");
        // Once delivered, the next result queues a new one.
        assert!(index.alert_done_unless_asked_again(&due[0]).unwrap());
        push("remote:a", "r");
        assert_eq!(index.pending_alerts().unwrap(), 3);
    }
}
