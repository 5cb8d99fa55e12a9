//! The tests in two phases: the test files (pytest, jest, vitest), crates (cargo test) or
//! packages (go test) the change can reach (and those that failed last) first, so a failure is
//! known early; then exactly the rest of the suite (pytest's `--deselect FILE::`, jest's and
//! vitest's filters, cargo's `--workspace --exclude`, go's other packages by name), the two
//! merged into one result that equals a one-phase run.

use super::tree_text::TreeText;
use super::{conclude, execute, CheckResult, Env, Executed, First, Shared, Spec};
use gs_model::{Status, TestPhase, Tests};
use gs_runner::{cargo_cmd, detect, go_cmd, js_cmd, pytest_capture, pytest_cmd, workspace};
use gs_sandbox::first_fail;
use std::time::Instant;

/// pytest's exit code when it collected no test (every one deselected): no failure.
const NO_TESTS_COLLECTED: i32 = 5;

/// Where a phased run's checks run and what each of them passes on.
pub(super) struct Place<'a> {
    pub env: &'a Env<'a>,
    pub shared: &'a Shared<'a>,
    pub work: &'a workspace::Workspace,
    pub setup: Option<&'a super::setup::Setup>,
    pub keep: bool,
}

impl Place<'_> {
    /// One phase (or the one session): run, then read. `split`: a phase of a split command, in
    /// which no test selected is no failure.
    fn check(&self, spec: &Spec<'_>, first: &First<'_>, split: Option<&Split>) -> CheckResult {
        let executed = execute(
            self.shared,
            spec,
            self.work,
            self.setup,
            self.keep,
            Some(first),
        );
        let executed = match split {
            Some(split) => split.no_tests_is_no_failure(executed),
            None => executed,
        };
        conclude(self.env, spec, executed, self.work, self.setup)
    }
}

/// Run the tests of `spec` in two phases, when its command and `phase_one` allow it.
///
/// The command must be a pytest, jest, vitest, cargo test or go test invocation and
/// `phase_one` lie within the suite it runs (go test's rest is named by `env.phase_two`);
/// `None`: run them in one phase as before. Each phase's output is watched,
/// and `first` tells the first failure.
pub(super) fn run(
    place: &Place<'_>,
    spec: &Spec<'_>,
    phase_one: &[String],
    first: &First<'_>,
) -> Option<CheckResult> {
    let (env, work) = (place.env, place.work);
    let command = match spec.command {
        Some(c) => c.to_string(),
        None => detect::detect(&work.host_tree())?.0,
    };
    let split = Split::of(&command, work, env.phase_two)?;
    let files: Vec<String> = phase_one
        .iter()
        .filter(|f| split.within(f))
        .cloned()
        .collect();
    if files.is_empty() {
        return None;
    }
    if let Some(session) = one_session_command(&split, &command, work, &files) {
        return Some(one_session(place, spec, &command, &session, files, first));
    }
    let two_command = split.without(&files)?;
    let started = Instant::now();
    first.start();
    let first_log = spec.log.with_extension("phase1.log");
    let one_command = split.only(&files);
    let one_spec = Spec {
        command: Some(&one_command),
        log: first_log.clone(),
        runner: Some(split.runner()),
        ..spec.clone()
    };
    let one = place.check(&one_spec, first, Some(&split));
    let one_ms = started.elapsed().as_millis() as u64;
    let one_failed = one.status != Status::Passed;
    first.phase_ended(one_failed, one_ms, || first_failure_name(&one));
    let mut phases = vec![phase_of(&one, files.clone())];
    // Cut short (timeout, a limit, Ctrl-C) or unable to run: the suite did not run, and phase
    // one's result is the run's.
    if !matches!(one.status, Status::Passed | Status::Failed) {
        let _ = std::fs::rename(&first_log, &spec.log);
        return Some(with_phases(
            one,
            phases,
            first.ms().filter(|_| one_failed),
            false,
        ));
    }
    let two_spec = Spec {
        command: Some(&two_command),
        timeout: spec.timeout.saturating_sub(started.elapsed()),
        runner: Some(split.runner()),
        ..spec.clone()
    };
    let two = place.check(&two_spec, first, Some(&split));
    let all_ms = started.elapsed().as_millis() as u64;
    let two_failed = two.status != Status::Passed;
    if !one_failed {
        first.phase_ended(two_failed, all_ms, || first_failure_name(&two));
    }
    join_logs(&first_log, &spec.log);
    phases.push(phase_of(&two, Vec::new()));
    let first_failure = first.ms().filter(|_| one_failed || two_failed);
    let merged = merge(one, two, &command);
    Some(with_phases(
        merged,
        phases,
        first_failure,
        two_failed && !one_failed,
    ))
}

