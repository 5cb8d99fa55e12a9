//! What a remote's notes may bring: they are fetched beside ours (`refs/notes/remotes/<remote>/…`)
//! and checked there before any is merged: a record over [`note::MAX_RECORD`] or more than
//! [`MAX_FETCHED_NOTES`] of new notes refuse the whole fetch, ours unchanged. What is merged is
//! then indexed only where it is about a commit this clone has and is not dated in the future.

use crate::app::{AppError, Context, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{note, NoteRecord, RunRecord};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// New note bytes one fetch may bring (a record is a few KB: tens of thousands of results).
pub const MAX_FETCHED_NOTES: u64 = 64 * 1024 * 1024;

/// Records a fetch merged but did not index, by why.
#[derive(Debug, Default, Serialize, Clone, Copy, PartialEq)]
pub struct NotIndexed {
    /// Dated more than a minute past this machine's clock.
    pub future_dated: usize,
    /// On a commit this clone does not have.
    pub missing_commit: usize,
}

impl NotIndexed {
    pub fn total(&self) -> usize {
        self.future_dated + self.missing_commit
    }

    /// One line for the user, or none when every record was indexed.
    pub fn line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.future_dated > 0 {
            parts.push(format!(
                "{} dated in the future",
                plural(self.future_dated, "record")
            ));
        }
        if self.missing_commit > 0 {
            parts.push(format!(
                "{} on commits this clone does not have",
                plural(self.missing_commit, "note")
            ));
        }
        (!parts.is_empty()).then(|| format!("not indexed: {}", parts.join(", ")))
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Check the notes of each `(ours, theirs)` pair before any is merged: what `theirs` holds that
/// neither ours nor the part of theirs merged before holds. Refuses with one line when a record
/// is over [`note::MAX_RECORD`] or the new notes are over [`MAX_FETCHED_NOTES`].
pub fn check_incoming(
    repo: &gs_git::Repository,
    dir: &Path,
    remote: &str,
    pairs: &[(&str, String)],
) -> Result<()> {
    let mut total = 0u64;
    let mut ours_cache: HashMap<&str, HashMap<ObjectId, ObjectId>> = HashMap::new();
    for (ours, theirs) in pairs {
        let Some(their_tip) = git::remote::ref_tip(dir, theirs) else {
            continue;
        };
        let our_tip = git::remote::ref_tip(dir, ours);
        if our_tip.as_deref() == Some(their_tip.as_str()) {
            continue;
        }
        if !ours_cache.contains_key(ours) {
            ours_cache.insert(ours, git::notes::all_notes(repo, ours)?);
        }
        let mine = &ours_cache[ours];
        // What of theirs was merged before: their tip then is the merge base of the two.
        let base = match &our_tip {
            Some(o) => git::cli::git(dir, &["merge-base", o, &their_tip])
                .ok()
                .and_then(|b| ObjectId::from_hex(b.trim().as_bytes()).ok())
                .map(|b| git::notes::all_notes_at(repo, b))
                .transpose()?
                .unwrap_or_default(),
            None => HashMap::new(),
        };
        for (commit, blob) in git::notes::all_notes(repo, theirs)? {
            if mine.get(&commit) == Some(&blob) || base.get(&commit) == Some(&blob) {
                continue;
            }
            let size = git::notes::blob_size(repo, blob)?;
            total += size;
            if total > MAX_FETCHED_NOTES {
                return Err(AppError::refused(format!(
                    "the notes {remote} sent are over {} MB; none were taken and yours are unchanged",
                    MAX_FETCHED_NOTES >> 20
                ))
                .hint(format!(
                    "a result is a few KB: have whoever pushed {theirs} to {remote} remove what is not results, or fetch without the notes (`git fetch {remote}`)"
                )));
            }
            // A note under the bound holds no record over it; a larger one is read (the total
            // bounds what is read) to find its longest line.
            if size as usize > note::MAX_RECORD {
                let body = git::notes::read_blob(repo, blob)?;
                let longest = body.split(|&b| b == b'\n').map(<[u8]>::len).max();
                if longest.unwrap_or(0) > note::MAX_RECORD {
                    return Err(AppError::refused(format!(
                        "the note {remote} sent for commit {} holds a record of {} KB, over the {} KB a record may be; none were taken and yours are unchanged",
                        gs_util::short(&commit.to_string()),
                        longest.unwrap_or(0) >> 10,
                        note::MAX_RECORD >> 10
                    ))
                    .hint(format!(
                        "have whoever pushed it remove it (`git notes --ref={} remove {commit}`, then push), or fetch without the notes (`git fetch {remote}`)",
                        ours.trim_start_matches("refs/notes/")
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Whether `commit` is in this clone: a note on a commit it lacks is not indexed (its record
/// would otherwise vouch for a tree nobody here ran).
pub fn has_commit(repo: &gs_git::Repository, commit: ObjectId) -> bool {
    // Its header only: the commit itself is not needed, and inflating it was a sixth of a
    // reindex's time.
    gs_git::objects::is_commit_object(repo, commit)
}

/// Whether the result `copy` was served from is evidence now, so the copy may count: that
/// commit's own record (not a copy itself), of the same tree and config, signed by this machine
/// or a signer it trusts today. `source_note` is the note on that commit, if there is one; a
/// snapshot of work not committed has none (it lives in the index alone, and only this machine
/// makes one).
pub fn backs(ctx: &Context, copy: &RunRecord, source_note: Option<Vec<u8>>) -> Result<bool> {
    let Some(source) = copy.cached_from.as_deref() else {
        return Ok(false);
    };
    let same = |s: &RunRecord| s.tree == copy.tree && s.config_hash == copy.config_hash;
    let Some(body) = source_note else {
        return Ok(ctx.index.run_of_commit(source)?.is_some_and(|s| {
            s.record.snapshot
                && s.record.verified.as_ref().is_some_and(|v| v.here)
                && same(&s.record)
        }));
    };
    Ok(match note::decode(&body, source, &ctx.judge()?) {
        NoteRecord::Found(s) => s.is_evidence() && s.cached_from.is_none() && same(&s),
        _ => false,
    })
}
