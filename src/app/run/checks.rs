//! Running a commit's checks in its workspace: the tests (`[test]`, the check named `test`) and
//! the named checks (`[checks.NAME]`), one after another, or side by side for those that say
//! `parallel = true`; each in its own sandboxed process over the same tree, with its own
//! timeout, log, report and status.

use crate::app::{run::setup, Context};
use gs_config::{Config, TEST_CHECK};
use gs_model::{CheckRun, Checks, Framework, KilledBy, Status, TestCounts, Tests};
use gs_parse as parse;
use gs_runner::{coverage, detect, rundir};
use gs_sandbox::process;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

mod alone;
mod births;
mod commands;
mod first;
mod phases;
mod read;
mod tree_text;

pub(super) use commands::ctest_report;
use commands::missing_runner;
use first::First;

/// What running one check gave.
pub(super) struct CheckResult {
    pub status: Status,
    /// `None`: the tests had no command and none could be detected (nothing ran).
    pub tests: Option<Tests>,
    pub error: Option<String>,
    pub warnings: Vec<String>,
    /// The run's overlay could not be made (its kept checkout was bound read-only instead).
    pub overlay_failed: bool,
    /// The line-coverage report it wrote: where, and what it says.
    pub coverage: Option<(String, coverage::Report)>,
    /// coverage.py's data file with the test that ran each line (pytest-cov's per-test
    /// contexts), when the tests recorded them.
    pub contexts: Option<Vec<u8>>,
}

impl CheckResult {
    pub fn failed_checkout(why: String) -> CheckResult {
        CheckResult {
            status: Status::Error,
            tests: None,
            error: Some(why),
            warnings: Vec::new(),
            overlay_failed: false,
            coverage: None,
            contexts: None,
        }
    }
}

/// Every check of a run: the tests and the named checks in the order declared.
pub(super) struct Ran {
    pub test: CheckResult,
    pub others: Vec<(String, bool, CheckResult)>,
    /// The failing tests retried alone (see `alone`), when they were.
    pub retried: Option<gs_model::Retried>,
}

impl Ran {
    pub fn overlay_failed(&self) -> bool {
        self.test.overlay_failed || self.others.iter().any(|(_, _, c)| c.overlay_failed)
    }

    /// The run's status: the worst of the tests' and the required checks'.
    pub fn status(&self) -> Status {
        self.others
            .iter()
            .filter(|(_, required, _)| *required)
            .map(|(_, _, c)| c.status)
            .chain([self.test.status])
            .max_by_key(|s| s.severity())
            .unwrap_or(Status::Passed)
    }

    /// Why the run gave no clean result: the tests' reason, else the first required check's.
    pub fn error(&self) -> Option<String> {
        self.test.error.clone().or_else(|| {
            self.others
                .iter()
                .filter(|(_, required, c)| *required && c.status != Status::Passed)
                .find_map(|(name, _, c)| c.error.as_ref().map(|e| format!("check `{name}`: {e}")))
        })
    }

    pub fn warnings(&self) -> Vec<String> {
        let mut all = self.test.warnings.clone();
        for (name, _, c) in &self.others {
            all.extend(c.warnings.iter().map(|w| format!("check `{name}`: {w}")));
        }
        all
    }

    /// The coverage report of the run: the tests', else the first named check's.
    pub fn coverage(&self) -> Option<(&str, &str, &coverage::Report)> {
        let test = self
            .test
            .coverage
            .as_ref()
            .map(|(path, r)| (TEST_CHECK, path.as_str(), r));
        test.or_else(|| {
            self.others.iter().find_map(|(name, _, c)| {
                c.coverage
                    .as_ref()
                    .map(|(path, r)| (name.as_str(), path.as_str(), r))
            })
        })
    }

    /// The named checks as the record keeps them.
    pub fn checks(&self) -> Checks {
        Checks(
            self.others
                .iter()
                .filter_map(|(name, required, c)| {
                    Some((
                        name.clone(),
                        CheckRun {
                            required: *required,
                            error: c.error.clone(),
                            run: c.tests.clone()?,
                        },
                    ))
                })
                .collect(),
        )
    }
}

