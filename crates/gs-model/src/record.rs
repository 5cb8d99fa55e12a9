//! The run record: the JSON body of a `refs/notes/sandbox` note, schema `git-sandbox/run/v1`.
//!
//! These types are the contract with scripts: `git notes show`, `--json` output and the index all
//! come from them. Adding a field is fine; changing the meaning of one needs a new schema version.

use crate::{AppliedLimits, ChangeStatus, Framework, IsolationSummary, KilledBy, NetworkUse};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const RUN_SCHEMA: &str = "git-sandbox/run/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Error,
    Timeout,
    Killed,
    /// Not run: with `[watch] mode = "latest"`, its branch had moved past it before its run
    /// started (`superseded_by` names the commit). No result: `run` runs it.
    Skipped,
    /// A status this build does not know (written by a newer git-sandbox): never a pass.
    #[serde(other)]
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Killed => "killed",
            Status::Skipped => "skipped",
            Status::Unknown => "unknown",
        }
    }

    pub fn is_success(self) -> bool {
        self == Status::Passed
    }

    /// Whether a record of this status says how the tree fared (it may be reused and judged):
    /// not an `error`, not `skipped`, not a status this build does not know.
    pub fn is_result(self) -> bool {
        !matches!(self, Status::Error | Status::Skipped | Status::Unknown)
    }

    /// How bad a status is, for the worst of several: passed < skipped < failed < timeout <
    /// killed < error < unknown.
    pub fn severity(self) -> u8 {
        match self {
            Status::Passed => 0,
            Status::Skipped => 1,
            Status::Failed => 2,
            Status::Timeout => 3,
            Status::Killed => 4,
            Status::Error => 5,
            Status::Unknown => 6,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Hook,
    Watch,
    Webhook,
    Manual,
    /// Queued by `[watch] backfill` when a repository was adopted.
    Backfill,
    /// Found on the remote by `[remote] poll`.
    Poll,
    /// Asked for by an agent through `git sandbox mcp` (`run_request`).
    Mcp,
    /// Asked for through the HTTP API (`daemon --http`: a run, an evaluation, a promotion, the
    /// dashboard's promote button).
    Api,
    /// A trigger this build does not know (written by a newer git-sandbox).
    #[serde(other)]
    Other,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Hook => "hook",
            Trigger::Watch => "watch",
            Trigger::Webhook => "webhook",
            Trigger::Manual => "manual",
            Trigger::Backfill => "backfill",
            Trigger::Poll => "poll",
            Trigger::Mcp => "mcp",
            Trigger::Api => "api",
            Trigger::Other => "other",
        }
    }

    /// The trigger a queue entry names (`hook`, `poll`, …); an unknown one is `Other`.
    pub fn parse(s: &str) -> Trigger {
        [
            Trigger::Hook,
            Trigger::Watch,
            Trigger::Webhook,
            Trigger::Manual,
            Trigger::Backfill,
            Trigger::Poll,
            Trigger::Mcp,
            Trigger::Api,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
        .unwrap_or(Trigger::Other)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub commit: String,
    pub tree: String,
    pub parents: Vec<String>,
    #[serde(rename = "ref")]
    pub refname: Option<String>,
    pub experiment: Option<String>,
    pub trigger: Trigger,
    pub status: Status,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    pub cached_from: Option<String>,
    /// Why the run could not produce a result (`status: error`), e.g. a broken `.sandbox.toml`,
    /// or why it was not run (`status: skipped`), e.g. an experiment out of budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Identifies the effective configuration the result was produced under (tree + config = cache key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The tools its commands ran, as the machine that made it had them (program word →
    /// executable, size and mtime, and the toolchain a manager's shim selected).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toolchain: BTreeMap<String, String>,
    /// The image the run's root was (`[environment] image`): `None`, the host's own root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// For `status: skipped`: the commit its branch had moved to when its run was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The build-cache generations the run read, topmost first (`experiment/x@4`, `main@7`):
    /// which layers the result was made on. Empty: none (`run --clean`, caches off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_generations: Vec<String>,
    /// Retries of a run that failed only in tests known to be flaky (or quarantined): the
    /// command run again, or (`alone`) only the failing tests (`run --retry-flaky N`,
    /// `[test] retries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried: Option<Retried>,
    /// The `test` check: the tests' command, counts and output.
    pub tests: Option<Tests>,
    /// The other named checks (`[checks.NAME]`), in the order the config declares them, keyed
    /// by name. The run's `status` is the worst of the required ones and the tests'.
    #[serde(default, skip_serializing_if = "Checks::is_empty")]
    pub checks: Checks,
    /// Line coverage, from the report a check wrote (`[test] coverage`, or found where the
    /// usual tools write one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    pub analysis: Option<Analysis>,
    pub changes: Option<Changes>,
    /// Things the run skipped or could not do, one line each (e.g. a report that was a symlink).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// A run of work not committed (`run --staged`, `--worktree`): a commit no ref points at,
    /// whose result lives in the index alone and is never a note (nor written again as one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot: bool,
    /// The data dir (home id) that says it made this record. A claim, covered by the record's
    /// signature but copyable like any text: [`RunRecord::verified`] says who vouches for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Who vouches for the record, as this machine judged its signature when it read it:
    /// never taken from a note (the reader sets it), absent when nobody it trusts signed it.
    /// Only a verified record is evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verified>,
}

/// The image a run's root was: as the commit named it, the digest it resolved to (which is part
/// of the result key), and the platform of the manifest used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    pub image: String,
    pub digest: String,
    pub platform: String,
    /// The image's `USER`: recorded, never honoured (a run is the sandbox's own unprivileged
    /// uid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The layers built here from the commit's Dockerfile (their `diff_id`s, bottom first),
    /// over its `FROM` image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// The registry could not be reached: the digest the tag resolved to last was used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
}

