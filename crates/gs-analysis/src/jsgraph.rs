//! JavaScript/TypeScript's import graph of one tree: each file's module specifiers (ES `import`,
//! `export … from`, `require()`, `import()` with a literal) read from its syntax tree, resolved to
//! files the way Node's and TypeScript's resolvers try them (extensions, `index` files, a
//! package's `exports`/`main`, workspace packages by name). Bare imports of other npm packages
//! are not edges. The reverse walk is [`super::pygraph::Graph`]'s. Which files are the tests is
//! each runner's discovery ([`is_test_file`], [`MochaSpec`]).

mod discovery;

pub use discovery::{is_test_file, MochaSpec, Runner, UnreadGlob};

use super::lang::Grammar;
use super::pygraph::Edges;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// Bump whenever [`js_imports`] could give something else for the same bytes.
pub const JS_IMPORTS_VERSION: u32 = 1;

/// The extensions of the files this graph reads.
const SOURCE_EXTS: [&str; 8] = ["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// What resolvers append to a specifier without one, in the order they try them.
const TRY_EXTS: [&str; 9] = [
    ".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts",
];

/// Whether `path` is JavaScript or TypeScript source.
pub fn is_source(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.')
        .is_some_and(|(_, e)| SOURCE_EXTS.contains(&e))
}

/// The module specifiers of a source file, in the order written; `None` when it could not be
/// parsed. Calls whose callee names a module: `require`, `import()`, `require.resolve`, and the
/// mocks of jest and vitest (`jest.mock('./x')` loads `./x` in place of the real one).
pub fn js_imports(path: &str, src: &[u8]) -> Option<Vec<String>> {
    let grammar = match Grammar::for_path(path)? {
        g @ (Grammar::Javascript | Grammar::Typescript | Grammar::Tsx) => g,
        _ => return None,
    };
    let src = src.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(src);
    let tree = super::parse(grammar, src)?;
    let text = |n: tree_sitter::Node<'_>| n.utf8_text(src).unwrap_or("");
    // A string literal's value, or a template literal's with no substitution.
    let literal = |n: tree_sitter::Node<'_>| -> Option<String> {
        match n.kind() {
            "string" | "template_string" => {
                let mut c = n.walk();
                if n.children(&mut c)
                    .any(|k| k.kind() == "template_substitution")
                {
                    return None;
                }
                let t = text(n);
                Some(t.get(1..t.len().saturating_sub(1))?.to_string())
            }
            _ => None,
        }
    };
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_statement" | "export_statement" | "import_require_clause" => {
                if let Some(s) = node.child_by_field_name("source").and_then(literal) {
                    out.push(s);
                }
            }
            "call_expression" => {
                let callee = node.child_by_field_name("function");
                let loads = callee.is_some_and(|f| {
                    f.kind() == "import"
                        || matches!(
                            text(f),
                            "require"
                                | "require.resolve"
                                | "jest.mock"
                                | "jest.requireActual"
                                | "jest.doMock"
                                | "vi.mock"
                                | "vi.doMock"
                                | "vi.importActual"
                        )
                });
                if loads {
                    let first = node.child_by_field_name("arguments").and_then(|a| {
                        let mut c = a.walk();
                        let found = a.named_children(&mut c).next();
                        found
                    });
                    if let Some(s) = first.and_then(literal) {
                        out.push(s);
                    }
                }
            }
            _ => {}
        }
        let mut c = node.walk();
        let children: Vec<_> = node.children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
    Some(out)
}

/// A package of the tree that other files may import by name.
#[derive(Debug, Clone)]
struct Package {
    dir: String,
    manifest: Value,
}

/// What a specifier stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Files of the tree (a package's `exports` may name several, one per condition).
    Files(Vec<String>),
    /// Outside the tree: Node's own modules, npm packages, a relative path the tree lacks.
    Outside,
    /// A name that is no file, no package of the tree and no declared dependency, yet looks
    /// like a path into the tree or has a scope nothing declares (`@/lib`, `#internal`,
    /// `components/Button`, `@internal/utils`): an alias set in config the graph does not read.
    Unseen,
}

/// The tree's files and packages, enough to resolve a specifier.
pub struct Layout {
    files: HashSet<String>,
    /// The tree's workspace packages (and the root package, which may import itself) by name.
    packages: BTreeMap<String, Package>,
    /// Every dependency any `package.json` of the tree declares.
    declared: HashSet<String>,
    /// Names a bare import may mean a path of the tree by: the root's directories, and
    /// `src/`'s directories and modules.
    top: HashSet<String>,
}

