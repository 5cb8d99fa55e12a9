//! Registered repositories and the per-repository figures `list` and `status` show.

use super::sql::{params, OptionalExtension, Row};
use super::{Index, Result};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoRow {
    pub repository_id: String,
    pub name: String,
    pub path: String,
    pub url: String,
    pub repository_type: String,
    pub created_at: String,
    pub last_activity: Option<String>,
    /// The remote other machines clone it from (credentials removed), when it has one.
    pub remote_url: Option<String>,
}

/// A repository with its counts, as `list` and `status` print it.
#[derive(Debug, Clone, Serialize)]
pub struct RepoStats {
    #[serde(flatten)]
    pub repo: RepoRow,
    pub experiments: u64,
    pub runs: u64,
    pub passed_runs: u64,
    pub failed_runs: u64,
    pub pending_jobs: u64,
    pub mean_duration_ms: Option<f64>,
    /// Failing two-phase runs whose phase one showed a failure, and those whose phase one
    /// passed (the selection missed every failure): the selection's recall.
    pub selection_caught: u64,
    pub selection_missed: u64,
}

fn row(r: &Row) -> super::sql::Result<RepoRow> {
    Ok(RepoRow {
        repository_id: r.get(0)?,
        name: r.get(1)?,
        path: r.get(2)?,
        url: r.get(3)?,
        repository_type: r.get(4)?,
        created_at: r.get(5)?,
        last_activity: r.get(6)?,
        remote_url: r.get(7)?,
    })
}

/// The index rows one repository has, as `forget` and `gc` report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RepoRows {
    pub runs: u64,
    pub experiments: u64,
    pub evaluations: u64,
    pub jobs: u64,
    pub events: u64,
}

const COLS: &str = "id, name, path, url, repository_type, created_at, last_activity, remote_url";

/// Where this data dir keeps its clone of repository `id` on a shared index. The id comes from
/// the database: anything but letters, digits, `_` and `-` becomes `_` (never a path of its own).
pub fn clone_path(home: &std::path::Path, id: &str) -> std::path::PathBuf {
    let name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    home.join("clones").join(format!("{name}.git"))
}

impl Index {
    /// Register a repository, or update the row that has the same id or path.
    /// On a shared index the row of another machine keeps its name and path (each machine
    /// knows its own path from its registry); only a missing remote is filled in.
    pub fn upsert_repository(&self, repo: &RepoRow) -> Result<()> {
        let update = if self.is_shared() {
            "remote_url = COALESCE(repositories.remote_url, excluded.remote_url)"
        } else {
            "name = excluded.name, path = excluded.path, url = excluded.url,
             remote_url = excluded.remote_url"
        };
        self.conn.execute(
            &format!(
                "INSERT INTO repositories (id, name, path, url, repository_type, created_at, last_activity, remote_url)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET {update}"
            ),
            params![
                repo.repository_id,
                repo.name,
                repo.path,
                repo.url,
                repo.repository_type,
                repo.created_at,
                repo.last_activity,
                repo.remote_url
            ],
        )?;
        Ok(())
    }

