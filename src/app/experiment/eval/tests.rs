//! The verdict of `eval` on records made up for each case: `judge` is pure.

use super::*;
use gs_model::{Analysis, Issue, Resources, Tests, RUN_SCHEMA};

fn rec(status: Status, passed: u64, failed: u64, complexity: f64, issues: &[&str]) -> RunRecord {
    RunRecord {
        schema: RUN_SCHEMA.into(),
        commit: "a".repeat(40),
        tree: "b".repeat(40),
        parents: vec![],
        refname: None,
        experiment: None,
        trigger: Trigger::Manual,
        status,
        started_at: String::new(),
        finished_at: String::new(),
        duration_ms: 1,
        cached_from: None,
        error: None,
        config_hash: None,
        superseded_by: None,
        cache_generations: Vec::new(),
        retried: None,
        toolchain: Default::default(),
        environment: None,
        coverage: None,
        checks: Default::default(),
        tests: Some(Tests {
            status: None,
            command: "t".into(),
            framework: None,
            exit_code: Some(i32::from(failed > 0)),
            passed: Some(passed),
            failed: Some(failed),
            skipped: Some(0),
            errors: Some(0),
            total: Some(passed + failed),
            failures: vec![],
            duration_ms: 1,
            output_tail: String::new(),
            killed_by: None,
            resources: Resources::default(),
            output_truncated: false,
            failures_omitted: 0,
            setup: None,
            isolation: None,
            limits: None,
            phases: Vec::new(),
            first_failure_ms: None,
            selection_missed: false,
            ids: Vec::new(),
            network: None,
            new_tests: None,
        }),
        analysis: Some(Analysis {
            complexity_score: complexity,
            potential_issues: issues
                .iter()
                .map(|p| Issue {
                    path: p.to_string(),
                    line: 1,
                    kind: "high_complexity".into(),
                    message: String::new(),
                })
                .collect(),
            ..Analysis::default()
        }),
        changes: None,
        warnings: vec![],
        snapshot: false,
        by: None,
        verified: None,
    }
}

fn verdict(base: Option<&RunRecord>, head: Option<&RunRecord>) -> Evaluation {
    let id = gs_git::objects::null_id();
    judge(
        "x",
        side("b", id, base),
        side("h", id, head),
        base,
        head,
        1.0,
        &HashSet::new(),
    )
}

#[test]
fn a_failure_of_a_known_flaky_test_alone_is_not_counted_and_the_reason_says_so() {
    let id = gs_git::objects::null_id();
    let base = rec(Status::Passed, 3, 0, 2.0, &[]);
    let mut head = rec(Status::Failed, 2, 1, 2.0, &[]);
    let t = head.tests.as_mut().unwrap();
    t.failures = vec![gs_model::Failure {
        name: "t.py::test_flaky".into(),
        message: "boom".into(),
    }];
    let judge_with = |known: &[&str], head: &RunRecord| {
        let known: HashSet<String> = known.iter().map(|s| s.to_string()).collect();
        judge(
            "x",
            side("b", id, Some(&base)),
            side("h", id, Some(head)),
            Some(&base),
            Some(head),
            1.0,
            &known,
        )
    };
    let unknown = judge_with(&[], &head);
    assert_eq!(unknown.recommendation, Recommendation::NotReady);
    let known = judge_with(&["t.py::test_flaky"], &head);
    assert_eq!(
        known.recommendation,
        Recommendation::Recommend,
        "{}",
        known.reason
    );
    assert!(
        known.reason.contains("known-flaky test t.py::test_flaky"),
        "{}",
        known.reason
    );
    assert_eq!(
        known.criteria[0].value["flaky_not_counted"][0],
        "t.py::test_flaky"
    );
    // A second failure that is not known to be flaky counts, the flaky one with it.
    let t = head.tests.as_mut().unwrap();
    t.failed = Some(2);
    t.failures.push(gs_model::Failure {
        name: "t.py::test_real".into(),
        message: "broken".into(),
    });
    let both = judge_with(&["t.py::test_flaky"], &head);
    assert_eq!(both.recommendation, Recommendation::NotReady);
    assert!(!both.reason.contains("not counted"), "{}", both.reason);
}

