//! The HTTP listener's doors: an accept loop of our own (`axum::serve` has no limits) that holds
//! at most [`MAX_CONNECTIONS`] connections per listener (one more is closed at once), closes a
//! connection whose request head is not in within [`HEADER_TIMEOUT`] (idle keep-alive included),
//! and gives every request body [`BODY_TIMEOUT`] to arrive.

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use futures_util::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;

/// Connections one listener serves at once; it is well above what the dashboard, the API's
/// clients and GitHub open, and far below the daemon's file descriptors.
pub const MAX_CONNECTIONS: usize = 256;
/// A request's head (line and headers) must arrive within this, from the connection's start or
/// the previous answer.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A request's body must arrive within this from its head (25 MB at under 1 MB/s).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve `app` on `listener` until the runtime stops.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) {
    let app = app.layer(axum::middleware::from_fn(body_deadline));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors or a connection reset before it was taken: keep serving.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let _ = http
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            drop(slot);
        });
    }
}

/// The error a body that did not arrive in time ends with.
#[derive(Debug)]
pub struct TooSlow;

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} s",
            BODY_TIMEOUT.as_secs()
        )
    }
}

impl std::error::Error for TooSlow {}

/// Every request body ends with [`TooSlow`] once [`BODY_TIMEOUT`] has passed since its head.
async fn body_deadline(req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let deadline = tokio::time::Instant::now() + BODY_TIMEOUT;
    let req = req.map(|body| {
        let chunks = body.into_data_stream();
        Body::from_stream(futures_util::stream::unfold(
            Some(chunks),
            move |chunks| async move {
                let mut chunks = chunks?;
                match tokio::time::timeout_at(deadline, chunks.next()).await {
                    Ok(Some(item)) => Some((item, Some(chunks))),
                    Ok(None) => None,
                    Err(_) => Some((Err(axum::Error::new(TooSlow)), None)),
                }
            },
        ))
    });
    next.run(req).await
}
