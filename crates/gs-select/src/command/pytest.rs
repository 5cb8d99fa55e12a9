//! Whether a test command is a plain pytest invocation that test files can be appended to, and
//! the probe's command made from it: the files a change reaches, alone (see the run's
//! `checks/phases.rs`).

/// A recognised `pytest …`, `py.test …` or `python -m pytest …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pytest {
    /// The command without its path arguments.
    base: String,
    /// The paths the command names (the suite's extent); empty: pytest's own `testpaths`.
    pub paths: Vec<String>,
}

/// Options whose value is the next word.
const TAKES_VALUE: &[&str] = &[
    "-k",
    "-m",
    "-p",
    "-o",
    "-W",
    "-r",
    "-n",
    "--tb",
    "--maxfail",
    "--durations",
    "--basetemp",
    "--junitxml",
    "--junit-xml",
    "--log-level",
    "--import-mode",
    "--confcutdir",
    "--ignore",
    "--ignore-glob",
    "--deselect",
    "--dist",
    "--timeout",
    "--reruns",
    "-c",
    "--rootdir",
];

/// Options that change which tests run or where node ids are rooted, so a file list appended to
/// the command would not split the same suite.
const REFUSED: &[&str] = &[
    "-c",
    "--rootdir",
    "--pyargs",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--sw",
    "--stepwise",
    "--co",
    "--collect-only",
    // Below its threshold, phase one's share of the coverage would fail the run.
    "--cov-fail-under",
];

/// pytest-cov's options that take a value (as `--opt=value`, or the next word).
const COV_VALUE: &[&str] = &["--cov-report", "--cov-config", "--cov-context"];

/// `command` as a pytest invocation, or `None` when it is anything else (a shell line with
/// `&&`, pipes, quotes or variables, another runner, or options that change the selection).
pub fn recognise(command: &str) -> Option<Pytest> {
    let parsed = super::command_words(command)?;
    let words = &parsed.all;
    let mut i = parsed.at;
    match parsed.program() {
        Some("pytest" | "py.test") => i += 1,
        Some(p) if is_python(p) && words.get(i + 1..i + 3) == Some(&["-m", "pytest"]) => i += 3,
        _ => return None,
    }
    let mut base: Vec<&str> = words[..i].to_vec();
    let mut paths = Vec::new();
    let mut rest = words[i..].iter();
    while let Some(&w) = rest.next() {
        let name = w.split('=').next().unwrap_or(w);
        if REFUSED.contains(&name) {
            return None;
        }
        // `--cov` takes an optional value: a next word would be read as a test path.
        if w == "--cov" && rest.clone().next().is_some_and(|n| !n.starts_with('-')) {
            return None;
        }
        if COV_VALUE.contains(&w) {
            base.push(w);
            base.push(rest.next()?);
        } else if w.starts_with('-') {
            base.push(w);
            if TAKES_VALUE.contains(&w) {
                base.push(rest.next()?);
            }
        } else {
            paths.push(w.trim_start_matches("./").trim_end_matches('/').to_string());
        }
    }
    let p = Pytest {
        base: base.join(" "),
        paths,
    };
    // Coverage splits only for per-test data: a coverage report is not merged across phases,
    // and a command that wants only the report keeps it by running in one.
    (!p.collects_coverage() || p.records_contexts()).then_some(p)
}

