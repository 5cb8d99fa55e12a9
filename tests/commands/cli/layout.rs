//! The areas of `src/app/` depend one way: read from the `crate::app::…`, `super::…` and
//! `self::…` paths of every file, no file imports one of an area above its own. The areas are
//! in one order, so no circle spans two of them either; a file in no area fails too, so a new
//! one says where it belongs. (`docs/src/development.md` has the same table for readers.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The areas, lowest first, each with the modules (their path under `app`) it holds while they
/// are still flat files. After the move a module's first segment is its area's folder, and
/// `core` is what stays at the top of `app/` (`mod.rs`, here the empty path).
const AREAS: &[(&str, &[&str])] = &[
    // What every area needs: the context and its errors, this home's id and keys, a
    // repository's remotes and names, the commits revision arguments name.
    ("core", &["", "home", "locate", "select", "handle"]),
    // What leaves this machine or arrives at it after a result: statuses on GitHub, alerts,
    // pushes, and a remote's notes taken in (the outbox, `publish/mod.rs`, is its root).
    (
        "publish",
        &["github", "alerts", "remote", "exchange", "bounds"],
    ),
    // A commit's config: the user's layers, its `.sandbox.toml`, an experiment's `[config]`
    // and the metadata that holds it. Below the records, which find a commit's result by it.
    (
        "config",
        &["commit_config", "experiment_meta", "image", "build"],
    ),
    // The records of runs: writing a note and its index row, reading them back (one commit,
    // its logs and failures, views over many), and why a result stands.
    (
        "records",
        &[
            "results", "summary", "views", "commits", "logs", "failures", "explain",
        ],
    ),
    // The tree-sitter analysis of a commit's code and the metrics over it.
    ("analysis", &["analyze", "metrics"]),
    // One commit's execution: its stages, checks, setup step, run directory, the tests it selects,
    // and running many commits.
    (
        "run",
        &[
            "run",
            "stages",
            "checks",
            "setup",
            "exec",
            "selection",
            "testcov",
            "testmap",
        ],
    ),
    // The lifecycle of experiments and the judgements over records.
    (
        "experiment",
        &[
            "experiments",
            "eval",
            "promote",
            "rollback",
            "pull_request",
            "compare",
            "propose",
            "bisect",
            "preview",
        ],
    ),
    // Whole repositories: creating, adopting, the registry, rebuilding the index, housekeeping,
    // access.
    (
        "repo",
        &[
            "repos", "reindex", "forget", "gc", "tokens", "daemons", "demo",
        ],
    ),
    // Turning hooks, watcher events, webhooks, polls and fetches into jobs, and running them.
    (
        "intake",
        &[
            "notify",
            "spool",
            "session",
            "webhook",
            "queue",
            "fleet",
            "fetch",
            "gate",
            "lost_notes",
        ],
    ),
    // Agents' workspaces: an experiment's branch with a live sandbox on it, whose commits are
    // queued and verified like any other (above intake, experiments and runs).
    ("workspace", &["workspace"]),
];

/// The area of the module at `path` (under `app`), lowest first by index.
fn area_of(path: &[String]) -> Option<usize> {
    if let Some(first) = path.first() {
        if let Some(i) = AREAS.iter().position(|(a, _)| a == first) {
            return Some(i);
        }
    }
    if path.is_empty() {
        return Some(0);
    }
    (1..=path.len()).rev().find_map(|k| {
        let prefix = path[..k].join("::");
        AREAS
            .iter()
            .position(|(_, mods)| mods.contains(&prefix.as_str()))
    })
}

/// How a message names the module at `path`.
fn shown(path: &[String]) -> String {
    std::iter::once("app")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path under `app` of the file `rel` (relative to `src/app`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") || segs == ["lib"] {
        segs.pop();
    }
    segs
}

