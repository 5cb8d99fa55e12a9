//! go test's phase one: the packages whose Go files the commit changed and every package that
//! imports one of them (transitively), and those that failed in the parent's run. Or why there
//! is no probe (go.mod, go.sum, go.work, vendored code, test data, a file that is not Go, cgo,
//! `//go:embed`, build constraints).

use crate::command::go::{recognise, GoTest};
use crate::{cache, ChangeWhy, Discovery, File, OnePhase, Result, Runner};
use crate::{Selection, Selects, Sources, Why};
use gs_analysis::{gograph, gograph::GoFile, gograph::GO_IMPORTS_VERSION};
use gs_analysis::{pygraph::Edges, pygraph::Graph};
use std::collections::{BTreeMap, BTreeSet};

/// The largest file whose imports are read; a bigger one (generated tables) is left out of the
/// graph.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The most bytes of package names the probe's command line holds (the whole of it is one
/// argument of `sh -c`, at most 128 KiB).
const MAX_PACKAGE_BYTES: usize = 64 << 10;

/// A recognised `go test` of package patterns.
pub struct GoRunner {
    pub go: GoTest,
}

/// The `go test` of `command`, or with none configured `go test ./...` of a tree with a `go.mod`
/// (and no `Cargo.toml`, which detection picks first); `None` when the tests are not a go test.
pub fn runner(command: Option<&str>, src: &dyn Sources) -> Option<GoRunner> {
    let go = match command {
        Some(c) => recognise(c),
        None if !src.has_file("Cargo.toml") && src.has_file("go.mod") => recognise("go test ./..."),
        None => None,
    };
    Some(GoRunner { go: go? })
}

impl Runner for GoRunner {
    fn selects(&self) -> Selects {
        Selects::Packages
    }

