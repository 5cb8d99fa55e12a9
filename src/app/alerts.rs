//! Notifications (`[notify]`): what a user wants to hear about without watching — a run that
//! fails after its parent passed (`run.regressed`), an evaluation whose verdict changed
//! (`eval.changed`), a promotion (`experiment.promoted`) — queued in the index, one row per
//! channel, in the same step that records what happened; delivered by the daemon (or by the
//! command that queued them, briefly) as a JSON POST signed with HMAC-SHA256
//! (`X-Git-Sandbox-Signature-256: sha256=<hex>`) and/or a command. A delivery that fails is tried
//! again with back-off; nothing here ever fails or slows a run.

use super::{Context, Result};
use crate::config::NotifyConfig;
use crate::model::{RunRecord, Status};
use crate::store::{AlertRow, RepoRow};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Attempts of an alert before it is given up.
const ATTEMPTS: i64 = 8;
/// How long a command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Queue an alert on every configured channel. Never fails the caller: the worst is no alert.
pub fn queue(ctx: &Context, kind: &str, row: Option<&RepoRow>, data: Value) {
    let config = ctx.layers.resolve().notify;
    let channels = config.channels();
    if channels.is_empty() {
        return;
    }
    let payload = json!({
        "kind": kind,
        "repository": row.map(|r| json!({"id": r.repository_id, "name": r.name, "path": r.path})),
        "text": text(kind, row.map(|r| r.name.as_str()), &data),
        "data": data,
    });
    for channel in channels {
        let _ = ctx.index.queue_alert(
            channel,
            kind,
            row.map(|r| r.repository_id.as_str()),
            &payload,
        );
    }
}

/// One line for people.
fn text(kind: &str, repo: Option<&str>, d: &Value) -> String {
    let repo = repo.unwrap_or("?");
    let short = |v: &Value| crate::util::short(v.as_str().unwrap_or("")).to_string();
    match kind {
        "run.regressed" => format!(
            "{repo}: {} {} after {} passed{}",
            short(&d["commit"]),
            d["status"].as_str().unwrap_or("failed"),
            short(&d["parent"]),
            d["first_failure"]
                .as_str()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default()
        ),
        "eval.changed" => format!(
            "{repo}: experiment {} is now {} (was {}): {}",
            d["experiment"].as_str().unwrap_or("?"),
            d["to"].as_str().unwrap_or("?"),
            d["from"].as_str().unwrap_or("?"),
            d["reason"].as_str().unwrap_or("")
        ),
        "experiment.promoted" => format!(
            "{repo}: experiment {} was promoted into {} as {}",
            d["experiment"].as_str().unwrap_or("?"),
            d["target"].as_str().unwrap_or("?"),
            short(&d["commit"])
        ),
        _ => format!("{repo}: {kind}"),
    }
}

/// Alerts for records about to be indexed: each run that failed where its first parent's
/// result (in the same batch, else in the index) passed — unless the index holds that very
/// record already (its note was only written again).
pub fn regressions(ctx: &Context, row: &RepoRow, records: &[RunRecord]) {
    if ctx.layers.resolve().notify.channels().is_empty() {
        return;
    }
    let indexed = |commit: &str| {
        ctx.index
            .run_for_commit(&row.repository_id, commit)
            .ok()
            .flatten()
            .map(|run| run.record)
            .filter(RunRecord::is_evidence)
    };
    for r in records {
        if !matches!(r.status, Status::Failed | Status::Timeout | Status::Killed) {
            continue;
        }
        let Some(parent) = r.parents.first() else {
            continue;
        };
        if indexed(&r.commit).is_some_and(|old| old.finished_at == r.finished_at) {
            continue;
        }
        let parent_status = records
            .iter()
            .find(|p| &p.commit == parent)
            .map(|p| p.status)
            .or_else(|| indexed(parent).map(|p| p.status));
        if parent_status != Some(Status::Passed) {
            continue;
        }
        let first_failure = r
            .tests
            .as_ref()
            .and_then(|t| t.failures.first())
            .map(|f| f.name.clone());
        queue(
            ctx,
            "run.regressed",
            Some(row),
            json!({"commit": r.commit, "parent": parent, "ref": r.refname, "status": r.status,
                   "experiment": r.experiment, "first_failure": first_failure}),
        );
    }
}

/// What one round of delivery did.
#[derive(Debug, Default)]
pub struct Delivered {
    pub sent: usize,
    /// Still waiting (to be tried again later).
    pub waiting: i64,
    /// Given up, one line each.
    pub failed: Vec<String>,
}

/// Deliver what is due, until `deadline`.
pub fn deliver_due(ctx: &Context, deadline: Instant) -> Result<Delivered> {
    let config = ctx.layers.resolve().notify;
    let mut out = Delivered::default();
    while Instant::now() < deadline {
        let due = ctx.index.due_alerts(now_epoch(), 20)?;
        if due.is_empty() {
            break;
        }
        for a in due {
            match deliver(&config, &a) {
                Ok(()) => {
                    ctx.index.alert_done(a.id, None)?;
                    out.sent += 1;
                }
                Err((retry, why)) if retry && a.attempts + 1 < ATTEMPTS => {
                    let wait = 5i64 << a.attempts.clamp(0, 10);
                    ctx.index
                        .alert_later(a.id, now_epoch() + wait.min(3600), &why)?;
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

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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
