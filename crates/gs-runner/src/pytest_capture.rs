//! Whether pytest runs with its output capture off (`-s`, `--capture=no`, `--capture=tee-sys`,
//! in the command, `PYTEST_ADDOPTS` or the project's `addopts`): the tests' own prints then
//! stream beside pytest's lines, and no line of that output can be told apart from pytest's.

/// The files pytest reads `addopts` from.
const CONFIG_FILES: &[&str] = &[
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
];

/// Short options whose value follows in the same word (`-rs` reports skips: its `s` is no
/// `-s`) or the next.
const SHORT_WITH_VALUE: &str = "kmprocWn";

/// Whether `command` runs pytest with capture off, its project's config read through `text_of`
/// (a path relative to the checkout). When in doubt (a shell line that runs pytest somewhere
/// within), a word that reads as `-s` counts: the cost of a wrong yes is only a failure told
/// when its phase ends rather than at once.
pub fn capture_off(command: &str, text_of: &dyn Fn(&str) -> Option<String>) -> bool {
    anywhere(command, text_of, off)
}

/// Whether pytest's tests run elsewhere than in its own process or out of the order it
/// collected them, or its terminal is gone (pytest-xdist's `-n`, `--dist`, `-d`, `--tx`,
/// `--looponfail`; `-p no:terminal`), anywhere `capture_off` looks: a plugin in the session
/// then cannot put some tests first or tell where they ended.
pub fn distributed(command: &str, text_of: &dyn Fn(&str) -> Option<String>) -> bool {
    anywhere(command, text_of, |words| {
        words.iter().enumerate().any(|(i, w)| {
            let name = w.split('=').next().unwrap_or(w);
            matches!(
                name,
                "--numprocesses" | "--dist" | "--tx" | "--looponfail" | "-d" | "-f" | "no:terminal"
            ) || (w.starts_with("-n") && !w.starts_with("--"))
                || (w == "-p" && words.get(i + 1).is_some_and(|n| n == "no:terminal"))
                || w == "-pno:terminal"
        })
    })
}

/// Whether `test` holds for pytest's words in the command (after the program), in a
/// `PYTEST_ADDOPTS=` assignment, or in the `addopts` of the project's config files.
fn anywhere(
    command: &str,
    text_of: &dyn Fn(&str) -> Option<String>,
    test: impl Fn(&[String]) -> bool,
) -> bool {
    let words = tokens(command);
    let from_env = command
        .split("PYTEST_ADDOPTS=")
        .skip(1)
        .any(|v| test(&tokens(env_value(v))));
    let start = words
        .iter()
        .position(|w| matches!(super::program_name(w), "pytest" | "py.test"))
        .map_or(0, |i| i + 1);
    from_env
        || test(&words[start..])
        || CONFIG_FILES
            .iter()
            .filter_map(|f| text_of(f))
            .any(|t| addopts(&t).iter().any(|v| test(&tokens(v))))
}

/// An assignment's value at the start of `rest`: up to its closing quote, or its first space.
fn env_value(rest: &str) -> &str {
    match rest.chars().next() {
        Some(q @ ('"' | '\'')) => rest[1..].split(q).next().unwrap_or(""),
        _ => rest.split_whitespace().next().unwrap_or(""),
    }
}

/// Words, with the quotes, brackets and commas of shell, ini and TOML values dropped.
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || ",[]".contains(c))
        .map(|w| w.replace(['"', '\''], ""))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether pytest's options among `words` turn capture off.
fn off(words: &[String]) -> bool {
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        match w.as_str() {
            "-s" | "--capture=no" | "--capture=tee-sys" => return true,
            "--capture" => {
                if it
                    .peek()
                    .is_some_and(|v| matches!(v.as_str(), "no" | "tee-sys"))
                {
                    return true;
                }
            }
            _ => {
                let Some(cluster) = w.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
                    continue;
                };
                if !cluster.chars().all(|c| c.is_ascii_alphabetic()) {
                    continue;
                }
                for c in cluster.chars() {
                    if c == 's' {
                        return true;
                    }
                    if SHORT_WITH_VALUE.contains(c) {
                        break;
                    }
                }
            }
        }
    }
    false
}

/// The values of every `addopts` key in an ini or TOML text, with their continuation lines.
///
/// An ini value goes on on indented lines, a TOML array up to its `]`.
fn addopts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("addopts") else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix(['=', ':']) else {
            continue;
        };
        let mut value = value.to_string();
        let open_array = value.contains('[') && !value.contains(']');
        while let Some(next) = lines.peek() {
            let indented = next.starts_with([' ', '\t']) && !next.trim().is_empty();
            if !(indented || open_array && !value.contains(']')) {
                break;
            }
            value.push(' ');
            value.push_str(next);
            lines.next();
        }
        out.push(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_commands_own_options_say() {
        for c in [
            "pytest -s",
            "python3 -m pytest -q -xvs tests",
            "pytest --capture=no",
            "pytest --capture tee-sys",
            "PYTEST_ADDOPTS='-v -s' pytest",
            "cd sub && pytest -sv",
        ] {
            assert!(capture_off(c, &none), "{c}");
        }
        for c in [
            "pytest -q",
            "pytest -rs -v",
            "pytest -k s",
            "python3 -s -m pytest",
            "pytest --capture=sys",
            "pytest -p no:cacheprovider",
        ] {
            assert!(!capture_off(c, &none), "{c}");
        }
    }

    #[test]
    fn distributed_sessions_are_told_wherever_their_options_are() {
        for c in [
            "pytest -n 4",
            "pytest -nauto tests",
            "python -m pytest --numprocesses=2",
            "pytest --dist loadfile -n2",
            "pytest -p no:terminal",
            "PYTEST_ADDOPTS='-n 3' pytest",
        ] {
            assert!(distributed(c, &none), "{c}");
        }
        for c in [
            "pytest -q tests",
            "pytest -k network",
            "pytest -p no:cacheprovider",
        ] {
            assert!(!distributed(c, &none), "{c}");
        }
        let text_of =
            |p: &str| (p == "pytest.ini").then(|| "[pytest]\naddopts = -ra -n auto\n".to_string());
        assert!(distributed("pytest", &text_of));
    }

    #[test]
    fn the_projects_addopts_say() {
        let cases = [
            ("pytest.ini", "[pytest]\naddopts = -ra --capture=no\n", true),
            (
                "tox.ini",
                "[pytest]\naddopts =\n    -v\n    -s\nx = 1\n",
                true,
            ),
            (
                "pyproject.toml",
                "[tool.pytest.ini_options]\naddopts = [\n  \"-v\",\n  \"-s\",\n]\n",
                true,
            ),
            ("setup.cfg", "[tool:pytest]\naddopts: -q -rs\n", false),
            ("pyproject.toml", "[tool.black]\nline-length = 99\n", false),
        ];
        for (file, text, want) in cases {
            let text_of = |p: &str| (p == file).then(|| text.to_string());
            assert_eq!(capture_off("pytest", &text_of), want, "{file}: {text}");
        }
    }
}