/// A signature this machine checked and trusts: whose key made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// `this machine`, the principal of the user's `allowed_signers` entry, or the home id a
    /// daemon sharing the index registered the key as.
    pub signer: String,
    /// The key's SHA-256 fingerprint, as `ssh-keygen -l` prints it.
    pub key: String,
    /// Made with this machine's own key.
    #[serde(default)]
    pub here: bool,
}

impl RunRecord {
    /// Whether the record is evidence: signed by this machine or by a signer it trusts. Any
    /// other record is somebody's report, shown as such and used for nothing.
    pub fn is_evidence(&self) -> bool {
        self.verified.is_some()
    }

    /// Whether the run was *cold*: it read no build-cache generation and no setup layer an
    /// earlier run built (`run --clean`, caches off, a setup built for it). Only a cold record
    /// witnesses a verdict that decides (`eval`, `promote`, `propose`): what an earlier run
    /// left in a cache can change what a warm one's tests do.
    pub fn is_cold(&self) -> bool {
        let reused = |t: &Tests| t.setup.as_ref().is_some_and(|s| s.how == "reused");
        self.cache_generations.is_empty()
            && !self.tests.as_ref().is_some_and(reused)
            && !self.checks.iter().any(|(_, c)| reused(&c.run))
    }

    /// A pass that tested nothing: no tests ran (none configured or detected), or the runner
    /// ran none (`total: 0`). Its `status` stays `passed` (older readers, signatures), but it is
    /// shown as `no tests` and never meets `eval`'s tests criterion.
    pub fn no_tests(&self) -> bool {
        self.status == Status::Passed && self.tests.as_ref().is_none_or(|t| t.total == Some(0))
    }

    /// Who reported a record that is not evidence, for "reported by …, not verified".
    pub fn reporter(&self) -> &str {
        self.by.as_deref().unwrap_or("an unknown machine")
    }

