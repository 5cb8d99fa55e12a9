//! Phase one for jest and vitest: the test files that reach a changed JavaScript/TypeScript file
//! through imports, and those that failed in the parent's run; or why the whole suite runs in
//! one phase (a config, a manifest, a lockfile, a snapshot, a file nothing imports, an alias).

use super::{cached_per_blob, irrelevant, InWords, Selection, Why};
use crate::app::{Context, Repo, Result};
use gs_analysis::{
    jsgraph, jsgraph::is_source, jsgraph::is_test_file, jsgraph::Layout, jsgraph::Runner,
    jsgraph::JS_IMPORTS_VERSION,
};
use gs_analysis::{pygraph::Edges, pygraph::Graph};
use gs_config::Config;
use gs_git as git;
use gs_git::{objects, CommitInfo};
use gs_runner::{js_cmd, js_cmd::JsCmd};
use gs_store::RepoRow;
use std::collections::{BTreeMap, BTreeSet};

/// The largest file whose imports are read; a bigger one (a bundle) is left out of the graph.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The jest or vitest command `config` runs in `info`'s tree: the configured one, or with none
/// configured `npm test` of a tree whose `package.json` names a test script (as detection
/// picks it when the tree has no `Cargo.toml` or `go.mod`).
pub fn command_of(repo: &gs_git::Repository, info: &CommitInfo, config: &Config) -> Option<JsCmd> {
    let script = || {
        let text = blob_text(repo, info.tree, "package.json")?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(json.pointer("/scripts/test")?.as_str()?.to_string())
    };
    match config.test.command.as_deref() {
        // Only `npm test` reads the script: no blob read for any other command.
        Some(c) if c.split_whitespace().any(|w| w.ends_with("npm")) => {
            js_cmd::recognise(c, script().as_deref())
        }
        Some(c) => js_cmd::recognise(c, None),
        None if !git::path_in_tree(repo, info.tree, "Cargo.toml")
            && !git::path_in_tree(repo, info.tree, "go.mod") =>
        {
            js_cmd::recognise("npm test", script().as_deref())
        }
        None => None,
    }
}

fn blob_text(repo: &gs_git::Repository, tree: gs_git::ObjectId, path: &str) -> Option<String> {
    let entry = objects::entry_at(repo, tree, path).filter(|e| e.kind.is_file())?;
    let blob = objects::small_blob(repo, entry.id, MAX_MANIFEST_BYTES)?;
    Some(String::from_utf8_lossy(&blob).into_owned())
}

/// Files that configure jest, vitest, their transforms or the dependencies.
fn configuration(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    matches!(
        name,
        "package.json"
            | "package-lock.json"
            | "npm-shrinkwrap.json"
            | "yarn.lock"
            | "pnpm-lock.yaml"
            | "pnpm-workspace.yaml"
            | "bun.lock"
            | "bun.lockb"
            | ".npmrc"
            | ".yarnrc"
            | ".yarnrc.yml"
            | ".nvmrc"
            | ".node-version"
            | ".swcrc"
            | ".sandbox.toml"
    ) || matches!(
        stem,
        "jest" | "vitest" | "vite" | "babel" | ".babelrc" | "tsconfig" | "jsconfig" | "setupTests"
    ) || name.contains(".config.")
        || name.starts_with("tsconfig")
        || name.starts_with(".babelrc")
}

