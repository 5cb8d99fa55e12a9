//! Attempts: runs that could not run their tests here (a tool missing on this machine, a setup
//! step without the network). What counts as one is decided in [`could_not_run`], from the
//! record alone, so a record read back from the index is judged as the run judged it.

use super::{RunRecord, Status, Tests, Trigger};
use serde::{Deserialize, Serialize};

/// How the setup step's error begins (`the setup step `CMD` exited with 1…`).
pub const SETUP_FAILED: &str = "the setup step ";
/// What the setup step's error says when it had no network (`[limits] setup_network`).
pub const SETUP_OFFLINE: &str = "it has no network";
/// How the error of a run whose image (`[environment] image`) could not be had begins: such a
/// run is an attempt, never a result.
pub const IMAGE_UNAVAILABLE: &str = "cannot get the image";

/// An attempt as `show` and `log` give it beside the commit's result: the newest of those made
/// since the result, and how many there were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Why it could not run its tests (the attempt's `error`).
    pub reason: String,
    pub finished_at: String,
    pub trigger: Trigger,
    /// The attempts since the result (this one among them).
    pub attempts: u64,
}

/// A test runner or toolchain its command needs that this machine does not have, as the
/// command's output says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// `python3 -m X` said `No module named X`.
    PythonModule(String),
    /// A toolchain manager said the toolchain it selects is not installed (rustup, pyenv): the
    /// line it said it in.
    Toolchain(String),
    /// The toolchain stopped before building or running any test, for want of what it downloads
    /// (cargo's index and crates, Go's modules) or of a newer version of itself: the line that
    /// says so.
    Environment(String),
}

/// What `command`'s output says is missing for it to run, if anything: the module a
/// `python -m X` runs, or the toolchain rustup or pyenv selected.
pub fn missing_runner(command: &str, output: &str) -> Option<Missing> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let module = words
        .windows(2)
        .find(|w| w[0] == "-m")
        .map(|w| w[1].split('.').next().unwrap_or(w[1]));
    if let Some(module) = module {
        let said = output.lines().any(|l| {
            l.contains(&format!("No module named {module}"))
                || l.contains(&format!("No module named '{module}'"))
        });
        if said {
            return Some(Missing::PythonModule(module.to_string()));
        }
    }
    if let Some(l) = output.lines().map(str::trim).find(|l| {
        l.contains("is not installed")
            && ((l.starts_with("error:") && l.contains("toolchain '"))
                || l.starts_with("pyenv: version `"))
    }) {
        return Some(Missing::Toolchain(l.to_string()));
    }
    environment(output).map(|l| Missing::Environment(l.to_string()))
}

/// The line where a toolchain says it stopped in its own stage, before any test: cargo
/// resolving or downloading or finding its rustc older than the packages' `rust-version`
/// (nothing compiled yet), Go reading `go.mod` or downloading modules.
/// A project's own compile error or failing test is never one.
fn environment(output: &str) -> Option<&str> {
    let lines = || output.lines().map(str::trim);
    let compiled = lines().any(|l| l.starts_with("Compiling ") || l.starts_with("Running "));
    let cargo = lines().find(|l| {
        l.starts_with("error: failed to get `")
            || l.starts_with("error: failed to download")
            || l.starts_with("error: failed to load source for dependency")
            // Its rust-version check, before it builds: the packages want a newer rustc.
            || (l.starts_with("error: rustc ") && l.ends_with("is not supported by the following packages:"))
    });
    if let (Some(l), false) = (cargo, compiled) {
        return Some(l);
    }
    lines().find(|l| {
        l.contains("invalid go version")
            || l.starts_with("go: go.mod requires go >=")
            || ((l.starts_with("go: ") || l.contains("@v"))
                && [
                    "dial tcp",
                    "no such host",
                    "network is unreachable",
                    "proxy.golang.org",
                ]
                .iter()
                .any(|w| l.contains(w)))
    })
}

