//! Why a commit's run has no probe: one typed reason, told to the user in one line.

use crate::command::NotPlain;
use std::fmt;

/// What a selection picks: pytest's, jest's and vitest's test files, cargo's crates, or go's
/// packages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Selects {
    #[default]
    TestFiles,
    Crates,
    Packages,
}

impl Selects {
    /// The parts, as a user counts them.
    pub fn parts(self) -> &'static str {
        match self {
            Selects::TestFiles => "test file",
            Selects::Crates => "crate",
            Selects::Packages => "package",
        }
    }
}

/// Why the run is in one phase: the whole suite, no probe beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnePhase {
    /// `[test] phases = false`.
    Disabled,
    /// The test command is not one a selection can be given to.
    Command { command: String, why: CommandWhy },
    /// A first commit: nothing to compare with.
    FirstCommit,
    /// More files changed than the diff lists.
    TooManyChanged {
        changed: u64,
        listed: usize,
        selects: Selects,
    },
    /// A changed file says nothing about which tests read it, or says every test does.
    Changed { path: String, what: ChangeWhy },
    /// The runner's discovery is configured in a way not followed here.
    Discovery(Discovery),
    /// The change reaches nothing, and nothing failed before.
    NothingReached(Selects),
    /// The change reaches every part: phase one would be the suite.
    EverythingReached(Selects),
    /// Phase one would name more parts than a command line holds.
    TooLong { parts: usize, selects: Selects },
    /// A reason in words: what a graph's reader said of the project's layout (a workspace it
    /// cannot read), or a rule not typed yet.
    Other(String),
}

/// Why a test command takes no selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandWhy {
    /// Shell syntax or a prefix option that moves it (see [`NotPlain`]).
    NotPlain(NotPlain),
    /// A runner not split here (`make test`, `tox`, `python -m unittest`), or one whose options
    /// choose the tests themselves (`pytest --lf`, `-k`, `jest --onlyChanged`).
    Runner,
    /// `cargo test` of the root package or default members only: the probe would test crates
    /// the run does not (`root`: the root package).
    PartOfWorkspace { root: bool },
}

/// Why a changed file means the whole suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeWhy {
    /// A pytest `conftest.py`.
    Conftest,
    /// It configures the tests or their dependencies (pyproject.toml, a lockfile, go.mod …).
    Configures,
    /// It configures the Go module, its dependencies or the tests.
    ConfiguresModule,
    /// It configures how every crate builds or is tested.
    ConfiguresCrates,
    /// A Python module deleted or renamed: one imported dynamically is not in the graph.
    PythonMoved { status: String },
    /// Not source of the language the graph reads (`language`).
    NotSource { language: &'static str },
    /// In no crate of the workspace.
    OutsideCrates,
    /// Vendored Go code.
    Vendored,
    /// Go test data.
    TestData,
    /// A Go file whose name is a build constraint.
    NameConstraint,
    /// A Go file `go test` builds in no package here.
    NoPackage,
    /// A Go file renamed: the package it left is not known.
    GoRenamed,
    /// A Go file deleted with its package.
    PackageDeleted { package: String },
    /// A Go file using cgo, embedding files, or with a build constraint.
    GoBuild(&'static str),
    /// A reason a runner's own rules give (jest's and vitest's configs, snapshots, aliases).
    Other(String),
}

/// A runner's discovery not followed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    /// pytest's `python_files`.
    PythonFiles,
    /// No Cargo.toml at the root.
    NoWorkspace,
    /// No go.mod naming a module at the root.
    NoGoModule,
    /// A go.work.
    GoWork,
    /// Every Go file of a package has a build constraint.
    ConstrainedPackage(String),
}

impl OnePhase {
    /// The reason's kind, in the record's words (`--explain-selection --json`'s
    /// `one_phase_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            OnePhase::Disabled => "disabled",
            OnePhase::Command { .. } => "command",
            OnePhase::FirstCommit => "first_commit",
            OnePhase::TooManyChanged { .. } => "too_many_changed",
            OnePhase::Changed { .. } => "changed",
            OnePhase::Discovery(_) => "discovery",
            OnePhase::NothingReached(_) => "nothing_reached",
            OnePhase::EverythingReached(_) => "everything_reached",
            OnePhase::TooLong { .. } => "too_long",
            OnePhase::Other(_) => "other",
        }
    }
}