/// Production runs four tests, one failing; the experiment deletes the failing one and
/// (its printed passes no longer counted) passes three. Its counts look no worse, and it
/// would be recommended; by test id, a test is removed, which is no improvement.
#[test]
fn a_test_production_runs_and_the_experiment_lacks_is_removed_never_an_improvement() {
    let with_ids = |mut r: RunRecord, ids: &[&str]| {
        r.tests.as_mut().unwrap().ids = ids.iter().map(|s| s.to_string()).collect();
        r
    };
    let base = with_ids(
        rec(Status::Failed, 3, 1, 2.0, &[]),
        &["t::a", "t::b", "t::c", "t::d"],
    );
    let head = rec(Status::Passed, 3, 0, 2.0, &[]);
    // Without ids, counts alone: the deletion passes for a fix.
    assert_eq!(
        verdict(Some(&base), Some(&head)).recommendation,
        Recommendation::Recommend
    );
    let head = with_ids(head, &["t::a", "t::b", "t::c"]);
    let ev = verdict(Some(&base), Some(&head));
    assert_eq!(ev.recommendation, Recommendation::Consider);
    assert_eq!(ev.reason, "tests pass but tests_kept fails");
    let kept = ev.criteria.iter().find(|c| c.name == "tests_kept").unwrap();
    assert_eq!(kept.value, json!({"removed": 1, "tests": ["t::d"]}));
    // More passing tests by adding some, none removed: an improvement.
    let head = with_ids(
        rec(Status::Passed, 5, 0, 2.0, &[]),
        &["t::a", "t::b", "t::c", "t::d", "t::e"],
    );
    let ev = verdict(Some(&base), Some(&head));
    assert_eq!(ev.recommendation, Recommendation::StronglyRecommend);
    // Removing a passing test while adding two: still removed.
    let head = with_ids(
        rec(Status::Passed, 5, 0, 2.0, &[]),
        &["t::b", "t::c", "t::d", "t::e", "t::f"],
    );
    assert_eq!(
        verdict(Some(&base), Some(&head)).recommendation,
        Recommendation::Consider
    );
}

#[test]
fn recommendations() {
    let base = rec(Status::Passed, 2, 0, 2.0, &["a.py"]);
    let more = rec(Status::Passed, 3, 0, 2.0, &["a.py"]);
    assert_eq!(
        verdict(Some(&base), Some(&more)).recommendation,
        Recommendation::StronglyRecommend
    );
    let same = rec(Status::Passed, 2, 0, 2.0, &["a.py"]);
    assert_eq!(
        verdict(Some(&base), Some(&same)).recommendation,
        Recommendation::Recommend
    );
    let simpler = rec(Status::Passed, 2, 0, 1.5, &["a.py"]);
    assert_eq!(
        verdict(Some(&base), Some(&simpler)).recommendation,
        Recommendation::StronglyRecommend
    );
    let new_issue = rec(Status::Passed, 2, 0, 1.5, &["a.py", "b.py"]);
    let ev = verdict(Some(&base), Some(&new_issue));
    assert_eq!(ev.recommendation, Recommendation::Consider);
    assert_eq!(ev.criteria[2].value["new_issues"], 1);
    let fewer = rec(Status::Passed, 1, 0, 2.0, &["a.py"]);
    assert_eq!(
        verdict(Some(&base), Some(&fewer)).recommendation,
        Recommendation::Consider
    );
    let failing = rec(Status::Failed, 5, 1, 1.0, &[]);
    let ev = verdict(Some(&base), Some(&failing));
    assert_eq!(ev.recommendation, Recommendation::NotReady);
    assert!(!ev.criteria[0].pass);
    assert_eq!(
        verdict(Some(&base), None).recommendation,
        Recommendation::NotReady
    );
    assert!(!verdict(None, Some(&more)).criteria[3].pass);
}

