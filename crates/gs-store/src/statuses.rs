//! Commit statuses waiting to be posted to GitHub: one row per (repository, commit, context),
//! replaced by a newer result; posted in order of when they became due, each with its attempts
//! and the time before which it must not be tried again (a rate limit, a remote that was down).

use super::sql::params;
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct StatusRow {
    pub repository_id: String,
    pub commit_id: String,
    pub context: String,
    pub owner: String,
    pub repo: String,
    pub state: String,
    pub description: String,
    pub attempts: i64,
}

impl Index {
    /// Queue a status (replacing one of the same commit and context that was not posted, or was).
    pub fn queue_status(&self, s: &StatusRow) -> Result<()> {
        self.conn.execute(
            "INSERT INTO statuses (repository_id, commit_id, context, owner, repo, state, description, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (repository_id, commit_id, context) DO UPDATE SET
               owner = excluded.owner, repo = excluded.repo, state = excluded.state,
               description = excluded.description, created_at = excluded.created_at,
               attempts = 0, next_at = 0, done_at = NULL, error = NULL",
            params![
                s.repository_id,
                s.commit_id,
                s.context,
                s.owner,
                s.repo,
                s.state,
                s.description,
                gs_util::time::now_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Statuses due at `now` (seconds since the epoch), oldest first, at most `limit`.
    pub fn due_statuses(&self, now: i64, limit: usize) -> Result<Vec<StatusRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT repository_id, commit_id, context, owner, repo, state, description, attempts
             FROM statuses WHERE done_at IS NULL AND next_at <= ?1 ORDER BY next_at, created_at LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now, limit as i64], |r| {
            Ok(StatusRow {
                repository_id: r.get(0)?,
                commit_id: r.get(1)?,
                context: r.get(2)?,
                owner: r.get(3)?,
                repo: r.get(4)?,
                state: r.get(5)?,
                description: r.get(6)?,
                attempts: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<super::sql::Result<_>>()?)
    }

    /// How many statuses wait to be posted.
    pub fn pending_statuses(&self) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM statuses WHERE done_at IS NULL",
            params![],
            |r| r.get(0),
        )?)
    }

    /// The status was posted, or given up with `error`.
    pub fn status_done(&self, s: &StatusRow, error: Option<&str>) -> Result<()> {
        self.conn.execute(
            "UPDATE statuses SET done_at = ?4, error = ?5, attempts = attempts + 1
             WHERE repository_id = ?1 AND commit_id = ?2 AND context = ?3 AND state = ?6",
            params![
                s.repository_id,
                s.commit_id,
                s.context,
                gs_util::time::now_rfc3339(),
                error,
                s.state
            ],
        )?;
        Ok(())
    }

    /// Try the status again at `next_at` (seconds since the epoch).
    pub fn status_later(&self, s: &StatusRow, next_at: i64, error: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE statuses SET next_at = ?4, error = ?5, attempts = attempts + 1
             WHERE repository_id = ?1 AND commit_id = ?2 AND context = ?3",
            params![s.repository_id, s.commit_id, s.context, next_at, error],
        )?;
        Ok(())
    }
}
