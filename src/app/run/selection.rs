//! Which tests phase one — the probe beside a commit's run — picks: the test files that reach a
//! changed Python file through imports, and those whose tests failed in the parent's run; or
//! why there is no probe (what the import graph cannot see means "everything"). The run itself
//! is always the whole suite.

pub mod cargo;
pub mod go;
pub mod js;

use crate::app::{run::testcov, Context, Repo, Result};
use gs_analysis::{imports::python_imports, imports::Import, imports::IMPORTS_VERSION};
use gs_analysis::{pygraph::is_test_file, pygraph::Graph, pygraph::Layout};
use gs_config::Config;
use gs_git as git;
use gs_git::{objects, CommitInfo};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Why a test file is in phase one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// It imports a changed file: the files from that one to it, each importing the one before.
    Reaches { path: Vec<String> },
    /// The crate depends on a changed crate: the crates from that one to it, each depending on
    /// the one before (the changed crate alone when it changed itself).
    DependsOn { path: Vec<String> },
    /// Its tests (these node ids) failed in the parent's run.
    FailedBefore { tests: Vec<String> },
    /// It ran these changed lines of `file` (inside functions) in the parent's run, by the
    /// per-test coverage that run recorded.
    Ran { file: String, lines: Vec<u32> },
}

/// What a selection picks: pytest's, jest's and vitest's test files, cargo's crates, or go's
/// packages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Selects {
    #[default]
    TestFiles,
    Crates,
    Packages,
}

/// What phase one runs, or why there is no phase one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Selection {
    /// Whether `files` and `test_files` are test files or crates.
    pub selects: Selects,
    /// Why there is no probe (the run is in one phase); `None`: a probe.
    pub one_phase: Option<String>,
    /// Phase one's test files (or crates), or single tests (node ids) where per-test coverage
    /// says which of a file's tests ran the changed lines; each with every reason it is there.
    pub files: BTreeMap<String, Vec<Why>>,
    /// The source files the commit changed (Python or JavaScript/TypeScript; for crates, any).
    pub changed: Vec<String>,
    /// Every test file the runner's default discovery finds in the tree (or every crate of the
    /// workspace, or every package with tests the go test patterns match).
    pub test_files: usize,
    /// The packages the probe leaves to the run (go test, for `--explain-selection --json`);
    /// empty for the other runners.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rest: Vec<String>,
}

impl Selection {
    pub(super) fn one_phase(why: impl Into<String>) -> Selection {
        Selection {
            one_phase: Some(why.into()),
            ..Selection::default()
        }
    }

    pub(super) fn one_phase_of(selects: Selects, why: impl Into<String>) -> Selection {
        Selection {
            selects,
            ..Selection::one_phase(why)
        }
    }

    /// Phase one's files, when there is a probe.
    pub fn phase_one(&self) -> Option<Vec<String>> {
        self.one_phase
            .is_none()
            .then(|| self.files.keys().cloned().collect())
    }
}

/// Files whose change says nothing about which tests run: prose, licences, CI settings.
pub(super) fn irrelevant(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(ext, "md" | "rst" | "adoc")
        || path.starts_with("docs/")
        || path.starts_with(".github/")
        || name.starts_with("LICENSE")
        || name.starts_with("CHANGES")
        || name == ".gitignore"
}

/// Files that configure the tests or their dependencies.
fn configuration(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "pyproject.toml"
            | "setup.cfg"
            | "setup.py"
            | "tox.ini"
            | "pytest.ini"
            | ".sandbox.toml"
            | "poetry.lock"
            | "uv.lock"
            | "pdm.lock"
            | "Pipfile"
            | "Pipfile.lock"
            | "noxfile.py"
    ) || gs_analysis::is_manifest(path)
        || (name.starts_with("requirements") && name.ends_with(".txt"))
        || (name.starts_with("constraints") && name.ends_with(".txt"))
}

/// The cache key of a file's imports beside its blob id (the metrics' table, another key).
fn cache_key() -> String {
    format!("imports-v{IMPORTS_VERSION}:py")
}

/// The largest file whose imports are read; a bigger one is left out of the graph.
const MAX_SOURCE_BYTES: u64 = 4 << 20;