#[test]
fn a_failing_required_check_holds_back_passing_tests_and_an_optional_one_does_not() {
    let base = rec(Status::Passed, 2, 0, 2.0, &[]);
    let with_lint = |status: Status, required: bool| {
        let mut head = rec(status, 2, 0, 2.0, &[]);
        let mut lint = head.tests.clone().unwrap();
        lint.status = Some(Status::Failed);
        lint.exit_code = Some(1);
        head.tests.as_mut().unwrap().status = Some(Status::Passed);
        head.checks = gs_model::Checks(vec![(
            "lint".into(),
            gs_model::CheckRun {
                required,
                error: None,
                run: lint,
            },
        )]);
        head
    };
    let required = with_lint(Status::Failed, true);
    let ev = verdict(Some(&base), Some(&required));
    assert_eq!(ev.recommendation, Recommendation::NotReady);
    assert!(ev.criteria[0].pass, "the tests themselves pass");
    assert_eq!(ev.criteria[1].name, "checks_pass");
    assert!(!ev.criteria[1].pass);
    assert!(ev.reason.contains("lint (failed)"), "{}", ev.reason);
    let optional = with_lint(Status::Passed, false);
    let ev = verdict(Some(&base), Some(&optional));
    assert_eq!(
        ev.recommendation,
        Recommendation::Recommend,
        "{}",
        ev.reason
    );
    // Without named checks the criteria are as they were.
    let plain = verdict(Some(&base), Some(&base));
    assert!(plain.criteria.iter().all(|c| c.name != "checks_pass"));
}

#[test]
fn coverage_may_drop_only_as_far_as_the_config_allows_and_only_counts_when_both_have_it() {
    let with = |percent: f64| {
        let mut r = rec(Status::Passed, 2, 0, 2.0, &[]);
        r.coverage = Some(gs_model::Coverage {
            check: "test".into(),
            report: "coverage.json".into(),
            format: "coverage.py".into(),
            lines_covered: 0,
            lines_total: 0,
            branches_covered: None,
            branches_total: None,
            percent,
            changed_files: vec![],
        });
        r
    };
    let id = gs_git::objects::null_id();
    let judge_with = |base: &RunRecord, head: &RunRecord, drop: f64| {
        judge(
            "x",
            side("b", id, Some(base)),
            side("h", id, Some(head)),
            Some(base),
            Some(head),
            drop,
            &HashSet::new(),
        )
    };
    let ev = judge_with(&with(80.0), &with(79.5), 1.0);
    let c = ev.criteria.iter().find(|c| c.name == "coverage").unwrap();
    assert!(c.pass, "{c:?}");
    assert_eq!(ev.recommendation, Recommendation::Recommend);
    assert_eq!(ev.head.coverage_percent, Some(79.5));
    let ev = judge_with(&with(80.0), &with(78.0), 1.0);
    let c = ev.criteria.iter().find(|c| c.name == "coverage").unwrap();
    assert!(!c.pass);
    assert_eq!(c.value["delta"], -2.0);
    assert_eq!(ev.recommendation, Recommendation::Consider);
    assert!(judge_with(&with(80.0), &with(78.0), 2.5)
        .criteria
        .iter()
        .all(|c| c.pass));
    let plain = rec(Status::Passed, 2, 0, 2.0, &[]);
    let ev = judge_with(&plain, &with(10.0), 1.0);
    assert!(ev.criteria.iter().all(|c| c.name != "coverage"));
}

#[test]
fn the_order_is_best_first() {
    assert!(Recommendation::StronglyRecommend > Recommendation::Recommend);
    assert!(Recommendation::Recommend > Recommendation::Consider);
    assert!(Recommendation::Consider > Recommendation::NotReady);
}
