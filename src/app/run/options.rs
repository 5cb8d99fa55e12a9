//! What a caller of [`run_commits`](super::run_commits) asks for (options) and gets back
//! (progress as each commit goes, the outcome at the end).

use gs_config::ConfigFile;
use gs_git::ObjectId;
use gs_model::{RunRecord, Trigger};
use std::sync::atomic::AtomicBool;

/// Told a commit's first failing test: (commit, test, milliseconds from the start of the tests).
pub type FirstFailure = dyn Fn(&str, &str, u64) + Sync;

#[derive(Clone)]
pub struct RunOptions<'a> {
    pub force: bool,
    pub trigger: Trigger,
    /// The branch the commits were named through, e.g. `refs/heads/experiment/x`.
    pub refname: Option<String>,
    /// Settings from flags, laid over everything else. Any flag makes the run a trial.
    pub flags: ConfigFile,
    pub interrupt: &'a AtomicBool,
    /// Stop after the first commit whose tests had to run (not served from a result), leaving
    /// the rest undone (`Outcome::records` is then shorter than the commits): a daemon's worker
    /// hands the rest of its batch back to the queue, for idle workers to take.
    pub yield_after_run: bool,
    /// Skip a commit whose branch (`refname`) moved past it, when its config says
    /// `[watch] mode = "latest"` (the daemon's jobs; never a run asked for by name).
    pub skip_superseded: bool,
    /// The commits are snapshots of work not committed (`run --staged`, `--worktree`): objects
    /// no ref points at, whose results go to the index only (found again by their tree when
    /// that tree is committed), never to a note or GitHub.
    pub unnoted: bool,
    /// Run a failing commit again, up to this many times, while every test that failed is
    /// known to be flaky (it both passed and failed on one tree before) or quarantined:
    /// `run --retry-flaky N`. `None`: the commit's config says (`[test] retries`, else none).
    pub retry_flaky: Option<u32>,
    /// The commits are probes (bisect): old commits run to judge them, which never write their
    /// branch's build cache.
    pub probe: bool,
    /// Run with no build-cache layer at all (`run --clean`).
    pub clean: bool,
    /// Told the first failing test of a commit (commit, test, milliseconds from the start of
    /// the tests) as soon as it is known, before the rest of the suite has run.
    pub on_first_failure: Option<&'a FirstFailure>,
}

impl<'a> RunOptions<'a> {
    /// Options for commits named by `trigger` through `refname`: their own config, their own
    /// results kept, nothing skipped or retried.
    pub fn new(trigger: Trigger, refname: Option<String>, interrupt: &'a AtomicBool) -> Self {
        RunOptions {
            force: false,
            trigger,
            refname,
            flags: ConfigFile::default(),
            interrupt,
            yield_after_run: false,
            skip_superseded: false,
            unnoted: false,
            retry_flaky: None,
            probe: false,
            clean: false,
            on_first_failure: None,
        }
    }

    /// A run with flags (`--command`, `--timeout`) is a trial: its config is not the commit's
    /// own, so its result is printed but never recorded as the commit's.
    pub fn is_trial(&self) -> bool {
        self.flags != ConfigFile::default()
    }
}

/// What happened to one commit, for progress display.
pub enum Progress<'r> {
    Started {
        index: usize,
        commit: ObjectId,
    },
    /// Sent once the record is written (a result is never shown before it is recorded), or at
    /// once for a trial, which is never recorded.
    Finished {
        index: usize,
        record: &'r RunRecord,
        reused: bool,
    },
}

pub struct Outcome {
    pub records: Vec<RunRecord>,
    /// The run was stopped by Ctrl-C before every commit was done.
    pub interrupted: bool,
    /// Notes that held no readable record for their commit (they were run again).
    pub invalid_notes: Vec<(ObjectId, String)>,
    /// Notes a concurrent writer dropped after they were written, written again.
    pub restored: usize,
    /// How many commits' tests ran (the others' results were there already, or were served
    /// from their tree's).
    pub ran: usize,
    /// Runs that could not run their tests here, kept as attempts beside the result of the
    /// same tree and config that their commits keep (`error` says why).
    pub attempts: Vec<RunRecord>,
}
