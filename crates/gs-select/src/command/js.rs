//! Whether a test command is a plain jest, vitest or mocha invocation (directly, through `npx`,
//! or as the `test` script `npm test`, `pnpm test` or `yarn test` runs) that a file list can be
//! given to, and phase one's command: the selected test files only. When it is one of them that
//! takes no file list, why ([`NotTaken::Refused`]).

mod mocha;

pub use mocha::CONFIG_FILES as MOCHA_CONFIGS;

use super::{program_name, quote, split_words};
use gs_analysis::jsgraph::{MochaSpec, Runner};

/// A recognised jest, vitest or mocha command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsCmd {
    pub runner: Runner,
    /// The command as configured, and what goes before the runner's own arguments when more
    /// are added (`npm test --` passes them on to the script).
    full: String,
    more: String,
    /// mocha's options and spec.
    mocha: Option<mocha::Mocha>,
    /// The package manager whose `test` script it is.
    manager: Option<&'static str>,
}

/// Why a command is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTaken {
    /// Not jest, vitest or mocha, nor a package manager's `test`: another runner's to say.
    Other,
    /// jest, vitest or mocha (or a package manager's `test`) that takes no selection, and why.
    Refused(String),
}

fn refused(why: impl Into<String>) -> NotTaken {
    NotTaken::Refused(why.into())
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

/// A package manager running the `test` script (`npm test`, `npm run test`, `pnpm test`,
/// `pnpm run test`, `yarn test`, `yarn run test`): its name, whether more arguments for the
/// script go after a `--` (npm's, and `pnpm test`'s, which drops it; `pnpm run test` and yarn
/// pass every word on as it is), and the words after the script's name.
fn manager_test<'a, 'b>(rest: &'b [&'a str]) -> Option<(&'static str, bool, &'b [&'a str])> {
    let first = program_name(rest.first()?);
    let (second, third) = (rest.get(1).copied(), rest.get(2).copied());
    let test = |w: Option<&str>| matches!(w, Some("test" | "t" | "tst"));
    let run = |w: Option<&str>| matches!(w, Some("run" | "run-script"));
    let (name, words, dashes) = match first {
        "npm" if test(second) => ("npm", 2, true),
        "npm" if run(second) && third == Some("test") => ("npm", 3, true),
        "pnpm" if test(second) => ("pnpm", 2, true),
        "pnpm" if run(second) && third == Some("test") => ("pnpm", 3, false),
        "yarn" if second == Some("test") => ("yarn", 2, false),
        "yarn" if second == Some("run") && third == Some("test") => ("yarn", 3, false),
        _ => return None,
    };
    Some((name, dashes, &rest[words..]))
}

/// Whether `command` runs package.json's `test` script through npm, pnpm or yarn (so that
/// [`recognise`] needs the script).
pub fn runs_script(command: &str) -> bool {
    split_words(command).is_ok_and(|w| manager_test(w.rest()).is_some())
}

/// `command` as jest, vitest or mocha; [`NotTaken::Other`] when it is anything else (a shell
/// line, another runner), [`NotTaken::Refused`] when it is one of them whose options choose the
/// files or that names file patterns of its own. `script`: the tree's `package.json` `test`
/// script, which a package manager's `test` runs.
pub fn recognise(command: &str, script: Option<&str>) -> Result<JsCmd, NotTaken> {
    let parsed = split_words(command).map_err(|_| NotTaken::Other)?;
    let prefix: Vec<String> = parsed.all[..parsed.at]
        .iter()
        .map(|w| w.to_string())
        .collect();
    let Some((manager, dashes, extra)) = manager_test(parsed.rest()) else {
        return runner(command.trim(), prefix, parsed.rest());
    };
    let command = command.trim();
    if !extra.is_empty() {
        return Err(refused(format!(
            "`{command}` passes arguments of its own to the test script, which phase one's file list is not added to"
        )));
    }
    let script = script
        .ok_or_else(|| refused(format!("package.json has no test script for `{command}`")))?;
    let inner = split_words(script).map_err(|_| {
        refused(format!(
            "the test script `{script}` is a shell line (&&, pipes, quotes, variables or globs): a file list added to it would not reach the runner as written"
        ))
    })?;
    // mocha's spec is replaced, not added to: phase one runs the script's command itself, with
    // the project's bins first on PATH as the package manager puts them.
    let mut before = prefix;
    before.push("PATH=\"$PWD/node_modules/.bin:$PATH\"".into());
    before.extend(inner.all[..inner.at].iter().map(|w| w.to_string()));
    let cmd = runner(script.trim(), before, inner.rest()).map_err(|e| match e {
        NotTaken::Other => refused(format!(
            "the test script `{script}` is not a plain jest, vitest or mocha command"
        )),
        e => e,
    })?;
    Ok(JsCmd {
        full: command.to_string(),
        more: if dashes {
            format!("{command} --")
        } else {
            command.to_string()
        },
        manager: Some(manager),
        ..cmd
    })
}

/// `rest` (the program and its arguments, after `before`) as jest, vitest or mocha.
fn runner(command: &str, before: Vec<String>, rest: &[&str]) -> Result<JsCmd, NotTaken> {
    let mut j = 0;
    if rest.first().is_some_and(|w| program_name(w) == "npx") {
        j = 1;
    }
    let runner = match rest.get(j).map(|w| program_name(w)) {
        Some("jest") => Runner::Jest,
        Some("vitest") => Runner::Vitest,
        Some("mocha" | "_mocha") => Runner::Mocha,
        _ => return Err(NotTaken::Other),
    };
    let cmd = JsCmd {
        runner,
        full: command.to_string(),
        more: command.to_string(),
        mocha: None,
        manager: None,
    };
    if runner == Runner::Mocha {
        let mut words = before;
        words.extend(rest[..=j].iter().map(|w| w.to_string()));
        let m = mocha::recognise(words, &rest[j + 1..])?;
        return Ok(JsCmd {
            mocha: Some(m),
            ..cmd
        });
    }
    j += 1;
    if runner == Runner::Vitest && rest.get(j) == Some(&"run") {
        j += 1;
    }
    let name_of = runner.name();
    let mut args = rest[j..].iter();
    while let Some(&w) = args.next() {
        let name = w.split('=').next().unwrap_or(w);
        // vitest's own config is read for its `dir`: not one named elsewhere.
        if runner == Runner::Vitest && matches!(name, "-c" | "--config") {
            return Err(refused(format!(
                "vitest's `{name}` names a config of its own, which is not read here"
            )));
        }
        if REFUSED.contains(&name) || name.starts_with("--coverage") {
            return Err(refused(format!(
                "{name_of}'s `{name}` chooses the test files itself, or collects coverage a part of the suite would fall short of"
            )));
        }
        if !w.starts_with('-') {
            return Err(refused(format!(
                "`{w}` is a file pattern or subcommand of {name_of}'s own, which phase one's would be added to"
            )));
        }
        if TAKES_VALUE.contains(&w) && args.next().is_none() {
            return Err(refused(format!("{name_of}'s `{w}` is missing its value")));
        }
    }
    Ok(cmd)
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
    /// The command as it runs in a tree whose files `text_of` reads (`files`: every path of
    /// the tree, asked only where mocha's config gives its spec): mocha's discovery with its
    /// config's.
    pub fn in_tree(
        mut self,
        text_of: &dyn Fn(&str) -> Option<String>,
        files: &dyn Fn() -> Vec<String>,
    ) -> Result<JsCmd, NotTaken> {
        if let Some(m) = self.mocha.take() {
            if self.manager == Some("yarn") && text_of(".pnp.cjs").is_some() {
                return Err(refused(
                    "yarn's Plug'n'Play runs the script's mocha without node_modules/.bin, where phase one's command would look for it",
                ));
            }
            self.mocha = Some(m.in_tree(text_of, files)?);
        }
        Ok(self)
    }

    /// mocha's discovery (its spec, extensions, ignores), once [`JsCmd::in_tree`] read its
    /// config; `None` for jest and vitest.
    pub fn mocha_spec(&self) -> Option<&MochaSpec> {
        self.mocha.as_ref().map(|m| &m.spec)
    }

    /// Phase one: the command with `files` as its file filters. jest takes each as a pattern
    /// (`/a\.test\.js$`), vitest as a path fragment, both told that a phase that finds none of
    /// them is no failure; mocha as its spec, in place of the one it has.
    pub fn only(&self, files: &[String]) -> String {
        if let Some(m) = &self.mocha {
            return m.only(files);
        }
        let mut c = format!("{} --passWithNoTests", self.more);
        for f in files {
            c.push(' ');
            c.push_str(&quote(&match self.runner {
                Runner::Jest => format!("{}$", path_pattern(f)),
                _ => f.clone(),
            }));
        }
        c
    }

    /// The command for jest's tests `names` (as its failures name them: `describe › test`) alone,
    /// matched whole by `-t` (each name's parts joined by spaces, as jest matches them, every
    /// character taken literally): a retry of the tests that failed. `None` for vitest and
    /// mocha, and for a name that holds a control character or none.
    pub fn alone(&self, names: &[String]) -> Option<String> {
        if self.runner != Runner::Jest || self.mocha.is_some() || names.is_empty() {
            return None;
        }
        let mut alts = Vec::new();
        for n in names {
            if n.trim().is_empty() || n.chars().any(char::is_control) {
                return None;
            }
            let whole = n.split(" › ").collect::<Vec<_>>().join(" ");
            alts.push(path_pattern(&whole)[1..].to_string());
        }
        Some(format!(
            "{} -t {}",
            self.more,
            quote(&format!("^(?:{})$", alts.join("|")))
        ))
    }

    /// The command as configured.
    pub fn command(&self) -> &str {
        &self.full
    }
}

/// Whether a filter phase one passes for `selected` would pick `other` too (jest: a path that
/// ends in `/selected`; vitest: a path that holds it; both ignore case). mocha's are paths.
pub fn also_matches(runner: Runner, selected: &str, other: &str) -> bool {
    let (s, o) = (selected.to_lowercase(), other.to_lowercase());
    s != o
        && match runner {
            Runner::Jest => o.ends_with(&format!("/{s}")),
            Runner::Vitest => o.contains(&s),
            Runner::Mocha => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn refusal(command: &str, script: Option<&str>) -> String {
        match recognise(command, script) {
            Err(NotTaken::Refused(why)) => why,
            other => panic!("{command} / {script:?}: {other:?}"),
        }
    }

    #[test]
    fn jests_failing_tests_run_alone_by_their_whole_names_taken_literally() {
        let j = recognise("npx jest --ci", None).unwrap();
        assert_eq!(
            j.alone(&files(&["parse › reads (a) number", "adds 1+1"]))
                .unwrap(),
            r"npx jest --ci -t '^(?:parse reads \(a\) number|adds 1\+1)$'"
        );
        for bad in [&[][..], &["a\nb"], &["  "]] {
            assert_eq!(j.alone(&files(bad)), None, "{bad:?}");
        }
        let v = recognise("vitest run", None).unwrap();
        assert_eq!(v.alone(&files(&["a > b"])), None);
    }

    #[test]
    fn plain_jest_and_vitest_invocations_are_recognised() {
        let j = recognise("npx jest --ci -w 2", None).unwrap();
        assert_eq!(j.runner, Runner::Jest);
        assert_eq!(
            j.only(&files(&["src/a.test.js", "b (1).test.ts"])),
            r"npx jest --ci -w 2 --passWithNoTests '/src/a\.test\.js$' '/b \(1\)\.test\.ts$'"
        );
        let v = recognise("CI=1 vitest run --reporter dot", None).unwrap();
        assert_eq!(v.runner, Runner::Vitest);
        assert_eq!(
            v.only(&files(&["src/a.test.ts"])),
            "CI=1 vitest run --reporter dot --passWithNoTests src/a.test.ts"
        );
        assert!(recognise("node_modules/.bin/jest", None).is_ok());
        for (other, script) in [("pytest", None), ("jest $ARGS", None), ("cargo test", None)] {
            assert_eq!(recognise(other, script), Err(NotTaken::Other), "{other}");
        }
        for (command, why) in [
            ("jest src/", "file pattern"),
            ("jest --coverage", "coverage"),
            ("jest -o", "chooses the test files"),
            ("vitest watch", "subcommand"),
            ("vitest --changed HEAD", "chooses the test files"),
            ("vitest run -c other.config.ts", "config of its own"),
            ("jest -t", "missing its value"),
        ] {
            assert!(refusal(command, None).contains(why), "{command}");
        }
    }

    #[test]
    fn each_package_manager_passes_phase_ones_files_to_the_script_its_own_way() {
        // As npm 11, pnpm 9.15 and yarn 1.22 pass them (each checked with the real tool):
        // `pnpm test -- x` drops the `--`, `pnpm run test -- x` passes it on.
        for (command, script, want) in [
            (
                "npm test",
                "vitest run",
                "npm test -- --passWithNoTests a.test.ts",
            ),
            (
                "npm run test",
                "vitest run",
                "npm run test -- --passWithNoTests a.test.ts",
            ),
            (
                "pnpm test",
                "vitest run",
                "pnpm test -- --passWithNoTests a.test.ts",
            ),
            (
                "pnpm t",
                "vitest run",
                "pnpm t -- --passWithNoTests a.test.ts",
            ),
            (
                "pnpm run test",
                "vitest",
                "pnpm run test --passWithNoTests a.test.ts",
            ),
            (
                "yarn test",
                "vitest run",
                "yarn test --passWithNoTests a.test.ts",
            ),
            (
                "CI=1 yarn run test",
                "jest",
                r"CI=1 yarn run test --passWithNoTests '/a\.test\.ts$'",
            ),
        ] {
            let c = recognise(command, Some(script)).unwrap();
            assert_eq!(c.only(&files(&["a.test.ts"])), want, "{command}");
            assert_eq!(c.command(), command);
            assert!(runs_script(command), "{command}");
        }
        assert!(!runs_script("npx jest") && !runs_script("yarn jest"));
        for (command, script, why) in [
            ("npm test", Some("jest && eslint ."), "is a shell line"),
            (
                "pnpm test",
                Some("node --test"),
                "not a plain jest, vitest or mocha",
            ),
            ("yarn test", None, "no test script"),
            ("npm test -- --ci", Some("jest"), "arguments of its own"),
            ("yarn test --ci", Some("jest"), "arguments of its own"),
            ("pnpm test", Some("jest --watch"), "`--watch`"),
        ] {
            assert!(
                refusal(command, script).contains(why),
                "{command} / {script:?}"
            );
        }
        assert_eq!(recognise("yarn jest", None), Err(NotTaken::Other));
    }

    #[test]
    fn mocha_runs_with_the_selected_files_as_its_spec() {
        let none = |_: &str| None;
        let no_files = Vec::new;
        let direct = recognise("./node_modules/.bin/mocha --bail test/", None)
            .unwrap()
            .in_tree(&none, &no_files)
            .unwrap();
        assert_eq!(direct.runner, Runner::Mocha);
        // mocha 11's second bin.
        let underscore = recognise("node_modules/.bin/_mocha test", None).unwrap();
        assert_eq!(underscore.runner, Runner::Mocha);
        assert_eq!(direct.mocha_spec().unwrap().spec, ["test/"]);
        assert_eq!(
            direct.only(&files(&["test/a.js"])),
            "./node_modules/.bin/mocha --bail test/a.js"
        );
        assert_eq!(
            recognise("NODE_ENV=test npx mocha", None)
                .unwrap()
                .only(&files(&["test/a.js"])),
            "NODE_ENV=test npx mocha test/a.js"
        );
        // express's script: run as the script's own command, its spec replaced, with the
        // project's bins first on PATH as npm puts them.
        let express =
            "mocha --require test/support/env --reporter spec --check-leaks test/ test/acceptance/";
        for manager in ["npm test", "pnpm run test", "CI=1 yarn test"] {
            let c = recognise(manager, Some(express)).unwrap();
            let prefix = manager.strip_suffix(" test").unwrap();
            let prefix = prefix
                .split_whitespace()
                .take_while(|w| w.contains('='))
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(
                c.only(&files(&["test/app.js", "test/acceptance/auth.js"])),
                format!(
                    "{}PATH=\"$PWD/node_modules/.bin:$PATH\" mocha --require test/support/env --reporter spec --check-leaks test/app.js test/acceptance/auth.js",
                    if prefix.is_empty() { String::new() } else { format!("{prefix} ") }
                )
            );
            assert_eq!(c.mocha_spec().unwrap().spec, ["test/", "test/acceptance/"]);
        }
        // yarn's Plug'n'Play has no node_modules/.bin.
        let pnp = |p: &str| (p == ".pnp.cjs").then(String::new);
        match recognise("yarn test", Some("mocha"))
            .unwrap()
            .in_tree(&pnp, &no_files)
        {
            Err(NotTaken::Refused(why)) => assert!(why.contains("Plug'n'Play"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(refusal("mocha --watch", None).contains("watches"));
        assert!(refusal("npm test", Some("mocha --config .mocharc.ci.yml"))
            .contains("config of its own"));
    }

    #[test]
    fn vitest_dirs_are_read_when_plain() {
        assert_eq!(vitest_dir("export default { test: {} }"), Some(None));
        assert_eq!(
            vitest_dir("test: {\n  dir: 'test',\n  coverage: { reportsDirectory: './c/' } }"),
            Some(Some("test".into()))
        );
        assert_eq!(vitest_dir("test: { dir: process.env.D }"), None);
        assert_eq!(vitest_dir("test: { dir: '../up' }"), None);
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
        assert!(!also_matches(Runner::Mocha, "a.js", "test/a.js"));
    }
}
