//! Which tests phase one — the probe beside a commit's run — picks, and why; or why there is no
//! probe.
//!
//! The run itself is always the user's command, unchanged. The probe runs only the parts of the
//! suite the commit's change can reach, so its first failure is known early. This crate is the
//! one place that decides which parts those are, in the way gitoxide's `gix-status` is one place
//! for what changed: plain data in, plain data out.
//!
//! - [`command`]: the test command as the user wrote it — which runner, which parts it names,
//!   phase one's command made from it.
//! - [`Sources`]: what a selection reads (the commit's tree and change, the parent's failures,
//!   its per-test coverage, a cache), behind a trait, so the rules run over git and an index in
//!   the product and over an in-memory tree ([`mem::MemTree`]) in unit tests.
//! - [`Runner`]: one file per runner ([`pytest`], [`js`] for jest, vitest and mocha, [`cargo`],
//!   [`go`]), each turning a commit's
//!   sources into a [`Selection`]: the parts with each reason ([`Why`]), or the one
//!   [`OnePhase`] reason there is no probe.

pub mod cache;
pub mod cargo;
pub mod command;
pub mod go;
pub mod js;
pub mod mem;
pub mod pytest;
mod reason;
mod sources;
pub mod testmap;

pub use reason::{ChangeWhy, CommandWhy, Discovery, OnePhase, Selects};
pub use sources::{Error, File, PerTest, Result, Sources};

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Why a part (a test file, a single test, a crate, a package) is in phase one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// It imports a changed file: the files from that one to it, each importing the one before.
    Reaches { path: Vec<String> },
    /// The crate depends on a changed crate: the crates from that one to it, each depending on
    /// the one before (the changed crate alone when it changed itself).
    DependsOn { path: Vec<String> },
    /// Its tests (these ids) failed in the parent's run.
    FailedBefore { tests: Vec<String> },
    /// It ran these changed lines of `file` (inside functions) in the parent's run, by the
    /// per-test coverage that run recorded.
    Ran { file: String, lines: Vec<u32> },
    /// It called a function holding these changed lines of `file`, by git-sandbox's test map
    /// made at commit `map`.
    Called {
        file: String,
        lines: Vec<u32>,
        map: String,
    },
    /// Its tests failed the last time `file` changed (at `commit`): these.
    FailedWhenChanged {
        file: String,
        commit: String,
        tests: Vec<String>,
    },
    /// Its name is the changed `file`'s (`utils.py` ↔ `test_utils.py`).
    Named { file: String },
    /// It is in phase one for another reason, and its name is that of `function`, a changed
    /// function of `file` (`fresh` ↔ `test/req.fresh.js`, `make_response` ↔
    /// `test_make_response`): it runs first.
    NamedForFunction { file: String, function: String },
    /// It called functions of the changed `file`, by the test map made at `map`: a likelihood,
    /// not a bound (the change is outside functions, or in one called outside any test too).
    Calls { file: String, map: String },
}

impl Why {
    /// How likely the reason makes a failure, most first: the order phase one runs its parts
    /// in, so that its first failure comes early too.
    pub fn rank(&self) -> u8 {
        match self {
            Why::FailedBefore { .. } => 0,
            Why::FailedWhenChanged { .. } => 1,
            Why::NamedForFunction { .. } => 2,
            Why::Ran { .. } | Why::Called { .. } => 3,
            Why::Named { .. } => 4,
            Why::Calls { .. } => 5,
            Why::Reaches { .. } | Why::DependsOn { .. } => 6,
        }
    }

    /// The signal's name, as `--explain-selection --json` and the manual give it.
    pub fn signal(&self) -> &'static str {
        match self {
            Why::FailedBefore { .. } => "failed_before",
            Why::FailedWhenChanged { .. } => "history",
            Why::Ran { .. } => "coverage",
            Why::Called { .. } | Why::Calls { .. } => "test_map",
            Why::Named { .. } => "name",
            Why::NamedForFunction { .. } => "function_name",
            Why::Reaches { .. } => "imports",
            Why::DependsOn { .. } => "dependencies",
        }
    }
}

/// What phase one runs, or why there is no phase one.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Whether `files` and `test_files` are test files, crates or packages.
    pub selects: Selects,
    /// Why there is no probe (the run is in one phase); `None`: a probe.
    pub one_phase: Option<OnePhase>,
    /// Phase one's parts, or single tests (node ids) where per-test coverage says which of a
    /// file's tests ran the changed lines; each with every reason it is there.
    pub files: BTreeMap<String, Vec<Why>>,
    /// The source files the commit changed that the selection followed.
    pub changed: Vec<String>,
    /// Every part the runner's own discovery finds in the tree.
    pub test_files: usize,
    /// The packages the probe leaves to the run (go test); empty for the other runners.
    pub rest: Vec<String>,
    /// Single tests (pytest node ids) the probe runs before the rest of phase one, most likely
    /// first: those a signal names by test (failed before, failed when the file changed, named
    /// for a changed function, ran or called the changed lines), also where their whole file is
    /// in phase one. Empty for the other runners.
    pub first: Vec<String>,
}

