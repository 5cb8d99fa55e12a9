//! A repository's commits as its index knows them (each with its result), newest first, a page
//! at a time. Keyset paging on the run id: a page is one range of the index however long the
//! history, and a commit indexed while someone pages moves nothing under them. And a branch's
//! newest commits, as `log` walks them, for its page.

use crate::app::{AppError, Repo, Result};
use gs_git::ObjectId;
use gs_model::RunRecord;

/// The most commits one page shows.
pub const MAX_PAGE: usize = 200;

#[derive(Debug, Clone)]
pub struct Commit {
    /// The index's run id: the cursor of the next page.
    pub run_id: i64,
    pub record: RunRecord,
    /// Its message's first line, while git still has the commit.
    pub summary: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Page {
    pub commits: Vec<Commit>,
    /// The cursor of the next, older page (`before`), when there is one.
    pub older: Option<i64>,
}

/// Up to `limit` commits with a result, newest first, those indexed before run `before`.
pub fn page(at: Repo<'_>, before: Option<i64>, limit: usize) -> Result<Page> {
    let Repo { ctx, repo, row } = at;
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AppError::usage(format!(
            "limit must be between 1 and {MAX_PAGE}, not {limit}"
        ))
        .hint("leave it out for 50 a page"));
    }
    // One more than shown says whether an older page exists.
    let mut rows = ctx
        .index
        .runs_before(&row.repository_id, before, limit + 1)?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let older = if more {
        rows.last().map(|r| r.id)
    } else {
        None
    };
    let commits = rows
        .into_iter()
        .map(|r| {
            let summary = ObjectId::from_hex(r.record.commit.as_bytes())
                .ok()
                .and_then(|id| gs_git::commit_info(repo, id).ok())
                .map(|i| i.summary);
            Commit {
                run_id: r.id,
                record: r.record,
                summary,
            }
        })
        .collect();
    Ok(Page { commits, older })
}

/// A branch's newest commits, each with its result.
#[derive(Debug)]
pub struct Branch {
    /// Newest first, as `git log BRANCH` walks them.
    pub commits: Vec<super::history::Entry>,
    /// When notes were unreadable.
    pub warning: Option<String>,
}

/// The newest `limit` commits of branch `name` (`main`, `experiment/x`) with their results, as
/// `git sandbox log -n LIMIT BRANCH` lists them; `None` when the repository has no such branch.
pub fn of_branch(at: Repo<'_>, name: &str, limit: usize) -> Result<Option<Branch>> {
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AppError::usage(format!(
            "limit must be between 1 and {MAX_PAGE}, not {limit}"
        ))
        .hint("leave it out for the last 50 commits"));
    }
    // The full name: a branch is never taken for a tag, a range or a commit id.
    let full = format!("refs/heads/{name}");
    if name.is_empty() || !gs_git::objects::has_ref(at.repo, &full) {
        return Ok(None);
    }
    let (commits, warning) = super::history::history(at, &[full], false, limit)?;
    Ok(Some(Branch { commits, warning }))
}

/// The repository's branches by name (`main`, `experiment/x`): those a page can link to.
pub fn branch_names(repo: &gs_git::Repository) -> Result<std::collections::HashSet<String>> {
    Ok(gs_git::branches(repo)?
        .into_iter()
        .map(|(name, _)| name)
        .collect())
}
