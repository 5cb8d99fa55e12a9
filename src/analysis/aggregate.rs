//! Folding per-file results (cached or fresh), skipped files and manifests into the record's
//! `analysis` object; the thresholds of potential issues are applied here.

use super::{manifest, FileAnalysis, Options, SkipReason};
use crate::model::{Analysis, Issue, LanguageStats};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Syntax-error issues reported per file; the last one says how many more there were.
const ERRORS_PER_FILE: usize = 3;
/// Issues kept in the record; the rest are counted in `potential_issues_omitted`.
const MAX_ISSUES: usize = 1000;

pub struct Aggregator {
    opts: Options,
    analysis: Analysis,
    complexity_total: u64,
    functions: u64,
    skipped: BTreeMap<&'static str, u64>,
    dependencies: BTreeMap<&'static str, BTreeSet<String>>,
    frameworks: BTreeSet<&'static str>,
    syntax_errors: u64,
}

impl Aggregator {
    pub fn new(opts: &Options) -> Self {
        Aggregator {
            opts: opts.clone(),
            analysis: Analysis::default(),
            complexity_total: 0,
            functions: 0,
            skipped: BTreeMap::new(),
            dependencies: BTreeMap::new(),
            frameworks: BTreeSet::new(),
            syntax_errors: 0,
        }
    }

    /// Adds one file's result. A result the content made skip counts as skipped.
    pub fn add(&mut self, path: &str, file: &FileAnalysis) {
        let language = match (file.skipped, file.language) {
            (Some(reason), _) => return self.add_skipped(path, reason),
            (None, None) => return self.add_skipped(path, SkipReason::Unsupported),
            (None, Some(l)) => l,
        };
        let a = &mut self.analysis;
        a.files_analyzed += 1;
        a.total_lines += file.total_lines;
        a.code_lines += file.code_lines;
        a.comment_lines += file.comment_lines;
        a.blank_lines += file.blank_lines;
        a.classes_found += file.classes;
        a.functions_found += file.functions.len() as u64;
        let stats: &mut LanguageStats = a
            .languages
            .entry(language.as_str().to_string())
            .or_default();
        stats.files += 1;
        stats.code_lines += file.code_lines;
        stats.classes += file.classes;
        stats.functions += file.functions.len() as u64;
        let path = path.trim_start_matches("./");
        let o = &self.opts;
        for f in &file.functions {
            stats.complexity_total += f.complexity;
            self.complexity_total += f.complexity;
            self.functions += 1;
            a.complexity_max = a.complexity_max.max(f.complexity);
            let mut issue = |kind: &str, message: String| {
                a.potential_issues.push(Issue {
                    path: path.to_string(),
                    line: f.line,
                    kind: kind.to_string(),
                    message,
                })
            };
            if f.complexity > o.max_complexity {
                issue(
                    "high_complexity",
                    format!(
                        "function `{}` has cyclomatic complexity {} (max {})",
                        f.name, f.complexity, o.max_complexity
                    ),
                );
            }
            if f.lines > o.max_function_lines {
                issue(
                    "long_function",
                    format!(
                        "function `{}` is {} lines long (max {})",
                        f.name, f.lines, o.max_function_lines
                    ),
                );
            }
            if f.parameters > o.max_parameters {
                issue(
                    "too_many_parameters",
                    format!(
                        "function `{}` has {} parameters (max {})",
                        f.name, f.parameters, o.max_parameters
                    ),
                );
            }
        }
        self.syntax_errors += file.syntax_error_count;
        let shown = file.syntax_errors.len().min(ERRORS_PER_FILE);
        for (i, e) in file.syntax_errors.iter().take(shown).enumerate() {
            let more = file.syntax_error_count.saturating_sub(shown as u64);
            let message = if i + 1 == shown && more > 0 {
                format!("{} (and {more} more in this file)", e.message)
            } else {
                e.message.clone()
            };
            a.potential_issues.push(Issue {
                path: path.to_string(),
                line: e.line,
                kind: "syntax_error".into(),
                message,
            });
        }
    }

    pub fn add_skipped(&mut self, _path: &str, reason: SkipReason) {
        *self.skipped.entry(reason.as_str()).or_default() += 1;
    }

    /// Adds a manifest's dependencies (and the frameworks they reveal). Excluded, vendored and
    /// unrecognised paths are ignored.
    pub fn add_manifest(&mut self, path: &str, bytes: &[u8]) {
        let path = path.trim_start_matches("./");
        if !manifest::is_manifest(path) || self.opts.exclude.is_match(path) {
            return;
        }
        let Some((eco, deps)) = manifest::parse(path, bytes) else {
            return;
        };
        let set = self.dependencies.entry(eco).or_default();
        for dep in deps {
            self.frameworks.extend(manifest::frameworks(eco, &dep));
            set.insert(dep);
        }
    }

    pub fn finish(self) -> Analysis {
        let mut a = self.analysis;
        a.complexity_score = if self.functions == 0 {
            0.0
        } else {
            self.complexity_total as f64 / self.functions as f64
        };
        a.potential_issues.sort_by(|x, y| {
            (x.path.as_str(), x.line, x.kind.as_str()).cmp(&(
                y.path.as_str(),
                y.line,
                y.kind.as_str(),
            ))
        });
        if a.potential_issues.len() > MAX_ISSUES {
            let omitted = a.potential_issues.len() - MAX_ISSUES;
            a.potential_issues.truncate(MAX_ISSUES);
            a.extra
                .insert("potential_issues_omitted".into(), json!(omitted));
        }
        a.extra.insert("frameworks".into(), json!(self.frameworks));
        let deps: BTreeMap<&str, Vec<String>> = self
            .dependencies
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect();
        a.extra.insert("dependencies".into(), json!(deps));
        a.extra.insert("skipped".into(), json!(self.skipped));
        a.extra
            .insert("syntax_errors".into(), Value::from(self.syntax_errors));
        a
    }
}
