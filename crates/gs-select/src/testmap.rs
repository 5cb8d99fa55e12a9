//! git-sandbox's own test map: which functions of the project each test calls, made by a run of
//! its own off the critical path (the pytest reporter's map mode: tests by node id; mocha's map
//! script: tests by test file). A changed line inside a
//! function reaches the tests that called that function; a function called outside any test (at
//! import, in collection, in a fixture wider than a test) reaches every test, so its file is
//! left to the import graph.
//!
//! The map is read from a file the tests' own process wrote: everything in it is checked (sizes,
//! indices, paths) and anything out of shape is no map.

use crate::PerTest;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The most tests and functions a map may name.
const MAX_ENTRIES: usize = 1 << 20;

/// A test map, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestMap {
    /// Each function: its file (relative to the checkout) and its first and last line.
    functions: Vec<(String, u32, u32)>,
    /// The functions called outside any test.
    outside: BTreeSet<u32>,
    /// Each test's functions.
    tests: BTreeMap<String, Vec<u32>>,
    /// Every test, for [`PerTest::tests`].
    ids: BTreeSet<String>,
}

#[derive(Deserialize)]
struct Raw {
    version: u32,
    functions: Vec<(String, u32, u32)>,
    outside: Vec<u32>,
    tests: BTreeMap<String, Vec<u32>>,
}

/// Why a map was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl TestMap {
    /// The map `bytes` hold, checked: a known version, paths relative and plain, lines in order,
    /// indices in range, sizes in bounds, at least one test.
    pub fn parse(bytes: &[u8]) -> Result<TestMap, Refused> {
        let refuse = |why: &str| Err(Refused(why.to_string()));
        let raw: Raw =
            serde_json::from_slice(bytes).map_err(|e| Refused(format!("not a test map: {e}")))?;
        if raw.version != 1 {
            return refuse("a test map of another version");
        }
        if raw.functions.len() > MAX_ENTRIES || raw.tests.len() > MAX_ENTRIES {
            return refuse("more tests or functions than a map may hold");
        }
        if raw.tests.is_empty() {
            return refuse("a test map of no test");
        }
        for (path, first, last) in &raw.functions {
            let plain = !path.is_empty()
                && !path.starts_with('/')
                && path
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != "..")
                && !path.contains(['\0', '\n']);
            if !plain {
                return refuse("a function in a file outside the checkout");
            }
            if first > last || *first == 0 {
                return refuse("a function whose lines are out of order");
            }
        }
        let n = raw.functions.len() as u32;
        let in_range = |v: &Vec<u32>| v.iter().all(|i| *i < n);
        if !in_range(&raw.outside) || !raw.tests.values().all(in_range) {
            return refuse("an index past the map's functions");
        }
        Ok(TestMap {
            ids: raw.tests.keys().cloned().collect(),
            functions: raw.functions,
            outside: raw.outside.into_iter().collect(),
            tests: raw.tests,
        })
    }

    /// The map as its file holds it (the same shape it was read from).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "version": 1,
            "functions": self.functions,
            "outside": self.outside,
            "tests": self.tests,
        }))
        .unwrap_or_default()
    }

    /// This map and `other` as one (a command that ran pytest and mocha both).
    pub fn merge(mut self, other: TestMap) -> TestMap {
        let off = self.functions.len() as u32;
        self.functions.extend(other.functions);
        self.outside
            .extend(other.outside.into_iter().map(|i| i + off));
        for (t, f) in other.tests {
            self.tests
                .entry(t)
                .or_default()
                .extend(f.into_iter().map(|i| i + off));
        }
        self.ids = self.tests.keys().cloned().collect();
        self
    }

    /// How many tests it maps.
    pub fn len(&self) -> usize {
        self.tests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tests.is_empty()
    }

    /// The files the map saw functions of.
    pub fn files(&self) -> BTreeSet<&str> {
        self.functions.iter().map(|(p, _, _)| p.as_str()).collect()
    }
}

impl PerTest for TestMap {
    fn tests(&self) -> &BTreeSet<String> {
        &self.ids
    }

    fn tests_calling(&self, path: &str) -> Option<BTreeSet<String>> {
        let hit: BTreeSet<u32> = (0..self.functions.len() as u32)
            .filter(|i| self.functions[*i as usize].0 == path)
            .collect();
        Some(self.calling(&hit))
    }

    /// The tests that called a function of `path` holding one of `lines`; `None` when such a
    /// function was called outside any test (so for every test), or the map saw no function of
    /// `path` called (a file it did not measure: another language's, one no test loaded).
    fn tests_running(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        self.measured(path)?;
        let hit = self.holding(path, lines);
        if hit.iter().any(|i| self.outside.contains(i)) {
            return None;
        }
        Some(self.calling(&hit))
    }

