//! Evaluating an experiment against production: the results of both heads (run when missing),
//! four criteria and a recommendation, kept as a `refs/notes/sandbox-eval` note on the
//! experiment's head and in the index.

use crate::app::experiment::experiments::{self, branch_ref, ref_tip};
use crate::app::records::results;
use crate::app::run::{run_commits, RunOptions};
use crate::app::{AppError, Context, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_model::{
    Criterion, Evaluation, Recommendation, RunRecord, Side, State, Status, Trigger, EVAL_SCHEMA,
};
use gs_store::RepoRow;
use gs_util::time;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;

/// A mean complexity change smaller than this is noise, not a change.
const EPSILON: f64 = 1e-6;

/// `eval`: compare the experiment's head with the production branch's head.
pub fn evaluate(
    at: Repo<'_>,
    name: &str,
    trigger: Trigger,
    interrupt: &AtomicBool,
) -> Result<Evaluation> {
    let Repo { ctx, repo, row } = at;
    let e = experiments::find(at, name)?;
    if e.state == State::Killed {
        return Err(
            AppError::usage(format!("experiment {name:?} was killed")).hint(format!(
                "start a new one with `git sandbox experiment start NAME --from {}`",
                experiments::archive_ref(name)
            )),
        );
    }
    let config = experiments::production_config(ctx, repo)?;
    let (target, base) = experiments::production_tip(repo, &config)?;
    let Some(head) = ref_tip(repo, &branch_ref(name))? else {
        return Err(AppError::usage(format!(
            "experiment {name:?} has no branch {}",
            branch_ref(name)
        ))
        .hint(format!("see `git sandbox experiment show {name}`")));
    };
    let head_ref = branch_ref(name);
    let base_ref = format!("refs/heads/{target}");
    let mut head_rec = result_or_run(at, head, &head_ref, trigger, interrupt)?;
    let base_rec = result_or_run(at, base, &base_ref, trigger, interrupt)?;
    let known: HashSet<String> = ctx
        .index
        .flaky_tests(&row.repository_id)?
        .into_iter()
        .map(|t| t.name)
        .collect();
    // A known-flaky test's failure is excused only on a tree that has itself passed the test:
    // another tree's flips say nothing of this one, so it is run again here first.
    if let Some(h) = head_rec
        .as_ref()
        .filter(|h| h.failed_only_in(&known).is_some())
    {
        if excused(ctx, row, h, &known)?.is_empty() {
            let opts = RunOptions {
                retry_flaky: Some(FLAKY_RETRIES),
                ..cold(trigger, &head_ref, interrupt)
            };
            let outcome = run_commits(at, &[head], &opts, &mut |_| {})?;
            head_rec = outcome.records.into_iter().next().or(head_rec);
        }
    }
    let flaky = match &head_rec {
        Some(h) => excused(ctx, row, h, &known)?,
        None => HashSet::new(),
    };
    let ev = judge(
        name,
        side(&base_ref, base, base_rec.as_ref()),
        side(&head_ref, head, head_rec.as_ref()),
        base_rec.as_ref(),
        head_rec.as_ref(),
        config.promote.max_coverage_drop,
        &flaky,
    );
    record(at, &ev)?;
    Ok(ev)
}

/// How many times `eval` runs a head again that failed only in known-flaky tests its tree has
/// never passed.
const FLAKY_RETRIES: u32 = 2;

/// The known-flaky tests whose failure on `head` is excused: all those it failed, when every one
/// of them has passed on its tree (under its config) in a run made here, or passed a retry
/// alone in `head`'s own run; else none.
fn excused(
    ctx: &Context,
    row: &RepoRow,
    head: &RunRecord,
    known: &HashSet<String>,
) -> Result<HashSet<String>> {
    let Some(failed) = head.failed_only_in(known) else {
        return Ok(HashSet::new());
    };
    for name in &failed {
        // A pass alone on this tree, in this run, of a test flaky in full-suite runs.
        if head.passed_alone(name) {
            continue;
        }
        let passed = ctx.index.passed_on_tree(
            &row.repository_id,
            &head.tree,
            head.config_hash.as_deref(),
            name,
        )?;
        if !passed {
            return Ok(HashSet::new());
        }
    }
    Ok(failed.into_iter().collect())
}

/// Keep an evaluation: the note on the experiment's head, then the index and an event.
pub fn record(at: Repo<'_>, ev: &Evaluation) -> Result<()> {
    let Repo { ctx, repo, row } = at;
    let head = ObjectId::from_hex(ev.head.commit.as_bytes()).expect("sides hold full commit ids");
    let mut body = serde_json::to_vec_pretty(ev).expect("evaluations always serialize");
    body.push(b'\n');
    git::notes::write_notes(
        repo,
        git::EVAL_NOTES_REF,
        &[(head, body)],
        &format!(
            "git-sandbox: evaluate {} {}",
            ev.experiment, ev.recommendation
        ),
    )?;
    let before = ctx
        .index
        .latest_evaluation(&row.repository_id, &ev.experiment)
        .ok()
        .flatten();
    ctx.index.put_evaluation(&row.repository_id, ev)?;
    if let Some(b) = before.filter(|b| b.recommendation != ev.recommendation) {
        crate::app::publish::emit(
            ctx,
            crate::app::publish::Event::News {
                kind: EventKind::EvalChanged,
                row: Some(row),
                data: json!({"experiment": ev.experiment, "from": b.recommendation, "to": ev.recommendation,
                   "reason": ev.reason, "head": ev.head.commit, "base": ev.base.commit}),
            },
        );
    }
    ctx.index.add_event(
        EventKind::ExperimentEvaluated,
        Some(&row.repository_id),
        None,
        Some(&ev.head.commit),
        &json!({"experiment": ev.experiment, "recommendation": ev.recommendation, "base": ev.base.commit}),
    )?;
    Ok(())
}

/// The cold witness of a commit made with the config it has now: a result whose run read no
/// build cache ([`RunRecord::is_cold`]), running one when there is none. A trial run with other
/// flags, a result under an older config, and a warm result do not count: what an earlier run
/// left in a cache can decide a warm run's tests. The cold run is kept like any result (its
/// writes become its branch's new cache base, as `run --clean`'s do).
pub(crate) fn result_or_run(
    at: Repo<'_>,
    commit: ObjectId,
    refname: &str,
    trigger: Trigger,
    interrupt: &AtomicBool,
) -> Result<Option<RunRecord>> {
    if let Some(r) = results::cold_record(at, commit, Some(refname))? {
        return Ok(Some(r));
    }
    let opts = cold(trigger, refname, interrupt);
    let outcome = run_commits(at, &[commit], &opts, &mut |_| {})?;
    Ok(outcome.records.into_iter().next())
}

/// A run that reads no build cache (`run --clean`), for a commit named through `refname`.
fn cold<'a>(trigger: Trigger, refname: &str, interrupt: &'a AtomicBool) -> RunOptions<'a> {
    RunOptions {
        force: true,
        clean: true,
        ..RunOptions::new(trigger, Some(refname.to_string()), interrupt)
    }
}