/// The most single tests the probe is told to run first, and the most bytes of their names
/// (they go to it in its command line, one argument of `sh -c` beside phase one's own ids).
pub const MAX_FIRST: usize = 500;
pub const MAX_FIRST_BYTES: usize = 16 << 10;

impl Selection {
    /// No probe, for `why`.
    pub fn whole_suite(selects: Selects, why: OnePhase) -> Selection {
        Selection {
            selects,
            one_phase: Some(why),
            ..Selection::default()
        }
    }

    /// Phase one's parts, when there is a probe, most likely to fail first (by their best
    /// reason's [`Why::rank`], then by name).
    pub fn phase_one(&self) -> Option<Vec<String>> {
        self.one_phase.is_none().then(|| {
            let mut parts: Vec<(u8, &String)> = self
                .files
                .iter()
                .map(|(p, whys)| (whys.iter().map(Why::rank).min().unwrap_or(u8::MAX), p))
                .collect();
            parts.sort();
            parts.into_iter().map(|(_, p)| p.clone()).collect()
        })
    }
}

impl Serialize for Selection {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            selects: Selects,
            one_phase: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            one_phase_kind: Option<&'static str>,
            files: &'a BTreeMap<String, Vec<Why>>,
            changed: &'a [String],
            test_files: usize,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            rest: &'a [String],
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            first: &'a [String],
        }
        Out {
            selects: self.selects,
            one_phase: self.one_phase.as_ref().map(ToString::to_string),
            one_phase_kind: self.one_phase.as_ref().map(OnePhase::kind),
            files: &self.files,
            changed: &self.changed,
            test_files: self.test_files,
            rest: &self.rest,
            first: &self.first,
        }
        .serialize(s)
    }
}

/// One runner's rules: a recognised command turned into phase one for a commit.
pub trait Runner {
    /// What its selection picks.
    fn selects(&self) -> Selects;
    /// Phase one of the commit `sources` describe.
    fn select(&self, sources: &dyn Sources) -> Result<Selection>;
}

/// The runner of `command` (or, with none configured, the one detection picks for the tree):
/// cargo test, go test, jest, vitest or mocha (told by the tree's manifests), else pytest (what
/// runs when nothing else is detected); or why the command takes no selection.
pub fn runner(
    command: Option<&str>,
    sources: &dyn Sources,
) -> std::result::Result<Box<dyn Runner>, OnePhase> {
    if let Some(r) = cargo::runner(command, sources) {
        return Ok(Box::new(r));
    }
    if let Some(r) = go::runner(command, sources) {
        return Ok(Box::new(r));
    }
    if let Some(r) = js::runner(command, sources) {
        return r.map(|r| Box::new(r) as Box<dyn Runner>);
    }
    pytest::runner(command).map(|r| Box::new(r) as Box<dyn Runner>)
}

/// A language's changed lines inside function bodies: (path, the parent's text, the commit's).
pub(crate) type BodyLines = dyn Fn(&str, &[u8], &[u8]) -> Option<Vec<u32>>;

/// A language's changed functions' names: (path, the parent's text, the commit's).
pub(crate) type FunctionNames = dyn Fn(&str, &[u8], &[u8]) -> Vec<String>;

/// The largest changed file whose lines per-test coverage or the test map are asked about.
const MAX_CHANGED_BYTES: u64 = 4 << 20;

/// The changed files left to the import graph, and the tests (node ids, or whole files)
/// per-test coverage picks, each with why.
pub(crate) type Covered = (Vec<String>, Vec<(String, Why)>);

