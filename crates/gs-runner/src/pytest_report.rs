//! git-sandbox's pytest reporter (`pytest_report.py`): the per-test results of a run of the
//! user's command as it is, written beside its output, where no test's print can reach them.
//!
//! It is loaded through `PYTEST_PLUGINS`, so it reaches every pytest the command starts (`make
//! test`, `tox -e` with the variables passed on) and changes no word of the command. Its module
//! has a name made for the run, in a directory of the run's `TMPDIR` put before the user's
//! `PYTHONPATH`: a commit cannot hold a module of that name (pytest's working directory is ahead
//! of `PYTHONPATH` on `sys.path`). It writes one JSON line per outcome to a file of the tree
//! named for the run, read back as an artifact.

use gs_model::TestCounts;
use std::collections::HashSet;

const PLUGIN: &str = include_str!("pytest_report.py");

/// What a probe's pytest gets first in `PYTEST_ADDOPTS` (the reporter takes it off again).
const PLAIN: &str = "--assert=plain";

/// One run's reporter: its module's name and the file it writes, relative to the tree.
pub struct Reporter {
    module: String,
    /// The report, relative to the directory the command starts in.
    pub file: String,
    /// Where the test map is written, relative to the same directory, when the run makes one
    /// (see [`Reporter::mapping`]).
    pub map: Option<String>,
    /// Tests (node ids) run before the others, in this order (a probe's; see [`Reporter::probe`]).
    first: Vec<String>,
    /// A probe's pytest runs with plain asserts (see [`Reporter::probe`]).
    plain: bool,
}

impl Reporter {
    /// A reporter with names made for one run.
    pub fn new() -> Reporter {
        let id = gs_util::random_hex(8);
        Reporter {
            module: format!("_git_sandbox_report_{id}"),
            file: format!(".git-sandbox-report-{id}.jsonl"),
            map: None,
            first: Vec::new(),
            plain: false,
        }
    }

    /// The reporter of a probe, never of the recorded run: the collected tests named in `first`
    /// run before the others, in its order (the rest keep theirs; names pytest did not collect
    /// are passed over), and pytest runs with `--assert=plain` (through `PYTEST_ADDOPTS`, before
    /// the command's own options, so a command's `--assert` stands). Rewriting a test file's
    /// asserts costs more than compiling it (flask's `tests/test_basic.py`: about 150 ms, a
    /// third of a one-test probe) and every run pays it again, as runs write no bytecode; a
    /// plain assert fails the same tests, only its message says less, and the record's
    /// messages are the run's. The reporter gives `PYTEST_ADDOPTS` back as it was once pytest
    /// has read it, so a session a test starts sees the user's.
    pub fn probe(first: &[String]) -> Reporter {
        Reporter {
            first: first.to_vec(),
            plain: true,
            ..Reporter::new()
        }
    }

    /// A reporter that also makes the test map: which functions of the project each test calls
    /// (a run of its own, off the critical path: tracing calls slows the tests).
    pub fn mapping() -> Reporter {
        let mut r = Reporter::new();
        r.map = Some(
            r.file
                .replace("-report-", "-map-")
                .replace(".jsonl", ".json"),
        );
        r
    }

    /// `line` (the user's command, unchanged) run with the reporter loaded: the module written
    /// to the run's `TMPDIR`, the variables set, then the line in the same shell. When the
    /// module cannot be written the line runs as it is, without the reporter.
    pub fn wrap(&self, line: &str) -> String {
        let dir = format!("\"${{TMPDIR:-/tmp}}/.{}\"", self.module);
        format!(
            "if mkdir -p {dir} 2>/dev/null && printf '%s' {source} 2>/dev/null > {dir}/{m}.py; then \
             export PYTHONPATH={dir}\"${{PYTHONPATH:+:$PYTHONPATH}}\" \
             PYTEST_PLUGINS={m}\"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}\" \
             GIT_SANDBOX_PYTEST_REPORT=\"$PWD/{file}\"{map}{first}{plain}; fi; {line}",
            line = with_plugin_path(line, &dir),
            source = gs_select::command::quote(PLUGIN),
            m = self.module,
            file = self.file,
            map = self
                .map
                .as_ref()
                .map(|m| format!(" GIT_SANDBOX_PYTEST_MAP=\"$PWD/{m}\""))
                .unwrap_or_default(),
            // One name a line: a node id holds no newline (pytest's ids are of one line).
            first = if self.first.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = self
                    .first
                    .iter()
                    .filter(|n| !n.contains(['\n', '\0']))
                    .map(String::as_str)
                    .collect();
                format!(
                    " GIT_SANDBOX_PYTEST_FIRST={}",
                    gs_select::command::quote(&names.join("\n"))
                )
            },
            plain = if self.plain {
                format!(
                    " GIT_SANDBOX_PYTEST_PLAIN=1 PYTEST_ADDOPTS=\"{PLAIN}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}\""
                )
            } else {
                String::new()
            },
        )
    }
}

