//! The dashboard: server-rendered HTML (maud) with one stylesheet and one small script embedded
//! in the binary. Home (repositories, their trend, the queue, the live feed), a repository's
//! experiments ranked against production (promote and kill for admins), and a commit's page
//! (result, failures, the log paged and searchable, analysis against the parent, the patch).

use super::api::{commit_of, kill_now, promote_now};
use super::{blocking, repository, ApiError, ApiResult, Caller, Web, COOKIE};
use crate::app::tokens::{self, Role};
use crate::app::{compare, logs, metrics, results, AppError};
use crate::model::RunRecord;
use crate::util::short;
use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use std::sync::Arc;

type St = State<Arc<Web>>;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");

pub fn routes() -> Router<Arc<Web>> {
    Router::new()
        .route("/", get(home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/r/{repo}", get(repository_page))
        .route(
            "/r/{repo}/experiments/{name}/{action}",
            post(experiment_action),
        )
        .route("/c/{repo}/{sha}", get(commit_page))
        .route(
            "/assets/app.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS) }),
        )
        .route(
            "/assets/app.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    JS,
                )
            }),
        )
}

fn layout(title: &str, caller: Option<&Caller>, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    meta name="color-scheme" content="light dark";
                    title { (title) " · git-sandbox" }
                    link rel="stylesheet" href="/assets/app.css";
                }
                body {
                    header {
                        a.home href="/" { "git-sandbox" }
                        @if let Some(c) = caller {
                            span.who {
                                "signed in as " (c.token.name) " (" (c.token.role) ") "
                                form.inline method="post" action="/logout" { button type="submit" { "sign out" } }
                            }
                        }
                    }
                    main { (body) }
                    script src="/assets/app.js" {}
                }
            }
        }
        .into_string(),
    )
}

/// The signed-in caller, or a redirect to the login page.
fn signed_in(web: &Web, headers: &HeaderMap) -> Result<Caller, Box<Response>> {
    match web.require(headers, Role::Read, true) {
        Ok(c) => Ok(c),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            Err(Box::new(Redirect::to("/login").into_response()))
        }
        Err(e) => Err(Box::new(error_page(None, e))),
    }
}

fn error_page(caller: Option<&Caller>, e: ApiError) -> Response {
    let body = html! {
        h1 { "Something is wrong" }
        div.flash.bad {
            p { (e.error) }
            @for h in &e.hints { p.muted { (h) } }
        }
        p { a href="/" { "back to the start" } }
    };
    (e.status, layout("error", caller, body)).into_response()
}

fn status_cell(r: Option<&RunRecord>) -> Markup {
    match r {
        Some(r) => {
            html! { span class=(r.status.as_str()) { (if r.status.is_success() { "✔ " } else { "✘ " }) (r.status.as_str()) } }
        }
        None => html! { span.muted { "· not run" } },
    }
}

/// An SVG sparkline of runs, oldest to newest: one bar each, its height the run's duration
/// against the longest, green when it passed, red when not.
fn sparkline(runs: &[RunRecord]) -> Markup {
    let (w, h, gap) = (6u64, 24u64, 2u64);
    let longest = runs.iter().map(|r| r.duration_ms).max().unwrap_or(1).max(1);
    let width = (runs.len() as u64 * (w + gap)).max(1);
    html! {
        svg.spark width=(width) height=(h) viewBox=(format!("0 0 {width} {h}")) role="img"
            aria-label=(format!("the last {} runs", runs.len())) {
            @for (i, r) in runs.iter().enumerate() {
                @let bar = (r.duration_ms * (h - 4) / longest).max(3) + 1;
                rect x=(i as u64 * (w + gap)) y=(h - bar) width=(w) height=(bar) rx="1"
                    fill=(if r.status.is_success() { "var(--pass)" } else { "var(--fail)" }) {
                    title { (short(&r.commit)) " " (r.status.as_str()) " " (r.duration_ms) " ms" }
                }
            }
        }
    }
}