impl Layout {
    /// `files`: every path of the tree; `manifests`: each `package.json` (path, text) outside
    /// `node_modules`; `pnpm_workspace`: the root's `pnpm-workspace.yaml`, if any.
    pub fn new<'a>(
        files: impl IntoIterator<Item = &'a str>,
        manifests: &[(String, String)],
        pnpm_workspace: Option<&str>,
    ) -> Layout {
        let files: HashSet<String> = files.into_iter().map(str::to_string).collect();
        let mut top = HashSet::new();
        for f in &files {
            // The root's directories (`components/`), and `src/`'s directories and modules
            // (`utils.ts`): what `baseUrl` makes importable by bare name. Not the root's
            // files: `rollup.config.js` says nothing of `rollup`.
            if let Some((dir, _)) = f.split_once('/') {
                top.insert(dir.to_string());
            }
            if let Some(rest) = f.strip_prefix("src/") {
                let first = rest.split('/').next().unwrap_or(rest);
                top.insert(first.split('.').next().unwrap_or(first).to_string());
            }
        }
        let parsed: Vec<(String, Value)> = manifests
            .iter()
            .filter_map(|(p, t)| {
                let dir = p.strip_suffix("package.json")?.trim_end_matches('/');
                Some((dir.to_string(), serde_json::from_str(t).ok()?))
            })
            .collect();
        let mut declared = HashSet::new();
        for (_, m) in &parsed {
            for key in [
                "dependencies",
                "devDependencies",
                "peerDependencies",
                "optionalDependencies",
            ] {
                if let Some(o) = m.get(key).and_then(Value::as_object) {
                    declared.extend(o.keys().cloned());
                }
            }
        }
        let mut globs: Vec<String> = Vec::new();
        if let Some((_, root)) = parsed.iter().find(|(d, _)| d.is_empty()) {
            let ws = root.get("workspaces");
            let list = ws
                .and_then(Value::as_array)
                .or_else(|| ws?.get("packages")?.as_array());
            globs.extend(
                list.into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .map(str::to_string),
            );
        }
        globs.extend(pnpm_workspace.map(pnpm_packages).unwrap_or_default());
        let (exclude, include): (Vec<String>, Vec<String>) = globs
            .into_iter()
            .map(|g| g.trim_start_matches("./").trim_end_matches('/').to_string())
            .partition(|g| g.starts_with('!'));
        let exclude: Vec<String> = exclude.iter().map(|g| g[1..].to_string()).collect();
        let inc = gs_util::glob::Globs::new(&include).ok();
        let exc = gs_util::glob::Globs::new(&exclude).ok();
        let mut packages = BTreeMap::new();
        for (dir, m) in parsed {
            let member = dir.is_empty()
                || (inc.as_ref().is_some_and(|g| g.is_match(&dir))
                    && !exc.as_ref().is_some_and(|g| g.is_match(&dir)));
            if let Some(name) = m.get("name").and_then(Value::as_str).filter(|_| member) {
                packages.insert(name.to_string(), Package { dir, manifest: m });
            }
        }
        Layout {
            files,
            packages,
            declared,
            top,
        }
    }

    fn join(dir: &str, rest: &str) -> Option<String> {
        let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
        for p in rest.split('/') {
            match p {
                "" | "." => {}
                ".." => {
                    parts.pop()?;
                }
                p => parts.push(p),
            }
        }
        Some(parts.join("/"))
    }

    /// The file a path names as resolvers try it: itself, TypeScript's `.js` standing for
    /// `.ts`, each extension appended, a directory's `package.json` `main` or `index` file.
    fn file(&self, path: &str) -> Option<String> {
        if self.files.contains(path) {
            return Some(path.to_string());
        }
        let swapped: &[(&str, &[&str])] = &[
            (".js", &[".ts", ".tsx"]),
            (".jsx", &[".tsx"]),
            (".mjs", &[".mts"]),
            (".cjs", &[".cts"]),
        ];
        for (from, to) in swapped {
            if let Some(stem) = path.strip_suffix(from) {
                for t in *to {
                    let p = format!("{stem}{t}");
                    if self.files.contains(&p) {
                        return Some(p);
                    }
                }
            }
        }
        // `..` from a top directory names the root: its package's `main`, or `index.js`.
        let within = |name: &str| match path {
            "" => name.to_string(),
            _ => format!("{path}/{name}"),
        };
        for e in TRY_EXTS.iter().chain(&[".json"]) {
            let p = format!("{path}{e}");
            if !path.is_empty() && self.files.contains(&p) {
                return Some(p);
            }
        }
        if self.files.contains(&within("package.json")) {
            if let Some(p) = self.packages.values().find(|p| p.dir == path) {
                let main = p.manifest.get("main").and_then(Value::as_str);
                let main = main.and_then(|m| Self::join(path, m)).filter(|m| m != path);
                if let Some(f) = main.and_then(|m| self.file(&m)) {
                    return Some(f);
                }
            }
        }
        TRY_EXTS
            .iter()
            .map(|e| within(&format!("index{e}")))
            .find(|p| self.files.contains(p))
    }

    /// A file of a package's built output (`dist/x.js`) that its source (`src/x.ts`) is built
    /// into: the source.
    fn built_from(&self, dir: &str, rel: &str) -> Option<String> {
        let rel = rel.trim_start_matches("./");
        let (first, rest) = rel.split_once('/')?;
        if !matches!(first, "dist" | "lib" | "build" | "out" | "esm" | "cjs") {
            return None;
        }
        let rest = rest
            .strip_suffix(".d.ts")
            .or_else(|| rest.rsplit_once('.').map(|(s, _)| s))
            .unwrap_or(rest);
        self.file(&Self::join(dir, &format!("src/{rest}"))?)
    }

    /// The files `sub` (`.` or `./x`) of a package names.
    fn in_package(&self, p: &Package, sub: &str) -> Vec<String> {
        let mut targets = Vec::new();
        match p.manifest.get("exports") {
            Some(exports) => {
                let map: Vec<(String, &Value)> = match exports.as_object() {
                    Some(o) if o.keys().any(|k| k.starts_with('.')) => {
                        o.iter().map(|(k, v)| (k.clone(), v)).collect()
                    }
                    _ => vec![(".".into(), exports)],
                };
                for (key, v) in map {
                    let star = match key.split_once('*') {
                        Some((pre, post)) => sub
                            .strip_prefix(pre)
                            .and_then(|s| s.strip_suffix(post))
                            .map(str::to_string),
                        None if key == sub => Some(String::new()),
                        None => None,
                    };
                    if let Some(star) = star {
                        let mut strings = Vec::new();
                        all_strings(v, &mut strings);
                        targets.extend(strings.into_iter().map(|s| s.replace('*', &star)));
                    }
                }
            }
            None if sub == "." => {
                for key in ["main", "module", "source", "types"] {
                    if let Some(m) = p.manifest.get(key).and_then(Value::as_str) {
                        targets.push(m.to_string());
                    }
                }
                targets.push("./index".into());
            }
            None => targets.push(sub.to_string()),
        }
        let mut found: Vec<String> = targets
            .iter()
            .filter_map(|t| {
                let path = Self::join(&p.dir, t)?;
                self.file(&path).or_else(|| self.built_from(&p.dir, t))
            })
            .collect();
        if found.is_empty() && sub == "." {
            found.extend(self.file(&Self::join(&p.dir, "src/index").unwrap_or_default()));
        }
        found.sort();
        found.dedup();
        found
    }

    /// What `spec`, imported by `file`, stands for.
    pub fn target(&self, file: &str, spec: &str) -> Target {
        let spec = spec.split('?').next().unwrap_or(spec);
        let dir = file.rsplit_once('/').map_or("", |(d, _)| d);
        if spec == "." || spec == ".." || spec.starts_with("./") || spec.starts_with("../") {
            return match Self::join(dir, spec).and_then(|p| self.file(&p)) {
                Some(f) => Target::Files(vec![f]),
                None => Target::Outside,
            };
        }
        if spec.is_empty() || spec.starts_with("node:") || spec.starts_with('/') {
            return Target::Outside;
        }
        if spec.starts_with('#') || spec.starts_with("~/") || spec.starts_with("@/") {
            return Target::Unseen;
        }
        let mut segs = spec.splitn(3, '/');
        let first = segs.next().unwrap_or_default();
        let (name, sub) = if first.starts_with('@') {
            let second = segs.next().unwrap_or_default();
            (format!("{first}/{second}"), segs.next())
        } else {
            let rest: Vec<&str> = segs.collect();
            (
                first.to_string(),
                (!rest.is_empty()).then(|| spec[first.len() + 1..].as_ref()),
            )
        };
        if let Some(p) = self.packages.get(&name) {
            let sub = sub.map_or(".".to_string(), |s| format!("./{s}"));
            return Target::Files(self.in_package(p, &sub));
        }
        if self.declared.contains(&name) || is_builtin(first) {
            return Target::Outside;
        }
        // A scope no declared package or package of the tree has (`@internal/x`, `@app/x`)
        // is an alias's, as is a name that starts like a path of the tree.
        let scope = format!("{first}/");
        let unknown_scope = first.starts_with('@')
            && !self.declared.iter().any(|d| d.starts_with(&scope))
            && !self.packages.keys().any(|p| p.starts_with(&scope));
        if unknown_scope || self.top.contains(first) {
            Target::Unseen
        } else {
            Target::Outside
        }
    }

    /// The files `file`'s specifiers reach, and the first that names what the graph cannot
    /// follow (an alias).
    pub fn resolve(&self, file: &str, specs: &[String]) -> (Edges, Option<String>) {
        let mut e = Edges::default();
        let mut unseen = None;
        for s in specs {
            match self.target(file, s) {
                Target::Files(f) => e.strong.extend(f),
                Target::Outside => {}
                Target::Unseen => {
                    unseen.get_or_insert_with(|| s.clone());
                }
            }
        }
        e.strong.remove(file);
        (e, unseen)
    }
}

