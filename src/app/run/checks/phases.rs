//! The tests a change reaches, run as a probe beside the recorded run.
//!
//! The record is always the user's command, unchanged, running the suite in its own order: a
//! selection never changes a verdict. Beside it, when a slot is free (see [`super::super::slots`]),
//! a probe runs only the test files (pytest, jest, vitest, mocha), crates (cargo test) or
//! packages (go test) the change can reach and those that failed last, in a sandbox and cgroup
//! of its own.
//! Whichever output shows a failure first tells it, once, as a provisional hint; the record
//! keeps the probe's failure (its moment, its phase counts) only when that test failed in the
//! recorded run too. The probe stops when the run ends (a failed run's lets it end by itself for
//! a moment: see [`grace`]), and yields its slot to a run that needs it.

use super::first::First;
use super::tree_text::TreeText;
use super::{conclude, execute, CheckResult, Env, Executed, Shared, Spec};
use crate::app::run::slots::ProbeSlot;
use gs_analysis::jsgraph::Runner;
use gs_model::{Status, TestPhase, Tests};
use gs_runner::{cargo_cmd, detect, go_cmd, js_cmd, pytest_cmd, rundir};
use gs_sandbox::first_fail::{self, Found};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where the tests run and what each run passes on.
pub(super) struct Place<'a> {
    pub env: &'a Env<'a>,
    pub shared: &'a Shared<'a>,
    pub work: &'a rundir::RunDir,
    pub setup: Option<&'a super::setup::Setup>,
    pub keep: bool,
}

/// The probe a run may have: phase one's parts and the command that runs only them.
pub(super) struct Probe {
    files: Vec<String>,
    command: String,
    runner: first_fail::Runner,
    /// The single tests it runs before the rest (pytest node ids of its files).
    first: Vec<String>,
}

