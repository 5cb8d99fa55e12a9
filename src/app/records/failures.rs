//! The failing tests of a commit as someone fixing them wants them: name, where (file:line), the
//! first line of the assertion, and the commit where each began to fail (walking first parents
//! back while the same test keeps failing).

use crate::app::{records::results, Repo, Result};
use gs_git::ObjectId;
use gs_model::RunRecord;
use serde::Serialize;

/// How far back (first parents) a failure's first failing commit is looked for.
const SINCE_DEPTH: usize = 100;

#[derive(Debug, Clone, Serialize)]
pub struct Failing {
    pub name: String,
    /// `path:line` taken from the message (or the test's name), when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The first line of the message that asserts or raises, else its first line.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub assertion: String,
    /// The oldest commit of the unbroken run of commits (first parents, commits without a result
    /// skipped) where this test fails; this commit when it passed just before.
    pub since: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Failures {
    pub commit: String,
    pub status: String,
    pub failed: u64,
    pub failures: Vec<Failing>,
    /// Failures the record counts but does not list (it keeps the first 50).
    pub not_listed: u64,
}

/// The failing tests of `record`, the result of `commit`.
pub fn of(at: Repo<'_>, commit: ObjectId, record: &RunRecord) -> Result<Failures> {
    let Repo { ctx, repo, row } = at;
    let tests = record.tests.as_ref();
    let listed = tests.map_or(&[][..], |t| &t.failures[..]);
    let failed = tests.map_or(0, |t| t.failed.unwrap_or(0) + t.errors.unwrap_or(0));
    let mut since: Vec<String> = vec![commit.to_string(); listed.len()];
    // Walk back once for all of them: a test's streak ends at the first result without it.
    let mut open: Vec<usize> = (0..listed.len()).collect();
    let mut reader = results::NoteReader::new(repo)?;
    let mut back = first_parent(repo, commit);
    let mut depth = 0;
    while let (Some(c), false) = (back, open.is_empty()) {
        depth += 1;
        if depth > SINCE_DEPTH {
            break;
        }
        if let Some(r) = results::find_evidence(at, &mut reader, c)? {
            let failing: Vec<String> = r
                .tests
                .as_ref()
                .map(|t| {
                    t.failures
                        .iter()
                        .map(|f| gs_model::test_name::canonical(&f.name))
                        .collect()
                })
                .unwrap_or_default();
            open.retain(|&i| {
                let still = failing.contains(&gs_model::test_name::canonical(&listed[i].name));
                if still {
                    since[i] = c.to_string();
                }
                still
            });
        }
        back = first_parent(repo, c);
    }
    let tree = gs_git::objects::tree_of(repo, commit);
    let in_tree = |path: &str| tree.is_some_and(|t| gs_git::path_in_tree(repo, t, path));
    // The record keeps a failure's message; the run's output often holds more (a traceback).
    let log = std::fs::read(crate::app::records::logs::path(ctx, row, record))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let failures = listed
        .iter()
        .zip(since)
        .map(|(f, since)| Failing {
            name: f.name.clone(),
            location: location(&f.message, &in_tree)
                .or_else(|| location(&f.name, &in_tree))
                .or_else(|| {
                    sections(&log, &f.name).find_map(|section| location(&section, &in_tree))
                }),
            assertion: assertion(&f.message),
            since,
        })
        .collect::<Vec<_>>();
    Ok(Failures {
        commit: commit.to_string(),
        status: record.status.to_string(),
        failed,
        not_listed: failed.saturating_sub(failures.len() as u64),
        failures,
    })
}

fn first_parent(repo: &gs_git::Repository, c: ObjectId) -> Option<ObjectId> {
    gs_git::objects::first_parent(repo, c)
}

/// Where a message points into the tree: the last `File "PATH", line N` (a Python traceback's
/// innermost frame in the tree), else the first `PATH:N`. A path the sandbox made absolute is
/// cut to its part that `in_tree` knows; a path outside the tree is not a location.
pub fn location(text: &str, in_tree: &dyn Fn(&str) -> bool) -> Option<String> {
    let relative = |path: &str| -> Option<String> {
        let path = path.trim_start_matches("./");
        if !path.starts_with('/') {
            return in_tree(path).then(|| path.to_string());
        }
        let mut rest = path.trim_start_matches('/');
        loop {
            if in_tree(rest) {
                return Some(rest.to_string());
            }
            rest = rest.split_once('/')?.1;
        }
    };
    let mut traceback = None;
    for line in text.lines() {
        let Some(after) = line.trim_start().strip_prefix("File \"") else {
            continue;
        };
        let Some((path, rest)) = after.split_once("\", line ") else {
            continue;
        };
        let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let (false, Some(p)) = (n.is_empty(), relative(path)) {
            traceback = Some(format!("{p}:{n}"));
        }
    }
    if traceback.is_some() {
        return traceback;
    }
    let bytes = text.as_bytes();
    let is_path = |b: u8| b.is_ascii_alphanumeric() || b"_./-".contains(&b);
    for i in 1..bytes.len() {
        if bytes[i] != b':' {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let mut start = i;
        while start > 0 && is_path(bytes[start - 1]) {
            start -= 1;
        }
        if digits == 0 || start == i {
            continue;
        }
        if let Some(p) = relative(&text[start..i]) {
            return Some(format!("{p}:{}", &text[i + 1..i + 1 + digits]));
        }
    }
    None
}

/// The parts of a test run's output about test `name`: from each line that names it, up to 40
/// lines, ending before the next section rule (`=====`, `_____`).
fn sections<'a>(log: &'a str, name: &'a str) -> impl Iterator<Item = String> + 'a {
    let lines: Vec<&str> = log.lines().collect();
    let starts: Vec<usize> = if name.is_empty() {
        Vec::new()
    } else {
        (0..lines.len())
            .filter(|&i| lines[i].contains(name))
            .collect()
    };
    starts.into_iter().map(move |i| {
        let rule = |l: &&&str| l.starts_with("=====") || l.starts_with("_____");
        lines[i..]
            .iter()
            .take(40)
            .enumerate()
            .take_while(|(k, l)| *k == 0 || !rule(l))
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// The line of `message` that says what went wrong: the first that asserts or raises, else the
/// first line.
pub fn assertion(message: &str) -> String {
    let said = |l: &&str| {
        let l = l.trim_start();
        let l = l
            .strip_prefix("E ")
            .or_else(|| l.strip_prefix('>'))
            .unwrap_or(l)
            .trim_start();
        l.starts_with("assert")
            || l.contains("Assertion")
            || l.contains("Error")
            || l.contains("panicked")
            || l.starts_with("expected")
            || l.starts_with("Expected")
    };
    let line = message.lines().find(said).unwrap_or(message);
    crate::app::records::summary::first_line(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_found_in_messages_and_names() {
        let tree = |p: &str| ["tests/test_calc.py", "src/lib.rs"].contains(&p);
        assert_eq!(
            location("tests/test_calc.py:12: AssertionError", &tree).as_deref(),
            Some("tests/test_calc.py:12")
        );
        assert_eq!(
            location(
                "thread 'main' panicked at src/lib.rs:40:9:\nassertion failed",
                &tree
            )
            .as_deref(),
            Some("src/lib.rs:40")
        );
        // A traceback's innermost frame in the tree, its absolute sandbox path cut to the tree.
        let tb = "Traceback (most recent call last):\n  File \"/tmp/run/w/tests/test_calc.py\", line 9, in test_x\n    self.assertEqual(f(), 2)\n  File \"/usr/lib/python3.11/unittest/case.py\", line 873, in assertEqual\nAssertionError: 1 != 2";
        assert_eq!(location(tb, &tree).as_deref(), Some("tests/test_calc.py:9"));
        assert_eq!(location("expected 3, got 4 at 10:30", &tree), None);
        assert_eq!(location("/etc/passwd:1", &tree), None);
        assert_eq!(location("tests/test_a.py::test_b", &tree), None);
    }

    #[test]
    fn the_assertion_line_is_preferred_to_the_first() {
        assert_eq!(
            assertion("def test_x():\n>       assert add(1, 2) == 4\nE       assert 3 == 4"),
            ">       assert add(1, 2) == 4"
        );
        assert_eq!(assertion("just one line"), "just one line");
    }
}
