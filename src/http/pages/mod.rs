//! The dashboard: server-rendered HTML (maud) with one stylesheet, one small script and an icon
//! embedded in the binary. Home (repositories, their trend, the queue, the live feed), a
//! repository's experiments ranked against production (promote and kill for admins) and its
//! commits with their results, a branch's last commits in charts, and a commit's page (result,
//! failures, the log paged and searchable, analysis against the parent, the patch). Every form
//! answers 303 See Other. Records' words are shown as people say them (`words`).
mod branch;
mod chart;
mod commit;
mod commits;
mod experiments;
mod home;
mod words;

use super::{blocking, repository, ApiError, Caller, Web, COOKIE};
use crate::app::repo::tokens::{self, Role};
use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use gs_model::RunRecord;
use gs_util::short;
use gs_util::time::duration_text;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use std::sync::Arc;

type St = State<Arc<Web>>;

const CSS: &str = include_str!("../assets/app.css");
const JS: &str = include_str!("../assets/app.js");
const ICON_SVG: &str = include_str!("../assets/icon.svg");
const ICON_ICO: &[u8] = include_bytes!("../assets/favicon.ico");
/// The cookie that carries a message across the redirect after a form (shown once).
const FLASH: &str = "gsbx_flash";
/// The most characters of a message the cookie carries.
const MAX_FLASH: usize = 1000;

pub fn routes() -> Router<Arc<Web>> {
    Router::new()
        .route("/", get(home::home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/r/{repo}", get(experiments::repository_page))
        .route("/r/{repo}/commits", get(commits::commits_page))
        .route("/r/{repo}/branches/{*name}", get(branch::branch_page))
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
        .route(
            "/assets/icon.svg",
            get(|| async { ([(header::CONTENT_TYPE, "image/svg+xml")], ICON_SVG) }),
        )
        // Browsers ask for it whatever the page links.
        .route(
            "/favicon.ico",
            get(|| async { ([(header::CONTENT_TYPE, "image/x-icon")], ICON_ICO) }),
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
                    link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
                    link rel="icon" href="/favicon.ico" sizes="32x32";
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
        Some(r) if r.no_tests() => html! { span.muted { "○ no tests" } },
        Some(r) => {
            html! { span class=(r.status.as_str()) { (if r.status.is_success() { "✔ " } else { "✘ " }) (words::status(r.status.as_str())) } }
        }
        None => html! { span.muted { "· not run" } },
    }
}

/// The page of branch `name` (`main`, `experiment/x`): each part of its name escaped, the
/// slashes kept.
fn branch_href(repo: &str, name: &str) -> String {
    let parts: Vec<String> = name.split('/').map(urlencode).collect();
    format!("/r/{}/branches/{}", urlencode(repo), parts.join("/"))
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
                    title { (short(&r.commit)) " " (words::status(r.status.as_str())) " " (duration_text(r.duration_ms)) }
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login_page(headers: HeaderMap) -> Response {
    let flash = take_flash(&headers);
    shown(&flash, login_form(flash.as_ref().map(|f| f.text.as_str())))
}

fn login_form(problem: Option<&str>) -> Response {
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
    .into_response()
}

async fn login(State(web): St, Form(f): Form<LoginForm>) -> Response {
    let kept = match tokens::list(&web.paths) {
        Ok(k) => k,
        Err(e) => return error_page(None, e.into()),
    };
    let token = f.token.trim();
    if tokens::verify(&kept, token).is_none() {
        return see_other(
            "/login",
            Some(Flash::bad("That token is not one of this machine's.")),
        );
    }
    // Only characters a token has go into the cookie.
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return see_other("/login", Some(Flash::bad("That is no token.")));
    }
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000"),
        )],
        see_other("/", None),
    )
        .into_response()
}

async fn logout() -> Response {
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
        )],
        see_other("/login", None),
    )
        .into_response()
}

/// A message for the page a form redirects to.
pub struct Flash {
    pub good: bool,
    pub text: String,
}

impl Flash {
    pub fn good(text: impl Into<String>) -> Flash {
        Flash {
            good: true,
            text: text.into(),
        }
    }

    pub fn bad(text: impl Into<String>) -> Flash {
        Flash {
            good: false,
            text: text.into(),
        }
    }

    fn render(&self) -> Markup {
        html! { div class=(if self.good { "flash good" } else { "flash bad" }) { (self.text) } }
    }
}

/// The answer to a form: 303 to `to`, so the browser's address is a GET a reload can repeat,
/// with the message for that page in a short-lived cookie.
fn see_other(to: &str, flash: Option<Flash>) -> Response {
    let mut r = Redirect::to(to).into_response();
    if let Some(f) = flash {
        // A cookie holds about 4 kB; a longer message is cut (the API answers in full).
        let text: String = f.text.chars().take(MAX_FLASH).collect();
        let value = format!("{}{}", if f.good { 'g' } else { 'b' }, urlencode(&text));
        let cookie = format!("{FLASH}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=60");
        if let Ok(v) = header::HeaderValue::from_str(&cookie) {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    r
}

/// The message a redirect left for this page, if any.
fn take_flash(headers: &HeaderMap) -> Option<Flash> {
    let v = super::cookie(headers, FLASH)?;
    let good = match v.as_bytes().first()? {
        b'g' => true,
        b'b' => false,
        _ => return None,
    };
    let text = urldecode(&v[1..])?;
    (!text.is_empty()).then_some(Flash { good, text })
}

/// `page`, clearing the message cookie when it showed one.
fn shown(flash: &Option<Flash>, page: Response) -> Response {
    let mut page = page;
    let clear = format!("{FLASH}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    if let (Some(_), Ok(v)) = (flash, header::HeaderValue::from_str(&clear)) {
        page.headers_mut().append(header::SET_COOKIE, v);
    }
    page
}

/// A time as the page shows it: UTC in the markup (`datetime`, and the text as a fallback), which
/// the page's script rewrites in the viewer's zone. The time of day, or with `date` the day too.
fn when(time: &str, date: bool) -> Markup {
    let Some(utc) = gs_util::time::parse_rfc3339(time).map(gs_util::time::rfc3339) else {
        return html! { (time) };
    };
    let text = if date {
        format!("{} {} UTC", &utc[..10], &utc[11..19])
    } else {
        utc[11..19].to_string()
    };
    html! { time datetime=(utc) data-date[date] title=(format!("{utc} (UTC)")) { (text) } }
}

fn urldecode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn urlencode(s: &str) -> String {
    gs_util::percent_encode(s, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_survives_its_cookie() {
        let text = "promote refused: 100% «broken»; a=b, see `git sandbox show`";
        let r = see_other("/r/x", Some(Flash::bad(text)));
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let set = r.headers()[header::SET_COOKIE].to_str().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            set.split(';').next().unwrap().parse().unwrap(),
        );
        let f = take_flash(&headers).unwrap();
        assert!(!f.good);
        assert_eq!(f.text, text);
    }
}
