//! The job queue: commits waiting to be run (pending → assigned → running → completed / failed).

use super::sql::params;
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: i64,
    pub repository_id: String,
    pub commit_id: String,
    pub refname: Option<String>,
    pub trigger: String,
    pub state: String,
    pub attempts: i64,
}

/// A `jobs` row selected as `id, repository_id, commit_id, refname, trigger, state, attempts`.
fn job_row(r: &super::sql::Row) -> super::sql::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        repository_id: r.get(1)?,
        commit_id: r.get(2)?,
        refname: r.get(3)?,
        trigger: r.get(4)?,
        state: r.get(5)?,
        attempts: r.get(6)?,
    })
}

impl Index {
    /// Queue `commits` (newest last) for a repository; commits already queued are left alone.
    /// Returns how many were new.
    pub fn enqueue(
        &self,
        repository_id: &str,
        commits: &[(String, Option<String>)],
        trigger: &str,
    ) -> Result<usize> {
        if commits.is_empty() {
            return Ok(0);
        }
        let now = crate::util::time::now_rfc3339();
        let tx = self.conn.transaction()?;
        let mut added = 0;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO jobs (repository_id, commit_id, refname, trigger, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)
                 ON CONFLICT (repository_id, commit_id) DO NOTHING",
            )?;
            for (commit, refname) in commits {
                added += stmt.execute(params![repository_id, commit, refname, trigger, now])?;
            }
        }
        if added > 0 {
            tx.execute(
                "INSERT INTO events (time, kind, repository_id, data) VALUES (?1, 'run.queued', ?2, ?3)",
                params![
                    now,
                    repository_id,
                    serde_json::json!({"commits": added, "trigger": trigger}).to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(added)
    }

    /// Queue `commits` again, also those whose job already completed or failed (their result
    /// was lost): such jobs become pending with a fresh attempt count. Returns how many.
    pub fn requeue(
        &self,
        repository_id: &str,
        commits: &[(String, Option<String>)],
        trigger: &str,
    ) -> Result<usize> {
        let now = crate::util::time::now_rfc3339();
        let tx = self.conn.transaction()?;
        let mut n = 0;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO jobs (repository_id, commit_id, refname, trigger, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)
                 ON CONFLICT (repository_id, commit_id) DO UPDATE SET
                    state = 'pending', attempts = 0, error = NULL, not_before = NULL,
                    trigger = excluded.trigger, updated_at = excluded.updated_at
                 WHERE jobs.state IN ('completed', 'failed')",
            )?;
            for (commit, refname) in commits {
                n += stmt.execute(params![repository_id, commit, refname, trigger, now])?;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// Whether a commit already has a job in any state.
    pub fn has_job(&self, repository_id: &str, commit: &str) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT 1 FROM jobs WHERE repository_id = ?1 AND commit_id = ?2")?;
        Ok(stmt.exists([repository_id, commit])?)
    }

    /// The state of a commit's job, if it has one.
    pub fn job_state(&self, repository_id: &str, commit: &str) -> Result<Option<String>> {
        use super::sql::OptionalExtension;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state FROM jobs WHERE repository_id = ?1 AND commit_id = ?2")?;
        Ok(stmt
            .query_row([repository_id, commit], |r| r.get(0))
            .optional()?)
    }

    /// A job whose commit was run by other means (by hand) is done.
    pub fn complete_job(&self, repository_id: &str, commit: &str, ok: bool) -> Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?3, updated_at = ?4 WHERE repository_id = ?1 AND commit_id = ?2",
            params![
                repository_id,
                commit,
                if ok { "completed" } else { "failed" },
                crate::util::time::now_rfc3339()
            ],
        )?;
        Ok(())
    }
}

/// How many times an infrastructure failure is retried before the job is given up.
pub const MAX_ATTEMPTS: i64 = 5;

impl Index {
    /// Jobs cut off by a crash or kill (assigned or running) go back to the queue. Returns how many.
    pub fn requeue_interrupted(&self) -> Result<usize> {
        Ok(self.conn.execute(
            "UPDATE jobs SET state = 'pending', updated_at = ?1 WHERE state IN ('assigned', 'running')",
            [crate::util::time::now_rfc3339()],
        )?)
    }