/// `line` with the reporter's directory `dir` put first in each `PYTHONPATH=` it sets itself
/// (`PYTHONPATH=src pytest`, `env PYTHONPATH=src …`, `export PYTHONPATH=…`): its own value would
/// hide the exported one, and pytest would stop at a plugin it cannot import. The rest of the
/// value is the command's, as written.
fn with_plugin_path(line: &str, dir: &str) -> String {
    const WORD: &str = "PYTHONPATH=";
    let mut out = String::with_capacity(line.len() + dir.len());
    let mut rest = line;
    while let Some(i) = rest.find(WORD) {
        let before = line.len() - rest.len() + i;
        let starts_word = line[..before]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || ";&|(`".contains(c));
        let end = i + WORD.len();
        out.push_str(&rest[..end]);
        if starts_word {
            out.push_str(dir);
            let empty = rest[end..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || ";&|)`".contains(c));
            if !empty {
                out.push(':');
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter::new()
    }
}

/// The per-test results a report holds: counts as pytest's summary gives them (xfailed as
/// skipped, xpassed as passed, errors of setup, teardown and collection), the failing and
/// erroring ids in order, and every id once. `None` when it holds no outcome (the command ran
/// no pytest, or one that did not load the reporter).
pub fn read(text: &str) -> Option<TestCounts> {
    let mut c = TestCounts {
        passed: Some(0),
        failed: Some(0),
        skipped: Some(0),
        errors: Some(0),
        ..TestCounts::default()
    };
    let mut seen = HashSet::new();
    let mut any = false;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(id), Some(outcome)) = (v["id"].as_str(), v["outcome"].as_str()) else {
            continue;
        };
        let slot = match outcome {
            "passed" | "xpassed" => &mut c.passed,
            "failed" => &mut c.failed,
            "skipped" | "xfailed" => &mut c.skipped,
            "error" => &mut c.errors,
            _ => continue,
        };
        *slot = slot.map(|n| n + 1);
        any = true;
        if matches!(outcome, "failed" | "error")
            && c.failures.len() < gs_parse::MAX_REPORTED_FAILURES
        {
            c.failures.push(gs_model::Failure {
                name: id.to_string(),
                message: String::new(),
            });
        }
        // A collection error names a file, not a test.
        let a_test = outcome != "error" || id.contains("::");
        if a_test && c.ids.len() <= gs_model::MAX_TEST_IDS && seen.insert(id.to_string()) {
            c.ids.push(id.to_string());
        }
    }
    let sum = [c.passed, c.failed, c.skipped, c.errors]
        .into_iter()
        .flatten()
        .sum();
    c.total = Some(sum);
    any.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_names_its_own_module_and_file() {
        let (a, b) = (Reporter::new(), Reporter::new());
        assert_ne!(a.module, b.module);
        assert_ne!(a.file, b.file);
        let line = a.wrap("python3 -m pytest -q");
        assert!(line.ends_with("; fi; python3 -m pytest -q"), "{line}");
        assert!(line.contains(&format!("PYTEST_PLUGINS={}", a.module)));
    }

    /// Run by a real shell, the line writes the module and sets the variables before the
    /// command; where it cannot write the module, the command runs as it is.
    #[test]
    fn the_command_runs_with_the_reporter_or_as_it_is() {
        let r = Reporter::new();
        let show = "echo \"$PYTEST_PLUGINS|$GIT_SANDBOX_PYTEST_REPORT\"; exit 3";
        let run = |tmp: &std::path::Path| {
            std::process::Command::new("sh")
                .args(["-c", &r.wrap(show)])
                .env("TMPDIR", tmp)
                .env("PYTEST_PLUGINS", "theirs")
                .current_dir(tmp)
                .output()
                .unwrap()
        };
        let tmp = tempfile::tempdir().unwrap();
        let o = run(tmp.path());
        assert_eq!(o.status.code(), Some(3), "{o:?}");
        let said = String::from_utf8_lossy(&o.stdout);
        let file = tmp.path().join(&r.file);
        assert_eq!(
            said.trim(),
            format!("{},theirs|{}", r.module, file.display())
        );
        let module = tmp.path().join(format!(".{0}/{0}.py", r.module));
        assert_eq!(std::fs::read_to_string(module).unwrap(), PLUGIN);
        // A TMPDIR that is a file: no module, no variables, the command all the same.
        let blocked = tmp.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let o = std::process::Command::new("sh")
            .args(["-c", &r.wrap(show)])
            .env("TMPDIR", &blocked)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "|");
    }

    /// A probe's pytest reads plain asserts first and the command's own options after them
    /// (pytest takes the last `--assert`); a run's line leaves `PYTEST_ADDOPTS` as it was.
    #[test]
    fn a_probe_asks_for_plain_asserts_before_the_users_options() {
        let tmp = tempfile::tempdir().unwrap();
        let show = "echo \"${PYTEST_ADDOPTS-unset}|${GIT_SANDBOX_PYTEST_PLAIN-}\"";
        let said = |r: &Reporter, theirs: Option<&str>| {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &r.wrap(show)])
                .env("TMPDIR", tmp.path())
                .env_remove("PYTEST_ADDOPTS")
                .current_dir(tmp.path());
            if let Some(t) = theirs {
                c.env("PYTEST_ADDOPTS", t);
            }
            let o = c.output().unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let probe = Reporter::probe(&[]);
        assert_eq!(said(&probe, None), "--assert=plain|1");
        assert_eq!(
            said(&probe, Some("--assert=rewrite -x")),
            "--assert=plain --assert=rewrite -x|1"
        );
        assert_eq!(said(&Reporter::new(), None), "unset|");
        assert_eq!(said(&Reporter::new(), Some("-x")), "-x|");
    }

    #[test]
    fn a_pythonpath_the_command_sets_keeps_the_reporters_directory_first() {
        let with = |l: &str| with_plugin_path(l, "\"$D\"");
        assert_eq!(
            with("PYTHONPATH=src pytest"),
            "PYTHONPATH=\"$D\":src pytest"
        );
        assert_eq!(
            with("env -i PYTHONPATH=src:lib python -m pytest"),
            "env -i PYTHONPATH=\"$D\":src:lib python -m pytest"
        );
        assert_eq!(
            with("export PYTHONPATH=; pytest"),
            "export PYTHONPATH=\"$D\"; pytest"
        );
        assert_eq!(with("MYPYTHONPATH=x pytest"), "MYPYTHONPATH=x pytest");
        assert_eq!(with("pytest -q"), "pytest -q");
    }

    /// The reporter loads where the command sets PYTHONPATH itself (it used to stop pytest with
    /// "Error importing plugin"), run by a real shell and python.
    #[test]
    fn the_reporter_loads_beside_a_pythonpath_the_command_sets() {
        let r = Reporter::new();
        let tmp = tempfile::tempdir().unwrap();
        // The plugin's module is found (pytest would import it) and `src` is still on the path.
        let show = "env PYTHONPATH=src python3 -c 'import importlib.util as u, os, sys; m = os.environ[\"PYTEST_PLUGINS\"]; sys.exit(0 if u.find_spec(m) and any(p.endswith(\"src\") for p in sys.path) else 5)'";
        let o = std::process::Command::new("sh")
            .args(["-c", &r.wrap(show)])
            .env("TMPDIR", tmp.path())
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }

    #[test]
    fn outcomes_are_counted_as_pytest_counts_them() {
        let text = [
            r#"{"id": "t.py::a", "outcome": "passed"}"#,
            r#"{"id": "t.py::a", "outcome": "error"}"#,
            r#"{"id": "t.py::b", "outcome": "failed"}"#,
            r#"{"id": "t.py::c", "outcome": "xfailed"}"#,
            r#"{"id": "t.py::d", "outcome": "xpassed"}"#,
            r#"{"id": "u.py", "outcome": "error"}"#,
            "not json",
        ]
        .join("\n");
        let c = read(&text).unwrap();
        assert_eq!(
            (c.passed, c.failed, c.skipped, c.errors, c.total),
            (Some(2), Some(1), Some(1), Some(2), Some(6))
        );
        assert_eq!(c.ids, ["t.py::a", "t.py::b", "t.py::c", "t.py::d"]);
        assert_eq!(c.failures.len(), 3);
        assert_eq!(read("").map(|c| c.total), None);
    }
}
