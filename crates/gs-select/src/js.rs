//! Phase one for jest, vitest and mocha: the test files that reach a changed
//! JavaScript/TypeScript file through imports, and those that failed in the parent's run; or why
//! the whole suite runs in one phase (a config, a manifest, a lockfile, a snapshot, a file
//! nothing imports, an alias, a command whose options choose the files).

use crate::command::js::{self as js_cmd, JsCmd, NotTaken};
use crate::{cache, irrelevant, File, OnePhase, Result, Selection, Selects};
use crate::{ChangeWhy, Sources, Why};
use gs_analysis::{
    jsgraph, jsgraph::is_source, jsgraph::is_test_file, jsgraph::Layout, jsgraph::Runner,
    jsgraph::JS_IMPORTS_VERSION,
};
use gs_analysis::{jslines, pygraph::Edges, pygraph::Graph};
use std::collections::{BTreeMap, BTreeSet};

/// The largest file whose imports are read; a bigger one (a bundle) is left out of the graph.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The longest phase one's command may be: the whole of it is one argument of `sh -c`, at most
/// 128 KiB.
const MAX_COMMAND_BYTES: usize = 64 << 10;

/// A recognised jest, vitest or mocha command.
pub struct JsRunner {
    pub cmd: JsCmd,
}

/// The jest, vitest or mocha command run in the commit's tree: `command`, or with none
/// configured `npm test` of a tree whose `package.json` names a test script (as detection picks
/// it when the tree has no `Cargo.toml` or `go.mod`). `None`: not one of them, nor a package
/// manager's `test`; `Some(Err(_))`: one that takes no file list, and why.
pub fn runner(
    command: Option<&str>,
    src: &dyn Sources,
) -> Option<std::result::Result<JsRunner, OnePhase>> {
    let script = || {
        let text = src.text("package.json", MAX_MANIFEST_BYTES)?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(json.pointer("/scripts/test")?.as_str()?.to_string())
    };
    let (command, found) = match command {
        // Only a package manager's `test` reads the script: no blob read for any other command.
        Some(c) if js_cmd::runs_script(c) => (c, js_cmd::recognise(c, script().as_deref())),
        Some(c) => (c, js_cmd::recognise(c, None)),
        None if !src.has_file("Cargo.toml") && !src.has_file("go.mod") => {
            // Detection runs `npm test` only for a script that is not npm's placeholder.
            let s = script().filter(|s| !s.contains("no test specified"))?;
            ("npm test", js_cmd::recognise("npm test", Some(&s)))
        }
        None => return None,
    };
    let text_of = |p: &str| src.text(p, MAX_MANIFEST_BYTES);
    let files = || {
        src.files()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| !installed(&f.path))
            .map(|f| f.path)
            .collect()
    };
    match found.and_then(|c| c.in_tree(&text_of, &files)) {
        Ok(cmd) => Some(Ok(JsRunner { cmd })),
        Err(NotTaken::Refused(why)) => Some(Err(OnePhase::Other(format!(
            "the test command `{command}` takes no file list: {why}"
        )))),
        Err(NotTaken::Other) => None,
    }
}

/// Installed and vendored code (`node_modules/`, `.yarn/releases/`): not the project's.
fn installed(path: &str) -> bool {
    path.split('/')
        .rev()
        .skip(1)
        .any(|d| d == "node_modules" || d.starts_with('.'))
}

/// Files that configure jest, vitest, mocha, their transforms or the dependencies.
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
        || name.starts_with(".mocharc")
}

impl crate::Runner for JsRunner {
    fn selects(&self) -> Selects {
        Selects::TestFiles
    }

    fn select(&self, src: &dyn Sources) -> Result<Selection> {
        select(src, &self.cmd)
    }
}

