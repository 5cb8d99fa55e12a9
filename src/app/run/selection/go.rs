//! Which packages phase one (the probe beside a `go test` run) picks for a commit: those whose Go
//! files it changed and every package that imports one of them (transitively), and those that
//! failed in the parent's run. Or why there is no probe (go.mod, go.sum, go.work, vendored code, test data, a file
//! that is not Go, cgo, `//go:embed`, build constraints).

use super::{cached_per_blob, irrelevant, Selection, Selects, Why};
use crate::app::{Context, Repo, Result};
use gs_analysis::{gograph, gograph::GoFile, gograph::GO_IMPORTS_VERSION};
use gs_analysis::{pygraph::Edges, pygraph::Graph};
use gs_config::Config;
use gs_git as git;
use gs_git::{objects, CommitInfo};
use gs_runner::{go_cmd, go_cmd::GoTest};
use gs_store::RepoRow;
use std::collections::{BTreeMap, BTreeSet};

/// The largest file whose imports are read; a bigger one (generated tables) is left out of the
/// graph.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The most bytes of package names the probe's command line holds (the whole of it is one
/// argument of `sh -c`, at most 128 KiB).
const MAX_PACKAGE_BYTES: usize = 64 << 10;

/// The `go test` command `config` runs in `info`'s tree: the configured one, or with none
/// configured `go test ./...` of a tree with a `go.mod` (and no `Cargo.toml`, which detection
/// picks first).
fn command_of(repo: &gs_git::Repository, info: &CommitInfo, config: &Config) -> Option<GoTest> {
    match config.test.command.as_deref() {
        Some(c) => go_cmd::recognise(c),
        None if !git::path_in_tree(repo, info.tree, "Cargo.toml")
            && git::path_in_tree(repo, info.tree, "go.mod") =>
        {
            go_cmd::recognise("go test ./...")
        }
        None => None,
    }
}