    /// Whether the failure list names every test that failed (so a test it does not name
    /// passed): a passing run, or a parsed failing one, not cut short, that lists as many
    /// failures as it counts.
    pub fn failures_complete(&self) -> bool {
        let Some(t) = &self.tests else { return false };
        match self.suite_status() {
            Status::Passed => t.failures.is_empty(),
            Status::Failed => {
                let counted = t.failed.map(|f| f + t.errors.unwrap_or(0));
                t.killed_by.is_none()
                    && t.failures_omitted == 0
                    && !t.failures.is_empty()
                    && counted == Some(t.failures.len() as u64)
            }
            _ => false,
        }
    }

    /// The tests that failed on a failing run, when every one is in `known` (known to be
    /// flaky) and nothing else failed: no required check, no timeout, no failure left unnamed.
    pub fn failed_only_in(&self, known: &std::collections::HashSet<String>) -> Option<Vec<String>> {
        let t = self.tests.as_ref()?;
        let checks_pass = self
            .checks
            .iter()
            .all(|(_, c)| !c.required || c.status() == Status::Passed);
        (self.suite_status() == Status::Failed
            && checks_pass
            && self.failures_complete()
            && t.failures
                .iter()
                .all(|f| known.contains(&super::test_name::canonical(&f.name))))
        .then(|| {
            t.failures
                .iter()
                .map(|f| super::test_name::canonical(&f.name))
                .collect()
        })
    }
}

impl RunRecord {
    /// Whether the run passed only because each test that failed in the suite, flaky in
    /// full-suite runs before, passed when run again alone on the same tree.
    pub fn excused_alone(&self) -> bool {
        self.status == Status::Passed && self.retried.as_ref().is_some_and(|r| r.alone)
    }

    /// How the run's own commands ended: a pass excused by lone retries is the suite's
    /// failure. What the index keeps as evidence of the tree (flips, passes on a tree, clean
    /// runs): a test run alone says nothing of the suite.
    pub fn suite_status(&self) -> Status {
        if self.excused_alone() {
            Status::Failed
        } else {
            self.status
        }
    }

    /// Whether `test` (in its one form) passed a retry run alone in this run.
    pub fn passed_alone(&self, test: &str) -> bool {
        self.retried.as_ref().is_some_and(|r| {
            r.alone
                && r.tests
                    .iter()
                    .any(|t| t.test == test && t.outcomes.iter().any(|o| o == "passed"))
        })
    }
}

/// How often a commit was run again because only known-flaky tests failed, and which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retried {
    pub attempts: u32,
    /// The retries ran the failing tests alone (by pytest node id or cargo test name), each in
    /// a fresh sandbox over the same tree and cache layers, not the whole command: the run's
    /// `tests` stay the suite's, and only a test flaky in full-suite runs is retried so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub alone: bool,
    /// The known-flaky (or quarantined) tests whose failures were retried.
    pub flaky: Vec<String>,
    /// Each of those tests' outcomes, run after run: the failing run's first, then each retry's
    /// (`passed`, `failed`, `unknown` when a run named no outcome for it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<TestOutcomes>,
}

/// One named check of a run: whether it counts, and what it ran and how it ended (the same
/// fields as `tests`, `status` among them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRun {
    /// Whether its status counts towards the run's.
    pub required: bool,
    /// Why it could not give a result (`status: error`), or what stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten)]
    pub run: Tests,
}

/// The named checks of a run by name, in the order they were declared (a JSON object whose keys
/// keep that order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks(pub Vec<(String, CheckRun)>);

impl CheckRun {
    pub fn status(&self) -> Status {
        self.run.status.unwrap_or(Status::Unknown)
    }
}

impl Checks {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &CheckRun)> {
        self.0.iter().map(|(n, c)| (n.as_str(), c))
    }

    pub fn get(&self, name: &str) -> Option<&CheckRun> {
        self.iter().find(|(n, _)| *n == name).map(|(_, c)| c)
    }
}

