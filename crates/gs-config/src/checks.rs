//! Named checks: `[checks.NAME]` tables (a linter, a type checker, …) run in the same sandboxed
//! tree as the tests, each with its own command, timeout, report and weight. `[checks.test]` is
//! another way of writing `[test]`.

use super::de::{de_command, de_relative_path, de_timeout, hinted};
use super::{ser_opt_duration, Config, ConfigError, Location};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The check `[test]` is.
pub const TEST_CHECK: &str = "test";

/// `[test]`: the tests, the check every run has (`[checks.test]` is another way to write it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    #[serde(default, deserialize_with = "de_command")]
    pub command: Option<String>,
    #[serde(default, deserialize_with = "de_timeout")]
    pub timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_relative_path")]
    pub junit: Option<String>,
    #[serde(default, deserialize_with = "de_command")]
    pub setup: Option<String>,
    /// A build the tests need (`pnpm build`), run before them in their sandbox for every tree.
    #[serde(default, deserialize_with = "de_command")]
    pub build: Option<String>,
    /// A line-coverage report the command writes (coverage.py JSON, Cobertura XML, lcov).
    #[serde(default, deserialize_with = "de_relative_path")]
    pub coverage: Option<String>,
    /// Run the tests at the same time as the checks that say `parallel = true`.
    pub parallel: Option<bool>,
    /// Run the tests a change can reach as a probe beside the run, for an early first failure
    /// (pytest, jest, vitest, cargo test, go test): `false`, no probe.
    pub phases: Option<bool>,
    /// How often a failure only of known-flaky (or quarantined) tests is retried: the default of
    /// `run --retry-flaky N`. A repository can only lower the user's.
    #[serde(default, deserialize_with = "de_runs")]
    pub retries: Option<u32>,
    /// How often a test the parent's run did not have runs in its commit's run (the first, in
    /// order, decides; the others only mark it flaky at birth). 1: no extra runs.
    #[serde(default, deserialize_with = "de_runs")]
    pub new_test_runs: Option<u32>,
}

/// The most runs of a test `retries` and `new_test_runs` may ask for.
pub const MAX_RUNS: u32 = 10;

/// A count of runs: 0 to [`MAX_RUNS`].
fn de_runs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = i64::deserialize(d)?;
    match u32::try_from(n) {
        Ok(n) if n <= MAX_RUNS => Ok(Some(n)),
        _ => Err(hinted(
            format!("{n} runs is out of range"),
            format!("give a number from 0 to {MAX_RUNS}"),
        )),
    }
}
/// The longest check name: names appear in file names and in GitHub's status contexts.
const MAX_NAME: usize = 32;

/// One `[checks.NAME]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFile {
    #[serde(default, deserialize_with = "de_command")]
    pub command: Option<String>,
    #[serde(default, deserialize_with = "de_timeout")]
    pub timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_relative_path")]
    pub junit: Option<String>,
    #[serde(default, deserialize_with = "de_relative_path")]
    pub coverage: Option<String>,
    pub required: Option<bool>,
    pub parallel: Option<bool>,
    /// A formatter or a linter with `--fix`: `git sandbox fix RANGE --check NAME` may take what
    /// it writes into the commits it runs on.
    pub fix: Option<bool>,
}

/// A named check as a run sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckConfig {
    pub name: String,
    pub command: String,
    /// `None`: the tests' timeout (`[test] timeout`).
    #[serde(serialize_with = "ser_opt_duration")]
    pub timeout: Option<Duration>,
    pub junit: Option<String>,
    /// A line-coverage report it writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<String>,
    /// Whether its failure fails the run (`true` unless the config says otherwise).
    pub required: bool,
    /// Whether it runs at the same time as the other checks that say so.
    pub parallel: bool,
    /// Whether `git sandbox fix` may take what it writes. Left out of the result key when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fix: bool,
}

/// Whether `name` may name a check: lower-case letters, digits, `-` and `_`, starting with a
/// letter or digit, at most 32 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

/// `[checks]`: the tables by name, each name valid and each check with a command.
pub(super) fn de_checks<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, CheckFile)>, D::Error> {
    let map = BTreeMap::<String, CheckFile>::deserialize(d)?;
    for (name, check) in &map {
        if !valid_name(name) {
            return Err(hinted(
                format!("{name:?} is not a check name"),
                "name checks with lower-case letters, digits, - and _ (at most 32), like \"lint\" or \"type-check\"",
            ));
        }
        if check.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return Err(hinted(
                format!("the check `{name}` has no command"),
                format!("add command = \"…\" under [checks.{name}]"),
            ));
        }
    }
    Ok(map.into_iter().collect())
}

/// Put the checks of a parsed file in the order the file declares them, and fold
/// `[checks.test]` into `[test]`.
pub(super) fn settle(
    label: &str,
    text: &str,
    checks: &mut Vec<(String, CheckFile)>,
    test: &mut TestFile,
) -> Result<(), ConfigError> {
    checks.sort_by_key(|(name, _)| declared_at(text, name).unwrap_or(usize::MAX));
    let Some(at) = checks.iter().position(|(n, _)| n == TEST_CHECK) else {
        return Ok(());
    };
    let (_, check) = checks.remove(at);
    let error = |message: String, hint: &str| ConfigError {
        location: Location {
            source_label: label.to_string(),
            line: declared_at(text, TEST_CHECK).map(|i| i + 1),
            key: Some("checks.test".into()),
        },
        message,
        hints: vec![hint.into()],
    };
    let t = &*test;
    if t.command.is_some()
        || t.timeout.is_some()
        || t.junit.is_some()
        || t.parallel.is_some()
        || t.coverage.is_some()
    {
        return Err(error(
            "[checks.test] and [test] both describe the tests".into(),
            "keep one of them ([checks.test] is another way of writing [test])",
        ));
    }
    if check.required == Some(false) {
        return Err(error(
            "the test check is always required".into(),
            "remove required = false, or give the check another name",
        ));
    }
    test.command = check.command;
    test.timeout = check.timeout;
    test.junit = check.junit;
    test.parallel = check.parallel;
    test.coverage = check.coverage;
    Ok(())
}