    fn tests_calling_lines(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        self.measured(path)?;
        Some(self.calling(&self.holding(path, lines)))
    }
}

impl TestMap {
    /// `Some` when the map saw a function of `path` called.
    fn measured(&self, path: &str) -> Option<()> {
        self.functions
            .iter()
            .any(|(p, _, _)| p == path)
            .then_some(())
    }

    /// The functions of `path` holding one of `lines`.
    fn holding(&self, path: &str, lines: &[u32]) -> BTreeSet<u32> {
        self.functions
            .iter()
            .enumerate()
            .filter(|(_, (p, first, last))| {
                p == path && lines.iter().any(|l| first <= l && l <= last)
            })
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// The tests that called one of `functions`.
    fn calling(&self, functions: &BTreeSet<u32>) -> BTreeSet<String> {
        self.tests
            .iter()
            .filter(|(_, f)| f.iter().any(|i| functions.contains(i)))
            .map(|(t, _)| t.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"{"version":1,
        "functions":[["src/p/u.py",3,9],["src/p/u.py",12,14],["src/p/__init__.py",1,2],["tests/t.py",4,6]],
        "outside":[2],
        "tests":{"tests/t.py::test_a":[0,3],"tests/t.py::test_b":[1],"tests/t.py::test_c":[]}}"#;

    #[test]
    fn a_changed_line_reaches_the_tests_that_called_its_function() {
        let m = TestMap::parse(MAP.as_bytes()).unwrap();
        let run = |p: &str, l: &[u32]| {
            m.tests_running(p, l)
                .map(|s| s.into_iter().collect::<Vec<_>>())
        };
        assert_eq!(
            run("src/p/u.py", &[5]),
            Some(vec!["tests/t.py::test_a".to_string()])
        );
        assert_eq!(run("src/p/u.py", &[13, 4]).unwrap().len(), 2);
        // A line no test's function holds reaches none; one called at import, every test.
        assert_eq!(run("src/p/u.py", &[11]), Some(vec![]));
        assert_eq!(run("src/p/__init__.py", &[2]), None);
        // A file the map never saw called (another language's, one no test loaded) is not
        // known to reach no test.
        assert_eq!(run("lib/a.js", &[2]), None);
        assert_eq!(m.tests_calling_lines("lib/a.js", &[2]), None);
        // Called outside any test as well as by test_a: every test may reach it, test_a likeliest.
        let calling = m.tests_calling_lines("src/p/__init__.py", &[2]).unwrap();
        assert!(calling.is_empty(), "{calling:?}");
        let calling = m.tests_calling_lines("src/p/u.py", &[5]).unwrap();
        assert_eq!(
            calling.into_iter().collect::<Vec<_>>(),
            ["tests/t.py::test_a"]
        );
        assert_eq!(m.tests().len(), 3);
        assert_eq!(TestMap::parse(&m.to_json()).unwrap(), m);
        // A mocha map beside: its files' tests, the pytest map's as they were.
        let js = TestMap::parse(
            br#"{"version":1,"functions":[["lib/a.js",2,4]],"outside":[],"tests":{"test/a.js":[0]}}"#,
        )
        .unwrap();
        let both = m.clone().merge(js);
        assert_eq!(both.len(), 4);
        assert_eq!(
            run("src/p/u.py", &[5]),
            both.tests_running("src/p/u.py", &[5])
                .map(|s| s.into_iter().collect())
        );
        assert_eq!(
            both.tests_running("lib/a.js", &[3])
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            ["test/a.js"]
        );
        assert_eq!(both.tests_running("src/p/__init__.py", &[2]), None);
    }

    #[test]
    fn a_map_out_of_shape_is_no_map() {
        for bad in [
            "[]",
            r#"{"version":2,"functions":[],"outside":[],"tests":{"a":[]}}"#,
            r#"{"version":1,"functions":[],"outside":[],"tests":{}}"#,
            r#"{"version":1,"functions":[["../x.py",1,2]],"outside":[],"tests":{"a":[0]}}"#,
            r#"{"version":1,"functions":[["/etc/x.py",1,2]],"outside":[],"tests":{"a":[0]}}"#,
            r#"{"version":1,"functions":[["x.py",5,2]],"outside":[],"tests":{"a":[0]}}"#,
            r#"{"version":1,"functions":[["x.py",1,2]],"outside":[],"tests":{"a":[1]}}"#,
            r#"{"version":1,"functions":[["x.py",1,2]],"outside":[7],"tests":{"a":[0]}}"#,
        ] {
            assert!(TestMap::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
