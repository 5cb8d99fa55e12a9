//! mocha as a command names it: its options kept as written, its spec (the files, directories
//! and globs it runs) given on the command line or by its config (`.mocharc.*`, package.json's
//! `mocha`), and phase one's command: the same options with the selected files as the spec.

use super::{quote, NotTaken};
use gs_analysis::jsgraph::MochaSpec;
use std::collections::BTreeSet;

/// A recognised mocha command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mocha {
    /// Phase one's command but its spec: what goes before mocha, mocha, and every option as
    /// written.
    words: Vec<String>,
    /// The discovery the command line gives, then with its config's.
    pub spec: MochaSpec,
    /// Whether mocha reads its `.mocharc.*` and package.json's `mocha` (`--no-config`,
    /// `--no-package` say not).
    config: bool,
    package: bool,
    /// The config gives a spec, which files on the command line add to: the tree's test
    /// files, so that phase one leaves out those it does not run.
    tests: Option<BTreeSet<String>>,
}

/// Options whose value is the next word (or `--opt=value`, or glued to a short one).
const TAKES_VALUE: &[&str] = &[
    "--extension",
    "--file",
    "--global",
    "--globals",
    "--ignore",
    "--exclude",
    "--node-option",
    "-n",
    "--reporter-option",
    "--reporter-options",
    "-O",
    "--require",
    "-r",
    "--spec",
    "--fgrep",
    "-f",
    "--grep",
    "-g",
    "--reporter",
    "-R",
    "--ui",
    "-u",
    "--slow",
    "-s",
    "--timeout",
    "--timeouts",
    "-t",
    "--retries",
    "--jobs",
    "-j",
];

/// Short options that take no value, which may be grouped (`-bc`).
const SHORT_FLAGS: &str = "AbcCipSw";

/// Options that watch, list or print instead of running the suite, or that name another config.
const REFUSED: &[&str] = &[
    "--watch",
    "-w",
    "--watch-files",
    "--watch-ignore",
    "--config",
    "--package",
    "--list-interfaces",
    "--list-reporters",
    "--help",
    "-h",
    "--version",
    "-V",
    "--opts",
    "--",
];

/// The config files mocha looks for, in its order (the first found is the one read).
pub const CONFIG_FILES: [&str; 7] = [
    ".mocharc.cjs",
    ".mocharc.js",
    ".mocharc.mjs",
    ".mocharc.yaml",
    ".mocharc.yml",
    ".mocharc.jsonc",
    ".mocharc.json",
];

fn refused(why: impl Into<String>) -> NotTaken {
    NotTaken::Refused(why.into())
}

/// `before` (the words that run it: a prefix, `npx`, a `PATH=…` of the project's bins) and
/// `args` (mocha's own words after its program) as mocha.
pub(super) fn recognise(before: Vec<String>, args: &[&str]) -> Result<Mocha, NotTaken> {
    let mut words = before;
    let mut spec = MochaSpec::default();
    let (mut config, mut package) = (true, true);
    let mut recursive = None;
    let mut i = 0;
    while let Some(&w) = args.get(i) {
        i += 1;
        if !w.starts_with('-') || w == "-" {
            if spec.spec.is_empty() && matches!(w, "init" | "inspect") {
                return Err(refused(format!("`mocha {w}` does not run the suite")));
            }
            spec.spec.push(w.to_string());
            continue;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w, None),
        };
        if REFUSED.contains(&name) {
            let what = match name {
                "--config" | "--package" => "names a config of its own, which is not read here",
                "--" => "ends mocha's options, which is not followed here",
                _ => "watches, lists or prints instead of running the suite",
            };
            return Err(refused(format!("mocha's `{name}` {what}")));
        }
        match name {
            "--no-config" => config = false,
            "--no-package" => package = false,
            "--recursive" => recursive = Some(true),
            "--no-recursive" => recursive = Some(false),
            _ => {}
        }
        let value = if TAKES_VALUE.contains(&name) {
            match inline {
                Some(v) => Some(v.to_string()),
                None => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| refused(format!("mocha's `{name}` is missing its value")))?;
                    i += 1;
                    Some(v.to_string())
                }
            }
        } else if !name.starts_with("--") && name.len() > 2 {
            // `-t5000` (a value glued to a short option) or `-bc` (grouped flags).
            let short = &name[..2];
            if TAKES_VALUE.contains(&short) {
                Some(w[2..].to_string())
            } else if name[1..].chars().all(|c| SHORT_FLAGS.contains(c)) {
                if name.contains('w') {
                    return Err(refused("mocha's `-w` watches instead of running the suite"));
                }
                None
            } else {
                return Err(refused(format!(
                    "mocha's `{w}` is not an option known here"
                )));
            }
        } else {
            None
        };
        let canonical = if name.len() > 2 || !name.starts_with('-') {
            name
        } else {
            &w[..2]
        };
        match (canonical, value) {
            ("--spec", Some(v)) => {
                spec.spec.push(v);
                continue;
            }
            ("--extension", Some(v)) => spec.extensions.extend(list(&v)),
            ("--ignore" | "--exclude", Some(v)) => spec.ignore.push(v.clone()),
            _ => {}
        }
        words.push(w.to_string());
        if TAKES_VALUE.contains(&name) && inline.is_none() {
            words.push(args[i - 1].to_string());
        }
    }
    spec.recursive = recursive.unwrap_or(false);
    Ok(Mocha {
        words,
        spec,
        config,
        package,
        tests: None,
    })
}

