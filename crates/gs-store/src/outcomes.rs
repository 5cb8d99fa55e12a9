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
    /// `flaky`: its outcome flipped between runs that read the same caches (both cold, or both
    /// warm). `cache_dependent`: it passed on one side and failed on the other of a warm and a
    /// cold run of one tree — the build cache decided, and the cold outcome (`last_outcome`)
    /// stands; never counted as flaky.
    pub kind: String,
}

impl FlakyTest {
    /// `name` with no runs counted yet.
    pub fn new(name: &str, kind: &str) -> FlakyTest {
        FlakyTest {
            name: name.to_string(),
            flips: 0,
            runs: 0,
            failures: 0,
            last_flip_at: String::new(),
            last_flip_commit: String::new(),
            last_outcome: String::new(),
            kind: kind.to_string(),
        }
    }
}

/// What [`FlakyTest::kind`] says.
pub const FLAKY: &str = "flaky";
pub const CACHE_DEPENDENT: &str = "cache_dependent";

/// CPU time of a record: its tests' and its named checks'.
pub fn cpu_ms(r: &RunRecord) -> u64 {
    let tests = r.tests.iter().chain(r.checks.iter().map(|(_, c)| &c.run));
    tests.map(|t| t.resources.cpu_ms).sum()
}

impl Index {
    /// Keep a run that executed here (one not served from another commit's result); a record
    /// kept already (the same commit and end) is left as it is. Only runs this machine made
    /// are kept: a note fetched or read back (`reindex`) is no evidence of flakiness or spend.
    /// A pass excused by tests retried alone is kept as the suite's failure; a run made again
    /// after such a failure (`retried`) counts its CPU and is no evidence of its tree.
    pub fn add_execution(&self, repository_id: &str, r: &RunRecord) -> Result<()> {
        if r.cached_from.is_some() || !r.status.is_result() && r.status != Status::Error {
            return Ok(());
        }
        let id: Option<i64> = self
            .conn
            .query_row(
                "INSERT INTO executions (repository_id, commit_id, tree_id, config_hash, experiment,
                                         status, finished_at, cpu_ms, complete, warm, retry)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (repository_id, commit_id, finished_at) DO NOTHING
                 RETURNING id",
                params![
                    repository_id,
                    r.commit,
                    r.tree,
                    r.config_hash,
                    r.experiment,
                    r.suite_status().as_str(),
                    r.finished_at,
                    cpu_ms(r) as i64,
                    r.failures_complete(),
                    !r.is_cold(),
                    r.retried.as_ref().is_some_and(|t| !t.alone)
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

    /// Keep CPU an experiment spent outside a run of a commit (a command in its workspace):
    /// counted against its budget, no evidence of anything (`status` is `exec`).
    pub fn add_spend(
        &self,
        repository_id: &str,
        experiment: &str,
        commit: &str,
        cpu_ms: u64,
        at: &str,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO executions (repository_id, commit_id, tree_id, config_hash, experiment,
                                     status, finished_at, cpu_ms, complete, warm, retry)
             VALUES (?1, ?2, '', NULL, ?3, 'exec', ?4, ?5, 0, 1, 0)
             ON CONFLICT (repository_id, commit_id, finished_at) DO NOTHING",
            params![repository_id, commit, experiment, at, cpu_ms as i64],
        )?;
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

    /// Whether a cold run made here of `tree` under `config_hash` passed the test `name`: the
    /// run passed, or failed naming every failure and not this one. A warm run's pass is no
    /// evidence: the cache may have made it; nor is a retry's.
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
               AND COALESCE(e.config_hash, '') = COALESCE(?3, '') AND e.warm = 0 AND e.retry = 0
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

    /// On how many different trees a run made here since `since` (RFC 3339) passed the test
    /// `name`: the run passed, or failed naming every failure and not this one (a retry, made
    /// after the test failed there, does not count). What releases a quarantined test by itself.
    pub fn clean_trees_since(&self, repository_id: &str, name: &str, since: &str) -> Result<u64> {
        use gs_model::test_name::canonical;
        let name = canonical(name);
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.tree_id, f.name FROM executions e
             LEFT JOIN test_failures f ON f.execution_id = e.id
             WHERE e.repository_id = ?1 AND e.finished_at >= ?2 AND e.retry = 0
               AND (e.status = 'passed' OR (e.status = 'failed' AND e.complete = 1))
             ORDER BY e.id",
        )?;
        let rows: Vec<(i64, String, Option<String>)> = stmt
            .query_map(params![repository_id, since], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<super::sql::Result<_>>()?;
        let mut failed_in: HashMap<i64, (String, bool)> = HashMap::new();
        for (id, tree, failure) in rows {
            let failed = failure.is_some_and(|f| canonical(&f) == name);
            failed_in.entry(id).or_insert((tree, false)).1 |= failed;
        }
        let clean: std::collections::HashSet<&str> = failed_in
            .values()
            .filter(|(_, failed)| !failed)
            .map(|(tree, _)| tree.as_str())
            .collect();
        Ok(clean.len() as u64)
    }

    /// Tests of a repository that both passed and failed on one tree under one config in runs
    /// that read the same caches (both cold or both warm), most flips first. Retries (runs made
    /// again because only such tests failed) are left out: they never make a test flaky.
    pub fn flaky_tests(&self, repository_id: &str) -> Result<Vec<FlakyTest>> {
        Ok(self.outcome_flips(repository_id, "")?.0)
    }

    /// Tests whose outcome on one tree under one config was not the same in a warm run as in a
    /// cold one ([`CACHE_DEPENDENT`]): the cold outcome stands.
    pub fn cache_dependent_tests(&self, repository_id: &str) -> Result<Vec<FlakyTest>> {
        Ok(self.outcome_flips(repository_id, "")?.1)
    }

    /// The flaky tests and the cache-dependent ones, over the runs that ended at `since` (RFC
    /// 3339) or later (`""`: every run).
    pub fn outcome_flips(
        &self,
        repository_id: &str,
        since: &str,
    ) -> Result<(Vec<FlakyTest>, Vec<FlakyTest>)> {
        // Runs of the trees that ran more than once, in order, with the tests each failed.
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.tree_id, COALESCE(e.config_hash, ''), e.commit_id, e.finished_at,
                    e.complete, f.name, e.warm
             FROM executions e
             JOIN (SELECT tree_id, config_hash FROM executions
                   WHERE repository_id = ?1 AND status IN ('passed', 'failed')
                     AND finished_at >= ?2 AND retry = 0
                   GROUP BY tree_id, config_hash HAVING COUNT(*) > 1) again
               ON again.tree_id = e.tree_id
              AND COALESCE(again.config_hash, '') = COALESCE(e.config_hash, '')
             LEFT JOIN test_failures f ON f.execution_id = e.id
             WHERE e.repository_id = ?1 AND e.status IN ('passed', 'failed')
               AND e.finished_at >= ?2 AND e.retry = 0
             ORDER BY e.tree_id, 3, e.finished_at, e.id",
        )?;
        type Row = (
            i64,
            String,
            String,
            String,
            String,
            i64,
            Option<String>,
            i64,
        );
        let rows: Vec<Row> = stmt
            .query_map(params![repository_id, since], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            })?
            .collect::<super::sql::Result<_>>()?;
        // Group into runs per (tree, config), in order.
        let mut groups: Vec<Vec<Run>> = Vec::new();
        let mut last: Option<(String, String, i64)> = None;
        for (id, tree, config, commit, at, complete, name, warm) in rows {
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
                    warm: warm != 0,
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
        let mut flaky: BTreeMap<String, FlakyTest> = BTreeMap::new();
        let mut dependent: BTreeMap<String, FlakyTest> = BTreeMap::new();
        for runs in &groups {
            let mut names: Vec<&str> = runs
                .iter()
                .flat_map(|r| r.failed.iter().map(String::as_str))
                .collect();
            names.sort_unstable();
            names.dedup();
            for name in names {
                // Each test's known outcomes, in order: (run, failed).
                let known: Vec<(&Run, bool)> = runs
                    .iter()
                    .map(|r| (r, r.failed.iter().any(|n| n == name)))
                    .filter(|(r, failed)| *failed || r.complete)
                    .collect();
                for warm in [false, true] {
                    let side: Vec<(&Run, bool)> = known
                        .iter()
                        .copied()
                        .filter(|(r, _)| r.warm == warm)
                        .collect();
                    let flips: Vec<&Run> = side
                        .windows(2)
                        .filter(|w| w[0].1 != w[1].1)
                        .map(|w| w[1].0)
                        .collect();
                    if let Some(newest) = flips.last() {
                        let latest = side.last().map(|(_, f)| *f).unwrap_or(false);
                        add(
                            &mut flaky,
                            name,
                            FLAKY,
                            flips.len() as u64,
                            &side,
                            newest,
                            latest,
                        );
                    }
                }
                // Warm and cold disagree where neither side flipped: the cache decided.
                let outcomes = |warm: bool| -> Vec<bool> {
                    let mut o: Vec<bool> = known
                        .iter()
                        .filter(|(r, _)| r.warm == warm)
                        .map(|(_, f)| *f)
                        .collect();
                    o.dedup();
                    o
                };
                let (cold, warm) = (outcomes(false), outcomes(true));
                if let ([c], [w]) = (cold.as_slice(), warm.as_slice()) {
                    if c != w {
                        let newest = known
                            .iter()
                            .map(|(r, _)| *r)
                            .max_by(|a, b| a.at.cmp(&b.at))
                            .expect("runs on both sides");
                        let pairs = known.iter().filter(|(r, _)| r.warm).count() as u64;
                        add(
                            &mut dependent,
                            name,
                            CACHE_DEPENDENT,
                            pairs,
                            &known,
                            newest,
                            *c,
                        );
                    }
                }
            }
        }
        Ok((sorted(flaky), sorted(dependent)))
    }
}

/// One execution of a tree, as the flaky query reads it.
struct Run {
    commit: String,
    at: String,
    complete: bool,
    warm: bool,
    failed: Vec<String>,
}

/// Count a test's `flips` over the runs `seen` into `found`: `newest` is the latest run that
/// changed (or, for a cache-dependent test, disagreed), `latest` the outcome that stands.
fn add(
    found: &mut BTreeMap<String, FlakyTest>,
    name: &str,
    kind: &str,
    flips: u64,
    seen: &[(&Run, bool)],
    newest: &Run,
    latest: bool,
) {
    let entry = found
        .entry(name.to_string())
        .or_insert_with(|| FlakyTest::new(name, kind));
    entry.flips += flips;
    entry.runs += seen.len() as u64;
    entry.failures += seen.iter().filter(|(_, f)| *f).count() as u64;
    if newest.at > entry.last_flip_at {
        entry.last_flip_at = newest.at.clone();
        entry.last_flip_commit = newest.commit.clone();
        entry.last_outcome = if latest { "failed" } else { "passed" }.to_string();
    }
}

/// Most flips first, then the latest, then by name.
fn sorted(found: BTreeMap<String, FlakyTest>) -> Vec<FlakyTest> {
    let mut out: Vec<FlakyTest> = found.into_values().collect();
    out.sort_by(|a, b| {
        b.flips
            .cmp(&a.flips)
            .then_with(|| b.last_flip_at.cmp(&a.last_flip_at))
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}