/// The code's tokens: identifiers, `::` and punctuation; comments, strings and chars dropped.
fn tokens(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'#') | Some(b'"')) {
            let hashes = b[i + 1..].iter().take_while(|&&h| h == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push("r".into());
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '"'); otherwise a lifetime, read as punctuation.
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(text[start..i].to_string());
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push("::".into());
            i += 2;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// The paths a `use` tree or a path expression starting at `toks[i]` names, each under
/// `prefix`; returns them and where they end.
fn paths_at(toks: &[String], mut i: usize, prefix: &[String]) -> (Vec<Vec<String>>, usize) {
    let mut segs = prefix.to_vec();
    loop {
        match toks.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                let mut all = Vec::new();
                while i < toks.len() && toks[i] != "}" {
                    let (sub, j) = paths_at(toks, i, &segs);
                    all.extend(sub);
                    i = if j == i { i + 1 } else { j };
                    if toks.get(i).map(String::as_str) == Some(",") {
                        i += 1;
                    }
                }
                return (all, i + 1);
            }
            Some(t) if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                segs.push(t.to_string());
                i += 1;
                if toks.get(i).map(String::as_str) != Some("::") {
                    return (vec![segs], i);
                }
                i += 1;
            }
            _ => return (vec![segs], i),
        }
    }
}

/// Every module of `app` (path under `app`), with the modules of `app` it names.
fn import_graph(root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    import_graph_at(root, &["app".to_string()])
}

/// Every module under `root`, the folder of the module at `prefix` in its crate (path under
/// it), with the modules under `root` it names. A crate's `lib.rs` is its root, the empty path.
fn import_graph_at(root: &Path, prefix: &[String]) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rs_files(root, &mut files);
    if prefix.is_empty() {
        // A crate's binaries are crates of their own.
        files.retain(|f| f != &root.join("main.rs") && !f.starts_with(root.join("bin")));
    }
    let modules: BTreeMap<Vec<String>, Vec<String>> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            (module_of(f.strip_prefix(root).unwrap()), tokens(&text))
        })
        .collect();
    let app = |p: &[String]| -> Option<Vec<String>> {
        // The longest prefix that is a module of `app`.
        let under = p.strip_prefix(prefix)?;
        (0..=under.len())
            .rev()
            .map(|k| under[..k].to_vec())
            .find(|m| modules.contains_key(m))
    };
    let mut graph = BTreeMap::new();
    for (module, toks) in &modules {
        let here: Vec<String> = prefix.iter().chain(module).cloned().collect();
        let mut to = BTreeSet::new();
        let mut i = 0;
        while i < toks.len() {
            let after_path = i > 0 && toks[i - 1] == "::";
            let t = toks[i].as_str();
            let mut base = match t {
                "crate" => Some(Vec::new()),
                "super" | "self" => Some(here.clone()),
                // A child module named bare (`parallel::run` in `run.rs`).
                _ if modules.contains_key(&[module.clone(), vec![t.to_string()]].concat()) => {
                    Some(here.clone())
                }
                _ => None,
            };
            if after_path || toks.get(i + 1).map(String::as_str) != Some("::") {
                base = None;
            }
            let Some(mut base) = base else {
                i += 1;
                continue;
            };
            let mut j = i;
            // `super::super::…`: each climbs one module.
            while matches!(toks.get(j).map(String::as_str), Some("super" | "self"))
                && toks.get(j + 1).map(String::as_str) == Some("::")
            {
                if toks[j] == "super" {
                    base.pop();
                }
                j += 2;
            }
            if t == "crate" {
                j = i + 2;
            }
            let (paths, end) = paths_at(toks, j, &base);
            for p in paths {
                if let Some(m) = app(&p).filter(|m| m != module) {
                    to.insert(m);
                }
            }
            i = end.max(i + 1);
        }
        graph.insert(module.clone(), to);
    }
    graph
}

