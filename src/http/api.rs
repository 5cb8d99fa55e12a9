//! `/api/v1`: JSON over the use-cases of `app/`. Reading needs a `read` token, queueing and
//! evaluating `run`, creating, promoting and killing `admin`. Lists page by id cursors
//! (`since`); bad parameters are 400 with a one-line message, unknown ids 404.

use super::{blocking, no_repository, repository, ApiError, ApiResult, Web};
use crate::app::experiment::promote::{promote, PromoteOptions};
use crate::app::repo::tokens::Role;
use crate::app::Repo;
use crate::app::{
    experiment::compare, experiment::eval, experiment::experiments, intake::notify, intake::queue,
    records::logs, records::results, records::summary, records::views, repo::repos,
};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use gs_model::Trigger;
use gs_store::EventFilter;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

type St = State<Arc<Web>>;

pub fn routes() -> Router<Arc<Web>> {
    Router::new()
        .route("/api/v1/health", get(health))
        .route(
            "/api/v1/openapi.json",
            get(|| async { Json(super::openapi::document()) }),
        )
        .route(
            "/api/v1/repositories",
            get(repositories).post(create_repository),
        )
        .route("/api/v1/repositories/{repo}", get(repository_summary))
        .route(
            "/api/v1/repositories/{repo}/experiments",
            get(repository_experiments),
        )
        .route("/api/v1/repositories/{repo}/flaky", get(repository_flaky))
        .route("/api/v1/experiments/{repo}/{name}", get(experiment))
        .route(
            "/api/v1/experiments/{repo}/{name}/eval",
            post(experiment_eval),
        )
        .route(
            "/api/v1/experiments/{repo}/{name}/promote",
            post(experiment_promote),
        )
        .route(
            "/api/v1/experiments/{repo}/{name}/kill",
            post(experiment_kill),
        )
        .route("/api/v1/commits/{repo}/{sha}", get(commit))
        .route("/api/v1/runs", get(runs).post(request_run))
        .route("/api/v1/runs/{id}/log", get(run_log))
        .route("/api/v1/daemons", get(daemons))
        .route("/api/v1/events", get(events))
        .route("/api/v1/events/stream", get(event_stream))
}

/// The query, or 400 naming what is wrong with it.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))
}

/// The JSON body, or 400 (413 when too large, 415 when not JSON) naming what is wrong with it.
pub(super) fn body<T>(b: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    b.map(|Json(t)| t).map_err(|e| {
        let status = match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, format!("bad body: {}", e.body_text()))
            .hint("send JSON as the API description (/api/v1/openapi.json) says")
    })
}

fn name_ok(name: &str) -> ApiResult<()> {
    repos::check_name(name).map_err(|e| ApiError::from(e).into_not_found())
}

impl ApiError {
    /// A name that cannot exist names nothing: 404.
    fn into_not_found(mut self) -> ApiError {
        self.status = StatusCode::NOT_FOUND;
        self
    }
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

async fn repositories(State(web): St, headers: HeaderMap) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(|ctx| {
        let stats = views::repositories(ctx)?;
        Ok(Json(json!({"repositories": stats, "total": stats.len()})))
    })
    .await
}

/// One repository as the list gives it, with phase one's recall.
async fn repository_summary(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(move |ctx| {
        let s = views::repository_summary(ctx, &key)?.ok_or_else(|| no_repository(&key))?;
        Ok(Json(serde_json::to_value(&s).unwrap_or_default()))
    })
    .await
}

