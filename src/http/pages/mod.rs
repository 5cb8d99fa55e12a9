//! The dashboard: server-rendered HTML (maud) with one stylesheet and one small script embedded
//! in the binary. Home (repositories, their trend, the queue, the live feed), a repository's
//! experiments ranked against production (promote and kill for admins), and a commit's page
//! (result, failures, the log paged and searchable, analysis against the parent, the patch).

mod commit;
mod experiments;
mod home;

use super::{blocking, repository, ApiError, Caller, Web, COOKIE};
use crate::app::tokens::{self, Role};
use crate::model::RunRecord;
use crate::util::short;
use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use std::sync::Arc;

type St = State<Arc<Web>>;

const CSS: &str = include_str!("../assets/app.css");
const JS: &str = include_str!("../assets/app.js");

pub fn routes() -> Router<Arc<Web>> {
    Router::new()
        .route("/", get(home::home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/r/{repo}", get(experiments::repository_page))
        .route(
            "/r/{repo}/experiments/{name}/{action}",
            post(experiments::experiment_action),
        )
        .route("/c/{repo}/{sha}", get(commit::commit_page))
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
