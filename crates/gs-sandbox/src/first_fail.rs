//! The first failing test of a run, recognised in the test command's output as it streams, per
//! runner: pytest's progress letters and `NODEID FAILED` lines, jest's `FAIL file` and `●`
//! headers, vitest's `×` lines, mocha's numbered failures ([`mocha`]), libtest's
//! `test NAME ... FAILED`, go's `--- FAIL: TestX`. Only
//! a provisional answer comes from here (the verdict stays the exit code's and the parser's):
//! the output is the commit's, so a line is matched within a bounded buffer and a longer one is
//! not read at all.

/// The longest line read; the rest of a longer one is skipped (no runner's status line is
/// near it, and a hostile line must not grow the buffer).
const MAX_LINE: usize = 4096;

mod mocha;

use std::time::Instant;

/// A runner whose output is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    Pytest,
    Jest,
    Vitest,
    Mocha,
    Cargo,
    Go,
}

impl Runner {
    /// The runner a parser's framework name stands for (see `parse::framework_from_command`).
    pub fn of(framework: &gs_model::Framework) -> Option<Runner> {
        TABLE
            .iter()
            .find(|e| framework == e.framework)
            .map(|e| e.runner)
    }
}

/// What the output has just told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A test failed now; its name when the same line gives it.
    Failing(Option<String>),
    /// The name of the failure already told (it comes after the moment: pytest `-q` prints
    /// `F` as the test ends, the node id only in its summary).
    Named(String),
}

/// What a line says.
enum Seen {
    Nothing,
    Found(Found),
    /// pytest's `short test summary info` begins: its `FAILED`/`ERROR` lines name the tests.
    Summary,
    /// pytest's progress lines are over (a `===` section began).
    PastProgress,
    /// A test file's name, for the failures under it (jest's `FAIL file`, vitest's `❯ file`).
    File(String, Option<Found>),
}

/// One runner's rules: what a whole line says, and what the line so far says (a progress
/// line grows a letter per test and ends only when the file or the width does).
struct Entry {
    runner: Runner,
    framework: &'static str,
    line: fn(&str, &mut State) -> Seen,
    partial: fn(&str) -> Option<Partial>,
}

/// What the line so far says.
enum Partial {
    Found(Found),
    /// A progress line whose letters show a failure, this long (the moment is told once the
    /// line grows on as a progress line does).
    Letter(usize),
}

/// One entry per runner; a new runner is one more entry.
const TABLE: &[Entry] = &[
    Entry {
        runner: Runner::Pytest,
        framework: "pytest",
        line: pytest_line,
        partial: pytest_partial,
    },
    Entry {
        runner: Runner::Jest,
        framework: "jest",
        line: jest_line,
        partial: no_partial,
    },
    Entry {
        runner: Runner::Vitest,
        framework: "vitest",
        line: vitest_line,
        partial: no_partial,
    },
    Entry {
        runner: Runner::Mocha,
        framework: "mocha",
        line: mocha::line,
        partial: mocha::partial,
    },
    Entry {
        runner: Runner::Cargo,
        framework: "cargo",
        line: cargo_line,
        partial: cargo_partial,
    },
    Entry {
        runner: Runner::Go,
        framework: "go",
        line: go_line,
        partial: no_partial,
    },
];

/// What the watcher remembers between lines.
#[derive(Default)]
struct State {
    in_summary: bool,
    past_progress: bool,
    file: Option<String>,
    mocha: mocha::Mocha,
}

/// Reads a run's output chunk by chunk and tells its first failure once, then its name once,
/// each with the moment it was read.
pub struct Watcher {
    entry: &'static Entry,
    line: Vec<u8>,
    /// The line being read is longer than [`MAX_LINE`]: skipped to its end.
    long: bool,
    state: State,
    failing: bool,
    named: bool,
    /// The line so far ended in a progress letter `F` at this moment, and how long it was:
    /// told as the failure's moment once more of the line shows it is a progress line (a
    /// line that merely begins with `F` or `E` is not one).
    pending: Option<(Instant, usize)>,
}

