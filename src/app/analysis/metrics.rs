//! Code metrics of a revision down to files and functions (optionally under one path), and what
//! changed between two revisions: functions added and removed, complexity up and down, new
//! potential issues. Built on the analysis of `analyze.rs` and its per-blob cache.

use crate::app::analysis::analyze::analyze_tree_with;
use crate::app::{Context, Result};
use gs_analysis::FileAnalysis;
use gs_config::ConfigFile;
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{Analysis, Issue};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Serialize)]
pub struct FileMetrics {
    pub path: String,
    pub language: Option<String>,
    pub code_lines: u64,
    pub functions: u64,
    pub classes: u64,
    pub complexity_max: u64,
    /// Syntax errors of the code (see `FileAnalysis::code_syntax_errors`).
    #[serde(skip_serializing_if = "is_zero")]
    pub syntax_errors: u64,
    /// Regions tree-sitter could not read in code that may be right (C, C++): the file's
    /// metrics cover the rest.
    #[serde(skip_serializing_if = "is_zero")]
    pub unparsed_regions: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionMetrics {
    pub path: String,
    pub name: String,
    pub line: u64,
    pub complexity: u64,
    pub lines: u64,
    pub parameters: u64,
}

/// A revision's analysis with its files and functions (those under `path` when given).
pub struct Metrics {
    pub commit: ObjectId,
    pub analysis: Analysis,
    /// By path.
    pub files: Vec<FileMetrics>,
    /// Most complex first.
    pub functions: Vec<FunctionMetrics>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether `path` is `under` or inside it (`src` takes `src/a.rs`, not `srcx/a.rs`).
pub fn is_under(path: &str, under: &str) -> bool {
    let under = under.trim_end_matches('/');
    under.is_empty()
        || path == under
        || path
            .strip_prefix(under)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The metrics of `commit`, analysed under the config it has (its `.sandbox.toml` excludes).
pub fn of(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: ObjectId,
    under: Option<&str>,
) -> Result<Metrics> {
    let info = git::commit_info(repo, commit)?;
    let cfg = crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        None,
        &ConfigFile::default(),
    )?;
    let mut files = Vec::new();
    let mut functions = Vec::new();
    let analysis = analyze_tree_with(
        &ctx.index,
        repo,
        info.tree,
        &cfg.analysis,
        &mut |path, f: &FileAnalysis| {
            if f.skipped.is_some() || under.is_some_and(|u| !is_under(path, u)) {
                return;
            }
            files.push(FileMetrics {
                path: path.to_string(),
                language: f.language.map(|l| l.as_str().to_string()),
                code_lines: f.code_lines,
                functions: f.functions.len() as u64,
                classes: f.classes,
                complexity_max: f.functions.iter().map(|x| x.complexity).max().unwrap_or(0),
                syntax_errors: f.code_syntax_errors(),
                unparsed_regions: f.unparsed_regions(),
            });
            functions.extend(f.functions.iter().map(|x| FunctionMetrics {
                path: path.to_string(),
                name: x.name.clone(),
                line: x.line,
                complexity: x.complexity,
                lines: x.lines,
                parameters: x.parameters,
            }));
        },
    )?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    functions.sort_by(|a, b| {
        b.complexity
            .cmp(&a.complexity)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.line.cmp(&b.line))
    });
    Ok(Metrics {
        commit,
        analysis,
        files,
        functions,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct ComplexityChange {
    pub path: String,
    pub name: String,
    pub line: u64,
    pub from: u64,
    pub to: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub files: i64,
    pub code_lines: i64,
    pub functions: i64,
    pub complexity_mean: f64,
    pub complexity_max: i64,
    pub potential_issues: i64,
}

/// What changed in the code from `base` to `head`.
#[derive(Debug, Clone, Serialize)]
pub struct Delta {
    pub base: String,
    pub head: String,
    /// head minus base.
    pub totals: Totals,
    pub functions_added: Vec<FunctionMetrics>,
    pub functions_removed: Vec<FunctionMetrics>,
    /// Most increased first.
    pub complexity_up: Vec<ComplexityChange>,
    pub complexity_down: Vec<ComplexityChange>,
    /// Issues of `head` that `base` does not have (matched by file, kind and message).
    pub new_issues: Vec<Issue>,
    /// How many of `base`'s issues `head` no longer has.
    pub fixed_issues: u64,
}

/// Functions keyed by file, name and which of that name in the file (functions move lines).
fn keyed(functions: &[FunctionMetrics]) -> BTreeMap<(String, String, usize), &FunctionMetrics> {
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    let mut by_line: Vec<&FunctionMetrics> = functions.iter().collect();
    by_line.sort_by(|a, b| a.path.cmp(&b.path).then(a.line.cmp(&b.line)));
    by_line
        .into_iter()
        .map(|f| {
            let n = seen.entry((&f.path, &f.name)).or_default();
            *n += 1;
            ((f.path.clone(), f.name.clone(), *n), f)
        })
        .collect()
}

fn issue_key(i: &Issue) -> (String, String, String) {
    (i.path.clone(), i.kind.clone(), i.message.clone())
}

/// The change from `base` to `head` (both [`of`] the same `under`).
pub fn diff(base: &Metrics, head: &Metrics) -> Delta {
    let (b, h) = (keyed(&base.functions), keyed(&head.functions));
    let functions_added = h
        .iter()
        .filter(|(k, _)| !b.contains_key(*k))
        .map(|(_, f)| (*f).clone())
        .collect();
    let functions_removed = b
        .iter()
        .filter(|(k, _)| !h.contains_key(*k))
        .map(|(_, f)| (*f).clone())
        .collect();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for (k, new) in &h {
        if let Some(old) = b.get(k) {
            let change = ComplexityChange {
                path: new.path.clone(),
                name: new.name.clone(),
                line: new.line,
                from: old.complexity,
                to: new.complexity,
            };
            match new.complexity.cmp(&old.complexity) {
                std::cmp::Ordering::Greater => up.push(change),
                std::cmp::Ordering::Less => down.push(change),
                std::cmp::Ordering::Equal => {}
            }
        }
    }
    up.sort_by_key(|c| std::cmp::Reverse(c.to - c.from));
    down.sort_by_key(|c| std::cmp::Reverse(c.from - c.to));
    let in_scope = |m: &Metrics, i: &Issue| m.files.iter().any(|f| f.path == i.path);
    let mut base_issues: HashMap<(String, String, String), usize> = HashMap::new();
    for i in base
        .analysis
        .potential_issues
        .iter()
        .filter(|i| in_scope(base, i))
    {
        *base_issues.entry(issue_key(i)).or_default() += 1;
    }
    let mut new_issues = Vec::new();
    for i in head
        .analysis
        .potential_issues
        .iter()
        .filter(|i| in_scope(head, i))
    {
        match base_issues.get_mut(&issue_key(i)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => new_issues.push(i.clone()),
        }
    }
    let fixed_issues = base_issues.values().sum::<usize>() as u64;
    let sum = |m: &Metrics, f: fn(&FileMetrics) -> u64| m.files.iter().map(f).sum::<u64>() as i64;
    let mean = |m: &Metrics| {
        let n = m.functions.len().max(1) as f64;
        m.functions.iter().map(|f| f.complexity).sum::<u64>() as f64 / n
    };
    let max = |m: &Metrics| m.functions.first().map_or(0, |f| f.complexity) as i64;
    let issues = |m: &Metrics| {
        m.analysis
            .potential_issues
            .iter()
            .filter(|i| in_scope(m, i))
            .count() as i64
    };
    Delta {
        base: base.commit.to_string(),
        head: head.commit.to_string(),
        totals: Totals {
            files: head.files.len() as i64 - base.files.len() as i64,
            code_lines: sum(head, |f| f.code_lines) - sum(base, |f| f.code_lines),
            functions: head.functions.len() as i64 - base.functions.len() as i64,
            complexity_mean: ((mean(head) - mean(base)) * 100.0).round() / 100.0,
            complexity_max: max(head) - max(base),
            potential_issues: issues(head) - issues(base),
        },
        functions_added,
        functions_removed,
        complexity_up: up,
        complexity_down: down,
        new_issues,
        fixed_issues,
    }
}

#[cfg(test)]
mod tests {
    use super::is_under;

    #[test]
    fn under_means_the_path_or_inside_it() {
        assert!(is_under("src/a.rs", "src"));
        assert!(is_under("src/a.rs", "src/"));
        assert!(is_under("src/a.rs", "src/a.rs"));
        assert!(!is_under("srcx/a.rs", "src"));
        assert!(is_under("anything", ""));
    }
}