fn is_python(p: &str) -> bool {
    p.strip_prefix("python")
        .is_some_and(|v| v.is_empty() || v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

impl Pytest {
    /// Phase one: the command's options with `files` in place of its paths, and `-v` when
    /// they set no verbosity: each test's line then names it the moment it fails (pytest's
    /// progress letters name none until its summary). Phase one is the few tests a change
    /// reaches, so its longer output stays small.
    pub fn only(&self, files: &[String]) -> String {
        let mut c = self.base.clone();
        if !self.sets_verbosity() {
            c.push_str(" -v");
        }
        for f in files {
            c.push(' ');
            c.push_str(&super::quote(f));
        }
        c
    }

    /// The command for `ids` (pytest node ids, `tests/test_a.py::TestX::test_y[p]`) alone, as
    /// the suite's options run them: a retry of the tests that failed. `None` when one is not a
    /// node id of a file (a collection error names a module; a name from the output may be
    /// anything), so no option or path outside the suite is ever passed on.
    pub fn alone(&self, ids: &[String]) -> Option<String> {
        let node = |id: &String| {
            let (file, rest) = id.split_once("::")?;
            (file.ends_with(".py")
                && !file.starts_with('-')
                && !rest.is_empty()
                && !id.chars().any(char::is_control))
            .then_some(())
        };
        (!ids.is_empty() && ids.iter().all(|id| node(id).is_some())).then(|| self.only(ids))
    }

    /// Whether the command's options say how verbose pytest is (`-v`, `-q`, `-vv`, `-xq`,
    /// `--verbose`, `--quiet`, `--verbosity=N`).
    pub fn sets_verbosity(&self) -> bool {
        let mut words = self.base.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if TAKES_VALUE.contains(&w) || COV_VALUE.contains(&w) {
                words.next();
                continue;
            }
            let name = w.split('=').next().unwrap_or(w);
            if matches!(name, "--verbose" | "--quiet" | "--verbosity") {
                return true;
            }
            // Short flags run together; one that takes a value ends the word (`-rfE`).
            if let Some(flags) = w.strip_prefix('-').filter(|f| !f.starts_with('-')) {
                for f in flags.chars() {
                    if f == 'v' || f == 'q' {
                        return true;
                    }
                    if TAKES_VALUE.contains(&format!("-{f}").as_str()) {
                        break;
                    }
                }
            }
        }
        false
    }

    /// Whether pytest-cov measures the run.
    pub fn collects_coverage(&self) -> bool {
        self.base
            .split_whitespace()
            .any(|w| w == "--cov" || w.starts_with("--cov="))
    }

    /// Whether pytest-cov records which test ran each line (`--cov-context=test`), in its data
    /// file `.coverage`.
    pub fn records_contexts(&self) -> bool {
        let words: Vec<&str> = self.base.split_whitespace().collect();
        self.collects_coverage()
            && words.iter().enumerate().any(|(i, w)| {
                *w == "--cov-context=test"
                    || (*w == "--cov-context" && words.get(i + 1) == Some(&"test"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_run_alone_by_node_id_and_nothing_else_is_passed_on() {
        let p = recognise("python3 -m pytest -q tests").unwrap();
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            p.alone(&ids(&[
                "tests/test_a.py::TestX::test_y[a b]",
                "t/b.py::test_z"
            ])),
            Some(
                "python3 -m pytest -q 'tests/test_a.py::TestX::test_y[a b]' t/b.py::test_z".into()
            )
        );
        for bad in [
            &[][..],
            &["tests/test_a.py"],
            &["tests.test_a.TestX.test_y"],
            &["--rootdir=/::x"],
            &["-p.py::x"],
            &["t/a.py::x\nrm"],
            &["t/a.py::"],
        ] {
            let bad: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert_eq!(p.alone(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn plain_pytest_invocations_are_recognised() {
        let p = recognise("python3 -m pytest -q -k slow tests").unwrap();
        assert_eq!(p.paths, vec!["tests"]);
        assert_eq!(
            p.only(&["tests/test_a.py".into()]),
            "python3 -m pytest -q -k slow tests/test_a.py"
        );
        assert!(recognise("pytest").is_some());
        // Phase one is verbose unless the command says how verbose to be.
        let only = |c: &str| recognise(c).unwrap().only(&["t/a.py".into()]);
        assert_eq!(only("pytest -x tests"), "pytest -x -v t/a.py");
        assert_eq!(only("pytest -rfE -p no:x"), "pytest -rfE -p no:x -v t/a.py");
        for given in [
            "pytest -xq",
            "pytest --verbosity=2",
            "pytest -vv",
            "pytest --quiet",
        ] {
            assert!(!only(given).contains(" -v "), "{given}");
        }
        assert!(recognise("PYTHONHASHSEED=0 .venv/bin/py.test -x").is_some());
        assert!(recognise("python -m pytest --tb=short").is_some());
        // What runs pytest in the project's environment stays before it in phase one.
        for (given, probe) in [
            (
                "env PYTHONPATH=src .venv/bin/python -m pytest tests -q",
                "env PYTHONPATH=src .venv/bin/python -m pytest -q t/a.py",
            ),
            ("uv run --frozen pytest", "uv run --frozen pytest -v t/a.py"),
            (
                "poetry run python -m pytest",
                "poetry run python -m pytest -v t/a.py",
            ),
            ("pdm run pytest -x", "pdm run pytest -x -v t/a.py"),
            ("hatch run test:pytest", "hatch run test:pytest -v t/a.py"),
        ] {
            assert_eq!(only(given), probe, "{given}");
        }
        assert_eq!(recognise("env -C sub pytest"), None);
        // pytest-cov's options.
        let p = recognise("pytest --cov=pkg --cov-report xml --cov-context=test tests").unwrap();
        assert_eq!(p.paths, vec!["tests"]);
        assert!(p.records_contexts());
        assert_eq!(recognise("pytest --cov --cov-report=xml"), None);
        for other in [
            "npm test",
            "pytest && echo done",
            "pytest -k 'not slow'",
            "pytest --lf",
            "pytest --cov src",
            "pytest --cov=pkg --cov-fail-under=90",
            "python3 -m unittest",
            "tox",
            "pytest $ARGS",
        ] {
            assert_eq!(recognise(other), None, "{other}");
        }
    }
}
