//! A branch's page: its last commits (50 unless asked) as charts a person reads at a glance —
//! test time, passed and failed tests, coverage — one column per commit, oldest on the left,
//! and below them the same commits as a table, newest first, which is the charts' numbers.

use super::chart::{self, Chart, Column, Mark};
use super::commits::{table, Row};
use super::*;
use crate::app::records::{commits, history::Entry};
use crate::app::Repo;
use axum::extract::{Path, Query};
use gs_model::Status;

#[derive(Deserialize)]
pub struct BranchQuery {
    limit: Option<usize>,
}

/// Commits a branch's page shows unless asked.
const LAST: usize = 50;

pub async fn branch_page(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    q: Result<Query<BranchQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let Ok(Query(q)) = q else {
        return error_page(
            Some(&caller),
            ApiError::bad_request("limit must be a whole number")
                .hint(format!("for example ?limit={LAST}")),
        );
    };
    let limit = q.limit.unwrap_or(LAST);
    let wanted = name.clone();
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let branch =
            commits::of_branch(Repo::new(ctx, &repo, &row), &wanted, limit)?.ok_or_else(|| {
                ApiError::not_found(format!("{} has no branch {wanted:?}", row.name)).hint(format!(
                    "the commits page, /r/{}/commits, links the branches runs were made on",
                    row.name
                ))
            })?;
        let branches = commits::branch_names(&repo)?;
        Ok((row, branch, branches))
    })
    .await;
    let (row, branch, branches) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(&caller), e),
    };
    // The charts run oldest to newest, as time does; the table newest first, as `log` does.
    let oldest_first: Vec<&Entry> = branch.commits.iter().rev().collect();
    let columns: Vec<Column> = oldest_first
        .iter()
        .map(|e| Column {
            commit: e.commit.clone(),
            href: format!("/c/{}/{}", row.name, e.commit),
            tip: tip(e),
        })
        .collect();
    let rows: Vec<Row> = branch
        .commits
        .iter()
        .map(|e| Row {
            commit: &e.commit,
            summary: Some(&e.summary),
            record: e.result.as_ref(),
            job: e.job,
        })
        .collect();
    let coverage = oldest_first.iter().any(|e| coverage_of(e).is_some());
    let body = html! {
        h1 { a href=(format!("/r/{}", row.name)) { (row.name) } " · " span.mono { (name) } }
        p.muted {
            @if branch.commits.len() == 1 { "The last commit of " } @else { "The last " (branch.commits.len()) " commits of " }
            code { (name) } ", as " code { "git log " (name) } " walks them. "
            "In the charts the oldest is on the left; point at a column for its numbers, click it for the commit. "
            a href=(format!("/r/{}/commits", row.name)) { "every commit's result" }
        }
        @if let Some(w) = &branch.warning { div.flash.bad { (w) } }
        @if branch.commits.is_empty() {
            p.muted { "No commits." }
        } @else {
            p #totals { (totals(&oldest_first)) }
            div.charts {
                (chart::render(&time_chart(&columns, &oldest_first)))
                (chart::render(&tests_chart(&columns, &oldest_first)))
                @if coverage {
                    (chart::render(&coverage_chart(&columns, &oldest_first)))
                } @else {
                    figure.chart #coverage {
                        figcaption { "Coverage" }
                        p.muted { "No commit here reported coverage. A check that writes a coverage.py, Cobertura or lcov report (or "
                            code { "[test] coverage" } " naming it) gives one." }
                    }
                }
            }
            h2 { "Commits, newest first" }
            (table("branch-commits", &row.name, &rows, &branches, coverage))
        }
    };
    layout(&format!("{} {name}", row.name), Some(&caller), body).into_response()
}

/// How the commits fared, in a line: how many passed, failed, were not run.
fn totals(entries: &[&Entry]) -> String {
    let count = |f: &dyn Fn(&Entry) -> bool| entries.iter().filter(|e| f(e)).count();
    let passed = count(&|e| e.result.as_ref().is_some_and(|r| r.status.is_success()));
    let not_run = count(&|e| e.result.is_none());
    let other = entries.len() - passed - not_run;
    let n = entries.len();
    format!(
        "{n} commit{}: {passed} passed, {other} did not pass, {not_run} not run",
        if n == 1 { "" } else { "s" }
    )
}

/// A column's tooltip: the commit, its subject and its numbers, a line each.
fn tip(e: &Entry) -> String {
    let head = format!("{} {}", short(&e.commit), e.summary);
    let Some(r) = &e.result else {
        return format!("{head}\n{}", e.job.unwrap_or("not run"));
    };
    let mut lines = vec![
        head,
        format!(
            "{} in {}",
            if r.no_tests() {
                "no tests".to_string()
            } else {
                words::status(r.status.as_str())
            },
            duration_text(r.duration_ms)
        ),
    ];
    if let Some(t) = &r.tests {
        lines.push(format!(
            "{} passed, {} failed",
            t.passed.unwrap_or(0),
            t.failed.unwrap_or(0)
        ));
    }
    if let Some(c) = &r.coverage {
        lines.push(format!("coverage {:.1}%", c.percent));
    }
    lines.join("\n")
}

