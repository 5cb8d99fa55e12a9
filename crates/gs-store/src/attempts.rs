//! Attempts: runs that could not run their tests here, kept beside the commit's result (its row
//! in `runs`), never in its place, until a run that ran its tests ends them.

use super::sql::params;
use super::{Index, Result};
use gs_model::{RunRecord, Trigger};

/// Commits per statement of the batched reads and deletes.
const CHUNK: usize = 100;

/// One attempt as the index keeps it (the full record is in the row too).
#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub commit: String,
    pub tree: String,
    pub config_hash: Option<String>,
    pub trigger: Trigger,
    pub finished_at: String,
    pub reason: String,
}

impl Index {
    /// Keep `r`, a run that could not run its tests for `reason`; returns its id.
    pub fn add_attempt(&self, repository_id: &str, r: &RunRecord, reason: &str) -> Result<i64> {
        let json = serde_json::to_string(r).expect("records always serialize");
        Ok(self.conn.query_row(
            "INSERT INTO attempts (repository_id, commit_id, tree_id, config_hash, trigger,
                                   finished_at, reason, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
            params![
                repository_id,
                r.commit,
                r.tree,
                r.config_hash,
                r.trigger.as_str(),
                r.finished_at,
                reason,
                json
            ],
            |row| row.get(0),
        )?)
    }

    /// Forget the attempts of `commits`: a run of theirs ran its tests, and its result is news.
    pub fn end_attempts(&self, repository_id: &str, commits: &[&str]) -> Result<()> {
        for chunk in commits.chunks(CHUNK) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            self.conn.execute(
                &format!(
                    "DELETE FROM attempts WHERE repository_id = ?1 AND commit_id IN ({})",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
        }
        Ok(())
    }

    /// The attempts of `commits`, oldest first.
    pub fn attempts_of(&self, repository_id: &str, commits: &[&str]) -> Result<Vec<AttemptRow>> {
        let mut out = Vec::new();
        for chunk in commits.chunks(CHUNK) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            let rows = self.conn.query(
                &format!(
                    "SELECT commit_id, tree_id, config_hash, trigger, finished_at, reason
                     FROM attempts WHERE repository_id = ?1 AND commit_id IN ({})
                     ORDER BY id",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
            for r in rows {
                let trigger: String = r.get(3)?;
                out.push(AttemptRow {
                    commit: r.get(0)?,
                    tree: r.get(1)?,
                    config_hash: r.get(2)?,
                    trigger: Trigger::parse(&trigger),
                    finished_at: r.get(4)?,
                    reason: r.get(5)?,
                });
            }
        }
        Ok(out)
    }
}