    fn select(&self, src: &dyn Sources) -> Result<Selection> {
        let go = &self.go;
        let one_phase = |why| Ok(Selection::whole_suite(Selects::Packages, why));
        let changed_at = |path: &str, what| {
            one_phase(OnePhase::Changed {
                path: path.to_string(),
                what,
            })
        };
        let Some(changes) = src.changes()? else {
            return one_phase(OnePhase::FirstCommit);
        };
        let module = src
            .text("go.mod", MAX_SOURCE_BYTES)
            .and_then(|t| gograph::module_path(&t));
        let Some(module) = module else {
            return one_phase(OnePhase::Discovery(Discovery::NoGoModule));
        };
        if changes.files_omitted > 0 {
            return one_phase(OnePhase::TooManyChanged {
                changed: changes.files_changed,
                listed: changes.files.len(),
                selects: Selects::Packages,
            });
        }
        let files = src.files()?;
        if files.iter().any(|f| f.path == "go.work") {
            return one_phase(OnePhase::Discovery(Discovery::GoWork));
        }
        // `./...` stops at a nested module: its packages are not this one's.
        let nested: Vec<String> = files
            .iter()
            .filter_map(|f| Some(format!("{}/", f.path.strip_suffix("/go.mod")?)))
            .collect();
        let in_nested = |p: &str| nested.iter().any(|d| p.starts_with(d.as_str()));
        let sources: Vec<&File> = files
            .iter()
            .filter(|f| gograph::package_of(&f.path).is_some() && !in_nested(&f.path))
            .collect();
        let package_of = |p: &str| gograph::package_of(p).filter(|_| !in_nested(p));
        let present: BTreeSet<String> =
            sources.iter().filter_map(|f| package_of(&f.path)).collect();
        let mut changed_files = Vec::new();
        let mut changed = BTreeSet::new();
        for f in &changes.files {
            let p = f.path.as_str();
            let name = p.rsplit('/').next().unwrap_or(p);
            let dirs: Vec<&str> = p.split('/').collect();
            let dirs = &dirs[..dirs.len() - 1];
            let what = if in_nested(p) {
                // Another module: `./...` does not test it.
                continue;
            } else if matches!(name, "go.mod" | "go.sum" | "go.work" | "go.work.sum")
                || p == ".sandbox.toml"
            {
                ChangeWhy::ConfiguresModule
            } else if dirs.contains(&"vendor") {
                ChangeWhy::Vendored
            } else if dirs.contains(&"testdata") {
                ChangeWhy::TestData
            } else if !p.ends_with(".go") && crate::irrelevant(p) {
                continue;
            } else if !p.ends_with(".go") {
                ChangeWhy::NotSource { language: "Go" }
            } else if gograph::constrained_by_name(name) {
                ChangeWhy::NameConstraint
            } else {
                match (package_of(p), f.status.as_str()) {
                    (None, _) => ChangeWhy::NoPackage,
                    (Some(_), "renamed") => ChangeWhy::GoRenamed,
                    (Some(package), "deleted") if !present.contains(&package) => {
                        ChangeWhy::PackageDeleted { package }
                    }
                    (Some(pkg), _) => {
                        changed.insert(pkg);
                        changed_files.push(p.to_string());
                        continue;
                    }
                }
            };
            return changed_at(p, what);
        }
        let parsed: BTreeMap<String, GoFile> = cache::per_blob(
            src,
            sources.iter().copied(),
            MAX_SOURCE_BYTES,
            |_| format!("imports-v{GO_IMPORTS_VERSION}:go"),
            |_, text| gograph::go_file(text),
        )?;
        for p in &changed_files {
            let Some(f) = parsed.get(p) else { continue };
            let what = if f.cgo {
                "it uses cgo, which compiles the C files beside it"
            } else if f.embeds {
                "it embeds files (//go:embed) the import graph does not follow"
            } else if f.constraint.is_some() {
                "it has a build constraint, so which builds hold it is not followed here"
            } else {
                continue;
            };
            return changed_at(p, ChangeWhy::GoBuild(what));
        }
        // Packages: their imports of the module's packages, whether they have tests, and
        // whether any file builds without a constraint (one that never does `./...` leaves
        // out, where naming it fails).
        let tags = go.tags();
        let mut edges: BTreeMap<String, Edges> = BTreeMap::new();
        let mut tested: BTreeSet<String> = BTreeSet::new();
        let mut plain: BTreeSet<String> = BTreeSet::new();
        let mut maybe: BTreeSet<String> = BTreeSet::new();
        for (path, f) in &parsed {
            let Some(pkg) = package_of(path) else {
                continue;
            };
            let name = path.rsplit('/').next().unwrap_or(path);
            if name.ends_with("_test.go") {
                tested.insert(pkg.clone());
            }
            match &f.constraint {
                _ if gograph::constrained_by_name(name) => {
                    maybe.insert(pkg.clone());
                }
                None => {
                    plain.insert(pkg.clone());
                }
                // `//go:build ignore` (a generator beside the package): no build holds it.
                Some(c) if gograph::never_built(c, &tags) => {}
                Some(_) => {
                    maybe.insert(pkg.clone());
                }
            }
            let e = edges.entry(pkg.clone()).or_default();
            for to in f
                .imports
                .iter()
                .filter_map(|i| gograph::resolve(&module, i))
            {
                if to != pkg && present.contains(&to) {
                    e.strong.insert(to);
                }
            }
        }
        // A package no build holds is neither phase's.
        let matched: Vec<&String> = present
            .iter()
            .filter(|p| go.matches(p) && (plain.contains(*p) || maybe.contains(*p)))
            .collect();
        if let Some(p) = matched.iter().find(|p| !plain.contains(**p)) {
            return one_phase(OnePhase::Discovery(Discovery::ConstrainedPackage(
                p.to_string(),
            )));
        }
        let tests: BTreeSet<String> = tested
            .into_iter()
            .filter(|p| matched.contains(&p))
            .collect();
        let graph = Graph::new(&edges);
        let changed: Vec<String> = changed.into_iter().collect();
        let mut picked: BTreeMap<String, Vec<Why>> = BTreeMap::new();
        for (pkg, path) in graph.reaching(&changed, &tests) {
            picked.entry(pkg).or_default().push(Why::Reaches { path });
        }
        for (pkg, names) in failed_before(src, &module) {
            if tests.contains(&pkg) {
                picked
                    .entry(pkg)
                    .or_default()
                    .push(Why::FailedBefore { tests: names });
            }
        }
        let rest: Vec<String> = matched
            .into_iter()
            .filter(|p| !picked.contains_key(*p))
            .cloned()
            .collect();
        let one_phase = if picked.is_empty() {
            Some(OnePhase::NothingReached(Selects::Packages))
        } else if rest.iter().all(|p| !tests.contains(p)) {
            Some(OnePhase::EverythingReached(Selects::Packages))
        } else if picked.keys().map(|p| p.len() + 1).sum::<usize>() > MAX_PACKAGE_BYTES {
            Some(OnePhase::TooLong {
                parts: picked.len(),
                selects: Selects::Packages,
            })
        } else {
            None
        };
        Ok(Selection {
            selects: Selects::Packages,
            one_phase,
            files: picked,
            changed: changed_files,
            test_files: tests.len(),
            rest,
            first: Vec::new(),
        })
    }
}