impl Probe {
    /// The probe of `spec`'s tests, when its command is a pytest, jest, vitest, mocha, cargo test
    /// or go test invocation and `phase_one` holds parts of the suite it runs; `None`: no probe.
    pub fn plan(place: &Place<'_>, spec: &Spec<'_>, phase_one: &[String]) -> Option<Probe> {
        let work = place.work;
        let command = match spec.command {
            Some(c) => c.to_string(),
            None => detect::detect(&work.host_tree())?.0,
        };
        let split = Split::of(&command, work)?;
        let files: Vec<String> = phase_one
            .iter()
            .filter(|f| split.within(f))
            .cloned()
            .collect();
        if files.is_empty() {
            return None;
        }
        // Only pytest orders single tests (its plugin does), and only those of its files.
        let first = match &split {
            Split::Pytest(_) => place
                .env
                .probe_first
                .iter()
                .filter(|id| {
                    let file = id.split_once("::").map_or(id.as_str(), |(f, _)| f);
                    files.iter().any(|p| p == *id || p == file)
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        Some(Probe {
            command: split.only(&files),
            runner: split.runner(),
            files,
            first,
        })
    }
}

/// Which of the two a line of output came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Run,
    Probe,
}

/// Run the tests of `spec` as they are, with `probe` beside them when a slot is free; the
/// record is the run's, with the probe's phase counts and first failure where the run agrees.
pub(super) fn run(place: &Place<'_>, spec: &Spec<'_>, probe: Probe) -> CheckResult {
    let env = place.env;
    let slot = ProbeSlot::try_take();
    let quiet = |_: &str, _: u64| {};
    let (run_first, probe_first) = (First::new(&quiet), First::new(&quiet));
    let stop = AtomicBool::new(false);
    let probe_spec = Spec {
        command: Some(&probe.command),
        log: spec.log.with_extension("probe.log"),
        runner: Some(probe.runner),
        probe: true,
        first: &probe.first,
        junit: Vec::new(),
        coverage: Vec::new(),
        ..spec.clone()
    };
    let probe_shared = Shared {
        interrupt: &stop,
        ..*place.shared
    };
    // The name told, once it is.
    let mut told: Option<String> = None;
    let tell = |told: &mut Option<String>, run: &First<'_>, probe: &First<'_>| {
        if told.is_some() {
            return;
        }
        // The earlier of the two moments known; the run's when it is as early.
        let known = [run.known(), probe.known()]
            .into_iter()
            .flatten()
            .min_by_key(|(_, ms)| *ms);
        if let Some((name, ms)) = known {
            (env.on_first_failure)(&name, ms);
            *told = Some(name);
        }
    };
    // Only what a thread may share goes to the two threads (not the index in `env`).
    let (shared, work, setup, keep) = (place.shared, place.work, place.setup, place.keep);
    let (ran, probed, probe_ms) = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(Side, Found, Instant)>();
        let run_tx = tx.clone();
        let main = s.spawn(move || {
            let watch = move |f, at| {
                let _ = run_tx.send((Side::Run, f, at));
            };
            execute(shared, spec, work, setup, keep, Some(&watch))
        });
        let started = Instant::now();
        let probing = slot.as_ref().map(|_| {
            let (probe_tx, probe_shared, probe_spec) = (tx.clone(), &probe_shared, &probe_spec);
            s.spawn(move || {
                let watch = move |f, at| {
                    let _ = probe_tx.send((Side::Probe, f, at));
                };
                let e = execute(probe_shared, probe_spec, work, setup, false, Some(&watch));
                (e, started.elapsed().as_millis() as u64)
            })
        });
        drop(tx);
        let mut main = Some(main);
        let mut ran = None;
        // Until when the probe may still run: set as the run ends.
        let mut until: Option<Instant> = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((side, found, at)) => {
                    match side {
                        Side::Run => run_first.seen(found, at),
                        Side::Probe => probe_first.seen(found, at),
                    }
                    tell(&mut told, &run_first, &probe_first);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Some(done) = main.take_if(|h| h.is_finished()) {
                let done = done.join().unwrap_or(Executed::Crashed);
                until = Some(Instant::now() + grace(&done));
                ran = Some(done);
            }
            // The probe ends with the run (or its grace), on Ctrl-C, and when a run takes its
            // slot back.
            let yielded = slot
                .as_ref()
                .is_some_and(|s| s.yielded.load(Ordering::Relaxed));
            if until.is_some_and(|u| Instant::now() >= u)
                || yielded
                || shared.interrupt.load(Ordering::Relaxed)
            {
                stop.store(true, Ordering::Relaxed);
            }
        }
        let ran = match (ran, main) {
            (Some(r), _) => r,
            (None, Some(h)) => h.join().unwrap_or(Executed::Crashed),
            (None, None) => Executed::Crashed,
        };
        let (probed, ms) = match probing.map(|h| h.join()) {
            Some(Ok((e, ms))) => (Some(e), ms),
            _ => (None, 0),
        };
        (ran, probed, ms)
    });
    drop(slot);
    let mut r = conclude(env, spec, ran, place.work, place.setup);
    let probed = probed.map(|e| conclude(env, &probe_spec, e, place.work, place.setup));
    let failed = r.status != Status::Passed;
    let Some(t) = r.tests.as_mut() else {
        return r;
    };
    let failing: HashSet<&str> = t.failures.iter().map(|f| f.name.as_str()).collect();
    // A failure the output named that the run's results do not hold is no failure of the run.
    let agreed = |f: &First<'_>| {
        f.known()
            .filter(|(name, _)| failing.contains(name.as_str()))
    };
    let hint = [agreed(&run_first), agreed(&probe_first)]
        .into_iter()
        .flatten()
        .min_by_key(|(_, ms)| *ms);
    let first_failure_ms = match hint {
        Some((_, ms)) if failed => Some(ms),
        _ if failed => Some(t.duration_ms),
        _ => None,
    };
    // (A run with more failures than it lists may hold it among those it only counts.)
    let unlisted =
        failed && t.failed.unwrap_or(0) + t.errors.unwrap_or(0) > t.failures.len() as u64;
    if let Some(name) = told
        .as_deref()
        .filter(|n| !failing.contains(n) && !unlisted)
    {
        (env.on_first_failure_withdrawn)(name);
    }
    // Told only when a test is named: a run whose output nobody parses has its ✘ line.
    let named = hint
        .map(|(n, _)| n)
        .or_else(|| t.failures.first().map(|f| f.name.clone()));
    if let Some(name) = named.filter(|_| failed && told.is_none()) {
        (env.on_first_failure)(&name, first_failure_ms.unwrap_or(t.duration_ms));
    }
    t.first_failure_ms = first_failure_ms;
    // A probe stopped before it ended, having found nothing the run confirms, says nothing.
    if let Some(p) = probed.as_ref().and_then(|p| p.tests.as_ref()) {
        let (phases, caught) = phases_of(t, p, probe.files, probe_ms);
        let ended = p.killed_by.is_none();
        // A run that names no failure (its suite stopped as it loaded) was caught when the
        // probe failed too.
        let held = if t.failures.is_empty() && !unlisted {
            p.exit_code.is_some_and(|c| c != 0)
        } else {
            caught > 0
        };
        if ended || caught > 0 {
            t.phases = phases;
            t.selection_missed = failed && ended && !held;
        }
    }
    r
}

/// The longest a probe may run on once a failed run has ended: as long as the run took, up to
/// this.
const GRACE: Duration = Duration::from_secs(1);

/// How long the probe may run on after the run `ran` ended: a run that failed before the probe
/// could end lets it end on its own for as long again as the run took, up to [`GRACE`], so
/// that phase one says whether it would have caught it (a suite that crashes as it loads ends
/// the run at once; phase one's files, which may not load the file that crashed it, still fail
/// a moment later); a stopped probe says nothing. Otherwise none: the probe only ever
/// makes a failure known early, and a passed run has none to know.
fn grace(ran: &Executed) -> Duration {
    match ran {
        Executed::Ran { outcome, .. }
            if outcome.exit_code != Some(0) && outcome.killed_by.is_none() =>
        {
            outcome.duration.min(GRACE)
        }
        _ => Duration::ZERO,
    }
}