impl fmt::Display for OnePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OnePhase::Disabled => f.write_str("[test] phases = false"),
            OnePhase::Command { command, why } => match why {
                CommandWhy::NotPlain(NotPlain::ShellSyntax) => write!(
                    f,
                    "the test command `{command}` is a shell line (&&, pipes, quotes, variables or globs): a selection added to it would not reach the runner as written"
                ),
                CommandWhy::NotPlain(NotPlain::PrefixOption) => write!(
                    f,
                    "the test command `{command}` runs its runner elsewhere or through an option not followed here (env -C/-S, uv run --directory/--project, pdm run -p)"
                ),
                CommandWhy::Runner => write!(
                    f,
                    "the test command `{command}` is not a plain pytest, jest, vitest, mocha, cargo test or go test invocation (pytest …, python -m pytest …, jest …, vitest run …, mocha …, npm, pnpm or yarn test running one, cargo test …, go test ./…, each maybe after VAR=value, env …, uv run, poetry run, pdm run or hatch run), or it chooses its tests itself"
                ),
                CommandWhy::PartOfWorkspace { root } => write!(
                    f,
                    "`{command}` tests {} only, and the probe would test crates it does not: add --workspace to have one",
                    if *root { "the root package" } else { "the default members" }
                ),
            },
            OnePhase::FirstCommit => f.write_str("a first commit: no parent to compare with"),
            OnePhase::TooManyChanged { changed, listed, selects } => write!(
                f,
                "{changed} files changed: more than the {listed} whose {} looked up",
                match selects {
                    Selects::TestFiles => "imports are",
                    Selects::Crates => "crates are",
                    Selects::Packages => "packages are",
                }
            ),
            OnePhase::Changed { path, what } => match what {
                ChangeWhy::Conftest => write!(f, "{path} changed: it shapes every test beneath it"),
                ChangeWhy::Configures => write!(f, "{path} changed: it configures the tests or their dependencies"),
                ChangeWhy::ConfiguresModule => write!(
                    f,
                    "{path} changed: it configures the module, its dependencies or the tests"
                ),
                ChangeWhy::ConfiguresCrates => write!(f, "{path} changed: it configures how every crate builds or is tested"),
                ChangeWhy::PythonMoved { status } => write!(f, "{path} was {status}: a module imported dynamically is not in the import graph"),
                ChangeWhy::NotSource { language } => write!(f, "{path} changed: not {language} source (a data file, a fixture, another language), so the import graph cannot say which tests read it"),
                ChangeWhy::OutsideCrates => write!(f, "{path} changed: it is in no crate of the workspace, so which crates read it is not known"),
                ChangeWhy::Vendored => write!(f, "{path} changed: vendored code, which every package may build with"),
                ChangeWhy::TestData => write!(f, "{path} changed: test data, which tests read at run time, not through an import"),
                ChangeWhy::NameConstraint => write!(f, "{path} changed: its name is a build constraint, so which builds hold it is not followed here"),
                ChangeWhy::NoPackage => write!(f, "{path} changed: a Go file that `go test` builds in no package here"),
                ChangeWhy::GoRenamed => write!(f, "{path} was renamed: the package it left is not known"),
                ChangeWhy::PackageDeleted { package } => write!(f, "{path} was deleted with its package {package}: the packages that imported it are not in this tree's graph"),
                ChangeWhy::GoBuild(what) => write!(f, "{path} changed: {what}"),
                ChangeWhy::Other(why) => write!(f, "{path} changed: {why}"),
            },
            OnePhase::Discovery(d) => match d {
                Discovery::PythonFiles => f.write_str("the pytest config sets python_files: its own discovery is not followed here"),
                Discovery::NoWorkspace => f.write_str("the tree has no Cargo.toml at its root: no workspace to split"),
                Discovery::NoGoModule => f.write_str("the tree has no go.mod naming a module at its root: its packages are not known"),
                Discovery::GoWork => f.write_str("the tree has a go.work: a workspace of modules is not followed here"),
                Discovery::ConstrainedPackage(p) => write!(f, "every Go file of {p} has a build constraint: `go test` of it by name could fail where the patterns leave it out"),
            },
            OnePhase::NothingReached(s) => match s {
                Selects::TestFiles => f.write_str("no test file reaches the changed files, and none failed in the parent's run"),
                Selects::Crates => f.write_str("the commit changed no crate"),
                Selects::Packages => f.write_str("no package reaches the changed files, and none failed in the parent's run"),
            },
            OnePhase::EverythingReached(s) => match s {
                Selects::TestFiles => f.write_str("every test file is reached: phase one would be the whole suite"),
                Selects::Crates => f.write_str("every crate is reached: phase one would be the whole workspace"),
                Selects::Packages => f.write_str("every package with tests is reached: phase one would be the whole suite"),
            },
            OnePhase::TooLong { parts, selects } => write!(f, "{parts} {}s in phase one: too long a command line to name them", selects.parts()),
            OnePhase::Other(why) => f.write_str(why),
        }
    }
}

impl From<String> for OnePhase {
    fn from(why: String) -> OnePhase {
        OnePhase::Other(why)
    }
}

impl From<&str> for OnePhase {
    fn from(why: &str) -> OnePhase {
        OnePhase::Other(why.to_string())
    }
}
