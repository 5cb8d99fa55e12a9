//! Python's import graph of one tree: each file's imports resolved to files the way Python finds
//! them (the project's roots: the checkout, `src/`, the roots `pyproject.toml` names, and the
//! test file's own base directory as pytest puts it on `sys.path`), then the reverse graph: which
//! test files can reach a changed file through imports, and by which path.

use super::imports::Import;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// The tree's files and its Python layout, enough to resolve a module name.
pub struct Layout {
    files: HashSet<String>,
    dirs: HashSet<String>,
    /// Directories module names are looked up in, in order ("" is the checkout's root).
    roots: Vec<String>,
}

impl Layout {
    /// `files`: every path of the tree; `pyproject`: the root's `pyproject.toml`, if any.
    pub fn new<'a>(files: impl IntoIterator<Item = &'a str>, pyproject: Option<&str>) -> Layout {
        let files: HashSet<String> = files.into_iter().map(str::to_string).collect();
        let mut dirs = HashSet::new();
        for f in &files {
            let mut d = f.as_str();
            while let Some((parent, _)) = d.rsplit_once('/') {
                if !dirs.insert(parent.to_string()) {
                    break;
                }
                d = parent;
            }
        }
        let mut roots = vec![String::new()];
        roots.extend(pyproject.map(pyproject_roots).unwrap_or_default());
        if dirs.contains("src") {
            roots.push("src".into());
        }
        let mut seen = HashSet::new();
        roots.retain(|r| seen.insert(r.clone()));
        Layout { files, dirs, roots }
    }

    fn join(dir: &str, rest: &str) -> String {
        if dir.is_empty() {
            rest.to_string()
        } else {
            format!("{dir}/{rest}")
        }
    }

    /// The files importing `parts` under `base` runs: each package's `__init__.py` on the way
    /// and the module itself (`m.py` or `m/__init__.py`); `None` when `base` does not hold it
    /// (a namespace package holds it with no file to run).
    fn module_files(&self, base: &str, parts: &[&str]) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut dir = base.to_string();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let sub = Self::join(&dir, part);
            let init = format!("{sub}/__init__.py");
            let file = format!("{sub}.py");
            if self.dirs.contains(&sub) {
                if self.files.contains(&init) {
                    out.push(init);
                }
                dir = sub;
            } else if last && self.files.contains(&file) {
                out.push(file);
            } else {
                return None;
            }
        }
        Some(out)
    }

    /// The directory pytest's default import mode puts first on `sys.path` for `file`: the
    /// first directory upwards that is not a package.
    fn base_dir(&self, file: &str) -> String {
        let mut dir = file.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        while self.files.contains(&Self::join(&dir, "__init__.py")) && !dir.is_empty() {
            dir = dir.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        }
        dir
    }

    /// Where `imp` in `file` is found: the directory it was found under, and the files
    /// importing it runs (each package's `__init__.py`, then the module); `None`: not a file
    /// of the tree (the standard library, a third-party package).
    fn find(&self, file: &str, imp: &Import) -> Option<(String, Vec<String>)> {
        let parts: Vec<&str> = imp.module.split('.').filter(|p| !p.is_empty()).collect();
        let bases: Vec<String> = if imp.level > 0 {
            // `from .. import x` in a/b/c.py looks in a/.
            let mut dir = file.rsplit_once('/').map_or("", |(d, _)| d).to_string();
            for _ in 1..imp.level {
                dir = dir.rsplit_once('/').map_or("", |(d, _)| d).to_string();
            }
            vec![dir]
        } else {
            let mut b = vec![self.base_dir(file)];
            b.extend(self.roots.iter().cloned());
            b
        };
        bases.into_iter().find_map(|base| {
            let found = if parts.is_empty() {
                let init = Self::join(&base, "__init__.py");
                Some(self.files.get(&init).into_iter().cloned().collect())
            } else {
                self.module_files(&base, &parts)
            }?;
            Some((base, found))
        })
    }

    /// The submodule `name` of the module `imp` names, found under `base`.
    fn submodule(&self, base: &str, imp: &Import, name: &str) -> Option<String> {
        let mut parts: Vec<&str> = imp.module.split('.').filter(|p| !p.is_empty()).collect();
        parts.push(name);
        self.module_files(base, &parts)?.last().cloned()
    }

    /// What a package's `__init__.py` re-exports: each name it imports from a module of the
    /// tree (`from .core import Command`), with that module's file.
    pub fn reexports(&self, init: &str, imports: &[Import]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for imp in imports.iter().filter(|i| !i.names.is_empty()) {
            let Some((base, found)) = self.find(init, imp) else {
                continue;
            };
            for name in &imp.names {
                let from = self
                    .submodule(&base, imp, name)
                    .or_else(|| found.last().cloned());
                if let Some(f) = from.filter(|f| f != init) {
                    out.insert(name.clone(), f);
                }
            }
        }
        out
    }

    /// The files `file`'s imports reach directly. A package imported for names it is known to
    /// use (`from pkg import a`, or only `pkg.a` read after `import pkg`) reaches the modules
    /// those names come from (a submodule, or the module its `__init__.py` re-exports the name
    /// from: `reexports`), and its `__init__.py` only weakly; so do the parent packages of any
    /// module imported.
    pub fn resolve(
        &self,
        file: &str,
        imports: &[Import],
        reexports: &HashMap<String, BTreeMap<String, String>>,
    ) -> Edges {
        let mut e = Edges::default();
        for imp in imports {
            let Some((base, mut found)) = self.find(file, imp) else {
                continue;
            };
            let module = found.pop();
            e.weak.extend(found);
            let single = imp.level == 0 && !imp.module.contains('.');
            let used: Option<Vec<&str>> = if !imp.names.is_empty() {
                Some(imp.names.iter().map(String::as_str).collect())
            } else if single {
                imp.uses
                    .as_ref()
                    .map(|u| u.iter().map(String::as_str).collect())
            } else {
                None
            };
            match (module, used) {
                (Some(m), Some(names)) if m.ends_with("__init__.py") => {
                    for name in names {
                        let from = self
                            .submodule(&base, imp, name)
                            .or_else(|| reexports.get(&m).and_then(|r| r.get(name)).cloned());
                        e.strong.insert(from.unwrap_or_else(|| m.clone()));
                    }
                    e.weak.insert(m);
                }
                (module, _) => {
                    e.strong.extend(module);
                    // `from pkg import name`: the name may be a submodule.
                    for name in &imp.names {
                        e.strong.extend(self.submodule(&base, imp, name));
                    }
                }
            }
        }
        e.strong.remove(file);
        e.weak.remove(file);
        let strong = &e.strong;
        e.weak.retain(|w| !strong.contains(w));
        e
    }
}