/// Phase one of `info`'s run with `config`.
pub fn select(at: Repo<'_>, info: &CommitInfo, config: &Config) -> Result<Selection> {
    let Repo { ctx, repo, row } = at;
    if !config.test.phases {
        return Ok(Selection::one_phase("[test] phases = false"));
    }
    if let Some(s) = cargo::select(repo, info, config)? {
        return Ok(s);
    }
    if let Some(s) = go::select(at, info, config)? {
        return Ok(s);
    }
    if let Some(js) = js::command_of(repo, info, config) {
        return js::select(at, info, &js);
    }
    // Nothing to split: no diff, tree walk or import graph for a command that runs in one phase.
    if let Some(c) = config
        .test
        .command
        .as_deref()
        .filter(|c| gs_runner::pytest_cmd::recognise(c).is_none())
    {
        return Ok(Selection::one_phase(format!(
            "the test command `{c}` is not a plain pytest, jest, vitest, cargo test or go test invocation (pytest …, python -m pytest …, jest …, vitest run …, npm test running one, cargo test …, go test ./…)"
        )));
    }
    let Some(parent) = info.parents.first() else {
        return Ok(Selection::one_phase(
            "a first commit: no parent to compare with",
        ));
    };
    let changes = git::diff::commit_changes(repo, info)?;
    if changes.files_omitted > 0 {
        return Ok(Selection::one_phase(format!(
            "{} files changed: more than the {} whose imports are looked up",
            changes.files_changed,
            changes.files.len()
        )));
    }
    let mut changed = Vec::new();
    for f in &changes.files {
        let p = f.path.as_str();
        let name = p.rsplit('/').next().unwrap_or(p);
        let why = if name == "conftest.py" {
            format!("{p} changed: it shapes every test beneath it")
        } else if configuration(p) {
            format!("{p} changed: it configures the tests or their dependencies")
        } else if p.ends_with(".py") && matches!(f.status.as_str(), "deleted" | "renamed") {
            format!(
                "{p} was {}: a module imported dynamically is not in the import graph",
                f.status
            )
        } else if p.ends_with(".py") {
            changed.push(p.to_string());
            continue;
        } else if irrelevant(p) {
            continue;
        } else {
            format!("{p} changed: not Python source (a data file, a fixture, another language), so the import graph cannot say which tests read it")
        };
        return Ok(Selection::one_phase(why));
    }
    // The tree's files, and the imports of its Python files (cached by blob).
    let blobs: Vec<(String, gs_git::ObjectId)> = objects::walk(repo, info.tree)?
        .into_iter()
        .filter(|e| e.kind.is_file())
        .map(|e| (e.path, e.id))
        .collect();
    let text_of = |path: &str| -> Option<String> {
        let (_, id) = blobs.iter().find(|(p, _)| p == path)?;
        let blob = objects::blob(repo, *id).ok()?;
        Some(String::from_utf8_lossy(&blob).into_owned())
    };
    let pyproject = text_of("pyproject.toml");
    let pytest_cfg = pytest_settings(&text_of, pyproject.as_deref());
    if pytest_cfg.custom_discovery {
        return Ok(Selection::one_phase(
            "the pytest config sets python_files: its own discovery is not followed here",
        ));
    }
    let layout = Layout::new(blobs.iter().map(|(p, _)| p.as_str()), pyproject.as_deref());
    let tests: BTreeSet<String> = blobs
        .iter()
        .map(|(p, _)| p)
        .filter(|p| is_test_file(p, &pytest_cfg.testpaths))
        .cloned()
        .collect();
    let imports: BTreeMap<String, Vec<Import>> = cached_per_blob(
        ctx,
        repo,
        blobs.iter().filter(|(p, _)| p.ends_with(".py")),
        MAX_SOURCE_BYTES,
        |_| cache_key(),
        |_, src| python_imports(src),
    )?;
    let reexports: std::collections::HashMap<String, BTreeMap<String, String>> = imports
        .iter()
        .filter(|(p, _)| p.ends_with("__init__.py"))
        .map(|(p, i)| (p.clone(), layout.reexports(p, i)))
        .collect();
    let edges: BTreeMap<String, _> = imports
        .iter()
        .map(|(p, i)| (p.clone(), layout.resolve(p, i, &reexports)))
        .collect();
    let graph = Graph::new(&edges);
    // Where the parent's run recorded which test ran which line, a change inside function
    // bodies reaches the tests that ran those lines; any other change, the import graph's.
    let (by_graph, ran) =
        match testcov::open(&ctx.paths.home, &row.repository_id, &parent.to_string()) {
            Some(contexts) => covered(repo, *parent, info, &changed, &tests, &contexts)?,
            None => (changed.clone(), Vec::new()),
        };
    let mut files: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    for (test, path) in graph.reaching(&by_graph, &tests) {
        files.entry(test).or_default().push(Why::Reaches { path });
    }
    for (id, why) in ran {
        let file = id.split_once("::").map_or(id.as_str(), |(f, _)| f);
        if tests.contains(file) {
            files.entry(id).or_default().push(why);
        }
    }
    // The tests that failed in the parent's run, by the file their node id names.
    let before = ctx
        .index
        .run_for_commit(&row.repository_id, &parent.to_string())?
        .and_then(|r| r.record.tests);
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in before.iter().flat_map(|t| &t.failures) {
        if let Some((file, _)) = f.name.split_once("::") {
            if tests.contains(file) {
                failed
                    .entry(file.to_string())
                    .or_default()
                    .push(f.name.clone());
            }
        }
    }
    for (file, names) in failed {
        files
            .entry(file)
            .or_default()
            .push(Why::FailedBefore { tests: names });
    }
    let files = whole_files(files, &tests);
    let one_phase = if files.is_empty() {
        Some("no test file reaches the changed files, and none failed in the parent's run".into())
    } else if files.len() == tests.len() && !files.keys().any(|k| k.contains("::")) {
        Some("every test file is reached: phase one would be the whole suite".into())
    } else {
        None
    };
    Ok(Selection {
        one_phase,
        files,
        changed,
        test_files: tests.len(),
        selects: Selects::TestFiles,
        rest: Vec::new(),
    })
}

