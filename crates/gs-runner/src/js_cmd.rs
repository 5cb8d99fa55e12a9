//! Whether a test command is a plain jest or vitest invocation (directly, through `npx`, or as
//! the `test` script `npm test` runs) that a file list can be given to, and the two commands of
//! a two-phase run: the selected test files first, then exactly the rest.

use gs_analysis::jsgraph::Runner;

/// A recognised jest or vitest command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsCmd {
    pub runner: Runner,
    /// The command as configured, and what goes before the runner's own arguments when more
    /// are added (`npm test --` passes them on to the script).
    full: String,
    more: String,
    /// vitest's `test.dir`: where its `--exclude` globs are rooted.
    dir: Option<String>,
}

/// Options whose value is the next word (the rest take none, or `--opt=value`).
const TAKES_VALUE: &[&str] = &[
    "-c",
    "--config",
    "-t",
    "--testNamePattern",
    "-w",
    "--maxWorkers",
    "--reporters",
    "--reporter",
    "--testTimeout",
    "--outputFile",
    "--env",
    "--environment",
    "--testEnvironment",
    "--selectProjects",
    "--project",
    "--pool",
    "--seed",
    "--maxConcurrency",
    "--retry",
];

/// Options that pick the test files themselves or make one phase's result not a share of the
/// suite's (a coverage threshold over half the suite).
const REFUSED: &[&str] = &[
    "-o",
    "-f",
    "-r",
    "--onlyChanged",
    "--onlyFailures",
    "--changedSince",
    "--lastCommit",
    "--findRelatedTests",
    "--listTests",
    "--watch",
    "--watchAll",
    "--shard",
    "--testPathPattern",
    "--testPathPatterns",
    "--testPathIgnorePatterns",
    "--testMatch",
    "--testRegex",
    "--runTestsByPath",
    "--rootDir",
    "--roots",
    "--root",
    "--dir",
    "--changed",
    "--related",
    "--coverage",
    "--collectCoverage",
    "--exclude",
    "--dom",
];

/// `command` as jest or vitest, or `None` when it is anything else (a shell line, another
/// runner, file patterns of its own, options that choose the files). `script`: the tree's
/// `package.json` `test` script, which `npm test` runs.
pub fn recognise(command: &str, script: Option<&str>) -> Option<JsCmd> {
    let parsed = super::command_words(command)?;
    let program = super::program_name;
    let rest = parsed.rest();
    let npm_test = match rest {
        [npm, t] if program(npm) == "npm" && matches!(*t, "test" | "t" | "tst") => true,
        [npm, run, "test"] if program(npm) == "npm" && matches!(*run, "run" | "run-script") => true,
        _ => false,
    };
    if npm_test {
        // The script runs in sh with node_modules/.bin on PATH; arguments after `--` are
        // appended to it, quoted.
        let inner = recognise(script?, None)?;
        return Some(JsCmd {
            runner: inner.runner,
            full: command.trim().to_string(),
            more: format!("{} --", command.trim()),
            dir: None,
        });
    }
    let mut j = 0;
    if rest.first().is_some_and(|w| program(w) == "npx") {
        j = 1;
    }
    let runner = match rest.get(j).map(|w| program(w)) {
        Some("jest") => Runner::Jest,
        Some("vitest") => Runner::Vitest,
        _ => return None,
    };
    j += 1;
    if runner == Runner::Vitest && rest.get(j) == Some(&"run") {
        j += 1;
    }
    let mut args = rest[j..].iter();
    while let Some(&w) = args.next() {
        let name = w.split('=').next().unwrap_or(w);
        // vitest's own config is read for its `dir`: not one named elsewhere.
        let elsewhere = runner == Runner::Vitest && matches!(name, "-c" | "--config");
        if elsewhere || REFUSED.contains(&name) || name.starts_with("--coverage") {
            return None;
        }
        if !w.starts_with('-') {
            // A file pattern of its own, or a vitest subcommand other than `run`.
            return None;
        }
        if TAKES_VALUE.contains(&w) {
            args.next()?;
        }
    }
    Some(JsCmd {
        runner,
        full: command.trim().to_string(),
        more: command.trim().to_string(),
        dir: None,
    })
}