/// One check to run.
#[derive(Clone)]
struct Spec<'a> {
    name: &'a str,
    /// `None`: detect the tests' command from the tree (the `test` check only).
    command: Option<&'a str>,
    timeout: Duration,
    /// Its JUnit reports: the one the config names, else (the tests only) the directories
    /// build tools write them to (`DIR/*.xml`).
    junit: Vec<String>,
    junit_named: bool,
    /// Where its coverage report may be: the one the config names, else (the tests only) where
    /// the usual tools write one.
    coverage: Vec<String>,
    /// Whether the config named the coverage report (a missing or unreadable one is a warning).
    coverage_named: bool,
    required: bool,
    parallel: bool,
    log: PathBuf,
    /// The runner whose output is watched for the first failure, when the command's words do
    /// not say (`npm test` running jest).
    runner: Option<gs_sandbox::first_fail::Runner>,
    /// The probe beside the tests (see `phases`): its own sandbox and cgroup, reading the
    /// build caches without writing them, keeping no reports.
    probe: bool,
    /// The tests the probe runs first, in this order (pytest node ids; see
    /// `gs_select::Selection::first`); empty for anything else.
    first: &'a [String],
}

impl Spec<'_> {
    /// Run `command` once more in `work` in place of this check's own (a few of its tests
    /// again): a fresh sandbox over the same tree and cache layers, keeping nothing, with no
    /// reports, no probe and its own log (`log_ext`).
    fn again(
        &self,
        env: &Env<'_>,
        shared: &Shared<'_>,
        work: &rundir::RunDir,
        setup: Option<&setup::Setup>,
        command: &str,
        log_ext: &str,
    ) -> CheckResult {
        let extra = Spec {
            command: Some(command),
            log: self.log.with_extension(log_ext),
            junit: Vec::new(),
            junit_named: false,
            coverage: Vec::new(),
            coverage_named: false,
            runner: None,
            probe: false,
            first: &[],
            ..self.clone()
        };
        let executed = execute(shared, &extra, work, setup, false, None);
        conclude(env, &extra, executed, work, setup)
    }
}

/// What the checks of a run share. Only the config, the sandbox and the interrupt flag go to
/// the threads of parallel checks; the index is written from the caller's thread.
pub(super) struct Env<'a> {
    pub ctx: &'a Context,
    pub config: &'a Config,
    pub sandbox: &'a gs_sandbox::Sandbox,
    pub interrupt: &'a AtomicBool,
    /// Where the logs go, and the commit and trial flag that name them.
    pub logs: &'a Path,
    pub commit: &'a str,
    pub trial: bool,
    /// Where the usual tools write a coverage report, but for the paths the commit's tree holds
    /// (a committed report is no evidence of this run).
    pub coverage_candidates: &'a [String],
    /// Where build tools write JUnit reports (`target/surefire-reports/*.xml`, …), but for the
    /// directories the commit's tree holds or the build cache keeps.
    pub junit_candidates: &'a [String],
    /// Tell the event log a check has ended.
    pub on_done: &'a dyn Fn(&str, &CheckResult),
    /// The test files a probe beside the tests runs (see `phases`): `Some` when they may have one.
    pub phase_one: Option<&'a [String]>,
    /// The single tests the probe runs before the rest of phase one (pytest node ids).
    pub probe_first: &'a [String],
    /// Publish the first failing test (its name, or why the tests could not run) and the
    /// milliseconds from the start of the tests to the moment it was known.
    pub on_first_failure: &'a dyn Fn(&str, u64),
    /// Withdraw the first failure told: the run's results do not hold it (a probe's hint).
    pub on_first_failure_withdrawn: &'a dyn Fn(&str),
    /// The tests the parent's run named (`None`: no such run, or it named none): a test not
    /// among them is new, and runs again to catch a flaky one at birth (see `births`). Read
    /// only when a run could have such tests (its runner named each test it ran).
    pub parent_ids: &'a dyn Fn() -> Option<Vec<String>>,
    /// How often a failure only of tests flaky on record is retried (0: never, a trial).
    pub retries: u32,
    /// The tests flaky in full-suite runs on record (read only when a suite failed).
    pub flaky_on_record: &'a dyn Fn() -> std::collections::HashSet<String>,
}

