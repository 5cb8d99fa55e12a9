//! The start page: repositories with their trend, what runs now, the daemons and the live feed.

use super::*;
use crate::app::records::views;
use axum::extract::Query;

/// The kind of event a daemon writes every 30 s: most of the log, little to read.
const HEARTBEAT: &str = "daemon.heartbeat";

#[derive(Deserialize)]
pub struct HomeQuery {
    /// `1` shows the daemons' heartbeats in the feed too.
    heartbeats: Option<String>,
}

pub async fn home(State(web): St, headers: HeaderMap, Query(q): Query<HomeQuery>) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let heartbeats = q.heartbeats.as_deref() == Some("1");
    let data = blocking(move |ctx| {
        let stats = views::repositories(ctx)?;
        let mut trends = Vec::new();
        let mut production = Vec::new();
        for s in &stats {
            let runs = views::runs(ctx, Some(&s.repo.repository_id), None, None, 30)?;
            trends.push(runs.into_iter().map(|(_, _, r)| r).collect::<Vec<_>>());
            production.push(production_branch(ctx, &s.repo.repository_id));
        }
        let running = views::running(ctx)?;
        let daemons = crate::app::repo::daemons::list(ctx)?;
        let (queued, _) = views::queue_depth(ctx)?;
        let events = views::events(
            ctx,
            &gs_store::EventFilter {
                limit: Some(40),
                not_kind: (!heartbeats).then(|| HEARTBEAT.to_string()),
                ..Default::default()
            },
        )?;
        Ok((stats, trends, production, running, queued, events, daemons))
    })
    .await;
    let (stats, trends, production, running, queued, events, daemons) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(&caller), e),
    };
    let name_of = |id: &str| {
        stats
            .iter()
            .find(|s| s.repo.repository_id == id)
            .map_or(id.to_string(), |s| s.repo.name.clone())
    };
    let since = events.last().map_or(0, |e| e.id);
    let body = html! {
        h1 { "Repositories" }
        @if stats.is_empty() {
            p.muted { "No experiment repositories yet: create one with " code { "git sandbox new" } "." }
        } @else {
            div.card.scroll {
                table.stack {
                    thead { tr { th { "repository" } th { "production" } th.num { "runs" } th.num { "passed" } th { "last runs" } th.num { "pending" } th { "activity" } } }
                    tbody {
                        @for ((s, runs), target) in stats.iter().zip(&trends).zip(&production) {
                            tr {
                                td.name data-label="repository" { a href=(format!("/r/{}", s.repo.name)) { (s.repo.name) } }
                                td.mono data-label="production" {
                                    @match target {
                                        Some(t) => a href=(branch_href(&s.repo.name, t)) title="its last commits in a chart" { (t) },
                                        None => span.muted { "-" },
                                    }
                                }
                                td.num data-label="runs" { (s.runs) }
                                td.num data-label="passed" {
                                    @if s.runs > 0 { (format!("{:.0}%", s.passed_runs as f64 * 100.0 / s.runs as f64)) } @else { "-" }
                                }
                                td data-label="last runs" { (sparkline(runs)) }
                                td.num data-label="pending" { (s.pending_jobs) }
                                td.muted data-label="activity" { @match &s.repo.last_activity { Some(t) => (when(t, true)), None => "-" } }
                            }
                        }
                    }
                }
            }
        }
        div.grid {
            div.card {
                h2 { "Running now" }
                @if running.is_empty() { p.muted { "Nothing runs; " (queued) " queued." } }
                @else {
                    ul {
                        @for j in &running {
                            @let repo = name_of(&j.repository_id);
                            li {
                                a.mono href=(format!("/c/{repo}/{}", j.commit_id)) { (short(&j.commit_id)) }
                                " in " (repo)
                                @if let Some(b) = j.refname.as_deref().and_then(|r| r.strip_prefix("refs/heads/")) {
                                    " on " a.mono href=(branch_href(&repo, b)) { (b) }
                                }
                                " (started " (words::trigger(&j.trigger)) ")"
                            }
                        }
                    }
                    p.muted { (queued) " more queued." }
                }
                h2 { "Daemons" }
                ul #daemons {
                    @for d in daemons.iter().filter(|d| d.state != "stopped").take(10) {
                        li {
                            span class=(if d.state == "running" { "pass" } else { "fail" }) { (d.state) }
                            " " (d.row.host) " pid " (d.row.pid) " · " (d.row.busy_workers) "/" (d.row.workers) " workers busy · heartbeat "
                            span.muted { (when(&d.row.heartbeat_at, false)) }
                        }
                    }
                }
            }
            div.card {
                h2 { "Activity" }
                p.muted {
                    @if heartbeats { "With the daemons' heartbeats · " a href="/" { "leave them out" } }
                    @else { "Without the daemons' heartbeats · " a href="/?heartbeats=1" { "show them" } }
                }
                ul #feed data-since=(since) data-heartbeats=(if heartbeats { "1" } else { "0" }) {
                    @for e in events.iter().rev() {
                        li data-id=(e.id) {
                            (when(&e.time, false)) " " span.kind title=(e.kind) { (words::event(&e.kind)) }
                            @if let Some(r) = &e.repository { " · " (r) }
                            @if let Some(c) = &e.commit {
                                " · " a.mono href=(format!("/c/{}/{c}", e.repository.as_deref().or(e.repository_id.as_deref()).unwrap_or(""))) { (short(c)) }
                            }
                            @if let Some(s) = e.data.get("status").and_then(|s| s.as_str()) { " " span class=(s) { (words::status(s)) } }
                            @if let Some(t) = e.data.get("test").and_then(|s| s.as_str()) { " " span.failed.mono { (t) } }
                            @if e.data.get("withdrawn").and_then(|w| w.as_bool()) == Some(true) { " (withdrawn: the run did not fail it)" }
                        }
                    }
                }
            }
        }
    };
    layout("home", Some(&caller), body).into_response()
}

/// The production branch of a registered repository (`[promote] target`), when this machine
/// has the repository and the branch is there to show.
fn production_branch(ctx: &crate::app::Context, id: &str) -> Option<String> {
    let (repo, _) = repository(ctx, id).ok()?;
    let config = crate::app::experiment::experiments::production_config(ctx, &repo).ok()?;
    let target = config.promote.target;
    crate::app::records::commits::branch_names(&repo)
        .ok()?
        .contains(&target)
        .then_some(target)
}
