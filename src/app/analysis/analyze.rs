//! Analysis of a commit's tree: file results come from the index's blob cache when it has them,
//! and only the rest is parsed (in parallel), so a one-file change parses one file. A run's
//! analysis goes further: it starts from an analysed ancestor's tally (stored by tree id in the
//! same cache) and folds in only the files that differ, so its cost follows the diff.

use crate::app::{AppError, Context, Message, Result};
use gs_analysis as analysis;
use gs_analysis::{FileAnalysis, Options, Sign, Tally};
use gs_config::AnalysisConfig;
use gs_git::objects;
use gs_git::ObjectId;
use gs_model::Analysis;
use gs_store::Index;
use serde::Serialize;
use std::path::Path;

/// The analyser's options, with the excludes compiled once for the whole tree.
pub fn options(cfg: &AnalysisConfig) -> Result<Options> {
    let exclude = analysis::Globs::excludes(&cfg.exclude)
        .map_err(|e| AppError::Usage(Message::of("[analysis] exclude", &e)))?;
    Ok(Options {
        exclude,
        max_complexity: cfg.max_complexity,
        max_function_lines: cfg.max_function_lines,
        max_parameters: cfg.max_parameters,
    })
}

/// The cache key beside the blob id: the analyser's version and the file extension, which
/// selects the grammar (the same bytes parse differently as `.ts` and `.tsx`).
fn cache_key(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name
        .rsplit_once('.')
        .map_or("", |(_, e)| e)
        .to_ascii_lowercase();
    format!("v{}:{ext}", analysis::ANALYZER_VERSION)
}

/// The largest manifest (package.json, Cargo.toml, …) whose dependencies are read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

pub fn analyze_tree(
    index: &Index,
    repo: &gs_git::Repository,
    tree: ObjectId,
    cfg: &AnalysisConfig,
) -> Result<Analysis> {
    analyze_tree_with(index, repo, tree, cfg, &mut |_, _| {})
}

/// [`analyze_tree`], handing each analysed file's result to `on_file` too (in no fixed order).
pub fn analyze_tree_with(
    index: &Index,
    repo: &gs_git::Repository,
    tree: ObjectId,
    cfg: &AnalysisConfig,
    on_file: &mut dyn FnMut(&str, &FileAnalysis),
) -> Result<Analysis> {
    let opts = options(cfg)?;
    let mut tally = Tally::default();
    let mut fresh = Vec::new();
    let files = all_files(repo, tree)?;
    fold(index, repo, &files, &opts, &mut tally, &mut fresh, on_file)?;
    index.put_analysis(&fresh)?;
    Ok(tally.analysis())
}

/// A file to fold into a tally, or out of it.
struct Entry {
    path: String,
    id: ObjectId,
    sign: Sign,
}

/// Every regular file of `tree`, to add.
fn all_files(repo: &gs_git::Repository, tree: ObjectId) -> Result<Vec<Entry>> {
    Ok(objects::walk(repo, tree)?
        .into_iter()
        .filter(|e| e.kind.is_file())
        .map(|e| Entry {
            path: e.path,
            id: e.id,
            sign: Sign::Add,
        })
        .collect())
}

