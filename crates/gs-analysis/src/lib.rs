//! Code analysis: per-file metrics from tree-sitter (lines, functions, classes, cyclomatic
//! complexity, syntax errors), run in parallel, folded with manifests into the record's `analysis`.
//!
//! A file's result ([`FileAnalysis`]) depends only on its path and bytes, never on thresholds, so
//! it can be cached by blob id + [`ANALYZER_VERSION`]; the [`Tally`] applies the thresholds, and
//! takes files out as well as in, so a commit's analysis is its parent's updated by the diff.

mod aggregate;
pub mod cargograph;
pub mod gograph;
pub mod imports;
pub mod jsgraph;
pub mod jslines;
pub mod lang;
mod lines;
pub mod manifest;
mod metrics;
pub mod pygraph;
pub mod pylines;
mod suites;
mod walk;

pub use aggregate::{manifest_deps, Aggregator, Sign, Tally};
pub use lang::Lang;
pub use manifest::is_manifest;
pub use walk::{analyze_dir, skip_reason};

pub use gs_util::glob::Globs;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bump whenever a [`FileAnalysis`] for the same bytes could come out different.
pub const ANALYZER_VERSION: u32 = 4;

/// The repository's `[analysis]` settings that shape the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Paths not to analyse (`vendor/**`, `*.min.js`), compiled once.
    pub exclude: Globs,
    pub max_complexity: u64,
    pub max_function_lines: u64,
    pub max_parameters: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            exclude: Globs::default(),
            max_complexity: 10,
            max_function_lines: 60,
            max_parameters: 5,
        }
    }
}

/// Why a file is not analysed. Serialized names are the keys of the record's `skipped` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Vendored,
    Excluded,
    Minified,
    Generated,
    Binary,
    TooLarge,
    Unsupported,
    Unreadable,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Vendored => "vendored",
            SkipReason::Excluded => "excluded",
            SkipReason::Minified => "minified",
            SkipReason::Generated => "generated",
            SkipReason::Binary => "binary",
            SkipReason::TooLarge => "too_large",
            SkipReason::Unsupported => "unsupported",
            SkipReason::Unreadable => "unreadable",
        }
    }
}

/// One function (or method, constructor, nested function, function literal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    /// 1-based line of the definition's first line.
    pub line: u64,
    /// Lines from the first to the last line of the definition, less those of the JS/TS
    /// test-suite callbacks inside it (a `describe`'s `it`s; see `suites`).
    pub lines: u64,
    /// Cyclomatic complexity (at least 1).
    pub complexity: u64,
    pub parameters: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntaxError {
    pub line: u64,
    pub message: String,
}

/// The result for one file: what the cache stores (as JSON) under blob id + [`ANALYZER_VERSION`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileAnalysis {
    /// `None` when the file was not parsed (see `skipped`).
    pub language: Option<Lang>,
    /// Set when the content showed the file should not be analysed (binary, generated, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<SkipReason>,
    pub total_lines: u64,
    pub code_lines: u64,
    pub comment_lines: u64,
    pub blank_lines: u64,
    pub classes: u64,
    pub functions: Vec<Function>,
    /// The first syntax errors (at most 20); `syntax_error_count` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syntax_errors: Vec<SyntaxError>,
    #[serde(default)]
    pub syntax_error_count: u64,
    /// The parse was abandoned at the time limit: the one error is the parser's, not the code's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parser_gave_up: bool,
}

impl FileAnalysis {
    fn skipped(reason: SkipReason) -> Self {
        FileAnalysis {
            skipped: Some(reason),
            ..FileAnalysis::default()
        }
    }

    /// Whether the syntax errors are the code's (a `syntax_error` issue) rather than the
    /// parser's limits: not in C and C++ (see [`Lang::parse_errors_are_code_errors`]), nor when
    /// the parse was abandoned at the time limit.
    pub fn errors_are_the_codes(&self) -> bool {
        !self.parser_gave_up
            && self
                .language
                .is_some_and(|l| l.parse_errors_are_code_errors())
    }

    /// Syntax errors that are the code's.
    pub fn code_syntax_errors(&self) -> u64 {
        if self.errors_are_the_codes() {
            self.syntax_error_count
        } else {
            0
        }
    }

    /// Regions the parser could not read in code that may well be right: the file's metrics
    /// cover the rest.
    pub fn unparsed_regions(&self) -> u64 {
        self.syntax_error_count - self.code_syntax_errors()
    }
}

/// Files above this size are parsed one at a time (see [`analyze_file`]).
const BIG_FILE_BYTES: usize = 256 * 1024;
static BIG_FILE: Mutex<()> = Mutex::new(());
/// A parse that takes longer is abandoned; the file is reported with a syntax error.
const PARSE_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