/// Splits `changed` by what can say which tests it reaches: the files whose change lies inside
/// function bodies (by `body_lines`, the parent's lines) that `per_test` measured (each test that ran a changed line, with why), and
/// the rest (for the import graph).
pub(crate) fn covered(
    src: &dyn Sources,
    changed: &[String],
    tests: &BTreeSet<String>,
    per_test: &dyn PerTest,
    body_lines: &BodyLines,
    why: &dyn Fn(String, Vec<u32>) -> Why,
) -> Covered {
    let mut by_graph = Vec::new();
    let mut ran = Vec::new();
    for path in changed {
        let found = (!tests.contains(path))
            .then(|| {
                let old = src.parent_blob(path, MAX_CHANGED_BYTES)?;
                let new = src.text(path, MAX_CHANGED_BYTES)?;
                let lines = body_lines(path, &old, new.as_bytes())?;
                Some((per_test.tests_running(path, &lines)?, lines))
            })
            .flatten();
        match found {
            Some((ids, lines)) => ran.extend(
                ids.into_iter()
                    .map(|id| (id, why(path.clone(), lines.clone()))),
            ),
            None => by_graph.push(path.clone()),
        }
    }
    // A file all of whose tests are picked runs whole.
    let chosen: BTreeSet<&str> = ran.iter().map(|(id, _)| id.as_str()).collect();
    let file_of = |id: &str| id.split_once("::").map_or(id, |(f, _)| f).to_string();
    let whole: BTreeSet<String> = chosen
        .iter()
        .map(|id| file_of(id))
        .filter(|f| {
            let prefix = format!("{f}::");
            per_test
                .tests()
                .range(prefix.clone()..)
                .take_while(|t| t.starts_with(&prefix))
                .all(|t| chosen.contains(t.as_str()))
        })
        .collect();
    let ran = ran
        .into_iter()
        .map(|(id, why)| match file_of(&id) {
            f if whole.contains(&f) => (f, why),
            _ => (id, why),
        })
        .collect();
    (by_graph, ran)
}

/// Marks the parts of phase one named for a function the commit changed in a file of
/// `changed` (`names` gives a file's changed functions from its parent's and its own text), so
/// that they run first: a test of `fresh` is likelier to fail for a change to `fresh` than the
/// other tests that call it. Adds no part.
pub(crate) fn by_function_name(
    src: &dyn Sources,
    changed: &[String],
    files: &mut BTreeMap<String, Vec<Why>>,
    names: &FunctionNames,
) {
    for path in changed {
        if files.contains_key(path) {
            continue;
        }
        let (Some(old), Some(new)) = (
            src.parent_blob(path, MAX_CHANGED_BYTES),
            src.text(path, MAX_CHANGED_BYTES),
        ) else {
            continue;
        };
        for function in names(path, &old, new.as_bytes()) {
            for (part, whys) in files.iter_mut() {
                if named_for_function(part, &function) {
                    whys.push(Why::NamedForFunction {
                        file: path.clone(),
                        function: function.clone(),
                    });
                }
            }
        }
    }
}

