//! Test-output parsing: dispatch over the per-framework parsers, and guessing the framework from
//! a command line.
//!
//! Each parser reads the whole (ANSI-stripped) output once, line by line, and returns counts only
//! when it recognised its framework's summary. Counts the summary gives are `Some`; `total` is the
//! framework's own total where it prints one, else the sum. `failures` lists failing (and erroring)
//! tests in the framework's own notation with a short message. Nothing here panics on garbage, and
//! every parser is linear in the size of the output.

mod bun;
mod cargo;
mod ctest;
mod deno;
mod failed_files;
pub mod go;
mod js;
mod junit;
mod mocha;
mod nextest;
mod phpunit;
mod pytest;
mod rspec;
mod tap;
mod text;
mod unittest;
pub mod xml;

pub use failed_files::{jest_failed_files, mocha_failures};
pub use gs_model::Framework;
use gs_model::TestCounts;
pub use text::MAX_FAILURES as MAX_PARSED_FAILURES;
/// Most failures a per-test report (git-sandbox's pytest reporter: one id a line, no message to
/// scan) lists: as many as a run's ids, so that a probe's failures are matched with every one of
/// the run's, not the first [`MAX_PARSED_FAILURES`] (a change that fails 1,185 of click's tests).
pub const MAX_REPORTED_FAILURES: usize = gs_model::MAX_TEST_IDS;
pub use xml::decode_entities;

/// Every framework name `parse_output` can return, in the order tried when the hint fails.
/// `nextest` goes before `cargo` (nextest output embeds indented `test result:` lines), `mocha`
/// before `node` (mocha's TAP reporter is TAP too; `node` leaves it to `mocha` even when hinted).
pub const FRAMEWORKS: &[Framework] = &[
    Framework::Nextest,
    Framework::Cargo,
    Framework::Pytest,
    Framework::Unittest,
    Framework::Go,
    Framework::Jest,
    Framework::Vitest,
    Framework::Mocha,
    Framework::Bun,
    Framework::Deno,
    Framework::Node,
    Framework::Rspec,
    Framework::Phpunit,
    Framework::Ctest,
    Framework::Junit,
];

/// `hint` is the framework the runner detected or guessed from the command (may be None or wrong);
/// try it first, then the others.
/// Returns the framework whose summary was recognised and the counts; None when nothing recognisable.
pub fn parse_output(hint: Option<&Framework>, output: &str) -> Option<(Framework, TestCounts)> {
    parse_command_output(None, hint, output)
}

/// [`parse_output`] of what `command` printed: the command says how many runners it starts,
/// so a summary a test prints beside the runner's own is not added to it (`None`: one).
pub fn parse_command_output(
    command: Option<&str>,
    hint: Option<&Framework>,
    output: &str,
) -> Option<(Framework, TestCounts)> {
    let text = text::clean(output);
    let runs = Invocations::of(command);
    let hinted = hint.filter(|h| FRAMEWORKS.contains(h));
    hinted
        .into_iter()
        .chain(FRAMEWORKS.iter().filter(|f| Some(*f) != hinted))
        .find_map(|fw| parse_as(fw, &text, &runs).map(|counts| (fw.clone(), counts)))
}

/// How many runners a command line starts, of the kinds whose summary a test can print
/// beside the runner's own: each at least one, as a script (`make test`) counts as one.
struct Invocations {
    /// `-m unittest`, `manage.py test`.
    unittest: usize,
    /// `pytest`, `py.test`, `-m pytest`.
    pytest: usize,
}

impl Invocations {
    fn of(command: Option<&str>) -> Invocations {
        Invocations {
            unittest: command.map_or(1, runner_invocations),
            pytest: command.map_or(1, pytest_sessions),
        }
    }
}

/// How many unittest runners a command line starts (`-m unittest`, `manage.py test`), at least
/// one: a script (`make test`) counts as one, so several summaries in its output count as one.
pub fn runner_invocations(cmd: &str) -> usize {
    let words = command_words(cmd);
    let n = words
        .windows(2)
        .filter(|w| {
            let (a, b) = (base_name(w[0]), base_name(w[1]));
            (a == "-m" && b == "unittest") || (a == "manage.py" && b == "test")
        })
        .count();
    n.max(1)
}

/// How many pytest sessions a command line starts (`pytest`, `py.test`, `python -m pytest`), at
/// least one. A package being installed (`pip install pytest`) starts none.
pub fn pytest_sessions(cmd: &str) -> usize {
    let words = command_words(cmd);
    let n = words
        .iter()
        .enumerate()
        .filter(|(i, w)| {
            matches!(base_name(w).as_str(), "pytest" | "py.test")
                && (*i == 0 || words[i - 1] != "install")
        })
        .count();
    n.max(1)
}

