//! What a selection reads, behind one trait: the product reads git and the index
//! (`app/run/selection.rs`), unit tests an in-memory tree ([`crate::mem::MemTree`]).

use gs_model::Changes;
use std::collections::BTreeSet;

/// A failure to read what a selection needs (git, the index): the caller's error, boxed.
#[derive(Debug)]
pub struct Error(pub Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl Error {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error(Box::new(e))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A file of the commit's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    /// Its blob's id (the cache's key beside an analysis' version).
    pub id: String,
}

/// Per-test coverage a run recorded: which test ran which line.
pub trait PerTest {
    /// Every test (node id) that ran at least one measured line.
    fn tests(&self) -> &BTreeSet<String>;
    /// The tests that ran any of `lines` of `path`; `None` when the file was not measured, or a
    /// line ran outside any test (at import, so for every test).
    fn tests_running(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>>;
    /// The tests that called any function of `path`, wherever it was called from: a likelihood,
    /// not a bound (a change outside functions may reach others). `None`: not known.
    fn tests_calling(&self, _path: &str) -> Option<BTreeSet<String>> {
        None
    }
    /// The tests that called a function holding one of `lines` of `path` while they ran, even
    /// where it was called outside any test too (when [`PerTest::tests_running`] answers
    /// `None`): a likelihood, not a bound. `None`: not known.
    fn tests_calling_lines(&self, _path: &str, _lines: &[u32]) -> Option<BTreeSet<String>> {
        None
    }
}

/// What a selection reads of one commit, its parent and the runs before.
pub trait Sources {
    /// Whether the commit's tree has a file at `path` (read without listing the tree).
    fn has_file(&self, path: &str) -> bool;
    /// The text of the file at `path` of the commit's tree, when it is at most `max` bytes.
    fn text(&self, path: &str, max: u64) -> Option<String>;
    /// The names of the directories directly in `dir` of the commit's tree (`""`: the root).
    fn dirs(&self, dir: &str) -> Vec<String>;
    /// Every file of the commit's tree, in path order.
    fn files(&self) -> Result<Vec<File>>;
    /// A blob of the commit's tree by id, when it is at most `max` bytes.
    fn blob(&self, id: &str, max: u64) -> Option<Vec<u8>>;
    /// What the commit changed against its first parent; `None` for a first commit.
    fn changes(&self) -> Result<Option<Changes>>;
    /// The file at `path` in the parent's tree, when it is at most `max` bytes.
    fn parent_blob(&self, path: &str, max: u64) -> Option<Vec<u8>>;
    /// The ids of the tests that failed in the parent's run, as its record lists them.
    fn failed_before(&self) -> Result<Vec<String>>;
    /// The newest failed runs of commits that changed `path` (at most a few): each commit and
    /// the tests that failed in its run.
    fn failed_when_changed(&self, path: &str) -> Result<Vec<(String, Vec<String>)>>;
    /// The parent's run's log, when it is kept.
    fn parent_log(&self) -> Option<Vec<u8>>;
    /// The per-test coverage the parent's run recorded, when it did.
    fn per_test(&self) -> Option<Box<dyn PerTest + '_>>;
    /// git-sandbox's own test map nearest the parent (see [`crate::testmap`]): the commit it was
    /// made at, and the map as it answers for the parent's files (a file that differs between
    /// the two answers `None`).
    fn test_map(&self) -> Option<(String, Box<dyn PerTest + '_>)>;
    /// An analysis cached for `blob` under `key` (JSON).
    fn cached(&self, blob: &str, key: &str) -> Result<Option<String>>;
    /// Keeps analyses: (blob, key, JSON).
    fn keep(&self, fresh: &[(String, String, String)]) -> Result<()>;
}