/// Whether test `part` (a test file, or a node id whose test name counts) is named for
/// `function`: some run of the words of its name (split at `.`, `-`, `_` and case changes) is
/// the function's name (`res.sendFile.js`, `test_make_response_ok` for `make_response`), or one
/// of them is a word of five letters or more of it (`req.query.js` for `compileQueryParser`).
pub(crate) fn named_for_function(part: &str, function: &str) -> bool {
    let name = match part.rsplit_once("::") {
        Some((_, test)) => test.split('[').next().unwrap_or(test),
        None => {
            let file = part.rsplit('/').next().unwrap_or(part);
            file.split_once('.').map_or(file, |(stem, rest)| {
                // `res.send.js` keeps `res.send`; `test_utils.py` keeps `test_utils`.
                match rest.rsplit_once('.') {
                    Some((mid, _)) => &file[..stem.len() + 1 + mid.len()],
                    None => stem,
                }
            })
        }
    };
    let parts: Vec<String> = name
        .split(['.', '-', '_'])
        .filter(|p| !p.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let words = words_of(function);
    let whole: String = words.concat();
    if whole.len() < 3 {
        return false;
    }
    for i in 0..parts.len() {
        let mut run = String::new();
        for p in &parts[i..] {
            run.push_str(p);
            if run == whole {
                return true;
            }
            if run.len() >= whole.len() {
                break;
            }
        }
    }
    words
        .iter()
        .filter(|w| w.len() >= 5)
        .any(|w| parts.contains(w))
}

/// A function's name in lowercase words: `compileQueryParser` → compile, query, parser;
/// `make_response` → make, response; `XMLHttpRequest` → xml, http, request.
fn words_of(function: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = function.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
        let prev_lower = i > 0 && chars[i - 1].is_lowercase();
        if c.is_uppercase() && !cur.is_empty() && (prev_lower || next_lower) {
            words.push(std::mem::take(&mut cur));
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// What the commit changed, when its record lists every changed file; else why the whole suite
/// runs (a first commit, or more files than the diff lists: an unlisted one could reach any
/// test).
pub(crate) fn listed_changes(
    src: &dyn Sources,
    selects: Selects,
) -> Result<std::result::Result<gs_model::Changes, OnePhase>> {
    let Some(changes) = src.changes()? else {
        return Ok(Err(OnePhase::FirstCommit));
    };
    if changes.files_omitted > 0 {
        return Ok(Err(OnePhase::TooManyChanged {
            changed: changes.files_changed,
            listed: changes.files.len(),
            selects,
        }));
    }
    Ok(Ok(changes))
}

/// Files whose change says nothing about which tests run: prose, licences, CI settings.
pub fn irrelevant(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(ext, "md" | "rst" | "adoc")
        || path.starts_with("docs/")
        || path.starts_with(".github/")
        || name.starts_with("LICENSE")
        || name.starts_with("CHANGES")
        || name == ".gitignore"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_named_for_a_function_by_the_words_of_its_name() {
        assert_eq!(words_of("XMLHttpRequest"), ["xml", "http", "request"]);
        assert_eq!(words_of("make_response"), ["make", "response"]);
        for (part, function) in [
            ("test/req.fresh.js", "fresh"),
            ("test/res.sendFile.js", "sendFile"),
            ("test/req.query.js", "compileQueryParser"),
            ("test/app.use.js", "use"),
            (
                "tests/test_basic.py::test_make_response_ok",
                "make_response",
            ),
            (
                "tests/test_basic.py::test_make_response[x]",
                "make_response",
            ),
            ("tests/test_make_response.py", "make_response"),
            ("src/utils.test.ts", "utils"),
        ] {
            assert!(named_for_function(part, function), "{part} {function}");
        }
        for (part, function) in [
            ("test/res.send.js", "sendFile"),
            ("test/res.sendFile.js", "send"),
            ("test/req.query.js", "compileTrust"),
            ("tests/test_basic.py::test_make", "make_response"),
            ("tests/test_response.py::test_x", "make_response"),
            ("test/app.js", "a"),
        ] {
            assert!(!named_for_function(part, function), "{part} {function}");
        }
    }

    /// A commit that changed more files than its diff lists runs whole with every runner: an
    /// unlisted file could reach any test (jest's, vitest's and mocha's rules used to read the
    /// listed ones alone).
    #[test]
    fn more_changed_files_than_listed_is_the_whole_suite() {
        struct Many(mem::MemTree);
        impl Sources for Many {
            fn has_file(&self, p: &str) -> bool {
                self.0.has_file(p)
            }
            fn text(&self, p: &str, m: u64) -> Option<String> {
                self.0.text(p, m)
            }
            fn dirs(&self, d: &str) -> Vec<String> {
                self.0.dirs(d)
            }
            fn files(&self) -> Result<Vec<File>> {
                self.0.files()
            }
            fn blob(&self, id: &str, m: u64) -> Option<Vec<u8>> {
                self.0.blob(id, m)
            }
            fn changes(&self) -> Result<Option<gs_model::Changes>> {
                let mut c = self.0.changes()?;
                if let Some(c) = c.as_mut() {
                    c.files_omitted = 150;
                    c.files_changed += 150;
                }
                Ok(c)
            }
            fn parent_blob(&self, p: &str, m: u64) -> Option<Vec<u8>> {
                self.0.parent_blob(p, m)
            }
            fn failed_before(&self) -> Result<Vec<String>> {
                self.0.failed_before()
            }
            fn failed_when_changed(&self, p: &str) -> Result<Vec<(String, Vec<String>)>> {
                self.0.failed_when_changed(p)
            }
            fn parent_log(&self) -> Option<Vec<u8>> {
                self.0.parent_log()
            }
            fn per_test(&self) -> Option<Box<dyn PerTest + '_>> {
                self.0.per_test()
            }
            fn test_map(&self) -> Option<(String, Box<dyn PerTest + '_>)> {
                self.0.test_map()
            }
            fn cached(&self, b: &str, k: &str) -> Result<Option<String>> {
                self.0.cached(b, k)
            }
            fn keep(&self, f: &[(String, String, String)]) -> Result<()> {
                self.0.keep(f)
            }
        }
        let tree = Many(mem::MemTree::commit(
            &[
                ("package.json", r#"{"scripts":{"test":"jest"}}"#),
                ("src/a.js", "module.exports = 1;\n"),
                ("src/a.test.js", "require('./a');\n"),
            ],
            &[("src/a.js", Some("module.exports = 2;\n"))],
        ));
        let runner = runner(None, &tree).ok().unwrap();
        let s = runner.select(&tree).unwrap();
        assert!(
            matches!(
                s.one_phase,
                Some(OnePhase::TooManyChanged {
                    changed: 151,
                    listed: 1,
                    ..
                })
            ),
            "{s:?}"
        );
    }
}