/// The two phases, their failures as the run's results give them: phase one, the tests the
/// probe ran (where the runner names each test, which of them the run ran and failed; else the
/// run's failures the probe found too, beside how many tests the probe ran), and phase two,
/// the rest of the run; and how many of the run's failures the probe found.
fn phases_of(t: &Tests, p: &Tests, files: Vec<String>, probe_ms: u64) -> (Vec<TestPhase>, u64) {
    let probe_failed: HashSet<&str> = p.failures.iter().map(|f| f.name.as_str()).collect();
    let caught = t
        .failures
        .iter()
        .filter(|f| probe_failed.contains(f.name.as_str()))
        .count() as u64;
    // Over every failure the run's output or report named (up to 1,000; 10,000 by pytest's
    // report), not only the 50 its record
    // lists: recall by test is phase one's count over the run's.
    let (total, failed, passed) = if !t.ids.is_empty() && !p.ids.is_empty() {
        let ran: HashSet<&str> = p.ids.iter().map(String::as_str).collect();
        let total = t.ids.iter().filter(|id| ran.contains(id.as_str())).count() as u64;
        let failed = t
            .failures
            .iter()
            .filter(|f| ran.contains(f.name.as_str()))
            .count() as u64;
        (Some(total), failed, Some(total.saturating_sub(failed)))
    } else {
        let passed = p
            .total
            .map(|n| n.saturating_sub(caught + p.skipped.unwrap_or(0)));
        (p.total, caught, passed)
    };
    let less = |all: Option<u64>, part: Option<u64>| Some(all?.saturating_sub(part.unwrap_or(0)));
    let one = TestPhase {
        files,
        command: p.command.clone(),
        exit_code: p.exit_code,
        passed,
        failed: Some(failed),
        errors: None,
        total,
        duration_ms: probe_ms,
    };
    let run_failed = t.failed.unwrap_or(0) + t.errors.unwrap_or(0);
    let two = TestPhase {
        files: Vec::new(),
        command: t.command.clone(),
        exit_code: t.exit_code,
        passed: less(t.passed, passed),
        failed: Some(run_failed.saturating_sub(failed)),
        errors: None,
        total: less(t.total, total),
        duration_ms: t.duration_ms,
    };
    (vec![one, two], caught)
}

/// The most files of a checkout listed for mocha's discovery.
const MAX_TREE_FILES: usize = 200_000;

/// How a runner's command is narrowed to phase one: pytest's, jest's, vitest's and mocha's files,
/// cargo test's crates, go test's packages.
pub(super) enum Split {
    Pytest(pytest_cmd::Pytest),
    Js(js_cmd::JsCmd),
    Cargo(cargo_cmd::CargoTest),
    Go(go_cmd::GoTest),
}

impl Split {
    pub(super) fn of(command: &str, work: &rundir::RunDir) -> Option<Split> {
        if let Some(p) = pytest_cmd::recognise(command) {
            return Some(Split::Pytest(p));
        }
        if let Some(c) = cargo_cmd::recognise(command) {
            return Some(Split::Cargo(c));
        }
        if let Some(g) = go_cmd::recognise(command) {
            return Some(Split::Go(g));
        }
        let texts = TreeText::of(work);
        let text_of = |p: &str| texts.get(p);
        // Only a package manager's `test` reads the script.
        let script = js_cmd::runs_script(command)
            .then(|| text_of("package.json"))
            .flatten()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|j| Some(j.pointer("/scripts/test")?.as_str()?.to_string()));
        // The checkout's files, asked only where mocha's config gives its spec (phase one
        // then leaves out the test files it does not run).
        let files = || js_cmd::tree_files(&work.host_tree(), MAX_TREE_FILES).unwrap_or_default();
        js_cmd::recognise(command, script.as_deref())
            .and_then(|c| c.in_tree(&text_of, &files))
            .ok()
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
            Split::Go(g) => g.matches(part),
            Split::Js(_) | Split::Cargo(_) => true,
        }
    }

    /// Whose output the probe's is.
    fn runner(&self) -> first_fail::Runner {
        match self {
            Split::Pytest(_) => first_fail::Runner::Pytest,
            Split::Js(j) => match j.runner {
                Runner::Jest => first_fail::Runner::Jest,
                Runner::Vitest => first_fail::Runner::Vitest,
                Runner::Mocha => first_fail::Runner::Mocha,
            },
            Split::Cargo(_) => first_fail::Runner::Cargo,
            Split::Go(..) => first_fail::Runner::Go,
        }
    }

    /// The command for the tests `names` alone (as the run's failures name them): a retry of
    /// the tests that failed (see `alone`). `None` where the runner cannot name them so
    /// (vitest, mocha) or a name is not one of its test names.
    pub(super) fn alone(&self, names: &[String]) -> Option<String> {
        match self {
            Split::Pytest(p) => p.alone(names),
            Split::Js(j) => j.alone(names),
            Split::Cargo(c) => c.alone(names),
            Split::Go(g) => g.alone(names),
        }
    }

    fn only(&self, parts: &[String]) -> String {
        match self {
            Split::Pytest(p) => p.only(parts),
            Split::Js(j) => j.only(parts),
            Split::Cargo(c) => c.only(parts),
            Split::Go(g) => g.only(parts),
        }
    }
}