async fn daemons(State(web): St, headers: HeaderMap) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(|ctx| {
        let all = crate::app::repo::daemons::list(ctx)?;
        let (pending, running) = views::queue_depth(ctx)?;
        Ok(Json(
            json!({"daemons": all, "queue": {"pending": pending, "running": running}}),
        ))
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRepository {
    /// The repository's name (letters, digits, '-', '_', '.'); made under the data dir's repos/.
    pub name: String,
}

async fn create_repository(
    State(web): St,
    headers: HeaderMap,
    b: Result<Json<CreateRepository>, JsonRejection>,
) -> ApiResult<Response> {
    web.require(&headers, Role::Admin, false)?;
    let b = body(b)?;
    repos::check_name(&b.name)?;
    blocking(move |ctx| {
        let created = repos::create(ctx, Some(&b.name), None, &notify::adopt_history)?;
        Ok((
            StatusCode::CREATED,
            Json(serde_json::to_value(&created).unwrap_or_default()),
        )
            .into_response())
    })
    .await
}

async fn repository_experiments(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let (base, ranked) = compare::ranked(ctx, &repo, &row)?;
        Ok(Json(
            json!({"repository": row.name, "production": base, "experiments": ranked}),
        ))
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlakyQuery {
    /// How many days of runs the flips and rates count (1 to 36500; default 30).
    days: Option<u64>,
}

/// The repository's flaky tests over a window and its quarantined tests, each with its state.
async fn repository_flaky(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
    q: Result<Query<FlakyQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    let q = query(q)?;
    let days = q.days.unwrap_or(views::FLAKY_WINDOW_DAYS);
    if !(1..=36_500).contains(&days) {
        return Err(
            ApiError::bad_request(format!("days={days} is out of range"))
                .hint("give a number of days from 1 to 36500"),
        );
    }
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let tests = views::flaky_report(ctx, &repo, &row, days)?;
        Ok(Json(
            json!({"repository": row.name, "days": days, "total": tests.len(), "tests": tests}),
        ))
    })
    .await
}

/// The experiment, or 404.
fn experiment_of(
    ctx: &crate::app::Context,
    repo: &gix::Repository,
    row: &gs_store::RepoRow,
    name: &str,
) -> ApiResult<()> {
    name_ok(name)?;
    experiments::find(Repo::new(ctx, repo, row), name)?;
    Ok(())
}

async fn experiment(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        experiment_of(ctx, &repo, &row, &name)?;
        let d = experiments::show(Repo::new(ctx, &repo, &row), &name)?;
        Ok(Json(serde_json::to_value(&d).unwrap_or_default()))
    })
    .await
}

async fn experiment_eval(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Run, false)?;
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        experiment_of(ctx, &repo, &row, &name)?;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let ev = eval::evaluate(
            Repo::new(ctx, &repo, &row),
            &name,
            gs_model::Trigger::Api,
            &stop,
        )?;
        Ok(Json(serde_json::to_value(&ev).unwrap_or_default()))
    })
    .await
}

#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct PromoteBody {
    /// Build and test what production would get, and move nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// `merge` or `ff` (default `[promote] strategy`).
    pub strategy: Option<String>,
}

async fn experiment_promote(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    b: Option<Json<PromoteBody>>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Admin, false)?;
    let b = b.map(|Json(b)| b).unwrap_or_default();
    promote_now(key, name, b.dry_run, b.strategy)
        .await
        .map(Json)
}

/// Promote (or dry-run) an experiment: shared by the API and the dashboard's button.
pub async fn promote_now(
    key: String,
    name: String,
    dry_run: bool,
    strategy: Option<String>,
) -> ApiResult<Value> {
    if let Some(s) = strategy.as_deref().filter(|s| !["merge", "ff"].contains(s)) {
        return Err(ApiError::bad_request(format!("bad strategy {s:?}"))
            .hint("use merge or ff; a pull request is opened by `git sandbox promote NAME --strategy pull-request`"));
    }
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        experiment_of(ctx, &repo, &row, &name)?;
        let opts = PromoteOptions {
            strategy: strategy.clone(),
            force: false,
            dry_run,
            watch: None,
            trigger: gs_model::Trigger::Api,
        };
        if crate::app::experiment::promote::strategy(ctx, &repo, &opts)? == "pull-request" {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "this repository promotes by pull request ([promote] strategy)",
            )
            .hint("pass strategy merge or ff, or run `git sandbox promote NAME --strategy pull-request`"));
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let p = promote(Repo::new(ctx, &repo, &row), &name, &opts, &stop)?;
        Ok(serde_json::to_value(&p).unwrap_or_default())
    })
    .await
}

#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct KillBody {
    /// Delete the branch instead of archiving it.
    #[serde(default)]
    pub delete: bool,
}

async fn experiment_kill(
    State(web): St,
    headers: HeaderMap,
    Path((key, name)): Path<(String, String)>,
    b: Option<Json<KillBody>>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Admin, false)?;
    let delete = b.is_some_and(|Json(b)| b.delete);
    kill_now(key, name, delete).await.map(Json)
}

/// Kill an experiment: shared by the API and the dashboard's button.
pub async fn kill_now(key: String, name: String, delete: bool) -> ApiResult<Value> {
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        experiment_of(ctx, &repo, &row, &name)?;
        let k = experiments::kill(Repo::new(ctx, &repo, &row), &name, delete)?;
        Ok(serde_json::to_value(&k).unwrap_or_default())
    })
    .await
}

/// A commit of a repository (any revision git takes), or 404.
pub fn commit_of(repo: &gix::Repository, sha: &str) -> ApiResult<gix::ObjectId> {
    if sha.is_empty() || sha.len() > 256 || sha.starts_with('-') {
        return Err(ApiError::not_found(format!("no commit {sha:?}")));
    }
    Ok(gs_git::resolve_commit(repo, sha)?)
}