/// Folds each entry's contribution into (or out of) `tally`: a manifest's dependencies, then the
/// file's result from the blob cache, else parsed (in parallel) and cached. A file's
/// contribution depends only on its path, its blob and the options, so taking out what a file
/// added needs nothing but the same three. Parsed results are pushed to `fresh` (blob id, key,
/// JSON) for the cache.
fn fold(
    index: &Index,
    repo: &gs_git::Repository,
    entries: &[Entry],
    opts: &Options,
    tally: &mut Tally,
    fresh: &mut Vec<(String, String, String)>,
    on_file: &mut dyn FnMut(&str, &FileAnalysis),
) -> Result<()> {
    let mut misses: Vec<&Entry> = Vec::new();
    let mut take = |tally: &mut Tally, e: &Entry, file: &FileAnalysis| {
        if e.sign == Sign::Add {
            on_file(&e.path, file);
        }
        tally.file(e.sign, &e.path, file, opts);
    };
    for e in entries {
        let path = e.path.as_str();
        // A manifest is read whole, so only a small one: a commit's files may be huge.
        if analysis::is_manifest(path) {
            if let Some(blob) = objects::small_blob(repo, e.id, MAX_MANIFEST_BYTES) {
                if let Some((eco, deps)) = analysis::manifest_deps(path, &blob, opts) {
                    tally.manifest(e.sign, eco, &deps);
                }
            }
        }
        // Path rules first; a cached result already encodes what the content said (binary,
        // generated, too large), so only misses need the blob's size.
        if let Some(reason) = analysis::skip_reason(path, 0, opts) {
            tally.skipped(e.sign, reason);
            continue;
        }
        match index
            .cached_analysis(&e.id.to_string(), &cache_key(path))?
            .and_then(|json| serde_json::from_str::<FileAnalysis>(&json).ok())
        {
            Some(file) => take(tally, e, &file),
            None => {
                let size = objects::size(repo, e.id).unwrap_or(0);
                match analysis::skip_reason(path, size, opts) {
                    Some(reason) => tally.skipped(e.sign, reason),
                    None => misses.push(e),
                }
            }
        }
    }
    if misses.is_empty() {
        return Ok(());
    }
    let shared = objects::Shared::of(repo);
    let results = analysis::analyze_parallel(
        misses.len(),
        |i| {
            let repo = shared.local();
            let e = misses[i];
            let blob = objects::blob(&repo, e.id).ok()?;
            Some((e.path.clone(), blob))
        },
        opts,
    );
    for (e, result) in misses.iter().zip(results) {
        match result {
            Some(file) => {
                take(tally, e, &file);
                if let Ok(json) = serde_json::to_string(&file) {
                    fresh.push((e.id.to_string(), cache_key(&e.path), json));
                }
            }
            None => tally.skipped(e.sign, analysis::SkipReason::Unreadable),
        }
    }
    Ok(())
}

/// How a commit's analysis was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// The tree was analysed before (under the same settings): nothing read.
    Stored,
    /// An analysed ancestor's tally, updated by the files that differ.
    Incremental,
    /// Every file of the tree (from the blob cache where it has them).
    Full,
}

/// A commit's analysis and what making it took.
pub struct CommitAnalysis {
    pub analysis: Analysis,
    pub how: How,
    /// Files folded in or out: the tree's files, or the two sides of each changed file.
    pub files: usize,
    /// Of those, files parsed (not in the blob cache).
    pub parsed: usize,
}

/// Bump when [`Tally`]'s layout or meaning changes, so tallies stored before are not read.
const TALLY_VERSION: u32 = 1;
/// First-parent ancestors looked at for a stored tally before the tree is analysed whole.
const MAX_ANCESTORS: usize = 32;

/// The cache key of a tree's tally: a tally holds thresholded issues and excludes' effects,
/// so it is only good for the settings it was made under.
fn tally_key(cfg: &AnalysisConfig) -> String {
    use sha2::Digest;
    let settings = serde_json::to_string(cfg).unwrap_or_default();
    let hash = sha2::Sha256::digest(settings.as_bytes());
    let short: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "tree:v{}.{TALLY_VERSION}:{short}",
        analysis::ANALYZER_VERSION
    )
}

fn stored_tally(index: &Index, tree: ObjectId, key: &str) -> Result<Option<Tally>> {
    Ok(index
        .cached_analysis(&tree.to_string(), key)?
        .and_then(|json| serde_json::from_str(&json).ok()))
}