async fn home(State(web): St, headers: HeaderMap) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let data = blocking(|ctx| {
        let stats = ctx.index.repository_stats().map_err(AppError::from)?;
        let mut trends = Vec::new();
        for s in &stats {
            let runs = ctx
                .index
                .runs_page(Some(&s.repo.repository_id), None, None, 30)
                .map_err(AppError::from)?;
            trends.push(runs.into_iter().map(|(_, _, r)| r).collect::<Vec<_>>());
        }
        let running = ctx.index.running_jobs().map_err(AppError::from)?;
        let daemons = crate::app::daemons::list(ctx)?;
        let (queued, _) = ctx.index.queue_depth().map_err(AppError::from)?;
        let events = ctx
            .index
            .events(&crate::store::EventFilter {
                limit: Some(40),
                ..Default::default()
            })
            .map_err(AppError::from)?;
        Ok((stats, trends, running, queued, events, daemons))
    })
    .await;
    let (stats, trends, running, queued, events, daemons) = match data {
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
                table {
                    thead { tr { th { "repository" } th.num { "runs" } th.num { "passed" } th { "last runs" } th.num { "pending" } th { "activity" } } }
                    tbody {
                        @for (s, runs) in stats.iter().zip(&trends) {
                            tr {
                                td { a href=(format!("/r/{}", s.repo.name)) { (s.repo.name) } }
                                td.num { (s.runs) }
                                td.num {
                                    @if s.runs > 0 { (format!("{:.0}%", s.passed_runs as f64 * 100.0 / s.runs as f64)) } @else { "-" }
                                }
                                td { (sparkline(runs)) }
                                td.num { (s.pending_jobs) }
                                td.muted { (s.repo.last_activity.as_deref().unwrap_or("-")) }
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
                                " in " (repo) " (" (j.trigger) ")"
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
                            span.muted { (d.row.heartbeat_at.get(11..19).unwrap_or(&d.row.heartbeat_at)) }
                        }
                    }
                }
            }
            div.card {
                h2 { "Activity" }
                ul #feed data-since=(since) {
                    @for e in events.iter().rev() {
                        li data-id=(e.id) {
                            (e.time.get(11..19).unwrap_or(&e.time)) " " (e.kind)
                            @if let Some(r) = &e.repository { " · " (r) }
                            @if let Some(c) = &e.commit {
                                " · " a.mono href=(format!("/c/{}/{c}", e.repository.as_deref().or(e.repository_id.as_deref()).unwrap_or(""))) { (short(c)) }
                            }
                            @if let Some(s) = e.data.get("status").and_then(|s| s.as_str()) { " " span class=(s) { (s) } }
                        }
                    }
                }
            }
        }
    };
    layout("home", Some(&caller), body).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login_page() -> Html<String> {
    login_form(None)
}

fn login_form(problem: Option<&str>) -> Html<String> {
    layout(
        "sign in",
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(p) = problem { div.flash.bad { (p) } }
            form method="post" action="/login" {
                p { label for="token" { "Token" } }
                p { input #token type="password" name="token" autocomplete="current-password" autofocus; }
                p { button.primary type="submit" { "sign in" } }
            }
            p.muted { "Make a token with " code { "git sandbox token create --role read" } " (admin to promote and kill)." }
        },
    )
}

async fn login(State(web): St, Form(f): Form<LoginForm>) -> Response {
    let kept = match tokens::list(&web.paths) {
        Ok(k) => k,
        Err(e) => return error_page(None, e.into()),
    };
    let token = f.token.trim();
    if tokens::verify(&kept, token).is_none() {
        return (
            StatusCode::UNAUTHORIZED,
            login_form(Some("That token is not one of this machine's.")),
        )
            .into_response();
    }
    // Only characters a token has go into the cookie.
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return (
            StatusCode::BAD_REQUEST,
            login_form(Some("That is no token.")),
        )
            .into_response();
    }
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000"),
        )],
        Redirect::to("/"),
    )
        .into_response()
}

async fn logout() -> Response {
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
        )],
        Redirect::to("/login"),
    )
        .into_response()
}

async fn repository_page(State(web): St, headers: HeaderMap, Path(key): Path<String>) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    experiments_view(&web, &caller, key, None).await
}