    /// The jobs running now, oldest first.
    pub fn running_jobs(&self) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, repository_id, commit_id, refname, trigger, state, attempts FROM jobs
             WHERE state = 'running' ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![], job_row)?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// [`Index::requeue_interrupted`] for one repository.
    pub fn requeue_interrupted_of(&self, repository_id: &str) -> Result<usize> {
        Ok(self.conn.execute(
            "UPDATE jobs SET state = 'pending', updated_at = ?1
             WHERE repository_id = ?2 AND state IN ('assigned', 'running')",
            params![crate::util::time::now_rfc3339(), repository_id],
        )?)
    }

    /// Pending jobs whose back-off has passed, oldest first.
    pub fn ready_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, repository_id, commit_id, refname, trigger, state, attempts FROM jobs
             WHERE state = 'pending' AND (not_before IS NULL OR not_before <= ?1)
             ORDER BY id LIMIT ?2",
        )?;
        let rows = stmt
            .query_map(
                params![crate::util::time::now_rfc3339(), limit as i64],
                job_row,
            )?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Move a job from `from` to `to`; false when someone else moved it first.
    pub fn transition_job(&self, id: i64, from: &str, to: &str) -> Result<bool> {
        let now = crate::util::time::now_rfc3339();
        let n = self.conn.execute(
            "UPDATE jobs SET state = ?3, updated_at = ?4,
                    started_at = CASE WHEN ?3 = 'running' THEN ?4 ELSE started_at END
             WHERE id = ?1 AND state = ?2",
            params![id, from, to, now],
        )?;
        Ok(n == 1)
    }

    /// An infrastructure failure: back off and retry, or give up after [`MAX_ATTEMPTS`].
    pub fn retry_job(&self, id: i64, error: &str) -> Result<bool> {
        let attempts: i64 =
            self.conn
                .query_row("SELECT attempts FROM jobs WHERE id = ?1", [id], |r| {
                    r.get(0)
                })?;
        let attempts = attempts + 1;
        let now = crate::util::time::now_millis();
        let retry = attempts < MAX_ATTEMPTS;
        let delay_ms = 1000i64 << attempts.min(8);
        self.conn.execute(
            "UPDATE jobs SET state = ?2, attempts = ?3, error = ?4, updated_at = ?5, not_before = ?6 WHERE id = ?1",
            params![
                id,
                if retry { "pending" } else { "failed" },
                attempts,
                error,
                crate::util::time::rfc3339(now),
                crate::util::time::rfc3339(now + delay_ms)
            ],
        )?;
        Ok(retry)
    }

    /// A repository's unfinished jobs by the ref they were queued for: how many wait (pending
    /// or assigned) and how many run.
    pub fn queued_by_ref(
        &self,
        repository_id: &str,
    ) -> Result<std::collections::BTreeMap<String, (u64, u64)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT COALESCE(refname, ''), state, COUNT(*) FROM jobs
             WHERE repository_id = ?1 AND state IN ('pending', 'assigned', 'running')
             GROUP BY 1, 2",
        )?;
        let mut out = std::collections::BTreeMap::<String, (u64, u64)>::new();
        let rows = stmt.query_map([repository_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        for row in rows {
            let (refname, state, n) = row?;
            let e = out.entry(refname).or_default();
            if state == "running" {
                e.1 += n as u64;
            } else {
                e.0 += n as u64;
            }
        }
        Ok(out)
    }

    /// Pending jobs by why they were queued (their trigger: hook, watch, backfill, …).
    pub fn pending_by_trigger(&self) -> Result<std::collections::BTreeMap<String, u64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT trigger, COUNT(*) FROM jobs WHERE state = 'pending' GROUP BY trigger",
        )?;
        let rows = stmt
            .query_map(params![], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })?
            .collect::<super::sql::Result<_>>()?;
        Ok(rows)
    }

    /// Jobs waiting or in flight.
    pub fn queue_depth(&self) -> Result<(u64, u64)> {
        let (pending, running): (i64, i64) = self.conn.query_row(
            "SELECT COALESCE(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN state IN ('assigned', 'running') THEN 1 ELSE 0 END), 0) FROM jobs",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((pending as u64, running as u64))
    }
}