/// A comma-separated option value as mocha splits it.
fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// What a config sets of mocha's discovery.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    spec: Vec<String>,
    extensions: Vec<String>,
    recursive: Option<bool>,
    ignore: Vec<String>,
}

impl Mocha {
    /// The command as it runs in a tree: its config's discovery read (`text_of`: a path's
    /// text), and where the config gives a spec, the tree's test files (`files`: every path of
    /// the tree). Refused: a config that is code setting its discovery, or one not read here.
    pub(super) fn in_tree(
        mut self,
        text_of: &dyn Fn(&str) -> Option<String>,
        files: &dyn Fn() -> Vec<String>,
    ) -> Result<Mocha, NotTaken> {
        let mut found = Vec::new();
        if self.config {
            if let Some((path, text)) = CONFIG_FILES.iter().find_map(|p| Some((*p, text_of(p)?))) {
                found.push(read_config(path, &text)?);
            }
        }
        if self.package {
            let pkg = text_of("package.json")
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            if let Some(m) = pkg.as_ref().and_then(|p| p.get("mocha")) {
                found.push(from_json(m).map_err(|k| {
                    refused(format!(
                        "package.json's mocha `{k}` is not a plain value read here"
                    ))
                })?);
            }
        }
        // Lists add up (the command line's first); a flag is the command line's, else the
        // first config's that sets it.
        let mut from_config = false;
        let mut recursive = None;
        for f in found {
            from_config |= !f.spec.is_empty();
            self.spec.spec.extend(f.spec);
            self.spec.extensions.extend(f.extensions);
            self.spec.ignore.extend(f.ignore);
            recursive = recursive.or(f.recursive);
        }
        let on_command_line = self
            .words
            .iter()
            .any(|w| matches!(w.as_str(), "--recursive" | "--no-recursive"));
        if let Some(r) = recursive.filter(|_| !on_command_line) {
            self.spec.recursive = r;
        }
        if from_config {
            let all = files();
            let tests = self
                .spec
                .test_files(all.iter().map(String::as_str))
                .map_err(|g| {
                    refused(format!(
                        "mocha's spec or ignore glob `{}` is not read here",
                        g.0
                    ))
                })?;
            if let Some(f) = tests.iter().find(|f| has_magic(f)) {
                return Err(refused(format!(
                    "{f}'s name holds glob characters, which mocha's --ignore would read as a pattern"
                )));
            }
            self.tests = Some(tests);
        }
        Ok(self)
    }

    /// Phase one: the options as written and `files` as the spec; where the config gives a
    /// spec too (which files on the command line add to), every other test file ignored.
    pub(super) fn only(&self, files: &[String]) -> String {
        let mut c = self.words.join(" ");
        for f in files {
            c.push(' ');
            c.push_str(&quote(f));
        }
        if let Some(tests) = &self.tests {
            let chosen: BTreeSet<&String> = files.iter().collect();
            for t in tests.iter().filter(|t| !chosen.contains(t)) {
                c.push_str(" --ignore ");
                c.push_str(&quote(t));
            }
        }
        c
    }
}

fn has_magic(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '(', ')', '!', '+', '@'])
}

/// The discovery a config file sets: JSON (comments allowed), YAML of plain keys and lists, or
/// code (`.js`) that mentions none of it.
fn read_config(path: &str, text: &str) -> Result<Found, NotTaken> {
    let ext = path.rsplit('.').next().unwrap_or_default();
    match ext {
        "json" | "jsonc" => {
            let v: serde_json::Value = serde_json::from_str(&strip_comments(text))
                .map_err(|_| refused(format!("{path} is not JSON read here")))?;
            from_json(&v)
                .map_err(|k| refused(format!("{path}'s `{k}` is not a plain value read here")))
        }
        "yaml" | "yml" => from_yaml(text).map_err(|k| {
            refused(format!(
                "{path}'s `{k}` is not a plain YAML value read here"
            ))
        }),
        _ => {
            const SETS: [&str; 10] = [
                "spec",
                "extension",
                "recursive",
                "ignore",
                "exclude",
                "...",
                "Object.assign",
                "require(",
                "import",
                "process.",
            ];
            match SETS.iter().find(|w| text.contains(**w)) {
                Some(w) => Err(refused(format!(
                    "{path} is code that may set mocha's spec (it mentions `{w}`): which files it runs is not read here"
                ))),
                None => Ok(Found::default()),
            }
        }
    }
}