/// The experiments of a repository against production, with a message on top after an action.
async fn experiments_view(
    web: &Web,
    caller: &Caller,
    key: String,
    flash: Option<(bool, String)>,
) -> Response {
    let k = key.clone();
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &k)?;
        let (base, ranked) = compare::ranked(ctx, &repo, &row)?;
        Ok((row, base, ranked))
    })
    .await;
    let (row, base, ranked) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(caller), e),
    };
    let admin = caller.token.role >= Role::Admin;
    let csrf = web.csrf(caller);
    let body = html! {
        h1 { (row.name) }
        @if let Some((good, text)) = &flash { div class=(if *good { "flash good" } else { "flash bad" }) { (text) } }
        p.muted {
            "production " code { (base.target) } " at "
            a.mono href=(format!("/c/{}/{}", row.name, base.commit)) { (short(&base.commit)) }
            ": " span class=(base.status.as_str()) { (base.status) }
            @if let Some(p) = base.passed { ", " (p) " passed" }
        }
        h2 { "Experiments, best first" }
        @if ranked.is_empty() { p.muted { "No experiments yet: " code { "git sandbox experiment start NAME" } } }
        @else {
            div.card.scroll {
                table {
                    thead { tr {
                        th { "experiment" } th { "state" } th { "result" } th.num { "passed" } th.num { "failed" }
                        th.num { "new failures" } th.num { "duration" } th.num { "complexity Δ" } th { "verdict" }
                        @if admin { th {} }
                    } }
                    tbody {
                        @for x in &ranked {
                            tr {
                                td { (x.name) }
                                td { (x.state) }
                                td {
                                    @match (&x.head, &x.row) {
                                        (Some(h), Some(r)) => a href=(format!("/c/{}/{h}", row.name)) { span class=(r.status.as_str()) { (r.status) } },
                                        _ => span.muted { "-" },
                                    }
                                }
                                td.num { (x.row.as_ref().and_then(|r| r.passed).map_or("-".into(), |v| v.to_string())) }
                                td.num { (x.row.as_ref().and_then(|r| r.failed).map_or("-".into(), |v| v.to_string())) }
                                td.num title=(x.new_failures.join(", ")) { (x.new_failures.len()) }
                                td.num {
                                    (x.row.as_ref().and_then(|r| r.duration_ms).map_or("-".into(), |d| format!("{d} ms")))
                                    @if let Some(d) = x.duration_delta_ms { span.muted { " (" (format!("{d:+}")) ")" } }
                                }
                                td.num { (x.complexity_delta.map_or("-".into(), |d| format!("{d:+.2}"))) }
                                td title=(x.verdict_reason.as_deref().unwrap_or("")) { (x.verdict.map_or("-", |v| v.as_str())) }
                                @if admin {
                                    td {
                                        @if x.state == "active" {
                                            form.inline method="post" action=(format!("/r/{}/experiments/{}/promote", row.name, x.name)) {
                                                input type="hidden" name="csrf" value=(csrf);
                                                button.primary type="submit" name="dry_run" value="false"
                                                    data-action="promote" onclick="return confirm('Promote this experiment into production?')" { "promote" }
                                                " "
                                                button type="submit" name="dry_run" value="true" { "dry run" }
                                            }
                                            " "
                                            form.inline method="post" action=(format!("/r/{}/experiments/{}/kill", row.name, x.name)) {
                                                input type="hidden" name="csrf" value=(csrf);
                                                button.danger type="submit" onclick="return confirm('Kill this experiment? Its branch is archived.')" { "kill" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(&row.name, Some(caller), body).into_response()
}

#[derive(Deserialize)]
struct ActionForm {
    csrf: String,
    #[serde(default)]
    dry_run: Option<String>,
}

async fn experiment_action(
    State(web): St,
    headers: HeaderMap,
    Path((key, name, action)): Path<(String, String, String)>,
    form: Result<Form<ActionForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let caller = match web.require(&headers, Role::Admin, true) {
        Ok(c) => c,
        Err(e) => return error_page(None, e),
    };
    let Ok(Form(form)) = form else {
        return error_page(
            Some(&caller),
            ApiError::bad_request("the form is missing its fields"),
        );
    };
    let same = tokens::constant_time_eq(web.csrf(&caller).as_bytes(), form.csrf.as_bytes());
    if !same {
        return error_page(
            Some(&caller),
            ApiError::new(
                StatusCode::FORBIDDEN,
                "the form's CSRF token does not match this session",
            )
            .hint("reload the page and try again"),
        );
    }
    let outcome: ApiResult<String> = match action.as_str() {
        "promote" => {
            let dry = form.dry_run.as_deref() == Some("true");
            promote_now(key.clone(), name.clone(), dry, None).await.map(|v| {
                let commit = v["commit"].as_str().map(short).unwrap_or("").to_string();
                if dry {
                    format!("Dry run: {name} would be promoted into {} as {commit}; its tests pass. Nothing was changed.", v["target"].as_str().unwrap_or("production"))
                } else {
                    format!("Promoted {name} into {} ({commit}).", v["target"].as_str().unwrap_or("production"))
                }
            })
        }
        "kill" => kill_now(key.clone(), name.clone(), false)
            .await
            .map(|_| format!("Killed {name}; its branch is archived.")),
        other => Err(ApiError::not_found(format!("no action {other:?}"))),
    };
    match outcome {
        Ok(text) => experiments_view(&web, &caller, key, Some((true, text))).await,
        Err(e) if e.status == StatusCode::NOT_FOUND => error_page(Some(&caller), e),
        Err(e) => experiments_view(&web, &caller, key, Some((false, e.error))).await,
    }
}

#[derive(Deserialize)]
struct CommitQuery {
    offset: Option<usize>,
    grep: Option<String>,
}

/// How many log lines a page shows.
const LOG_PAGE: usize = 200;
/// How much of a patch the page shows.
const MAX_PATCH: usize = 512 * 1024;

async fn commit_page(
    State(web): St,
    headers: HeaderMap,
    Path((key, sha)): Path<(String, String)>,
    Query(q): Query<CommitQuery>,
) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let grep = q.grep.clone().filter(|g| !g.is_empty());
    let offset = q.offset.unwrap_or(0);
    let g2 = grep.clone();
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let c = commit_of(&repo, &sha)?;
        let info = crate::git::commit_info(&repo, c).map_err(AppError::from)?;
        let mut reader = results::NoteReader::new(&repo)?;
        let record = results::find_evidence(ctx, &repo, &row, &mut reader, c)?;
        let page = record.as_ref().and_then(|r| {
            logs::read(
                ctx,
                &row,
                r,
                &logs::PageRequest {
                    offset,
                    limit: LOG_PAGE,
                    grep: g2.clone(),
                    check: None,
                },
                |_| true,
            )
            .ok()
        });
        let delta = match info.parents.first() {
            Some(p) => Some(metrics::diff(
                &metrics::of(ctx, &repo, *p, None)?,
                &metrics::of(ctx, &repo, c, None)?,
            )),
            None => None,
        };
        let (patch, cut) = results::patch(&repo, c, MAX_PATCH)?;
        Ok((row, info, record, page, delta, patch, cut))
    })
    .await;
    let (row, info, record, page, delta, patch, cut) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(&caller), e),
    };
    let id = info.id.to_string();
    let link = |offset: usize| {
        let mut u = format!("/c/{}/{id}?offset={offset}", row.name);
        if let Some(g) = &grep {
            u.push_str("&grep=");
            u.push_str(&urlencode(g));
        }
        u
    };
    let body = html! {
        h1 { a href=(format!("/r/{}", row.name)) { (row.name) } " · " span.mono { (short(&id)) } " " (info.summary) }
        div.card {
            p { "Status: " (status_cell(record.as_ref())) }
            @if let Some(r) = &record {
                p.muted { "ran " (r.started_at) " in " (r.duration_ms) " ms · trigger " (r.trigger.as_str())
                    @if let Some(c) = &r.cached_from { " · same tree and config as " span.mono { (short(c)) } } }
                @if let Some(e) = &r.error { div.flash.bad { (e) } }
                @if let Some(t) = &r.tests {
                    p {
                        span.pass { (t.passed.unwrap_or(0)) " passed" } ", "
                        span.fail { (t.failed.unwrap_or(0)) " failed" } ", "
                        (t.skipped.unwrap_or(0)) " skipped, " (t.errors.unwrap_or(0)) " errors"
                        @if let Some(k) = &t.killed_by { " · stopped by " strong { (k) } }
                    }
                    @if !t.failures.is_empty() {
                        h2 { "Failures" }
                        @for f in &t.failures {
                            details open[t.failures.len() <= 5] {
                                summary.fail { (f.name) }
                                pre { (f.message) }
                            }
                        }
                    }
                }
                @if !r.checks.is_empty() {
                    h2 { "Checks" }
                    table { thead { tr { th { "check" } th { "status" } th { "exit" } th.num { "duration" } } }
                        tbody { @for (name, c) in r.checks.iter() { tr {
                            td.mono { (name) @if !c.required { " (optional)" } }
                            td class=(if c.status().is_success() { "pass" } else { "fail" }) { (c.status().as_str()) }
                            td { (c.run.exit_code.map_or("–".to_string(), |x| x.to_string())) }
                            td.num { (c.run.duration_ms) " ms" } } } } }
                }
            } @else {
                p.muted { "No result yet. Queue it with " code { "git sandbox run " (short(&id)) } " or POST /api/v1/runs." }
            }
        }
        @if let Some(d) = &delta {
            h2 { "Analysis against the parent" }
            div.card.scroll {
                p {
                    "functions " (format!("{:+}", d.totals.functions)) " · code lines " (format!("{:+}", d.totals.code_lines))
                    " · mean complexity " (format!("{:+.2}", d.totals.complexity_mean)) " · potential issues " (format!("{:+}", d.totals.potential_issues))
                }
                @if !d.functions_added.is_empty() || !d.complexity_up.is_empty() || !d.complexity_down.is_empty() || !d.new_issues.is_empty() {
                    table {
                        thead { tr { th { "change" } th { "where" } th.num { "complexity" } } }
                        tbody {
                            @for f in d.functions_added.iter().take(20) { tr { td.pass { "added " (f.name) } td.mono { (f.path) ":" (f.line) } td.num { (f.complexity) } } }
                            @for f in d.functions_removed.iter().take(20) { tr { td.muted { "removed " (f.name) } td.mono { (f.path) } td.num { (f.complexity) } } }
                            @for c in d.complexity_up.iter().take(20) { tr { td.fail { "more complex " (c.name) } td.mono { (c.path) ":" (c.line) } td.num { (c.from) " → " (c.to) } } }
                            @for c in d.complexity_down.iter().take(20) { tr { td.pass { "simpler " (c.name) } td.mono { (c.path) ":" (c.line) } td.num { (c.from) " → " (c.to) } } }
                            @for i in d.new_issues.iter().take(20) { tr { td.fail { "new: " (i.kind) } td.mono { (i.path) ":" (i.line) } td { (i.message) } } }
                        }
                    }
                }
            }
        }
        @if let Some(p) = &page {
            h2 #log { "Log" }
            form method="get" action=(format!("/c/{}/{id}#log", row.name)) {
                input type="text" name="grep" value=(grep.as_deref().unwrap_or("")) placeholder="only lines containing…";
                " " button type="submit" { "search" }
            }
            div.pager {
                span.muted { (p.total_lines) " lines" @if p.output_truncated { " (cut at the output limit)" } }
                @if offset > 0 { a #prev href=(format!("{}#log", link(offset.saturating_sub(LOG_PAGE)))) { "← earlier" } }
                @if let Some(n) = p.next_offset { a #next href=(format!("{}#log", link(n))) { "later →" } }
            }
            pre.log {
                @for l in &p.lines { span.n { (l.n) } (l.text) "\n" }
            }
        }
        h2 { "Changes" }
        pre.diff { (render_patch(&patch)) }
        @if cut { p.muted { "The patch is longer; see " code { "git show " (short(&id)) } "." } }
    };
    layout(&format!("{} {}", row.name, short(&id)), Some(&caller), body).into_response()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A patch as HTML: file headers, hunk headers, added and removed lines marked, and the code in
/// them coloured (keywords, strings, comments).
fn render_patch(patch: &str) -> Markup {
    html! {
        @for line in patch.lines() {
            @if line.starts_with("diff --git") || line.starts_with("+++ ") || line.starts_with("--- ") || line.starts_with("index ") {
                span.file { (line) } "\n"
            } @else if line.starts_with("@@") {
                span.hunk { (line) } "\n"
            } @else if let Some(code) = line.strip_prefix('+') {
                span.add { "+" (highlight(code)) } "\n"
            } @else if let Some(code) = line.strip_prefix('-') {
                span.del { "-" (highlight(code)) } "\n"
            } @else {
                (highlight(line)) "\n"
            }
        }
    }
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "do",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "static",
    "struct",
    "switch",
    "this",
    "throw",
    "trait",
    "True",
    "False",
    "true",
    "try",
    "type",
    "use",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// Colour one line of code: comments (`#`, `//`), strings ("…", '…') and keywords. Escaping is
/// maud's: every piece is text.
fn highlight(code: &str) -> Markup {
    let mut parts: Vec<(&'static str, String)> = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, parts: &mut Vec<(&'static str, String)>| {
        if !plain.is_empty() {
            parts.push(("", std::mem::take(plain)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '#' || (c == '/' && chars.get(i + 1) == Some(&'/')) {
            flush(&mut plain, &mut parts);
            parts.push(("com", chars[i..].iter().collect()));
            break;
        }
        if c == '"' || c == '\'' {
            flush(&mut plain, &mut parts);
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            parts.push(("str", chars[i..end].iter().collect()));
            i = end;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if KEYWORDS.contains(&word.as_str()) {
                flush(&mut plain, &mut parts);
                parts.push(("kw", word));
            } else {
                plain.push_str(&word);
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut parts);
    html! {
        @for (class, text) in &parts {
            @if class.is_empty() { (text) } @else { span class=(class) { (text) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_coloured_and_escaped() {
        let html = highlight(r#"if x < 1: return "<b>" # done"#).into_string();
        assert!(html.contains(r#"<span class="kw">if</span>"#), "{html}");
        assert!(html.contains("x &lt; 1"), "{html}");
        assert!(
            html.contains(r#"<span class="str">&quot;&lt;b&gt;&quot;</span>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="com"># done</span>"#),
            "{html}"
        );
    }
}