    /// The repository cloned from `url` (a shared index: another machine registered it).
    pub fn repository_by_remote(&self, url: &str) -> Result<Option<RepoRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLS} FROM repositories WHERE remote_url = ?1 ORDER BY created_at LIMIT 1"),
                [url],
                row,
            )
            .optional()?
            .map(|r| self.here(r)))
    }

    /// `r` with the path it has on this machine (see [`Index::localize`]).
    fn here(&self, r: RepoRow) -> RepoRow {
        self.all_here(vec![r]).pop().expect("one row in, one out")
    }

    /// [`Index::here`] for many rows, reading the registry once.
    fn all_here(&self, mut rows: Vec<RepoRow>) -> Vec<RepoRow> {
        if let Some(home) = &self.local {
            let registry = super::registry::list(home);
            for r in &mut rows {
                r.path = match registry.iter().find(|e| e.id == r.repository_id) {
                    Some(e) => e.path.display().to_string(),
                    None => clone_path(home, &r.repository_id).display().to_string(),
                };
            }
        }
        rows
    }

    pub fn repository_by_id(&self, id: &str) -> Result<Option<RepoRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLS} FROM repositories WHERE id = ?1"),
                [id],
                row,
            )
            .optional()?
            .map(|r| self.here(r)))
    }

    pub fn repositories(&self) -> Result<Vec<RepoRow>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM repositories ORDER BY created_at, name"
        ))?;
        let rows = stmt
            .query_map(params![], row)?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(self.all_here(rows))
    }

    /// How many rows of each kind the index holds for a repository.
    pub fn repository_rows(&self, id: &str) -> Result<RepoRows> {
        let count = |table: &str| -> Result<u64> {
            let n: i64 = self.conn.query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE repository_id = ?1"),
                [id],
                |r| r.get(0),
            )?;
            Ok(n as u64)
        };
        Ok(RepoRows {
            runs: count("runs")?,
            experiments: count("experiments")?,
            evaluations: count("evaluations")?,
            jobs: count("jobs")?,
            events: count("events")?,
        })
    }

    /// Remove a repository and everything the index holds for it (runs, experiments,
    /// evaluations, jobs, events), in one transaction. Returns what was removed.
    pub fn delete_repository(&self, id: &str) -> Result<RepoRows> {
        let tx = self.conn.transaction()?;
        let rows = self.repository_rows(id)?;
        for table in [
            "attempts",
            "executions",
            "runs",
            "experiments",
            "evaluations",
            "jobs",
            "events",
        ] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE repository_id = ?1"),
                [id],
            )?;
        }
        tx.execute("DELETE FROM repositories WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(rows)
    }

    /// Whether a job of the repository is being run (by the daemon) right now.
    pub fn has_running_job(&self, id: &str) -> Result<bool> {
        Ok(self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE repository_id = ?1 AND state IN ('assigned', 'running'))",
            [id],
            |r| r.get(0),
        )?)
    }

    pub fn touch_repository(&self, id: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE repositories SET last_activity = ?2 WHERE id = ?1",
            params![id, gs_util::time::now_rfc3339()],
        )?;
        Ok(())
    }

    pub fn repository_stats(&self) -> Result<Vec<RepoStats>> {
        let repos = self.repositories()?;
        // Among the jobs still to do (by the state index), not every job a repository ever had.
        let pending: std::collections::HashMap<String, i64> = self
            .conn
            .query(
                "SELECT repository_id, COUNT(*) FROM jobs
                 WHERE state IN ('pending', 'assigned', 'running') GROUP BY repository_id",
                params![],
            )?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?)))
            .collect::<super::sql::Result<_>>()?;
        let mut out = Vec::with_capacity(repos.len());
        for repo in repos {
            // A skipped commit (superseded, out of budget) is no run: not counted.
            let (runs, passed, mean) = self.repository_run_totals(&repo.repository_id)?;
            let experiments: i64 = self.conn.query_row(
                "SELECT COUNT(*) FROM experiments WHERE repository_id = ?1",
                [&repo.repository_id],
                |r| r.get(0),
            )?;
            let pending_jobs = pending.get(&repo.repository_id).copied().unwrap_or(0);
            // Records are kept as compact JSON: these keys appear only in two-phase runs. The
            // recall is that of the last 1,000 runs (one range of `runs_newest`), so the cost
            // does not grow with the history.
            let (caught, missed): (i64, i64) = self.conn.query_row(
                "SELECT COALESCE(SUM(CASE WHEN record NOT LIKE '%\"selection_missed\":true%' THEN 1 ELSE 0 END), 0),
                        COALESCE(SUM(CASE WHEN record LIKE '%\"selection_missed\":true%' THEN 1 ELSE 0 END), 0)
                 FROM (SELECT record, cached_from FROM runs WHERE repository_id = ?1
                       ORDER BY id DESC LIMIT 1000) AS recent
                 WHERE cached_from IS NULL
                   AND record LIKE '%\"phases\":[%' AND record LIKE '%\"first_failure_ms\":%'",
                [&repo.repository_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            out.push(RepoStats {
                selection_caught: caught as u64,
                selection_missed: missed as u64,
                repo,
                experiments: experiments as u64,
                runs,
                passed_runs: passed,
                failed_runs: runs - passed,
                pending_jobs: pending_jobs as u64,
                mean_duration_ms: mean,
            });
        }
        Ok(out)
    }
}