/// `Err(key)`: a key of the discovery whose value is not a string, a list of them or a bool.
fn from_json(v: &serde_json::Value) -> Result<Found, String> {
    let mut f = Found::default();
    let Some(o) = v.as_object() else {
        return Ok(f);
    };
    let strings = |k: &str, v: &serde_json::Value| -> Result<Vec<String>, String> {
        match v {
            serde_json::Value::String(s) => Ok(vec![s.clone()]),
            serde_json::Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string).ok_or_else(|| k.to_string()))
                .collect(),
            _ => Err(k.to_string()),
        }
    };
    for (k, v) in o {
        match k.as_str() {
            "spec" | "_" => f.spec.extend(strings(k, v)?),
            "extension" => {
                for e in strings(k, v)? {
                    f.extensions.extend(list(&e));
                }
            }
            "ignore" | "exclude" => f.ignore.extend(strings(k, v)?),
            "recursive" => f.recursive = Some(v.as_bool().ok_or_else(|| k.clone())?),
            "watch" | "config" | "package"
                if !v.is_null() && v != &serde_json::Value::Bool(false) =>
            {
                return Err(k.clone())
            }
            _ => {}
        }
    }
    Ok(f)
}

/// A YAML mapping's discovery keys, each a scalar, a `[a, b]` list or `- item` lines. Other
/// keys are skipped with whatever is nested under them.
fn from_yaml(text: &str) -> Result<Found, String> {
    let mut map = serde_json::Map::new();
    let mut current: Option<(String, Vec<serde_json::Value>)> = None;
    let keys = [
        "spec",
        "_",
        "extension",
        "ignore",
        "exclude",
        "recursive",
        "watch",
        "config",
        "package",
    ];
    let finish = |cur: &mut Option<(String, Vec<serde_json::Value>)>,
                  map: &mut serde_json::Map<String, serde_json::Value>| {
        if let Some((k, items)) = cur.take() {
            map.insert(k, serde_json::Value::Array(items));
        }
    };
    for line in text.lines() {
        let content = strip_yaml_comment(line);
        if content.trim().is_empty() || content.trim() == "---" {
            continue;
        }
        if content.starts_with([' ', '\t', '-']) {
            if let Some((k, items)) = current.as_mut() {
                let item = content.trim_start();
                let item = item.strip_prefix('-').ok_or_else(|| k.clone())?;
                items.push(serde_json::Value::String(
                    yaml_scalar(item).ok_or_else(|| k.clone())?,
                ));
            }
            continue;
        }
        finish(&mut current, &mut map);
        let (k, v) = content.split_once(':').ok_or_else(|| content.to_string())?;
        let k = yaml_scalar(k).unwrap_or_default();
        if !keys.contains(&k.as_str()) {
            continue;
        }
        let v = v.trim();
        if v.is_empty() {
            current = Some((k, Vec::new()));
        } else if let Some(body) = v.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
            let items: Option<Vec<serde_json::Value>> = body
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| yaml_scalar(s).map(serde_json::Value::String))
                .collect();
            map.insert(k.clone(), serde_json::Value::Array(items.ok_or(k)?));
        } else if matches!(v, "true" | "false") {
            map.insert(k, serde_json::Value::Bool(v == "true"));
        } else {
            let s = yaml_scalar(v).ok_or_else(|| k.clone())?;
            map.insert(k, serde_json::Value::String(s));
        }
    }
    finish(&mut current, &mut map);
    from_json(&serde_json::Value::Object(map))
}

/// A plain or quoted YAML scalar; `None` for anchors, aliases, tags and block scalars.
fn yaml_scalar(s: &str) -> Option<String> {
    let s = s.trim();
    if let Some(q) = s.strip_prefix('\'').and_then(|q| q.strip_suffix('\'')) {
        return Some(q.replace("''", "'"));
    }
    if let Some(q) = s.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        return (!q.contains('\\')).then(|| q.to_string());
    }
    if s.is_empty() || s.starts_with(['&', '*', '!', '|', '>', '{', '[', '"', '\'', '%', '@', '`'])
    {
        return None;
    }
    Some(s.to_string())
}

