//! pytest: the closing summary line ("5 failed, 5 passed, 3 skipped, 2 xfailed, 1 error in 0.07s"),
//! the "short test summary info" list (node ids) and the `E` lines of the FAILURES/ERRORS sections.
//!
//! xfailed counts as skipped and xpassed as passed, as pytest's own JUnit report does; errors are
//! collection and fixture errors. The total is the sum (pytest prints none).

use std::collections::{HashMap, VecDeque};

use super::text::{count_item, join_message, push_failure};
use gs_model::TestCounts;

#[derive(Default, Clone)]
struct Summary {
    passed: u64,
    failed: u64,
    skipped: u64,
    errors: u64,
}

impl Summary {
    fn plus(mut self, s: &Summary) -> Summary {
        self.passed += s.passed;
        self.failed += s.failed;
        self.skipped += s.skipped;
        self.errors += s.errors;
        self
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped, {} errors",
            self.passed, self.failed, self.skipped, self.errors
        )
    }
}

/// Recognises a pytest summary line, with or without its `=====` frame.
fn summary_line(line: &str) -> Option<Summary> {
    let t = line.trim().trim_matches('=').trim();
    let at = t.rfind(" in ")?;
    let (list, duration) = (&t[..at], t[at + 4..].trim());
    let first = duration.split_whitespace().next()?;
    let secs = first
        .strip_suffix('s')
        .or_else(|| (duration.split_whitespace().nth(1) == Some("seconds")).then_some(first))?;
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let mut s = Summary::default();
    if list == "no tests ran" {
        return Some(s);
    }
    let mut known = false;
    for item in list.split(", ") {
        let (n, word) = count_item(item)?;
        known |= match word {
            "passed" | "xpassed" => {
                s.passed += n;
                true
            }
            "failed" => {
                s.failed += n;
                true
            }
            "skipped" | "xfailed" => {
                s.skipped += n;
                true
            }
            "error" | "errors" => {
                s.errors += n;
                true
            }
            "deselected" | "warning" | "warnings" | "rerun" => true,
            // Plugins add their own words ("2 subtests passed"); accept, don't count.
            w if w
                .bytes()
                .all(|b| b.is_ascii_alphabetic() || b == b' ' || b == b'-') =>
            {
                false
            }
            _ => return None,
        };
    }
    known.then_some(s)
}

/// `tests/a.py::TestX::test_y[1]` -> `TestX.test_y[1]`, the headline of its FAILURES section.
/// A parameter id is pytest's own text: its `::` (`test_x[a::b]`) stays.
fn headline_of(nodeid: &str) -> String {
    let (path, params) = match nodeid.find('[') {
        Some(i) => nodeid.split_at(i),
        None => (nodeid, ""),
    };
    match path.split_once("::") {
        Some((_, rest)) => format!("{}{params}", rest.replace("::", ".")),
        None => nodeid.to_string(),
    }
}

/// Section headline -> the key `headline_of` gives for the matching node id.
fn section_key(headline: &str) -> &str {
    for prefix in [
        "ERROR at setup of ",
        "ERROR at teardown of ",
        "ERROR at call of ",
    ] {
        if let Some(rest) = headline.strip_prefix(prefix) {
            return rest;
        }
    }
    headline
        .strip_prefix("ERROR collecting ")
        .unwrap_or(headline)
}

/// A line of underscores around a name: `____ TestCalc.test_wrong_sum ____`.
fn section_headline(line: &str) -> Option<&str> {
    if !line.starts_with("___") || !line.trim_end().ends_with("___") {
        return None;
    }
    let name = line.trim().trim_matches('_').trim();
    (!name.is_empty() && !name.starts_with("_ ")).then_some(name)
}

/// Collects one section's `E` lines, stripped of the `E` and its padding.
struct Section {
    key: String,
    pad: Option<usize>,
    lines: Vec<String>,
    len: usize,
}

impl Section {
    fn add(&mut self, line: &str) {
        let rest = &line[1..];
        let spaces = rest.len() - rest.trim_start_matches(' ').len();
        let pad = *self.pad.get_or_insert(spaces);
        if self.len <= super::text::MAX_MESSAGE {
            let text = &rest[spaces.min(pad)..];
            self.len += text.len() + 1;
            self.lines.push(text.to_string());
        }
    }
}