/// Phase one of `info`'s run when its tests are a `go test` of package patterns; `None` when
/// they are not.
pub(super) fn select(
    at: Repo<'_>,
    info: &CommitInfo,
    config: &Config,
) -> Result<Option<Selection>> {
    let Repo { ctx, repo, row } = at;
    let Some(go) = command_of(repo, info, config) else {
        return Ok(None);
    };
    let one_phase = |why: String| Ok(Some(Selection::one_phase_of(Selects::Packages, why)));
    let Some(parent) = info.parents.first() else {
        return one_phase("a first commit: no parent to compare with".into());
    };
    let module = git::blob_at(repo, info.tree, "go.mod")
        .ok()
        .flatten()
        .and_then(|(id, _)| objects::blob(repo, id).ok())
        .and_then(|b| gograph::module_path(&String::from_utf8_lossy(&b)));
    let Some(module) = module else {
        return one_phase(
            "the tree has no go.mod naming a module at its root: its packages are not known".into(),
        );
    };
    let changes = git::diff::commit_changes(repo, info)?;
    if changes.files_omitted > 0 {
        return one_phase(format!(
            "{} files changed: more than the {} whose packages are looked up",
            changes.files_changed,
            changes.files.len()
        ));
    }
    let blobs: Vec<(String, gs_git::ObjectId)> = objects::walk(repo, info.tree)?
        .into_iter()
        .filter(|e| e.kind.is_file())
        .map(|e| (e.path, e.id))
        .collect();
    if blobs.iter().any(|(p, _)| p == "go.work") {
        return one_phase(
            "the tree has a go.work: a workspace of modules is not followed here".into(),
        );
    }
    // `./...` stops at a nested module: its packages are not this one's.
    let nested: Vec<String> = blobs
        .iter()
        .filter_map(|(p, _)| Some(format!("{}/", p.strip_suffix("/go.mod")?)))
        .collect();
    let in_nested = |p: &str| nested.iter().any(|d| p.starts_with(d.as_str()));
    let sources: Vec<(String, gs_git::ObjectId)> = blobs
        .iter()
        .filter(|(p, _)| gograph::package_of(p).is_some() && !in_nested(p))
        .cloned()
        .collect();
    let package_of = |p: &str| gograph::package_of(p).filter(|_| !in_nested(p));
    let present: BTreeSet<String> = sources.iter().filter_map(|(p, _)| package_of(p)).collect();
    let mut changed_files = Vec::new();
    let mut changed = BTreeSet::new();
    for f in &changes.files {
        let p = f.path.as_str();
        let name = p.rsplit('/').next().unwrap_or(p);
        let dirs: Vec<&str> = p.split('/').collect();
        let dirs = &dirs[..dirs.len() - 1];
        let why = if in_nested(p) {
            // Another module: `./...` does not test it.
            continue;
        } else if matches!(name, "go.mod" | "go.sum" | "go.work" | "go.work.sum")
            || p == ".sandbox.toml"
        {
            format!("{p} changed: it configures the module, its dependencies or the tests")
        } else if dirs.contains(&"vendor") {
            format!("{p} changed: vendored code, which every package may build with")
        } else if dirs.contains(&"testdata") {
            format!("{p} changed: test data, which tests read at run time, not through an import")
        } else if !p.ends_with(".go") && irrelevant(p) {
            continue;
        } else if !p.ends_with(".go") {
            format!("{p} changed: not Go source (a data or embedded file, C code, another language), so the import graph cannot say which packages read it")
        } else if gograph::constrained_by_name(name) {
            format!("{p} changed: its name is a build constraint, so which builds hold it is not followed here")
        } else {
            match (package_of(p), f.status.as_str()) {
                (None, _) => format!("{p} changed: a Go file that `go test` builds in no package here"),
                (Some(_), "renamed") => format!("{p} was renamed: the package it left is not known"),
                (Some(pkg), "deleted") if !present.contains(&pkg) => format!(
                    "{p} was deleted with its package {pkg}: the packages that imported it are not in this tree's graph"
                ),
                (Some(pkg), _) => {
                    changed.insert(pkg);
                    changed_files.push(p.to_string());
                    continue;
                }
            }
        };
        return one_phase(why);
    }
    let parsed: BTreeMap<String, GoFile> = cached_per_blob(
        ctx,
        repo,
        &sources,
        MAX_SOURCE_BYTES,
        |_| format!("imports-v{GO_IMPORTS_VERSION}:go"),
        |_, src| gograph::go_file(src),
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
        return one_phase(format!("{p} changed: {what}"));
    }
    // Packages: their imports of the module's packages, whether they have tests, and whether
    // any file builds without a constraint (one that never does `./...` leaves out, where
    // naming it fails).
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
        return one_phase(format!(
            "every Go file of {p} has a build constraint: `go test` of it by name could fail where the patterns leave it out"
        ));
    }
    let tests: BTreeSet<String> = tested
        .into_iter()
        .filter(|p| matched.contains(&p))
        .collect();
    let graph = Graph::new(&edges);
    let changed: Vec<String> = changed.into_iter().collect();
    let mut files: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    for (pkg, path) in graph.reaching(&changed, &tests) {
        files.entry(pkg).or_default().push(Why::Reaches { path });
    }
    for (pkg, names) in failed_before(ctx, row, &parent.to_string(), &module) {
        if tests.contains(&pkg) {
            files
                .entry(pkg)
                .or_default()
                .push(Why::FailedBefore { tests: names });
        }
    }
    let rest: Vec<String> = matched
        .into_iter()
        .filter(|p| !files.contains_key(*p))
        .cloned()
        .collect();
    let one_phase = if files.is_empty() {
        Some("no package reaches the changed files, and none failed in the parent's run".into())
    } else if rest.iter().all(|p| !tests.contains(p)) {
        Some("every package with tests is reached: phase one would be the whole suite".into())
    } else if files.keys().map(|p| p.len() + 1).sum::<usize>() > MAX_PACKAGE_BYTES {
        Some(format!(
            "{} packages in phase one: too long a command line to name them",
            files.len()
        ))
    } else {
        None
    };
    Ok(Some(Selection {
        selects: Selects::Packages,
        one_phase,
        files,
        changed: changed_files,
        test_files: tests.len(),
        rest,
    }))
}

/// The packages (`./dir`) whose tests failed in the parent's run, each with those tests.
///
/// Read from its log (go names a failed test without its package); a package that failed to
/// build has none listed.
fn failed_before(
    ctx: &Context,
    row: &RepoRow,
    parent: &str,
    module: &str,
) -> Vec<(String, Vec<String>)> {
    let log = crate::app::records::logs::log_path(
        &ctx.paths.logs().join(&row.repository_id),
        parent,
        None,
        false,
    );
    let Ok(text) = std::fs::read(&log) else {
        return Vec::new();
    };
    gs_parse::go::failed_packages(&String::from_utf8_lossy(&text))
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
