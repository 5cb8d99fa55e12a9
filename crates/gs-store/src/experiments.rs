//! Indexed experiments (one row per repository and name) and their evaluations, the full
//! evaluation kept as JSON. Both are caches of refs and notes; `reindex` rebuilds them.

use super::sql::{params, OptionalExtension, Row};
use super::{Index, Result};
use gs_model::{Evaluation, Experiment, State};

const COLS: &str =
    "name, branch, state, hypothesis, base_commit, created_at, updated_at, budget_ms";

fn row(r: &Row) -> super::sql::Result<Experiment> {
    let state: String = r.get(2)?;
    Ok(Experiment {
        name: r.get(0)?,
        branch: r.get(1)?,
        state: State::parse(&state).unwrap_or(State::Active),
        hypothesis: r.get(3)?,
        base_commit: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
        budget_ms: r.get::<_, Option<i64>>(7)?.map(|v| v.max(0) as u64),
    })
}

/// Experiments by state, for `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExperimentCounts {
    pub active: u64,
    pub promoted: u64,
    pub killed: u64,
    pub rolled_back: u64,
    /// Active ones whose runs have spent their CPU budget (counted in `active` too).
    pub budget_exhausted: u64,
}

const PUT_EXPERIMENT: &str = "INSERT INTO experiments (repository_id, name, branch, state, hypothesis, base_commit, created_at, updated_at, budget_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
     ON CONFLICT (repository_id, name) DO UPDATE SET
        branch = excluded.branch, state = excluded.state, hypothesis = excluded.hypothesis,
        base_commit = excluded.base_commit, created_at = excluded.created_at,
        updated_at = excluded.updated_at";

macro_rules! put_params {
    ($repository_id:expr, $e:expr) => {
        params![
            $repository_id,
            $e.name,
            $e.branch,
            $e.state.as_str(),
            $e.hypothesis,
            $e.base_commit,
            $e.created_at,
            $e.updated_at,
            $e.budget_ms
        ]
    };
}

impl Index {
    /// Insert or replace the row of an experiment. The budget is taken for a new row only; an
    /// existing row's is changed by [`Index::set_experiment_budget`] and
    /// [`Index::put_experiments`] (from the experiment's own metadata).
    pub fn put_experiment(&self, repository_id: &str, e: &Experiment) -> Result<()> {
        self.conn
            .execute(PUT_EXPERIMENT, put_params!(repository_id, e))?;
        Ok(())
    }

