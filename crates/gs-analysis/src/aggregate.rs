//! Folding per-file results (cached or fresh), skipped files and manifests into the record's
//! `analysis` object; the thresholds of potential issues are applied here.
//!
//! The fold is a [`Tally`] that every file can be added to and taken out of again: totals are
//! sums, the maximum complexity comes from a histogram, and issues, languages, skip reasons and
//! dependencies are kept with the counts that let a removal undo an addition. A commit's tally
//! is its parent's with the changed files taken out and put back in.

use super::{manifest, FileAnalysis, Options, SkipReason};
use gs_model::{Analysis, Issue, LanguageStats};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// Issues kept in the record; the rest are counted in `potential_issues_omitted`.
const MAX_ISSUES: usize = 1000;

/// Whether a file's contribution goes in or comes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    Add,
    Remove,
}

impl Sign {
    fn apply(self, x: &mut u64, n: u64) {
        match self {
            Sign::Add => *x += n,
            Sign::Remove => *x = x.saturating_sub(n),
        }
    }
}

/// A count in a map; a key whose count falls to zero is dropped, as if never added.
fn bump<K: Ord>(map: &mut BTreeMap<K, u64>, key: K, n: u64, sign: Sign) {
    match map.entry(key) {
        Entry::Vacant(v) => {
            if sign == Sign::Add && n > 0 {
                v.insert(n);
            }
        }
        Entry::Occupied(mut o) => {
            sign.apply(o.get_mut(), n);
            if *o.get() == 0 {
                o.remove();
            }
        }
    }
}

/// One ecosystem's manifests: how many there are (an ecosystem is listed while it has one,
/// even with no dependencies) and how many of them declare each dependency.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Ecosystem {
    manifests: u64,
    deps: BTreeMap<String, u64>,
}

/// The analysis of a tree as an invertible sum of its files' contributions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    files_analyzed: u64,
    total_lines: u64,
    code_lines: u64,
    comment_lines: u64,
    blank_lines: u64,
    classes: u64,
    functions: u64,
    complexity_total: u64,
    syntax_errors: u64,
    /// Files whose errors are the parser's limits, and the regions it could not read in them.
    #[serde(default)]
    partial_files: u64,
    #[serde(default)]
    partial_regions: u64,
    languages: BTreeMap<String, LanguageStats>,
    /// How many functions have each complexity: the maximum survives a removal.
    complexities: BTreeMap<u64, u64>,
    skipped: BTreeMap<SkipReason, u64>,
    /// Each file's issues, in the record's order (path, line, kind); paths without any absent.
    issues: BTreeMap<String, Vec<Issue>>,
    issue_count: u64,
    dependencies: BTreeMap<String, Ecosystem>,
}

/// The dependencies a manifest declares, deduplicated, when `path` is one the record reads
/// (not excluded, not vendored) and it parses.
pub fn manifest_deps(
    path: &str,
    bytes: &[u8],
    opts: &Options,
) -> Option<(manifest::Ecosystem, Vec<String>)> {
    let path = path.trim_start_matches("./");
    if !manifest::is_manifest(path) || opts.exclude.is_match(path) {
        return None;
    }
    let (eco, deps) = manifest::parse(path, bytes)?;
    let deps: BTreeSet<String> = deps.into_iter().collect();
    Some((eco, deps.into_iter().collect()))
}

/// The issues one file raises under the thresholds of `opts`, in the record's order.
fn file_issues(path: &str, file: &FileAnalysis, opts: &Options) -> Vec<Issue> {
    let mut out = Vec::new();
    for f in &file.functions {
        let mut issue = |kind: &str, message: String| {
            out.push(Issue {
                path: path.to_string(),
                line: f.line,
                kind: kind.to_string(),
                message,
            })
        };
        if f.complexity > opts.max_complexity {
            issue(
                "high_complexity",
                format!(
                    "function `{}` has cyclomatic complexity {} (max {})",
                    f.name, f.complexity, opts.max_complexity
                ),
            );
        }
        if f.lines > opts.max_function_lines {
            issue(
                "long_function",
                format!(
                    "function `{}` is {} lines long (max {})",
                    f.name, f.lines, opts.max_function_lines
                ),
            );
        }
        if f.parameters > opts.max_parameters {
            issue(
                "too_many_parameters",
                format!(
                    "function `{}` has {} parameters (max {})",
                    f.name, f.parameters, opts.max_parameters
                ),
            );
        }
    }
    // One issue per file, at its first error: after one, a parser's recovery often finds more
    // that are the same mistake, and a file's hundred errors are one thing to fix first.
    if let Some(first) = file
        .syntax_errors
        .first()
        .filter(|_| file.errors_are_the_codes())
    {
        let more = file.syntax_error_count.saturating_sub(1);
        out.push(Issue {
            path: path.to_string(),
            line: first.line,
            kind: "syntax_error".into(),
            message: if more > 0 {
                format!("{} (and {more} more in this file)", first.message)
            } else {
                first.message.clone()
            },
        });
    }
    // Stable: issues on one line keep the order they were found in.
    out.sort_by(|x, y| (x.line, x.kind.as_str()).cmp(&(y.line, y.kind.as_str())));
    out
}

