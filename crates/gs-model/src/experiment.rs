//! Experiments and their evaluations. An evaluation is the JSON body of a
//! `refs/notes/sandbox-eval` note on the experiment's head commit, schema `git-sandbox/eval/v1`;
//! `eval --json` prints the same object.

use serde::{Deserialize, Serialize};

pub const EVAL_SCHEMA: &str = "git-sandbox/eval/v1";

/// Where an experiment is in its life: on its branch, merged into production, or archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Active,
    Promoted,
    Killed,
    /// Promoted, then taken back out of production by a revert commit (`promote --watch`).
    #[serde(rename = "rolled_back")]
    RolledBack,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Promoted => "promoted",
            State::Killed => "killed",
            State::RolledBack => "rolled_back",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        match s {
            "active" => Some(State::Active),
            "promoted" => Some(State::Promoted),
            "killed" => Some(State::Killed),
            "rolled_back" => Some(State::RolledBack),
            _ => None,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An experiment as the index holds it (rebuilt from refs and `experiment.toml` by `reindex`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    pub name: String,
    /// `experiment/<name>` (the branch, while it exists).
    pub branch: String,
    pub state: State,
    pub hypothesis: Option<String>,
    pub base_commit: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// CPU time its runs may spend, in milliseconds (`experiment start --budget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
}

/// The committed metadata, `experiments/<name>/experiment.toml` on the experiment's branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypothesis: Option<String>,
    pub created_at: String,
    pub author: String,
    /// The commit the branch was started from.
    pub base_commit: String,
    /// The branch or revision it was started from, as given.
    pub base: String,
    /// CPU time the runs of its commits may spend, e.g. "30m" (`experiment start --budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// Keys as in `.sandbox.toml`, laid over it for the runs of this experiment's branch.
    #[serde(default)]
    pub config: toml::Table,
}

/// From best to worst; `promote` compares against `[promote] minimum` in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Recommendation {
    NotReady,
    Consider,
    Recommend,
    StronglyRecommend,
}

impl Recommendation {
    pub fn as_str(self) -> &'static str {
        match self {
            Recommendation::StronglyRecommend => "STRONGLY_RECOMMEND",
            Recommendation::Recommend => "RECOMMEND",
            Recommendation::Consider => "CONSIDER",
            Recommendation::NotReady => "NOT_READY",
        }
    }

    pub fn parse(s: &str) -> Option<Recommendation> {
        match s {
            "STRONGLY_RECOMMEND" => Some(Recommendation::StronglyRecommend),
            "RECOMMEND" => Some(Recommendation::Recommend),
            "CONSIDER" => Some(Recommendation::Consider),
            "NOT_READY" => Some(Recommendation::NotReady),
            _ => None,
        }
    }
}

impl std::fmt::Display for Recommendation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One side of a comparison: the commit and the figures the criteria use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    #[serde(rename = "ref")]
    pub refname: String,
    pub commit: String,
    /// `None` when there is no result for the commit.
    pub status: Option<crate::Status>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub errors: Option<u64>,
    pub complexity_score: Option<f64>,
    pub potential_issues: Option<u64>,
    /// Line coverage in percent, when its run found a coverage report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_percent: Option<f64>,
    /// The result is a cold witness: its run read no build cache. An evaluation kept without
    /// it (made before verdicts were witnessed cold) is made again before a promotion.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cold: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// `tests_pass`, `passing_tests`, `complexity`, `has_data`.
    pub name: String,
    pub description: String,
    pub pass: bool,
    pub value: serde_json::Value,
    pub threshold: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub schema: String,
    pub experiment: String,
    /// The production branch's head.
    pub base: Side,
    /// The experiment's head.
    pub head: Side,
    pub criteria: Vec<Criterion>,
    pub recommendation: Recommendation,
    /// Why, in one sentence.
    pub reason: String,
    pub evaluated_at: String,
}