fn side(refname: &str, commit: ObjectId, r: Option<&RunRecord>) -> Side {
    let tests = r.and_then(|r| r.tests.as_ref());
    let analysis = r.and_then(|r| r.analysis.as_ref());
    Side {
        refname: refname.to_string(),
        commit: commit.to_string(),
        status: r.map(|r| r.status),
        passed: tests.and_then(|t| t.passed),
        failed: tests.and_then(|t| t.failed),
        errors: tests.and_then(|t| t.errors),
        complexity_score: analysis.map(|a| a.complexity_score),
        potential_issues: analysis.map(|a| a.potential_issues.len() as u64),
        coverage_percent: r.and_then(|r| r.coverage.as_ref()).map(|c| c.percent),
        cold: r.is_some_and(RunRecord::is_cold),
    }
}

/// Issues of `head` that `base` does not have, matched by file and kind (line numbers move).
fn new_issues(base: &RunRecord, head: &RunRecord) -> Option<u64> {
    let (b, h) = (base.analysis.as_ref()?, head.analysis.as_ref()?);
    let mut seen: HashMap<(&str, &str), i64> = HashMap::new();
    for i in &b.potential_issues {
        *seen.entry((&i.path, &i.kind)).or_default() += 1;
    }
    let mut new = 0;
    for i in &h.potential_issues {
        let n = seen.entry((&i.path, &i.kind)).or_default();
        if *n > 0 {
            *n -= 1;
        } else {
            new += 1;
        }
    }
    Some(new)
}