thread_local! {
    /// One parser per thread, reused across files (creating one per file costs more than a
    /// small file's parse).
    static PARSER: RefCell<Option<(lang::Grammar, tree_sitter::Parser)>> =
        const { RefCell::new(None) };
}

fn parse(grammar: lang::Grammar, src: &[u8]) -> Option<tree_sitter::Tree> {
    parse_within(grammar, src, PARSE_TIME_LIMIT)
}

fn parse_within(
    grammar: lang::Grammar,
    src: &[u8],
    limit: std::time::Duration,
) -> Option<tree_sitter::Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.as_ref().map(|(g, _)| *g) != Some(grammar) {
            let mut parser = slot
                .take()
                .map(|(_, p)| p)
                .unwrap_or_else(tree_sitter::Parser::new);
            parser.set_language(&grammar.table().language).ok()?;
            *slot = Some((grammar, parser));
        }
        let (_, parser) = slot.as_mut()?;
        // Tree-sitter is near linear, but a pathological input must not stall a run.
        let start = std::time::Instant::now();
        let mut calls = 0u32;
        let mut progress = |_: &tree_sitter::ParseState| {
            calls = calls.wrapping_add(1);
            if calls.is_multiple_of(256) && start.elapsed() > limit {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        };
        let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
        let mut read = |i: usize, _: tree_sitter::Point| src.get(i..).unwrap_or(&[]);
        let tree = parser.parse_with_options(&mut read, None, Some(options));
        if tree.is_none() {
            // A parse stopped half way is resumed by the next call unless reset: the next
            // file would get this one's tree.
            parser.reset();
        }
        tree
    })
}

/// Analyses one file's bytes. Pure: the result depends only on `path` and `bytes` (thresholds in
/// `opts` are applied later by the [`Aggregator`]), so it can be cached by blob id.
pub fn analyze_file(path: &str, bytes: &[u8], _opts: &Options) -> FileAnalysis {
    let Some(grammar) = lang::Grammar::for_path(path) else {
        return FileAnalysis::skipped(SkipReason::Unsupported);
    };
    if let Some(reason) = walk::skip_by_content(bytes) {
        return FileAnalysis::skipped(reason);
    }
    let src = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // A syntax tree takes tens of bytes per source byte: let only one big one exist at a time.
    let _big =
        (src.len() > BIG_FILE_BYTES).then(|| BIG_FILE.lock().unwrap_or_else(|e| e.into_inner()));
    let grammar = grammar.for_content(path, src);
    let walked = parse_and_walk(grammar, src);
    let lines = lines::count_lines(src, &walked.comments, &walked.strings);
    FileAnalysis {
        language: Some(grammar.lang()),
        skipped: None,
        total_lines: lines.total,
        code_lines: lines.code,
        comment_lines: lines.comment,
        blank_lines: lines.blank,
        classes: walked.classes,
        functions: walked.functions,
        syntax_errors: walked.errors,
        syntax_error_count: walked.error_count,
        parser_gave_up: walked.gave_up,
    }
}

fn parse_and_walk(grammar: lang::Grammar, src: &[u8]) -> metrics::Walked {
    match parse(grammar, src) {
        Some(tree) => metrics::walk(grammar.table(), &tree, src),
        None => metrics::Walked {
            errors: vec![SyntaxError {
                line: 1,
                message: "could not be parsed (parser gave up)".into(),
            }],
            error_count: 1,
            gave_up: true,
            ..metrics::Walked::default()
        },
    }
}

/// Analyses items `0..n` on one worker per core. Workers pull the next index from a shared
/// counter and load it only then, so at most one file per worker is in memory. `load` returns
/// `None` for an unreadable item, which yields `None` in that slot.
pub fn analyze_parallel<F>(n: usize, load: F, opts: &Options) -> Vec<Option<FileAnalysis>>
where
    F: Fn(usize) -> Option<(String, Vec<u8>)> + Sync,
{
    let workers = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .min(n.max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<FileAnalysis>>> = Mutex::new(vec![None; n]);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            // A bug in a grammar or in the walk must cost one file, not the run.
            let result = load(i).and_then(|(path, bytes)| {
                std::panic::catch_unwind(|| analyze_file(&path, &bytes, opts)).ok()
            });
            done.push((i, result));
            if done.len() >= 64 {
                store(&results, &mut done);
            }
        }
        store(&results, &mut done);
    };
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

fn store(
    results: &Mutex<Vec<Option<FileAnalysis>>>,
    done: &mut Vec<(usize, Option<FileAnalysis>)>,
) {
    let mut guard = results.lock().unwrap_or_else(|e| e.into_inner());
    for (i, r) in done.drain(..) {
        guard[i] = r;
    }
}

#[cfg(test)]
mod tests;
