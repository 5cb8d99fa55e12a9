//! `daemon --http ADDR`: the daemon's HTTP listener, on tokio and axum in a thread of its own.
//! It serves the API and the dashboard (`crate::http`), `GET /health`, and `POST
//! /webhooks/github` (GitHub, Gitea and Forgejo deliveries) when a webhook secret is set. A
//! delivery is handed to `app::intake::webhook` on a blocking thread and answered at once (202 when
//! recorded); the fetches and runs happen later, in the deliveries thread and the workers.
//! Connections go through [`super::doors`]; unsigned bytes are bounded here: bodies being read
//! hold at most [`IN_FLIGHT`] bytes between them (503 beyond), each hashed as it streams.

use super::supervise::{self, Life};
use crate::app::{intake::webhook, Context};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex};

struct HttpState {
    ctx: Mutex<Context>,
    /// `None`: webhooks are off (no `[remote] webhook_secret_file`).
    secrets: Option<Vec<Vec<u8>>>,
    /// Wakes the deliveries thread when a delivery was recorded.
    wake: Mutex<mpsc::Sender<()>>,
    /// One permit per byte of webhook bodies being read, before their signature is known.
    in_flight: Arc<tokio::sync::Semaphore>,
}

/// Bytes of webhook bodies read at once, before their signatures are checked: two of the largest
/// GitHub delivers, or many ordinary ones.
pub const IN_FLIGHT: usize = 2 * webhook::MAX_BODY;

/// Bind `addr` (an error here stops the daemon's start); the loop that serves it is returned,
/// for the supervisor to start.
pub fn start(
    addr: SocketAddr,
    secrets: Option<Vec<Vec<u8>>>,
    wake: mpsc::Sender<()>,
) -> Result<(SocketAddr, supervise::Body), std::io::Error> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let ctx = Context::load().map_err(|e| std::io::Error::other(e.to_string()))?;
    let state = Arc::new(HttpState {
        ctx: Mutex::new(ctx),
        secrets,
        wake: Mutex::new(wake),
        in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
    });
    let body = move |life: &Life| -> Result<(), String> {
        // Each life serves the same socket: connections wait in its backlog meanwhile.
        let listener = listener
            .try_clone()
            .map_err(|e| format!("the HTTP listener cannot start: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("the HTTP listener cannot start: {e}"))?;
        runtime.block_on(async {
            let app = Router::new()
                .route("/health", get(|| async { "ok\n" }))
                .route("/webhooks/github", post(delivery))
                .with_state(state.clone())
                .merge(crate::http::router());
            let l = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("the HTTP listener cannot start: {e}"))?;
            tokio::select! {
                _ = super::doors::serve(l, app) => Err("it stopped serving".to_string()),
                _ = until_stopped(life) => Ok(()),
            }
        })
    };
    Ok((bound, Box::new(body)))
}

/// Ends when the loop is told to stop (looked at twice a second).
async fn until_stopped(life: &Life) {
    while !life.stopping() {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The first of `names` present, as text.
fn header<'a>(headers: &'a HeaderMap, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| headers.get(*n).and_then(|v| v.to_str().ok()))
}

async fn delivery(State(st): State<Arc<HttpState>>, headers: HeaderMap, body: Body) -> Response {
    let Some(secrets) = st.secrets.clone() else {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "off",
            "webhooks are off on this daemon: set [remote] webhook_secret_file in the user config and restart it",
        );
    };
    // A body GitHub would never send is refused from its announced length, before it is read;
    // one without a length is read only up to the cap.
    let too_big = || {
        answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the body is over 25 MB, more than GitHub ever delivers",
        )
    };
    let announced = header(&headers, &["content-length"]).and_then(|l| l.parse::<u64>().ok());
    if announced.is_some_and(|n| n > webhook::MAX_BODY as u64) {
        return too_big();
    }
    let signature = header(&headers, &["x-hub-signature-256"]).map(str::to_string);
    if signature.is_none() {
        return answer(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "no X-Hub-Signature-256 header: set the webhook's secret",
        );
    }
    let (body, checked, _held) =
        match read_body(&st, &secrets, announced, signature.as_deref(), body).await {
            Ok(read) => read,
            Err(Unread::TooBig) => return too_big(),
            Err(Unread::Busy) => {
                return answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "busy",
                    "too many webhook bodies are being received at once; redeliver it in a moment",
                )
            }
            Err(Unread::Broken(why)) => {
                return answer(StatusCode::REQUEST_TIMEOUT, "bad_body", &why)
            }
        };
    let source = if headers.contains_key("x-forgejo-event") {
        "forgejo"
    } else if headers.contains_key("x-gitea-event") {
        "gitea"
    } else {
        "github"
    };
    let event = header(
        &headers,
        &["x-github-event", "x-gitea-event", "x-forgejo-event"],
    )
    .map(str::to_string);
    let id = header(
        &headers,
        &[
            "x-github-delivery",
            "x-gitea-delivery",
            "x-forgejo-delivery",
        ],
    )
    .map(str::to_string);
    let st2 = st.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let ctx = st2.ctx.lock().unwrap_or_else(|p| p.into_inner());
        webhook::accept(
            &ctx,
            &webhook::Request {
                source,
                event: event.as_deref(),
                delivery: id.as_deref(),
                signature: signature.as_deref(),
                body: &body,
                checked,
            },
        )
    })
    .await;
    let outcome = match outcome {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            super::warn(&format!("a webhook delivery failed: {e}"));
            return answer(StatusCode::INTERNAL_SERVER_ERROR, "error", &e.to_string());
        }
        Err(e) => return answer(StatusCode::INTERNAL_SERVER_ERROR, "error", &e.to_string()),
    };
    use webhook::Outcome as O;
    match outcome {
        O::Unauthorized(m) => answer(StatusCode::UNAUTHORIZED, "unauthorized", &m),
        O::BadRequest(m) => answer(StatusCode::BAD_REQUEST, "bad_request", &m),
        O::Pong => answer(StatusCode::OK, "pong", "the webhook works"),
        O::Ignored(_) => StatusCode::NO_CONTENT.into_response(),
        O::NothingToDo(m) => answer(StatusCode::ACCEPTED, "nothing_to_do", &m),
        O::Duplicate => answer(
            StatusCode::OK,
            "duplicate",
            "this delivery was received before; nothing queued again",
        ),
        O::UnknownRepository(m) => answer(StatusCode::NOT_FOUND, "unknown_repository", &m),
        O::Queued {
            repositories,
            refspec,
        } => {
            let _ = st.wake.lock().unwrap_or_else(|p| p.into_inner()).send(());
            answer(
                StatusCode::ACCEPTED,
                "queued",
                &format!(
                    "fetching {refspec} in {repositories} repositor{}, then its new commits run",
                    if repositories == 1 { "y" } else { "ies" }
                ),
            )
        }
    }
}