/// Run every check of `config` in `work`: the parallel ones side by side, the others one after
/// another (the named checks in the order declared, then the tests).
pub(super) fn run_all(env: &Env<'_>, work: &rundir::RunDir, setup: Option<&setup::Setup>) -> Ran {
    let config = env.config;
    let mut specs: Vec<Spec<'_>> = config
        .checks
        .iter()
        .map(|c| Spec {
            name: &c.name,
            command: Some(&c.command),
            timeout: config.check_timeout(c),
            junit: c.junit.iter().cloned().collect(),
            junit_named: c.junit.is_some(),
            coverage: c.coverage.iter().cloned().collect(),
            coverage_named: c.coverage.is_some(),
            required: c.required,
            parallel: c.parallel,
            log: crate::app::records::logs::log_path(
                env.logs,
                env.commit,
                Some(&c.name),
                env.trial,
            ),
            runner: None,
            probe: false,
            first: &[],
        })
        .collect();
    specs.push(Spec {
        name: TEST_CHECK,
        command: config.test.command.as_deref(),
        timeout: config.test.timeout,
        junit: match &config.test.junit {
            Some(j) => vec![j.clone()],
            None => env.junit_candidates.to_vec(),
        },
        junit_named: config.test.junit.is_some(),
        coverage: match &config.test.coverage {
            Some(c) => vec![c.clone()],
            None => env.coverage_candidates.to_vec(),
        },
        coverage_named: config.test.coverage.is_some(),
        required: true,
        parallel: config.test.parallel,
        log: crate::app::records::logs::log_path(env.logs, env.commit, None, env.trial),
        runner: None,
        probe: false,
        first: &[],
    });
    // A check keeps its build-cache writes by merging them into the branch's layer once it
    // ends; runs side by side have that layer mounted under them, and a layer must not change
    // under a mounted overlay: with parallel checks, none keeps its writes (all still read the
    // cache). One after another, each merges in turn.
    let keep = specs.len() == 1 || !specs.iter().any(|s| s.parallel);
    // One of the slots of this process's runs, while the checks run (a probe may yield it).
    let _slot = crate::app::run::slots::RunSlot::take();
    let shared = Shared {
        config,
        sandbox: env.sandbox,
        interrupt: env.interrupt,
    };
    let mut done: Vec<Option<Executed>> = specs.iter().map(|_| None).collect();
    let mut probed: Option<CheckResult> = None;
    let first = First::new(env.on_first_failure);
    std::thread::scope(|s| {
        let shared = &shared;
        let handles: Vec<_> = specs
            .iter()
            .enumerate()
            .filter(|(_, spec)| spec.parallel)
            .map(|(i, spec)| {
                (
                    i,
                    s.spawn(move || execute(shared, spec, work, setup, keep, None)),
                )
            })
            .collect();
        for (i, spec) in specs.iter().enumerate().filter(|(_, s)| !s.parallel) {
            if spec.name == TEST_CHECK {
                let place = phases::Place {
                    env,
                    shared,
                    work,
                    setup,
                    keep,
                };
                let probe = env
                    .phase_one
                    .and_then(|files| phases::Probe::plan(&place, spec, files));
                if let Some(probe) = probe {
                    probed = Some(phases::run(&place, spec, probe));
                    continue;
                }
                first.start();
                let watch = |f, at| first.seen(f, at);
                done[i] = Some(execute(shared, spec, work, setup, keep, Some(&watch)));
                continue;
            }
            done[i] = Some(execute(shared, spec, work, setup, keep, None));
        }
        for (i, h) in handles {
            done[i] = Some(h.join().unwrap_or(Executed::Crashed));
        }
    });
    let mut results: Vec<CheckResult> = specs
        .iter()
        .zip(done)
        .map(|(spec, e)| {
            let mut r = match (spec.name == TEST_CHECK, probed.take()) {
                (true, Some(r)) => r,
                _ => {
                    let mut r = conclude(env, spec, e.unwrap_or(Executed::Crashed), work, setup);
                    if spec.name == TEST_CHECK {
                        first::one_phase_failure(&first, &mut r);
                    }
                    r
                }
            };
            if let Some(t) = r.tests.as_mut() {
                t.bound();
            }
            (env.on_done)(spec.name, &r);
            r
        })
        .collect();
    let mut test = results.pop().expect("the test check is always there");
    let spec = specs.last().expect("the test check is always there");
    let checks_pass = specs
        .iter()
        .zip(&results)
        .all(|(s, r)| !s.required || r.status == Status::Passed);
    let retried = alone::retry(env, &shared, work, setup, spec, &mut test, checks_pass);
    if let Some(tests) = test.tests.as_mut() {
        births::mark(env, &shared, work, setup, spec, tests);
    }
    Ran {
        retried,
        test,
        others: specs
            .iter()
            .zip(results)
            .map(|(spec, r)| (spec.name.to_string(), spec.required, r))
            .collect(),
    }
}

