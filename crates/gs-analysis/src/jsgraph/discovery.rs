//! Which files a JavaScript runner collects as its test files: jest's and vitest's default
//! patterns, and mocha's spec (the files, directories and globs it is given, or `./test`).

use super::SOURCE_EXTS;
use std::collections::BTreeSet;

/// Which runner's discovery names test files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    Jest,
    Vitest,
    Mocha,
}

impl Runner {
    /// The runner's name, as its users write it.
    pub fn name(self) -> &'static str {
        match self {
            Runner::Jest => "jest",
            Runner::Vitest => "vitest",
            Runner::Mocha => "mocha",
        }
    }
}

/// Whether the runner's default discovery collects `path`. jest: `*.test.*`/`*.spec.*` or
/// anything under `__tests__/`, as `.js`/`.jsx`/`.ts`/`.tsx`; vitest: `*.test.*`/`*.spec.*`
/// with the `.mjs`/`.cjs`/`.mts`/`.cts` forms too. Neither looks in `node_modules`; vitest
/// skips `dist` as well. mocha: the `.js`/`.cjs`/`.mjs` files directly in `test/` (see
/// [`MochaSpec`] for the discovery a command or config gives it).
pub fn is_test_file(path: &str, runner: Runner) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    let dirs: Vec<&str> = path.split('/').rev().skip(1).collect();
    if dirs.iter().any(|d| *d == "node_modules" || *d == ".git") {
        return false;
    }
    let named = stem.ends_with(".test") || stem.ends_with(".spec");
    match runner {
        Runner::Jest => {
            matches!(ext, "js" | "jsx" | "ts" | "tsx") && (named || dirs.contains(&"__tests__"))
        }
        Runner::Vitest => {
            SOURCE_EXTS.contains(&ext) && named && !dirs.contains(&"dist") && !stem.ends_with(".d")
        }
        Runner::Mocha => MochaSpec::default().collects(path, &|_| false, &|d| d == "test"),
    }
}

/// mocha's discovery: each spec a file, a directory (its files with one of the extensions,
/// and with `recursive` its subdirectories' too) or a glob (every file it matches), less the
/// files an `ignore` glob matches. With no spec, `./test`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MochaSpec {
    pub spec: Vec<String>,
    /// Empty: mocha's own, `js`, `cjs` and `mjs`.
    pub extensions: Vec<String>,
    pub recursive: bool,
    pub ignore: Vec<String>,
}

/// A spec or ignore glob written in a syntax not read here (`[…]`, `+(…)`, `!(…)`, nested
/// braces), or one that does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadGlob(pub String);

impl MochaSpec {
    /// The files of `files` (every path of the tree) that mocha collects.
    pub fn test_files<'a>(
        &self,
        files: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeSet<String>, UnreadGlob> {
        let files: Vec<&str> = files.into_iter().collect();
        let mut dirs: BTreeSet<&str> = BTreeSet::new();
        for f in &files {
            let mut d = *f;
            while let Some((up, _)) = d.rsplit_once('/') {
                if !dirs.insert(up) {
                    break;
                }
                d = up;
            }
        }
        let set: BTreeSet<&str> = files.iter().copied().collect();
        let globs = self.globs()?;
        let ignore = compile(&self.ignore)?;
        Ok(files
            .iter()
            .filter(|f| {
                self.collects_with(f, &|p| set.contains(p), &|d| dirs.contains(d), &globs)
                    && !ignore.as_ref().is_some_and(|g| g.is_match(f))
            })
            .map(|f| f.to_string())
            .collect())
    }

    /// Whether mocha collects `path`, given which paths are files and which directories.
    fn collects(
        &self,
        path: &str,
        is_file: &dyn Fn(&str) -> bool,
        is_dir: &dyn Fn(&str) -> bool,
    ) -> bool {
        self.globs()
            .is_ok_and(|g| self.collects_with(path, is_file, is_dir, &g))
    }

    fn globs(&self) -> Result<Vec<Option<gs_util::glob::Globs>>, UnreadGlob> {
        self.specs()
            .iter()
            .map(|s| {
                if has_magic(s) {
                    compile(&[s.to_string()])
                } else {
                    Ok(None)
                }
            })
            .collect()
    }

    fn specs(&self) -> Vec<String> {
        let specs: Vec<String> = if self.spec.is_empty() {
            vec!["test".into()]
        } else {
            self.spec.iter().map(|s| normal(s)).collect()
        };
        specs
    }

    fn collects_with(
        &self,
        path: &str,
        is_file: &dyn Fn(&str) -> bool,
        is_dir: &dyn Fn(&str) -> bool,
        globs: &[Option<gs_util::glob::Globs>],
    ) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let exts: Vec<String> = if self.extensions.is_empty() {
            vec!["js".into(), "cjs".into(), "mjs".into()]
        } else {
            self.extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_string())
                .collect()
        };
        let has_ext = exts.iter().any(|e| name.ends_with(&format!(".{e}")));
        self.specs().iter().zip(globs).any(|(s, glob)| {
            if s.is_empty() || s == "." {
                // The root itself as a directory.
                return has_ext
                    && !name.starts_with('.')
                    && (self.recursive || !path.contains('/'));
            }
            if is_file(s) {
                return path == s;
            }
            if is_dir(s) {
                let Some(rest) = path.strip_prefix(&format!("{s}/")) else {
                    return false;
                };
                return has_ext
                    && !name.starts_with('.')
                    && (self.recursive || !rest.contains('/'));
            }
            match glob {
                // node's glob leaves dot-files out.
                Some(g) => !name.starts_with('.') && g.is_match(path),
                // `test/a` is `test/a.js`: the spec with one of the extensions.
                None => exts.iter().any(|e| path == format!("{s}.{e}")),
            }
        })
    }
}

