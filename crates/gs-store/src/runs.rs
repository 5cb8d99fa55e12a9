//! Indexed run records: one row per (repository, commit), the full record kept as JSON.

use super::sql::{params, OptionalExtension};
use super::{Index, Result};
use gs_model::RunRecord;
use std::collections::{HashMap, HashSet};

/// Rows per statement of the batched reads and writes (19 parameters a run: well within
/// SQLite's and PostgreSQL's limits).
const CHUNK: usize = 100;

#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: i64,
    pub record: RunRecord,
}

/// The columns a [`RunRow`] is read from, in [`decode`]'s order.
const COLUMNS: &str = "id, record, verified";

/// A row from its id, its record and who vouches for it: the `verified` column alone says so,
/// whatever the record's JSON holds.
fn decode(id: i64, json: String, verified: Option<String>) -> super::sql::Result<RunRow> {
    let mut record: RunRecord = serde_json::from_str(&json).map_err(|e| {
        super::sql::Error::Decode(0, format!("a record that is no run record: {e}"))
    })?;
    record.verified = verified.and_then(|v| serde_json::from_str(&v).ok());
    Ok(RunRow { id, record })
}

/// [`Index::runs_before`]'s query: a range of the index `runs_newest` (schema 15).
fn newest_first() -> String {
    format!(
        "SELECT {COLUMNS} FROM runs
         WHERE repository_id = ?1 AND id < COALESCE(CAST(?2 AS BIGINT), 9223372036854775807)
         ORDER BY id DESC LIMIT ?3"
    )
}