/// What a check's thread needs.
struct Shared<'a> {
    config: &'a Config,
    sandbox: &'a gs_sandbox::Sandbox,
    interrupt: &'a AtomicBool,
}

/// A check's process, ended.
enum Executed {
    /// No command given and none detected (the tests only).
    Nothing,
    Ran {
        command: String,
        framework: Option<Framework>,
        outcome: Box<process::Outcome>,
        /// Where git-sandbox's pytest reporter wrote each test's outcome, when it was loaded.
        report: Option<String>,
    },
    /// Its thread panicked.
    Crashed,
}

/// What the output of a watched runner has just shown, and when it was read.
type OnFound<'a> = &'a dyn Fn(gs_sandbox::first_fail::Found, std::time::Instant);

/// Run one check's command in a checkout (no index access: this may be a thread of its own),
/// its output watched for the first failure when `watch` is given and the runner is known.
fn execute(
    shared: &Shared<'_>,
    spec: &Spec<'_>,
    work: &rundir::RunDir,
    setup: Option<&setup::Setup>,
    keep_cache: bool,
    watch: Option<OnFound<'_>>,
) -> Executed {
    let _t = gs_util::trace::span("check");
    let (command, framework) = match spec.command {
        Some(c) => (c.to_string(), parse::framework_from_command(c)),
        None => match detect::detect(&work.host_tree()) {
            Some((c, f)) => (c, Some(f)),
            None => return Executed::Nothing,
        },
    };
    let mut artifacts: Vec<String> = Vec::new();
    if !spec.probe {
        artifacts.extend(spec.junit.iter().cloned());
        artifacts.extend(spec.coverage.iter().cloned());
        if spec.name == TEST_CHECK && crate::app::run::testcov::recorded_by(&command) {
            artifacts.push(crate::app::run::testcov::DATA_FILE.into());
        }
    }
    // The tests' per-test results, out of reach of their prints: any command may start pytest.
    let reporter = (spec.name == TEST_CHECK && matches!(framework, None | Some(Framework::Pytest)))
        .then(|| {
            if spec.probe {
                gs_runner::pytest_report::Reporter::probe(spec.first)
            } else {
                gs_runner::pytest_report::Reporter::new()
            }
        });
    if let Some(r) = &reporter {
        artifacts.push(r.file.clone());
    }
    let line = reporter
        .as_ref()
        .map_or_else(|| command.clone(), |r| r.wrap(&command));
    let build = (spec.name == TEST_CHECK)
        .then_some(shared.config.test.build.as_deref())
        .flatten();
    let line = setup::with_build(build, &line);
    let full = setup.map_or_else(|| line.clone(), |s| s.wrap(&line));
    let on_found = |f, at| {
        if let Some(watch) = watch {
            watch(f, at);
        }
    };
    let runner = spec
        .runner
        .or_else(|| gs_sandbox::first_fail::Runner::of(framework.as_ref()?))
        .filter(|r| !first::printed_beside(*r, &command, &tree_text::TreeText::of(work)));
    let watch = watch.and(runner).map(|runner| process::Watch {
        runner,
        on_found: &on_found,
    });
    // The probe reads the build caches but the branch's own, which the run may write as it
    // ends; it keeps nothing.
    let probe_layers: Vec<PathBuf>;
    let cache_layers = if spec.probe {
        probe_layers = work
            .cache_layers
            .iter()
            .filter(|l| Some(*l) != work.cache_out.as_ref())
            .cloned()
            .collect();
        &probe_layers
    } else {
        &work.cache_layers
    };
    let outcome = process::run(process::Spec {
        command: &full,
        cwd: &work.path(),
        root: work.root(),
        env: gs_sandbox::env::sandbox_env(work.root()),
        timeout: spec.timeout,
        output: process::Output::Capture {
            log: &spec.log,
            cap: shared.config.limits.output_bytes,
        },
        limits: &shared.config.limits,
        sandbox: shared.sandbox,
        interrupt: shared.interrupt,
        artifacts: &artifacts,
        lower: work.lower(),
        run_uid: work.run_uid,
        cache_layers,
        cache_out: work
            .cache_out
            .as_deref()
            .filter(|_| keep_cache && !spec.probe),
        cache_paths: &work.cache_paths,
        work_layers: &[],
        watch,
        egress: process::Egress::tests(shared.config),
    });
    Executed::Ran {
        command,
        framework,
        outcome: Box::new(outcome),
        report: reporter.map(|r| r.file),
    }
}