/// The analysis of the commit with `tree` and first parent `parent`, in O(diff): the nearest
/// first-parent ancestor whose tree has a stored tally (under these settings) gives it, updated
/// by the files that differ between the two trees; unchanged files are not read, not even from
/// the blob cache. Without such an ancestor, the tree's own stored tally, else (a first run,
/// changed settings) the tree is analysed whole, once. The commit's tally is stored for its
/// children.
pub fn analyze_commit(
    index: &Index,
    repo: &gs_git::Repository,
    tree: ObjectId,
    parent: Option<ObjectId>,
    cfg: &AnalysisConfig,
) -> Result<CommitAnalysis> {
    let opts = options(cfg)?;
    let key = tally_key(cfg);
    let mut base = None;
    let mut next = parent;
    for _ in 0..MAX_ANCESTORS {
        // A shallow clone's history ends early: then there is no base.
        let Some(info) = next.and_then(|c| gs_git::commit_info(repo, c).ok()) else {
            break;
        };
        if let Some(tally) = stored_tally(index, info.tree, &key)? {
            base = Some((info.tree, tally));
            break;
        }
        next = info.parents.first().copied();
    }
    // The tree's own tally is looked for only then, so that a run measures what a new commit
    // costs (its parent's tally and the diff); it serves a rebased or cherry-picked commit.
    if base.is_none() {
        if let Some(tally) = stored_tally(index, tree, &key)? {
            return Ok(CommitAnalysis {
                analysis: tally.analysis(),
                how: How::Stored,
                files: 0,
                parsed: 0,
            });
        }
    }
    let (how, mut tally, removed, added) = match base {
        Some((base_tree, tally)) => {
            let (mut removed, mut added) = (Vec::new(), Vec::new());
            for c in gs_git::diff::blob_changes(repo, base_tree, tree)? {
                let sides = [(c.old, Sign::Remove), (c.new, Sign::Add)];
                for (id, sign) in sides {
                    if let Some(id) = id {
                        let side = if sign == Sign::Add {
                            &mut added
                        } else {
                            &mut removed
                        };
                        side.push(Entry {
                            path: c.path.clone(),
                            id,
                            sign,
                        });
                    }
                }
            }
            (How::Incremental, tally, removed, added)
        }
        None => (
            How::Full,
            Tally::default(),
            Vec::new(),
            all_files(repo, tree)?,
        ),
    };
    // Every old file out before any new one in: a path's issues are keyed by the path, and a
    // fold takes cached files before parsed ones.
    let mut fresh = Vec::new();
    for entries in [&removed, &added] {
        fold(
            index,
            repo,
            entries,
            &opts,
            &mut tally,
            &mut fresh,
            &mut |_, _| {},
        )?;
    }
    let parsed = fresh.len();
    // One write: the parsed files' results and the tree's tally.
    if let Ok(json) = serde_json::to_string(&tally) {
        fresh.push((tree.to_string(), key, json));
    }
    index.put_analysis(&fresh)?;
    Ok(CommitAnalysis {
        analysis: tally.analysis(),
        how,
        files: removed.len() + added.len(),
        parsed,
    })
}

/// What `analyze` printed, and a note for the user when the argument was ambiguous.
pub struct Analyzed {
    pub analysis: Analysis,
    pub note: Option<String>,
}

/// Analyse a revision (default `HEAD` of the repository at `cwd`) or a directory. An argument
/// that resolves as a revision in the repository at `cwd` is taken as one, even when a directory
/// of that name exists (then the note says so and how to name the directory: `./main`); anything
/// else that is a directory is analysed as a directory.
pub fn analyze(ctx: &Context, cwd: &Path, target: Option<&str>) -> Result<Analyzed> {
    let repo = gs_git::discover(cwd).ok();
    let rev = target.unwrap_or("HEAD");
    let dir = target.map(|t| cwd.join(t)).filter(|p| p.is_dir());
    let commit = match (&repo, &dir) {
        (Some(repo), None) => Some(gs_git::resolve_commit(repo, rev)?),
        (Some(repo), Some(_)) => gs_git::resolve_commit(repo, rev).ok(),
        (None, _) => None,
    };
    if let (Some(commit), Some(repo)) = (commit, &repo) {
        let info = gs_git::commit_info(repo, commit)?;
        let flags = gs_config::ConfigFile::default();
        let cfg = crate::app::config::commit_config::config_for(ctx, repo, &info, None, &flags)?;
        return Ok(Analyzed {
            analysis: analyze_tree(&ctx.index, repo, info.tree, &cfg.analysis)?,
            note: dir.map(|_| {
                format!("{rev} is both a revision and a directory; analysed the revision (write ./{rev} for the directory)")
            }),
        });
    }
    if let Some(dir) = dir {
        let cfg = ctx.layers.with_repo_dir(&dir)?.resolve();
        let analysis = analysis::analyze_dir(&dir, &options(&cfg.analysis)?)
            .map_err(|e| AppError::usage(format!("cannot analyse {}: {e}", dir.display())))?;
        return Ok(Analyzed {
            analysis,
            note: None,
        });
    }
    match target {
        None => Err(gs_git::GitError::NotARepo {
            path: cwd.to_path_buf(),
        }
        .into()),
        Some(t) => Err(AppError::usage(format!(
            "{t:?} is not a directory, and {} is not inside a git repository to look it up as a revision",
            cwd.display()
        ))
        .hint("name a directory, or run this inside the repository")),
    }
}

#[cfg(test)]
#[path = "analyze_tests.rs"]
mod tests;
