//! Several experiments or revisions side by side against a base (production's head unless
//! named): one row each with its result in numbers and its difference from the base's. Reads
//! results only; a commit without one is shown as not run.

use crate::app::{experiment::experiments, records::results, AppError, Context, Repo, Result};
use gs_git::ObjectId;
use gs_model::RunRecord;
use gs_store::RepoRow;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What was asked for: an experiment's name or a revision.
    pub target: String,
    pub commit: String,
    /// The result's status, or `not_run`.
    pub status: String,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub total: Option<u64>,
    /// How long the tests took (`tests.duration_ms`): test time against test time, without the
    /// checkout and the setup step, and the original run's time for a result served from it.
    pub duration_ms: Option<u64>,
    /// The commit whose run this result was served from (same tree and config), when it was
    /// not run for this commit itself.
    pub served_from: Option<String>,
    pub complexity_mean: Option<f64>,
    pub potential_issues: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Difference {
    pub passed: Option<i64>,
    pub failed: Option<i64>,
    pub duration_ms: Option<i64>,
    pub complexity_mean: Option<f64>,
    pub potential_issues: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    #[serde(flatten)]
    pub row: Row,
    /// This row minus the base's, where both have the number.
    pub vs_base: Difference,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: Row,
    pub rows: Vec<Compared>,
}

/// The commit `target` names, with the branch it names when it names one: a revision git knows
/// (`main`, `HEAD~2`, a commit id), else an experiment's name (its branch's head).
pub fn resolve(repo: &gs_git::Repository, target: &str) -> Result<(ObjectId, Option<String>)> {
    match gs_git::resolve_commit(repo, target) {
        Ok(c) => Ok((
            c,
            crate::app::select::branch_named(repo, &[target.to_string()], false),
        )),
        Err(e) => {
            if crate::app::locate::check_name(target).is_ok() {
                if let Some(head) = experiments::head_of(repo, target)? {
                    return Ok((head, Some(experiments::branch_ref(target))));
                }
            }
            let problem = format!(
                "{target:?} is neither a revision nor an experiment ({})",
                gs_util::hint::Hinted::problem(&e)
            );
            // A name that names nothing is not found; one that cannot name a commit is bad input.
            let err = match crate::app::ErrorKind::of_git(&e) {
                crate::app::ErrorKind::NotFound => AppError::not_found(problem),
                _ => AppError::usage(problem),
            };
            Err(err.hint(
                "name a revision git knows (a branch, a tag, HEAD~1, a commit id) or an experiment",
            ))
        }
    }
}

fn row(target: &str, commit: ObjectId, r: Option<&RunRecord>) -> Row {
    let t = r.and_then(|r| r.tests.as_ref());
    let a = r.and_then(|r| r.analysis.as_ref());
    Row {
        target: target.to_string(),
        commit: commit.to_string(),
        status: r.map_or("not_run".into(), |r| r.status.to_string()),
        passed: t.and_then(|t| t.passed),
        failed: t.and_then(|t| t.failed),
        total: t.and_then(|t| t.total),
        duration_ms: t.map(|t| t.duration_ms),
        served_from: r.and_then(|r| r.cached_from.clone()),
        complexity_mean: a.map(|a| gs_util::round(a.complexity_score, 2)),
        potential_issues: a.map(|a| a.potential_issues.len() as u64),
    }
}

fn minus(a: Option<u64>, b: Option<u64>) -> Option<i64> {
    Some(a? as i64 - b? as i64)
}