/// What a check's process gave, as its result: status, counts from its output or report, why
/// it stopped. In steps: the isolation it had is kept; its counts are read (its output, then
/// JUnit reports over them) with its coverage; what ended it decides the status; a limit that
/// stopped it names itself in the error. Its failures are every one the output named (up to
/// the parser's bound), so that a probe's agree with them past the record's first 50; the
/// caller bounds them ([`Tests::bound`]) for the record.
fn conclude(
    env: &Env<'_>,
    spec: &Spec<'_>,
    executed: Executed,
    work: &rundir::RunDir,
    setup: Option<&setup::Setup>,
) -> CheckResult {
    let config = env.config;
    let dir = work.path();
    let mut warnings = Vec::new();
    let is_test = spec.name == TEST_CHECK;
    let key = if is_test {
        "[test]".to_string()
    } else {
        format!("[checks.{}]", spec.name)
    };
    let (command, framework, mut outcome, report) = match executed {
        Executed::Ran {
            command,
            framework,
            outcome,
            report,
        } => (command, framework, *outcome, report),
        Executed::Nothing => {
            return CheckResult {
                status: Status::Passed,
                tests: None,
                error: None,
                warnings,
                overlay_failed: false,
                coverage: None,
                contexts: None,
            }
        }
        Executed::Crashed => {
            return CheckResult::failed_checkout(format!(
                "the check `{}` crashed; run again",
                spec.name
            ))
        }
    };
    let overlay_failed = outcome
        .isolation
        .layers
        .iter()
        .any(|l| l.layer == "disk_limit" && l.status == gs_model::LayerStatus::Unavailable);
    let summary = outcome.isolation.summary();
    let _ = env
        .ctx
        .index
        .put_profile(&summary.profile, &outcome.isolation.layers);

    // Counts: the output's summary, unless JUnit reports say otherwise; and the coverage.
    let text = String::from_utf8_lossy(&outcome.output);
    let mut parsed = parse::parse_command_output(Some(&command), framework.as_ref(), &text);
    let found_coverage = read::coverage_report(&outcome, &dir, spec, &mut warnings);
    let contexts = (is_test && crate::app::run::testcov::recorded_by(&command))
        .then(|| crate::app::run::testcov::data_of(&outcome.artifacts, &dir))
        .flatten();
    if let Some(counts) = read::junit_counts(&outcome, &dir, spec, &mut warnings) {
        parsed = Some((Framework::Junit, counts));
    }
    match (parsed.as_mut(), &report) {
        (Some((Framework::Pytest, counts)), Some(file)) => {
            read::per_test_check(counts, &outcome, &dir, file, &mut warnings)
        }
        (None, Some(file)) => {
            parsed = read::per_test_only(&outcome, &dir, file, &mut warnings)
                .map(|c| (Framework::Pytest, c))
        }
        _ => {}
    }
    let framework = parsed.as_ref().map(|(f, _)| f.clone()).or(framework);
    let mut counts = parsed.map(|(_, c)| c).unwrap_or_default();
    warnings.extend(counts.note.take());

    // How it ended: a limit it ran into though it ended by itself counts as one that stopped it.
    if outcome.killed_by.is_none() && outcome.spawn_error.is_none() {
        outcome.killed_by = gs_runner::limit_hit::attribute(
            outcome.exit_code,
            outcome.signal,
            &outcome.output_tail,
            &config.limits,
        );
    }
    let ended = Ended {
        outcome: &outcome,
        command: &command,
        key: &key,
        text: &text,
        counts: &counts,
        sandbox: env.sandbox,
    };
    let (status, mut error) = ended.status(setup, work, config);
    let what = if is_test {
        ("the tests".to_string(), "were")
    } else {
        (format!("the check `{}`", spec.name), "was")
    };
    if let Some(stopped) = ended.stopped_by_limit(status, spec, config, what) {
        error = stopped;
    }

    let tests = Tests {
        status: Some(status),
        command,
        framework,
        exit_code: outcome.exit_code,
        passed: counts.passed,
        failed: counts.failed,
        skipped: counts.skipped,
        errors: counts.errors,
        total: counts.total,
        failures: counts.failures,
        ids: sorted(counts.ids),
        duration_ms: outcome.duration.as_millis() as u64,
        output_tail: outcome.output_tail,
        killed_by: outcome.killed_by,
        resources: outcome.resources,
        output_truncated: outcome.truncated,
        failures_omitted: 0,
        setup: setup.map(setup::Setup::record),
        isolation: Some(summary),
        limits: Some(outcome.limits.clone()),
        phases: Vec::new(),
        first_failure_ms: None,
        selection_missed: false,
        network: outcome.network.clone(),
        new_tests: None,
    };
    CheckResult {
        status,
        tests: Some(tests),
        error,
        warnings,
        overlay_failed,
        coverage: found_coverage,
        contexts,
    }
}

