//! The first failure of the tests, told once: the moment the output of a runner that is
//! watched shows it (with its name then, or as soon as the name follows), else when the phase
//! that showed it ends. It is only ever a provisional answer: the verdict is the whole suite's.

use super::CheckResult;
use gs_model::Status;
use gs_sandbox::first_fail::Found;
use std::cell::{Cell, RefCell};
use std::time::Instant;

pub(in crate::app::run) struct First<'a> {
    tell: &'a dyn Fn(&str, u64),
    started: Cell<Instant>,
    /// Milliseconds from the start of the tests to the moment a failure was known.
    at: Cell<Option<u64>>,
    name: RefCell<Option<String>>,
    told: Cell<bool>,
}

impl<'a> First<'a> {
    pub fn new(tell: &'a dyn Fn(&str, u64)) -> First<'a> {
        First {
            tell,
            started: Cell::new(Instant::now()),
            at: Cell::new(None),
            name: RefCell::new(None),
            told: Cell::new(false),
        }
    }

    /// The tests start now.
    pub fn start(&self) {
        self.started.set(Instant::now());
    }

    /// What a phase's output showed, read at `at`.
    pub fn seen(&self, f: Found, at: Instant) {
        let ms = |at: Instant| at.saturating_duration_since(self.started.get()).as_millis() as u64;
        let name = match f {
            Found::Failing(name) => {
                if self.at.get().is_none() {
                    self.at.set(Some(ms(at)));
                }
                name
            }
            Found::Named(name) => Some(name),
        };
        if let Some(n) = name {
            self.name.borrow_mut().get_or_insert(n);
        }
        self.tell_once();
    }

    /// A phase ended. Failed: its failure is known by now at the latest (`end_ms` from the
    /// start of the tests), named by the result when the output did not name it. Passed: a
    /// line that looked like a failure was none, and a failure of a later phase is told anew.
    pub fn phase_ended(&self, failed: bool, end_ms: u64, name: impl FnOnce() -> Option<String>) {
        if failed {
            if self.at.get().is_none() {
                self.at.set(Some(end_ms));
            }
            if self.name.borrow().is_none() {
                *self.name.borrow_mut() = name();
            }
            self.tell_once();
        } else {
            self.at.set(None);
            *self.name.borrow_mut() = None;
            self.told.set(false);
        }
    }

    /// The failure the output showed, and when: once both are known.
    pub fn known(&self) -> Option<(String, u64)> {
        Some((self.name.borrow().clone()?, self.at.get()?))
    }

    /// When the first failure was known, once a phase has ended failing.
    pub fn ms(&self) -> Option<u64> {
        self.at.get()
    }

    fn tell_once(&self) {
        if self.told.get() {
            return;
        }
        let (Some(ms), Some(name)) = (self.at.get(), self.name.borrow().clone()) else {
            return;
        };
        self.told.set(true);
        (self.tell)(&name, ms);
    }
}

/// A one-phase run's first failure: known when its output showed it (a runner that is
/// watched), else when the suite ends.
pub(super) fn one_phase_failure(first: &First<'_>, r: &mut CheckResult) {
    let failed = r.status == Status::Failed;
    let Some(t) = r.tests.as_mut() else {
        return;
    };
    // Nothing is told when no test is named (output nobody parses): the ✘ line follows.
    first.phase_ended(failed, t.duration_ms, || {
        t.failures.first().map(|f| f.name.clone())
    });
    if failed {
        t.first_failure_ms = first.ms();
    }
}

/// Whether the tests' own prints stream beside the runner's lines (pytest with capture off),
/// so that a line of the output may be a test's and not the runner's: its output is not
/// watched, and a failure is known when its phase ends.
pub(super) fn printed_beside(
    runner: gs_sandbox::first_fail::Runner,
    command: &str,
    texts: &super::tree_text::TreeText,
) -> bool {
    runner == gs_sandbox::first_fail::Runner::Pytest
        && gs_runner::pytest_capture::capture_off(command, &|p| texts.get(p))
}
