//! Retries of the failing tests alone: a suite that failed only in tests flaky in full-suite
//! runs before (on record in the index, where a retry or a lone run never enters) runs those
//! tests again by name — pytest node ids, jest's test names, cargo test names, go test
//! functions — each retry in a fresh sandbox over
//! the same tree and cache layers, keeping nothing, up to the run's retries. A test that passes
//! a retry is excused; one that fails every retry is a failure. The suite's own results stay
//! the run's `tests` (and what the index keeps); only the run's status follows the excuse.
//!
//! A test that fails only in suite order passes alone: it is never flaky in full-suite runs,
//! so it is never retried so (a quarantine of it retries the whole command).

use super::phases::Split;
use super::{CheckResult, Env, Shared, Spec};
use crate::app::run::setup;
use gs_model::{Retried, Status, TestOutcomes, Tests};
use gs_runner::{detect, rundir};

/// The most failing tests retried alone: more failing at once is no flake.
const MAX_ALONE: usize = 50;

/// Retry the failing tests of `test` (the suite's run of `spec`) alone when every one is flaky
/// on record; `checks_pass`: no required named check failed (else nothing is excused). Marks
/// `test` passed when each failing test passed a retry, and says what ran.
pub(super) fn retry(
    env: &Env<'_>,
    shared: &Shared<'_>,
    work: &rundir::RunDir,
    setup: Option<&setup::Setup>,
    spec: &Spec<'_>,
    test: &mut CheckResult,
    checks_pass: bool,
) -> Option<Retried> {
    let times = env.retries;
    let t = test.tests.as_ref()?;
    if times == 0 || test.status != Status::Failed || !checks_pass || !every_failure_named(t) {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for f in &t.failures {
        let n = gs_model::test_name::canonical(&f.name);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if names.len() > MAX_ALONE {
        return None;
    }
    let command = match spec.command {
        Some(c) => c.to_string(),
        None => detect::detect(&work.host_tree())?.0,
    };
    let runner = Split::of(&command, work)?;
    runner.alone(&names)?;
    let flaky = (env.flaky_on_record)();
    if !names.iter().all(|n| flaky.contains(n)) {
        return None;
    }
    let mut outcomes: Vec<Vec<String>> = names.iter().map(|_| vec!["failed".into()]).collect();
    let mut attempts = 0;
    for i in 1..=times {
        if shared.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let left: Vec<String> = names
            .iter()
            .zip(&outcomes)
            .filter(|(_, seen)| !passed(seen))
            .map(|(n, _)| n.clone())
            .collect();
        if left.is_empty() {
            break;
        }
        let Some(again) = runner.alone(&left) else {
            break;
        };
        let r = spec.again(env, shared, work, setup, &again, &format!("alone{i}.log"));
        attempts += 1;
        for (name, seen) in names.iter().zip(outcomes.iter_mut()) {
            if left.contains(name) {
                seen.push(outcome(&r, name, left.len()).into());
            }
        }
    }
    if outcomes.iter().all(|seen| passed(seen)) {
        test.status = Status::Passed;
        test.error = None;
    }
    Some(Retried {
        attempts,
        alone: true,
        flaky: names.clone(),
        tests: names
            .into_iter()
            .zip(outcomes)
            .map(|(test, outcomes)| TestOutcomes { test, outcomes })
            .collect(),
    })
}

fn passed(seen: &[String]) -> bool {
    seen.iter().any(|o| o == "passed")
}

/// Whether a run that ended by itself names each test that failed.
fn every_failure_named(t: &Tests) -> bool {
    let counted = t.failed.map(|f| f + t.errors.unwrap_or(0));
    t.killed_by.is_none()
        && t.failures_omitted == 0
        && !t.failures.is_empty()
        && counted == Some(t.failures.len() as u64)
}

/// How `name` ended in a retry that ran `asked` tests alone: named among its failures; passed
/// when the run's report names it (pytest) and it is not among failures that are all named,
/// or (a runner that names only failures) when the run counted exactly the tests asked for
/// and named every failure; else unknown — never a pass the run did not show.
fn outcome(r: &CheckResult, name: &str, asked: usize) -> &'static str {
    let Some(t) = r.tests.as_ref().filter(|t| t.killed_by.is_none()) else {
        return "unknown";
    };
    let failed = t
        .failures
        .iter()
        .any(|f| gs_model::test_name::canonical(&f.name) == name);
    if failed {
        return "failed";
    }
    let named = r.status == Status::Passed || every_failure_named(t);
    let ran = if t.ids.is_empty() {
        let counted = t.passed.unwrap_or(0) + t.failed.unwrap_or(0) + t.errors.unwrap_or(0);
        counted == asked as u64
    } else {
        t.ids.iter().any(|id| id == name)
    };
    if named && ran {
        "passed"
    } else {
        "unknown"
    }
}
