//! Webhook deliveries: each is recorded, with the fetch it asks for in every repository that
//! follows the remote it names, in one transaction that also records its event; the delivery id
//! is the key, so a redelivery of the same one is recognised and queues nothing twice, and a
//! delivery recorded before a crash is fetched after it. The body's SHA-256 is kept with it: the
//! signature does not cover the delivery id, so the same signed body under a new id is a replay.

use super::sql::{params, OptionalExtension};
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    /// `github`, `gitea` or `forgejo`.
    pub source: String,
    pub event: String,
    pub repository_id: String,
    pub remote: String,
    /// What to fetch (`+refs/heads/main:refs/remotes/origin/main`).
    pub refspec: String,
    /// The local ref it lands in, whose new commits are queued.
    pub local_ref: String,
    /// The body's SHA-256 (lower-case hex); none on deliveries recorded before it was kept.
    pub body_sha256: Option<String>,
}

impl Index {
    /// Record a delivery and the fetch it asks for, once per repository (all of one delivery).
    /// Returns false (and changes nothing) when a delivery with this id, or with this body, was
    /// recorded before.
    pub fn record_delivery(&self, ds: &[Delivery]) -> Result<bool> {
        let now = gs_util::time::now_rfc3339();
        // Immediate: it reads, then writes; a deferred transaction would fail at once (not wait)
        // when another connection wrote in between.
        let tx = self.conn.transaction()?;
        let seen = ds.first().is_some_and(|d| {
            tx.query_row(
                "SELECT 1 FROM deliveries WHERE id = ?1 OR body_sha256 = ?2",
                params![d.id, d.body_sha256],
                |_| Ok(()),
            )
            .optional()
            .ok()
            .flatten()
            .is_some()
        });
        if seen || ds.is_empty() {
            return Ok(false);
        }
        for d in ds {
            tx.execute(
                "INSERT INTO deliveries (id, source, event, repository_id, remote, refspec, local_ref, received_at, body_sha256)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![d.id, d.source, d.event, d.repository_id, d.remote, d.refspec, d.local_ref, now, d.body_sha256],
            )?;
            tx.execute(
                "INSERT INTO events (time, kind, repository_id, data) VALUES (?1, 'webhook.received', ?2, ?3)",
                params![
                    now,
                    d.repository_id,
                    serde_json::json!({"delivery": d.id, "source": d.source, "event": d.event, "ref": d.local_ref}).to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Deliveries whose fetch has not been done yet, oldest first.
    pub fn pending_deliveries(&self) -> Result<Vec<Delivery>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, source, event, repository_id, remote, refspec, local_ref, body_sha256 FROM deliveries
             WHERE done_at IS NULL ORDER BY received_at, id",
        )?;
        let rows = stmt.query_map(params![], |r| {
            Ok(Delivery {
                id: r.get(0)?,
                source: r.get(1)?,
                event: r.get(2)?,
                repository_id: r.get(3)?,
                remote: r.get(4)?,
                refspec: r.get(5)?,
                local_ref: r.get(6)?,
                body_sha256: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<super::sql::Result<_>>()?)
    }

    /// Mark a delivery's fetch in one repository done (with the error that ended it, if it failed
    /// for good).
    pub fn finish_delivery(&self, d: &Delivery, error: Option<&str>) -> Result<()> {
        self.conn.execute(
            "UPDATE deliveries SET done_at = ?3, error = ?4 WHERE id = ?1 AND repository_id = ?2",
            params![d.id, d.repository_id, gs_util::time::now_rfc3339(), error],
        )?;
        Ok(())
    }

    /// Whether a delivery with this id, or with a body of this SHA-256, was recorded.
    pub fn has_delivery(&self, id: &str, body_sha256: &str) -> Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT 1 FROM deliveries WHERE id = ?1 OR body_sha256 = ?2",
                params![id, body_sha256],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}