/// The test files likeliest to fail for a change to `changed` (a changed test file stands for
/// itself, as `reached` has it): those named for each changed file, and those the test map says
/// called the changed functions while they ran; each with why. `None` when some changed file
/// has none.
fn likely_tests(
    src: &dyn Sources,
    changed: &[String],
    tests: &BTreeSet<String>,
    reached: &BTreeMap<String, Vec<Why>>,
    map: Option<(&str, &dyn crate::PerTest)>,
) -> Option<BTreeMap<String, Vec<Why>>> {
    let mut out: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    for f in changed {
        if tests.contains(f) {
            out.insert(f.clone(), reached.get(f)?.clone());
            continue;
        }
        let mut any = false;
        if let Some(stem) = module_stem(f) {
            for t in tests.iter().filter(|t| named_for(t, &stem)) {
                out.entry(t.clone())
                    .or_default()
                    .push(Why::Named { file: f.clone() });
                any = true;
            }
        }
        let calling = map.and_then(|(at, m)| {
            let old = src.parent_blob(f, MAX_SOURCE_BYTES)?;
            let new = src.text(f, MAX_SOURCE_BYTES)?;
            let lines = jslines::changed_body_lines(f, &old, new.as_bytes())?;
            Some((at, m.tests_calling_lines(f, &lines)?))
        });
        for (at, t) in calling
            .iter()
            .flat_map(|(at, ts)| ts.iter().map(move |t| (at, t)))
            .filter(|(_, t)| tests.contains(*t))
        {
            out.entry(t.clone()).or_default().push(Why::Calls {
                file: f.clone(),
                map: at.to_string(),
            });
            any = true;
        }
        if !any {
            return None;
        }
    }
    Some(out)
}

/// A module's name as test files are named for it: `lib/response.js` → `response`, a
/// directory's `index.js` → the directory. `None` for a name too short to tell.
fn module_stem(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    let stem = if stem == "index" { parts.next()? } else { stem };
    let stem = stem.trim_start_matches('_').to_ascii_lowercase();
    (stem.len() >= 3).then_some(stem)
}

/// Whether test file `test` is named for module `stem`: its name's first part (before any
/// `.`, `-` or `_`, after a `test_` or `test-` prefix) is the module's name or, three letters
/// or more, its start (`res.send.js` for `response.js`, `app.router.js` for `application.js`,
/// `utils.test.ts` for `utils.ts`).
fn named_for(test: &str, stem: &str) -> bool {
    let name = test.rsplit('/').next().unwrap_or(test).to_ascii_lowercase();
    let name = name
        .strip_prefix("test_")
        .or_else(|| name.strip_prefix("test-"))
        .unwrap_or(&name);
    let first = name.split(['.', '-', '_']).next().unwrap_or(name);
    first.len() >= 3 && stem.starts_with(first)
}

/// A reason in words, for the whole suite.
fn whole(why: impl Into<String>) -> Selection {
    Selection::whole_suite(Selects::TestFiles, OnePhase::Other(why.into()))
}