async fn commit(
    State(web): St,
    headers: HeaderMap,
    Path((key, sha)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let c = commit_of(&repo, &sha)?;
        let mut reader = results::NoteReader::new(&repo)?;
        match results::find_evidence(Repo::new(ctx, &repo, &row), &mut reader, c)? {
            Some(r) => Ok(Json(serde_json::to_value(&r).unwrap_or_default())),
            None => Err(ApiError::not_found(format!(
                "{} has no result yet",
                gs_util::short(&c.to_string())
            ))
            .hint("queue it with POST /api/v1/runs")),
        }
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    /// Only this repository (id or name).
    pub repo: Option<String>,
    /// Only this status (passed, failed, error, …).
    pub status: Option<String>,
    /// Only runs after this run id (the `next` of the previous page); without it, the newest.
    pub since: Option<i64>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<u32>,
}

/// `limit`, `default` when absent, at most `max`; 0 is a bad request.
fn limit(l: Option<u32>, default: u32, max: u32) -> ApiResult<usize> {
    match l.unwrap_or(default) {
        0 => Err(ApiError::bad_request("limit must be at least 1")),
        n => Ok(n.min(max) as usize),
    }
}

async fn runs(
    State(web): St,
    headers: HeaderMap,
    q: Result<Query<RunsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    let q = query(q)?;
    let n = limit(q.limit, 50, 500)?;
    blocking(move |ctx| {
        let repo_id = match &q.repo {
            Some(k) => Some(repository(ctx, k)?.1.repository_id),
            None => None,
        };
        let page = views::runs(ctx, repo_id.as_deref(), q.status.as_deref(), q.since, n)?;
        let names = views::names(ctx)?;
        let next = page.last().map(|(id, _, _)| *id);
        let runs: Vec<Value> = page
            .into_iter()
            .map(|(id, repo, r)| {
                let mut v = serde_json::to_value(summary::Summary::of(&r, 5)).unwrap_or_default();
                v["id"] = id.into();
                v["repository"] = names.get(&repo).cloned().unwrap_or(repo).into();
                v["ref"] = r.refname.clone().into();
                v["trigger"] = r.trigger.as_str().into();
                v["started_at"] = r.started_at.clone().into();
                v
            })
            .collect();
        Ok(Json(json!({"runs": runs, "next": next})))
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// The repository (id or name).
    pub repo: String,
    /// A revision git takes (a branch, a commit id, HEAD~1) or an experiment's name.
    pub revision: String,
    /// Wait before answering: for the whole result (`result`), or only until the running run's
    /// first failing test is known (`first_failure`: `provisional: true`, the whole result
    /// later from the commit's record). Without it the answer comes at once.
    pub until: Option<queue::Until>,
    /// How long to wait with `until` at most (default 60, at most 600).
    pub timeout_seconds: Option<u64>,
}

async fn request_run(
    State(web): St,
    headers: HeaderMap,
    b: Result<Json<RunBody>, JsonRejection>,
) -> ApiResult<Response> {
    web.require(&headers, Role::Run, false)?;
    let b = body(b)?;
    let wait =
        match (b.until, b.timeout_seconds) {
            (None, None) => None,
            (None, Some(_)) => return Err(ApiError::bad_request(
                "timeout_seconds is only read with until",
            )
            .hint("add \"until\": \"result\" or \"first_failure\", or leave timeout_seconds out")),
            (Some(_), Some(secs)) if secs > 600 => {
                return Err(
                    ApiError::bad_request(format!("timeout_seconds {secs} is over 600")).hint(
                        "wait at most 600 seconds per request, then read the commit's record",
                    ),
                )
            }
            (Some(until), secs) => Some((until, Duration::from_secs(secs.unwrap_or(60)))),
        };
    blocking(move |ctx| {
        let (repo, row) = repository(ctx, &b.repo)?;
        let (commit, refname) = compare::resolve(&repo, &b.revision)?;
        let mut r = queue::request(
            Repo::new(ctx, &repo, &row),
            commit,
            refname.as_deref(),
            Trigger::Api,
        )?;
        if let Some((until, timeout)) = wait.filter(|_| !r.cached) {
            let never = std::sync::atomic::AtomicBool::new(false);
            r.standing = queue::wait(
                Repo::new(ctx, &repo, &row),
                commit,
                refname.as_deref(),
                timeout,
                until,
                &never,
            )?;
        }
        let mut v = json!({
            "commit": commit.to_string(),
            "state": r.standing.state(),
            "cached": r.cached,
            "queued": r.queued,
            "daemon": r.daemon,
            "result": r.standing.record().map(|x| summary::Summary::of(x, 5)),
        });
        if let queue::Standing::Failing { test, ms } = &r.standing {
            v["provisional"] = true.into();
            v["first_failure"] = json!({"test": test, "ms": ms});
        }
        let status = if r.cached || r.standing.record().is_some() || v["provisional"] == true {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        Ok((status, Json(v)).into_response())
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// The 0-based line to start at (`next_offset` of the previous page).
    pub offset: Option<u32>,
    /// At most this many lines (default 200, at most 2000).
    pub limit: Option<u32>,
    /// Only lines containing this text.
    pub grep: Option<String>,
    /// The output of this named check (`[checks.NAME]`) instead of the tests'.
    pub check: Option<String>,
}

async fn run_log(
    State(web): St,
    headers: HeaderMap,
    Path(id): Path<i64>,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    let q = query(q)?;
    let n = limit(q.limit, 200, 2000)?;
    blocking(move |ctx| {
        let (row, record) = views::run(ctx, id)?;
        let page = logs::read(
            ctx,
            &row,
            &record,
            &logs::PageRequest {
                offset: q.offset.unwrap_or(0) as usize,
                limit: n,
                grep: q.grep.clone(),
                check: q.check.clone(),
            },
            |_| true,
        )?;
        Ok(Json(
            json!({"run": id, "commit": record.commit, "page": page}),
        ))
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events after this id; without it, the newest.
    pub since: Option<i64>,
    /// A kind (`run.completed`) or a prefix ending in a dot (`run.`).
    pub kind: Option<String>,
    /// Only this repository (id or name).
    pub repo: Option<String>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<u32>,
}

fn filter(
    ctx: &crate::app::Context,
    repo: Option<&str>,
    kind: Option<String>,
    since: Option<i64>,
    limit: usize,
) -> ApiResult<EventFilter> {
    let repository_id = match repo {
        Some(k) => Some(repository(ctx, k)?.1.repository_id),
        None => None,
    };
    Ok(EventFilter {
        repository_id,
        run_id: None,
        kind,
        not_kind: None,
        since,
        limit: Some(limit as u64),
    })
}

async fn events(
    State(web): St,
    headers: HeaderMap,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    web.require(&headers, Role::Read, true)?;
    let q = query(q)?;
    let n = limit(q.limit, 50, 500)?;
    blocking(move |ctx| {
        let f = filter(ctx, q.repo.as_deref(), q.kind.clone(), q.since, n)?;
        let events = views::events(ctx, &f)?;
        let next = events.last().map(|e| e.id).or(q.since);
        Ok(Json(json!({"events": events, "next": next})))
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Start after this event id (a `Last-Event-ID` header wins); without either, from now.
    pub since: Option<i64>,
    /// A kind or a prefix ending in a dot.
    pub kind: Option<String>,
    /// Only this repository (id or name).
    pub repo: Option<String>,
}

/// Server-sent events: each event as `id:` and `data:` (its JSON), from the index every 250 ms;
/// a client that reconnects with `Last-Event-ID` gets what it missed, nothing twice.
async fn event_stream(
    State(web): St,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, QueryRejection>,
) -> ApiResult<Response> {
    web.require(&headers, Role::Read, true)?;
    let q = query(q)?;
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let (start, filter) = blocking(move |ctx| {
        let f = filter(ctx, q.repo.as_deref(), q.kind.clone(), None, 500)?;
        let start = match resume.or(q.since) {
            Some(s) => s,
            None => views::newest_event(ctx)?,
        };
        Ok((start, f))
    })
    .await?;
    // Each stream keeps its own view of the index, polled on a blocking thread.
    let stream = futures_util::stream::unfold(
        (
            start,
            filter,
            std::collections::VecDeque::<gs_store::Event>::new(),
            None::<crate::app::Context>,
        ),
        |(mut last, mut f, mut queued, mut ctx)| async move {
            loop {
                if let Some(e) = queued.pop_front() {
                    last = e.id;
                    let data = serde_json::to_string(&e).unwrap_or_default();
                    let ev = Event::default().id(e.id.to_string()).data(data);
                    return Some((
                        Ok::<_, std::convert::Infallible>(ev),
                        (last, f, queued, ctx),
                    ));
                }
                f.since = Some(last);
                let f2 = f.clone();
                let (back, found) = tokio::task::spawn_blocking(move || {
                    let ctx = ctx.or_else(|| crate::app::Context::load().ok());
                    let found = ctx
                        .as_ref()
                        .and_then(|c| views::events(c, &f2).ok())
                        .unwrap_or_default();
                    (ctx, found)
                })
                .await
                .unwrap_or_default();
                ctx = back;
                if found.is_empty() {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                } else {
                    queued.extend(found);
                }
            }
        },
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}
