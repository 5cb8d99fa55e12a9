//! Rebuilding the index from git: repositories from their own config (`sandbox.repositoryId`),
//! runs from their notes, experiments from their refs, evaluations from their notes. The index is
//! a cache; this is how it is refilled.

use crate::app::{experiment::experiments, repo::repos, Context, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{note, Evaluation, NoteRecord};
use std::path::PathBuf;

/// Notes decoded and indexed at a time.
const PAGE: usize = 1000;

#[derive(Debug, serde::Serialize)]
pub struct RepoReport {
    pub path: String,
    pub repository_id: Option<String>,
    pub runs: usize,
    pub experiments: usize,
    /// Notes that hold no record for their commit: (commit, why). Those commits count as not run.
    pub skipped: Vec<SkippedNote>,
    /// Records dated in the future of this machine's clock, not read (also where the note had
    /// another record for its commit).
    pub future_dated: usize,
    pub error: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub struct SkippedNote {
    pub commit: String,
    pub reason: String,
}

#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub repositories: Vec<RepoReport>,
    pub runs: usize,
    pub experiments: usize,
}

pub fn reindex(ctx: &Context, extra: &[PathBuf]) -> Result<Report> {
    let mut paths: Vec<PathBuf> = ctx
        .index
        .repositories()?
        .into_iter()
        .map(|r| PathBuf::from(r.path))
        .collect();
    if let Ok(entries) = std::fs::read_dir(ctx.paths.repos()) {
        paths.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join(".git").exists()),
        );
    }
    paths.extend(
        gs_store::registry::list(&ctx.paths.home)
            .into_iter()
            .map(|e| e.path),
    );
    paths.extend(extra.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    let mut report = Report {
        repositories: Vec::new(),
        runs: 0,
        experiments: 0,
    };
    for path in paths {
        let canonical = std::fs::canonicalize(&path).unwrap_or(path.clone());
        if !seen.insert(canonical.clone()) {
            continue;
        }
        let mut entry = RepoReport {
            path: canonical.display().to_string(),
            repository_id: None,
            runs: 0,
            experiments: 0,
            skipped: Vec::new(),
            future_dated: 0,
            error: None,
        };
        match one(ctx, &canonical) {
            Ok((id, (runs, experiments, skipped, future_dated))) => {
                entry.future_dated = future_dated;
                entry.repository_id = Some(id);
                entry.runs = runs;
                entry.experiments = experiments;
                entry.skipped = skipped
                    .into_iter()
                    .map(|(c, reason)| SkippedNote {
                        commit: c.to_string(),
                        reason,
                    })
                    .collect();
                report.runs += runs;
                report.experiments += experiments;
            }
            Err(e) => entry.error = Some(e.to_string()),
        }
        report.repositories.push(entry);
    }
    Ok(report)
}

/// A repository's id and what [`import`] did.
type Indexed = (String, Imported);

/// Runs and experiments imported, the notes skipped with why, and the records dated in the
/// future that were not read.
pub type Imported = (usize, usize, Vec<(ObjectId, String)>, usize);

fn one(ctx: &Context, path: &std::path::Path) -> Result<Indexed> {
    let repo = git::open(path)?;
    let Some(row) = repos::known_row(ctx, &repo)? else {
        return Err(crate::app::AppError::usage("not set up").hint("run `git sandbox init` in it"));
    };
    let imported = import(Repo::new(ctx, &repo, &row))?;
    Ok((row.repository_id, imported))
}