/// Phase one of the commit's run of `cmd`.
fn select(src: &dyn Sources, cmd: &JsCmd) -> Result<Selection> {
    let runner = cmd.runner;
    // (More files changed than listed used to be read as the listed ones alone.)
    let changes = match crate::listed_changes(src, Selects::TestFiles)? {
        Ok(c) => c,
        Err(why) => return Ok(Selection::whole_suite(Selects::TestFiles, why)),
    };
    let mut changed = Vec::new();
    let mut others = Vec::new();
    for f in &changes.files {
        let p = f.path.as_str();
        let changed_at = |why: &str| OnePhase::Changed {
            path: p.to_string(),
            what: ChangeWhy::Other(why.to_string()),
        };
        let why = if configuration(p) {
            changed_at("it configures the tests, their transforms or dependencies")
        } else if p.ends_with(".snap") || p.contains("__snapshots__/") {
            changed_at("a snapshot the runner reads beside its test, not through an import")
        } else if is_source(p) && matches!(f.status.as_str(), "deleted" | "renamed") {
            OnePhase::Other(format!(
                "{p} was {}: the files that imported it are not in this tree's graph",
                f.status
            ))
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
        return Ok(Selection::whole_suite(Selects::TestFiles, why));
    }
    let blobs: Vec<File> = src
        .files()?
        .into_iter()
        .filter(|f| !installed(&f.path))
        .collect();
    let text_of = |id: &str| -> Option<String> {
        let blob = src.blob(id, MAX_MANIFEST_BYTES)?;
        Some(String::from_utf8_lossy(&blob).into_owned())
    };
    let manifests: Vec<(String, String)> = blobs
        .iter()
        .filter(|f| f.path == "package.json" || f.path.ends_with("/package.json"))
        .filter_map(|f| Some((f.path.clone(), text_of(&f.id)?)))
        .collect();
    if let Some(why) = config_refuses(runner, &blobs, &manifests, &text_of) {
        return Ok(whole(why));
    }
    let pnpm = blobs
        .iter()
        .find(|f| f.path == "pnpm-workspace.yaml")
        .and_then(|f| text_of(&f.id));
    let layout = Layout::new(
        blobs.iter().map(|f| f.path.as_str()),
        &manifests,
        pnpm.as_deref(),
    );
    let tests: BTreeSet<String> = match cmd.mocha_spec() {
        // mocha's spec: what its command line and config give it.
        Some(spec) => match spec.test_files(blobs.iter().map(|f| f.path.as_str())) {
            Ok(t) => t,
            Err(g) => {
                return Ok(whole(format!(
                    "mocha's spec or ignore glob `{}` is not read here",
                    g.0
                )))
            }
        },
        None => blobs
            .iter()
            .map(|f| &f.path)
            .filter(|p| is_test_file(p, runner))
            .cloned()
            .collect(),
    };
    let specs: BTreeMap<String, Vec<String>> = cache::per_blob(
        src,
        blobs.iter().filter(|f| is_source(&f.path)),
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
        return Ok(whole(format!(
            "{path} imports `{spec}`, which is no file, workspace package or declared dependency: an alias set in config the import graph does not follow"
        )));
    }
    let imported: BTreeSet<&String> = edges.values().flat_map(|e| &e.strong).collect();
    for p in others {
        if !imported.contains(&p) {
            return Ok(whole(format!(
                "{p} changed: no source file imports it (a fixture, data or another language), so the import graph cannot say which tests read it"
            )));
        }
        changed.push(p);
    }
    if let Some(p) = changed
        .iter()
        .find(|p| !tests.contains(*p) && !imported.contains(p))
    {
        return Ok(whole(format!(
            "{p} changed and no file imports it: a setup file, a config or an entry point the runner loads itself"
        )));
    }
    let graph = Graph::new(&edges);
    // Where git-sandbox's test map (mocha's) says which test file called which function, a
    // change inside function bodies reaches the files that called them; any other change, the
    // import graph's.
    let map = src.test_map();
    let (by_graph, called) = match &map {
        Some((at, m)) => crate::covered(
            src,
            &changed,
            &tests,
            &**m,
            &jslines::changed_body_lines,
            &|file, lines| Why::Called {
                file,
                lines,
                map: at.clone(),
            },
        ),
        None => (changed.clone(), Vec::new()),
    };
    let mut files: BTreeMap<String, Vec<Why>> = BTreeMap::new();
    for (test, path) in graph.reaching(&by_graph, &tests) {
        files.entry(test).or_default().push(Why::Reaches { path });
    }
    // Where imports reach nine tenths of the suite or more (every test builds the app through
    // its entry point, as express's do), likelier signals pick phase one instead, when every
    // changed file has some: the test files named for it, and those the map says called the
    // changed functions while they ran (where the functions were called outside any test too).
    // A likelihood, as pytest's, whose misses recall reports.
    if !by_graph.is_empty() && files.len() * 10 >= tests.len() * 9 {
        let map = map.as_ref().map(|(at, m)| (at.as_str(), &**m));
        if let Some(likely) = likely_tests(src, &by_graph, &tests, &files, map) {
            if likely.len() < files.len() {
                files = likely;
            }
        }
    }
    for (test, why) in called {
        if tests.contains(&test) {
            files.entry(test).or_default().push(why);
        }
    }
    let sources: Vec<String> = changed
        .iter()
        .filter(|p| !tests.contains(*p))
        .cloned()
        .collect();
    crate::by_function_name(src, &sources, &mut files, &jslines::changed_function_names);
    for (file, names) in failed_before(src, runner, &tests)? {
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
            return Ok(whole(format!(
                "{f}'s name holds glob characters, which vitest's --exclude would read as a pattern"
            )));
        }
    }
    // The runner's filters match more than one path when one file's path ends another's
    // (jest) or lies within it (vitest): the phases would not split the suite exactly.
    for f in files.keys() {
        if let Some(o) = blobs
            .iter()
            .map(|b| &b.path)
            .find(|o| !files.contains_key(*o) && js_cmd::also_matches(runner, f, o))
        {
            return Ok(whole(format!(
                "the filter for {f} would pick {o} too: {} matches test files by {}",
                runner.name(),
                match runner {
                    Runner::Jest => "the end of their path",
                    _ => "a part of their path",
                }
            )));
        }
    }
    let one_phase = if files.is_empty() {
        Some(OnePhase::NothingReached(Selects::TestFiles))
    } else if files.len() == tests.len() {
        Some(OnePhase::EverythingReached(Selects::TestFiles))
    } else {
        let parts: Vec<String> = files.keys().cloned().collect();
        // (mocha with a config spec names every other test file to leave out.)
        (cmd.only(&parts).len() > MAX_COMMAND_BYTES).then_some(OnePhase::TooLong {
            parts: parts.len(),
            selects: Selects::TestFiles,
        })
    };
    Ok(Selection {
        selects: Selects::TestFiles,
        one_phase,
        files,
        changed,
        test_files: tests.len(),
        rest: Vec::new(),
        first: Vec::new(),
    })
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
    blobs: &[File],
    manifests: &[(String, String)],
    text_of: &dyn Fn(&str) -> Option<String>,
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
    for File { path: p, id } in blobs {
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
            Runner::Mocha => false,
        };
        if !ours || !name.contains(".config.") {
            continue;
        }
        let text = text_of(id).unwrap_or_default();
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
/// (and the `●` failures under each) say which files failed; nor does mocha, whose log's list
/// of failures gives each one's stack, whose first test file is the one it failed in.
fn failed_before(
    src: &dyn Sources,
    runner: Runner,
    tests: &BTreeSet<String>,
) -> Result<BTreeMap<String, Vec<String>>> {
    let before = src.failed_before()?;
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if before.is_empty() {
        return Ok(failed);
    }
    match runner {
        Runner::Vitest => {
            for f in &before {
                let name = f.strip_prefix('|').and_then(|n| n.split_once("| "));
                let name = name.map_or(f.as_str(), |(_, n)| n);
                let file = name.split(" > ").next().unwrap_or(name).trim();
                if tests.contains(file) {
                    failed.entry(file.to_string()).or_default().push(f.clone());
                }
            }
        }
        Runner::Mocha => {
            let names: BTreeSet<&str> = before.iter().map(String::as_str).collect();
            let text = src.parent_log().unwrap_or_default();
            for (name, file) in mocha_failures(&String::from_utf8_lossy(&text), tests) {
                if names.contains(name.as_str()) {
                    let names = failed.entry(file).or_default();
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        Runner::Jest => {
            let text = src.parent_log().unwrap_or_default();
            for (file, names) in gs_parse::jest_failed_files(&String::from_utf8_lossy(&text)) {
                if tests.contains(&file) {
                    let slot = failed.entry(file).or_default();
                    slot.extend(
                        names
                            .into_iter()
                            .filter(|n| !slot.contains(n))
                            .collect::<Vec<_>>(),
                    );
                }
            }
        }
    }
    Ok(failed)
}

/// The failures a mocha log lists after its counts, each by its full title, with the first
/// of `tests` its stack names (see `gs_parse::mocha_failures`).
fn mocha_failures(log: &str, tests: &BTreeSet<String>) -> Vec<(String, String)> {
    gs_parse::mocha_failures(log)
        .into_iter()
        .filter_map(|(name, paths)| {
            let file = paths.iter().find_map(|path| {
                tests
                    .iter()
                    .find(|t| path == t.as_str() || path.ends_with(&format!("/{t}")))
                    .cloned()
            })?;
            Some((name, file))
        })
        .collect()
}

#[cfg(test)]
mod tests;
