//! Path globs (`*`, `?`, `**`) compiled once into one linear-time matcher: patterns come from
//! committed config, so matching must not backtrack (globset runs them as one automaton).

use crate::{hint::display_hinted, hint::Hinted};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A glob that cannot be compiled, with the fix when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct GlobError {
    pub pattern: String,
    pub reason: String,
    pub fix: Option<String>,
}

impl Hinted for GlobError {
    fn problem(&self) -> String {
        format!("invalid glob {:?}: {}", self.pattern, self.reason)
    }

    fn hints(&self) -> Vec<String> {
        self.fix.iter().cloned().collect()
    }
}

display_hinted!(GlobError);

/// Compiled patterns; equal when their patterns are.
#[derive(Clone)]
pub struct Globs {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Globs {
    /// Patterns matched against the whole text: `*` within one `/`-separated segment, `?` one
    /// character of a segment, `**` as a whole segment any number of segments (`a/**`, `**/b`,
    /// `a/**/b`). Every other character is literal.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Globs, GlobError> {
        let patterns: Vec<String> = patterns.iter().map(|p| p.as_ref().to_string()).collect();
        Self::build(patterns.clone(), patterns)
    }

    /// Path excludes as `[analysis] exclude` reads them: as [`Globs::new`], and besides a
    /// pattern without `/` matches the file name at any depth, a trailing `/` means everything
    /// under that directory, a leading `/` is dropped and blank patterns match nothing.
    pub fn excludes<S: AsRef<str>>(patterns: &[S]) -> Result<Globs, GlobError> {
        let mut rewritten = Vec::new();
        for p in patterns {
            let p = p.as_ref().trim();
            let p = p.strip_prefix('/').unwrap_or(p);
            if p.is_empty() {
                continue;
            }
            let p = match p.strip_suffix('/') {
                Some(dir) => format!("{dir}/**"),
                None => p.to_string(),
            };
            rewritten.push(if p.contains('/') {
                p
            } else {
                format!("**/{p}")
            });
        }
        let originals = patterns.iter().map(|p| p.as_ref().to_string()).collect();
        Self::build(originals, rewritten)
    }

    fn build(originals: Vec<String>, patterns: Vec<String>) -> Result<Globs, GlobError> {
        let mut set = GlobSetBuilder::new();
        for p in &patterns {
            let glob = GlobBuilder::new(&translate(p)?)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| GlobError {
                    pattern: p.clone(),
                    reason: e.kind().to_string(),
                    fix: None,
                })?;
            set.add(glob);
        }
        let set = set.build().map_err(|e| GlobError {
            pattern: patterns.join(", "),
            reason: e.kind().to_string(),
            fix: None,
        })?;
        Ok(Globs {
            patterns: originals,
            set,
        })
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.set.is_match(text)
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

impl Default for Globs {
    fn default() -> Self {
        Globs {
            patterns: Vec::new(),
            set: GlobSet::empty(),
        }
    }
}

impl PartialEq for Globs {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for Globs {}

impl std::fmt::Debug for Globs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Globs").field(&self.patterns).finish()
    }
}

/// Whether `pattern` compiles (for config validation).
pub fn check(pattern: &str) -> Result<(), GlobError> {
    Globs::new(&[pattern]).map(drop)
}

/// Our syntax in globset's: `[`, `]`, `{`, `}` and `\` are literal here, so they are escaped;
/// `**` must be a whole segment, since globset would quietly read `a**` as `a*`.
fn translate(pattern: &str) -> Result<String, GlobError> {
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut i = 0;
    for (at, c) in pattern.char_indices() {
        if at < i {
            continue;
        }
        i = at + c.len_utf8();
        match c {
            '*' => {
                let run = bytes[at..].iter().take_while(|&&b| b == b'*').count();
                i = at + run;
                let whole_segment =
                    (at == 0 || bytes[at - 1] == b'/') && (i == bytes.len() || bytes[i] == b'/');
                match run {
                    1 => out.push('*'),
                    2 if whole_segment => out.push_str("**"),
                    _ => {
                        return Err(GlobError {
                            pattern: pattern.to_string(),
                            reason: "`**` must be a whole path segment, as in `a/**`, `**/b` or \
                                     `a/**/b`"
                                .into(),
                            fix: Some("use `*` within a segment".into()),
                        })
                    }
                }
            }
            '[' | ']' | '{' | '}' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Globs::new(&[p]).unwrap().is_match(s)
    }

    fn ex(p: &str, s: &str) -> bool {
        Globs::excludes(&[p]).unwrap().is_match(s)
    }

    #[test]
    fn whole_text_patterns() {
        assert!(m("experiment/*", "experiment/fast"));
        assert!(!m("experiment/*", "experiment/a/b"));
        assert!(m("vendor/**", "vendor/a/b.py"));
        assert!(!m("vendor/**", "src/vendor.go"));
        assert!(m("**/gen_*.py", "a/b/gen_x.py"));
        assert!(m("**/gen_*.py", "gen_x.py"));
        assert!(m("a/**/b.c", "a/b.c"));
        assert!(m("a/**/b.c", "a/x/y/b.c"));
        assert!(!m("a/**/b.c", "a/xb.c"));
        assert!(m("f?o.c", "foo.c"));
        assert!(!m("f?o.c", "f/o.c"));
        assert!(m("main", "main"));
        assert!(!m("main", "mainline"));
        assert!(!m("main", "x/main"));
        assert!(m("**", "a/b/c"));
    }

    #[test]
    fn brackets_braces_and_backslashes_are_literal() {
        assert!(m("a[1]", "a[1]"));
        assert!(!m("a[12]", "a1"));
        assert!(m("{a,b}", "{a,b}"));
        assert!(!m("{a,b}", "a"));
        assert!(m(r"a\b", r"a\b"));
        assert!(m("a[", "a["));
    }

    #[test]
    fn excludes_match_names_at_any_depth() {
        assert!(ex("*.min.js", "web/app.min.js"));
        assert!(ex("**/gen/**", "a/b/gen/x.rs"));
        assert!(ex("**/gen/**", "gen/x.rs"));
        assert!(ex("build/**", "build/x"));
        assert!(ex("vendor/**", "vendor/a/b.go"));
        assert!(!ex("vendor/**", "src/vendor.go"));
        assert!(ex("f?o.c", "d/foo.c"));
        assert!(ex("docs/", "docs/x/y.py"));
        assert!(ex("/top.py", "top.py"));
        assert!(ex("x.py", "a/b/x.py"));
        assert!(!ex("x.py", "y.py"));
        assert!(!ex("src/*.py", "src/a/b.py"));
        assert!(!ex("", "a"));
        assert!(!ex("   ", "a"));
        assert!(Globs::excludes(&[""]).unwrap().is_empty());
    }

    #[test]
    fn double_star_inside_a_segment_is_refused_with_the_fix() {
        for p in ["a**", "**.py", "a/**b", "***", "x/***/y"] {
            let err = check(p).unwrap_err().to_string();
            assert!(err.contains("whole path segment"), "{p}: {err}");
        }
    }

    #[test]
    fn pathological_patterns_are_linear() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let globs =
                Globs::excludes(&["*a*a*a*a*a*a*a*a*a*a*b", "**/*a*a*a*a*a*a*b/**"]).unwrap();
            let long = "a".repeat(100_000);
            let deep = vec!["aaaaaaaaaaaaaaaa"; 5_000].join("/");
            let _ = tx.send((globs.is_match(&long), globs.is_match(&deep)));
        });
        let answer = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(answer, Ok((false, false)), "matching took over 5 s");
    }
}