impl Watcher {
    pub fn new(runner: Runner) -> Watcher {
        Watcher {
            entry: TABLE
                .iter()
                .find(|e| e.runner == runner)
                .expect("every runner has an entry"),
            line: Vec::with_capacity(256),
            long: false,
            state: State::default(),
            failing: false,
            named: false,
            pending: None,
        }
    }

    /// Nothing more to tell.
    fn done(&self) -> bool {
        self.named
    }

    /// What `chunk` (the next bytes of the output, read at `now`) told: at most a failure and
    /// its name, each with its moment.
    pub fn feed(&mut self, chunk: &[u8], now: Instant) -> Vec<(Found, Instant)> {
        let mut out = Vec::new();
        if self.done() {
            return out;
        }
        for &b in chunk {
            if b == b'\n' || b == b'\r' {
                if !self.long && !self.line.is_empty() {
                    let text = plain(&self.line);
                    if !self.named {
                        let seen = (self.entry.line)(&text, &mut self.state);
                        self.take(seen, now, &mut out);
                    }
                }
                self.pending = None;
                self.line.clear();
                self.long = false;
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            } else {
                self.long = true;
                self.pending = None;
            }
            if self.done() {
                return out;
            }
        }
        if !self.failing && !self.long && !self.line.is_empty() && !self.state.past_progress {
            match (self.entry.partial)(&plain(&self.line)) {
                Some(Partial::Found(f)) => self.take(Seen::Found(f), now, &mut out),
                Some(Partial::Letter(len)) => match self.pending {
                    Some((_, was)) if len > was => {
                        self.take(Seen::Found(Found::Failing(None)), now, &mut out)
                    }
                    Some(_) => {}
                    None => self.pending = Some((now, len)),
                },
                None => self.pending = None,
            }
        }
        out
    }

    fn take(&mut self, seen: Seen, now: Instant, out: &mut Vec<(Found, Instant)>) {
        let found = match seen {
            Seen::Nothing => None,
            Seen::Summary => {
                self.state.in_summary = true;
                self.state.past_progress = true;
                None
            }
            Seen::PastProgress => {
                self.state.past_progress = true;
                None
            }
            Seen::File(f, found) => {
                self.state.file = Some(f);
                found
            }
            Seen::Found(f) => Some(f),
        };
        match found {
            Some(Found::Failing(name)) if !self.failing => {
                self.failing = true;
                self.named = name.is_some();
                let at = self.pending.take().map_or(now, |(at, _)| at);
                out.push((Found::Failing(name), at));
            }
            Some(Found::Failing(Some(name)) | Found::Named(name)) if self.failing => {
                self.named = true;
                out.push((Found::Named(name), now));
            }
            _ => {}
        }
    }
}

/// A line as text, without the colour codes runners add (`ESC [ … m`).
fn plain(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if !text.contains('\u{1b}') {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn no_partial(_: &str) -> Option<Partial> {
    None
}

/// pytest, verbose: `tests/a.py::test_x FAILED  [ 50%]` (with xdist `[gw0] [ 50%] FAILED
/// tests/a.py::test_x`); its summary's `FAILED tests/a.py::test_x - why`; the progress letters.
fn pytest_line(line: &str, state: &mut State) -> Seen {
    if line.starts_with('=') && line.contains(" short test summary info ") {
        return Seen::Summary;
    }
    if line.starts_with("==") && !line.contains(" test session starts ") {
        return Seen::PastProgress;
    }
    let words: Vec<&str> = line.split_whitespace().take(8).collect();
    let failed = |w: &str| matches!(w, "FAILED" | "ERROR");
    if let [id, word, ..] = words[..] {
        if id.contains("::") && failed(word) {
            return Seen::Found(Found::Failing(Some(id.to_string())));
        }
    }
    let after_workers = words
        .iter()
        .position(|w| !(w.starts_with('[') || w.ends_with("%]")))
        .unwrap_or(words.len());
    if after_workers > 0 || state.in_summary {
        if let [word, id, ..] = words[after_workers..] {
            if failed(word) && (id.contains("::") || state.in_summary) {
                return Seen::Found(Found::Failing(Some(id.to_string())));
            }
        }
    }
    match pytest_partial(line) {
        Some(_) if state.past_progress => Seen::Nothing,
        Some(Partial::Found(f)) => Seen::Found(f),
        Some(Partial::Letter(_)) => Seen::Found(Found::Failing(None)),
        None => Seen::Nothing,
    }
}

/// A progress line so far: `tests/a.py ..F` (or without the file, `-q`), an `F` or `E` among
/// pytest's result letters, then at most the `[ 50%]` that ends it (or its beginning).
fn pytest_partial(line: &str) -> Option<Partial> {
    if let Some(f) = pytest_verbose_partial(line) {
        return Some(Partial::Found(f));
    }
    let line = line.trim_end();
    let body = match line.find(" [") {
        Some(i) if line[i + 2..].chars().all(|c| " 0123456789%]".contains(c)) => {
            line[..i].trim_end()
        }
        _ => line,
    };
    let letters = match body.split_once(' ') {
        Some((file, rest)) if file.contains('.') && !file.contains("::") => rest,
        Some(_) => return None,
        None => body,
    };
    let all_letters = !letters.is_empty() && letters.chars().all(|c| ".sxXFER".contains(c));
    (all_letters && letters.contains(['F', 'E'])).then_some(Partial::Letter(line.len()))
}

/// `tests/a.py::test_x FAILED`, before its `[ 50%]` came.
fn pytest_verbose_partial(line: &str) -> Option<Found> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some(id), Some("FAILED" | "ERROR")) if id.contains("::") => {
            Some(Found::Failing(Some(id.to_string())))
        }
        _ => None,
    }
}