/// The packages (`./dir`) whose tests failed in the parent's run, each with those tests.
///
/// Read from its log (go names a failed test without its package); a package that failed to
/// build has none listed.
fn failed_before(src: &dyn Sources, module: &str) -> Vec<(String, Vec<String>)> {
    let Some(log) = src.parent_log() else {
        return Vec::new();
    };
    gs_parse::go::failed_packages(&String::from_utf8_lossy(&log))
        .into_iter()
        .filter_map(|(import, tests)| {
            let tests = if tests.is_empty() {
                vec![format!("{import} (the package)")]
            } else {
                tests
            };
            Some((gograph::resolve(module, &import)?, tests))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemTree;

    const MODULE: &[(&str, &str)] = &[
        ("go.mod", "module example.com/m\n\ngo 1.21\n"),
        ("text/text.go", "package text\n\nfunc Shout() {}\n"),
        (
            "text/text_test.go",
            "package text\n\nimport \"testing\"\n\nfunc TestShout(t *testing.T) {}\n",
        ),
        (
            "app/app.go",
            "package app\n\nimport \"example.com/m/text\"\n\nvar _ = text.Shout\n",
        ),
        (
            "app/app_test.go",
            "package app\n\nimport \"testing\"\n\nfunc TestApp(t *testing.T) {}\n",
        ),
        ("other/o.go", "package other\n"),
        (
            "other/o_test.go",
            "package other\n\nimport \"testing\"\n\nfunc TestO(t *testing.T) {}\n",
        ),
    ];

    #[test]
    fn a_package_and_those_that_import_it_and_the_ones_that_failed() {
        let mut t = MemTree::commit(
            MODULE,
            &[("text/text.go", Some("package text\n\nfunc Shout() { }\n"))],
        );
        let r = runner(None, &t).unwrap();
        let s = r.select(&t).unwrap();
        assert_eq!(s.one_phase, None);
        assert_eq!(s.phase_one().unwrap(), ["./app", "./text"]);
        assert_eq!(s.rest, ["./other"]);
        t.log = Some(b"--- FAIL: TestO (0.00s)\nFAIL\nFAIL\texample.com/m/other\t0.01s\n".to_vec());
        let s = r.select(&t).unwrap();
        assert_eq!(
            s.files.get("./other"),
            Some(&vec![Why::FailedBefore {
                tests: vec!["TestO".into()]
            }])
        );
        let testdata = MemTree::commit(MODULE, &[("text/testdata/x.txt", Some("x"))]);
        assert!(matches!(
            r.select(&testdata).unwrap().one_phase,
            Some(OnePhase::Changed {
                what: ChangeWhy::TestData,
                ..
            })
        ));
    }
}