/// The line (0-based) where `text` opens `[checks.NAME]` or sets a key of it.
fn declared_at(text: &str, name: &str) -> Option<usize> {
    let forms = [
        format!("checks.{name}"),
        format!("checks.\"{name}\""),
        format!("checks.'{name}'"),
    ];
    text.lines().position(|l| {
        let l = l.trim().trim_start_matches('[').trim_start();
        forms.iter().any(|f| {
            l.strip_prefix(f.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with([']', '.', '=']))
        })
    })
}

/// Lay a file's checks over the config's: a check of a later layer replaces the one of the same
/// name, a new one goes last.
pub(super) fn apply(checks: &[(String, CheckFile)], c: &mut Config) {
    for (name, f) in checks {
        let Some(command) = f.command.clone() else {
            continue;
        };
        let check = CheckConfig {
            name: name.clone(),
            command,
            timeout: f.timeout,
            junit: f.junit.clone(),
            coverage: f.coverage.clone(),
            required: f.required.unwrap_or(true),
            parallel: f.parallel.unwrap_or(false),
            fix: f.fix.unwrap_or(false),
        };
        match c.checks.iter_mut().find(|x| x.name == *name) {
            Some(slot) => *slot = check,
            None => c.checks.push(check),
        }
    }
}

impl Config {
    /// How long a check may run: its own timeout, never past the tests' (the user's ceiling).
    pub fn check_timeout(&self, check: &CheckConfig) -> Duration {
        check
            .timeout
            .map_or(self.test.timeout, |t| t.min(self.test.timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_file, parse_repository_file, Layers};

    #[test]
    fn names_are_plain_and_short() {
        for ok in ["lint", "type-check", "a_1", "9"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Lint", "-x", "a b", "a/b", "a.b", &"x".repeat(33)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn checks_keep_the_files_order_and_checks_test_is_the_test() {
        let text = "[checks.types]\ncommand = \"mypy .\"\n\n[checks.test]\ncommand = \"pytest\"\ntimeout = \"2m\"\n\n[checks.lint]\ncommand = \"ruff check .\"\nrequired = false\n";
        let f = parse_repository_file("r.toml", text).unwrap();
        let names: Vec<&str> = f.checks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["types", "lint"]);
        assert_eq!(f.test.command.as_deref(), Some("pytest"));
        assert_eq!(f.test.timeout, Some(Duration::from_secs(120)));
        let c = Layers {
            repo: f,
            ..Layers::default()
        }
        .resolve();
        assert_eq!(c.checks.len(), 2);
        assert!(c.checks[0].required && !c.checks[1].required);
        assert_eq!(c.check_timeout(&c.checks[0]), c.test.timeout);
    }

    #[test]
    fn a_check_needs_a_command_and_a_name_and_one_way_of_writing_the_tests() {
        let e = parse_file("c.toml", "[checks.lint]\ntimeout = \"1m\"\n").unwrap_err();
        assert!(
            e.to_string().contains("the check `lint` has no command"),
            "{e}"
        );
        let e = parse_file("c.toml", "[checks.Lint]\ncommand = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("not a check name"), "{e}");
        let e = parse_file(
            "c.toml",
            "[test]\ncommand = \"a\"\n[checks.test]\ncommand = \"b\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("both describe the tests"), "{e}");
        assert_eq!(e.location.line, Some(3));
        let e = parse_file(
            "c.toml",
            "[checks.test]\ncommand = \"b\"\nrequired = false\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("always required"), "{e}");
    }

    #[test]
    fn a_later_layer_replaces_a_check_and_cannot_outlast_the_users_timeout() {
        let user = parse_file("u.toml", "[test]\ntimeout = \"1m\"\n").unwrap();
        let repo = parse_repository_file(
            "r.toml",
            "[checks.lint]\ncommand = \"a\"\n[checks.slow]\ncommand = \"s\"\ntimeout = \"1h\"\n",
        )
        .unwrap();
        let experiment = parse_repository_file(
            "e.toml",
            "[checks.lint]\ncommand = \"b\"\nrequired = false\n",
        )
        .unwrap();
        let c = Layers {
            user,
            repo,
            experiment,
            ..Layers::default()
        }
        .resolve();
        let lint = &c.checks[0];
        assert_eq!((lint.command.as_str(), lint.required), ("b", false));
        assert_eq!(c.check_timeout(&c.checks[1]), Duration::from_secs(60));
    }

    #[test]
    fn checks_change_the_result_key_only_when_there_are_some() {
        let plain = Layers::default().resolve();
        let same = Layers {
            repo: parse_repository_file("r.toml", "[test]\nparallel = false\n").unwrap(),
            ..Layers::default()
        }
        .resolve();
        assert_eq!(plain.result_key(), same.result_key());
        let with = Layers {
            repo: parse_repository_file("r.toml", "[checks.lint]\ncommand = \"x\"\n").unwrap(),
            ..Layers::default()
        }
        .resolve();
        assert_ne!(plain.result_key(), with.result_key());
    }
}