/// jest: `FAIL path/x.test.js` when a file has run, then a `● describe › test` header for each
/// failure (`● Test suite failed to run`: the file is the name).
fn jest_line(line: &str, state: &mut State) -> Seen {
    let t = line.trim();
    if let Some(file) = t.strip_prefix("FAIL ").map(str::trim) {
        if !file.is_empty() && !file.contains(' ') {
            return Seen::File(file.to_string(), Some(Found::Failing(None)));
        }
    }
    if let (Some(name), Some(file)) = (t.strip_prefix("● "), state.file.as_ref()) {
        let name = name.trim();
        if name == "Test suite failed to run" {
            return Seen::Found(Found::Named(file.clone()));
        }
        if !name.is_empty() && name != "Console" {
            return Seen::Found(Found::Named(name.to_string()));
        }
    }
    Seen::Nothing
}

/// vitest: ` ❯ file (5 tests | 3 failed)` and its `   × describe > test 6ms` lines as a file
/// ends; its summary's ` FAIL  file > describe > test`.
fn vitest_line(line: &str, state: &mut State) -> Seen {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("FAIL ") {
        let name = rest.trim();
        if !name.is_empty() {
            return Seen::Found(Found::Failing(Some(name.to_string())));
        }
    }
    if let Some(rest) = t.strip_prefix("❯ ") {
        if let Some((file, counts)) = rest.split_once(" (") {
            if counts.contains(" failed") {
                return Seen::File(file.trim().to_string(), None);
            }
        }
    }
    if let (Some(rest), Some(file)) = (t.strip_prefix("× "), state.file.as_ref()) {
        let name = match rest.rsplit_once(' ') {
            Some((n, ms)) if ms.ends_with("ms") && ms[..ms.len() - 2].parse::<f64>().is_ok() => n,
            _ => rest,
        };
        return Seen::Found(Found::Failing(Some(format!("{file} > {}", name.trim()))));
    }
    Seen::Nothing
}

/// libtest: `test some::name ... FAILED`.
fn cargo_line(line: &str, _: &mut State) -> Seen {
    match cargo_partial(line) {
        Some(Partial::Found(f)) => Seen::Found(f),
        _ => Seen::Nothing,
    }
}

fn cargo_partial(line: &str) -> Option<Partial> {
    let name = line
        .strip_prefix("test ")?
        .trim_end()
        .strip_suffix(" ... FAILED")?;
    (!name.is_empty()).then(|| Partial::Found(Found::Failing(Some(name.to_string()))))
}

/// One event of `go test -json`, which streams each test's events as they happen (without it,
/// go prints a package's output when the package ends, in the packages' order).
#[derive(serde::Deserialize)]
struct GoEvent {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Test")]
    test: Option<String>,
    #[serde(rename = "Package")]
    package: Option<String>,
}