/// Why a webhook body was not read whole.
enum Unread {
    TooBig,
    /// The bytes in flight are all taken.
    Busy,
    /// It stopped, or did not arrive in time.
    Broken(String),
}

/// Read a webhook body within the bytes in flight, hashing it as it streams; the bytes it holds
/// are given back when the permit returned with it is dropped.
async fn read_body(
    st: &HttpState,
    secrets: &[Vec<u8>],
    announced: Option<u64>,
    signature: Option<&str>,
    body: Body,
) -> Result<(Vec<u8>, webhook::Checked, tokio::sync::OwnedSemaphorePermit), Unread> {
    let take = |n: usize| {
        u32::try_from(n)
            .ok()
            .and_then(|n| st.in_flight.clone().try_acquire_many_owned(n).ok())
            .ok_or(Unread::Busy)
    };
    // The announced length is reserved before a byte is read, so a refusal costs nothing.
    let reserved = announced.unwrap_or(0) as usize;
    let mut held = take(reserved)?;
    let mut buf = Vec::with_capacity(reserved);
    let mut verifier = webhook::Verifier::new(secrets);
    let mut chunks = body.into_data_stream();
    use futures_util::StreamExt;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| {
            Unread::Broken(format!(
                "the body could not be read: {}",
                std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string())
            ))
        })?;
        if buf.len() + chunk.len() > webhook::MAX_BODY {
            return Err(Unread::TooBig);
        }
        let over = (buf.len() + chunk.len()).saturating_sub(held.num_permits());
        if over > 0 {
            held.merge(take(over)?);
        }
        verifier.update(&chunk);
        buf.extend_from_slice(&chunk);
    }
    Ok((buf, verifier.finish(signature), held))
}

fn answer(code: StatusCode, status: &str, message: &str) -> Response {
    (
        code,
        Json(serde_json::json!({"status": status, "message": message})),
    )
        .into_response()
}

/// The deliveries loop: fetch what recorded deliveries announced and queue their commits, at
/// start (deliveries recorded before a crash) and whenever the listener records one. A fetch
/// that fails is tried again 5 s later, at most 10 times.
pub fn deliveries(wake: mpsc::Receiver<()>) -> supervise::Body {
    Box::new(move |life: &Life| {
        let ctx =
            Context::load().map_err(|e| format!("webhook deliveries cannot be handled: {e}"))?;
        let mut tries: std::collections::HashMap<String, u32> = Default::default();
        let mut wait = std::time::Duration::from_secs(3600);
        loop {
            let mut give_up = |id: &str| {
                let n = tries.entry(id.to_string()).or_insert(0);
                *n += 1;
                *n >= 10
            };
            match webhook::process_pending(&ctx, &mut give_up) {
                Ok(done) => {
                    let failed = done.iter().any(|(_, r)| r.is_err());
                    for (id, r) in done {
                        match r {
                            Ok(n) if n > 0 => {
                                super::log(&format!("webhook {id}: queued {n} commits"))
                            }
                            Ok(_) => {}
                            Err(e) => super::warn(&format!("webhook {id}: {e}")),
                        }
                    }
                    wait = if failed {
                        std::time::Duration::from_secs(5)
                    } else {
                        std::time::Duration::from_secs(3600)
                    };
                }
                Err(e) => super::warn(&format!("webhook deliveries: {e}")),
            }
            // Woken, or the wait is over; a stop is seen within a second.
            let until = std::time::Instant::now() + wait;
            loop {
                if life.stopping() {
                    return Ok(());
                }
                let step = until
                    .saturating_duration_since(std::time::Instant::now())
                    .min(std::time::Duration::from_secs(1));
                if step.is_zero() {
                    break;
                }
                match wake.recv_timeout(step) {
                    Ok(()) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                }
            }
        }
    })
}