/// A command line's words, split at blanks and shell operators, quotes dropped.
fn command_words(cmd: &str) -> Vec<&str> {
    cmd.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect()
}

/// A program word as named, without its directory or `.exe`, lower case.
fn base_name(w: &str) -> String {
    let b = w.rsplit('/').next().unwrap_or(w);
    b.strip_suffix(".exe").unwrap_or(b).to_ascii_lowercase()
}

/// Parses a JUnit XML report (`<testsuites>`/`<testsuite>`/`<testcase>`), e.g. pytest `--junitxml`.
pub fn parse_junit_xml(xml: &str) -> Option<TestCounts> {
    junit::parse(xml)
}

fn parse_as(framework: &Framework, text: &str, runs: &Invocations) -> Option<TestCounts> {
    match framework {
        Framework::Pytest => pytest::parse(text, runs.pytest),
        Framework::Unittest => unittest::parse(text, runs.unittest),
        Framework::Cargo => cargo::parse(text),
        Framework::Nextest => nextest::parse(text),
        Framework::Go => go::parse(text),
        Framework::Jest => js::parse_jest(text),
        Framework::Vitest => js::parse_vitest(text),
        Framework::Mocha => mocha::parse(text),
        Framework::Bun => bun::parse(text),
        Framework::Deno => deno::parse(text),
        Framework::Node if mocha::is_tap(text) => None,
        Framework::Node => tap::parse(text),
        Framework::Rspec => rspec::parse(text),
        Framework::Phpunit => phpunit::parse(text),
        Framework::Ctest => ctest::parse(text),
        Framework::Junit => junit::parse_embedded(text),
        Framework::Npm | Framework::Other(_) => None,
    }
}

/// The test runner a command line starts, when its words name one.
///
/// `python3 -m pytest -q` is pytest, `cargo nextest run` nextest, `npx vitest run` vitest,
/// `node --test` node, `go test ./...` go, `bun test` bun, `bundle exec rspec` rspec,
/// `vendor/bin/phpunit` phpunit; `npm test` names none.
pub fn framework_from_command(cmd: &str) -> Option<Framework> {
    let words = command_words(cmd);
    let base = base_name;
    for (i, word) in words.iter().enumerate() {
        let b = base(word);
        let next = words.get(i + 1).map(|w| base(w));
        let next = next.as_deref();
        match b.as_str() {
            "pytest" | "py.test" => return Some(Framework::Pytest),
            "-m" => match next {
                Some("pytest") => return Some(Framework::Pytest),
                Some("unittest") => return Some(Framework::Unittest),
                _ => {}
            },
            "manage.py" if next == Some("test") => return Some(Framework::Unittest),
            "cargo-nextest" => return Some(Framework::Nextest),
            "cargo" => {
                // `cargo +nightly test`, `cargo --locked nextest run`: skip options.
                let sub = words[i + 1..]
                    .iter()
                    .find(|w| !w.starts_with('-') && !w.starts_with('+'))
                    .map(|w| w.to_ascii_lowercase());
                match sub.as_deref() {
                    Some("nextest") => return Some(Framework::Nextest),
                    Some("test") | Some("t") => return Some(Framework::Cargo),
                    _ => {}
                }
            }
            "go" if next == Some("test") => return Some(Framework::Go),
            "jest" => return Some(Framework::Jest),
            "vitest" => return Some(Framework::Vitest),
            "mocha" | "_mocha" => return Some(Framework::Mocha),
            "bun" if next == Some("test") => return Some(Framework::Bun),
            "deno" if next == Some("test") => return Some(Framework::Deno),
            "rspec" => return Some(Framework::Rspec),
            "phpunit" | "phpunit.phar" => return Some(Framework::Phpunit),
            "ctest" => return Some(Framework::Ctest),
            "node" | "nodejs"
                if words[i + 1..]
                    .iter()
                    .take_while(|w| w.starts_with('-'))
                    .any(|w| *w == "--test") =>
            {
                return Some(Framework::Node)
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests;

/// Helpers the parsers' unit tests share.
#[cfg(test)]
pub mod testutil {
    use gs_model::TestCounts;

    /// passed, failed, skipped, errors, total.
    pub fn counts(c: &TestCounts) -> [Option<u64>; 5] {
        [c.passed, c.failed, c.skipped, c.errors, c.total]
    }

    /// (name, message) of each failure.
    pub fn pairs(c: &TestCounts) -> Vec<(&str, &str)> {
        c.failures
            .iter()
            .map(|f| (f.name.as_str(), f.message.as_str()))
            .collect()
    }
}