/// The criteria and the recommendation. Pure: the same two results (and the same excused
/// tests) always give the same verdict. A head that failed only in tests known to be `flaky`
/// (and passed on its own tree: see [`excused`]) is judged as if they had passed, and the reason
/// says so.
pub fn judge(
    name: &str,
    base_side: Side,
    head_side: Side,
    base: Option<&RunRecord>,
    head: Option<&RunRecord>,
    max_coverage_drop: f64,
    flaky: &HashSet<String>,
) -> Evaluation {
    let m = Measures::of(base, head, flaky);
    let criteria = m.criteria(base, head, max_coverage_drop);
    let (recommendation, reason) = m.verdict(&criteria);
    let reason = if m.not_counted.is_empty() {
        reason
    } else {
        format!(
            "{reason} (not counted: the failure of known-flaky {} {})",
            if m.not_counted.len() == 1 {
                "test"
            } else {
                "tests"
            },
            m.not_counted.join(", ")
        )
    };
    Evaluation {
        schema: EVAL_SCHEMA.into(),
        experiment: name.to_string(),
        base: base_side,
        head: head_side,
        criteria,
        recommendation,
        reason,
        evaluated_at: time::now_rfc3339(),
    }
}

/// What the two heads' results say, read once for the criteria and the verdict.
struct Measures {
    /// Both heads have a result, the head's with tests or analysis.
    has_data: bool,
    /// The head's failures only in known-flaky tests: not counted against it.
    not_counted: Vec<String>,
    /// The head's failures and errors, less those not counted.
    bad: Option<u64>,
    /// How the head's tests ended (with named checks, the tests' own status).
    tests_status: Option<Status>,
    tests_pass: bool,
    /// The head's required named checks that did not pass, with how they ended.
    failing_checks: Vec<String>,
    head_passed: u64,
    base_passed: u64,
    /// The change of mean complexity per function, when both sides were analysed.
    delta: Option<f64>,
    /// New potential issues, when both sides were analysed.
    issues: Option<u64>,
    /// The tests production runs and the head does not, when both records name their tests.
    removed: Option<Vec<String>>,
}

/// The ids of the tests a record ran, when it names them.
fn test_ids(r: Option<&RunRecord>) -> Option<&Vec<String>> {
    r.and_then(|r| r.tests.as_ref())
        .filter(|t| !t.ids.is_empty())
        .map(|t| &t.ids)
}

/// How many removed tests an evaluation names (it counts them all).
const REMOVED_SHOWN: usize = 20;