/// What one file's imports reach.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Edges {
    /// Files whose code it may use: a change there, or anywhere they reach, reaches it.
    pub strong: BTreeSet<String>,
    /// Package `__init__.py` files it only runs on the way: a change to one of them reaches
    /// it, not a change to what they import.
    pub weak: BTreeSet<String>,
}
/// Roots `pyproject.toml` names for its packages: setuptools' `package-dir` and `where`,
/// poetry's `from`, hatch's `packages = ["src/pkg"]`.
fn pyproject_roots(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let tool = doc.get("tool");
    let at = |path: &[&str]| {
        let mut v = tool?;
        for p in path {
            v = v.get(p)?;
        }
        Some(v)
    };
    let mut roots = Vec::new();
    let clean = |s: &str| s.trim_start_matches("./").trim_end_matches('/').to_string();
    if let Some(d) = at(&["setuptools", "package-dir", ""]).and_then(|v| v.as_str()) {
        roots.push(clean(d));
    }
    if let Some(w) = at(&["setuptools", "packages", "find", "where"]).and_then(|v| v.as_array()) {
        roots.extend(w.iter().filter_map(|v| v.as_str()).map(clean));
    }
    if let Some(p) = at(&["poetry", "packages"]).and_then(|v| v.as_array()) {
        roots.extend(p.iter().filter_map(|v| v.get("from")?.as_str()).map(clean));
    }
    if let Some(p) =
        at(&["hatch", "build", "targets", "wheel", "packages"]).and_then(|v| v.as_array())
    {
        roots.extend(
            p.iter()
                .filter_map(|v| v.as_str()?.rsplit_once('/').map(|(d, _)| clean(d))),
        );
    }
    roots.retain(|r| r != "." && !r.split('/').any(|c| c == ".."));
    roots
}

/// Whether pytest's default discovery collects `path`: `test_*.py` or `*_test.py`, under one of
/// `testpaths` (none: anywhere), in no directory pytest skips by default.
pub fn is_test_file(path: &str, testpaths: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let named = name.ends_with(".py")
        && (name.starts_with("test_") || name.trim_end_matches(".py").ends_with("_test"));
    let under = testpaths.is_empty()
        || testpaths.iter().any(|t| {
            let t = t.trim_start_matches("./").trim_end_matches('/');
            t.is_empty() || t == "." || path == t || path.starts_with(&format!("{t}/"))
        });
    let skipped_dir = path.split('/').rev().skip(1).any(|d| {
        d.starts_with('.')
            || matches!(
                d,
                "build" | "dist" | "node_modules" | "venv" | "CVS" | "_darcs"
            )
            || d.ends_with(".egg")
    });
    named && under && !skipped_dir
}

