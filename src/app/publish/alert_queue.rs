//! Notifications (`[notify]`): what a user wants to hear about without watching — a run that
//! fails after its parent passed (`run.regressed`), an evaluation whose verdict changed
//! (`eval.changed`), a promotion (`experiment.promoted`) — queued in the index, one row per
//! channel, in the same step that records what happened; the outbox (`publish/`) delivers them.

use crate::app::Context;
use gs_model::{EventKind, RunRecord, Status};
use gs_store::RepoRow;
use serde_json::{json, Value};

/// Queue an alert on every configured channel. Never fails the caller: the worst is no alert.
pub(super) fn queue(ctx: &Context, kind: EventKind, row: Option<&RepoRow>, data: Value) {
    let config = ctx.layers.resolve().notify;
    let channels = config.channels();
    if channels.is_empty() {
        return;
    }
    let payload = json!({
        "kind": kind.as_str(),
        "repository": row.map(|r| json!({"id": r.repository_id, "name": r.name, "path": r.path})),
        "text": text(kind, row.map(|r| r.name.as_str()), &data),
        "data": data,
    });
    for channel in channels {
        let _ = ctx.index.queue_alert(
            channel,
            kind.as_str(),
            row.map(|r| r.repository_id.as_str()),
            &payload,
        );
    }
}

/// One line for people.
fn text(kind: EventKind, repo: Option<&str>, d: &Value) -> String {
    let repo = repo.unwrap_or("?");
    let short = |v: &Value| gs_util::short(v.as_str().unwrap_or("")).to_string();
    match kind {
        EventKind::RunRegressed => format!(
            "{repo}: {} {} after {} passed{}",
            short(&d["commit"]),
            d["status"].as_str().unwrap_or("failed"),
            short(&d["parent"]),
            d["first_failure"]
                .as_str()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default()
        ),
        EventKind::EvalChanged => format!(
            "{repo}: experiment {} is now {} (was {}): {}",
            d["experiment"].as_str().unwrap_or("?"),
            d["to"].as_str().unwrap_or("?"),
            d["from"].as_str().unwrap_or("?"),
            d["reason"].as_str().unwrap_or("")
        ),
        EventKind::ExperimentPromoted => format!(
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
pub(super) fn regressions(ctx: &Context, row: &RepoRow, records: &[RunRecord]) {
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
            EventKind::RunRegressed,
            Some(row),
            json!({"commit": r.commit, "parent": parent, "ref": r.refname, "status": r.status,
                   "experiment": r.experiment, "first_failure": first_failure}),
        );
    }
}
