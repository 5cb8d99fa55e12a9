//! A history's commits with their results, as `log` lists them and a branch's page charts them:
//! this machine's first-hand runs from the index while the notes are as it holds them, every
//! other commit's from its note (see [`results`]); and a commit's patch.

use super::results::{self, NoteReader};
use crate::app::{Context, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_model::{Attempt, NoteRecord, RunRecord};
use gs_store::RepoRow;

/// A commit of a history with its result.
#[derive(Debug, serde::Serialize)]
pub struct Entry {
    pub commit: String,
    pub summary: String,
    /// The commit's result: evidence only; when the commit has none of its own, a result of
    /// the same tree made under its config (marked `cached_from`), as `show` finds it.
    pub result: Option<RunRecord>,
    /// The runs since the result that could not run its tests here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub could_not_run_here: Option<Attempt>,
    /// A record nobody this machine trusts signed, when that is all its note holds: somebody's
    /// report, not a result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<RunRecord>,
    /// For a commit without a result: `queued` or `running`, when it has a job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<&'static str>,
}

/// The attempts kept beside each of `results` (runs of its commit and tree since it that could
/// not run their tests here): the newest, with how many, by commit. Times compare as the
/// records write them (RFC 3339, UTC, milliseconds).
pub fn attempts_beside(
    ctx: &Context,
    row: &RepoRow,
    results: &[&RunRecord],
) -> Result<std::collections::HashMap<String, Attempt>> {
    let commits: Vec<&str> = results.iter().map(|r| r.commit.as_str()).collect();
    let mut out = std::collections::HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let by_commit: std::collections::HashMap<&str, &RunRecord> =
        results.iter().map(|r| (r.commit.as_str(), *r)).collect();
    for a in ctx.index.attempts_of(&row.repository_id, &commits)? {
        // Only those of its tree made since it (a newer result, fetched or read back, is news).
        let since = by_commit
            .get(a.commit.as_str())
            .is_some_and(|r| r.tree == a.tree && a.finished_at >= r.finished_at);
        if !since {
            continue;
        }
        let count = out.get(&a.commit).map_or(0, |b: &Attempt| b.attempts);
        out.insert(
            a.commit.clone(),
            Attempt {
                reason: a.reason,
                finished_at: a.finished_at,
                trigger: a.trigger,
                attempts: count + 1,
            },
        );
    }
    Ok(out)
}

/// The history of `revs` (as `git log` takes them; `all`: every watched branch), newest first,
/// at most `max_count` commits, each with the record made for it; and a warning when notes were
/// unreadable.
pub fn history(
    at: Repo<'_>,
    revs: &[String],
    all: bool,
    max_count: usize,
) -> Result<(Vec<Entry>, Option<String>)> {
    let Repo { ctx, repo, row } = at;
    let walk = git::revs::Walk {
        oldest_first: false,
        max_count: Some(max_count),
        plain_means_listed: false,
    };
    let commits = crate::app::select::commits(ctx, repo, revs, all, walk)?;
    let mut standing = rows_standing_for_notes(at, &commits)?;
    let unread: Vec<ObjectId> = commits
        .iter()
        .copied()
        .filter(|c| !standing.contains_key(c))
        .collect();
    // The notes are opened only when some are to be read.
    let mut reader = None;
    let mut notes: std::collections::HashMap<ObjectId, Option<NoteRecord>> = if unread.is_empty() {
        Default::default()
    } else {
        let r = reader.insert(NoteReader::new(repo)?);
        unread
            .iter()
            .copied()
            .zip(r.read_many(ctx, repo, &unread)?)
            .collect()
    };
    let mut entries = Vec::with_capacity(commits.len());
    for c in commits {
        let info = git::commit_info(repo, c)?;
        let own = match standing.remove(&c) {
            Some(r) => Some(r),
            None => results::own_from(at, notes.remove(&c).flatten(), c)?,
        };
        let (result, reported) = match own {
            Some(r) if !r.is_evidence() => (None, Some(r)),
            Some(r) => (Some(r), None),
            // As `show` does: a result of the same tree under the commit's config serves it.
            None => (results::tree_result(at, c)?, None),
        };
        entries.push(Entry {
            commit: c.to_string(),
            summary: info.summary,
            result,
            could_not_run_here: None,
            reported,
            job: None,
        });
    }
    let results: Vec<&RunRecord> = entries.iter().filter_map(|e| e.result.as_ref()).collect();
    let mut attempts = attempts_beside(ctx, row, &results)?;
    let unrun: Vec<&str> = entries
        .iter()
        .filter(|e| e.result.is_none())
        .map(|e| e.commit.as_str())
        .collect();
    let jobs = if unrun.is_empty() {
        Default::default()
    } else {
        ctx.index.open_jobs(&row.repository_id, &unrun)?
    };
    for e in &mut entries {
        e.could_not_run_here = attempts.remove(&e.commit);
        e.job = jobs.get(&e.commit).map(|s| match s.as_str() {
            "running" => "running",
            _ => "queued",
        });
    }
    Ok((entries, reader.and_then(|r| r.warning())))
}

/// The patch of `commit` against its first parent (the whole tree for a root commit), as git
/// prints it, cut at `max_bytes` (then `true`).
pub fn patch(
    repo: &gs_git::Repository,
    commit: ObjectId,
    max_bytes: usize,
) -> Result<(String, bool)> {
    let dir = gs_git::repo_root(repo);
    let info = git::commit_info(repo, commit)?;
    let hex = commit.to_string();
    let text = match info.parents.first() {
        Some(p) => git::cli::git(
            &dir,
            &[
                "diff",
                "--no-color",
                "--no-ext-diff",
                "-M",
                &p.to_string(),
                &hex,
            ],
        )?,
        None => git::cli::git(
            &dir,
            &[
                "diff-tree",
                "-p",
                "--root",
                "--no-color",
                "--no-ext-diff",
                &hex,
            ],
        )?,
    };
    if text.len() <= max_bytes {
        return Ok((text, false));
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok((text[..cut].to_string(), true))
}

/// The index's run rows of `commits` that stand for their notes without reading them: the
/// index holds every note of the notes ref as it is now (its notes tip is the ref's tip, see
/// [`gs_store::Index::advance_notes_tip`]), and the row is a first-hand record signed with this
/// machine's key (another signer's trust is judged today, from its note; a copy is worth what
/// its source is worth today). What a note would say of the others is read from it.
fn rows_standing_for_notes(
    at: Repo<'_>,
    commits: &[ObjectId],
) -> Result<std::collections::HashMap<ObjectId, RunRecord>> {
    let Repo { ctx, repo, row } = at;
    let mut out = std::collections::HashMap::new();
    // The id the ref holds, no object read: the index's tip is always a notes commit.
    let Some(tip) = git::objects::ref_target(repo, git::NOTES_REF) else {
        return Ok(out);
    };
    if commits.is_empty() || ctx.index.notes_tip(&row.repository_id)? != Some(tip.to_string()) {
        return Ok(out);
    }
    let own = ctx.keys()?.fingerprint();
    let hex: Vec<String> = commits.iter().map(ObjectId::to_string).collect();
    let refs: Vec<&str> = hex.iter().map(String::as_str).collect();
    for (commit, run) in ctx.index.runs_for_commits(&row.repository_id, &refs)? {
        let r = run.record;
        let first_hand = r.commit == commit
            && r.cached_from.is_none()
            && !r.snapshot
            && r.verified.as_ref().is_some_and(|v| v.here && v.key == own);
        if let (true, Ok(id)) = (first_hand, ObjectId::from_hex(commit.as_bytes())) {
            out.insert(id, r);
        }
    }
    Ok(out)
}