/// pytest's both phases as one session, so a suite pays for one start-up of pytest.
///
/// git-sandbox's plugin collects and runs phase one's files before the rest, and tells where they
/// ended. Not so when its output is not watched (capture off: the tests' prints stream beside the
/// plugin's lines), its tests run in other processes (pytest-xdist) or the command line would be
/// too long.
fn one_session_command(
    split: &Split,
    command: &str,
    work: &workspace::Workspace,
    files: &[String],
) -> Option<String> {
    let Split::Pytest(p) = split else {
        return None;
    };
    let texts = TreeText::of(work);
    if super::first::printed_beside(first_fail::Runner::Pytest, command, &texts)
        || pytest_capture::distributed(command, &|p| texts.get(p))
    {
        return None;
    }
    p.one_session(files)
}

/// Both phases in one pytest session: one process, one log, one parse; the phases' counts and
/// phase one's end come from the plugin's line (a session that ended before it, a collection
/// error or `-x`, ran within phase one).
fn one_session(
    place: &Place<'_>,
    spec: &Spec<'_>,
    command: &str,
    session: &str,
    files: Vec<String>,
    first: &First<'_>,
) -> CheckResult {
    first.start();
    let session_spec = Spec {
        command: Some(command),
        runs: Some(session),
        runner: Some(first_fail::Runner::Pytest),
        phased: true,
        ..spec.clone()
    };
    let mut r = place.check(&session_spec, first, None);
    let failed = r.status != Status::Passed;
    let Some(t) = r.tests.as_mut() else {
        return r;
    };
    let (phases, missed) = match first.phase_one() {
        Some((one, one_ms)) => {
            let one_failed = one.failed + one.errors > 0;
            if !one_failed {
                first.phase_ended(failed, t.duration_ms, || first_test_failed(t));
            }
            let rest = |all: Option<u64>, part: u64| all.map(|a| a.saturating_sub(part));
            let phases = vec![
                TestPhase {
                    files,
                    command: command.to_string(),
                    exit_code: None,
                    passed: Some(one.passed),
                    failed: Some(one.failed),
                    errors: Some(one.errors),
                    total: Some(one.tests),
                    duration_ms: one_ms,
                },
                TestPhase {
                    files: Vec::new(),
                    command: command.to_string(),
                    exit_code: t.exit_code,
                    passed: rest(t.passed, one.passed),
                    failed: rest(t.failed, one.failed),
                    errors: rest(t.errors, one.errors),
                    total: rest(t.total, one.tests),
                    duration_ms: t.duration_ms.saturating_sub(one_ms),
                },
            ];
            (phases, failed && !one_failed)
        }
        None => {
            first.phase_ended(failed, t.duration_ms, || first_test_failed(t));
            (vec![phase_of_tests(t, files)], false)
        }
    };
    let first_failure = first.ms().filter(|_| failed);
    with_phases(r, phases, first_failure, missed)
}

/// How a runner's command is split: pytest's node ids, jest's and vitest's file filters, cargo
/// test's crates, go test's packages (phase two's named).
enum Split {
    Pytest(pytest_cmd::Pytest),
    Js(js_cmd::JsCmd),
    Cargo(cargo_cmd::CargoTest),
    Go(go_cmd::GoTest, Vec<String>),
}

