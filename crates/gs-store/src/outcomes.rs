//! What every run that executed left behind, kept when a later run of the same commit replaces
//! its row in `runs`: the CPU it spent (experiment budgets) and the tests that failed on it
//! (flaky tests: one tree, one config, a test that failed on one run and passed on another).

use super::sql::{params, OptionalExtension};
use super::{Index, Result};
use gs_model::{RunRecord, Status};
use std::collections::{BTreeMap, HashMap};

/// A test the same tree (under the same config) both passed and failed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlakyTest {
    pub name: String,
    /// Changes of outcome between consecutive runs of one tree.
    pub flips: u64,
    /// Runs of those trees whose outcome for the test is known.
    pub runs: u64,
    pub failures: u64,
    /// The latest change of outcome: when, and the commit of the run that changed it.
    pub last_flip_at: String,
    pub last_flip_commit: String,
    pub last_outcome: String,
}

/// CPU time of a record: its tests' and its named checks'.
pub fn cpu_ms(r: &RunRecord) -> u64 {
    let tests = r.tests.iter().chain(r.checks.iter().map(|(_, c)| &c.run));
    tests.map(|t| t.resources.cpu_ms).sum()
}

impl Index {
    /// Keep a run that executed here (one not served from another commit's result); a record
    /// kept already (the same commit and end) is left as it is. Only runs this machine made
    /// are kept: a note fetched or read back (`reindex`) is no evidence of flakiness or spend.
    pub fn add_execution(&self, repository_id: &str, r: &RunRecord) -> Result<()> {
        if r.cached_from.is_some() || !r.status.is_result() && r.status != Status::Error {
            return Ok(());
        }
        let id: Option<i64> = self
            .conn
            .query_row(
                "INSERT INTO executions (repository_id, commit_id, tree_id, config_hash, experiment,
                                         status, finished_at, cpu_ms, complete)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (repository_id, commit_id, finished_at) DO NOTHING
                 RETURNING id",
                params![
                    repository_id,
                    r.commit,
                    r.tree,
                    r.config_hash,
                    r.experiment,
                    r.status.as_str(),
                    r.finished_at,
                    cpu_ms(r) as i64,
                    r.failures_complete()
                ],
                |row| row.get(0),
            )
            .optional()?;
        let (Some(id), Some(t)) = (id, &r.tests) else {
            return Ok(());
        };
        for f in &t.failures {
            self.conn.execute(
                "INSERT INTO test_failures (execution_id, name) VALUES (?1, ?2)
                 ON CONFLICT (execution_id, name) DO NOTHING",
                params![id, gs_model::test_name::canonical(&f.name)],
            )?;
        }
        Ok(())
    }

    /// CPU milliseconds the runs of an experiment's commits spent, every run counted.
    pub fn experiment_cpu_ms(&self, repository_id: &str, experiment: &str) -> Result<u64> {
        let ms: i64 = self.conn.query_row(
            "SELECT CAST(COALESCE(SUM(cpu_ms), 0) AS BIGINT) FROM executions
             WHERE repository_id = ?1 AND experiment = ?2",
            params![repository_id, experiment],
            |r| r.get(0),
        )?;
        Ok(ms.max(0) as u64)
    }

    /// Whether a run made here of `tree` under `config_hash` passed the test `name`: the run
    /// passed, or failed naming every failure and not this one.
    pub fn passed_on_tree(
        &self,
        repository_id: &str,
        tree: &str,
        config_hash: Option<&str>,
        name: &str,
    ) -> Result<bool> {
        use gs_model::test_name::canonical;
        // Names are compared in their one form (a row kept before has the name it had then).
        let name = canonical(name);
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.status, f.name FROM executions e
             LEFT JOIN test_failures f ON f.execution_id = e.id
             WHERE e.repository_id = ?1 AND e.tree_id = ?2
               AND COALESCE(e.config_hash, '') = COALESCE(?3, '')
               AND (e.status = 'passed' OR (e.status = 'failed' AND e.complete = 1))
             ORDER BY e.id",
        )?;
        let rows: Vec<(i64, String, Option<String>)> = stmt
            .query_map(params![repository_id, tree, config_hash], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<super::sql::Result<_>>()?;
        let mut failed_here: HashMap<i64, bool> = HashMap::new();
        for (id, status, failure) in rows {
            let failed = status != "passed" && failure.is_some_and(|f| canonical(&f) == name);
            *failed_here.entry(id).or_default() |= failed;
        }
        Ok(failed_here.values().any(|failed| !failed))
    }

    /// Tests of a repository that both passed and failed on one tree under one config, most
    /// flips first.
    pub fn flaky_tests(&self, repository_id: &str) -> Result<Vec<FlakyTest>> {
        // Runs of the trees that ran more than once, in order, with the tests each failed.
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.tree_id, COALESCE(e.config_hash, ''), e.commit_id, e.finished_at,
                    e.complete, f.name
             FROM executions e
             JOIN (SELECT tree_id, config_hash FROM executions
                   WHERE repository_id = ?1 AND status IN ('passed', 'failed')
                   GROUP BY tree_id, config_hash HAVING COUNT(*) > 1) again
               ON again.tree_id = e.tree_id
              AND COALESCE(again.config_hash, '') = COALESCE(e.config_hash, '')
             LEFT JOIN test_failures f ON f.execution_id = e.id
             WHERE e.repository_id = ?1 AND e.status IN ('passed', 'failed')
             ORDER BY e.tree_id, 3, e.finished_at, e.id",
        )?;
        type Row = (i64, String, String, String, String, i64, Option<String>);
        let rows: Vec<Row> = stmt
            .query_map(params![repository_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })?
            .collect::<super::sql::Result<_>>()?;
        // Group into runs per (tree, config), in order.
        struct Run {
            commit: String,
            at: String,
            complete: bool,
            failed: Vec<String>,
        }
        let mut groups: Vec<Vec<Run>> = Vec::new();
        let mut last: Option<(String, String, i64)> = None;
        for (id, tree, config, commit, at, complete, name) in rows {
            let same_group = last
                .as_ref()
                .is_some_and(|(t, c, _)| *t == tree && *c == config);
            let same_run = same_group && last.as_ref().is_some_and(|(_, _, i)| *i == id);
            if !same_group {
                groups.push(Vec::new());
            }
            let runs = groups.last_mut().expect("a group");
            if !same_run {
                runs.push(Run {
                    commit,
                    at,
                    complete: complete != 0,
                    failed: Vec::new(),
                });
            }
            if let Some(n) = name {
                // Names kept before they had one form are matched through the same mapping.
                runs.last_mut()
                    .expect("a run")
                    .failed
                    .push(gs_model::test_name::canonical(&n));
            }
            last = Some((tree, config, id));
        }
        let mut found: BTreeMap<String, FlakyTest> = BTreeMap::new();
        for runs in &groups {
            let mut names: HashMap<&str, ()> = HashMap::new();
            for r in runs {
                for n in &r.failed {
                    names.insert(n, ());
                }
            }
            for name in names.keys() {
                let mut seen = 0;
                let mut failures = 0;
                let mut flips = Vec::new();
                let mut before: Option<bool> = None;
                let mut latest = "";
                for r in runs {
                    let failed = r.failed.iter().any(|n| n == name);
                    if !failed && !r.complete {
                        continue; // not known: the run did not say which tests failed
                    }
                    seen += 1;
                    failures += u64::from(failed);
                    latest = if failed { "failed" } else { "passed" };
                    if before.is_some_and(|b| b != failed) {
                        flips.push(r);
                    }
                    before = Some(failed);
                }
                let Some(newest) = flips.last() else { continue };
                let entry = found.entry(name.to_string()).or_insert(FlakyTest {
                    name: name.to_string(),
                    flips: 0,
                    runs: 0,
                    failures: 0,
                    last_flip_at: String::new(),
                    last_flip_commit: String::new(),
                    last_outcome: String::new(),
                });
                entry.flips += flips.len() as u64;
                entry.runs += seen;
                entry.failures += failures;
                if newest.at > entry.last_flip_at {
                    entry.last_flip_at = newest.at.clone();
                    entry.last_flip_commit = newest.commit.clone();
                    entry.last_outcome = latest.to_string();
                }
            }
        }
        let mut out: Vec<FlakyTest> = found.into_values().collect();
        out.sort_by(|a, b| {
            b.flips
                .cmp(&a.flips)
                .then_with(|| b.last_flip_at.cmp(&a.last_flip_at))
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(out)
    }
}