impl Measures {
    fn of(base: Option<&RunRecord>, head: Option<&RunRecord>, flaky: &HashSet<String>) -> Measures {
        let has_data = match (base, head) {
            (Some(_), Some(h)) => {
                h.status != Status::Error && (h.tests.is_some() || h.analysis.is_some())
            }
            _ => false,
        };
        let head_tests = head.and_then(|h| h.tests.as_ref());
        let not_counted = head
            .and_then(|h| h.failed_only_in(flaky))
            .unwrap_or_default();
        let bad = head_tests.map(|t| {
            (t.failed.unwrap_or(0) + t.errors.unwrap_or(0)).saturating_sub(not_counted.len() as u64)
        });
        // With named checks the run's status is theirs too: the tests are judged by their own.
        let tests_status = head
            .map(|h| match (&h.tests, h.checks.is_empty()) {
                (_, true) => h.status,
                (Some(t), false) => t.status.unwrap_or(h.status),
                (None, false) => Status::Passed,
            })
            .map(|s| match s {
                Status::Failed if !not_counted.is_empty() => Status::Passed,
                s => s,
            });
        // A pass that tested nothing shows nothing.
        let tested = head.is_some_and(|h| !h.no_tests());
        let tests_pass = tests_status == Some(Status::Passed) && bad.unwrap_or(0) == 0 && tested;
        let failing_checks: Vec<String> = head
            .map(|h| {
                h.checks
                    .iter()
                    .filter(|(_, c)| c.required && c.status() != Status::Passed)
                    .map(|(name, c)| format!("{name} ({})", c.status()))
                    .collect()
            })
            .unwrap_or_default();
        let head_passed = head_tests.and_then(|t| t.passed).unwrap_or(0);
        let base_passed = base
            .and_then(|b| b.tests.as_ref())
            .and_then(|t| t.passed)
            .unwrap_or(0);
        let delta = match (
            base.and_then(|b| b.analysis.as_ref()),
            head.and_then(|h| h.analysis.as_ref()),
        ) {
            (Some(b), Some(h)) => Some(h.complexity_score - b.complexity_score),
            _ => None,
        };
        let issues = match (base, head) {
            (Some(b), Some(h)) => new_issues(b, h),
            _ => None,
        };
        let removed = match (test_ids(base), test_ids(head)) {
            (Some(b), Some(h)) => {
                let kept: HashSet<&String> = h.iter().collect();
                Some(b.iter().filter(|id| !kept.contains(id)).cloned().collect())
            }
            _ => None,
        };
        Measures {
            removed,
            has_data,
            not_counted,
            bad,
            tests_status,
            tests_pass,
            failing_checks,
            head_passed,
            base_passed,
            delta,
            issues,
        }
    }

    /// Complexity not worse. Without analysis on both sides there is nothing to be worse than.
    fn complexity_ok(&self) -> bool {
        self.delta.is_none_or(|d| d <= EPSILON) && self.issues.unwrap_or(0) == 0
    }

    /// Simpler than production: lower mean complexity and no new issues.
    fn simpler(&self) -> bool {
        self.delta.is_some_and(|d| d < -EPSILON) && self.issues == Some(0)
    }