impl Tally {
    /// Adds or removes one file's result. A result the content made skip counts as skipped.
    pub fn file(&mut self, sign: Sign, path: &str, file: &FileAnalysis, opts: &Options) {
        let language = match (file.skipped, file.language) {
            (Some(reason), _) => return self.skipped(sign, reason),
            (None, None) => return self.skipped(sign, SkipReason::Unsupported),
            (None, Some(l)) => l,
        };
        let path = path.trim_start_matches("./");
        let functions = file.functions.len() as u64;
        let complexity: u64 = file.functions.iter().map(|f| f.complexity).sum();
        for (total, n) in [
            (&mut self.files_analyzed, 1),
            (&mut self.total_lines, file.total_lines),
            (&mut self.code_lines, file.code_lines),
            (&mut self.comment_lines, file.comment_lines),
            (&mut self.blank_lines, file.blank_lines),
            (&mut self.classes, file.classes),
            (&mut self.functions, functions),
            (&mut self.complexity_total, complexity),
        ] {
            sign.apply(total, n);
        }
        let unparsed = file.unparsed_regions();
        for (total, n) in [
            (&mut self.syntax_errors, file.code_syntax_errors()),
            (&mut self.partial_files, u64::from(unparsed > 0)),
            (&mut self.partial_regions, unparsed),
        ] {
            sign.apply(total, n);
        }
        let stats = self
            .languages
            .entry(language.as_str().to_string())
            .or_default();
        for (total, n) in [
            (&mut stats.files, 1),
            (&mut stats.code_lines, file.code_lines),
            (&mut stats.classes, file.classes),
            (&mut stats.functions, functions),
            (&mut stats.complexity_total, complexity),
        ] {
            sign.apply(total, n);
        }
        if stats.files == 0 {
            self.languages.remove(language.as_str());
        }
        for f in &file.functions {
            bump(&mut self.complexities, f.complexity, 1, sign);
        }
        let issues = file_issues(path, file, opts);
        if issues.is_empty() {
            return;
        }
        sign.apply(&mut self.issue_count, issues.len() as u64);
        match sign {
            Sign::Add => {
                self.issues.insert(path.to_string(), issues);
            }
            Sign::Remove => {
                self.issues.remove(path);
            }
        }
    }

    /// Adds or removes a file not analysed, for `reason`.
    pub fn skipped(&mut self, sign: Sign, reason: SkipReason) {
        bump(&mut self.skipped, reason, 1, sign);
    }

    /// Adds or removes a manifest's dependencies (as [`manifest_deps`] gives them).
    pub fn manifest(&mut self, sign: Sign, eco: &str, deps: &[String]) {
        let e = self.dependencies.entry(eco.to_string()).or_default();
        sign.apply(&mut e.manifests, 1);
        for dep in deps {
            bump(&mut e.deps, dep.clone(), 1, sign);
        }
        if e.manifests == 0 {
            self.dependencies.remove(eco);
        }
    }

    /// The record's `analysis` object.
    pub fn analysis(&self) -> Analysis {
        let issues: Vec<Issue> = self
            .issues
            .values()
            .flatten()
            .take(MAX_ISSUES)
            .cloned()
            .collect();
        let mut extra = BTreeMap::new();
        let omitted = self.issue_count.saturating_sub(issues.len() as u64);
        if omitted > 0 {
            extra.insert("potential_issues_omitted".into(), json!(omitted));
        }
        let mut frameworks = BTreeSet::new();
        let mut deps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (eco, e) in &self.dependencies {
            for dep in e.deps.keys() {
                frameworks.extend(manifest::frameworks(eco, dep));
            }
            deps.insert(eco, e.deps.keys().map(String::as_str).collect());
        }
        let skipped: BTreeMap<&str, u64> =
            self.skipped.iter().map(|(r, n)| (r.as_str(), *n)).collect();
        extra.insert("frameworks".into(), json!(frameworks));
        extra.insert("dependencies".into(), json!(deps));
        extra.insert("skipped".into(), json!(skipped));
        extra.insert("syntax_errors".into(), Value::from(self.syntax_errors));
        if self.partial_files > 0 {
            extra.insert(
                "partially_parsed".into(),
                json!({"files": self.partial_files, "regions": self.partial_regions}),
            );
        }
        Analysis {
            files_analyzed: self.files_analyzed,
            total_lines: self.total_lines,
            code_lines: self.code_lines,
            comment_lines: self.comment_lines,
            blank_lines: self.blank_lines,
            functions_found: self.functions,
            classes_found: self.classes,
            complexity_score: if self.functions == 0 {
                0.0
            } else {
                self.complexity_total as f64 / self.functions as f64
            },
            complexity_max: self.complexities.keys().next_back().copied().unwrap_or(0),
            languages: self.languages.clone(),
            potential_issues: issues,
            extra,
        }
    }
}

/// A [`Tally`] built by additions only, with the options it is built under.
pub struct Aggregator {
    opts: Options,
    tally: Tally,
}

impl Aggregator {
    pub fn new(opts: &Options) -> Self {
        Aggregator {
            opts: opts.clone(),
            tally: Tally::default(),
        }
    }

    /// Adds one file's result. A result the content made skip counts as skipped.
    pub fn add(&mut self, path: &str, file: &FileAnalysis) {
        self.tally.file(Sign::Add, path, file, &self.opts);
    }

    pub fn add_skipped(&mut self, _path: &str, reason: SkipReason) {
        self.tally.skipped(Sign::Add, reason);
    }

    /// Adds a manifest's dependencies (and the frameworks they reveal). Excluded, vendored and
    /// unrecognised paths are ignored.
    pub fn add_manifest(&mut self, path: &str, bytes: &[u8]) {
        if let Some((eco, deps)) = manifest_deps(path, bytes, &self.opts) {
            self.tally.manifest(Sign::Add, eco, &deps);
        }
    }

    pub fn finish(self) -> Analysis {
        self.tally.analysis()
    }
}