/// Phase one of `info`'s run of `cmd`.
pub fn select(at: Repo<'_>, info: &CommitInfo, cmd: &JsCmd) -> Result<Selection> {
    let Repo { ctx, repo, row } = at;
    let runner = cmd.runner;
    let Some(parent) = info.parents.first() else {
        return Ok(Selection::one_phase(
            "a first commit: no parent to compare with",
        ));
    };
    let changes = git::diff::commit_changes(repo, info)?;
    let mut changed = Vec::new();
    let mut others = Vec::new();
    for f in &changes.files {
        let p = f.path.as_str();
        let why = if configuration(p) {
            format!("{p} changed: it configures the tests, their transforms or dependencies")
        } else if p.ends_with(".snap") || p.contains("__snapshots__/") {
            format!(
                "{p} changed: a snapshot the runner reads beside its test, not through an import"
            )
        } else if is_source(p) && matches!(f.status.as_str(), "deleted" | "renamed") {
            format!(
                "{p} was {}: the files that imported it are not in this tree's graph",
                f.status
            )
        } else if is_source(p) {
            changed.push(p.to_string());
            continue;
        } else if irrelevant(p) {
            continue;
        } else {
            // A data file or a stylesheet: seen when a source file imports it.
            others.push(p.to_string());
            continue;
        };
        return Ok(Selection::one_phase(why));
    }
    let blobs: Vec<(String, gs_git::ObjectId)> = objects::walk(repo, info.tree)?
        .into_iter()
        .filter(|e| e.kind.is_file())
        .map(|e| (e.path, e.id))
        // Installed and vendored code (`node_modules/`, `.yarn/releases/`) is not the project's.
        .filter(|(p, _)| {
            !p.split('/')
                .rev()
                .skip(1)
                .any(|d| d == "node_modules" || d.starts_with('.'))
        })
        .collect();
    let text_of = |id: gs_git::ObjectId| -> Option<String> {
        let blob = objects::small_blob(repo, id, MAX_MANIFEST_BYTES)?;
        Some(String::from_utf8_lossy(&blob).into_owned())
    };
    let manifests: Vec<(String, String)> = blobs
        .iter()
        .filter(|(p, _)| p == "package.json" || p.ends_with("/package.json"))
        .filter_map(|(p, id)| Some((p.clone(), text_of(*id)?)))
        .collect();
    if let Some(why) = config_refuses(runner, &blobs, &manifests, &text_of) {
        return Ok(Selection::one_phase(why));
    }
    let pnpm = blobs
        .iter()
        .find(|(p, _)| p == "pnpm-workspace.yaml")
        .and_then(|(_, id)| text_of(*id));
    let layout = Layout::new(
        blobs.iter().map(|(p, _)| p.as_str()),
        &manifests,
        pnpm.as_deref(),
    );
    let tests: BTreeSet<String> = blobs
        .iter()
        .map(|(p, _)| p)
        .filter(|p| is_test_file(p, runner))
        .cloned()
        .collect();
    let specs: BTreeMap<String, Vec<String>> = cached_per_blob(
        ctx,
        repo,
        blobs.iter().filter(|(p, _)| is_source(p)),
        MAX_SOURCE_BYTES,
        cache_key,
        jsgraph::js_imports,
    )?;
    let mut edges: BTreeMap<String, Edges> = BTreeMap::new();
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    for (path, specs) in &specs {
        let (e, unseen) = layout.resolve(path, specs);
        if let Some(spec) = unseen {
            aliases.insert(path.clone(), spec);
        }
        edges.insert(path.clone(), e);
    }
    // An alias hides edges only in a file the tests load: one a test file reaches by imports.
    let mut loaded: BTreeSet<&String> = tests.iter().collect();
    let mut stack: Vec<&String> = tests.iter().collect();
    while let Some(f) = stack.pop() {
        for to in edges.get(f).into_iter().flat_map(|e| &e.strong) {
            if loaded.insert(to) {
                stack.push(to);
            }
        }
    }
    if let Some((path, spec)) = aliases.iter().find(|(p, _)| loaded.contains(p)) {
        return Ok(Selection::one_phase(format!(
            "{path} imports `{spec}`, which is no file, workspace package or declared dependency: an alias set in config the import graph does not follow"
        )));
    }
    let imported: BTreeSet<&String> = edges.values().flat_map(|e| &e.strong).collect();
    for p in others {
        if !imported.contains(&p) {
            return Ok(Selection::one_phase(format!(
                "{p} changed: no source file imports it (a fixture, data or another language), so the import graph cannot say which tests read it"
            )));
        }
        changed.push(p);
    }
    if let Some(p) = changed
        .iter()
        .find(|p| !tests.contains(*p) && !imported.contains(p))
    {
        return Ok(Selection::one_phase(format!(
            "{p} changed and no file imports it: a setup file, a config or an entry point the runner loads itself"
        )));
    }
    let graph = Graph::new(&edges);
    let mut files: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    for (test, path) in graph.reaching(&changed, &tests) {
        files.entry(test).or_default().push(Why::Reaches { path });
    }
    for (file, names) in failed_before(ctx, row, &parent.to_string(), runner, &tests)? {
        files
            .entry(file)
            .or_default()
            .push(Why::FailedBefore { tests: names });
    }
    if runner == Runner::Vitest {
        if let Some(f) = files
            .keys()
            .find(|f| f.contains(['*', '?', '[', ']', '{', '}', '!', '(', ')']))
        {
            return Ok(Selection::one_phase(format!(
                "{f}'s name holds glob characters, which vitest's --exclude would read as a pattern"
            )));
        }
    }
    // The runner's filters match more than one path when one file's path ends another's
    // (jest) or lies within it (vitest): the phases would not split the suite exactly.
    for f in files.keys() {
        if let Some((o, _)) = blobs
            .iter()
            .find(|(o, _)| !files.contains_key(o) && js_cmd::also_matches(runner, f, o))
        {
            return Ok(Selection::one_phase(format!(
                "the filter for {f} would pick {o} too: {} matches test files by {}",
                name(runner),
                match runner {
                    Runner::Jest => "the end of their path",
                    Runner::Vitest => "a part of their path",
                }
            )));
        }
    }
    let one_phase = if files.is_empty() {
        Some("no test file reaches the changed files, and none failed in the parent's run".into())
    } else if files.len() == tests.len() {
        Some("every test file is reached: phase one would be the whole suite".into())
    } else {
        None
    };
    Ok(Selection {
        selects: crate::app::run::selection::Selects::TestFiles,
        one_phase,
        files,
        changed,
        test_files: tests.len(),
        rest: Vec::new(),
    })
}

