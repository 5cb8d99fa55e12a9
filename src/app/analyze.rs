//! Analysis of a commit's tree: file results come from the index's blob cache when it has them,
//! and only the rest is parsed (in parallel), so a one-file change parses one file.

use super::{AppError, Context, Message, Result};
use crate::analysis::{self, Aggregator, FileAnalysis, Options};
use crate::config::AnalysisConfig;
use crate::git::gix_err;
use crate::model::Analysis;
use crate::store::Index;
use gix::bstr::ByteSlice;
use gix::ObjectId;
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
    repo: &gix::Repository,
    tree: ObjectId,
    cfg: &AnalysisConfig,
) -> Result<Analysis> {
    analyze_tree_with(index, repo, tree, cfg, &mut |_, _| {})
}

/// [`analyze_tree`], handing each analysed file's result to `on_file` too (in no fixed order).
pub fn analyze_tree_with(
    index: &Index,
    repo: &gix::Repository,
    tree: ObjectId,
    cfg: &AnalysisConfig,
    on_file: &mut dyn FnMut(&str, &FileAnalysis),
) -> Result<Analysis> {
    let opts = options(cfg)?;
    let tree = repo.find_tree(tree).map_err(gix_err)?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(gix_err)?;
    let mut agg = Aggregator::new(&opts);
    let mut misses: Vec<(String, ObjectId)> = Vec::new();
    for entry in recorder.records {
        if !entry.mode.is_blob() {
            continue;
        }
        let path = entry.filepath.to_str_lossy().into_owned();
        // A manifest is read whole, so only a small one: a commit's files may be huge.
        if analysis::is_manifest(&path)
            && repo
                .find_header(entry.oid)
                .is_ok_and(|h| h.size() <= MAX_MANIFEST_BYTES)
        {
            if let Ok(blob) = repo.find_blob(entry.oid) {
                agg.add_manifest(&path, &blob.data);
            }
        }
        // Path rules first; a cached result already encodes what the content said (binary,
        // generated, too large), so only misses need the blob's size.
        if let Some(reason) = analysis::skip_reason(&path, 0, &opts) {
            agg.add_skipped(&path, reason);
            continue;
        }
        let hex = entry.oid.to_string();
        match index
            .cached_analysis(&hex, &cache_key(&path))?
            .and_then(|json| serde_json::from_str::<FileAnalysis>(&json).ok())
        {
            Some(file) => {
                on_file(&path, &file);
                agg.add(&path, &file);
            }
            None => {
                let size = repo.find_header(entry.oid).map(|h| h.size()).unwrap_or(0);
                match analysis::skip_reason(&path, size, &opts) {
                    Some(reason) => agg.add_skipped(&path, reason),
                    None => misses.push((path, entry.oid)),
                }
            }
        }
    }
    if !misses.is_empty() {
        let shared = repo.clone().into_sync();
        let results = analysis::analyze_parallel(
            misses.len(),
            |i| {
                let repo = shared.to_thread_local();
                let (path, id) = &misses[i];
                let blob = repo.find_blob(*id).ok()?;
                Some((path.clone(), blob.data.clone()))
            },
            &opts,
        );
        let mut fresh = Vec::with_capacity(misses.len());
        for ((path, id), result) in misses.iter().zip(results) {
            match result {
                Some(file) => {
                    on_file(path, &file);
                    agg.add(path, &file);
                    if let Ok(json) = serde_json::to_string(&file) {
                        fresh.push((id.to_string(), cache_key(path), json));
                    }
                }
                None => agg.add_skipped(path, analysis::SkipReason::Unreadable),
            }
        }
        index.put_analysis(&fresh)?;
    }
    Ok(agg.finish())
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
    let repo = crate::git::discover(cwd).ok();
    let rev = target.unwrap_or("HEAD");
    let dir = target.map(|t| cwd.join(t)).filter(|p| p.is_dir());
    let commit = match (&repo, &dir) {
        (Some(repo), None) => Some(crate::git::resolve_commit(repo, rev)?),
        (Some(repo), Some(_)) => crate::git::resolve_commit(repo, rev).ok(),
        (None, _) => None,
    };
    if let (Some(commit), Some(repo)) = (commit, &repo) {
        let info = crate::git::commit_info(repo, commit)?;
        let flags = crate::config::ConfigFile::default();
        let cfg = super::commit_config::config_for(ctx, repo, &info, None, &flags)?;
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
        None => Err(crate::git::GitError::NotARepo {
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