/// Fill the index with what git holds for one repository: runs from its notes, experiments
/// from its refs, evaluations from their notes (replacing what the index had). Returns the runs
/// and experiments indexed, and the notes skipped with why.
pub fn import(at: Repo<'_>) -> Result<Imported> {
    let Repo { ctx, repo, row } = at;
    let mut runs = 0;
    let mut skipped = Vec::new();
    let mut future_dated = 0;
    // Read, decoded and checked on every core, a page ahead of the index's writes: a signature
    // check is a third of a reindex's time, reading the objects a sixth, the index a fifth.
    let verifier = ctx.keys()?.verifier();
    // The notes of one tip, which the index then holds whole (its notes tip).
    let tip = git::notes::tip(repo, git::NOTES_REF)?;
    let mut notes: Vec<(ObjectId, ObjectId)> = match tip {
        Some(t) => git::notes::all_notes_at(repo, t)?.into_iter().collect(),
        None => Vec::new(),
    };
    notes.sort_unstable();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(ObjectId, Read)>>(2);
    std::thread::scope(|scope| -> Result<()> {
        let reader = repo.clone();
        let (notes, verifier) = (&notes, &verifier);
        scope.spawn(move || {
            for page in notes.chunks(PAGE) {
                // Gone: the writer stopped on an error, which it reports.
                if tx.send(read_page(&reader, page, verifier)).is_err() {
                    break;
                }
            }
        });
        // The runs in one transaction (one sync, not one per run; nobody sees half of them), put
        // a page at a time (a statement per hundred rows, bounded memory).
        ctx.index.atomically(|| -> Result<()> {
            ctx.index.delete_runs(&row.repository_id)?;
            for page in rx.iter() {
                let mut records = Vec::with_capacity(page.len());
                for (commit, read) in page {
                    match read {
                        Read::Skipped(why) => skipped.push((commit, why)),
                        Read::Decoded(found, future) => {
                            future_dated += future;
                            match found {
                                NoteRecord::Found(record) => records.push(*record),
                                NoteRecord::NotForThisCommit => skipped.push((
                                    commit,
                                    "the note holds another commit's record (copied by an amend or rebase)"
                                        .into(),
                                )),
                                NoteRecord::Invalid(why) => skipped.push((commit, why)),
                            }
                        }
                    }
                }
                ctx.index.put_runs(&row.repository_id, &records)?;
                runs += records.len();
            }
            // A copy is worth what its source is worth with today's signers.
            ctx.index.demote_unbacked_copies(&row.repository_id)?;
            // A record dated ahead of this clock counts once the clock passes it: the index
            // then no longer holds what its note says, so it claims no tip.
            let tip = tip.filter(|_| future_dated == 0).map(|t| t.to_string());
            ctx.index.set_notes_tip(&row.repository_id, tip.as_deref())?;
            Ok(())
        })
    })?;
    ctx.index.delete_experiments(&row.repository_id)?;
    experiments::sync(at)?;
    let found = ctx.index.experiments(&row.repository_id)?.len();
    for (head, blob) in git::notes::all_notes(repo, git::EVAL_NOTES_REF)? {
        let Ok(body) = git::notes::read_blob(repo, blob) else {
            continue;
        };
        if let Ok(ev) = serde_json::from_slice::<Evaluation>(&body) {
            if ev.head.commit == head {
                ctx.index.put_evaluation(&row.repository_id, &ev)?;
            }
        }
    }
    Ok((runs, found, skipped, future_dated))
}

/// What one note gave: why it was skipped, or its record for its commit (with how many of its
/// records were dated in the future).
enum Read {
    Skipped(String),
    Decoded(NoteRecord, usize),
}

/// Each note of `page`, in order: read, decoded and its signature checked, on as many threads as
/// there are cores (up to 4), each with its own handle on the repository.
fn read_page(
    repo: &gs_git::Repository,
    page: &[(ObjectId, ObjectId)],
    verifier: &gs_trust::Verifier,
) -> Vec<(ObjectId, Read)> {
    let judge = |m: &[u8], s: &str| verifier.verify(m, s);
    crate::app::records::results::on_every_core(repo, page, |repo, &(commit, blob)| {
        let read = if !crate::app::publish::bounds::has_commit(repo, commit) {
            Read::Skipped("its commit is not in this clone".into())
        } else {
            match git::notes::read_blob(repo, blob) {
                Ok(body) => {
                    let (found, future) = note::decode_counted(&body, &commit.to_string(), &judge);
                    Read::Decoded(found, future)
                }
                Err(e) => Read::Skipped(format!("cannot read the note: {e}")),
            }
        };
        (commit, read)
    })
}
