//! `daemon --http ADDR`: the daemon's HTTP listener, on tokio and axum in a thread of its own.
//! It serves the API and the dashboard (`crate::http`), `GET /health`, and `POST
//! /webhooks/github` (GitHub, Gitea and Forgejo deliveries) when a webhook secret is set. A
//! delivery is handed to `app::webhook` on a blocking thread and answered at once (202 when
//! recorded); the fetches and runs happen later, in the deliveries thread and the workers.

use crate::app::{webhook, Context};
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
}

/// Bind `addr` (an error here stops the daemon's start) and serve on a thread of its own.
pub fn start(
    addr: SocketAddr,
    secrets: Option<Vec<Vec<u8>>>,
    wake: mpsc::Sender<()>,
) -> Result<SocketAddr, std::io::Error> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let ctx = Context::load().map_err(|e| std::io::Error::other(e.to_string()))?;
    let state = Arc::new(HttpState {
        ctx: Mutex::new(ctx),
        secrets,
        wake: Mutex::new(wake),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let app = Router::new()
                    .route("/health", get(|| async { "ok\n" }))
                    .route("/webhooks/github", post(delivery))
                    .with_state(state)
                    .merge(crate::http::router());
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => {
                        if let Err(e) = axum::serve(l, app).await {
                            super::warn(&format!("the HTTP listener stopped: {e}"));
                        }
                    }
                    Err(e) => super::warn(&format!("the HTTP listener cannot start: {e}")),
                }
            });
        })?;
    Ok(bound)
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
    let Ok(body) = axum::body::to_bytes(body, webhook::MAX_BODY).await else {
        return too_big();
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
    let signature = header(&headers, &["x-hub-signature-256"]).map(str::to_string);
    let st2 = st.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let ctx = st2.ctx.lock().unwrap_or_else(|p| p.into_inner());
        webhook::accept(
            &ctx,
            &secrets,
            &webhook::Request {
                source,
                event: event.as_deref(),
                delivery: id.as_deref(),
                signature: signature.as_deref(),
                body: &body,
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

fn answer(code: StatusCode, status: &str, message: &str) -> Response {
    (
        code,
        Json(serde_json::json!({"status": status, "message": message})),
    )
        .into_response()
}

/// The deliveries thread: fetch what recorded deliveries announced and queue their commits, at
/// start (deliveries recorded before a crash) and whenever the listener records one. A fetch
/// that fails is tried again with back-off, at most 10 times.
pub fn start_deliveries(wake: mpsc::Receiver<()>) {
    let _ = std::thread::Builder::new()
        .name("deliveries".into())
        .spawn(move || {
            let ctx = match Context::load() {
                Ok(c) => c,
                Err(e) => {
                    super::warn(&format!("webhook deliveries cannot be handled: {e}"));
                    return;
                }
            };
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
                match wake.recv_timeout(wait) {
                    Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        });
}
