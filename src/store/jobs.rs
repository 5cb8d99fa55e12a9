//! The job queue: commits waiting to be run (pending → assigned → running → completed / failed).

use super::{Index, Result};
use rusqlite::params;
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
        let tx = self.conn.unchecked_transaction()?;
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

    /// Whether a commit already has a job in any state.
    pub fn has_job(&self, repository_id: &str, commit: &str) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT 1 FROM jobs WHERE repository_id = ?1 AND commit_id = ?2")?;
        Ok(stmt.exists([repository_id, commit])?)
    }

    pub fn jobs(&self, repository_id: Option<&str>, state: Option<&str>) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, repository_id, commit_id, refname, trigger, state, attempts FROM jobs
             WHERE (?1 IS NULL OR repository_id = ?1) AND (?2 IS NULL OR state = ?2) ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![repository_id, state], |r| {
                Ok(Job {
                    id: r.get(0)?,
                    repository_id: r.get(1)?,
                    commit_id: r.get(2)?,
                    refname: r.get(3)?,
                    trigger: r.get(4)?,
                    state: r.get(5)?,
                    attempts: r.get(6)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
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