impl Serialize for Checks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, check) in &self.0 {
            map.serialize_entry(name, check)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Checks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Checks;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of checks by name")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Checks, A::Error> {
                let mut out = Vec::new();
                while let Some((name, check)) = map.next_entry::<String, CheckRun>()? {
                    out.push((name, check));
                }
                Ok(Checks(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Coverage as a check's report gave it: statements (lines), branches, and the overall figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// The check that wrote the report (`test` for the tests), and where, in the checkout.
    pub check: String,
    pub report: String,
    /// `coverage.py`, `cobertura` or `lcov`.
    pub format: String,
    pub lines_covered: u64,
    pub lines_total: u64,
    /// Branches, when the report measured them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches_covered: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches_total: Option<u64>,
    /// The overall figure the tool itself prints, two decimals: coverage.py's TOTAL (statements
    /// and branches together when it measured branches), else covered lines in percent of the
    /// lines (Cobertura's `line-rate`, lcov's `lines`).
    pub percent: f64,
    /// The files the commit changed that the report covers (at most [`MAX_CHANGED_FILES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_files: Vec<FileCoverage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileCoverage {
    pub path: String,
    pub lines_covered: u64,
    pub lines_total: u64,
    pub percent: f64,
}

/// `covered` in percent of `total`, two decimals (0 of 0 is 0).
pub fn percent(covered: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (covered as f64 * 10_000.0 / total as f64).round() / 100.0
}

/// A percentage as records keep it: two decimals.
pub fn percent_of(p: f64) -> f64 {
    (p * 100.0).round() / 100.0
}

/// Counts parsed from a test run. All `None` when nobody could parse the output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCounts {
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    pub errors: Option<u64>,
    pub total: Option<u64>,
    pub failures: Vec<Failure>,
    /// The id of every test that ran, each once, when the runner named every test it counted
    /// (pytest's per-test lines or git-sandbox's report, cargo's `test … ok` lines, JUnit
    /// test cases); else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// What the parser saw and did not take: a summary its per-test results disagree with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub name: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_ms: u64,
    pub max_rss_kb: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tests {
    /// How this check alone ended (the run's `status` is the worst of its required checks).
    /// Absent in records made before named checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub command: String,
    pub framework: Option<Framework>,
    pub exit_code: Option<i32>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    pub errors: Option<u64>,
    pub total: Option<u64>,
    pub failures: Vec<Failure>,
    pub duration_ms: u64,
    pub output_tail: String,
    /// What ended the run early; `None` when it ended by itself.
    pub killed_by: Option<KilledBy>,
    pub resources: Resources,
    #[serde(default)]
    pub output_truncated: bool,
    /// Failures past the first [`MAX_FAILURES`] are counted here, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures_omitted: u64,
    /// What the sandbox enforced for this run: a summary (the full layer table of the profile is
    /// in the index and in `git sandbox doctor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationSummary>,
    /// The limits the run actually had, read back from the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<AppliedLimits>,
    /// The setup step (`[test] setup`) the tests ran after, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupRun>,
    /// A run with a probe beside it: phase one, the tests the change can reach, which the probe
    /// ran alone; phase two, the rest of the run. The counts and failures above are the run's,
    /// the user's command in its own order; each phase's counts are the run's results for its
    /// tests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<TestPhase>,
    /// From the start of the tests to the moment the first failure the run's results confirm was
    /// known (by the run's output or the probe's); `None` when nothing failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure_ms: Option<u64>,
    /// The run failed, and its probe ran to its end without finding any of its failures (where
    /// the run names none, its suite stopping as it loaded, without failing itself): the
    /// selection missed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub selection_missed: bool,
    /// What a run with the network reached through git-sandbox's proxy, and what it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkUse>,
    /// The id of every test that ran, sorted, when the runner named each test it counted and
    /// there are at most [`MAX_TEST_IDS`]; else empty. `eval` compares them: a test production
    /// runs and the experiment does not is removed, never an improvement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// The tests new to this commit (absent from its parent's run), run again after the suite to
    /// catch a flaky one at birth (`[test] new_test_runs`). Only marks: the status is the first,
    /// in-order run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tests: Option<NewTests>,
}

/// Tests new to a commit, each run `runs` times in its run (the first in the suite's order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTests {
    /// How often each ran, the suite's own run included.
    pub runs: u32,
    /// How many new tests ran again.
    pub tested: u64,
    /// New tests past the most that run again, left at their one run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
    /// The new tests whose outcomes differed: flaky at birth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<TestOutcomes>,
    /// Why the extra runs gave no answer (a run that did not end by itself), when they did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One test's outcomes over several runs, in order: `passed`, `failed`, `not run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutcomes {
    pub test: String,
    pub outcomes: Vec<String>,
}

/// One phase of a run with a probe: phase one (the probe's tests), or phase two (the rest).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestPhase {
    /// The test files (crates, packages) phase one ran; empty for phase two, the rest of the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The command it ran.
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub errors: Option<u64>,
    pub total: Option<u64>,
    pub duration_ms: u64,
}