/// Why the run of `r` could not run its tests on this machine, when its record says so: it
/// ended in `error` because a check's command was not found or could not be executed (the
/// shell's 127 and 126: a tool, or a tool a shim runs, missing from `PATH`), because its runner
/// or toolchain is not installed here ([`missing_runner`]), or because the setup step failed
/// without the network. Such a run is no evidence about the tree: when a result of the same
/// tree and config exists, it is kept as an attempt beside that result, never in its place.
/// Any other `error` (a broken config, a checkout that failed, a sandbox that could not start)
/// and every result (`passed`, `failed`, `timeout`, `killed`) is `None`.
pub fn could_not_run(r: &RunRecord) -> Option<String> {
    if r.status != Status::Error {
        return None;
    }
    let reason = || {
        r.error
            .clone()
            .unwrap_or_else(|| "its test command could not run".into())
    };
    let checks = r.tests.iter().chain(
        r.checks
            .iter()
            .filter(|(_, c)| c.required)
            .map(|(_, c)| &c.run),
    );
    let unrunnable = |t: &Tests| {
        t.status == Some(Status::Error)
            && t.killed_by.is_none()
            && match t.exit_code {
                Some(126 | 127) => true,
                Some(0) | None => false,
                Some(_) => missing_runner(&t.command, &t.output_tail).is_some(),
            }
    };
    if checks.into_iter().any(unrunnable) {
        return Some(reason());
    }
    // Before the tests (its own step), or inline just before them, ending the tests in error.
    let offline_setup = r
        .tests
        .as_ref()
        .is_none_or(|t| t.status == Some(Status::Error))
        && r.error
            .as_deref()
            .is_some_and(|e| e.starts_with(SETUP_FAILED) && e.contains(SETUP_OFFLINE));
    // Before anything ran: its image could not be pulled.
    let no_image = r.tests.is_none()
        && r.error
            .as_deref()
            .is_some_and(|e| e.starts_with(IMAGE_UNAVAILABLE));
    (offline_setup || no_image).then(reason)
}

#[cfg(test)]
mod environment_tests {
    use super::*;

