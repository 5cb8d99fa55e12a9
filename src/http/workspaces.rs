//! `/api/v1/workspaces`: agent workspaces over HTTP (see `app/workspace`). Reading needs a
//! `read` token; making one, running a command in it, writing a file and committing need `run`;
//! removing one needs `admin`.

use super::{blocking, repository, ApiError, ApiResult, Web};
use crate::app::repo::tokens::Role;
use crate::app::run::exec::Output;
use crate::app::{workspace, Repo};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use gs_model::Trigger;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

type St = State<Arc<Web>>;

pub fn routes() -> Router<Arc<Web>> {
    Router::new()
        .route("/api/v1/workspaces/{repo}", get(list).post(create))
        .route("/api/v1/workspaces/{repo}/{name}", get(one).delete(remove))
        .route("/api/v1/workspaces/{repo}/{name}/exec", post(exec))
        .route(
            "/api/v1/workspaces/{repo}/{name}/files/{*path}",
            get(read).put(write),
        )
        .route("/api/v1/workspaces/{repo}/{name}/diff", get(diff))
        .route("/api/v1/workspaces/{repo}/{name}/commit", post(commit))
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    super::api::body(b)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBody {
    /// The workspace's name, which is its experiment's (branch experiment/<name>).
    pub name: String,
    /// Where its branch starts: a revision (default: the production branch).
    pub from: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    /// The command and its arguments, e.g. ["python3", "-m", "pytest", "-x"].
    pub command: Vec<String>,
    /// Stop it after this many seconds (default the repository's test timeout).
    pub timeout_seconds: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteBody {
    /// The file's whole new content (UTF-8 text).
    pub content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    /// The commit message.
    pub message: String,
}

#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RemoveQuery {
    /// Kill its experiment too (its branch archived); default: the branch stays.
    #[serde(default)]
    pub kill: bool,
}

/// Run `f` on the repository `key` on a blocking thread.
async fn on_repo<T: Send + 'static>(
    key: String,
    f: impl FnOnce(Repo<'_>) -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        f(Repo::new(ctx, &repo, &row))
    })
    .await
}

async fn list(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    on_repo(key, |at| {
        let all = workspace::list(at)?;
        Ok(Json(json!({"workspaces": all, "total": all.len()})))
    })
    .await
}

async fn create(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
    b: Result<Json<NewBody>, JsonRejection>,
) -> ApiResult<(axum::http::StatusCode, Json<Value>)> {
    web.require(&headers, Role::Run, false)?;
    let b = body(b)?;
    on_repo(key, move |at| {
        let w = workspace::new(at, &b.name, b.from.as_deref())?;
        Ok((
            axum::http::StatusCode::CREATED,
            Json(serde_json::to_value(&w).unwrap_or_default()),
        ))
    })
    .await
}

async fn one(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    on_repo(key, move |at| {
        let w = workspace::get(at, &name)?;
        Ok(Json(serde_json::to_value(&w).unwrap_or_default()))
    })
    .await
}

async fn remove(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    q: Result<axum::extract::Query<RemoveQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Admin, false)?;
    let kill = q
        .map(|axum::extract::Query(q)| q.kill)
        .map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    on_repo(key, move |at| {
        let r = workspace::rm(at, &name, kill)?;
        Ok(Json(serde_json::to_value(&r).unwrap_or_default()))
    })
    .await
}

/// The most bytes of a command's output an answer holds (its end).
const OUTPUT_TAIL: usize = 64 * 1024;

async fn exec(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    b: Result<Json<ExecBody>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Run, false)?;
    let b = body(b)?;
    if b.command.first().is_none_or(|c| c.is_empty()) {
        return Err(ApiError::bad_request("bad body: command is empty")
            .hint("send the command and its arguments as a list, e.g. [\"make\", \"test\"]"));
    }
    on_repo(key, move |at| {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let ran = workspace::exec(
            at,
            &name,
            &b.command,
            b.timeout_seconds.map(Duration::from_secs),
            Output::Capture(1 << 20),
            &stop,
        )?;
        let o = &ran.outcome;
        let text = String::from_utf8_lossy(&o.output);
        let mut start = text.len().saturating_sub(OUTPUT_TAIL);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        Ok(Json(json!({
            "workspace": name,
            "exit_code": o.exit_code,
            "signal": o.signal,
            "killed_by": o.killed_by,
            "spawn_error": o.spawn_error,
            "duration_ms": o.duration.as_millis() as u64,
            "timeout_seconds": ran.timeout.as_secs(),
            "kept": ran.dropped.is_none(),
            "dropped": ran.dropped,
            "files_changed": ran.edited_total,
            "edited": ran.edited,
            "output": &text[start..],
            "output_cut": start > 0 || o.truncated,
        })))
    })
    .await
}

async fn read(
    State(web): St,
    headers: HeaderMap,
    Path((key, name, path)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    on_repo(key, move |at| {
        // A directory is listed; a file is given whole.
        if let Ok(entries) = workspace::list_dir(at, &name, &path) {
            return Ok(Json(json!({"path": path, "entries": entries})));
        }
        let f = workspace::read_file(at, &name, &path)?;
        let mut v = serde_json::to_value(&f).unwrap_or_default();
        match std::str::from_utf8(&f.bytes) {
            Ok(text) => v["content"] = text.into(),
            Err(_) => v["binary"] = true.into(),
        }
        Ok(Json(v))
    })
    .await
}

async fn write(
    State(web): St,
    headers: HeaderMap,
    Path((key, name, path)): Path<(String, String, String)>,
    b: Result<Json<WriteBody>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Run, false)?;
    let b = body(b)?;
    on_repo(key, move |at| {
        let w = workspace::write_file(at, &name, &path, b.content.as_bytes())?;
        Ok(Json(serde_json::to_value(&w).unwrap_or_default()))
    })
    .await
}

async fn diff(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    on_repo(key, move |at| {
        let d = workspace::diff(at, &name)?;
        Ok(Json(serde_json::to_value(&d).unwrap_or_default()))
    })
    .await
}

async fn commit(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    b: Result<Json<CommitBody>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Run, false)?;
    let b = body(b)?;
    on_repo(key, move |at| {
        let c = workspace::commit(at, &name, &b.message, Trigger::Api, true)?;
        Ok(Json(serde_json::to_value(&c).unwrap_or_default()))
    })
    .await
}
