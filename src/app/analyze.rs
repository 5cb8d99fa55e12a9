//! Analysis of a commit's tree: file results come from the index's blob cache when it has them,
//! and only the rest is parsed (in parallel), so a one-file change parses one file.

use super::{AppError, Result};
use crate::analysis::{self, Aggregator, FileAnalysis, Options};
use crate::config::AnalysisConfig;
use crate::git::gix_err;
use crate::model::Analysis;
use crate::store::Index;
use gix::bstr::ByteSlice;
use gix::ObjectId;

/// The analyser's options, with the excludes compiled once for the whole tree.
pub fn options(cfg: &AnalysisConfig) -> Result<Options> {
    let exclude = analysis::Globs::excludes(&cfg.exclude)
        .map_err(|e| AppError::Usage(format!("[analysis] exclude: {e}")))?;
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

pub fn analyze_tree(
    index: &Index,
    repo: &gix::Repository,
    tree: ObjectId,
    cfg: &AnalysisConfig,
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
        if analysis::is_manifest(&path) {
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
            Some(file) => agg.add(&path, &file),
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
