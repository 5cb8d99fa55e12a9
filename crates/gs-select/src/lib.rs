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
use std::collections::BTreeMap;

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
    /// It called functions of the changed `file`, by the test map made at `map` (the change is
    /// outside functions, so the map is a likelihood there, not a bound).
    Calls { file: String, map: String },
}

impl Why {
    /// How likely the reason makes a failure, most first: the order phase one runs its parts
    /// in, so that its first failure comes early too.
    pub fn rank(&self) -> u8 {
        match self {
            Why::FailedBefore { .. } => 0,
            Why::FailedWhenChanged { .. } => 1,
            Why::Ran { .. } | Why::Called { .. } => 2,
            Why::Named { .. } => 3,
            Why::Calls { .. } => 4,
            Why::Reaches { .. } | Why::DependsOn { .. } => 5,
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
}

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
        }
        Out {
            selects: self.selects,
            one_phase: self.one_phase.as_ref().map(ToString::to_string),
            one_phase_kind: self.one_phase.as_ref().map(OnePhase::kind),
            files: &self.files,
            changed: &self.changed,
            test_files: self.test_files,
            rest: &self.rest,
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
