//! Our notes refs and a remote's: which refs travel and how a remote's merge into ours, and
//! taking a remote's notes in (checked by [`crate::app::publish::bounds`] first, then merged and indexed).
//! Both a fetch and a push whose notes the remote moved take them in.

use crate::app::{publish::bounds, Context, Repo, Result};
use gs_git as git;
use gs_git::remote;
use gs_git::ObjectId;
use gs_model::{note, Evaluation, NoteRecord};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// Our notes refs, each with the strategy that merges a remote's into it: records are one line
/// each (every machine's is kept; readers take the newest); a summary or an evaluation is one
/// document, ours kept on a conflict (summaries are then written again from the merged record).
pub const NOTES: [(&str, &str); 3] = [
    (git::NOTES_REF, "cat_sort_uniq"),
    (git::SUMMARY_NOTES_REF, "ours"),
    (git::EVAL_NOTES_REF, "ours"),
];

/// Where each machine's records are on the remote, one ref per home.
pub const WRITERS_PREFIX: &str = "refs/notes/sandbox-by/";

#[derive(Debug, Serialize)]
pub struct Rejected {
    #[serde(rename = "ref")]
    pub name: String,
    pub reason: String,
}

pub fn rejected(updates: &[remote::RefUpdate]) -> Vec<Rejected> {
    updates
        .iter()
        .filter(|u| u.rejected())
        .map(|u| Rejected {
            name: u.name.clone(),
            reason: u.summary.clone(),
        })
        .collect()
}

/// The remote ref this home pushes its records through on a shared index.
pub fn writer_ref(ctx: &Context) -> String {
    format!(
        "{WRITERS_PREFIX}{}",
        crate::app::home::home_id(&ctx.paths.home)
    )
}

/// Check the remote's notes (already fetched beside ours), merge them into ours, write the
/// summaries of the records that changed again, and index the records and evaluations that
/// arrived. Returns the notes refs that moved, how many results arrived or changed, and the
/// records not indexed. Notes over the bounds refuse it all, ours unchanged.
pub fn take_in(
    at: Repo<'_>,
    dir: &Path,
    name: &str,
) -> Result<(Vec<String>, usize, bounds::NotIndexed)> {
    let Repo { ctx, repo, row } = at;
    let before: Vec<HashMap<ObjectId, ObjectId>> = NOTES
        .iter()
        .map(|(r, _)| git::notes::all_notes(repo, r))
        .collect::<std::result::Result<_, _>>()?;
    let mut plan = Vec::new();
    for (ours, strategy) in NOTES {
        let mut theirs = vec![format!(
            "{}{}",
            remote::tracking_prefix(name),
            ours.trim_start_matches("refs/notes/")
        )];
        // Every machine's records, each through its own ref (see `notes_specs`).
        if ours == git::NOTES_REF {
            theirs.extend(git::cli::list_refs(
                dir,
                &format!(
                    "{}{}",
                    remote::tracking_prefix(name),
                    WRITERS_PREFIX.trim_start_matches("refs/notes/")
                ),
            )?);
        }
        plan.push((ours, strategy, theirs));
    }
    let pairs: Vec<(&str, String)> = plan
        .iter()
        .flat_map(|(ours, _, theirs)| theirs.iter().map(|t| (*ours, t.clone())))
        .collect();
    bounds::check_incoming(repo, dir, name, &pairs)?;
    let mut merged = Vec::new();
    for (ours, strategy, theirs) in plan {
        let mut moved = false;
        for t in &theirs {
            moved |= remote::merge_notes(dir, ours, t, strategy)?;
        }
        if moved {
            merged.push(ours.to_string());
        }
    }
    let mut not_indexed = bounds::NotIndexed::default();
    if merged.is_empty() {
        return Ok((merged, 0, not_indexed));
    }
    let changed = |i: usize| -> Result<Vec<(ObjectId, ObjectId)>> {
        Ok(git::notes::all_notes(repo, NOTES[i].0)?
            .into_iter()
            .filter(|(c, b)| before[i].get(c) != Some(b))
            .collect())
    };
    let mut results = 0;
    let mut summaries = Vec::new();
    let summary_now = git::notes::all_notes(repo, git::SUMMARY_NOTES_REF)?;
    let judge = ctx.judge()?;
    for (commit, blob) in changed(0)? {
        if !bounds::has_commit(repo, commit) {
            not_indexed.missing_commit += 1;
            continue;
        }
        let Ok(body) = git::notes::read_blob(repo, blob) else {
            continue;
        };
        let (found, future) = note::decode_counted(&body, &commit.to_string(), &judge);
        not_indexed.future_dated += future;
        if let NoteRecord::Found(r) = found {
            ctx.index.put_run(&row.repository_id, &r)?;
            results += 1;
        }
    }
    if results > 0 {
        // A copy a remote brought is worth what its source is worth here.
        ctx.index.demote_unbacked_copies(&row.repository_id)?;
    }
    // Summaries (what plain `git log` shows) are written again from the merged records for every
    // commit whose record or summary the merge changed: a remote's summary is never taken as
    // it came. Evidence gets its summary, a report says who reported it, and a commit with no
    // record here says so.
    let mut touched: Vec<ObjectId> = changed(0)?.into_iter().map(|(c, _)| c).collect();
    touched.extend(changed(1)?.into_iter().map(|(c, _)| c));
    touched.sort();
    touched.dedup();
    let records_now = git::notes::all_notes(repo, git::NOTES_REF)?;
    for commit in touched {
        let found = records_now
            .get(&commit)
            .and_then(|b| git::notes::read_blob(repo, *b).ok())
            .map(|body| note::decode(&body, &commit.to_string(), &judge));
        let summary = match found {
            Some(NoteRecord::Found(mut r)) => {
                // A copy is worth what its source is worth here.
                if r.is_evidence() && r.cached_from.is_some() {
                    let source = r
                        .cached_from
                        .as_deref()
                        .and_then(|c| ObjectId::from_hex(c.as_bytes()).ok())
                        .and_then(|s| records_now.get(&s))
                        .and_then(|b| git::notes::read_blob(repo, *b).ok());
                    if !bounds::backs(ctx, &r, source)? {
                        r.verified = None;
                    }
                }
                match r.is_evidence() {
                    true => note::summary(&r),
                    false => note::report_summary(&r),
                }
            }
            _ => note::NO_RESULT_SUMMARY.to_vec(),
        };
        let current = summary_now
            .get(&commit)
            .and_then(|b| git::notes::read_blob(repo, *b).ok());
        if current.as_deref() != Some(summary.as_slice()) {
            summaries.push((commit, summary));
        }
    }
    if !summaries.is_empty() {
        git::notes::write_notes(
            repo,
            git::SUMMARY_NOTES_REF,
            &summaries,
            &format!("git-sandbox: summaries of results from {name}"),
        )?;
    }
    for (head, blob) in changed(2)? {
        let Ok(body) = git::notes::read_blob(repo, blob) else {
            continue;
        };
        if let Ok(ev) = serde_json::from_slice::<Evaluation>(&body) {
            if ev.head.commit == head {
                ctx.index.put_evaluation(&row.repository_id, &ev)?;
            }
        }
    }
    Ok((merged, results, not_indexed))
}
