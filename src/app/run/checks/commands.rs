//! What a check's command says of itself: where `ctest` writes its JUnit report, and, from
//! what it printed, why its runner could not run at all.

use crate::app::run::setup;

/// Where `ctest --output-junit FILE` in a test command writes its report: FILE in the directory
/// ctest runs in (`--test-dir DIR`, else the `cd DIR` before it), relative to the checkout; `None`
/// for a path outside it.
pub(in crate::app::run) fn ctest_report(command: &str) -> Option<String> {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|'))
        .filter(|w| !w.is_empty())
        .collect();
    let at = words
        .iter()
        .position(|w| *w == "ctest" || w.ends_with("/ctest"))?;
    let (before, after) = words.split_at(at);
    let value = |flag: &str| {
        after
            .windows(2)
            .find(|w| w[0] == flag)
            .map(|w| w[1])
            .or_else(|| {
                after
                    .iter()
                    .find_map(|w| w.strip_prefix(flag)?.strip_prefix('='))
            })
    };
    let file = value("--output-junit")?;
    let dir = value("--test-dir")
        .or_else(|| before.windows(2).rev().find(|w| w[0] == "cd").map(|w| w[1]));
    let path = match dir {
        Some(d) if !file.starts_with('/') => format!("{}/{file}", d.trim_end_matches('/')),
        _ => file.to_string(),
    };
    let path = path.trim_start_matches("./").to_string();
    (!path.starts_with('/') && !path.split('/').any(|c| c == "..") && !path.is_empty())
        .then_some(path)
}

/// Why a test command could not run at all, when its output says its runner is missing: the
/// shell's 126/127 (not found, not executable), Python's `No module named X` for `-m X`, or a
/// toolchain rustup or pyenv selects that is not installed. A missing runner is an `error`,
/// never a failing test (and, beside a result, an attempt: [`gs_model::could_not_run`]).
pub(super) fn missing_runner(
    command: &str,
    key: &str,
    exit_code: Option<i32>,
    output: &str,
) -> Option<String> {
    let last = output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    match exit_code {
        Some(127) => {
            let said = if last.is_empty() { "no output" } else { last };
            // The shell names what it did not find: a program the command runs (`npm test`
            // running mocha) is named as that, not as the command.
            let first = command.split_whitespace().next().unwrap_or(command);
            return Some(match setup::not_found_program(last).filter(|p| *p != first) {
                Some(program) => format!(
                    "`{program}`, which `{command}` runs, was not found (exit 127: {said}); install it or set {key} command in .sandbox.toml"
                ),
                None => format!(
                    "the command `{command}` was not found (exit 127: {said}); install it or set {key} command in .sandbox.toml"
                ),
            });
        }
        Some(126) => {
            return Some(format!(
                "the command `{command}` could not be executed (exit 126: {}); check its permissions or set {key} command in .sandbox.toml",
                if last.is_empty() { "no output" } else { last }
            ))
        }
        _ => {}
    }
    use gs_model::attempt::Missing;
    match gs_model::attempt::missing_runner(command, output)? {
        Missing::PythonModule(module) => Some(format!(
            "the Python module `{module}` that `{command}` runs is not installed (No module named {module}); install it (python3 -m pip install {module}) or set {key} command in .sandbox.toml"
        )),
        Missing::Toolchain(line) => Some(format!(
            "the toolchain that `{command}` runs is not installed here ({line}); install it, or set {key} command in .sandbox.toml"
        )),
        Missing::Environment(line) => Some(format!(
            "`{command}` stopped before running any test, for want of what its toolchain downloads or of a newer toolchain ({line}); give the setup step the network ([limits] setup_network = true in your user config) or install that toolchain here"
        )),
    }
}