/// The import graph of one tree, both ways.
#[derive(Default)]
pub struct Graph {
    /// file → the files that import it (strongly), and those that only run it (weakly).
    importers: HashMap<String, BTreeSet<String>>,
    runners: HashMap<String, BTreeSet<String>>,
}

impl Graph {
    pub fn new(edges: &BTreeMap<String, Edges>) -> Graph {
        let mut g = Graph::default();
        for (from, e) in edges {
            for to in &e.strong {
                g.importers
                    .entry(to.clone())
                    .or_default()
                    .insert(from.clone());
            }
            for to in &e.weak {
                g.runners
                    .entry(to.clone())
                    .or_default()
                    .insert(from.clone());
            }
        }
        g
    }

    /// The test files (`is_test`) that reach any of `changed`, each with the path of files from
    /// a changed file to it. A `conftest.py` that is reached reaches every test file beneath
    /// its directory (pytest loads it for them).
    pub fn reaching(
        &self,
        changed: &[String],
        tests: &BTreeSet<String>,
    ) -> BTreeMap<String, Vec<String>> {
        let mut came_from: HashMap<String, Option<String>> = HashMap::new();
        let mut queue = VecDeque::new();
        for c in changed {
            if came_from.insert(c.clone(), None).is_none() {
                queue.push_back(c.clone());
            }
        }
        while let Some(file) = queue.pop_front() {
            let start = came_from.get(&file).is_some_and(Option::is_none);
            let mut next: Vec<String> = self
                .importers
                .get(&file)
                .into_iter()
                .chain(self.runners.get(&file).filter(|_| start))
                .flatten()
                .cloned()
                .collect();
            if file == "conftest.py" || file.ends_with("/conftest.py") {
                let dir = file.trim_end_matches("conftest.py");
                next.extend(tests.iter().filter(|t| t.starts_with(dir)).cloned());
            }
            for n in next {
                if !came_from.contains_key(&n) {
                    came_from.insert(n.clone(), Some(file.clone()));
                    queue.push_back(n);
                }
            }
        }
        let mut out = BTreeMap::new();
        for t in tests {
            if !came_from.contains_key(t) {
                continue;
            }
            let mut chain = vec![t.clone()];
            let mut at = t.clone();
            while let Some(Some(prev)) = came_from.get(&at) {
                chain.push(prev.clone());
                at = prev.clone();
            }
            chain.reverse();
            out.insert(t.clone(), chain);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(level: u32, module: &str, names: &[&str]) -> Import {
        Import {
            level,
            module: module.into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            uses: None,
        }
    }

    /// Every file `file`'s imports reach, strongly or weakly.
    fn r(l: &Layout, file: &str, imports: &[Import]) -> BTreeSet<String> {
        let e = l.resolve(file, imports, &HashMap::new());
        e.strong.into_iter().chain(e.weak).collect()
    }

    const FILES: [&str; 9] = [
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/sub/__init__.py",
        "src/pkg/sub/deep.py",
        "tests/helpers.py",
        "tests/test_core.py",
        "tests/conftest.py",
        "pyproject.toml",
        "lib/other.py",
    ];

    #[test]
    fn modules_resolve_as_python_finds_them() {
        let l = Layout::new(FILES, None);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        // `import pkg.sub.deep` runs each package's __init__ on the way.
        assert_eq!(
            r(&l, "tests/test_core.py", &[imp(0, "pkg.sub.deep", &[])]),
            set(&[
                "src/pkg/__init__.py",
                "src/pkg/sub/__init__.py",
                "src/pkg/sub/deep.py"
            ])
        );
        // `from pkg import core`: a submodule named in a from-import.
        assert_eq!(
            r(
                &l,
                "tests/test_core.py",
                &[imp(0, "pkg", &["core", "VERSION"])]
            ),
            set(&["src/pkg/__init__.py", "src/pkg/core.py"])
        );
        // The test's own directory is on sys.path (pytest's prepend mode).
        assert_eq!(
            r(&l, "tests/test_core.py", &[imp(0, "helpers", &[])]),
            set(&["tests/helpers.py"])
        );
        // Relative imports, one and two dots.
        assert_eq!(
            r(
                &l,
                "src/pkg/sub/deep.py",
                &[imp(2, "core", &[]), imp(1, "", &[])]
            ),
            set(&["src/pkg/core.py", "src/pkg/sub/__init__.py"])
        );
        assert_eq!(
            r(&l, "src/pkg/core.py", &[imp(1, "", &["sub"])]),
            set(&["src/pkg/__init__.py", "src/pkg/sub/__init__.py"])
        );
        // The standard library and third-party modules are not files of the tree.
        assert!(r(
            &l,
            "src/pkg/core.py",
            &[imp(0, "os.path", &[]), imp(0, "click", &[])]
        )
        .is_empty());
        // A package imported for names: the modules its __init__ takes them from.
        let mut re = HashMap::new();
        let init = "src/pkg/__init__.py".to_string();
        re.insert(
            init.clone(),
            l.reexports(
                &init,
                &[imp(1, "core", &["Thing"]), imp(1, "sub", &["deep"])],
            ),
        );
        let mut used = imp(0, "pkg", &[]);
        used.uses = Some(vec!["Thing".into()]);
        let e = l.resolve("tests/test_core.py", &[used], &re);
        assert_eq!(e.strong, set(&["src/pkg/core.py"]));
        assert_eq!(e.weak, set(&["src/pkg/__init__.py"]));
        // Used otherwise (passed on): all of it.
        let e = l.resolve("tests/test_core.py", &[imp(0, "pkg", &[])], &re);
        assert_eq!(e.strong, set(&["src/pkg/__init__.py"]));
        // A namespace package (no __init__.py) holds its modules all the same.
        let l2 = Layout::new(["ns/mod.py", "t/test_x.py"], None);
        assert_eq!(
            r(&l2, "t/test_x.py", &[imp(0, "ns", &["mod"])]),
            set(&["ns/mod.py"])
        );
        // A root pyproject.toml names.
        let l = Layout::new(
            FILES,
            Some("[tool.setuptools.packages.find]\nwhere = [\"lib\"]\n"),
        );
        assert_eq!(
            r(&l, "tests/test_core.py", &[imp(0, "other", &[])]),
            set(&["lib/other.py"])
        );
    }

    #[test]
    fn test_files_reach_changes_through_imports_and_conftest() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let strong = |v: &[&str]| Edges {
            strong: s(v),
            weak: BTreeSet::new(),
        };
        let mut edges = BTreeMap::new();
        edges.insert("tests/test_a.py".to_string(), strong(&["pkg/a.py"]));
        edges.insert(
            "tests/test_b.py".to_string(),
            Edges {
                strong: s(&["pkg/b.py"]),
                weak: s(&["pkg/__init__.py"]),
            },
        );
        edges.insert("pkg/b.py".to_string(), strong(&["pkg/util.py"]));
        edges.insert("pkg/__init__.py".to_string(), strong(&["pkg/a.py"]));
        edges.insert("tests/sub/conftest.py".to_string(), strong(&["pkg/c.py"]));
        let g = Graph::new(&edges);
        let tests = s(&["tests/test_a.py", "tests/test_b.py", "tests/sub/test_c.py"]);
        let r = g.reaching(&["pkg/util.py".into()], &tests);
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            vec![(
                "tests/test_b.py".to_string(),
                vec![
                    "pkg/util.py".into(),
                    "pkg/b.py".into(),
                    "tests/test_b.py".into()
                ]
            )]
        );
        let r = g.reaching(&["pkg/c.py".into()], &tests);
        assert_eq!(r.keys().collect::<Vec<_>>(), vec!["tests/sub/test_c.py"]);
        // A package's __init__ that a test only runs on the way: its own change reaches the
        // test, not a change to what it imports.
        let r = g.reaching(&["pkg/a.py".into()], &tests);
        assert_eq!(r.keys().collect::<Vec<_>>(), vec!["tests/test_a.py"]);
        let r = g.reaching(&["pkg/__init__.py".into()], &tests);
        assert_eq!(r.keys().collect::<Vec<_>>(), vec!["tests/test_b.py"]);
        // A test file named like the changed file is no evidence of reach.
        assert!(g
            .reaching(&["pkg/x.py".into()], &s(&["tests/test_x.py"]))
            .is_empty());
    }

    #[test]
    fn pytest_discovery_names_test_files() {
        let none: Vec<String> = Vec::new();
        assert!(is_test_file("tests/test_a.py", &none));
        assert!(is_test_file("a_test.py", &none));
        assert!(!is_test_file("tests/helpers.py", &none));
        assert!(!is_test_file(".venv/lib/test_x.py", &none));
        assert!(!is_test_file("docs/test_a.py", &["tests".into()]));
        assert!(is_test_file("tests/u/test_a.py", &["tests/".into()]));
    }
}
