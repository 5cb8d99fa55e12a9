//! The HTTP face: a JSON API under `/api/v1` and a dashboard at `/`, served by the daemon
//! (`daemon --http`). Like the command line and MCP it parses, calls `app/` and renders; each
//! call runs on a blocking thread with its own view of the index and config.
//!
//! Who may do what: a token (`git sandbox token create`) sent as `Authorization: Bearer TOKEN`,
//! or the dashboard's session cookie (HttpOnly, SameSite=Strict) holding one. Without one only
//! `/api/v1/health`, `/api/v1/openapi.json`, the login page, the assets and the icon answer. A
//! role below what a route needs gets 403. Forms carry a CSRF token bound to the session.

mod api;
mod openapi;
mod pages;
mod workspaces;

use crate::app::repo::tokens::{self, Role, Token};
use crate::app::{AppError, Context, ErrorKind, Hinted};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use gs_config::Paths;
use hmac::{Hmac, Mac};
use serde_json::json;
use std::sync::Arc;

/// The session cookie's name.
pub const COOKIE: &str = "gsbx_session";
/// The largest request body read (a JSON body or a form); more is 413.
pub const MAX_BODY: usize = 64 * 1024;

/// What every handler shares.
pub struct Web {
    paths: Paths,
    /// Binds CSRF tokens to sessions; made at start, so a restart signs everyone's forms anew.
    csrf_key: Vec<u8>,
}

/// The API and the dashboard.
pub fn router() -> Router {
    let web = Arc::new(Web {
        paths: Paths::from_env(),
        csrf_key: gs_util::random_hex(32).into_bytes(),
    });
    api::routes()
        .merge(workspaces::routes())
        .merge(pages::routes())
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(web)
}

/// Who is calling, and how.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token: Token,
    /// The token came in the session cookie (a browser), not in a header.
    pub cookie: bool,
    /// The token itself, to bind CSRF tokens to.
    secret: String,
}

/// An error as the API answers it: a status and `{"error", "kind", "hints"}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: String,
    pub hints: Vec<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.into(),
            hints: Vec::new(),
        }
    }

    pub fn hint(mut self, h: impl Into<String>) -> ApiError {
        self.hints.push(h.into());
        self
    }

    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, what)
    }

    pub fn bad_request(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, what)
    }

    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::CONFLICT => "refused",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "error",
        }
    }
}

/// HTTP's status for each kind of error.
fn status_of(k: ErrorKind) -> StatusCode {
    match k {
        ErrorKind::Usage => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Refused => StatusCode::CONFLICT,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Failed | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        ApiError {
            status: status_of(e.kind()),
            error: e.problem(),
            hints: e.hints(),
        }
    }
}

impl From<gs_git::GitError> for ApiError {
    fn from(e: gs_git::GitError) -> Self {
        AppError::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = self.kind();
        (
            self.status,
            Json(json!({"error": self.error, "kind": kind, "hints": self.hints})),
        )
            .into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The token in `Authorization: Bearer …`, or in the session cookie when `cookie_ok`.
fn presented(headers: &HeaderMap, cookie_ok: bool) -> Option<(String, bool)> {
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, token) = v.trim().split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| (token.trim().to_string(), false));
    }
    if !cookie_ok {
        return None;
    }
    cookie(headers, COOKIE).map(|t| (t, true))
}

/// A cookie's value.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

impl Web {
    /// The caller, if the token it presents is one (tokens are read afresh: a revoked token
    /// stops working at once).
    fn caller(&self, headers: &HeaderMap, cookie_ok: bool) -> ApiResult<Option<Caller>> {
        let Some((secret, via_cookie)) = presented(headers, cookie_ok) else {
            return Ok(None);
        };
        let kept = tokens::list(&self.paths)?;
        Ok(tokens::verify(&kept, &secret).map(|token| Caller {
            token,
            cookie: via_cookie,
            secret,
        }))
    }

    /// The caller when it has at least `role`; 401 without a valid token, 403 below the role.
    pub fn require(&self, headers: &HeaderMap, role: Role, cookie_ok: bool) -> ApiResult<Caller> {
        match self.caller(headers, cookie_ok)? {
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "a token is needed: send `Authorization: Bearer TOKEN`",
            )
            .hint("make one with `git sandbox token create --role read`")),
            Some(c) if c.token.role < role => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "this needs a {role} token; token {:?} is {}",
                    c.token.name, c.token.role
                ),
            )
            .hint(format!("use a token made with --role {role}"))),
            Some(c) => Ok(c),
        }
    }

    /// The CSRF token of a session: an HMAC of its token under this start's key.
    pub fn csrf(&self, caller: &Caller) -> String {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&self.csrf_key).expect("any key");
        mac.update(caller.secret.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Run `f` with a fresh context on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce(&Context) -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(move || {
        let ctx = Context::load()?;
        f(&ctx)
    })
    .await
    .map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request failed: {e}"),
        )
    })?
}

/// The answer to a `{repo}` that names no registered repository.
pub fn no_repository(key: &str) -> ApiError {
    ApiError::not_found(format!("no repository {key:?}"))
        .hint("GET /api/v1/repositories lists them")
}

/// A registered repository by id or name.
pub fn repository(ctx: &Context, key: &str) -> ApiResult<(gix::Repository, gs_store::RepoRow)> {
    let row =
        crate::app::records::views::repository(ctx, key)?.ok_or_else(|| no_repository(key))?;
    let repo = gs_git::open(std::path::Path::new(&row.path)).map_err(|e| {
        ApiError::not_found(format!(
            "repository {key:?} is registered at {}, which is no repository now ({})",
            row.path,
            e.problem()
        ))
    })?;
    Ok((repo, row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gs_git::GitError;
    use gs_store::StoreError;

    /// The status follows the kind `app` decides, as the command line's exit code does.
    #[test]
    fn each_kind_has_its_status() {
        let status = |e: AppError| ApiError::from(e).status;
        let too_large = GitError::TreeTooLarge {
            size: 3 << 20,
            ceiling: 2 << 20,
        };
        assert_eq!(status(too_large.into()), StatusCode::CONFLICT);
        let refused = GitError::Refused {
            problem: "a merge is in progress".into(),
            hint: "finish it".into(),
        };
        assert_eq!(status(refused.into()), StatusCode::CONFLICT);
        let away = StoreError::Unreachable {
            url: "postgres://db/x".into(),
            detail: "connection refused".into(),
        };
        let e = ApiError::from(AppError::from(away));
        assert_eq!(
            (e.status, e.kind()),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        );
        assert_eq!(
            status(AppError::not_found("unknown experiment \"x\"")),
            StatusCode::NOT_FOUND
        );
        let corrupt = StoreError::Corrupt {
            path: "/d/index.db".into(),
            detail: "file is not a database".into(),
        };
        assert_eq!(status(corrupt.into()), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