/// A path as mocha's lookups give it: without `./` and a trailing `/`.
fn normal(s: &str) -> String {
    let mut s = s.trim();
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    s.trim_end_matches('/').to_string()
}

fn has_magic(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '(', ')', '!', '+', '@'])
}

/// Globs, one `{a,b}` group each expanded into its alternatives (what gs-util's globs do not
/// read); `None` when there are none.
fn compile(patterns: &[String]) -> Result<Option<gs_util::glob::Globs>, UnreadGlob> {
    let mut all = Vec::new();
    for p in patterns {
        let p = normal(p);
        all.extend(expand(&p).ok_or_else(|| UnreadGlob(p.clone()))?);
    }
    if all.is_empty() {
        return Ok(None);
    }
    gs_util::glob::Globs::new(&all)
        .map(Some)
        .map_err(|_| UnreadGlob(patterns.join(", ")))
}

/// `a/*.{js,ts}` as `a/*.js` and `a/*.ts`; `None` for a syntax not read here.
fn expand(p: &str) -> Option<Vec<String>> {
    if p.contains(['[', ']', '(', ')', '!', '+', '@']) {
        return None;
    }
    let Some(open) = p.find('{') else {
        return (!p.contains('}')).then(|| vec![p.to_string()]);
    };
    let close = open + p[open..].find('}')?;
    let (head, body, tail) = (&p[..open], &p[open + 1..close], &p[close + 1..]);
    if body.contains('{') {
        return None;
    }
    let mut out = Vec::new();
    for alt in body.split(',') {
        out.extend(expand(&format!("{head}{alt}{tail}"))?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_discovery_names_test_files() {
        use Runner::*;
        assert!(is_test_file("src/a.test.ts", Jest));
        assert!(is_test_file("src/__tests__/a.js", Jest));
        assert!(!is_test_file("src/__tests__/a.mjs", Jest));
        assert!(is_test_file("src/a.spec.mjs", Vitest));
        assert!(!is_test_file("src/__tests__/a.js", Vitest));
        assert!(!is_test_file("node_modules/x/a.test.js", Jest));
        assert!(!is_test_file("dist/a.test.js", Vitest));
        assert!(!is_test_file("src/a.ts", Vitest));
        // mocha: `./test`, not recursive.
        assert!(is_test_file("test/app.js", Mocha));
        assert!(is_test_file("test/app.mjs", Mocha));
        assert!(!is_test_file("test/support/env.js", Mocha));
        assert!(!is_test_file("test/a.ts", Mocha));
        assert!(!is_test_file("src/a.test.js", Mocha));
        assert!(!is_test_file("test/.eslintrc.js", Mocha));
    }

    fn collected(spec: &MochaSpec, files: &[&str]) -> Vec<String> {
        spec.test_files(files.iter().copied())
            .unwrap()
            .into_iter()
            .collect()
    }

    #[test]
    fn mochas_spec_is_files_directories_and_globs() {
        let files = [
            "test/app.js",
            "test/res.send.js",
            "test/support/env.js",
            "test/support/utils.js",
            "test/acceptance/auth.js",
            "test/acceptance/deep/x.js",
            "test/fixtures/name.txt",
            "spec/a.spec.ts",
            "spec/b.spec.js",
            "spec/sub/c.spec.ts",
            "spec/helper.ts",
            "lib/x.js",
        ];
        // express's: `test/ test/acceptance/`.
        let express = MochaSpec {
            spec: vec!["test/".into(), "test/acceptance/".into()],
            ..MochaSpec::default()
        };
        assert_eq!(
            collected(&express, &files),
            ["test/acceptance/auth.js", "test/app.js", "test/res.send.js"]
        );
        let recursive = MochaSpec {
            spec: vec!["./test".into()],
            recursive: true,
            ignore: vec!["test/support/**".into()],
            ..MochaSpec::default()
        };
        assert_eq!(
            collected(&recursive, &files),
            [
                "test/acceptance/auth.js",
                "test/acceptance/deep/x.js",
                "test/app.js",
                "test/res.send.js"
            ]
        );
        let globbed = MochaSpec {
            spec: vec!["spec/**/*.spec.{ts,js}".into(), "lib/x".into()],
            ..MochaSpec::default()
        };
        assert_eq!(
            collected(&globbed, &files),
            [
                "lib/x.js",
                "spec/a.spec.ts",
                "spec/b.spec.js",
                "spec/sub/c.spec.ts"
            ]
        );
        // A directory with the extensions given.
        let ts = MochaSpec {
            spec: vec!["spec".into()],
            extensions: vec!["ts".into()],
            ..MochaSpec::default()
        };
        assert_eq!(collected(&ts, &files), ["spec/a.spec.ts", "spec/helper.ts"]);
        for unread in ["test/[ab].js", "test/+(a|b).js", "test/{a,{b,c}}.js"] {
            let s = MochaSpec {
                spec: vec![unread.into()],
                ..MochaSpec::default()
            };
            assert_eq!(
                s.test_files(files.iter().copied()),
                Err(UnreadGlob(unread.into()))
            );
        }
    }
}