#[test]
fn app_areas_depend_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/app");
    let graph = import_graph(&root);
    let mut problems = Vec::new();
    for (from, tos) in &graph {
        let Some(a) = area_of(from) else {
            problems.push(format!(
                "{} is in no area: add it to AREAS in tests/commands/cli/layout.rs",
                shown(from)
            ));
            continue;
        };
        for to in tos {
            let Some(b) = area_of(to) else { continue };
            if b <= a {
                continue;
            }
            problems.push(format!(
                "{} ({}) imports {} ({}), an area above its own",
                shown(from),
                AREAS[a].0,
                shown(to),
                AREAS[b].0
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// gix's functions and methods a repository, commit, tree or ref offers: `app/` asks `gs-git`
/// for what they do instead.
const GIX_METHODS: &[&str] = &[
    "find_commit",
    "find_tree",
    "find_blob",
    "find_header",
    "find_object",
    "try_find_object",
    "find_reference",
    "try_find_reference",
    "references",
    "rev_walk",
    "merge_base",
    "config_snapshot",
    "object_hash",
    "write_object",
    "write_blob",
    "remote_names",
    "lookup_entry_by_path",
    "peel_to_commit",
    "peel_to_id",
    "peel_to_kind",
    "parent_ids",
    "tree_id",
    "message_raw",
    "into_sync",
    "to_thread_local",
    "workdir",
    "common_dir",
    "rev_parse_single",
    "head_id",
    "head_commit",
    "head_name",
    "edit_reference",
    "edit_references",
];

/// `app/` reaches git through `gs-git` only: it names no `gix::` path (the types it holds,
/// `Repository` and `ObjectId`, are `gs-git`'s re-exports) and calls none of gix's methods.
#[test]
fn app_calls_git_through_gs_git_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/app");
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    let mut problems = Vec::new();
    for f in &files {
        let toks = tokens(&std::fs::read_to_string(f).unwrap());
        let rel = f.strip_prefix(&root).unwrap().display();
        for w in toks.windows(3) {
            if w[0] == "gix" && w[1] == "::" {
                problems.push(format!("src/app/{rel} names gix::{}", w[2]));
            }
            if w[0] == "." && w[2] == "(" && GIX_METHODS.contains(&w[1].as_str()) {
                problems.push(format!("src/app/{rel} calls gix's .{}()", w[1]));
            }
        }
    }
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No circle of imports spans more than three files, in any crate of the workspace: modules
/// that need each other are cut along the seam (the types both use in one module) rather than
/// grown into a knot. A module's use of what encloses it (`super::`, the crate root's
/// re-exports) is its context, not an arrow of the circle.
#[test]
fn no_import_circle_spans_more_than_three_files() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots = vec![ws.join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(ws.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    roots.extend(crates);
    let mut problems = Vec::new();
    for root in &roots {
        let mut graph = import_graph_at(root, &[]);
        for (module, to) in graph.iter_mut() {
            to.retain(|m| !module.starts_with(m));
        }
        for circle in circles(&graph) {
            if circle.len() > 3 {
                let names: Vec<String> = circle
                    .iter()
                    .map(|m| match m.is_empty() {
                        true => "(root)".to_string(),
                        false => m.join("::"),
                    })
                    .collect();
                problems.push(format!(
                    "{}: {} files import each other: {}",
                    root.strip_prefix(ws).unwrap().display(),
                    circle.len(),
                    names.join(", ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The strongly connected parts of `graph` with more than one module (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on_stack: BTreeSet<&'g Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let Some((w, _)) = self.graph.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    part.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

/// The reader sees what the test relies on: grouped and nested `use` trees, `super::`, a
/// child named bare, and nothing inside comments or strings.
#[test]
fn import_graph_reads_use_trees_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path();
    std::fs::create_dir_all(app.join("run")).unwrap();
    for f in ["mod.rs", "a.rs", "b.rs", "c.rs", "d.rs", "run.rs"] {
        std::fs::write(app.join(f), "").unwrap();
    }
    std::fs::write(
        app.join("run/child.rs"),
        "use super::super::{c::X, Context};",
    )
    .unwrap();
    std::fs::write(
        app.join("a.rs"),
        "use super::{b, c::{self, Y}, Context};\n// super::d::no\nfn f() { let s = \"super::d\"; let c = '\"'; crate::app::run::go(); }",
    )
    .unwrap();
    std::fs::write(app.join("run.rs"), "mod child; fn g() { child::h(); }").unwrap();
    let g = import_graph(app);
    let names = |m: &str| -> Vec<String> {
        let key: Vec<String> = m
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        g[&key].iter().map(|p| p.join("::")).collect()
    };
    assert_eq!(names("a"), ["", "b", "c", "run"]);
    assert_eq!(names("run::child"), ["", "c"]);
    assert_eq!(names("run"), ["run::child"]);
}