/// A YAML line without its comment (` #` outside quotes).
fn strip_yaml_comment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// JSON with its `//` and `/* */` comments removed (as mocha reads its JSON configs).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mocha(args: &str) -> Result<Mocha, NotTaken> {
        let words: Vec<&str> = args.split_whitespace().collect();
        recognise(vec!["mocha".into()], &words)
    }

    fn files(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_options_stay_and_the_spec_is_the_selection() {
        let m = mocha("--require test/support/env --reporter spec --bail --check-leaks test/ test/acceptance/")
            .unwrap();
        assert_eq!(m.spec.spec, ["test/", "test/acceptance/"]);
        assert_eq!(
            m.only(&files(&["test/app.js", "test/acceptance/a b.js"])),
            "mocha --require test/support/env --reporter spec --bail --check-leaks test/app.js 'test/acceptance/a b.js'"
        );
        let m = mocha("-r ts-node/register --extension ts,tsx -t5000 -bc --spec=src --recursive --grep slow --ignore src/x.ts").unwrap();
        assert_eq!(m.spec.spec, ["src"]);
        assert_eq!(m.spec.extensions, ["ts", "tsx"]);
        assert!(m.spec.recursive);
        assert_eq!(m.spec.ignore, ["src/x.ts"]);
        assert_eq!(
            m.only(&files(&["src/a.ts"])),
            "mocha -r ts-node/register --extension ts,tsx -t5000 -bc --recursive --grep slow --ignore src/x.ts src/a.ts"
        );
        for (args, why) in [
            ("--watch", "watches"),
            ("-bw", "watches"),
            ("--config other.json", "config of its own"),
            ("--package=sub/package.json", "config of its own"),
            ("init dir", "does not run"),
            ("-- test/", "ends mocha's options"),
            ("--require", "missing its value"),
            ("-xyz", "not an option"),
        ] {
            match mocha(args) {
                Err(NotTaken::Refused(w)) => assert!(w.contains(why), "{args}: {w}"),
                other => panic!("{args}: {other:?}"),
            }
        }
    }

    fn in_tree(m: Mocha, tree: &[(&str, &str)]) -> Result<Mocha, NotTaken> {
        let text = |p: &str| {
            tree.iter()
                .find(|(q, _)| *q == p)
                .map(|(_, t)| t.to_string())
        };
        let all = || tree.iter().map(|(p, _)| p.to_string()).collect();
        m.in_tree(&text, &all)
    }

    #[test]
    fn a_config_spec_is_read_and_phase_one_ignores_the_rest() {
        let tree = [
            (".mocharc.yml", "# mine\nrequire: ts-node/register\nspec:\n  - 'spec/**/*.spec.ts'\n  - spec/extra.js # too\nrecursive: false\n"),
            ("spec/a.spec.ts", ""),
            ("spec/sub/b.spec.ts", ""),
            ("spec/extra.js", ""),
            ("test/c.js", ""),
        ];
        let m = in_tree(mocha("--reporter dot").unwrap(), &tree).unwrap();
        assert_eq!(m.spec.spec, ["spec/**/*.spec.ts", "spec/extra.js"]);
        assert_eq!(
            m.only(&files(&["spec/a.spec.ts"])),
            "mocha --reporter dot spec/a.spec.ts --ignore spec/extra.js --ignore spec/sub/b.spec.ts"
        );
        // No config spec: files on the command line are the whole spec.
        let json = [
            (
                ".mocharc.jsonc",
                "{ // c\n \"timeout\": 5000, /* x */ \"recursive\": true }",
            ),
            ("test/a.js", ""),
        ];
        let m = in_tree(mocha("").unwrap(), &json).unwrap();
        assert!(m.spec.recursive && m.tests.is_none());
        let pkg = [
            (
                "package.json",
                r#"{"mocha":{"spec":"t","extension":["ts"]}}"#,
            ),
            ("t/a.ts", ""),
        ];
        let m = in_tree(mocha("").unwrap(), &pkg).unwrap();
        assert_eq!(m.tests, Some(["t/a.ts".to_string()].into()));
        assert!(in_tree(mocha("--no-package").unwrap(), &pkg)
            .unwrap()
            .tests
            .is_none());
        for (tree, why) in [
            (
                [(".mocharc.js", "module.exports = { spec: glob() }")],
                "is code",
            ),
            ([(".mocharc.yml", "spec: *anchor\n")], "plain YAML"),
            ([(".mocharc.json", "{\"spec\": {\"a\": 1}}")], "plain value"),
            (
                [(".mocharc.json", "{\"spec\": \"t/[ab].js\"}")],
                "not read here",
            ),
            (
                [("package.json", "{\"mocha\": {\"watch\": true}}")],
                "plain value",
            ),
        ] {
            match in_tree(mocha("").unwrap(), &tree) {
                Err(NotTaken::Refused(w)) => assert!(w.contains(why), "{tree:?}: {w}"),
                other => panic!("{tree:?}: {other:?}"),
            }
        }
        // Code that does not touch the discovery is fine.
        let js = [(
            ".mocharc.cjs",
            "module.exports = { timeout: 5000, reporter: 'dot' };",
        )];
        assert!(in_tree(mocha("").unwrap(), &js).is_ok());
    }
}