/// go test: `--- FAIL: TestX (0.00s)`; with `-json`, a `fail` event (a package's own when it
/// failed without a failing test: it did not build).
fn go_line(line: &str, _: &mut State) -> Seen {
    if line.starts_with('{') {
        return match serde_json::from_str::<GoEvent>(line) {
            Ok(e) if e.action == "fail" => match e.test.or(e.package) {
                Some(name) if !name.is_empty() => Seen::Found(Found::Failing(Some(name))),
                _ => Seen::Nothing,
            },
            _ => Seen::Nothing,
        };
    }
    let Some(rest) = line.strip_prefix("--- FAIL: ") else {
        return Seen::Nothing;
    };
    let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n).trim();
    if name.is_empty() {
        return Seen::Nothing;
    }
    Seen::Found(Found::Failing(Some(name.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        // The fixtures stay in the workspace's tests/, two levels above this crate.
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/output")
            .join(rel);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Everything `text` tells, fed in chunks of `n` bytes.
    fn watch(runner: Runner, text: &[u8], n: usize) -> Vec<Found> {
        let mut w = Watcher::new(runner);
        text.chunks(n)
            .flat_map(|c| w.feed(c, Instant::now()))
            .map(|(f, _)| f)
            .collect()
    }

    fn failing(name: &str) -> Vec<Found> {
        vec![Found::Failing(Some(name.into()))]
    }

    #[test]
    fn each_runner_names_its_first_failure() {
        let cases: &[(Runner, &str, Vec<Found>)] = &[
            (
                Runner::Cargo,
                "cargo/workspace_some_fail.txt",
                failing("tests::panics_plainly"),
            ),
            (Runner::Go, "go/some_fail.txt", failing("TestAddWrong")),
            (Runner::Go, "go/some_fail_v.txt", failing("TestAddWrong")),
            (Runner::Go, "go/some_fail_json.txt", failing("TestAddWrong")),
            (
                Runner::Jest,
                "jest/some_fail.txt",
                vec![
                    Found::Failing(None),
                    Found::Named("calc › adds wrong".into()),
                ],
            ),
            (
                Runner::Jest,
                "jest/some_fail_color.txt",
                vec![
                    Found::Failing(None),
                    Found::Named("calc › adds wrong".into()),
                ],
            ),
            (
                Runner::Jest,
                "jest/suite_error.txt",
                vec![
                    Found::Failing(None),
                    Found::Named("jbroken/broken.test.js".into()),
                ],
            ),
            (
                Runner::Vitest,
                "vitest/some_fail.txt",
                failing("vfail/calc.test.js > calc > adds wrong"),
            ),
            (
                Runner::Mocha,
                "mocha/some_fail.txt",
                failing("calc adds wrong"),
            ),
            (
                Runner::Mocha,
                "mocha/express_some_fail.txt",
                failing("express.static() basic operations should not choke on auth-looking URL"),
            ),
            (
                Runner::Mocha,
                "mocha/some_fail_color.txt",
                failing("calc adds wrong"),
            ),
            (
                Runner::Mocha,
                "mocha/some_fail_dot.txt",
                vec![Found::Failing(None), Found::Named("calc adds wrong".into())],
            ),
            (
                Runner::Mocha,
                "mocha/some_fail_tap.txt",
                failing("calc adds wrong"),
            ),
            (
                Runner::Mocha,
                "mocha/some_fail_tap13.txt",
                failing("calc adds wrong"),
            ),
            (
                Runner::Pytest,
                "pytest/some_fail.txt",
                vec![
                    Found::Failing(None),
                    Found::Named("tests/test_calc.py::TestCalc::test_divide_by_zero".into()),
                ],
            ),
            (
                Runner::Pytest,
                "pytest/some_fail_v.txt",
                failing("tests/test_calc.py::TestCalc::test_divide_by_zero"),
            ),
            (
                Runner::Pytest,
                "pytest/collection_error.txt",
                failing("tests/test_broken.py"),
            ),
        ];
        for (runner, file, want) in cases {
            for n in [1, 7, 1 << 16] {
                let got = watch(*runner, &fixture(file), n);
                assert_eq!(&got, want, "{file} in chunks of {n}");
            }
        }
    }

    #[test]
    fn a_passing_suites_output_tells_nothing() {
        for (runner, file) in [
            (Runner::Cargo, "cargo/all_pass.txt"),
            (Runner::Go, "go/all_pass.txt"),
            (Runner::Go, "go/all_pass_v.txt"),
            (Runner::Jest, "jest/all_pass.txt"),
            (Runner::Vitest, "vitest/all_pass.txt"),
            (Runner::Mocha, "mocha/all_pass.txt"),
            (Runner::Mocha, "mocha/all_pass_tap.txt"),
            (Runner::Mocha, "mocha/load_error.txt"),
            (Runner::Pytest, "pytest/all_pass.txt"),
        ] {
            assert_eq!(watch(runner, &fixture(file), 5), vec![], "{file}");
        }
        // What a passing test prints is no failure: not a summary line outside the summary, a
        // log line, another runner's line, nor a letter in a sentence.
        let printed = b"FAILED tests/test_b.py::test_b - printed\nERROR    root:test_b.py:3 logged\ntest x ... FAILED\nFAILED\nEEK\n";
        assert_eq!(watch(Runner::Pytest, printed, 3), vec![]);
    }

    #[test]
    fn pytest_tells_the_moment_a_letter_or_a_verbose_line_shows_the_failure() {
        // `-q`: the `F` is read before its line ends, told with its moment once the line goes
        // on as a progress line does; the node id only comes in the summary.
        let mut w = Watcher::new(Runner::Pytest);
        let t0 = Instant::now();
        let later = t0 + std::time::Duration::from_secs(3);
        assert_eq!(w.feed(b"...", t0), vec![]);
        assert_eq!(w.feed(b"F", t0), vec![]);
        assert_eq!(w.feed(b".", later), vec![(Found::Failing(None), t0)]);
        assert_eq!(w.feed(b".   [100%]\n=== FAILURES ===\n", later), vec![]);
        let summary = b"=========== short test summary info ===========\nFAILED tests/t.py::test_x - assert 1 == 2\nFAILED tests/t.py::test_y\n";
        assert_eq!(
            w.feed(summary, later),
            vec![(Found::Named("tests/t.py::test_x".into()), later)]
        );
        // The line that ends after its `F` is a progress line too; one that goes on with other
        // words is not.
        let mut w = Watcher::new(Runner::Pytest);
        assert_eq!(w.feed(b"F", t0), vec![]);
        assert_eq!(w.feed(b"  ", later), vec![]);
        assert_eq!(w.feed(b"[ 10%]\n", later), vec![(Found::Failing(None), t0)]);
        assert_eq!(
            watch(Runner::Pytest, b"E   ModuleNotFoundError: x\n", 1),
            vec![]
        );
        // Default verbosity: the file, then its letters.
        assert_eq!(watch(Runner::Pytest, b"tests/test_a.py .s", 64), vec![]);
        assert_eq!(
            watch(Runner::Pytest, b"tests/test_a.py .sE.", 1),
            vec![Found::Failing(None)]
        );
        // `-v`: the node id and FAILED, before the percentage.
        assert_eq!(
            watch(
                Runner::Pytest,
                b"tests/a.py::test_x[1-2] PASSED  [ 50%]\ntests/a.py::test_y FAILED",
                64
            ),
            failing("tests/a.py::test_y")
        );
        assert_eq!(
            watch(
                Runner::Pytest,
                b"[gw1] [ 50%] FAILED tests/a.py::test_y \n",
                64
            ),
            failing("tests/a.py::test_y")
        );
    }

    #[test]
    fn a_huge_line_is_skipped_within_a_bounded_buffer() {
        let mut w = Watcher::new(Runner::Cargo);
        let mut huge = b"test x ... FAILED".to_vec();
        huge.extend(std::iter::repeat_n(b'a', 10 * MAX_LINE));
        let now = Instant::now();
        assert_eq!(w.feed(&huge, now), vec![]);
        assert!(w.line.capacity() <= 2 * MAX_LINE);
        assert_eq!(w.feed(b" ... FAILED\n", now), vec![]);
        assert_eq!(
            w.feed(b"test y ... FAILED\n", now),
            vec![(Found::Failing(Some("y".into())), now)]
        );
    }
}