fn all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| all_strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| all_strings(v, out)),
        _ => {}
    }
}

/// `pnpm-workspace.yaml`'s `packages:` list (the only key it reads).
fn pnpm_packages(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if !line.starts_with([' ', '\t', '-']) && !t.is_empty() {
            inside = t.starts_with("packages:");
            continue;
        }
        if let Some(item) = t.strip_prefix('-').filter(|_| inside) {
            let item = item.split(" #").next().unwrap_or(item).trim();
            out.push(item.trim_matches(['\'', '"']).to_string());
        }
    }
    out
}

/// Node's own modules, which may be imported without `node:`.
fn is_builtin(name: &str) -> bool {
    matches!(
        name,
        "assert"
            | "async_hooks"
            | "buffer"
            | "child_process"
            | "cluster"
            | "console"
            | "constants"
            | "crypto"
            | "dgram"
            | "diagnostics_channel"
            | "dns"
            | "domain"
            | "events"
            | "fs"
            | "http"
            | "http2"
            | "https"
            | "inspector"
            | "module"
            | "net"
            | "os"
            | "path"
            | "perf_hooks"
            | "process"
            | "punycode"
            | "querystring"
            | "readline"
            | "repl"
            | "stream"
            | "string_decoder"
            | "sys"
            | "timers"
            | "tls"
            | "trace_events"
            | "tty"
            | "url"
            | "util"
            | "v8"
            | "vm"
            | "wasi"
            | "worker_threads"
            | "zlib"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_kind_of_import_is_read() {
        let src = br#"
import a from './a';
import { b } from "../b.js";
import type { T } from './types';
export * from './reexported';
export { c } from '@scope/pkg/sub';
const d = require('./d');
const e = await import('./e');
jest.mock('./mocked');
const f = require(`./f`);
const g = require(name);
const h = import(`./h/${x}`);
import './side-effect.css';
"#;
        let got = js_imports("x.ts", src).unwrap();
        assert_eq!(
            got,
            [
                "./a",
                "../b.js",
                "./types",
                "./reexported",
                "@scope/pkg/sub",
                "./d",
                "./e",
                "./mocked",
                "./f",
                "./side-effect.css"
            ]
        );
        let cjs = js_imports(
            "x.js",
            b"const x = require('y');\nmodule.exports = () => <div/>;\n",
        );
        assert_eq!(cjs.unwrap(), ["y"]);
        let tsx = js_imports(
            "x.tsx",
            b"import React from 'react';\nexport const A = () => <b/>;\n",
        );
        assert_eq!(tsx.unwrap(), ["react"]);
    }

    fn layout() -> Layout {
        let files = [
            "package.json",
            "src/a.ts",
            "src/b.ts",
            "src/dir/index.js",
            "src/data.json",
            "src/esm.mts",
            "packages/util/package.json",
            "packages/util/src/index.ts",
            "packages/util/src/extra.ts",
            "packages/exp/package.json",
            "packages/exp/lib/main.js",
            "packages/exp/lib/feature/x.js",
            "other/package.json",
            "other/index.js",
            "components/Button.tsx",
        ];
        let manifests = vec![
            (
                "package.json".to_string(),
                r#"{"name":"root","workspaces":["packages/*"],"devDependencies":{"jest":"29"},"dependencies":{"lodash":"4"}}"#.to_string(),
            ),
            (
                "packages/util/package.json".to_string(),
                r#"{"name":"@me/util","main":"dist/index.js"}"#.to_string(),
            ),
            (
                "packages/exp/package.json".to_string(),
                r#"{"name":"exp","exports":{".":{"import":"./lib/main.js","require":"./lib/main.js"},"./feature/*":"./lib/feature/*.js"}}"#.to_string(),
            ),
            (
                "other/package.json".to_string(),
                r#"{"name":"not-a-member"}"#.to_string(),
            ),
        ];
        Layout::new(files, &manifests, None)
    }

    #[test]
    fn specifiers_resolve_as_node_and_typescript_find_them() {
        let l = layout();
        let files = |v: &[&str]| Target::Files(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(l.target("src/b.ts", "./a"), files(&["src/a.ts"]));
        // TypeScript's ESM style: `./a.js` is `./a.ts`.
        assert_eq!(l.target("src/b.ts", "./a.js"), files(&["src/a.ts"]));
        assert_eq!(l.target("src/b.ts", "./esm.mjs"), files(&["src/esm.mts"]));
        assert_eq!(l.target("src/b.ts", "./dir"), files(&["src/dir/index.js"]));
        assert_eq!(
            l.target("src/b.ts", "./data.json"),
            files(&["src/data.json"])
        );
        assert_eq!(l.target("src/dir/index.js", "../a"), files(&["src/a.ts"]));
        // `..` from a top directory: the root package (express's tests' `require('..')`).
        let root = Layout::new(
            ["package.json", "index.js", "lib/express.js", "test/app.js"],
            &[("package.json".into(), r#"{"name":"express"}"#.into())],
            None,
        );
        assert_eq!(root.target("test/app.js", ".."), files(&["index.js"]));
        assert_eq!(root.target("test/app.js", "../"), files(&["index.js"]));
        let main = Layout::new(
            ["package.json", "lib/main.js", "test/a.js"],
            &[(
                "package.json".into(),
                r#"{"name":"m","main":"./lib/main"}"#.into(),
            )],
            None,
        );
        assert_eq!(main.target("test/a.js", ".."), files(&["lib/main.js"]));
        // A workspace package by name: `main` names its build, built from `src/`.
        assert_eq!(
            l.target("src/a.ts", "@me/util"),
            files(&["packages/util/src/index.ts"])
        );
        assert_eq!(
            l.target("src/a.ts", "@me/util/src/extra"),
            files(&["packages/util/src/extra.ts"])
        );
        // `exports`, conditions and a pattern.
        assert_eq!(
            l.target("src/a.ts", "exp"),
            files(&["packages/exp/lib/main.js"])
        );
        assert_eq!(
            l.target("src/a.ts", "exp/feature/x"),
            files(&["packages/exp/lib/feature/x.js"])
        );
        // Not a workspace member: not linked by name.
        assert_eq!(l.target("src/a.ts", "not-a-member"), Target::Outside);
        // npm packages, Node's own modules, a missing relative file: not edges.
        for outside in [
            "lodash",
            "lodash/fp",
            "fs",
            "node:path",
            "react",
            "./missing",
        ] {
            assert_eq!(l.target("src/a.ts", outside), Target::Outside, "{outside}");
        }
        // Aliases the graph does not read.
        for alias in [
            "@/a",
            "#internal",
            "components/Button",
            "~/x",
            "@internal/utils",
        ] {
            assert_eq!(l.target("src/a.ts", alias), Target::Unseen, "{alias}");
        }
        let (e, unseen) = l.resolve("src/b.ts", &["./a".into(), "lodash".into(), "@/x".into()]);
        assert_eq!(e.strong, set(&["src/a.ts"]));
        assert_eq!(unseen.as_deref(), Some("@/x"));
    }

    #[test]
    fn pnpm_workspaces_name_their_packages() {
        let l = Layout::new(
            ["pkgs/a/package.json", "pkgs/a/index.js"],
            &[("pkgs/a/package.json".into(), r#"{"name":"a"}"#.into())],
            Some("# ws\npackages:\n  - 'pkgs/*'\n  - \"!pkgs/skip\"\nonlyBuilt: []\n"),
        );
        assert_eq!(
            l.target("x.js", "a"),
            Target::Files(vec!["pkgs/a/index.js".into()])
        );
    }
}
