//! The daemon's look for lost notes: indexed results whose note a concurrent writer dropped are
//! written again, and commits whose note no longer holds their record are queued again. Each
//! look covers only what moved since the last one (the notes commit, the index's runs).

use crate::app::{records::results, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::RunRecord;

/// Indexed records read at a time by a full look: the daemon's memory stays the same however
/// long the history.
const PAGE: usize = 500;

/// Where a look left a repository: its notes commit and its runs' generation in the index,
/// both as read before that look (what moved during it is looked at again next time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    notes: Option<ObjectId>,
    generation: i64,
}

/// Bring notes and index back in line for a repository: write again the notes of indexed runs
/// whose note is gone (plain `git notes add` does not compare-and-swap, so one racing with our
/// write can drop our notes; the index still holds them), and queue again the commits whose
/// note now holds no record for them. (To drop a result on purpose, remove the note and run
/// `git sandbox reindex`, which makes the index follow the notes.)
///
/// After a first look (`seen` None) every indexed record is checked, a page at a time. Later,
/// with nothing moved, nothing is read; with only the notes ref moved (another writer, or our
/// own results), only the commits whose note changed between the two notes commits; when the
/// index's runs changed too, every record again. Returns (notes written again, commits queued
/// again) and where this look leaves the repository.
pub fn restore(at: Repo<'_>, seen: Option<Seen>) -> Result<((usize, usize), Seen)> {
    let Repo { ctx, repo, row } = at;
    let now = Seen {
        notes: git::notes::tip(repo, git::NOTES_REF)?,
        generation: ctx.index.run_generation(&row.repository_id)?,
    };
    let found = match seen {
        Some(s) if s == now => (0, 0),
        Some(s) if s.generation == now.generation => {
            // A notes commit gone (pruned) since: everything is looked at.
            match git::notes::changed(repo, s.notes, now.notes) {
                Ok(changed) => changed_only(at, &changed)?,
                Err(_) => everything(at)?,
            }
        }
        _ => everything(at)?,
    };
    Ok((found, now))
}

/// The records of the commits whose note changed.
fn changed_only(at: Repo<'_>, changed: &[ObjectId]) -> Result<(usize, usize)> {
    let Repo { ctx, row, .. } = at;
    let hex: Vec<String> = changed.iter().map(ObjectId::to_string).collect();
    let commits: Vec<&str> = hex.iter().map(String::as_str).collect();
    let records: Vec<RunRecord> = ctx
        .index
        .runs_for_commits(&row.repository_id, &commits)?
        .into_values()
        .map(|r| r.record)
        .collect();
    results::check_notes(at, &records)
}

/// Every indexed record, a page at a time.
fn everything(at: Repo<'_>) -> Result<(usize, usize)> {
    let Repo { ctx, row, .. } = at;
    let (mut restored, mut requeued) = (0, 0);
    let mut after = 0;
    loop {
        let page = ctx
            .index
            .run_records_after(&row.repository_id, after, PAGE)?;
        let Some((last, _)) = page.last() else {
            break;
        };
        after = *last;
        let records: Vec<RunRecord> = page.into_iter().map(|(_, r)| r).collect();
        let (r, q) = results::check_notes(at, &records)?;
        restored += r;
        requeued += q;
    }
    Ok((restored, requeued))
}