/// The changed files left to the import graph, and the tests (node ids, or whole files) per-test
/// coverage picks, each with why.
type Covered = (Vec<String>, Vec<(String, Why)>);

/// Splits `changed` by what can say which tests it reaches: the files whose change lies inside
/// function bodies that `contexts` measured (each test that ran a changed line, with why), and
/// the rest (for the import graph).
fn covered(
    repo: &gs_git::Repository,
    parent: gs_git::ObjectId,
    info: &CommitInfo,
    changed: &[String],
    tests: &BTreeSet<String>,
    contexts: &testcov::Contexts,
) -> Result<Covered> {
    let old_tree = objects::tree_of(repo, parent)
        .ok_or_else(|| gs_git::GitError::gix(format!("cannot read the tree of {parent}")))?;
    let new_tree = info.tree;
    let blob = |tree: gs_git::ObjectId, path: &str| -> Option<Vec<u8>> {
        let entry = objects::entry_at(repo, tree, path)?;
        objects::small_blob(repo, entry.id, MAX_SOURCE_BYTES)
    };
    let mut by_graph = Vec::new();
    let mut ran = Vec::new();
    for path in changed {
        let found = (!tests.contains(path))
            .then(|| {
                let (old, new) = (blob(old_tree, path)?, blob(new_tree, path)?);
                let lines = gs_analysis::pylines::changed_body_lines(&old, &new)?;
                Some((contexts.tests_running(path, &lines)?, lines))
            })
            .flatten();
        match found {
            Some((ids, lines)) => ran.extend(ids.into_iter().map(|id| {
                let why = Why::Ran {
                    file: path.clone(),
                    lines: lines.clone(),
                };
                (id, why)
            })),
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
            contexts
                .tests
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
    Ok((by_graph, ran))
}

/// The most bytes of node ids phase one names on its command line (the whole of it is one
/// argument of `sh -c`, at most 128 KiB); past it, their files run whole.
const MAX_NODE_IDS_BYTES: usize = 64 << 10;

/// Phase one's entries with single tests folded into their file where the whole file is in
/// phase one anyway, or when the node ids would make too long a command.
fn whole_files(
    entries: BTreeMap<String, Vec<Why>>,
    tests: &BTreeSet<String>,
) -> BTreeMap<String, Vec<Why>> {
    let ids_bytes: usize = entries
        .keys()
        .filter(|k| k.contains("::"))
        .map(|k| k.len() + 3)
        .sum();
    let mut out: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    let (ids, files): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(k, _)| k.contains("::"));
    out.extend(files);
    for (id, whys) in ids {
        let file = id.split_once("::").map_or(id.as_str(), |(f, _)| f);
        let key =
            if out.contains_key(file) || ids_bytes > MAX_NODE_IDS_BYTES || !tests.contains(file) {
                file.to_string()
            } else {
                id
            };
        let slot = out.entry(key).or_default();
        for w in whys {
            if !slot.contains(&w) {
                slot.push(w);
            }
        }
    }
    out
}

/// What the tree's pytest config says about discovery.
#[derive(Default)]
struct PytestSettings {
    testpaths: Vec<String>,
    /// `python_files` is set: test files are named otherwise.
    custom_discovery: bool,
}

/// pytest's config as it picks it: the first of `pytest.ini`, `pyproject.toml`'s
/// `[tool.pytest.ini_options]`, `tox.ini`'s `[pytest]`, `setup.cfg`'s `[tool:pytest]`.
fn pytest_settings(
    text_of: &dyn Fn(&str) -> Option<String>,
    pyproject: Option<&str>,
) -> PytestSettings {
    let ini = |text: &str, section: &str| -> Option<PytestSettings> {
        let mut inside = false;
        let mut found = false;
        let mut s = PytestSettings::default();
        let mut in_testpaths = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                inside = t == format!("[{section}]");
                found |= inside;
                in_testpaths = false;
                continue;
            }
            if !inside || t.is_empty() || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            let continued = line.starts_with(char::is_whitespace);
            if let Some((k, v)) = t.split_once('=').filter(|_| !continued) {
                in_testpaths = k.trim() == "testpaths";
                s.custom_discovery |= k.trim() == "python_files";
                if in_testpaths {
                    s.testpaths.extend(v.split_whitespace().map(str::to_string));
                }
            } else if in_testpaths {
                s.testpaths.extend(t.split_whitespace().map(str::to_string));
            }
        }
        found.then_some(s)
    };
    if let Some(s) = text_of("pytest.ini").and_then(|t| ini(&t, "pytest")) {
        return s;
    }
    if let Some(opts) = pyproject
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|d| d.get("tool")?.get("pytest")?.get("ini_options").cloned())
    {
        let testpaths = match opts.get("testpaths") {
            Some(toml::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(toml::Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
            _ => Vec::new(),
        };
        return PytestSettings {
            testpaths,
            custom_discovery: opts.get("python_files").is_some(),
        };
    }
    if let Some(s) = text_of("tox.ini").and_then(|t| ini(&t, "pytest")) {
        return s;
    }
    text_of("setup.cfg")
        .and_then(|t| ini(&t, "tool:pytest"))
        .unwrap_or_default()
}

/// What `parse` reads of each of `files` (path, blob), cached per blob in the index.
///
/// A blob an earlier selection parsed is read from the cache by its id and `key_of(path)`; the
/// others are parsed now (one over `max_bytes`, or one that does not parse, as the default:
/// nothing seen) and kept, so the next commit parses only the blobs it changed.
pub(super) fn cached_per_blob<'a, T>(
    ctx: &Context,
    repo: &gs_git::Repository,
    files: impl IntoIterator<Item = &'a (String, gs_git::ObjectId)>,
    max_bytes: u64,
    key_of: impl Fn(&str) -> String,
    parse: impl Fn(&str, &[u8]) -> Option<T>,
) -> Result<BTreeMap<String, T>>
where
    T: Serialize + serde::de::DeserializeOwned + Default,
{
    let mut fresh = Vec::new();
    let mut out = BTreeMap::new();
    for (path, id) in files {
        let (hex, key) = (id.to_string(), key_of(path));
        let cached = ctx
            .index
            .cached_analysis(&hex, &key)?
            .and_then(|j| serde_json::from_str::<T>(&j).ok());
        let found = match cached {
            Some(t) => t,
            None => {
                let parsed = objects::small_blob(repo, *id, max_bytes)
                    .and_then(|b| parse(path, &b))
                    .unwrap_or_default();
                if let Ok(json) = serde_json::to_string(&parsed) {
                    fresh.push((hex, key, json));
                }
                parsed
            }
        };
        out.insert(path.clone(), found);
    }
    if !fresh.is_empty() {
        ctx.index.put_analysis(&fresh)?;
    }
    Ok(out)
}

/// What `run --explain-selection` says of one commit.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    pub commit: String,
    /// The configured test command; `None`: detected from the checkout when it runs.
    pub command: Option<String>,
    #[serde(flatten)]
    pub selection: Selection,
}

/// Phase one of `commit`'s run on `refname`, as a run would pick it, without running anything.
pub fn explain(at: Repo<'_>, commit: gs_git::ObjectId, refname: Option<&str>) -> Result<Explained> {
    let Repo { ctx, repo, .. } = at;
    let info = git::commit_info(repo, commit)?;
    let experiment = crate::app::config::commit_config::experiment_of(refname);
    let flags = gs_config::ConfigFile::default();
    let config = crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        experiment.as_deref(),
        &flags,
    )?;
    let selection = select(at, &info, &config)?;
    let command = config.test.command.clone();
    Ok(Explained {
        commit: commit.to_string(),
        command,
        selection,
    })
}
