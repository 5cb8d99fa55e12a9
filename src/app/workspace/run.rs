//! A command in a workspace: in a kept checkout of its base with its layers over it, under the
//! base commit's limits and isolation, reading its experiment's build cache (production's
//! below it) as a run of the branch would. What it writes to its tree and its home becomes the
//! workspace's next layer when it ends by itself — whatever its exit code; a command stopped
//! (timeout, a limit, Ctrl-C, a server going away) leaves the workspace as it was. No process
//! outlives the call: the sandbox's PID namespace goes with it.

use super::{event, take};
use crate::app::experiment::experiments;
use crate::app::run::exec::{self, At, Output, Written};
use crate::app::{AppError, Repo, Result};
use gs_model::EventKind;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A file a command changed, as the workspace's events say it.
#[derive(Debug, Clone, Serialize)]
pub struct Edited {
    pub path: String,
    pub status: gs_model::ChangeStatus,
    pub added: u64,
    pub removed: u64,
}

/// What a command in a workspace did.
pub struct Ran {
    pub outcome: gs_sandbox::process::Outcome,
    pub timeout: Duration,
    /// Why what it wrote was not kept (it was stopped), if it was not.
    pub dropped: Option<String>,
    /// The tracked and not-ignored files it changed (at most [`gs_model::MAX_CHANGED_FILES`]).
    pub edited: Vec<Edited>,
    pub edited_total: u64,
}

/// `workspace exec NAME -- CMD…`.
pub fn exec(
    at: Repo<'_>,
    name: &str,
    argv: &[String],
    timeout: Option<Duration>,
    output: Output,
    interrupt: &AtomicBool,
) -> Result<Ran> {
    let Repo { ctx, repo, row } = at;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(AppError::usage("no command to run").hint(format!(
            "pass it after `--`: git sandbox workspace exec {name} -- make test"
        )));
    }
    let command = exec::command_line(argv)?;
    let t = gs_util::trace::span("workspace: state, lock, budget");
    let (mut found, _held) = take(at, name)?;
    if let Some(b) = experiments::find(at, name)
        .ok()
        .map(|e| experiments::budget(ctx, row, &e))
        .transpose()?
        .flatten()
        .filter(|b| b.exhausted)
    {
        return Err(AppError::refused(format!(
            "experiment {name:?} has spent its CPU budget ({} of {} ms)",
            b.spent_ms, b.limit_ms
        ))
        .hint(format!(
            "raise it with `git sandbox experiment budget {name} 2h`"
        )));
    }
    drop(t);
    let t = gs_util::trace::span("workspace: layers, stage");
    let layers_dir = found.layers();
    let (layers, locks) = gs_runner::caches::workspace_layers(&layers_dir);
    // SAFETY: a plain getter.
    let root = (unsafe { libc::geteuid() } == 0).then_some(0);
    let mut stage =
        gs_runner::caches::Stage::for_workspace(&layers_dir, root).ok_or_else(|| {
            AppError::refused("cannot make the workspace's next layer")
                .hint("check the data dir's disk (`git sandbox doctor`)")
        })?;
    drop(t);
    let line = |_: &gs_runner::rundir::RunDir| Some(command.clone());
    let place = At {
        over: layers,
        branch: Some(format!("experiment/{name}")),
        keep_home: true,
        ..At::commit(ctx, repo, found.base())
    };
    let read = |w: Written| match w {
        Written::Layer(_) => None,
        Written::Whole(_) => Some("the command had no overlay".to_string()),
        Written::Lost(why) => Some(why),
    };
    let (executed, lost) = exec::run_in(
        &place,
        &line,
        &[],
        timeout,
        output,
        interrupt,
        Some((stage.dir(), &read)),
    )?;
    let o = &executed.outcome;
    let dropped = if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
        Some("the command was interrupted".to_string())
    } else if let Some(k) = &o.killed_by {
        Some(format!("the command was stopped ({k})"))
    } else if let Some(e) = &o.spawn_error {
        Some(format!("the command could not start: {e}"))
    } else {
        lost.flatten()
    };
    let t = gs_util::trace::span("workspace: the layer read, published");
    let before = super::commit::view_tree(at, &found)?;
    let mut after = before;
    if dropped.is_none() {
        let layer = stage.dir().join("layer");
        match super::commit::apply_layer(at, &found, before, &layer) {
            Ok(t) => after = t,
            Err(e) => {
                stage.discard();
                return Err(e);
            }
        }
    } else {
        stage.discard();
    }
    drop(locks);
    // Published (or removed) here: the layer becomes the workspace's newest.
    drop(stage);
    drop(t);
    let _t = gs_util::trace::span("workspace: state, events");
    let changes = gs_git::diff::tree_changes(repo, Some(before), after)?;
    found.state.tree = after.to_string();
    found.state.layers_top = found.layers_top();
    found.state.execs += 1;
    found.state.cpu_ms += o.resources.cpu_ms;
    found.state.used_at = gs_util::time::now_rfc3339();
    found.save()?;
    let _ = ctx.index.add_spend(
        &row.repository_id,
        name,
        &found.state.base,
        o.resources.cpu_ms,
        &gs_util::time::now_rfc3339(),
    );
    let shown: String = argv.join(" ").chars().take(500).collect();
    event(
        at,
        EventKind::WorkspaceExec,
        &found.state.base,
        serde_json::json!({"workspace": name, "command": shown, "exit_code": o.exit_code, "signal": o.signal,
            "killed_by": o.killed_by, "duration_ms": o.duration.as_millis() as u64, "kept": dropped.is_none(),
            "files_changed": changes.files_changed}),
    );
    let edited: Vec<Edited> = changes
        .files
        .iter()
        .map(|f| Edited {
            path: f.path.clone(),
            status: f.status.clone(),
            added: f.insertions,
            removed: f.deletions,
        })
        .collect();
    for e in &edited {
        event(
            at,
            EventKind::WorkspaceFileEdited,
            &found.state.base,
            serde_json::json!({"workspace": name, "path": e.path, "by": "exec", "status": e.status, "added": e.added, "removed": e.removed}),
        );
    }
    Ok(Ran {
        outcome: executed.outcome,
        timeout: executed.timeout,
        dropped,
        edited,
        edited_total: changes.files_changed,
    })
}
