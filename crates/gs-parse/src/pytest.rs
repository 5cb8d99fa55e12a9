//! pytest: the closing summary line ("5 failed, 5 passed, 3 skipped, 2 xfailed, 1 error in 0.07s"),
//! the "short test summary info" list (node ids) and the `E` lines of the FAILURES/ERRORS sections.
//!
//! xfailed counts as skipped and xpassed as passed, as pytest's own JUnit report does; errors are
//! collection and fixture errors. The total is the sum (pytest prints none).

use std::collections::{HashMap, VecDeque};

use super::text::{count_item, join_message, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Summary {
    passed: u64,
    failed: u64,
    skipped: u64,
    errors: u64,
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

pub fn parse(text: &str) -> Option<TestCounts> {
    let mut totals: Option<Summary> = None;
    // (node id, message from the short summary), in order.
    let mut short: Vec<(String, String)> = Vec::new();
    let mut verbose: Vec<String> = Vec::new();
    let mut headlines: Vec<String> = Vec::new();
    let mut messages: HashMap<String, VecDeque<String>> = HashMap::new();
    let mut in_short_summary = false;
    let mut in_sections = false;
    let mut section: Option<Section> = None;

    for line in text.lines() {
        if line.starts_with("==") {
            close(&mut section, &mut messages);
            let title = line.trim_matches(|c| c == '=' || c == ' ');
            in_sections = matches!(title, "FAILURES" | "ERRORS");
            in_short_summary = title == "short test summary info";
            if let Some(s) = summary_line(line) {
                add_summary(&mut totals, s);
                in_short_summary = false;
            }
            continue;
        }
        if let Some(s) = summary_line(line) {
            close(&mut section, &mut messages);
            add_summary(&mut totals, s);
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
        }
        // `-v` progress: `tests/a.py::test_x FAILED   [ 50%]`.
        let mut words = line.split_whitespace();
        if let (Some(id), Some("FAILED" | "ERROR")) = (words.next(), words.next()) {
            if id.contains("::") && verbose.len() < super::text::MAX_FAILURES {
                verbose.push(id.to_string());
            }
        }
    }
    close(&mut section, &mut messages);
    let totals = totals?;

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

    Some(TestCounts {
        passed: Some(totals.passed),
        failed: Some(totals.failed),
        skipped: Some(totals.skipped),
        errors: Some(totals.errors),
        total: Some(totals.passed + totals.failed + totals.skipped + totals.errors),
        failures,
    })
}

fn close(section: &mut Option<Section>, messages: &mut HashMap<String, VecDeque<String>>) {
    if let Some(s) = section.take() {
        let msg = join_message(s.lines.iter().map(String::as_str));
        messages.entry(s.key).or_default().push_back(msg);
    }
}

fn add_summary(totals: &mut Option<Summary>, s: Summary) {
    let t = totals.get_or_insert_with(Summary::default);
    t.passed += s.passed;
    t.failed += s.failed;
    t.skipped += s.skipped;
    t.errors += s.errors;
}

#[cfg(test)]
mod tests {
    use super::super::text::clean;
    use super::*;

    fn run(fixture: &str) -> TestCounts {
        parse(&clean(fixture)).expect("pytest summary recognised")
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
        let c = parse(out).unwrap();
        assert_eq!(names(&c), ["test_a"]);
        assert_eq!(c.failures[0].message, "assert 0");
    }
}