/// The statement that inserts `n` runs' rows (as [`rows`] gives their values) or, for a commit
/// the repository has a row of, replaces that row.
fn upsert(n: usize) -> String {
    let rows = (0..n)
        .map(|i| format!("({})", super::sql::placeholders(19 * i + 1, 19)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO runs (repository_id, commit_id, tree_id, config_hash, refname, experiment, trigger,
                           status, started_at, finished_at, duration_ms, passed, failed, skipped, errors,
                           total, cached_from, record, verified)
         VALUES {rows}
         ON CONFLICT (repository_id, commit_id) DO UPDATE SET
            tree_id = excluded.tree_id, config_hash = excluded.config_hash, refname = excluded.refname,
            experiment = excluded.experiment, trigger = excluded.trigger, status = excluded.status,
            started_at = excluded.started_at, finished_at = excluded.finished_at,
            duration_ms = excluded.duration_ms, passed = excluded.passed, failed = excluded.failed,
            skipped = excluded.skipped, errors = excluded.errors, total = excluded.total,
            cached_from = excluded.cached_from, record = excluded.record,
            verified = excluded.verified"
    )
}

/// The values of [`upsert`]'s rows, 19 a record: every column but the record's JSON and who
/// vouches for it is read from them.
fn rows(repository_id: &str, records: &[&RunRecord]) -> Vec<super::sql::Val> {
    let mut p = Vec::with_capacity(19 * records.len());
    for r in records {
        let t = r.tests.as_ref();
        let json = serde_json::to_string(r).expect("records always serialize");
        p.extend(params![
            repository_id,
            r.commit,
            r.tree,
            r.config_hash,
            r.refname,
            r.experiment,
            r.trigger.as_str(),
            r.status.as_str(),
            r.started_at,
            r.finished_at,
            r.duration_ms as i64,
            t.and_then(|t| t.passed).map(|v| v as i64),
            t.and_then(|t| t.failed).map(|v| v as i64),
            t.and_then(|t| t.skipped).map(|v| v as i64),
            t.and_then(|t| t.errors).map(|v| v as i64),
            t.and_then(|t| t.total).map(|v| v as i64),
            r.cached_from,
            json,
            r.verified
                .as_ref()
                .map(|v| serde_json::to_string(v).expect("plain strings serialize"))
        ]);
    }
    p
}

impl Index {
    /// Insert or replace the indexed copy of a record; returns the run id.
    pub fn put_run(&self, repository_id: &str, r: &RunRecord) -> Result<i64> {
        Ok(self.put_runs(repository_id, std::slice::from_ref(r))?[0])
    }

    /// Insert or replace the indexed copies of records, a statement per [`CHUNK`] of them (one
    /// round trip, not one per record); returns their run ids in order. Of two records of one
    /// commit the later stands, as if put one after the other.
    pub fn put_runs(&self, repository_id: &str, records: &[RunRecord]) -> Result<Vec<i64>> {
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            last.insert(r.commit.as_str(), i);
        }
        let kept: Vec<&RunRecord> = records
            .iter()
            .enumerate()
            .filter(|(i, r)| last[r.commit.as_str()] == *i)
            .map(|(_, r)| r)
            .collect();
        let mut ids: HashMap<String, i64> = HashMap::with_capacity(kept.len());
        for chunk in kept.chunks(CHUNK) {
            let returned = self.conn.query(
                &format!("{} RETURNING commit_id, id", upsert(chunk.len())),
                rows(repository_id, chunk),
            )?;
            for row in returned {
                ids.insert(row.get(0)?, row.get(1)?);
            }
        }
        records
            .iter()
            .map(|r| {
                ids.get(&r.commit)
                    .copied()
                    .ok_or_else(|| super::sql::Error::NoRows.into())
            })
            .collect()
    }

    /// The indexed runs of `commits` (those that have one), by commit: a query per [`CHUNK`]
    /// of them, not one per commit.
    pub fn runs_for_commits(
        &self,
        repository_id: &str,
        commits: &[&str],
    ) -> Result<HashMap<String, RunRow>> {
        let mut found = HashMap::new();
        for chunk in commits.chunks(CHUNK) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            let rows = self.conn.query(
                &format!(
                    "SELECT {COLUMNS}, commit_id FROM runs WHERE repository_id = ?1 AND commit_id IN ({})",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
            for r in rows {
                found.insert(r.get(3)?, decode(r.get(0)?, r.get(1)?, r.get(2)?)?);
            }
        }
        Ok(found)
    }

    /// The indexed record of `commit` in any repository (commit ids do not repeat across them).
    pub fn run_of_commit(&self, commit: &str) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM runs WHERE commit_id = ?1 LIMIT 1"),
                [commit],
                |r| decode(r.get(0)?, r.get(1)?, r.get(2)?),
            )
            .optional()?)
    }

    pub fn run_for_commit(&self, repository_id: &str, commit: &str) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM runs WHERE repository_id = ?1 AND commit_id = ?2"),
                [repository_id, commit],
                |r| decode(r.get(0)?, r.get(1)?, r.get(2)?),
            )
            .optional()?)
    }

    /// A finished, first-hand result for the same tree under the same config (the cache), made
    /// for another commit than `not_commit`: only evidence (a record somebody vouches for), so a
    /// report from elsewhere never passes for another commit's result.
    pub fn run_for_tree(
        &self,
        repository_id: &str,
        tree: &str,
        config_hash: Option<&str>,
        not_commit: &str,
    ) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM runs
                 WHERE repository_id = ?1 AND tree_id = ?2 AND (CAST(?3 AS TEXT) IS NULL OR config_hash = ?3)
                   AND cached_from IS NULL AND status NOT IN ('error', 'skipped', 'unknown')
                   AND commit_id != ?4 AND verified IS NOT NULL
                 ORDER BY finished_at DESC LIMIT 1"),
                params![repository_id, tree, config_hash, not_commit],
                |r| decode(r.get(0)?, r.get(1)?, r.get(2)?),
            )
            .optional()?)
    }

    /// The newest failed runs (at most `limit`) of commits that changed `path`, as their records
    /// list the changed files: "what failed the last time this file changed".
    pub fn failed_runs_changing(
        &self,
        repository_id: &str,
        path: &str,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        let quoted = serde_json::to_string(path).unwrap_or_default();
        let pattern = format!("%\"path\":{}%", super::jobs::like_escape(&quoted));
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM runs
             WHERE repository_id = ?1 AND status = 'failed' AND record LIKE ?2 ESCAPE '\\'
             ORDER BY finished_at DESC LIMIT ?3"
        ))?;
        let rows = stmt
            .query_map(params![repository_id, pattern, limit as i64], |r| {
                decode(r.get(0)?, r.get(1)?, r.get(2)?)
            })?
            .collect::<super::sql::Result<Vec<_>>>()?;
        // The pattern may match the path elsewhere in a record: its changes say.
        Ok(rows
            .into_iter()
            .map(|r| r.record)
            .filter(|r| {
                r.changes
                    .as_ref()
                    .is_some_and(|c| c.files.iter().any(|f| f.path == path))
            })
            .collect())
    }

    /// Every indexed record of a repository.
    pub fn run_records(&self, repository_id: &str) -> Result<Vec<RunRecord>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM runs WHERE repository_id = ?1"
        ))?;
        let rows = stmt
            .query_map([repository_id], |r| decode(r.get(0)?, r.get(1)?, r.get(2)?))?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows.into_iter().map(|r| r.record).collect())
    }

    /// Indexed runs, oldest first: those after run id `since`, else the newest `limit`; only of
    /// one repository and one status when given. Each with its id and repository id.
    pub fn runs_page(
        &self,
        repository_id: Option<&str>,
        status: Option<&str>,
        since: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, String, RunRecord)>> {
        let order = if since.is_some() { "ASC" } else { "DESC" };
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT id, repository_id, record, verified FROM runs
             WHERE (CAST(?1 AS TEXT) IS NULL OR repository_id = ?1)
               AND (CAST(?2 AS TEXT) IS NULL OR status = ?2)
               AND id > COALESCE(CAST(?3 AS BIGINT), 0)
             ORDER BY id {order} LIMIT ?4"
        ))?;
        let mut rows = stmt
            .query_map(
                params![
                    repository_id,
                    status,
                    since,
                    limit.min(i64::MAX as usize) as i64
                ],
                |r| {
                    let repo: String = r.get(1)?;
                    decode(r.get(0)?, r.get(2)?, r.get(3)?).map(|run| (run.id, repo, run.record))
                },
            )?
            .collect::<super::sql::Result<Vec<_>>>()?;
        if since.is_none() {
            rows.reverse();
        }
        Ok(rows)
    }

    /// A repository's indexed runs newest first (by run id), those before run id `before` when
    /// given: keyset paging, so each page is one range of the primary key whatever the history.
    pub fn runs_before(
        &self,
        repository_id: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<RunRow>> {
        let mut stmt = self.conn.prepare_cached(&newest_first())?;
        let rows = stmt
            .query_map(
                params![repository_id, before, limit.min(i64::MAX as usize) as i64],
                |r| decode(r.get(0)?, r.get(1)?, r.get(2)?),
            )?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// One indexed run by its id, with its repository id.
    pub fn run_by_id(&self, id: i64) -> Result<Option<(String, RunRecord)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, repository_id, record, verified FROM runs WHERE id = ?1")?;
        Ok(stmt
            .query_row([id], |r| {
                let repo: String = r.get(1)?;
                decode(r.get(0)?, r.get(2)?, r.get(3)?).map(|run| (repo, run.record))
            })
            .optional()?)
    }

    /// The newest indexed runs of a repository: commit, status and when it finished.
    pub fn recent_runs(
        &self,
        repository_id: &str,
        limit: usize,
    ) -> Result<Vec<(String, String, String)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT commit_id, status, finished_at FROM runs WHERE repository_id = ?1
             ORDER BY finished_at DESC, id DESC LIMIT ?2",
        )?;
        let rows = stmt
            .query_map(params![repository_id, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Forget the indexed result of one commit.
    pub fn delete_run(&self, repository_id: &str, commit: &str) -> Result<()> {
        self.conn.execute(
            "DELETE FROM runs WHERE repository_id = ?1 AND commit_id = ?2",
            [repository_id, commit],
        )?;
        Ok(())
    }

    /// Take away who vouches for every result of a repository that was served from another
    /// commit's (`cached_from`) unless that commit's own result, of the same tree and config,
    /// is evidence in the index now: a copy is worth what its source is worth, as this machine
    /// trusts signers today. Returns how many lost it.
    pub fn demote_unbacked_copies(&self, repository_id: &str) -> Result<usize> {
        Ok(self.conn.execute(
            "UPDATE runs SET verified = NULL
             WHERE repository_id = ?1 AND cached_from IS NOT NULL AND verified IS NOT NULL
               AND NOT EXISTS (
                 SELECT 1 FROM runs s
                 WHERE s.repository_id = runs.repository_id AND s.commit_id = runs.cached_from
                   AND s.cached_from IS NULL AND s.verified IS NOT NULL
                   AND s.tree_id = runs.tree_id
                   AND (s.config_hash = runs.config_hash
                        OR (s.config_hash IS NULL AND runs.config_hash IS NULL)))",
            [repository_id],
        )?)
    }

    pub fn delete_runs(&self, repository_id: &str) -> Result<usize> {
        Ok(self
            .conn
            .execute("DELETE FROM runs WHERE repository_id = ?1", [repository_id])?)
    }

    /// The commits a repository has runs of: what a refill ([`Index::refill_runs`]) starts
    /// from, each taken out as its record is put, the rest deleted at the end.
    pub fn run_commits(&self, repository_id: &str) -> Result<HashSet<String>> {
        self.conn
            .query(
                "SELECT commit_id FROM runs WHERE repository_id = ?1",
                [repository_id],
            )?
            .iter()
            .map(|r| Ok(r.get(0)?))
            .collect()
    }

    /// [`Index::atomically`] for a refill of runs ([`Index::refill_runs`]): on SQLite with a
    /// page cache that holds every page the refill writes (up to 64 MiB), so each is written
    /// once at the commit rather than spilled to the log mid-way and written again (30,000 runs
    /// into an empty index: 2.0 s, now 1.7 s).
    pub fn refilling<T, E: From<super::StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let before: Option<i64> = (!self.conn.is_pg())
            .then(|| {
                self.conn
                    .query_row("PRAGMA cache_size", params![], |r| r.get(0))
                    .ok()
            })
            .flatten();
        if before.is_some() {
            self.conn
                .execute_batch("PRAGMA cache_size = -65536")
                .map_err(super::StoreError::from)?;
        }
        let out = self.atomically(f);
        if let Some(size) = before {
            let _ = self
                .conn
                .execute_batch(&format!("PRAGMA cache_size = {size}"));
        }
        out
    }

    /// [`Index::put_runs`] for refilling the index from the notes (a reindex): a row that holds
    /// the same record, vouched for alike, is left as it is (no write, its id kept, the
    /// repository's figures and generation untouched), and nothing is returned. One record a
    /// commit.
    pub fn refill_runs(&self, repository_id: &str, records: &[RunRecord]) -> Result<()> {
        let records: Vec<&RunRecord> = records.iter().collect();
        for chunk in records.chunks(CHUNK) {
            self.conn.execute(
                &format!(
                    "{}
                     WHERE runs.record IS DISTINCT FROM excluded.record
                        OR runs.verified IS DISTINCT FROM excluded.verified",
                    upsert(chunk.len())
                ),
                rows(repository_id, chunk),
            )?;
        }
        Ok(())
    }

    /// Delete the runs of `commits` (a statement per [`CHUNK`] of them).
    pub fn delete_runs_of(&self, repository_id: &str, commits: &[&str]) -> Result<usize> {
        let mut deleted = 0;
        for chunk in commits.chunks(CHUNK) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            deleted += self.conn.execute(
                &format!(
                    "DELETE FROM runs WHERE repository_id = ?1 AND commit_id IN ({})",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
        }
        Ok(deleted)
    }

    /// Overall figures for `status`: (runs, passed, mean duration of first-hand runs). A
    /// skipped commit is no run. Read from the figures kept per repository (`run_totals`), not
    /// from the runs.
    pub fn run_totals(&self) -> Result<(u64, u64, Option<f64>)> {
        let (runs, passed, mean): (i64, i64, Option<f64>) = self.conn.query_row(
            "SELECT CAST(COALESCE(SUM(runs), 0) AS BIGINT), CAST(COALESCE(SUM(passed), 0) AS BIGINT),
                    CAST(SUM(made_ms) AS DOUBLE PRECISION) / NULLIF(CAST(SUM(made) AS DOUBLE PRECISION), 0)
             FROM run_totals",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok((runs as u64, passed as u64, mean))
    }

    /// A repository's figures: (runs, passed, mean duration of first-hand runs), skipped
    /// commits left out, as `run_totals` keeps them.
    pub fn repository_run_totals(&self, repository_id: &str) -> Result<(u64, u64, Option<f64>)> {
        let found: Option<(i64, i64, i64, i64)> = self
            .conn
            .query_row(
                "SELECT runs, passed, made, made_ms FROM run_totals WHERE repository_id = ?1",
                [repository_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let (runs, passed, made, made_ms) = found.unwrap_or_default();
        let mean = (made > 0).then(|| made_ms as f64 / made as f64);
        Ok((runs as u64, passed as u64, mean))
    }

    /// A number that moves whenever a run of the repository is written, replaced or removed
    /// (never back: its row outlives the repository's runs), so a reader can tell that nothing
    /// changed since it last looked.
    pub fn run_generation(&self, repository_id: &str) -> Result<i64> {
        Ok(self
            .conn
            .query_row(
                "SELECT generation FROM run_totals WHERE repository_id = ?1",
                [repository_id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }

    /// Up to `limit` indexed records of a repository after run id `after`, by id, with their
    /// ids: every record, a page at a time (bounded memory however long the history).
    pub fn run_records_after(
        &self,
        repository_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, RunRecord)>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM runs WHERE repository_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
        ))?;
        let rows = stmt
            .query_map(params![repository_id, after, limit as i64], |r| {
                decode(r.get(0)?, r.get(1)?, r.get(2)?)
            })?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows.into_iter().map(|r| (r.id, r.record)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of a repository's runs costs the same with a million of them: SQLite reads one
    /// range of an index, without sorting every run of the repository first.
    #[test]
    fn a_page_of_runs_newest_first_is_one_range_of_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open_file(&dir.path().join("index.db")).unwrap();
        let plan: Vec<String> = index
            .conn
            .query(
                &format!("EXPLAIN QUERY PLAN {}", newest_first()),
                params!["repo", Some(1000i64), 51i64],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(3).unwrap())
            .collect();
        assert!(
            plan.len() == 1
                && plan[0].contains("USING INDEX runs_newest (repository_id=? AND id<?)"),
            "{plan:?}"
        );
    }
}
