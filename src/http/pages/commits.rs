//! A repository's commits with their results, newest first, a page at a time; each opens the
//! commit's page.

use super::*;
use crate::app::records::commits;
use crate::app::Repo;
use axum::extract::{Path, Query};
use gs_util::time::duration_text;

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
        Ok((row, page))
    })
    .await;
    let (row, page) = match data {
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
            div.card.scroll {
                table.stack #commits {
                    thead { tr {
                        th { "commit" } th { "result" } th { "tests" } th.num { "duration" } th { "ref" } th { "finished" }
                    } }
                    tbody {
                        @for c in &page.commits {
                            @let r = &c.record;
                            tr {
                                td.name data-label="commit" {
                                    a.mono href=(format!("/c/{}/{}", row.name, r.commit)) { (short(&r.commit)) }
                                    " " (c.summary.as_deref().unwrap_or(""))
                                }
                                td data-label="result" {
                                    (status_cell(Some(r)))
                                    @if let Some(from) = &r.cached_from {
                                        " " span.muted title=(format!("same tree and config as {from}")) { "· served from an earlier run" }
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
                                td.num data-label="duration" { (duration_text(r.duration_ms)) }
                                td.mono data-label="ref" {
                                    (r.refname.as_deref().map_or("", |n| n.strip_prefix("refs/heads/").unwrap_or(n)))
                                }
                                td data-label="finished" { (when(&r.finished_at, true)) }
                            }
                        }
                    }
                }
            }
            div.pager {
                @if before.is_some() { a #newest href=(link(None)) { "← newest" } }
                @if let Some(o) = page.older { a #older href=(link(Some(o))) { "older →" } }
            }
        }
    };
    layout(&format!("{} commits", row.name), Some(&caller), body).into_response()
}