fn name(r: Runner) -> &'static str {
    match r {
        Runner::Jest => "jest",
        Runner::Vitest => "vitest",
    }
}

/// The cache key of a file's specifiers beside its blob id, by grammar (`.tsx` and `.ts` parse
/// the same bytes differently).
fn cache_key(path: &str) -> String {
    let g = match path.rsplit_once('.').map_or("", |(_, e)| e) {
        "ts" | "mts" | "cts" => "ts",
        "tsx" => "tsx",
        _ => "js",
    };
    format!("imports-v{JS_IMPORTS_VERSION}:{g}")
}

/// What in the runner's config keeps the suite in one phase: coverage collected (a threshold
/// over one phase's share of the suite would fail where the whole suite passes), and for
/// vitest, projects, a `root` or a `dir` that is not a plain literal (its `--exclude` globs are
/// matched relative to each project's directory, so the phases would not split the suite
/// exactly).
fn config_refuses(
    runner: Runner,
    blobs: &[(String, gs_git::ObjectId)],
    manifests: &[(String, String)],
    text_of: &dyn Fn(gs_git::ObjectId) -> Option<String>,
) -> Option<String> {
    const WORDS: [&str; 3] = ["collectCoverage", "coverageThreshold", "thresholds"];
    let root = manifests
        .iter()
        .find(|(p, _)| p == "package.json")
        .and_then(|(_, t)| serde_json::from_str::<serde_json::Value>(t).ok());
    if let Some(jest) = root.as_ref().and_then(|m| m.get("jest")) {
        let text = jest.to_string();
        if runner == Runner::Jest && WORDS.iter().any(|w| text.contains(w)) {
            return Some(
                "package.json's jest config collects coverage: a threshold over part of the suite would fail"
                    .into(),
            );
        }
    }
    for (p, id) in blobs {
        let name = p.rsplit('/').next().unwrap_or(p);
        let stem = name.split('.').next().unwrap_or(name);
        if runner == Runner::Vitest && stem == "vitest" && name.contains(".workspace.") {
            return Some(format!(
                "{p} defines vitest projects: their --exclude globs are relative to each project"
            ));
        }
        let ours = match runner {
            Runner::Jest => stem == "jest",
            Runner::Vitest => stem == "vitest" || stem == "vite",
        };
        if !ours || !name.contains(".config.") {
            continue;
        }
        let text = text_of(*id).unwrap_or_default();
        if WORDS.iter().any(|w| text.contains(w))
            || (runner == Runner::Vitest && text.contains("coverage") && text.contains("enabled"))
        {
            return Some(format!(
                "{p} collects coverage: a threshold over part of the suite would fail"
            ));
        }
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if runner == Runner::Vitest
            && (["projects:", "workspace:", "root:"]
                .iter()
                .any(|w| squeezed.contains(w))
                || js_cmd::vitest_dir(&text).is_none())
        {
            return Some(format!(
                "{p} sets vitest projects, a root or a dir not read here: its --exclude globs would be relative to another directory"
            ));
        }
    }
    None
}

