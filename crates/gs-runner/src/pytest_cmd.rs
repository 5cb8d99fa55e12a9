//! Whether a test command is a plain pytest invocation that test files can be appended to, and
//! the two commands of a two-phase run: the selected files first, then the rest of the suite.

/// A recognised `pytest …`, `py.test …` or `python -m pytest …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pytest {
    /// The command as configured.
    full: String,
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

/// The plugin of a one-session run (see [`Pytest::one_session`]), and its module's name.
const PLUGIN: &str = include_str!("pytest_phases.py");
const PLUGIN_MODULE: &str = "_git_sandbox_phases";

/// The longest one-session command: the kernel refuses a single argument over 128 KiB.
const MAX_COMMAND: usize = 120 * 1024;

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
        full: command.trim().to_string(),
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

/// A word for `sh -c`, quoted when it holds anything but plain path characters.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:+@%=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
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
            c.push_str(&quote(f));
        }
        c
    }

    /// Both phases in one pytest session: the whole command with git-sandbox's plugin
    /// (`pytest_phases.py`, written to the run's `TMPDIR` first) collecting and running the
    /// tests of `files` (test files, directories or node ids) before it collects the rest,
    /// telling the first failure by its node id and where phase one ended. `None` when the command line would grow past what one argument
    /// to `sh -c` may hold.
    pub fn one_session(&self, files: &[String]) -> Option<String> {
        let list = serde_json::to_string(files).ok()?;
        let source = PLUGIN.replacen("PHASE_ONE = []", &format!("PHASE_ONE = {list}"), 1);
        let dir = "\"${TMPDIR:-/tmp}/.git-sandbox-pytest\"";
        let c = format!(
            "mkdir -p {dir} && printf '%s' {} > {dir}/{PLUGIN_MODULE}.py && \
             PYTHONPATH={dir}\"${{PYTHONPATH:+:$PYTHONPATH}}\" {} -p {PLUGIN_MODULE}",
            quote(&source),
            self.full
        );
        (c.len() < MAX_COMMAND).then_some(c)
    }

    /// Phase two: the whole command, every test of `files` (test files, or node ids) deselected
    /// (a node id prefix that ends in `::` matches that file's tests only).
    pub fn without(&self, files: &[String]) -> String {
        let mut c = self.full.clone();
        for f in files {
            c.push_str(" --deselect ");
            if f.contains("::") {
                c.push_str(&quote(f));
            } else {
                c.push_str(&quote(&format!("{f}::")));
            }
        }
        c
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
    fn a_one_session_line_writes_the_plugin_with_phase_one_and_runs_the_whole_command() {
        let p = recognise("python3 -m pytest -q tests").unwrap();
        let files = [
            "tests/it's \"odd\".py".to_string(),
            "tests/a b::t[1]".into(),
        ];
        let line = p.one_session(&files).unwrap();
        assert!(
            line.ends_with("python3 -m pytest -q tests -p _git_sandbox_phases"),
            "{line}"
        );
        // The line's first half, run by a real shell, writes the plugin with the list as
        // Python reads it.
        let (write, _) = line.split_once(" && PYTHONPATH=").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("sh")
            .args(["-c", write])
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let plugin = tmp
            .path()
            .join(".git-sandbox-pytest/_git_sandbox_phases.py");
        let text = std::fs::read_to_string(&plugin).unwrap();
        assert!(
            text.contains(r#"PHASE_ONE = ["tests/it's \"odd\".py","tests/a b::t[1]"]"#),
            "{text}"
        );
        let o = std::process::Command::new("python3")
            .arg("-c")
            .arg("import ast, sys; t = ast.parse(open(sys.argv[1]).read()); print([n.value for n in ast.walk(t) if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', None) == 'PHASE_ONE'][0].elts[0].value)")
            .arg(&plugin)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "tests/it's \"odd\".py",
            "{o:?}"
        );
        // A selection too long for one argument to `sh -c` runs as two sessions.
        let many: Vec<String> = (0..20_000).map(|i| format!("tests/t{i}.py")).collect();
        assert_eq!(p.one_session(&many), None);
    }

    #[test]
    fn plain_pytest_invocations_are_recognised() {
        let p = recognise("python3 -m pytest -q -k slow tests").unwrap();
        assert_eq!(p.paths, vec!["tests"]);
        assert_eq!(
            p.only(&["tests/test_a.py".into()]),
            "python3 -m pytest -q -k slow tests/test_a.py"
        );
        assert_eq!(
            p.without(&["tests/test_a.py".into(), "t/it's.py".into()]),
            "python3 -m pytest -q -k slow tests --deselect tests/test_a.py:: --deselect 't/it'\\''s.py::'"
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
        // pytest-cov's options; node ids are deselected exactly.
        let p = recognise("pytest --cov=pkg --cov-report xml --cov-context=test tests").unwrap();
        assert_eq!(p.paths, vec!["tests"]);
        assert!(p.records_contexts());
        assert_eq!(
            p.without(&["tests/test_a.py::test_x[1]".into()]),
            "pytest --cov=pkg --cov-report xml --cov-context=test tests --deselect 'tests/test_a.py::test_x[1]'"
        );
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
