//! A repository's commits with their results, newest first, a page at a time; each opens the
//! commit's page. The table of commits is the branch page's too.

use super::*;
use crate::app::records::commits;
use crate::app::Repo;
use axum::extract::{Path, Query};
use gs_util::time::duration_text;
use std::collections::HashSet;

#[derive(Deserialize)]
pub struct CommitsQuery {
    /// The cursor of an older page: commits indexed before this run id.
    before: Option<i64>,
    limit: Option<usize>,
}

/// Commits a page shows unless asked.
const PAGE: usize = 50;

pub async fn commits_page(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
    q: Result<Query<CommitsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let Ok(Query(q)) = q else {
        return error_page(
            Some(&caller),
            ApiError::bad_request("before and limit must be whole numbers")
                .hint(format!("for example ?limit={PAGE}")),
        );
    };
    let limit = q.limit.unwrap_or(PAGE);
    let before = q.before;
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let page = commits::page(Repo::new(ctx, &repo, &row), before, limit)?;
        let branches = commits::branch_names(&repo)?;
        Ok((row, page, branches))
    })
    .await;
    let (row, page, branches) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(&caller), e),
    };
    let link = |before: Option<i64>| {
        let mut u = format!("/r/{}/commits", row.name);
        let mut args = Vec::new();
        if let Some(b) = before {
            args.push(format!("before={b}"));
        }
        if limit != PAGE {
            args.push(format!("limit={limit}"));
        }
        if !args.is_empty() {
            u.push('?');
            u.push_str(&args.join("&"));
        }
        u
    };
    let body = html! {
        h1 { a href=(format!("/r/{}", row.name)) { (row.name) } " · commits" }
        p.muted { "Every commit with a result, newest first." }
        @if page.commits.is_empty() {
            p.muted { "No results yet: " code { "git sandbox run" } " runs the current branch's new commits." }
        } @else {
            @let rows: Vec<Row> = page.commits.iter().map(|c| Row {
                commit: &c.record.commit,
                summary: c.summary.as_deref(),
                record: Some(&c.record),
                job: None,
            }).collect();
            (table("commits", &row.name, &rows, &branches, false))
            div.pager {
                @if before.is_some() { a #newest href=(link(None)) { "← newest" } }
                @if let Some(o) = page.older { a #older href=(link(Some(o))) { "older →" } }
            }
        }
    };
    layout(&format!("{} commits", row.name), Some(&caller), body).into_response()
}

/// One row of a table of commits.
pub struct Row<'a> {
    pub commit: &'a str,
    pub summary: Option<&'a str>,
    pub record: Option<&'a RunRecord>,
    /// For a commit without a result: `queued` or `running` when it has a job.
    pub job: Option<&'a str>,
}

/// Commits with their results. At a desk's width the subject gives way (cut with an ellipsis,
/// whole in its tooltip) and below it the finish time goes; on a phone each row is a card.
pub fn table(
    id: &str,
    repo: &str,
    rows: &[Row],
    branches: &HashSet<String>,
    coverage: bool,
) -> Markup {
    html! {
        div.card.scroll {
            table.stack.commits id=(id) {
                thead { tr {
                    th { "commit" } th { "result" } th { "tests" }
                    @if coverage { th.num { "coverage" } }
                    th.num { "duration" } th { "ref" } th.wide { "finished" }
                } }
                tbody {
                    @for c in rows {
                        tr {
                            td.subject data-label="commit" title=(c.summary.unwrap_or("")) {
                                a.mono href=(format!("/c/{repo}/{}", c.commit)) { (short(c.commit)) }
                                " " (c.summary.unwrap_or(""))
                            }
                            @match c.record {
                                Some(r) => {
                                    td.result data-label="result" {
                                        (status_cell(Some(r)))
                                        @if let Some(from) = &r.cached_from {
                                            " " span.note.muted title=(format!("same tree and config as {from}")) { "served from an earlier run" }
                                        }
                                    }
                                    td data-label="tests" {
                                        @if let Some(t) = &r.tests {
                                            span.pass { (t.passed.unwrap_or(0)) " passed" } " · "
                                            // Red only when something failed.
                                            @let failed = t.failed.unwrap_or(0);
                                            span class=(if failed > 0 { "fail" } else { "muted" }) { (failed) " failed" }
                                        } @else { span.muted { "-" } }
                                    }
                                    @if coverage {
                                        td.num data-label="coverage" {
                                            @match &r.coverage { Some(c) => (format!("{:.1}%", c.percent)), None => span.muted { "-" } }
                                        }
                                    }
                                    td.num data-label="duration" { (duration_text(r.duration_ms)) }
                                    td.ref data-label="ref" { (ref_cell(repo, r, branches)) }
                                    td.wide data-label="finished" { (when(&r.finished_at, true)) }
                                }
                                None => {
                                    td.result data-label="result" { span.muted { "· " (c.job.unwrap_or("not run")) } }
                                    td data-label="tests" { span.muted { "-" } }
                                    @if coverage { td.num data-label="coverage" { span.muted { "-" } } }
                                    td.num data-label="duration" { span.muted { "-" } }
                                    td.ref data-label="ref" { span.muted { "-" } }
                                    td.wide data-label="finished" { span.muted { "-" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The branch a run was made for, opening the branch's page while it is one. A record that
/// names none was a run of commits no branch it was given holds (commit ids, a range ending at
/// no watched branch, `--all`) or of work not committed: said so, not guessed from today's
/// branches, which may hold the commit without the run having had their config or caches.
pub fn ref_cell(repo: &str, r: &RunRecord, branches: &HashSet<String>) -> Markup {
    match r.refname.as_deref() {
        Some(full) => match full.strip_prefix("refs/heads/") {
            Some(name) if branches.contains(name) => {
                html! { a.mono href=(branch_href(repo, name)) title=(format!("{name}: its last commits in a chart")) { (name) } }
            }
            Some(name) => html! { span.mono title=(format!("{full}: no branch now")) { (name) } },
            None => {
                html! { span.mono title=(full) { (full.strip_prefix("refs/").unwrap_or(full)) } }
            }
        },
        None if r.snapshot => {
            html! { span.muted title="a run of work not committed (run --staged or --worktree): no branch" { "work tree" } }
        }
        None => html! {
            span.muted title="run of a range or of commit ids that no watched branch holds (or with --all): its record names no branch" { "—" }
        },
    }
}