impl Split {
    fn of(
        command: &str,
        work: &workspace::Workspace,
        phase_two: Option<&[String]>,
    ) -> Option<Split> {
        if let Some(p) = pytest_cmd::recognise(command) {
            return Some(Split::Pytest(p));
        }
        if let Some(c) = cargo_cmd::recognise(command) {
            return Some(Split::Cargo(c));
        }
        if let Some(g) = go_cmd::recognise(command) {
            return Some(Split::Go(g, phase_two?.to_vec()));
        }
        let texts = TreeText::of(work);
        let text_of = |p: &str| texts.get(p);
        // Only `npm test` reads the script.
        let npm = command.split_whitespace().any(|w| w.ends_with("npm"));
        let script = npm
            .then(|| text_of("package.json"))
            .flatten()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|j| Some(j.pointer("/scripts/test")?.as_str()?.to_string()));
        js_cmd::recognise(command, script.as_deref())?
            .in_tree(&text_of)
            .map(Split::Js)
    }

    /// Whether the command's suite holds `part` (a command that names its own paths runs only
    /// those: phase one stays within them).
    fn within(&self, part: &str) -> bool {
        match self {
            Split::Pytest(p) => {
                p.paths.is_empty()
                    || p.paths
                        .iter()
                        .any(|d| part == d || part.starts_with(&format!("{d}/")))
            }
            Split::Go(g, _) => g.matches(part),
            Split::Js(_) | Split::Cargo(_) => true,
        }
    }

    /// Whose output each phase's is.
    fn runner(&self) -> first_fail::Runner {
        match self {
            Split::Pytest(_) => first_fail::Runner::Pytest,
            Split::Js(j) if j.runner == gs_analysis::jsgraph::Runner::Vitest => {
                first_fail::Runner::Vitest
            }
            Split::Js(_) => first_fail::Runner::Jest,
            Split::Cargo(_) => first_fail::Runner::Cargo,
            Split::Go(..) => first_fail::Runner::Go,
        }
    }

    fn only(&self, parts: &[String]) -> String {
        match self {
            Split::Pytest(p) => p.only(parts),
            Split::Js(j) => j.only(parts),
            Split::Cargo(c) => c.only(parts),
            Split::Go(g, _) => g.only(parts),
        }
    }

    /// Phase two's command; `None` when it would name no package (go test of no package tests
    /// the current directory's).
    fn without(&self, parts: &[String]) -> Option<String> {
        Some(match self {
            Split::Pytest(p) => p.without(parts),
            Split::Js(j) => j.without(parts),
            Split::Cargo(c) => c.without(parts),
            Split::Go(g, rest) => {
                let rest: Vec<String> = rest
                    .iter()
                    .filter(|p| !parts.contains(p) && g.matches(p))
                    .cloned()
                    .collect();
                if rest.is_empty() {
                    return None;
                }
                g.only(&rest)
            }
        })
    }

    /// A phase that collected nothing (every test deselected, a selection that names none)
    /// ended as a passing one would (jest and vitest are told so: `--passWithNoTests`).
    fn no_tests_is_no_failure(&self, e: Executed) -> Executed {
        match self {
            Split::Pytest(_) => no_tests_is_no_failure(e),
            Split::Js(_) | Split::Cargo(_) | Split::Go(..) => e,
        }
    }
}

/// pytest's exit 5 (no test collected) as a pass.
fn no_tests_is_no_failure(mut e: Executed) -> Executed {
    if let Executed::Ran { outcome, .. } = &mut e {
        if outcome.exit_code == Some(NO_TESTS_COLLECTED) && outcome.killed_by.is_none() {
            outcome.exit_code = Some(0);
        }
    }
    e
}

fn first_failure_name(r: &CheckResult) -> String {
    r.tests
        .as_ref()
        .and_then(|t| t.failures.first())
        .map(|f| f.name.clone())
        .or_else(|| r.error.clone())
        .unwrap_or_else(|| "the tests".into())
}

fn first_test_failed(t: &Tests) -> String {
    t.failures
        .first()
        .map_or_else(|| "the tests".to_string(), |f| f.name.clone())
}