/// The test files whose tests failed in the parent's run, with those tests: vitest names each
/// failure by its file (`|project| file > test`); jest does not, so its log's `FAIL file` lines
/// (and the `●` failures under each) say which files failed.
fn failed_before(
    ctx: &Context,
    row: &RepoRow,
    parent: &str,
    runner: Runner,
    tests: &BTreeSet<String>,
) -> Result<BTreeMap<String, Vec<String>>> {
    let before = ctx
        .index
        .run_for_commit(&row.repository_id, parent)?
        .and_then(|r| r.record.tests);
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Some(before) = before.filter(|t| !t.failures.is_empty()) else {
        return Ok(failed);
    };
    match runner {
        Runner::Vitest => {
            for f in &before.failures {
                let name = f.name.strip_prefix('|').and_then(|n| n.split_once("| "));
                let name = name.map_or(f.name.as_str(), |(_, n)| n);
                let file = name.split(" > ").next().unwrap_or(name).trim();
                if tests.contains(file) {
                    failed
                        .entry(file.to_string())
                        .or_default()
                        .push(f.name.clone());
                }
            }
        }
        Runner::Jest => {
            let log = crate::app::records::logs::log_path(
                &ctx.paths.logs().join(&row.repository_id),
                parent,
                None,
                false,
            );
            let text = std::fs::read(&log).unwrap_or_default();
            let mut file: Option<&String> = None;
            for line in String::from_utf8_lossy(&text).lines() {
                let plain = strip_ansi(line);
                if let Some(f) = plain.trim_start().strip_prefix("FAIL ") {
                    let f = f.split_whitespace().next().unwrap_or_default();
                    file = tests.get(f);
                    if let Some(f) = file {
                        failed.entry(f.clone()).or_default();
                    }
                } else if plain.trim_start().starts_with("PASS ") {
                    file = None;
                } else if let (Some(f), Some(name)) = (file, plain.strip_prefix("  ● ")) {
                    let name = name.trim().to_string();
                    let names = failed.entry(f.clone()).or_default();
                    if name != "Test suite failed to run" && !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
    }
    Ok(failed)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_configures_the_tests_is_known() {
        for p in [
            "package.json",
            "packages/a/package.json",
            "jest.config.js",
            "vitest.config.mts",
            "vite.config.ts",
            "babel.config.cjs",
            ".babelrc",
            "tsconfig.build.json",
            "pnpm-lock.yaml",
            "src/setupTests.ts",
            "eslint.config.mjs",
        ] {
            assert!(configuration(p), "{p}");
        }
        for p in ["src/a.ts", "src/config.ts", "README.md", "src/jester.js"] {
            assert!(!configuration(p), "{p}");
        }
        assert_eq!(
            strip_ansi("\u{1b}[1mFAIL\u{1b}[22m src/a.test.js"),
            "FAIL src/a.test.js"
        );
    }
}