/// The counts of an output from a command that starts `sessions` pytest sessions (at least one
/// is assumed).
///
/// A summary line a test prints (through `capsys.disabled()`, from `atexit`) looks like pytest's
/// own. So one summary per session is taken, cross-checked with the per-test results the output
/// shows (progress letters, `-v` lines): with more summaries than sessions, the last ones that
/// agree with them, else the per-test results, and `note` says so. Each session's own summary
/// alone is taken as it is (its per-test lines may be cut by a test's prints, with capture off).
pub fn parse(text: &str, sessions: usize) -> Option<TestCounts> {
    let sessions = sessions.max(1);
    let mut summaries: Vec<Summary> = Vec::new();
    let mut tally = Tally::default();
    // (node id, message from the short summary), in order.
    let mut short: Vec<(String, String)> = Vec::new();
    let mut verbose: Vec<String> = Vec::new();
    let mut headlines: Vec<String> = Vec::new();
    let mut messages: HashMap<String, VecDeque<String>> = HashMap::new();
    let mut in_short_summary = false;
    let mut in_sections = false;
    let mut section: Option<Section> = None;
    // A `-v` line a test's print cut after its id: the id, until its outcome follows.
    let mut cut: Option<String> = None;

    for line in text.lines() {
        if line.starts_with("==") {
            close(&mut section, &mut messages);
            let title = line.trim_matches(|c| c == '=' || c == ' ');
            in_sections = matches!(title, "FAILURES" | "ERRORS");
            in_short_summary = title == "short test summary info";
            if let Some(s) = summary_line(line) {
                summaries.push(s);
                in_short_summary = false;
            }
            continue;
        }
        if let Some(s) = summary_line(line) {
            close(&mut section, &mut messages);
            summaries.push(s);
            in_short_summary = false;
            in_sections = false;
            continue;
        }
        if in_sections {
            if let Some(name) = section_headline(line) {
                close(&mut section, &mut messages);
                headlines.push(name.to_string());
                section = Some(Section {
                    key: section_key(name).to_string(),
                    pad: None,
                    lines: Vec::new(),
                    len: 0,
                });
                continue;
            }
            if let Some(s) = section.as_mut() {
                if line == "E" || line.starts_with("E ") {
                    s.add(line);
                }
            }
            continue;
        }
        if in_short_summary {
            for prefix in ["FAILED ", "ERROR "] {
                if let Some(rest) = line.strip_prefix(prefix) {
                    let (id, msg) = rest.split_once(" - ").unwrap_or((rest, ""));
                    short.push((id.trim().to_string(), msg.trim().to_string()));
                }
            }
            continue;
        }
        // `-v` progress: `tests/a.py::test_x FAILED   [ 50%]`.
        if let Some((id, outcome)) = verbose_line(line) {
            if matches!(outcome, "FAILED" | "ERROR") && verbose.len() < super::text::MAX_FAILURES {
                verbose.push(id.to_string());
            }
            tally.add_word(outcome, Some(id));
        } else if let Some(outcome) = verbose_rest(line) {
            tally.add_word(outcome, cut.take().as_deref());
        } else if let Some(letters) = progress_letters(line) {
            tally.add_letters(letters);
        } else if let Some(id) = verbose_head(line) {
            cut = Some(id.to_string());
        }
    }
    close(&mut section, &mut messages);
    let (totals, note) = choose(&summaries, sessions, &tally)?;

    let mut failures = Vec::new();
    let mut message_for = |id: &str, fallback: &str| {
        let from_section = messages
            .get_mut(&headline_of(id))
            .and_then(VecDeque::pop_front)
            .unwrap_or_default();
        if from_section.is_empty() {
            fallback.to_string()
        } else {
            from_section
        }
    };
    if !short.is_empty() {
        for (id, msg) in &short {
            let m = message_for(id, msg);
            push_failure(&mut failures, id, &m);
        }
    } else if !verbose.is_empty() {
        for id in &verbose {
            let m = message_for(id, "");
            push_failure(&mut failures, id, &m);
        }
    } else {
        for h in &headlines {
            let m = message_for(section_key(h), "");
            push_failure(&mut failures, section_key(h), &m);
        }
    }
    // The ids name the run only when each test it counted has its line.
    let ids = if tally.ids.len() as u64 >= totals.passed + totals.failed + totals.skipped {
        tally.ids
    } else {
        Vec::new()
    };

    Some(TestCounts {
        passed: Some(totals.passed),
        failed: Some(totals.failed),
        skipped: Some(totals.skipped),
        errors: Some(totals.errors),
        total: Some(totals.passed + totals.failed + totals.skipped + totals.errors),
        failures,
        ids,
        note,
    })
}

