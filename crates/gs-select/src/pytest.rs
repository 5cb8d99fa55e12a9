//! pytest's phase one: the test files that reach a changed Python file through imports, the
//! single tests per-test coverage says ran a changed line, and those that failed in the
//! parent's run; or why the whole suite runs in one phase (what the import graph cannot see
//! means "everything").

use crate::command::{self, pytest::Pytest};
use crate::{cache, ChangeWhy, CommandWhy, Discovery, OnePhase, PerTest, Result, Runner};
use crate::{Selection, Selects, Sources, Why};
use gs_analysis::{imports::python_imports, imports::Import, imports::IMPORTS_VERSION};
use gs_analysis::{pygraph::is_test_file, pygraph::Graph, pygraph::Layout};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The largest file whose imports are read; a bigger one is left out of the graph.
const MAX_SOURCE_BYTES: u64 = 4 << 20;

/// The most bytes of node ids phase one names on its command line (the whole of it is one
/// argument of `sh -c`, at most 128 KiB); past it, their files run whole.
const MAX_NODE_IDS_BYTES: usize = 64 << 10;

/// A recognised pytest command.
pub struct PytestRunner {
    pub command: Option<Pytest>,
}

/// The pytest runner of `command` (`None`: detected when the tree is checked out, pytest when
/// nothing else is), or why it takes no selection.
pub fn runner(command: Option<&str>) -> std::result::Result<PytestRunner, OnePhase> {
    let Some(c) = command else {
        return Ok(PytestRunner { command: None });
    };
    let why = match command::split_words(c) {
        Err(not_plain) => CommandWhy::NotPlain(not_plain),
        Ok(_) => match command::pytest::recognise(c) {
            Some(p) => return Ok(PytestRunner { command: Some(p) }),
            None => CommandWhy::Runner,
        },
    };
    Err(OnePhase::Command {
        command: c.to_string(),
        why,
    })
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

impl Runner for PytestRunner {
    fn selects(&self) -> Selects {
        Selects::TestFiles
    }

    fn select(&self, src: &dyn Sources) -> Result<Selection> {
        let one_phase = |why| Ok(Selection::whole_suite(Selects::TestFiles, why));
        let changes = match crate::listed_changes(src, Selects::TestFiles)? {
            Ok(c) => c,
            Err(why) => return one_phase(why),
        };
        let mut changed = Vec::new();
        for f in &changes.files {
            let p = f.path.as_str();
            let name = p.rsplit('/').next().unwrap_or(p);
            let what = if name == "conftest.py" {
                ChangeWhy::Conftest
            } else if configuration(p) {
                ChangeWhy::Configures
            } else if p.ends_with(".py") && matches!(f.status.as_str(), "deleted" | "renamed") {
                ChangeWhy::PythonMoved {
                    status: f.status.as_str().to_string(),
                }
            } else if p.ends_with(".py") {
                changed.push(p.to_string());
                continue;
            } else if crate::irrelevant(p) {
                continue;
            } else {
                ChangeWhy::NotSource { language: "Python" }
            };
            return one_phase(OnePhase::Changed {
                path: p.to_string(),
                what,
            });
        }
        let files = src.files()?;
        let pyproject = src.text("pyproject.toml", MAX_SOURCE_BYTES);
        let text_of = |path: &str| src.text(path, MAX_SOURCE_BYTES);
        let settings = pytest_settings(&text_of, pyproject.as_deref());
        if settings.custom_discovery {
            return one_phase(OnePhase::Discovery(Discovery::PythonFiles));
        }
        let layout = Layout::new(files.iter().map(|f| f.path.as_str()), pyproject.as_deref());
        let tests: BTreeSet<String> = files
            .iter()
            .map(|f| &f.path)
            .filter(|p| is_test_file(p, &settings.testpaths))
            .cloned()
            .collect();
        let imports: BTreeMap<String, Vec<Import>> = cache::per_blob(
            src,
            files.iter().filter(|f| f.path.ends_with(".py")),
            MAX_SOURCE_BYTES,
            |_| format!("imports-v{IMPORTS_VERSION}:py"),
            |_, text| python_imports(text),
        )?;
        let reexports: HashMap<String, BTreeMap<String, String>> = imports
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
        // Else, where git-sandbox's own test map says which test called which function, a
        // change inside a function reaches the tests that called it.
        let coverage = src.per_test();
        let map = match coverage {
            Some(_) => None,
            None => src.test_map(),
        };
        let (by_graph, ran) = match (&coverage, &map) {
            (Some(per_test), _) => crate::covered(
                src,
                &changed,
                &tests,
                &**per_test,
                &body_lines,
                &|file, lines| Why::Ran { file, lines },
            ),
            (None, Some((made_at, per_test))) => crate::covered(
                src,
                &changed,
                &tests,
                &**per_test,
                &body_lines,
                &|file, lines| Why::Called {
                    file,
                    lines,
                    map: made_at.clone(),
                },
            ),
            (None, None) => (changed.clone(), Vec::new()),
        };
        let mut picked: BTreeMap<String, Vec<Why>> = BTreeMap::new();
        for (test, path) in graph.reaching(&by_graph, &tests) {
            picked.entry(test).or_default().push(Why::Reaches { path });
        }
        // Where imports reach nine tenths of the suite or more (a package whose `__init__`
        // imports everything), the likelier signals pick the graph's part of phase one.
        if !by_graph.is_empty() && picked.len() * 10 >= tests.len() * 9 {
            let map = map.as_ref().map(|(at, m)| (at.as_str(), &**m));
            let likely = likely(src, &by_graph, &tests, map)?;
            let files: BTreeSet<&str> = likely
                .keys()
                .map(|k| k.split_once("::").map_or(k.as_str(), |(f, _)| f))
                .collect();
            if !likely.is_empty() && files.len() < picked.len() {
                picked = likely;
            }
        }
        for (id, why) in ran {
            let file = id.split_once("::").map_or(id.as_str(), |(f, _)| f);
            if tests.contains(file) {
                picked.entry(id).or_default().push(why);
            }
        }
        // The tests that failed in the parent's run, by the file their node id names.
        let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in src.failed_before()? {
            if let Some((file, _)) = name.split_once("::") {
                if tests.contains(file) {
                    failed.entry(file.to_string()).or_default().push(name);
                }
            }
        }
        for (file, names) in failed {
            picked
                .entry(file)
                .or_default()
                .push(Why::FailedBefore { tests: names });
        }
        let sources: Vec<String> = changed
            .iter()
            .filter(|p| !tests.contains(*p))
            .cloned()
            .collect();
        crate::by_function_name(src, &sources, &mut picked, &|_, old, new| {
            gs_analysis::pylines::changed_function_names(old, new)
        });
        let first = first_tests(&picked, &tests);
        let picked = whole_files(picked, &tests);
        let one_phase = if picked.is_empty() {
            Some(OnePhase::NothingReached(Selects::TestFiles))
        } else if picked.len() == tests.len() && !picked.keys().any(|k| k.contains("::")) {
            Some(OnePhase::EverythingReached(Selects::TestFiles))
        } else {
            None
        };
        Ok(Selection {
            one_phase,
            files: picked,
            changed,
            test_files: tests.len(),
            selects: Selects::TestFiles,
            rest: Vec::new(),
            first,
        })
    }
}

/// The single tests the signals name (see [`Selection::first`]), most likely first (by the
/// best rank among their reasons, then by name), at most [`crate::MAX_FIRST`] of them and
/// [`crate::MAX_FIRST_BYTES`] of names; only those of the suite's test files.
fn first_tests(picked: &BTreeMap<String, Vec<Why>>, tests: &BTreeSet<String>) -> Vec<String> {
    let mut best: BTreeMap<&str, u8> = BTreeMap::new();
    for (part, whys) in picked {
        for why in whys {
            let named: Vec<&str> = match why {
                Why::FailedBefore { tests } | Why::FailedWhenChanged { tests, .. } => {
                    tests.iter().map(String::as_str).collect()
                }
                Why::NamedForFunction { .. } | Why::Ran { .. } | Why::Called { .. }
                    if part.contains("::") =>
                {
                    vec![part.as_str()]
                }
                _ => Vec::new(),
            };
            for id in named {
                let file = id.split_once("::").map_or(id, |(f, _)| f);
                if id.contains("::") && tests.contains(file) {
                    let r = best.entry(id).or_insert(u8::MAX);
                    *r = (*r).min(why.rank());
                }
            }
        }
    }
    let mut ordered: Vec<(u8, &str)> = best.into_iter().map(|(id, r)| (r, id)).collect();
    ordered.sort();
    let mut bytes = 0;
    ordered
        .into_iter()
        .take(crate::MAX_FIRST)
        .take_while(|(_, id)| {
            bytes += id.len() + 1;
            bytes <= crate::MAX_FIRST_BYTES
        })
        .map(|(_, id)| id.to_string())
        .collect()
}

/// The parts of the suite likeliest to fail for a change to `changed` (files the import graph
/// is left with): test files named for a changed file, the tests that failed the last times it
/// changed, and the tests the test map says call its functions.
fn likely(
    src: &dyn Sources,
    changed: &[String],
    tests: &BTreeSet<String>,
    map: Option<(&str, &dyn PerTest)>,
) -> Result<BTreeMap<String, Vec<Why>>> {
    let mut out: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    let file_of = |id: &str| id.split_once("::").map_or(id, |(f, _)| f).to_string();
    for f in changed {
        let stem = module_stem(f);
        for t in tests.iter().filter(|t| named_for(t, &stem)) {
            out.entry(t.clone())
                .or_default()
                .push(Why::Named { file: f.clone() });
        }
        for (commit, failed) in src.failed_when_changed(f)? {
            let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for id in failed.into_iter().filter(|id| tests.contains(&file_of(id))) {
                by_file.entry(file_of(&id)).or_default().push(id);
            }
            for (file, ids) in by_file {
                out.entry(file).or_default().push(Why::FailedWhenChanged {
                    file: f.clone(),
                    commit: commit.clone(),
                    tests: ids,
                });
            }
        }
        if let Some(ids) = map.and_then(|(_, m)| m.tests_calling(f)) {
            for id in ids.into_iter().filter(|id| tests.contains(&file_of(id))) {
                out.entry(id).or_default().push(Why::Calls {
                    file: f.clone(),
                    map: map.map(|(at, _)| at.to_string()).unwrap_or_default(),
                });
            }
        }
    }
    Ok(out)
}

/// A module's name as test files are named for it: `src/click/_compat.py` → `compat`, a
/// package's `__init__.py` → the package.
fn module_stem(path: &str) -> String {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let stem = name.strip_suffix(".py").unwrap_or(name);
    let stem = if stem == "__init__" {
        parts.next().unwrap_or(stem)
    } else {
        stem
    };
    stem.trim_start_matches('_').to_ascii_lowercase()
}

/// Whether test file `test` is named for module `stem`: `test_utils.py`, `test_utils_more.py`,
/// `utils_test.py`.
fn named_for(test: &str, stem: &str) -> bool {
    if stem.is_empty() {
        return false;
    }
    let name = test.rsplit('/').next().unwrap_or(test);
    let name = name
        .strip_suffix(".py")
        .unwrap_or(name)
        .to_ascii_lowercase();
    let bare = name
        .strip_prefix("test_")
        .or_else(|| name.strip_suffix("_test"))
        .unwrap_or(&name);
    bare == stem || bare.starts_with(&format!("{stem}_"))
}

/// The lines of a changed Python file inside function bodies, as coverage.py counts them.
fn body_lines(_path: &str, old: &[u8], new: &[u8]) -> Option<Vec<u32>> {
    gs_analysis::pylines::changed_body_lines(old, new)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemTree;

    const TREE: &[(&str, &str)] = &[
        ("pkg/__init__.py", ""),
        ("pkg/a.py", "def a():\n    return 1\n"),
        (
            "pkg/b.py",
            "from pkg.a import a\n\ndef b():\n    return a()\n",
        ),
        ("pkg/c.py", "def c():\n    return 3\n"),
        ("tests/test_a.py", "from pkg.a import a\n"),
        ("tests/test_b.py", "from pkg.b import b\n"),
        ("tests/test_c.py", "from pkg.c import c\n"),
        ("README.md", "hi"),
    ];

    fn select(tree: &MemTree) -> Selection {
        runner(Some("pytest -q"))
            .ok()
            .unwrap()
            .select(tree)
            .unwrap()
    }

    #[test]
    fn a_change_picks_the_test_files_that_import_it_and_says_how() {
        let t = MemTree::commit(TREE, &[("pkg/a.py", Some("def a():\n    return 2\n"))]);
        let s = select(&t);
        assert_eq!(s.one_phase, None);
        assert_eq!(s.test_files, 3);
        assert_eq!(
            s.phase_one().unwrap(),
            ["tests/test_a.py", "tests/test_b.py"]
        );
        assert_eq!(
            s.files["tests/test_b.py"],
            [Why::Reaches {
                path: vec![
                    "pkg/a.py".into(),
                    "pkg/b.py".into(),
                    "tests/test_b.py".into()
                ]
            }]
        );
        // The next selection reads the imports from the cache: only the changed blob is parsed.
        let kept = *t.kept.borrow();
        assert!(kept >= 7, "{kept}");
        let again = MemTree::commit(TREE, &[("pkg/c.py", Some("def c():\n    return 4\n"))]);
        assert_eq!(select(&again).phase_one().unwrap(), ["tests/test_c.py"]);
    }

    #[test]
    fn what_the_graph_cannot_see_is_a_typed_reason() {
        let reason =
            |after: &[(&str, Option<&str>)]| select(&MemTree::commit(TREE, after)).one_phase;
        assert_eq!(
            reason(&[("README.md", Some("x"))]),
            Some(OnePhase::NothingReached(Selects::TestFiles))
        );
        assert!(matches!(
            reason(&[("tests/conftest.py", Some("x"))]),
            Some(OnePhase::Changed {
                what: ChangeWhy::Conftest,
                ..
            })
        ));
        assert!(matches!(
            reason(&[("pkg/data.json", Some("{}"))]),
            Some(OnePhase::Changed {
                what: ChangeWhy::NotSource { language: "Python" },
                ..
            })
        ));
        assert!(matches!(
            reason(&[("pkg/c.py", None)]),
            Some(OnePhase::Changed {
                what: ChangeWhy::PythonMoved { .. },
                ..
            })
        ));
        // A package whose `__init__` imports everything: every test file is reached, and with
        // no likelier signal (no test named for it, no history, no map), the run is one phase.
        let init = Some("from pkg.a import a\nfrom pkg.c import c\nfrom pkg.core import k\n");
        assert_eq!(
            reason(&[
                ("pkg/__init__.py", init),
                ("pkg/core.py", Some("def k():\n    return 2\n")),
            ]),
            Some(OnePhase::EverythingReached(Selects::TestFiles))
        );
        // A test file named for the changed module is likelier: phase one runs it alone.
        let named = select(&MemTree::commit(
            TREE,
            &[
                ("pkg/__init__.py", init),
                ("pkg/a.py", Some("def a():\n    return 2\n")),
            ],
        ));
        assert_eq!(named.phase_one().unwrap(), ["tests/test_a.py"]);
        assert_eq!(
            named.files["tests/test_a.py"],
            [Why::Named {
                file: "pkg/a.py".into()
            }]
        );
        assert_eq!(
            reason(&[
                ("pytest.ini", Some("[pytest]\npython_files = check_*.py\n")),
                ("pkg/a.py", Some("x = 1\n"))
            ]),
            Some(OnePhase::Changed {
                path: "pytest.ini".into(),
                what: ChangeWhy::Configures
            })
        );
        let mut first = MemTree::commit(TREE, &[]);
        first.parent = None;
        assert_eq!(select(&first).one_phase, Some(OnePhase::FirstCommit));
    }

    #[test]
    fn a_failure_in_the_parents_run_is_picked_and_per_test_coverage_names_single_tests() {
        let mut t = MemTree::commit(TREE, &[("pkg/c.py", Some("def c():\n    return 4\n"))]);
        t.failed = vec!["tests/test_a.py::test_one".into(), "elsewhere.py::x".into()];
        let s = select(&t);
        assert_eq!(
            s.files["tests/test_a.py"],
            [Why::FailedBefore {
                tests: vec!["tests/test_a.py::test_one".into()]
            }]
        );
        assert!(s.files.contains_key("tests/test_c.py"));
        // Per-test coverage: of test_c.py's two tests, only the one that ran line 2.
        let lines = |l: &[u32]| {
            BTreeMap::from([(
                "pkg/c.py".to_string(),
                l.iter().copied().collect::<BTreeSet<u32>>(),
            )])
        };
        t.failed.clear();
        t.coverage = Some(BTreeMap::from([
            ("tests/test_c.py::test_x".to_string(), lines(&[2])),
            ("tests/test_c.py::test_y".to_string(), lines(&[1])),
        ]));
        assert_eq!(select(&t).phase_one().unwrap(), ["tests/test_c.py::test_x"]);
    }

    #[test]
    fn the_test_map_picks_the_tests_that_called_a_changed_function() {
        // By imports, the whole file that imports the changed one.
        let mut t = MemTree::commit(TREE, &[("pkg/c.py", Some("def c():\n    return 4\n"))]);
        assert_eq!(select(&t).phase_one().unwrap(), ["tests/test_c.py"]);
        t.map = Some(
            crate::testmap::TestMap::parse(
                br#"{"version":1,"functions":[["pkg/c.py",1,2],["pkg/a.py",1,2]],"outside":[],
                "tests":{"tests/test_c.py::test_c":[0],"tests/test_c.py::test_d":[],"tests/test_a.py::test_a":[1]}}"#,
            )
            .unwrap(),
        );
        let s = select(&t);
        assert_eq!(s.phase_one().unwrap(), ["tests/test_c.py::test_c"]);
        assert_eq!(
            s.files["tests/test_c.py::test_c"],
            [Why::Called {
                file: "pkg/c.py".into(),
                lines: vec![2],
                map: "parent".into()
            }]
        );
    }

    #[test]
    fn likelier_signals_pick_and_order_phase_one_where_imports_reach_everything() {
        let init = Some("from pkg.a import a\nfrom pkg.c import c\nfrom pkg.core import k\n");
        let core = Some("LIMIT = 3\n\ndef k():\n    return LIMIT\n");
        let mut t = MemTree::commit(TREE, &[("pkg/__init__.py", init), ("pkg/core.py", core)]);
        // The last time core.py changed, a test of test_b.py failed; the map says test_c.py's
        // test_c calls core's functions; the parent's run failed a test of test_c.py.
        t.history.insert(
            "pkg/core.py".into(),
            vec![("c0ffee".into(), vec!["tests/test_b.py::test_b".into()])],
        );
        t.map = Some(
            crate::testmap::TestMap::parse(
                br#"{"version":1,"functions":[["pkg/core.py",3,4]],"outside":[],
                "tests":{"tests/test_c.py::test_c":[0],"tests/test_a.py::test_a":[]}}"#,
            )
            .unwrap(),
        );
        t.failed = vec!["tests/test_a.py::test_a".into()];
        let s = select(&t);
        assert_eq!(s.one_phase, None);
        // Most likely first: failed in the parent's run, failed when core.py changed, then the
        // map's callers.
        assert_eq!(
            s.phase_one().unwrap(),
            [
                "tests/test_a.py",
                "tests/test_b.py",
                "tests/test_c.py::test_c"
            ]
        );
        // Inside their files, the tests the signals name run first: failed before, then
        // failed when core.py changed (the map's callers by file only are not named).
        assert_eq!(
            s.first,
            ["tests/test_a.py::test_a", "tests/test_b.py::test_b"]
        );
        assert_eq!(
            s.files["tests/test_b.py"],
            [Why::FailedWhenChanged {
                file: "pkg/core.py".into(),
                commit: "c0ffee".into(),
                tests: vec!["tests/test_b.py::test_b".into()]
            }]
        );
        assert_eq!(
            s.files["tests/test_c.py::test_c"],
            [Why::Calls {
                file: "pkg/core.py".into(),
                map: "parent".into()
            }]
        );
    }

    #[test]
    fn the_tests_named_first_are_bounded_in_count_and_bytes() {
        let tests: BTreeSet<String> = ["tests/test_a.py".to_string()].into();
        let why = Why::FailedBefore { tests: Vec::new() };
        let picked: BTreeMap<String, Vec<Why>> = (0..2000)
            .map(|i| {
                let id = format!("tests/test_a.py::test_{i:04}[{}]", "p".repeat(i % 200));
                let named = Why::FailedWhenChanged {
                    file: "a.py".into(),
                    commit: "c".into(),
                    tests: vec![id.clone()],
                };
                (id, vec![why.clone(), named])
            })
            .collect();
        let first = first_tests(&picked, &tests);
        assert!(!first.is_empty() && first.len() <= crate::MAX_FIRST);
        let bytes: usize = first.iter().map(|n| n.len() + 1).sum();
        assert!(bytes <= crate::MAX_FIRST_BYTES, "{bytes}");
        // A name outside the suite's test files is never named.
        let outside: BTreeMap<String, Vec<Why>> = [(
            "tests/test_a.py".to_string(),
            vec![Why::FailedBefore {
                tests: vec!["elsewhere/test_x.py::test_x".into()],
            }],
        )]
        .into();
        assert!(first_tests(&outside, &tests).is_empty());
    }

    #[test]
    fn commands_that_take_no_selection_say_why() {
        let why = |c: &str| match runner(Some(c)) {
            Err(OnePhase::Command { why, .. }) => Some(why),
            _ => None,
        };
        assert_eq!(
            why("pytest -q && echo ok"),
            Some(CommandWhy::NotPlain(command::NotPlain::ShellSyntax))
        );
        assert_eq!(
            why("env -C sub pytest"),
            Some(CommandWhy::NotPlain(command::NotPlain::PrefixOption))
        );
        assert_eq!(why("make test"), Some(CommandWhy::Runner));
        assert_eq!(why("pytest --lf"), Some(CommandWhy::Runner));
        assert_eq!(why("env PYTHONPATH=src python -m pytest tests -q"), None);
        assert_eq!(why("uv run pytest"), None);
    }
}
