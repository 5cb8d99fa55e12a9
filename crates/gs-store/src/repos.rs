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
    /// Among the newest 1,000 runs (one a commit), the faulty commits whose run had a probe
    /// beside it: those whose probe found at least one of the run's failures, and those whose
    /// probe ran to its end and found none (`tests.selection_missed`). Phase one's recall by
    /// commit.
    pub selection_caught: u64,
    pub selection_missed: u64,
    /// Over the same runs, the failing tests phase one held (each run's `phases[0].failed`), out
    /// of all their failing tests (both phases' `failed`: the run's failed and errors) as far as
    /// each record lists them (its first 50). Phase one's recall by test.
    pub selection_tests_caught: u64,
    pub selection_tests_failed: u64,
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

    /// The notes commit at which the index holds every note of `refs/notes/sandbox` as its run
    /// row (and no run row for a note that holds none): set by whoever indexed them all (a
    /// reindex, at the tip it read), moved on by each writer that indexes what it wrote.
    pub fn notes_tip(&self, id: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT notes_tip FROM repositories WHERE id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }

    /// Set (or forget, `None`) [`Index::notes_tip`].
    pub fn set_notes_tip(&self, id: &str, tip: Option<&str>) -> Result<()> {
        self.conn.execute(
            "UPDATE repositories SET notes_tip = ?2 WHERE id = ?1",
            params![id, tip],
        )?;
        Ok(())
    }

    /// Move [`Index::notes_tip`] from `old` (the tip a notes commit was written on; `None`: no
    /// notes ref before it) to `new`, in the transaction that indexes that commit's notes. Only
    /// from `old`: notes that moved in between (another writer, `git fetch`, `git notes`) may
    /// not be indexed, so the tip stays behind and readers read the notes themselves.
    pub fn advance_notes_tip(&self, id: &str, old: Option<&str>, new: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE repositories SET notes_tip = ?3 WHERE id = ?1
             AND (notes_tip = ?2 OR (notes_tip IS NULL AND CAST(?2 AS TEXT) IS NULL))",
            params![id, old, new],
        )?;
        Ok(())
    }

    pub fn touch_repository(&self, id: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE repositories SET last_activity = ?2 WHERE id = ?1",
            params![id, gs_util::time::now_rfc3339()],
        )?;
        Ok(())
    }

    /// Every registered repository with its counts.
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
        repos
            .into_iter()
            .map(|repo| {
                let n = pending.get(&repo.repository_id).copied().unwrap_or(0);
                self.stats_of(repo, n as u64)
            })
            .collect()
    }

    /// One repository's counts, as [`Index::repository_stats`] gives them; `None`: no such id.
    pub fn repository_stats_of(&self, id: &str) -> Result<Option<RepoStats>> {
        let Some(repo) = self.repository_by_id(id)? else {
            return Ok(None);
        };
        let pending: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM jobs
             WHERE repository_id = ?1 AND state IN ('pending', 'assigned', 'running')",
            [id],
            |r| r.get(0),
        )?;
        Ok(Some(self.stats_of(repo, pending as u64)?))
    }

    fn stats_of(&self, repo: RepoRow, pending_jobs: u64) -> Result<RepoStats> {
        // A skipped commit (superseded, out of budget) is no run: not counted.
        let (runs, passed, mean) = self.repository_run_totals(&repo.repository_id)?;
        let experiments: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM experiments WHERE repository_id = ?1",
            [&repo.repository_id],
            |r| r.get(0),
        )?;
        // The failing two-phase runs among the last 1,000 (one range of `runs_newest`, so the
        // cost does not grow with the history), read by their keys under `tests`: a pattern
        // over the whole record would also match a key elsewhere in it (a toolchain's program
        // word) and LIKE's `_` any character. PostgreSQL parses each record once, as `j`.
        // Recall by test: phase one's `failed` (the run's failures among the tests phase one
        // ran, over every failure the output named) over phase one's and phase two's, which
        // are the run's failed and errored tests.
        let (json, phases, first, missed, one, two) = if self.conn.is_pg() {
            (
                "CAST(record AS json)",
                "json_typeof(j -> 'tests' -> 'phases') = 'array'",
                "json_typeof(j -> 'tests' -> 'first_failure_ms') = 'number'",
                "(j -> 'tests' ->> 'selection_missed') = 'true'",
                "CAST(j -> 'tests' -> 'phases' -> 0 ->> 'failed' AS BIGINT)",
                "CAST(j -> 'tests' -> 'phases' -> 1 ->> 'failed' AS BIGINT)",
            )
        } else {
            (
                "record",
                "json_type(j, '$.tests.phases') = 'array'",
                "json_type(j, '$.tests.first_failure_ms') IN ('integer', 'real')",
                "json_type(j, '$.tests.selection_missed') = 'true'",
                "json_extract(j, '$.tests.phases[0].failed')",
                "json_extract(j, '$.tests.phases[1].failed')",
            )
        };
        // (SUM of a BIGINT is a NUMERIC in PostgreSQL: cast back.)
        let (caught, missed, tests_caught, tests_failed): (i64, i64, i64, i64) =
            self.conn.query_row(
                &format!(
                    "SELECT COALESCE(SUM(CASE WHEN {missed} THEN 0 ELSE 1 END), 0),
                            COALESCE(SUM(CASE WHEN {missed} THEN 1 ELSE 0 END), 0),
                            CAST(COALESCE(SUM(COALESCE({one}, 0)), 0) AS BIGINT),
                            CAST(COALESCE(SUM(COALESCE({one}, 0) + COALESCE({two}, 0)), 0)
                                 AS BIGINT)
                     FROM (SELECT {json} AS j, cached_from FROM runs WHERE repository_id = ?1
                           ORDER BY id DESC LIMIT 1000) AS recent
                     WHERE cached_from IS NULL AND {phases} AND {first}"
                ),
                [&repo.repository_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
        Ok(RepoStats {
            selection_caught: caught as u64,
            selection_missed: missed as u64,
            selection_tests_caught: tests_caught as u64,
            selection_tests_failed: tests_failed as u64,
            repo,
            experiments: experiments as u64,
            runs,
            passed_runs: passed,
            failed_runs: runs - passed,
            pending_jobs,
            mean_duration_ms: mean,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gs_model::{RunRecord, TestPhase};

    /// A run of a commit: two phases or one, failing (first failure known) or passing.
    fn run(commit: &str, two_phases: bool, failed: bool, missed: bool) -> RunRecord {
        let phase = TestPhase {
            files: vec![],
            command: "pytest".into(),
            exit_code: Some(0),
            passed: Some(1),
            failed: Some(0),
            errors: Some(0),
            total: Some(1),
            duration_ms: 5,
        };
        let status = if failed { "failed" } else { "passed" };
        let mut r: RunRecord = serde_json::from_value(serde_json::json!({
            "schema": "git-sandbox/run/v1", "commit": commit, "tree": "b".repeat(40),
            "parents": [], "ref": "refs/heads/main", "experiment": null, "trigger": "manual",
            "status": status, "started_at": "2026-11-27T10:00:00Z",
            "finished_at": "2026-11-27T10:00:01Z", "duration_ms": 10, "cached_from": null,
            "analysis": null, "changes": null,
        }))
        .expect("a record");
        let mut t: gs_model::Tests = serde_json::from_value(serde_json::json!({
            "command": "pytest", "exit_code": u8::from(failed), "duration_ms": 10,
            "passed": 1, "failed": u8::from(failed), "errors": 0, "total": 2, "failures": [],
            "output_tail": "", "killed_by": null, "resources": {"cpu_ms": 1, "max_rss_kb": 1},
            "output_truncated": false,
        }))
        .expect("tests");
        if two_phases {
            t.phases = vec![phase.clone(), phase];
        }
        if failed {
            t.first_failure_ms = Some(3);
        }
        t.selection_missed = missed;
        r.tests = Some(t);
        r
    }

    #[test]
    fn the_selections_recall_counts_failing_two_phase_runs_by_their_own_keys() {
        let dir = tempfile::tempdir().unwrap();
        let index = crate::Index::open_file(&dir.path().join("index.db")).unwrap();
        index
            .upsert_repository(&RepoRow {
                repository_id: "r".into(),
                name: "r".into(),
                path: "/r".into(),
                url: String::new(),
                repository_type: "local".into(),
                created_at: "2026-11-27T10:00:00Z".into(),
                last_activity: None,
                remote_url: None,
            })
            .unwrap();
        // A passing two-phase run whose tools include a program `first-failure-ms` (and one
        // named `selection_missed`): no failure, nothing missed.
        let mut passing = run(&"1".repeat(40), true, false, false);
        passing.toolchain.insert(
            "first-failure-ms".into(),
            "/usr/local/bin/first-failure-ms".into(),
        );
        passing
            .toolchain
            .insert("selection_missed".into(), "true".into());
        // Failing tests by phase: phase one held 2 of 3, then none of 1 (missed), then 1 of 1;
        // the one-phase run and the one served from another commit's result count for nothing.
        let failing = |commit: char, phases: Option<(u64, u64)>, missed: bool| {
            let mut r = run(
                &commit.to_string().repeat(40),
                phases.is_some(),
                true,
                missed,
            );
            let t = r.tests.as_mut().unwrap();
            // The record lists its failures (recall by test counts over those it lists).
            let (a, b) = phases.unwrap_or((1, 0));
            t.failures = (0..a + b)
                .map(|i| gs_model::Failure {
                    name: format!("tests/t.py::t{i}"),
                    message: String::new(),
                })
                .collect();
            for (phase, n) in t
                .phases
                .iter_mut()
                .zip(phases.map(|(a, b)| [a, b]).into_iter().flatten())
            {
                phase.failed = Some(n);
            }
            r
        };
        let mut served = failing('6', Some((1, 0)), false);
        served.cached_from = Some("5".repeat(40));
        let records = [
            passing,
            failing('2', Some((2, 1)), false),
            failing('3', Some((0, 1)), true),
            failing('4', None, false),
            failing('5', Some((1, 0)), false),
            served,
        ];
        index.put_runs("r", &records).unwrap();
        let stats = index.repository_stats().unwrap();
        let counts = |s: &RepoStats| {
            (
                s.selection_caught,
                s.selection_missed,
                s.selection_tests_caught,
                s.selection_tests_failed,
            )
        };
        assert_eq!(counts(&stats[0]), (2, 1, 3, 5), "{stats:?}");
        let one = index.repository_stats_of("r").unwrap().expect("r");
        assert_eq!(counts(&one), (2, 1, 3, 5), "{one:?}");
        assert!(index.repository_stats_of("nobody").unwrap().is_none());
    }
}