/// The run's counts: each session's summary, when there are no more summaries than sessions;
/// else the last `sessions` of them that agree with the per-test results, else those results.
/// `None` without a summary.
fn choose(
    summaries: &[Summary],
    sessions: usize,
    tally: &Tally,
) -> Option<(Summary, Option<String>)> {
    if summaries.is_empty() {
        return None;
    }
    let sum = |list: &[Summary]| list.iter().fold(Summary::default(), |a, s| a.plus(s));
    if summaries.len() <= sessions {
        return Some((sum(summaries), None));
    }
    let last = &summaries[summaries.len() - sessions..];
    if tally.seen() {
        if tally.agrees(&sum(last)) {
            return Some((sum(last), None));
        }
        // One session: pytest's own summary is the one its per-test lines agree with.
        if sessions == 1 {
            if let Some(s) = summaries.iter().rev().find(|s| tally.agrees(s)) {
                return Some((s.clone(), None));
            }
        }
        let counted = tally.summary();
        let note = format!(
            "the output has {} pytest summary lines for {sessions} session{}: the last says {}, \
             the per-test results {}; counted the per-test results (a test printed a summary?)",
            summaries.len(),
            if sessions == 1 { "" } else { "s" },
            sum(last),
            counted
        );
        return Some((counted, Some(note)));
    }
    let note = format!(
        "the output has {} pytest summary lines for {sessions} session{} and no per-test \
         results to check them with: counted the last",
        summaries.len(),
        if sessions == 1 { "" } else { "s" },
    );
    Some((sum(last), Some(note)))
}

/// Per-test results as pytest's own lines show them: its progress letters and `-v` words,
/// counted as its summary counts them, and the ids the `-v` lines name.
#[derive(Default)]
struct Tally {
    counts: Summary,
    lines: u64,
    ids: Vec<String>,
    named: std::collections::HashSet<String>,
}

impl Tally {
    fn seen(&self) -> bool {
        self.lines > 0
    }

    fn add_letters(&mut self, letters: &str) {
        for c in letters.chars() {
            self.count(match c {
                '.' | 'X' => "passed",
                'F' => "failed",
                's' | 'x' => "skipped",
                'E' => "errors",
                _ => continue,
            });
        }
    }

    fn add_word(&mut self, word: &str, id: Option<&str>) {
        self.count(match word {
            "PASSED" | "XPASS" => "passed",
            "FAILED" => "failed",
            "SKIPPED" | "XFAIL" => "skipped",
            _ => "errors",
        });
        if let Some(id) = id {
            if self.ids.len() <= gs_model::MAX_TEST_IDS && self.named.insert(id.to_string()) {
                self.ids.push(id.to_string());
            }
        }
    }

    fn count(&mut self, what: &str) {
        self.lines += 1;
        let c = &mut self.counts;
        match what {
            "passed" => c.passed += 1,
            "failed" => c.failed += 1,
            "skipped" => c.skipped += 1,
            _ => c.errors += 1,
        }
    }

    /// A summary agrees when it counts what the per-test lines show; errors of collection have
    /// no per-test line, so it may count more of those.
    fn agrees(&self, s: &Summary) -> bool {
        let c = &self.counts;
        (c.passed, c.failed, c.skipped) == (s.passed, s.failed, s.skipped) && c.errors <= s.errors
    }

    fn summary(&self) -> Summary {
        self.counts.clone()
    }
}

const OUTCOME_WORDS: [&str; 6] = ["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"];

/// A `-v` line: `tests/a.py::test_x PASSED   [ 50%]` (the id, and the outcome word).
fn verbose_line(line: &str) -> Option<(&str, &str)> {
    let mut words = line.split_whitespace();
    let (id, word) = (words.next()?, words.next()?);
    (id.contains("::") && OUTCOME_WORDS.contains(&word)).then_some((id, word))
}

/// The rest of a `-v` line a test's print cut off its id: `PASSED      [ 25%]`.
fn verbose_rest(line: &str) -> Option<&str> {
    let (word, rest) = line.trim().split_once(' ')?;
    (OUTCOME_WORDS.contains(&word) && progress_mark(rest.trim()).is_some()).then_some(word)
}

/// The head of a `-v` line a test's print cut: `tests/a.py::test_x ` alone.
fn verbose_head(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    let id = words.next()?;
    (id.contains("::") && words.next().is_none() && line.ends_with(' ')).then_some(id)
}

/// `[ 50%]` or `[ 3/16]` at the end of a progress line.
fn progress_mark(s: &str) -> Option<()> {
    let inner = s.strip_prefix('[')?.strip_suffix(']')?.trim();
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match inner.strip_suffix('%') {
        Some(p) => digits(p.trim()).then_some(()),
        None => {
            let (a, b) = inner.split_once('/')?;
            (digits(a.trim()) && digits(b.trim())).then_some(())
        }
    }
}