/// A setup step and where the tests' dependencies came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupRun {
    pub command: String,
    /// What it was keyed by: the command, whether it had the network, and the blob ids of the
    /// tree's lockfiles and manifests.
    pub key: String,
    /// `built` (it ran for this run, its output kept), `reused` (a layer an earlier run of this
    /// branch or of production built for the same key), or `inline` (no kept checkout here: it
    /// ran in the same sandbox just before the tests, with their network policy).
    pub how: String,
    /// How long building took (0 when reused).
    pub duration_ms: u64,
    pub network: bool,
    /// What a step `built` here reached of the network through the proxy, and was refused
    /// (inline, its use is the tests' `network`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<NetworkUse>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How many failures a record lists (the rest are counted in `failures_omitted`).
pub const MAX_FAILURES: usize = 50;
/// The most test ids a record lists (about half a megabyte of note): a larger suite keeps none.
pub const MAX_TEST_IDS: usize = 10_000;
/// How long one failure message may be in a record.
pub const MAX_FAILURE_MESSAGE: usize = 2000;
/// How many changed files a record lists (the rest are counted in `files_omitted`).
pub const MAX_CHANGED_FILES: usize = 100;

impl Tests {
    /// Keep the note small whatever the test suite printed: the first failures, each message
    /// cut at a line boundary.
    pub fn bound(&mut self) {
        if self.ids.len() > MAX_TEST_IDS {
            self.ids.clear();
        }
        if self.failures.len() > MAX_FAILURES {
            self.failures_omitted += (self.failures.len() - MAX_FAILURES) as u64;
            self.failures.truncate(MAX_FAILURES);
        }
        for f in &mut self.failures {
            if f.message.len() > MAX_FAILURE_MESSAGE {
                let mut cut = MAX_FAILURE_MESSAGE;
                while !f.message.is_char_boundary(cut) {
                    cut -= 1;
                }
                f.message.truncate(cut);
                f.message.push_str(" …");
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LanguageStats {
    pub files: u64,
    pub code_lines: u64,
    pub functions: u64,
    pub classes: u64,
    pub complexity_total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub path: String,
    pub line: u64,
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub files_analyzed: u64,
    pub total_lines: u64,
    pub code_lines: u64,
    pub comment_lines: u64,
    pub blank_lines: u64,
    pub functions_found: u64,
    pub classes_found: u64,
    pub complexity_score: f64,
    pub complexity_max: u64,
    pub languages: BTreeMap<String, LanguageStats>,
    pub potential_issues: Vec<Issue>,
    /// Extra keys the analysis engine adds (frameworks, dependencies, skipped files, …).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub status: ChangeStatus,
    pub insertions: u64,
    pub deletions: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    pub files_changed: u64,
    pub insertions: u64,
    pub deletions: u64,
    /// The first [`MAX_CHANGED_FILES`] changed files, by path.
    pub files: Vec<FileChange>,
    /// Changed files past the first [`MAX_CHANGED_FILES`], counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_omitted: u64,
}