/// How a check's process ended, with what it printed and the counts read from it.
struct Ended<'a> {
    outcome: &'a process::Outcome,
    command: &'a str,
    /// The config table that describes the check (`[test]`, `[checks.lint]`).
    key: &'a str,
    text: &'a str,
    counts: &'a TestCounts,
    /// Asked why a program the shell did not find is not there inside.
    sandbox: &'a gs_sandbox::Sandbox,
}

impl Ended<'_> {
    /// The check's status, and the error that explains an `error`: it could not start; a limit
    /// stopped it; it failed without counts because the setup step or its runner is missing;
    /// it passed (exit 0, nothing failed); else it failed.
    fn status(
        &self,
        setup: Option<&setup::Setup>,
        work: &rundir::RunDir,
        config: &Config,
    ) -> (Status, Option<String>) {
        let o = self.outcome;
        if let Some(e) = &o.spawn_error {
            return (Status::Error, Some(e.clone()));
        }
        let status = match &o.killed_by {
            Some(KilledBy::Timeout | KilledBy::Cpu) => Status::Timeout,
            Some(_) => Status::Killed,
            None if o.exit_code != Some(0) && self.counts.total.is_none() => {
                let build = (self.key == "[test]")
                    .then_some(config.test.build.as_deref())
                    .flatten();
                if let Some(why) = build
                    .filter(|_| o.exit_code == Some(1))
                    .and_then(|b| setup::build_failed(Some(b), self.text))
                {
                    return (Status::Failed, Some(why));
                }
                let setup_failed = setup
                    .filter(|_| o.exit_code == Some(1))
                    .and_then(|s| s.failed_inline(self.text));
                let missing = setup_failed
                    .or_else(|| missing_runner(self.command, self.key, o.exit_code, self.text));
                if let Some(why) = missing {
                    let hint =
                        setup::not_found_hint(&work.host_tree(), self.command, self.text, config)
                            .or_else(|| {
                                let program = setup::not_found_program(self.text)?;
                                Some(format!("; {}", self.sandbox.why_unseen(program)?))
                            });
                    return (
                        Status::Error,
                        Some(format!("{why}{}", hint.unwrap_or_default())),
                    );
                }
                Status::Failed
            }
            None if o.exit_code == Some(0)
                && self.counts.failed.unwrap_or(0) == 0
                && self.counts.errors.unwrap_or(0) == 0 =>
            {
                Status::Passed
            }
            None => Status::Failed,
        };
        (status, None)
    }

    /// When a limit stopped the check, the error that names it and how to raise it (`None`
    /// inside: no message explains it), which takes the place of any other; `None` when no
    /// limit stopped it. `what` is "the tests" or "the check `lint`" and its verb.
    fn stopped_by_limit(
        &self,
        status: Status,
        spec: &Spec<'_>,
        config: &Config,
        (what, were): (String, &str),
    ) -> Option<Option<String>> {
        let killed = self.outcome.killed_by.as_ref();
        if killed == Some(&KilledBy::Cpu) {
            Some(Some(format!(
                "{what} used up the {} CPU seconds of [limits] cpu_seconds and {were} stopped; raise it if more is needed",
                config.limits.cpu_seconds
            )))
        } else if status == Status::Timeout {
            Some(Some(format!(
                "{what} ran past the {}s timeout and {were} stopped; raise {} timeout in .sandbox.toml if more time is needed",
                spec.timeout.as_secs_f64(),
                self.key
            )))
        } else {
            killed.map(|k| gs_runner::limit_hit::explain(k, &config.limits, &what, were))
        }
    }
}

/// Test ids as the record keeps them: sorted, each once.
fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests;