/// The outcome letters of a progress line: `tests/a.py .F.sx   [ 40%]`, `..F   [100%]`, a
/// file's line without the mark, or letters alone (a test's print cut the line after them);
/// `None` for any other line.
fn progress_letters(line: &str) -> Option<&str> {
    let t = line.trim_end();
    let body = match t.rfind('[') {
        Some(i) if progress_mark(&t[i..]).is_some() => t[..i].trim_end(),
        _ => t,
    };
    // With its file (`tests/a.py .F`), marked (`..F  [ 40%]`), or alone: letters a test's
    // print cut off (`..` before it).
    let letters = match body.split_once(' ') {
        Some((f, l)) if f.ends_with(".py") => l.trim(),
        _ => body.trim(),
    };
    let is_letters = letters.chars().all(|c| ".FEsxXR".contains(c));
    (is_letters && !letters.is_empty()).then_some(letters)
}

fn close(section: &mut Option<Section>, messages: &mut HashMap<String, VecDeque<String>>) {
    if let Some(s) = section.take() {
        let msg = join_message(s.lines.iter().map(String::as_str));
        messages.entry(s.key).or_default().push_back(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::super::text::clean;
    use super::*;

    fn run(fixture: &str) -> TestCounts {
        parse(&clean(fixture), 1).expect("pytest summary recognised")
    }

    fn names(c: &TestCounts) -> Vec<&str> {
        c.failures.iter().map(|f| f.name.as_str()).collect()
    }

    /// The default, `-v` and colour runs list the same failures as the `-q` run (`-v` in another
    /// order); their counts are in the fixture table, `tests/fixtures/output/expected.json`.
    #[test]
    fn some_fail_default_verbose_and_colour_agree() {
        let quiet = run(include_str!(
            "../../../tests/fixtures/output/pytest/some_fail.txt"
        ));
        for fixture in [
            include_str!("../../../tests/fixtures/output/pytest/some_fail_default.txt"),
            include_str!("../../../tests/fixtures/output/pytest/some_fail_v.txt"),
            include_str!("../../../tests/fixtures/output/pytest/some_fail_color.txt"),
        ] {
            let c = run(fixture);
            // `-rA` lists errors before failures; the set is the same.
            let sorted = |c: &TestCounts| {
                let mut f = c.failures.clone();
                f.sort_by(|a, b| a.name.cmp(&b.name));
                f
            };
            assert_eq!(sorted(&c), sorted(&quiet));
        }
    }

    /// With more summary lines than sessions, a summary the per-test results disagree with
    /// counts for nothing: pytest's own is the one they agree with, else they are counted, and
    /// the note says so. Each session's own summary is taken as it is.
    #[test]
    fn a_printed_summary_never_adds_to_the_counts() {
        let fake = "..F.                [100%]\n== 9 passed in 0.1s ==\n";
        let c = parse(
            &format!("{fake}1 failed, 3 passed in 0.2s\n== 500 passed in 0.1s ==\n"),
            1,
        )
        .unwrap();
        assert_eq!((c.passed, c.failed, c.note), (Some(3), Some(1), None));
        // pytest's own line replaced: the per-test results, said so.
        let c = parse(&format!("{fake}== 500 passed in 0.1s ==\n"), 1).unwrap();
        assert_eq!((c.passed, c.failed, c.total), (Some(3), Some(1), Some(4)));
        let note = c.note.unwrap();
        assert!(
            note.contains("the last says 500 passed")
                && note.contains("counted the per-test results"),
            "{note}"
        );
        // Two sessions, two summaries: both counted.
        let two = "..   [100%]\n2 passed in 0.1s\n.F   [100%]\n1 failed, 1 passed in 0.1s\n";
        let c = parse(two, 2).unwrap();
        assert_eq!((c.passed, c.failed, c.note), (Some(3), Some(1), None));
        // Told one session, neither line agrees with all the tests the output shows.
        let c = parse(two, 1).unwrap();
        assert_eq!((c.passed, c.failed), (Some(3), Some(1)));
        assert!(c.note.is_some());
        assert_eq!(
            super::super::pytest_sessions("pip install pytest && pytest -q; python -m pytest b"),
            2
        );
    }

    #[test]
    fn summary_variants() {
        assert!(summary_line("no tests ran in 0.01s").is_some());
        let s =
            summary_line("==== 1 failed, 2 passed, 1 xpassed, 3 warnings in 1.20s (0:00:01) ====")
                .unwrap();
        assert_eq!((s.passed, s.failed), (3, 1));
        assert!(summary_line("2 passed in 0.5 seconds").is_some());
        assert!(summary_line("we ran 2 laps in 3s").is_none());
        assert!(summary_line("2 apples in 3s").is_none());
        assert!(summary_line("passed in 3s").is_none());
        // Without the short summary (-rN), names come from the section headlines.
        let out = "F\n=== FAILURES ===\n___ test_a ___\nE   assert 0\n1 failed in 0.01s\n";
        let c = parse(out, 1).unwrap();
        assert_eq!(names(&c), ["test_a"]);
        assert_eq!(c.failures[0].message, "assert 0");
    }
}