fn phase_of_tests(t: &Tests, files: Vec<String>) -> TestPhase {
    TestPhase {
        files,
        command: t.command.clone(),
        exit_code: t.exit_code,
        passed: t.passed,
        failed: t.failed,
        errors: t.errors,
        total: t.total,
        duration_ms: t.duration_ms,
    }
}

fn phase_of(r: &CheckResult, files: Vec<String>) -> TestPhase {
    let t = r.tests.as_ref();
    TestPhase {
        files,
        command: t.map(|t| t.command.clone()).unwrap_or_default(),
        exit_code: t.and_then(|t| t.exit_code),
        passed: t.and_then(|t| t.passed),
        failed: t.and_then(|t| t.failed),
        errors: t.and_then(|t| t.errors),
        total: t.and_then(|t| t.total),
        duration_ms: t.map_or(0, |t| t.duration_ms),
    }
}

fn with_phases(
    mut r: CheckResult,
    phases: Vec<TestPhase>,
    first_failure_ms: Option<u64>,
    missed: bool,
) -> CheckResult {
    if let Some(t) = r.tests.as_mut() {
        t.phases = phases;
        t.first_failure_ms = first_failure_ms;
        t.selection_missed = missed;
    }
    r
}

/// The log of the whole suite: phase one's output, then phase two's.
fn join_logs(first: &std::path::Path, log: &std::path::Path) {
    let (Ok(mut one), Ok(two)) = (std::fs::read(first), std::fs::read(log)) else {
        return;
    };
    one.extend_from_slice(&two);
    if std::fs::write(log, one).is_ok() {
        let _ = std::fs::remove_file(first);
    }
}

/// Both phases as one run of the suite: counts added, failures in order, the worst status, the
/// per-test coverage of both.
fn merge(one: CheckResult, two: CheckResult, command: &str) -> CheckResult {
    let status = [one.status, two.status]
        .into_iter()
        .max_by_key(|s| s.severity())
        .unwrap_or(Status::Passed);
    let mut warnings = one.warnings;
    warnings.extend(two.warnings);
    if one.coverage.is_some() || two.coverage.is_some() {
        warnings.push("a coverage report is not merged across the two phases, so none is kept; set [test] phases = false to keep it".into());
    }
    let tests = match (one.tests, two.tests) {
        (Some(a), Some(b)) => Some(merge_tests(a, b, command)),
        (a, b) => b.or(a),
    };
    CheckResult {
        status,
        tests,
        error: two.error.or(one.error),
        warnings,
        overlay_failed: one.overlay_failed || two.overlay_failed,
        coverage: None,
        contexts: match (&one.contexts, &two.contexts) {
            (Some(a), Some(b)) => crate::app::run::testcov::combine(a, b),
            _ => None,
        },
    }
}

fn merge_tests(a: Tests, b: Tests, command: &str) -> Tests {
    let add = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    let a_failed = a.exit_code.is_some_and(|c| c != 0);
    let mut failures = a.failures;
    failures.extend(b.failures);
    let mut t = Tests {
        status: [a.status, b.status]
            .into_iter()
            .flatten()
            .max_by_key(|s| s.severity()),
        command: command.to_string(),
        framework: b.framework.or(a.framework),
        exit_code: if a_failed { a.exit_code } else { b.exit_code },
        passed: add(a.passed, b.passed),
        failed: add(a.failed, b.failed),
        skipped: add(a.skipped, b.skipped),
        errors: add(a.errors, b.errors),
        total: add(a.total, b.total),
        failures,
        failures_omitted: a.failures_omitted + b.failures_omitted,
        duration_ms: a.duration_ms + b.duration_ms,
        output_tail: if a_failed && b.exit_code == Some(0) {
            a.output_tail
        } else {
            b.output_tail
        },
        killed_by: b.killed_by.or(a.killed_by),
        resources: gs_model::Resources {
            cpu_ms: a.resources.cpu_ms + b.resources.cpu_ms,
            max_rss_kb: a.resources.max_rss_kb.max(b.resources.max_rss_kb),
        },
        output_truncated: a.output_truncated || b.output_truncated,
        network: gs_model::NetworkUse::merge(a.network, b.network),
        ..b
    };
    t.bound();
    t
}
