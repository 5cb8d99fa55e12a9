//! Delivering notifications (`[notify]`): a JSON POST signed with HMAC-SHA256
//! (`X-Git-Sandbox-Signature-256: sha256=<hex>`) and/or a command, each channel its own row. A
//! delivery that fails is tried again by the outbox's policy ([`super::RETRY`]).

use super::super::{Context, Result};
use super::now_epoch;
use gs_config::NotifyConfig;
use gs_store::AlertRow;
use hmac::{Hmac, Mac};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// What one round of delivery did.
#[derive(Debug, Default)]
pub struct Delivered {
    pub sent: usize,
    /// Still waiting (to be tried again later).
    pub waiting: i64,
    /// Given up, or (an auto-push) failed this time, one line each.
    pub failed: Vec<String>,
}

/// Deliver the rows of the outbox's table that are due (notifications, and the pushes of
/// `[remote] auto_push`), until `deadline`.
pub fn deliver_due(ctx: &Context, deadline: Instant) -> Result<Delivered> {
    let config = ctx.layers.resolve().notify;
    let mut out = Delivered::default();
    while Instant::now() < deadline {
        let mine = super::push::channel(ctx);
        let due = ctx
            .index
            .due_alerts(now_epoch(), 20, (super::push::CHANNEL_PREFIX, &mine))?;
        if due.is_empty() {
            break;
        }
        for a in due {
            let push = a.channel == mine;
            let delivered = if push {
                super::push::deliver(ctx, &a)
            } else {
                deliver(&config, &a)
            };
            match delivered {
                Ok(()) if push => {
                    // Asked again while it pushed: pushed again at once (the next round).
                    ctx.index.alert_done_unless_asked_again(&a)?;
                    out.sent += 1;
                }
                Ok(()) => {
                    ctx.index.alert_done(a.id, None)?;
                    out.sent += 1;
                }
                Err((retry, why)) if retry && a.attempts + 1 < super::ATTEMPTS => {
                    ctx.index
                        .alert_later(a.id, super::retry_at(a.attempts), &why)?;
                    if push {
                        out.failed.push(super::push::failed(&why));
                    }
                }
                Err((_, why)) if push => {
                    ctx.index.alert_done(a.id, Some(&why))?;
                    out.failed.push(super::push::failed(&why));
                }
                Err((_, why)) => {
                    ctx.index.alert_done(a.id, Some(&why))?;
                    out.failed.push(format!(
                        "notification {} ({}) given up: {why}",
                        a.id, a.kind
                    ));
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
    }
    out.waiting = ctx.index.pending_alerts()?;
    Ok(out)
}

/// Deliver one alert; `Err((worth retrying, why))`.
fn deliver(config: &NotifyConfig, a: &AlertRow) -> std::result::Result<(), (bool, String)> {
    match a.channel.as_str() {
        "webhook" => {
            let Some(url) = &config.webhook else {
                return Err((false, "[notify] webhook is no longer set".into()));
            };
            let key = secret(config).map_err(|e| (false, e))?;
            let body = a.payload.as_bytes().to_vec();
            let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key)
                .map_err(|e| (false, format!("bad key: {e}")))?;
            mac.update(&body);
            let signature = format!("sha256={}", hex(&mac.finalize().into_bytes()));
            post(
                url,
                body,
                &[
                    ("x-git-sandbox-event", a.kind.clone()),
                    ("x-git-sandbox-delivery", a.id.to_string()),
                    ("x-git-sandbox-signature-256", signature),
                ],
            )
        }
        "command" => {
            let Some(command) = &config.command else {
                return Err((false, "[notify] command is no longer set".into()));
            };
            run_command(command, a)
        }
        other => Err((false, format!("unknown channel {other:?}"))),
    }
}

/// The webhook's key: the first line of `[notify] secret_file`.
fn secret(config: &NotifyConfig) -> std::result::Result<Vec<u8>, String> {
    let Some(file) = &config.secret_file else {
        return Err(
            "a webhook is always signed: set [notify] secret_file in your user config".into(),
        );
    };
    let path = match file.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| std::path::Path::new(&h).join(rest))
            .unwrap_or_else(|| file.into()),
        None => file.into(),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read [notify] secret_file {}: {e}", path.display()))?;
    let key = text.lines().next().unwrap_or("").trim();
    if key.is_empty() {
        return Err(format!("[notify] secret_file {} is empty", path.display()));
    }
    Ok(key.as_bytes().to_vec())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// POST `body` to `url`: a 2xx is delivered; a 4xx other than 408 and 429 will never be, the rest
/// are worth another try.
fn post(
    url: &str,
    body: Vec<u8>,
    headers: &[(&str, String)],
) -> std::result::Result<(), (bool, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (true, format!("cannot start the HTTP runtime: {e}")))?;
    rt.block_on(async {
        let client = octocrab::Octocrab::builder()
            .set_connect_timeout(Some(Duration::from_secs(5)))
            .set_read_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| (true, format!("cannot build the HTTP client: {e}")))?;
        let mut req = http::Request::post(url).header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req
            .body(body)
            .map_err(|e| (false, format!("bad request to {url}: {e}")))?;
        let res = client.execute(req).await.map_err(|e| {
            (
                true,
                format!("{url}: {}", e.to_string().lines().next().unwrap_or("")),
            )
        })?;
        let status = res.status().as_u16();
        match status {
            200..=299 => Ok(()),
            408 | 429 => Err((true, format!("{url} answered {status}"))),
            400..=499 => Err((false, format!("{url} answered {status}"))),
            _ => Err((true, format!("{url} answered {status}"))),
        }
    })
}

/// Run `[notify] command` with the alert: its JSON on stdin, its kind and line in
/// `GIT_SANDBOX_ALERT` and `GIT_SANDBOX_MESSAGE`.
fn run_command(command: &str, a: &AlertRow) -> std::result::Result<(), (bool, String)> {
    use std::io::Write;
    let message = serde_json::from_str::<Value>(&a.payload)
        .ok()
        .and_then(|v| v["text"].as_str().map(str::to_string))
        .unwrap_or_default();
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", command])
        .env("GIT_SANDBOX_ALERT", &a.kind)
        .env("GIT_SANDBOX_MESSAGE", &message)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| (true, format!("cannot start [notify] command: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(a.payload.as_bytes());
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err((true, format!("[notify] command exited with {s}"))),
            Ok(None) if started.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err((
                    true,
                    "[notify] command ran past 10 s and was stopped".into(),
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err((true, format!("[notify] command: {e}"))),
        }
    }
}