/// Compare `targets` with `base` (default: the production branch's head).
pub fn compare(
    ctx: &Context,
    repo: &gs_git::Repository,
    row_of: &RepoRow,
    targets: &[String],
    base: Option<&str>,
) -> Result<Comparison> {
    let (base_name, base_commit) = match base {
        Some(b) => (b.to_string(), resolve(repo, b)?.0),
        None => {
            let config = experiments::production_config(ctx, repo)?;
            experiments::production_tip(repo, &config)?
        }
    };
    let mut reader = results::NoteReader::new(repo)?;
    let base_rec = results::find_evidence(Repo::new(ctx, repo, row_of), &mut reader, base_commit)?;
    let base = row(&base_name, base_commit, base_rec.as_ref());
    let mut rows = Vec::with_capacity(targets.len());
    for t in targets {
        let (commit, _) = resolve(repo, t)?;
        let rec = results::find_evidence(Repo::new(ctx, repo, row_of), &mut reader, commit)?;
        let r = row(t, commit, rec.as_ref());
        let vs_base = Difference {
            passed: minus(r.passed, base.passed),
            failed: minus(r.failed, base.failed),
            duration_ms: minus(r.duration_ms, base.duration_ms),
            complexity_mean: r
                .complexity_mean
                .zip(base.complexity_mean)
                .map(|(a, b)| gs_util::round(a - b, 2)),
            potential_issues: minus(r.potential_issues, base.potential_issues),
        };
        rows.push(Compared { row: r, vs_base });
    }
    Ok(Comparison { base, rows })
}

/// An experiment against production, as the dashboard ranks them.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    pub name: String,
    pub state: String,
    pub head: Option<String>,
    pub row: Option<Row>,
    /// Failing tests of the head that production's head does not fail.
    pub new_failures: Vec<String>,
    /// Mean complexity, head minus production.
    pub complexity_delta: Option<f64>,
    pub duration_delta_ms: Option<i64>,
    pub verdict: Option<gs_model::Recommendation>,
    pub verdict_reason: Option<String>,
}

/// Every experiment of the repository against production's head, best first: active ones
/// before those promoted or killed, then by verdict, then by passing tests, then by name.
pub fn ranked(
    ctx: &Context,
    repo: &gs_git::Repository,
    row_of: &RepoRow,
) -> Result<(Row, Vec<Ranked>)> {
    let config = experiments::production_config(ctx, repo)?;
    let (target, tip) = experiments::production_tip(repo, &config)?;
    let mut reader = results::NoteReader::new(repo)?;
    let base_rec = results::find_evidence(Repo::new(ctx, repo, row_of), &mut reader, tip)?;
    let base = row(&target, tip, base_rec.as_ref());
    let base_failing: Vec<String> = base_rec
        .as_ref()
        .and_then(|r| r.tests.as_ref())
        .map(|t| t.failures.iter().map(|f| f.name.clone()).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut active = std::collections::HashSet::new();
    for o in experiments::list(Repo::new(ctx, repo, row_of))? {
        if o.experiment.state == gs_model::State::Active {
            active.insert(o.experiment.name.clone());
        }
        let r = o.latest_result.as_deref();
        let head = o
            .head
            .as_deref()
            .and_then(|h| ObjectId::from_hex(h.as_bytes()).ok());
        let this = head.map(|h| row(&o.experiment.name, h, r));
        out.push(Ranked {
            name: o.experiment.name.clone(),
            state: o.status.clone(),
            head: o.head.clone(),
            new_failures: r
                .and_then(|r| r.tests.as_ref())
                .map(|t| {
                    t.failures
                        .iter()
                        .filter(|f| !base_failing.contains(&f.name))
                        .map(|f| f.name.clone())
                        .collect()
                })
                .unwrap_or_default(),
            complexity_delta: this
                .as_ref()
                .and_then(|t| t.complexity_mean.zip(base.complexity_mean))
                .map(|(a, b)| gs_util::round(a - b, 2)),
            duration_delta_ms: this
                .as_ref()
                .and_then(|t| minus(t.duration_ms, base.duration_ms)),
            row: this,
            verdict: o.latest_evaluation.as_ref().map(|e| e.recommendation),
            verdict_reason: o.latest_evaluation.as_ref().map(|e| e.reason.clone()),
        });
    }
    out.sort_by(|a, b| {
        let rank = |x: &Ranked| {
            (
                !active.contains(&x.name),
                x.verdict.is_none(),
                std::cmp::Reverse(x.verdict),
            )
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| {
                let p = |x: &Ranked| x.row.as_ref().and_then(|r| r.passed).unwrap_or(0);
                p(b).cmp(&p(a))
            })
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok((base, out))
}