    /// The criteria, in the order `eval` shows them: the tests, the named checks (when the
    /// head has any), passing tests, complexity, data, and coverage (when both sides have it).
    fn criteria(
        &self,
        base: Option<&RunRecord>,
        head: Option<&RunRecord>,
        max_coverage_drop: f64,
    ) -> Vec<Criterion> {
        let mut criteria = vec![
            Criterion {
                name: "tests_pass".into(),
                description: "the experiment's tests pass (no failures or errors)".into(),
                pass: self.tests_pass,
                value: if self.not_counted.is_empty() {
                    json!({"status": self.tests_status, "failed_or_errors": self.bad})
                } else {
                    json!({"status": self.tests_status, "failed_or_errors": self.bad, "flaky_not_counted": self.not_counted})
                },
                threshold: json!({"status": "passed", "failed_or_errors": 0}),
            },
            Criterion {
                name: "passing_tests".into(),
                description: "no fewer passing tests than production".into(),
                pass: self.head_passed + self.not_counted.len() as u64 >= self.base_passed,
                value: json!(self.head_passed),
                threshold: json!(self.base_passed),
            },
            Criterion {
                name: "complexity".into(),
                description: "complexity not worse: mean complexity per function not higher, no new potential issues".into(),
                pass: self.complexity_ok(),
                value: json!({"mean_delta": self.delta.map(|d| gs_util::round(d, 3)), "new_issues": self.issues}),
                threshold: json!({"mean_delta": 0.0, "new_issues": 0}),
            },
            Criterion {
                name: "has_data".into(),
                description: "both heads have a result, with tests or analysis".into(),
                pass: self.has_data,
                value: json!(self.has_data),
                threshold: json!(true),
            },
        ];
        if head.is_some_and(|h| !h.checks.is_empty()) {
            criteria.insert(
                1,
                Criterion {
                    name: "checks_pass".into(),
                    description:
                        "the experiment's required checks pass ([checks.NAME] in its config)"
                            .into(),
                    pass: self.failing_checks.is_empty(),
                    value: json!({"failing": self.failing_checks}),
                    threshold: json!({"failing": []}),
                },
            );
        }
        // Only when both records name their tests: a test production runs that the experiment
        // does not is removed, and fewer failures or more passes then improve nothing.
        if let Some(removed) = &self.removed {
            let shown: Vec<&String> = removed.iter().take(REMOVED_SHOWN).collect();
            criteria.insert(
                criteria.len() - 2,
                Criterion {
                    name: "tests_kept".into(),
                    description: "every test production runs, the experiment runs too (by test id)"
                        .into(),
                    pass: removed.is_empty(),
                    value: json!({"removed": removed.len(), "tests": shown}),
                    threshold: json!({"removed": 0}),
                },
            );
        }
        // Only when both sides measured it: a project without coverage is judged as before.
        if let (Some(b), Some(h)) = (
            base.and_then(|b| b.coverage.as_ref()),
            head.and_then(|h| h.coverage.as_ref()),
        ) {
            let delta = gs_util::round(h.percent - b.percent, 2);
            criteria.push(Criterion {
                name: "coverage".into(),
                description: format!(
                    "line coverage does not drop by more than {max_coverage_drop} points against production ([promote] max_coverage_drop)"
                ),
                pass: delta + max_coverage_drop >= -EPSILON,
                value: json!({"head": h.percent, "base": b.percent, "delta": delta}),
                threshold: json!({"max_drop": max_coverage_drop}),
            });
        }
        criteria
    }

    /// The recommendation and its reason: not ready without data, passing tests or passing
    /// checks; strongly recommended when every criterion passes and it improves (more passing
    /// tests, or simpler); recommended when every criterion passes; else to consider.
    fn verdict(&self, criteria: &[Criterion]) -> (Recommendation, String) {
        let all = criteria.iter().all(|c| c.pass);
        let more_tests = self.head_passed > self.base_passed;
        if !self.has_data {
            (
                Recommendation::NotReady,
                "there is no usable result to compare".to_string(),
            )
        } else if !self.tests_pass {
            (
                Recommendation::NotReady,
                format!(
                    "the experiment's tests do not pass ({})",
                    self.tests_status.map_or("no result", Status::as_str)
                ),
            )
        } else if !self.failing_checks.is_empty() {
            (
                Recommendation::NotReady,
                format!(
                    "the experiment's required checks do not pass: {}",
                    self.failing_checks.join(", ")
                ),
            )
        } else if all && (more_tests || self.simpler()) {
            let why = if more_tests {
                format!(
                    "{} passing tests against {}",
                    self.head_passed, self.base_passed
                )
            } else {
                "lower complexity with no new issues".to_string()
            };
            (
                Recommendation::StronglyRecommend,
                format!("every criterion passes and it improves: {why}"),
            )
        } else if all {
            (
                Recommendation::Recommend,
                "every criterion passes".to_string(),
            )
        } else {
            let failing: Vec<&str> = criteria
                .iter()
                .filter(|c| !c.pass)
                .map(|c| c.name.as_str())
                .collect();
            (
                Recommendation::Consider,
                format!("tests pass but {} fails", failing.join(", ")),
            )
        }
    }
}

#[cfg(test)]
mod tests;
