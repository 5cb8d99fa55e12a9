//! Flakes caught at birth: a test the parent's run did not name runs `[test] new_test_runs`
//! times in its commit's run. The first run is the suite's own, in its order, and decides the
//! commit's status; the extra runs (only the new tests, by pytest node id, each in a fresh
//! sandbox over the same tree and cache layers, keeping nothing) only mark a test whose
//! outcomes differ as flaky at birth in the record. They ran apart from the suite, so they are
//! never evidence of flakiness in the index and never excuse a failure.

use super::{Env, Shared, Spec};
use crate::app::run::setup;
use gs_model::{NewTests, Status, TestOutcomes, Tests};
use gs_runner::{detect, pytest_cmd, rundir};
use std::collections::{BTreeSet, HashSet};

/// The most new tests run again: a commit that adds more leaves the rest at their one run.
const MAX_NEW_TESTS: usize = 200;

/// Run the new tests of `tests` (the suite's run of `spec`) again, up to the config's
/// `new_test_runs` in all, and say in the record which of them differed.
pub(super) fn mark(
    env: &Env<'_>,
    shared: &Shared<'_>,
    work: &rundir::RunDir,
    setup: Option<&setup::Setup>,
    spec: &Spec<'_>,
    tests: &mut Tests,
) {
    let runs = env.config.test.new_test_runs;
    // The suite ran its course (a run cut short names only the tests it reached).
    let ended =
        matches!(tests.status, Some(Status::Passed | Status::Failed)) && tests.killed_by.is_none();
    if runs < 2 || tests.ids.is_empty() || !ended {
        return;
    }
    let command = match spec.command {
        Some(c) => c.to_string(),
        None => match detect::detect(&work.host_tree()) {
            Some((c, _)) => c,
            None => return,
        },
    };
    let Some(pytest) = pytest_cmd::recognise(&command) else {
        return;
    };
    let Some(parent) = (env.parent_ids)().filter(|p| !p.is_empty()) else {
        return;
    };
    let parent: HashSet<&str> = parent.iter().map(String::as_str).collect();
    let new: Vec<String> = tests
        .ids
        .iter()
        .filter(|id| !parent.contains(id.as_str()) && id.contains("::"))
        .cloned()
        .collect();
    if new.is_empty() {
        return;
    }
    let omitted = new.len().saturating_sub(MAX_NEW_TESTS) as u64;
    let new = &new[..new.len().min(MAX_NEW_TESTS)];
    let failed_first: HashSet<String> = tests
        .failures
        .iter()
        .map(|f| gs_model::test_name::canonical(&f.name))
        .collect();
    let mut outcomes: Vec<Vec<&'static str>> = new
        .iter()
        .map(|id| vec![outcome(failed_first.contains(id.as_str()))])
        .collect();
    let again = pytest.only(new);
    let mut error = None;
    for i in 1..runs {
        if shared.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let r = spec.again(env, shared, work, setup, &again, &format!("new{i}.log"));
        let Some(t) = r.tests.filter(|t| t.killed_by.is_none()) else {
            error = Some(format!(
                "extra run {i} of the new tests did not end by itself{}",
                r.error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
            break;
        };
        let ran: HashSet<&str> = t.ids.iter().map(String::as_str).collect();
        let failed: HashSet<String> = t
            .failures
            .iter()
            .map(|f| gs_model::test_name::canonical(&f.name))
            .collect();
        for (id, seen) in new.iter().zip(outcomes.iter_mut()) {
            seen.push(if failed.contains(id.as_str()) {
                "failed"
            } else if ran.contains(id.as_str()) {
                "passed"
            } else {
                "not run"
            });
        }
    }
    let flaky = new
        .iter()
        .zip(&outcomes)
        .filter(|(_, seen)| {
            let known: BTreeSet<&str> = seen.iter().copied().filter(|o| *o != "not run").collect();
            known.len() > 1
        })
        .map(|(id, seen)| TestOutcomes {
            test: id.clone(),
            outcomes: seen.iter().map(|o| o.to_string()).collect(),
        })
        .collect();
    tests.new_tests = Some(NewTests {
        runs,
        tested: new.len() as u64,
        omitted,
        flaky,
        error,
    });
}

fn outcome(failed: bool) -> &'static str {
    if failed {
        "failed"
    } else {
        "passed"
    }
}