    /// Outputs captured from real runs without the network, or with a Go older than the
    /// module asks for (tests/fixtures/environment/).
    #[test]
    fn a_toolchain_that_stopped_for_its_downloads_or_its_version_is_the_environment() {
        let fixture = |name: &str| {
            std::fs::read_to_string(format!(
                "{}/../../tests/fixtures/environment/{name}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        for (command, name, said) in [
            (
                "cargo test",
                "cargo_offline.txt",
                "error: failed to get `itoa`",
            ),
            (
                "cargo test --workspace",
                "cargo_rust_version.txt",
                "error: rustc 1.95.0 is not supported",
            ),
            (
                "go test ./...",
                "go_download.txt",
                "github.com/pkg/errors@v0.9.1: Get",
            ),
            (
                "go test ./...",
                "go_invalid_version.txt",
                "invalid go version '1.22.0'",
            ),
        ] {
            match missing_runner(command, &fixture(name)) {
                Some(Missing::Environment(line)) => assert!(line.contains(said), "{name}: {line}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        // A project's own failures are not the environment's.
        let compile_error = "   Compiling capt v0.1.0 (/tmp/x)\nerror[E0425]: cannot find value `y`\nerror: could not compile `capt`\n";
        assert_eq!(missing_runner("cargo test", compile_error), None);
        let after_compiling =
            "   Compiling itoa v1.0.0\nerror: failed to download from `https://x`\n";
        assert_eq!(missing_runner("cargo test", after_compiling), None);
        let go_fail = "--- FAIL: TestA (0.00s)\n    g_test.go:3: network is unreachable in the test's own words\nFAIL\n";
        assert_eq!(missing_runner("go test ./...", go_fail), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckRun, Checks, Resources, RUN_SCHEMA};

    fn tests(command: &str, status: Status, exit: Option<i32>, tail: &str) -> Tests {
        Tests {
            status: Some(status),
            command: command.into(),
            framework: None,
            exit_code: exit,
            passed: None,
            failed: None,
            skipped: None,
            errors: None,
            total: None,
            failures: Vec::new(),
            duration_ms: 1,
            output_tail: tail.into(),
            killed_by: None,
            resources: Resources::default(),
            output_truncated: false,
            failures_omitted: 0,
            isolation: None,
            limits: None,
            phases: Vec::new(),
            first_failure_ms: None,
            selection_missed: false,
            ids: Vec::new(),
            network: None,
            new_tests: None,
            setup: None,
        }
    }

    fn record(status: Status, error: Option<&str>, t: Option<Tests>) -> RunRecord {
        RunRecord {
            schema: RUN_SCHEMA.into(),
            commit: "c".repeat(40),
            tree: "t".repeat(40),
            parents: Vec::new(),
            refname: None,
            experiment: None,
            trigger: Trigger::Manual,
            status,
            started_at: String::new(),
            finished_at: String::new(),
            duration_ms: 0,
            cached_from: None,
            error: error.map(str::to_string),
            config_hash: Some("k".into()),
            toolchain: Default::default(),
            environment: None,
            superseded_by: None,
            by: None,
            verified: None,
            cache_generations: Vec::new(),
            retried: None,
            tests: t,
            checks: Checks::default(),
            coverage: None,
            analysis: None,
            changes: None,
            warnings: Vec::new(),
            snapshot: false,
        }
    }

    #[test]
    fn a_command_not_found_or_not_executable_could_not_run() {
        for code in [126, 127] {
            let t = tests("mytest", Status::Error, Some(code), "mytest: not found");
            let r = record(
                Status::Error,
                Some("the command `mytest` was not found"),
                Some(t),
            );
            assert_eq!(
                could_not_run(&r).as_deref(),
                Some("the command `mytest` was not found")
            );
        }
        // A required named check that could not run makes the run one too.
        let mut r = record(Status::Error, Some("check `lint`: …"), None);
        r.checks = Checks(vec![(
            "lint".into(),
            CheckRun {
                required: true,
                error: None,
                run: tests("ruff .", Status::Error, Some(127), ""),
            },
        )]);
        assert!(could_not_run(&r).is_some());
    }

    #[test]
    fn a_missing_runner_or_toolchain_could_not_run() {
        let py = tests(
            "python3 -m pytest -q",
            Status::Error,
            Some(1),
            "/usr/bin/python3: No module named pytest",
        );
        assert!(could_not_run(&record(Status::Error, Some("x"), Some(py))).is_some());
        for line in [
            "error: toolchain '1.70.0-x86_64-unknown-linux-gnu' is not installed",
            "pyenv: version `3.11.4' is not installed (set by /w/.python-version)",
        ] {
            let t = tests("cargo test", Status::Error, Some(1), line);
            assert!(
                could_not_run(&record(Status::Error, Some("x"), Some(t))).is_some(),
                "{line}"
            );
            assert_eq!(
                missing_runner("cargo test", &format!("\n  {line}\n")),
                Some(Missing::Toolchain(line.into()))
            );
        }
    }

    #[test]
    fn a_setup_step_without_the_network_could_not_run() {
        let offline = format!("{SETUP_FAILED}`npm ci` exited with 1: ENOTFOUND; {SETUP_OFFLINE}: vendor its dependencies");
        assert!(could_not_run(&record(Status::Error, Some(&offline), None)).is_some());
        // With the network, its failure is the step's own.
        let online = format!("{SETUP_FAILED}`npm ci` exited with 1: ENOTFOUND");
        assert_eq!(
            could_not_run(&record(Status::Error, Some(&online), None)),
            None
        );
        // Inline, just before the tests: the tests end in error with the step's reason.
        let t = tests(
            "npm test",
            Status::Error,
            Some(1),
            "git-sandbox: the setup step failed",
        );
        let inline = format!("{SETUP_FAILED}`npm ci` failed, run inline; {SETUP_OFFLINE}: vendor");
        assert!(could_not_run(&record(Status::Error, Some(&inline), Some(t))).is_some());
    }

    #[test]
    fn results_and_other_errors_are_no_attempts() {
        // Tests that ran and failed, even with 127 as their exit code, are a result.
        let failed = tests("sh t.sh", Status::Failed, Some(127), "");
        assert_eq!(
            could_not_run(&record(Status::Failed, None, Some(failed))),
            None
        );
        let passed = tests("mytest", Status::Passed, Some(0), "");
        assert_eq!(
            could_not_run(&record(Status::Passed, None, Some(passed))),
            None
        );
        // Killed on the way (a timeout) is not "could not run".
        let mut killed = tests("mytest", Status::Error, Some(127), "");
        killed.killed_by = Some("timeout".into());
        assert_eq!(
            could_not_run(&record(Status::Error, Some("x"), Some(killed))),
            None
        );
        // A plain failure of a runner that is there, a broken config, a failed checkout.
        let plain = tests(
            "python3 -m pytest",
            Status::Error,
            Some(1),
            "ImportError: foo",
        );
        assert_eq!(
            could_not_run(&record(Status::Error, Some("x"), Some(plain))),
            None
        );
        for e in [
            "abc1234:.sandbox.toml: line 1: unknown key `tset`",
            "checkout failed: the tree is larger than [limits] checkout_mb",
            "the sandbox helper failed before starting the command: no cgroup",
        ] {
            assert_eq!(
                could_not_run(&record(Status::Error, Some(e), None)),
                None,
                "{e}"
            );
        }
    }
}
