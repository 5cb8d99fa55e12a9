//! The event log: what happened, when, to which repository, run and commit. Paged by id so a
//! follower can resume where it stopped.

use super::sql::{params, OptionalExtension};
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub id: i64,
    pub time: String,
    pub kind: String,
    pub repository_id: Option<String>,
    /// The repository's name, while it is registered.
    pub repository: Option<String>,
    pub run_id: Option<i64>,
    pub commit: Option<String>,
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub repository_id: Option<String>,
    pub run_id: Option<i64>,
    /// A kind (`run.completed`) or a prefix ending in `.` (`run.`).
    pub kind: Option<String>,
    /// Not events of this kind (`daemon.heartbeat`).
    pub not_kind: Option<String>,
    /// Only events with an id greater than this.
    pub since: Option<i64>,
    pub limit: Option<u64>,
}

impl Index {
    /// Events matching `f`, oldest first. Without `since`, the newest `limit` events.
    pub fn events(&self, f: &EventFilter) -> Result<Vec<Event>> {
        let kind_like = f.kind.as_ref().map(|k| {
            if k.ends_with('.') {
                format!("{k}%")
            } else {
                k.clone()
            }
        });
        let limit = f.limit.unwrap_or(i64::MAX as u64).min(i64::MAX as u64) as i64;
        let order = if f.since.is_some() { "ASC" } else { "DESC" };
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT e.id, e.time, e.kind, e.repository_id, e.run_id, e.commit_id, e.data, r.name
             FROM events e LEFT JOIN repositories r ON r.id = e.repository_id
             WHERE (CAST(?1 AS TEXT) IS NULL OR e.repository_id = ?1)
               AND (CAST(?2 AS BIGINT) IS NULL OR e.run_id = ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR e.kind LIKE ?3)
               AND e.id > COALESCE(CAST(?4 AS BIGINT), 0)
               AND (CAST(?6 AS TEXT) IS NULL OR e.kind != ?6)
             ORDER BY e.id {order} LIMIT ?5"
        ))?;
        let mut rows = stmt
            .query_map(
                params![
                    f.repository_id,
                    f.run_id,
                    kind_like,
                    f.since,
                    limit,
                    f.not_kind
                ],
                |r| {
                    let data: Option<String> = r.get(6)?;
                    Ok(Event {
                        id: r.get(0)?,
                        time: r.get(1)?,
                        kind: r.get(2)?,
                        repository_id: r.get(3)?,
                        repository: r.get(7)?,
                        run_id: r.get(4)?,
                        commit: r.get(5)?,
                        data: data
                            .and_then(|d| serde_json::from_str(&d).ok())
                            .unwrap_or(serde_json::Value::Null),
                    })
                },
            )?
            .collect::<super::sql::Result<Vec<_>>>()?;
        if f.since.is_none() {
            rows.reverse();
        }
        Ok(rows)
    }

    /// The first failure (`run.first_failure`'s data) published by a run of `commit` that is
    /// still going: the newest such event with no start or end of a run of that commit after it
    /// (an earlier run's failure is not this one's).
    pub fn live_first_failure(
        &self,
        repository_id: &str,
        commit: &str,
    ) -> Result<Option<serde_json::Value>> {
        let data: Option<Option<String>> = self
            .conn
            .query_row(
                "SELECT f.data FROM events f
                 WHERE f.kind = 'run.first_failure' AND f.repository_id = ?1 AND f.commit_id = ?2
                   AND NOT EXISTS (SELECT 1 FROM events s
                       WHERE s.kind IN ('run.started', 'run.completed', 'run.failed')
                         AND s.id > f.id AND s.repository_id = ?1 AND s.commit_id = ?2)
                 ORDER BY f.id DESC LIMIT 1",
                [repository_id, commit],
                |r| r.get(0),
            )
            .optional()?;
        Ok(data.flatten().and_then(|d| serde_json::from_str(&d).ok()))
    }

    /// Remove the events older than `before` (an RFC 3339 time as events carry), or with
    /// `dry_run` only count them. Events of the repositories in `except` are left out (they go
    /// with their repository). Returns how many.
    pub fn prune_events(&self, before: &str, except: &[String], dry_run: bool) -> Result<u64> {
        let except = serde_json::to_string(except).expect("strings serialize");
        // The repositories to leave alone, as one JSON array parameter.
        let filter = if self.conn.is_pg() {
            "time < ?1 AND (repository_id IS NULL
             OR repository_id NOT IN (SELECT json_array_elements_text(CAST(?2 AS json))))"
        } else {
            "time < ?1 AND (repository_id IS NULL
             OR repository_id NOT IN (SELECT value FROM json_each(?2)))"
        };
        let n = if dry_run {
            self.conn.query_row(
                &format!("SELECT COUNT(*) FROM events WHERE {filter}"),
                [before, &except],
                |r| r.get::<_, i64>(0),
            )? as u64
        } else {
            self.conn.execute(
                &format!("DELETE FROM events WHERE {filter}"),
                [before, &except],
            )? as u64
        };
        Ok(n)
    }

    /// Remove the jobs that completed before `before` (their commits have results; the queue
    /// keeps the rest), or with `dry_run` only count them. Returns how many.
    pub fn prune_completed_jobs(&self, before: &str, dry_run: bool) -> Result<u64> {
        let filter = "state = 'completed' AND updated_at < ?1";
        let n = if dry_run {
            self.conn.query_row(
                &format!("SELECT COUNT(*) FROM jobs WHERE {filter}"),
                [before],
                |r| r.get::<_, i64>(0),
            )? as u64
        } else {
            self.conn
                .execute(&format!("DELETE FROM jobs WHERE {filter}"), [before])? as u64
        };
        Ok(n)
    }

    /// Remove the stored analysis tallies of trees that none of a repository's newest `keep`
    /// runs has (a new commit starts from its parent's tally, and its parent is one of the newest
    /// runs; an older tree's tally is made again from its files when asked), or with `dry_run`
    /// only count them. The per-file results stay. Returns how many.
    pub fn prune_tallies(&self, keep: u32, dry_run: bool) -> Result<u64> {
        let filter = format!(
            "key LIKE 'tree:%' AND blob_id NOT IN (
                SELECT tree_id FROM (
                    SELECT tree_id, ROW_NUMBER() OVER (PARTITION BY repository_id ORDER BY id DESC) AS n
                    FROM runs
                ) AS newest WHERE n <= {keep})"
        );
        let n = if dry_run {
            self.conn.query_row(
                &format!("SELECT COUNT(*) FROM analysis_cache WHERE {filter}"),
                [] as [&str; 0],
                |r| r.get::<_, i64>(0),
            )? as u64
        } else {
            self.conn.execute(
                &format!("DELETE FROM analysis_cache WHERE {filter}"),
                [] as [&str; 0],
            )? as u64
        };
        Ok(n)
    }
}