/// The config files vitest looks for at the root, in its order (vite's last).
const VITEST_CONFIGS: [&str; 12] = [
    "vitest.config.ts",
    "vitest.config.mts",
    "vitest.config.cts",
    "vitest.config.js",
    "vitest.config.mjs",
    "vitest.config.cjs",
    "vite.config.ts",
    "vite.config.mts",
    "vite.config.cts",
    "vite.config.js",
    "vite.config.mjs",
    "vite.config.cjs",
];

/// vitest's config, as found at the root by `text_of` (a path's text): its path and text.
pub fn vitest_config(text_of: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
    VITEST_CONFIGS.iter().find_map(|p| Some((*p, text_of(p)?)))
}

/// The `dir` a vitest config sets (`dir: 'test'`): `Some(None)` when it sets none, `None` when
/// it sets one that is not a plain literal path.
pub fn vitest_dir(config: &str) -> Option<Option<String>> {
    let squeezed: String = config.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = None;
    for (i, _) in squeezed.match_indices("dir:") {
        let before = squeezed[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &squeezed[i + 4..];
        let quote = rest.chars().next().filter(|c| matches!(c, '\'' | '"'))?;
        let value = rest[1..].split(quote).next()?;
        let value = value.trim_start_matches("./").trim_end_matches('/');
        if found.is_some()
            || value.is_empty()
            || value.starts_with('/')
            || value.split('/').any(|c| c == ".." || c.contains('$'))
        {
            return None;
        }
        found = Some(value.to_string());
    }
    Some(found.filter(|d| d != "."))
}

/// A word for `sh -c`, quoted when it holds anything but plain path characters.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:+@%=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `path` as a regular expression that matches an absolute path ending in `/path` (jest tests
/// its patterns against each test file's absolute path).
fn path_pattern(path: &str) -> String {
    let mut out = String::from("/");
    for c in path.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl JsCmd {
    /// The command as it runs in a tree whose files `text_of` reads: vitest's `--exclude`
    /// globs rooted at the config's `dir`. `None`: the config sets one that is not read here.
    pub fn in_tree(mut self, text_of: &dyn Fn(&str) -> Option<String>) -> Option<JsCmd> {
        if self.runner == Runner::Vitest {
            if let Some((_, text)) = vitest_config(text_of) {
                self.dir = vitest_dir(&text)?;
            }
        }
        Some(self)
    }

    /// Phase one: the command with `files` as its file filters. jest takes each as a pattern
    /// (`/a\.test\.js$`), vitest as a path fragment; a phase that finds none of them is no
    /// failure.
    pub fn only(&self, files: &[String]) -> String {
        let mut c = format!("{} --passWithNoTests", self.more);
        for f in files {
            c.push(' ');
            c.push_str(&quote(&match self.runner {
                Runner::Jest => format!("{}$", path_pattern(f)),
                Runner::Vitest => f.clone(),
            }));
        }
        c
    }

    /// Phase two: the whole command, `files` left out. jest: one pattern that matches every
    /// path but those (the config's own ignore patterns stay in force); vitest: `--exclude`,
    /// which adds to the config's.
    pub fn without(&self, files: &[String]) -> String {
        let mut c = format!("{} --passWithNoTests", self.more);
        match self.runner {
            Runner::Jest => {
                let alts: Vec<String> = files.iter().map(|f| path_pattern(f)).collect();
                c.push(' ');
                c.push_str(&quote(&format!("^(?!.*(?:{})$)", alts.join("|"))));
            }
            Runner::Vitest => {
                for f in files {
                    let rooted = self
                        .dir
                        .as_ref()
                        .and_then(|d| f.strip_prefix(&format!("{d}/")))
                        .unwrap_or(f);
                    c.push_str(" --exclude ");
                    c.push_str(&quote(rooted));
                }
            }
        }
        c
    }

    /// The command as configured.
    pub fn command(&self) -> &str {
        &self.full
    }
}

/// Whether a filter phase one passes for `selected` would pick `other` too (jest: a path that
/// ends in `/selected`; vitest: a path that holds it; both ignore case).
pub fn also_matches(runner: Runner, selected: &str, other: &str) -> bool {
    let (s, o) = (selected.to_lowercase(), other.to_lowercase());
    s != o
        && match runner {
            Runner::Jest => o.ends_with(&format!("/{s}")),
            Runner::Vitest => o.contains(&s),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_jest_and_vitest_invocations_are_recognised() {
        let j = recognise("npx jest --ci -w 2", None).unwrap();
        assert_eq!(j.runner, Runner::Jest);
        assert_eq!(
            j.only(&["src/a.test.js".into(), "b (1).test.ts".into()]),
            r"npx jest --ci -w 2 --passWithNoTests '/src/a\.test\.js$' '/b \(1\)\.test\.ts$'"
        );
        assert_eq!(
            j.without(&["src/a.test.js".into(), "b.test.ts".into()]),
            r"npx jest --ci -w 2 --passWithNoTests '^(?!.*(?:/src/a\.test\.js|/b\.test\.ts)$)'"
        );
        let v = recognise("CI=1 vitest run --reporter dot", None).unwrap();
        assert_eq!(v.runner, Runner::Vitest);
        assert_eq!(
            v.without(&["src/a.test.ts".into()]),
            "CI=1 vitest run --reporter dot --passWithNoTests --exclude src/a.test.ts"
        );
        let n = recognise("npm test", Some("vitest run")).unwrap();
        assert_eq!(n.runner, Runner::Vitest);
        assert_eq!(
            n.only(&["a.test.ts".into()]),
            "npm test -- --passWithNoTests a.test.ts"
        );
        assert!(recognise("npm run test", Some("jest")).is_some());
        assert!(recognise("node_modules/.bin/jest", None).is_some());
        for (other, script) in [
            ("npm test", Some("jest && eslint .")),
            ("npm test", Some("mocha")),
            ("npm test", None),
            ("npm test -- --ci", Some("jest")),
            ("jest src/", None),
            ("jest --coverage", None),
            ("jest -o", None),
            ("vitest watch", None),
            ("vitest --changed HEAD", None),
            ("pytest", None),
            ("jest $ARGS", None),
        ] {
            assert_eq!(recognise(other, script), None, "{other} / {script:?}");
        }
    }

    #[test]
    fn vitest_excludes_are_rooted_at_its_dir() {
        assert_eq!(vitest_dir("export default { test: {} }"), Some(None));
        assert_eq!(
            vitest_dir("test: {\n  dir: 'test',\n  coverage: { reportsDirectory: './c/' } }"),
            Some(Some("test".into()))
        );
        assert_eq!(vitest_dir("test: { dir: process.env.D }"), None);
        assert_eq!(vitest_dir("test: { dir: '../up' }"), None);
        let v = recognise("vitest run", None)
            .unwrap()
            .in_tree(&|p| (p == "vite.config.ts").then(|| "{test:{dir:\"test\"}}".into()))
            .unwrap();
        assert_eq!(
            v.without(&["test/a.test.ts".into()]),
            "vitest run --passWithNoTests --exclude a.test.ts"
        );
        assert!(recognise("vitest run -c other.config.ts", None).is_none());
    }

    #[test]
    fn a_filter_that_would_pick_another_file_is_known() {
        assert!(also_matches(
            Runner::Jest,
            "src/a.test.js",
            "pkg/src/a.test.js"
        ));
        assert!(!also_matches(
            Runner::Jest,
            "src/a.test.js",
            "src/ba.test.js"
        ));
        assert!(also_matches(Runner::Vitest, "a.test.ts", "src/ba.test.ts"));
        assert!(!also_matches(
            Runner::Vitest,
            "src/a.test.ts",
            "src/a.test.ts"
        ));
    }
}