/// The class a run's bar is coloured by.
fn class_of(e: &Entry) -> &'static str {
    match &e.result {
        None => "none",
        Some(r) if r.no_tests() => "none",
        Some(r) => match r.status {
            Status::Passed => "passed",
            Status::Failed | Status::Timeout | Status::Killed => "failed",
            Status::Error => "error",
            Status::Skipped | Status::Unknown => "none",
        },
    }
}

fn time_chart<'a>(columns: &'a [Column], entries: &[&Entry]) -> Chart<'a> {
    let ms: Vec<Option<u64>> = entries
        .iter()
        .map(|e| e.result.as_ref().map(|r| r.duration_ms))
        .collect();
    let longest = ms.iter().flatten().copied().max().unwrap_or(0);
    let shortest = ms.iter().flatten().copied().min().unwrap_or(0);
    let newest = ms.last().copied().flatten();
    Chart {
        id: "time",
        caption: "Test time",
        top: duration_text(longest),
        bottom: "0".into(),
        summary: format!(
            "How long each of the {} commits took to test, oldest to newest: from {} to {}{}. Green passed, red failed.",
            entries.len(),
            duration_text(shortest),
            duration_text(longest),
            newest.map_or(String::new(), |n| format!("; the newest took {}", duration_text(n)))
        ),
        columns,
        marks: entries
            .iter()
            .zip(&ms)
            .map(|(e, ms)| {
                vec![Mark::Bar {
                    from: 0.0,
                    to: ms.map_or(0.0, |ms| ms as f64 / longest.max(1) as f64),
                    class: class_of(e),
                }]
            })
            .collect(),
    }
}

fn tests_chart<'a>(columns: &'a [Column], entries: &[&Entry]) -> Chart<'a> {
    let counts: Vec<Option<(u64, u64)>> = entries
        .iter()
        .map(|e| {
            let t = e.result.as_ref()?.tests.as_ref()?;
            Some((t.passed.unwrap_or(0), t.failed.unwrap_or(0)))
        })
        .collect();
    let most = counts
        .iter()
        .flatten()
        .map(|(p, f)| p + f)
        .max()
        .unwrap_or(0);
    let scale = |n: u64| n as f64 / most.max(1) as f64;
    let newest = counts.last().copied().flatten();
    Chart {
        id: "tests",
        caption: "Tests passed and failed",
        top: format!("{most} tests"),
        bottom: "0".into(),
        summary: format!(
            "Passed (green) and failed (red) tests of each of the {} commits, oldest to newest, at most {most}{}.",
            entries.len(),
            newest.map_or(String::new(), |(p, f)| format!(
                "; the newest: {p} passed, {f} failed"
            ))
        ),
        columns,
        marks: counts
            .iter()
            .map(|c| match c {
                Some((p, f)) => {
                    let mut marks = vec![Mark::Bar {
                        from: 0.0,
                        to: scale(*p),
                        class: "passed",
                    }];
                    if *f > 0 {
                        marks.push(Mark::Bar {
                            from: scale(*p),
                            to: scale(p + f),
                            class: "failed",
                        });
                    }
                    marks
                }
                None => vec![Mark::Bar {
                    from: 0.0,
                    to: 0.0,
                    class: "none",
                }],
            })
            .collect(),
    }
}

fn coverage_of(e: &Entry) -> Option<f64> {
    e.result.as_ref()?.coverage.as_ref().map(|c| c.percent)
}

fn coverage_chart<'a>(columns: &'a [Column], entries: &[&Entry]) -> Chart<'a> {
    let values: Vec<Option<f64>> = entries.iter().map(|e| coverage_of(e)).collect();
    let (lo, hi) = span(values.iter().flatten().copied());
    let newest = values.iter().rev().flatten().next();
    Chart {
        id: "coverage",
        caption: "Coverage",
        top: format!("{hi:.0}%"),
        bottom: format!("{lo:.0}%"),
        summary: format!(
            "Line coverage of the {} of {} commits that reported it, oldest to newest, between {lo:.0}% and {hi:.0}%{}.",
            values.iter().flatten().count(),
            entries.len(),
            newest.map_or(String::new(), |n| format!("; the newest reported {n:.1}%"))
        ),
        columns,
        marks: values
            .iter()
            .map(|v| {
                v.map(|v| Mark::Point {
                    at: (v - lo) / (hi - lo),
                })
                .into_iter()
                .collect()
            })
            .collect(),
    }
}

/// The vertical range a coverage chart shows: the values' with a little room, on whole
/// percents, within 0 to 100 and at least 10 points high, so a change of a tenth shows and a
/// steady line sits in the middle rather than on an edge.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.0, 100.0);
    }
    lo = (lo - 1.0).floor().max(0.0);
    hi = (hi + 1.0).ceil().min(100.0);
    if hi - lo < 10.0 {
        lo = ((lo + hi) / 2.0 - 5.0).floor().max(0.0);
        hi = (lo + 10.0).min(100.0);
        lo = hi - 10.0;
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn the_coverage_scale_holds_every_value_with_room() {
        assert_eq!(span([60.0, 100.0].into_iter()), (59.0, 100.0));
        assert_eq!(span([82.4].into_iter()), (77.0, 87.0));
        assert_eq!(span([0.0].into_iter()), (0.0, 10.0));
        assert_eq!(span([99.5].into_iter()), (90.0, 100.0));
        assert_eq!(span(std::iter::empty()), (0.0, 100.0));
    }
}
