//! The workspace tools: an agent's live sandbox on an experiment's branch (see
//! `app/workspace`). Each parses, calls `app/`, and renders a compact answer.

use super::args::*;
use super::budget::{self, fit};
use super::tools::{tail, Answer, Call, CallError};
use crate::app::run::exec::Output;
use crate::app::{workspace, AppError, Repo};
use gs_model::Trigger;
use serde_json::json;
use std::time::Duration;

fn at<'a>(c: &'a Call<'a>) -> Repo<'a> {
    Repo::new(c.ctx, c.repo, c.row)
}

pub(super) fn workspace_new(c: &Call<'_>, a: WorkspaceNewArgs) -> Answer {
    let w = workspace::new(at(c), &a.name, a.from.as_deref())?;
    Ok(json!({
        "workspace": w.state.name,
        "branch": w.branch,
        "base": w.state.base,
        "next": format!("run commands with workspace_exec, edit with workspace_write_file, then workspace_commit {{name: {:?}}}", w.state.name),
    }))
}

pub(super) fn workspace_list(c: &Call<'_>, _: NoArgs) -> Answer {
    let all = workspace::list(at(c))?;
    Ok(fit(
        serde_json::to_value(&all).expect("workspaces serialize"),
        budget::budget(false),
    ))
}

pub(super) fn workspace_exec(c: &Call<'_>, a: WorkspaceExecArgs) -> Answer {
    if a.command.is_empty() || a.command[0].is_empty() {
        return Err(CallError::Arguments(
            AppError::usage("bad arguments for workspace_exec: command is empty")
                .hint("pass the command and its arguments as a list, e.g. [\"make\", \"test\"]"),
        ));
    }
    let budget = budget::budget(a.detail);
    let ran = workspace::exec(
        at(c),
        &a.name,
        &a.command,
        a.timeout_seconds.map(Duration::from_secs),
        Output::Capture(1 << 20),
        c.interrupt,
    )?;
    let o = &ran.outcome;
    if let Some(e) = &o.spawn_error {
        return Err(CallError::App(AppError::refused(format!(
            "the command could not be started: {e}"
        ))));
    }
    let (output, cut) = tail(&o.output, budget.saturating_sub(600));
    let edited: Vec<serde_json::Value> = ran
        .edited
        .iter()
        .take(20)
        .map(
            |e| json!({"path": e.path, "status": e.status, "added": e.added, "removed": e.removed}),
        )
        .collect();
    Ok(fit(
        json!({
            "workspace": a.name,
            "exit_code": o.exit_code,
            "signal": o.signal,
            "killed_by": o.killed_by,
            "duration_ms": o.duration.as_millis() as u64,
            "timeout_seconds": ran.timeout.as_secs(),
            "kept": ran.dropped.is_none(),
            "dropped": ran.dropped,
            "files_changed": ran.edited_total,
            "edited": edited,
            "output": output,
            "output_cut": cut || o.truncated,
        }),
        budget,
    ))
}

pub(super) fn workspace_read_file(c: &Call<'_>, a: WorkspaceFileArgs) -> Answer {
    let f = workspace::read_file(at(c), &a.name, &a.path)?;
    let room = budget::budget(true).saturating_sub(400);
    let mut v = json!({"path": f.path, "size": f.size, "executable": f.executable});
    match std::str::from_utf8(&f.bytes) {
        Ok(text) if text.len() <= room => v["content"] = text.into(),
        Ok(_) => {
            v["content"] = String::from_utf8_lossy(&f.bytes[..room])
                .into_owned()
                .into();
            v["content_cut"] = true.into();
            v["hint"] = "the file is longer: read the rest with workspace_exec (e.g. [\"sed\", \"-n\", \"200,400p\", PATH])".into();
        }
        Err(_) => {
            v["binary"] = true.into();
            v["hint"] =
                "a binary file: inspect it with workspace_exec (e.g. [\"xxd\", PATH])".into();
        }
    }
    Ok(v)
}

pub(super) fn workspace_write_file(c: &Call<'_>, a: WorkspaceWriteArgs) -> Answer {
    let w = workspace::write_file(at(c), &a.name, &a.path, a.content.as_bytes())?;
    Ok(serde_json::to_value(&w).expect("writes serialize"))
}

pub(super) fn workspace_diff(c: &Call<'_>, a: WorkspaceArgs) -> Answer {
    let d = workspace::diff(at(c), &a.name)?;
    let room = budget::budget(true).saturating_sub(800);
    let (patch, cut) = if d.patch.len() > room {
        let mut end = room;
        while !d.patch.is_char_boundary(end) {
            end -= 1;
        }
        (format!("{}…", &d.patch[..end]), true)
    } else {
        (d.patch.clone(), false)
    };
    Ok(json!({
        "workspace": d.workspace,
        "base": d.base,
        "files_changed": d.files.files_changed,
        "insertions": d.files.insertions,
        "deletions": d.files.deletions,
        "patch": patch,
        "patch_cut": cut,
    }))
}

pub(super) fn workspace_commit(c: &Call<'_>, a: WorkspaceCommitArgs) -> Answer {
    let done = workspace::commit(at(c), &a.name, &a.message, Trigger::Mcp, true)?;
    Ok(json!({
        "workspace": done.workspace,
        "commit": done.commit,
        "branch": done.branch,
        "parent": done.parent,
        "files_changed": done.files.files_changed,
        "queued": done.queued,
        "next": format!("call run_wait {{revision: {:?}}} for its verdict", done.commit),
    }))
}

pub(super) fn workspace_rm(c: &Call<'_>, a: WorkspaceRmArgs) -> Answer {
    let r = workspace::rm(at(c), &a.name, a.kill)?;
    Ok(serde_json::to_value(&r).expect("removals serialize"))
}
