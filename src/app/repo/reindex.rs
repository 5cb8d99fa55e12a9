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
    let verifier = ctx.keys()?.verifier();
    // The notes of one tip, which the index then holds whole (its notes tip).
    let tip = git::notes::tip(repo, git::NOTES_REF)?;
    let mut notes: Vec<(ObjectId, ObjectId)> = match tip {
        Some(t) => git::notes::all_notes_at(repo, t)?.into_iter().collect(),
        None => Vec::new(),
    };
    notes.sort_unstable();
    // Read as they lie in their packs, through one cache of delta bases: after a gc, most notes
    // are deltas of notes read just before them.
    let reader = git::bulk::reader(repo);
    git::bulk::in_pack_order(&reader, &mut notes, |&(_, blob)| blob);
    // Three stages a page apart: one thread reads (in pack order each base comes just before
    // its deltas; two threads reading halves were slower than one), every core decodes and
    // checks signatures (the most work), and this thread writes the index.
    let (bodies_tx, bodies_rx) = std::sync::mpsc::sync_channel::<Vec<(ObjectId, Body)>>(2);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(ObjectId, Read)>>(2);
    std::thread::scope(|scope| -> Result<()> {
        let notes = &notes;
        scope.spawn(move || {
            for page in notes.chunks(PAGE) {
                let bodies = page
                    .iter()
                    .map(|&(commit, blob)| (commit, read_body(&reader, commit, blob)))
                    .collect();
                // Gone: the writer stopped on an error, which it reports.
                if bodies_tx.send(bodies).is_err() {
                    break;
                }
            }
        });
        let verifier = &verifier;
        scope.spawn(move || {
            for page in bodies_rx {
                if tx.send(check_page(page, verifier)).is_err() {
                    break;
                }
            }
        });
        // The runs in one transaction (one sync, not one per run; nobody sees half of them), put
        // a page at a time (a statement per hundred rows, bounded memory). A run the index holds
        // as its note says is not written again; the runs of commits no note holds a record for
        // are deleted at the end.
        ctx.index.refilling(|| -> Result<()> {
            let mut stale = ctx.index.run_commits(&row.repository_id)?;
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
                for r in &records {
                    stale.remove(&r.commit);
                }
                ctx.index.refill_runs(&row.repository_id, &records)?;
                runs += records.len();
            }
            let stale: Vec<&str> = stale.iter().map(String::as_str).collect();
            ctx.index.delete_runs_of(&row.repository_id, &stale)?;
            // A copy is worth what its source is worth with today's signers.
            ctx.index.demote_unbacked_copies(&row.repository_id)?;
            // A record dated ahead of this clock counts once the clock passes it: the index
            // then no longer holds what its note says, so it claims no tip.
            let tip = tip.filter(|_| future_dated == 0).map(|t| t.to_string());
            ctx.index.set_notes_tip(&row.repository_id, tip.as_deref())?;
            Ok(())
        })
    })?;
    // In the order of their commits, whatever order they were read in.
    skipped.sort_unstable_by_key(|(commit, _)| *commit);
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

/// A note's body as read, or why it was skipped unread.
type Body = std::result::Result<Vec<u8>, String>;

/// The body of the note `blob` on `commit`, when its commit is in this clone.
fn read_body(repo: &gs_git::Repository, commit: ObjectId, blob: ObjectId) -> Body {
    if !crate::app::publish::bounds::has_commit(repo, commit) {
        return Err("its commit is not in this clone".into());
    }
    git::notes::read_blob(repo, blob).map_err(|e| format!("cannot read the note: {e}"))
}

/// Each note of `page`, in order: decoded and its signatures checked, on as many threads as
/// there are cores (up to 4).
fn check_page(page: Vec<(ObjectId, Body)>, verifier: &gs_trust::Verifier) -> Vec<(ObjectId, Read)> {
    let read =
        crate::app::records::results::in_parts(&page, || (), |(), part| check_part(part, verifier));
    page.into_iter()
        .map(|(commit, _)| commit)
        .zip(read)
        .collect()
}

/// Each note of `part`, decoded: the signatures of its records checked together first (a
/// third of the work of checking each alone), and any other its decoding asks about alone.
fn check_part(part: &[(ObjectId, Body)], verifier: &gs_trust::Verifier) -> Vec<Read> {
    let signed: Vec<(Vec<u8>, &str)> = part
        .iter()
        .filter_map(|(_, body)| body.as_ref().ok())
        .flat_map(|body| note::signed_lines(body))
        .collect();
    let items: Vec<(&[u8], &str)> = signed.iter().map(|(m, s)| (&m[..], *s)).collect();
    let answers = verifier.verify_many(&items);
    type Answer = std::result::Result<gs_model::Verified, String>;
    let known: std::collections::HashMap<&str, (&[u8], &Answer)> = items
        .iter()
        .zip(&answers)
        .map(|((m, s), a)| (*s, (*m, a)))
        .collect();
    let judge = |m: &[u8], s: &str| match known.get(s) {
        Some((checked, answer)) if *checked == m => (*answer).clone(),
        _ => verifier.verify(m, s),
    };
    part.iter()
        .map(|(commit, body)| match body {
            Ok(body) => {
                let (found, future) = note::decode_counted(body, &commit.to_string(), &judge);
                Read::Decoded(found, future)
            }
            Err(why) => Read::Skipped(why.clone()),
        })
        .collect()
}