    /// Insert or replace the rows of many experiments in one transaction (one commit, not one
    /// per row); the budget of those flagged is set too (it follows their metadata).
    pub fn put_experiments(&self, repository_id: &str, es: &[(Experiment, bool)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for (e, budget) in es {
            tx.execute(PUT_EXPERIMENT, put_params!(repository_id, e))?;
            if *budget {
                tx.execute(
                    "UPDATE experiments SET budget_ms = ?3 WHERE repository_id = ?1 AND name = ?2",
                    params![repository_id, e.name, e.budget_ms],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Set (or with `None` lift) an experiment's CPU budget.
    pub fn set_experiment_budget(
        &self,
        repository_id: &str,
        name: &str,
        budget_ms: Option<u64>,
    ) -> Result<bool> {
        let n = self.conn.execute(
            "UPDATE experiments SET budget_ms = ?3, updated_at = ?4 WHERE repository_id = ?1 AND name = ?2",
            params![
                repository_id,
                name,
                budget_ms,
                gs_util::time::now_rfc3339()
            ],
        )?;
        Ok(n > 0)
    }

    pub fn experiment(&self, repository_id: &str, name: &str) -> Result<Option<Experiment>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLS} FROM experiments WHERE repository_id = ?1 AND name = ?2"),
                [repository_id, name],
                row,
            )
            .optional()?)
    }

    /// A repository's experiments, newest first.
    pub fn experiments(&self, repository_id: &str) -> Result<Vec<Experiment>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM experiments WHERE repository_id = ?1 ORDER BY created_at DESC, name"
        ))?;
        let rows = stmt
            .query_map([repository_id], row)?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    pub fn set_experiment_state(
        &self,
        repository_id: &str,
        name: &str,
        state: State,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE experiments SET state = ?3, updated_at = ?4 WHERE repository_id = ?1 AND name = ?2",
            params![
                repository_id,
                name,
                state.as_str(),
                gs_util::time::now_rfc3339()
            ],
        )?;
        Ok(())
    }

    pub fn delete_experiments(&self, repository_id: &str) -> Result<()> {
        self.conn.execute(
            "DELETE FROM experiments WHERE repository_id = ?1",
            [repository_id],
        )?;
        self.conn.execute(
            "DELETE FROM evaluations WHERE repository_id = ?1",
            [repository_id],
        )?;
        Ok(())
    }

    /// Experiments by state across every repository.
    pub fn experiment_counts(&self) -> Result<ExperimentCounts> {
        let n: [i64; 5] = self.conn.query_row(
            "SELECT COALESCE(SUM(CASE WHEN state = 'active' THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN state = 'promoted' THEN 1 ELSE 0 END), 0),
                    COALESCE(SUM(CASE WHEN state = 'killed' THEN 1 ELSE 0 END), 0),
                    COALESCE(SUM(CASE WHEN state = 'rolled_back' THEN 1 ELSE 0 END), 0),
                    COALESCE(SUM(CASE WHEN state = 'active' AND budget_ms IS NOT NULL AND budget_ms <=
                        (SELECT COALESCE(SUM(x.cpu_ms), 0) FROM executions x
                         WHERE x.repository_id = experiments.repository_id AND x.experiment = experiments.name)
                        THEN 1 ELSE 0 END), 0)
             FROM experiments",
            params![],
            |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]),
        )?;
        let [active, promoted, killed, rolled_back, budget_exhausted] = n.map(|v| v.max(0) as u64);
        Ok(ExperimentCounts {
            active,
            promoted,
            killed,
            rolled_back,
            budget_exhausted,
        })
    }

    pub fn put_evaluation(&self, repository_id: &str, e: &Evaluation) -> Result<()> {
        let json = serde_json::to_string(e).expect("evaluations always serialize");
        self.conn.execute(
            "INSERT INTO evaluations (repository_id, experiment, head_commit, base_commit, recommendation, evaluated_at, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (repository_id, experiment, head_commit, base_commit) DO UPDATE SET
                recommendation = excluded.recommendation, evaluated_at = excluded.evaluated_at,
                record = excluded.record",
            params![
                repository_id,
                e.experiment,
                e.head.commit,
                e.base.commit,
                e.recommendation.as_str(),
                e.evaluated_at,
                json
            ],
        )?;
        Ok(())
    }

    /// The newest evaluation of an experiment.
    /// The newest evaluation of each experiment of a repository, in one query.
    pub fn latest_evaluations(
        &self,
        repository_id: &str,
    ) -> Result<std::collections::HashMap<String, Evaluation>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT experiment, record FROM evaluations WHERE repository_id = ?1
             ORDER BY evaluated_at, id",
        )?;
        let rows = stmt
            .query_map([repository_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<super::sql::Result<Vec<_>>>()?;
        // Oldest first: the newest of each name is the one left.
        Ok(rows
            .into_iter()
            .filter_map(|(name, json)| serde_json::from_str(&json).ok().map(|ev| (name, ev)))
            .collect())
    }

    pub fn latest_evaluation(&self, repository_id: &str, name: &str) -> Result<Option<Evaluation>> {
        let json: Option<String> = self
            .conn
            .query_row(
                "SELECT record FROM evaluations WHERE repository_id = ?1 AND experiment = ?2
                 ORDER BY evaluated_at DESC, id DESC LIMIT 1",
                [repository_id, name],
                |r| r.get(0),
            )
            .optional()?;
        Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiments_round_trip_and_count_by_state() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        index
            .upsert_repository(&crate::RepoRow {
                repository_id: "r".into(),
                name: "r".into(),
                path: "/r".into(),
                url: "file:///r".into(),
                repository_type: "local".into(),
                created_at: "2026-01-01T00:00:00.000Z".into(),
                last_activity: None,
                remote_url: None,
            })
            .unwrap();
        let e = Experiment {
            name: "fast".into(),
            branch: "experiment/fast".into(),
            state: State::Active,
            hypothesis: Some("it is faster".into()),
            base_commit: Some("a".repeat(40)),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            budget_ms: Some(60_000),
        };
        index.put_experiment("r", &e).unwrap();
        assert_eq!(index.experiment("r", "fast").unwrap(), Some(e.clone()));
        // Put again (from git, whose file may say otherwise): the budget stays; only
        // set_experiment_budget changes it.
        let raised = Experiment {
            budget_ms: Some(10_000_000),
            ..e.clone()
        };
        index.put_experiment("r", &raised).unwrap();
        assert_eq!(index.experiment("r", "fast").unwrap(), Some(e.clone()));
        assert!(index.set_experiment_budget("r", "fast", None).unwrap());
        assert_eq!(
            index.experiment("r", "fast").unwrap().unwrap().budget_ms,
            None
        );
        index.put_experiment("r", &raised).unwrap();
        assert_eq!(
            index.experiment("r", "fast").unwrap().unwrap().budget_ms,
            None,
            "lifted stays lifted"
        );
        assert!(!index.set_experiment_budget("r", "nope", Some(1)).unwrap());
        index
            .set_experiment_state("r", "fast", State::Killed)
            .unwrap();
        assert_eq!(
            index.experiment("r", "fast").unwrap().unwrap().state,
            State::Killed
        );
        let counts = index.experiment_counts().unwrap();
        assert_eq!((counts.active, counts.killed), (0, 1));
        assert_eq!(index.experiments("r").unwrap().len(), 1);
    }
}
