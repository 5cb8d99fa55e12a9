//! Taking a promotion back: when production's run of the promoted commit fails
//! (`promote --watch`, `[promote] rollback = true`), a commit reverting the promotion is put on
//! production's tip, a fast-forward (never a rewrite of history), and the experiment is marked
//! rolled back with why (`refs/sandbox/rolled-back/<name>` points at the revert).

use crate::app::experiment::experiments::{self, rolled_back_ref};
use crate::app::experiment::promote::{advance, Stuck};
use crate::app::run::{run_commits, RunOptions};
use crate::app::{AppError, Repo, Result};
use gs_git::cli;
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_model::{RunRecord, State, Trigger};
use std::path::Path;
use std::sync::atomic::AtomicBool;

#[derive(Debug, serde::Serialize)]
pub struct RolledBack {
    pub experiment: String,
    pub target: String,
    /// The promoted commit whose run failed.
    pub promoted: String,
    /// The revert commit production now points at.
    pub revert: String,
    pub reason: String,
    /// Production's run of the revert commit.
    pub result: Option<RunRecord>,
}

/// Why a run counts as production failing, in a phrase: its status and the first failures.
pub fn failure_reason(r: &RunRecord) -> String {
    let mut why = format!(
        "production's run of {} is {}",
        gs_util::short(&r.commit),
        r.status
    );
    if let Some(t) = &r.tests {
        let names: Vec<&str> = t.failures.iter().take(3).map(|f| f.name.as_str()).collect();
        if !names.is_empty() {
            why.push_str(&format!(" ({})", names.join(", ")));
        }
    }
    if let Some(e) = &r.error {
        why.push_str(&format!(": {}", e.lines().next().unwrap_or(e)));
    }
    why
}

/// Revert the promotion of `name` on production's tip and run the revert.
///
/// Production went from `previous` to `promoted`; it moves to the revert by compare-and-swap
/// (through a clean checkout of it when there is one), and the experiment is marked rolled
/// back.
#[allow(clippy::too_many_arguments)]
pub fn roll_back(
    at: Repo<'_>,
    name: &str,
    target: &str,
    previous: ObjectId,
    promoted: ObjectId,
    reason: &str,
    interrupt: &AtomicBool,
) -> Result<RolledBack> {
    let Repo { ctx, repo, row } = at;
    let dir = experiments::git_dir_for_cli(repo);
    let production = format!("refs/heads/{target}");
    let tip = experiments::ref_tip(repo, &production)?.ok_or_else(|| {
        AppError::refused(format!(
            "rollback failed: the production branch {target} is gone; nothing was changed"
        ))
    })?;
    let revert = revert_commit(&dir, name, target, previous, promoted, tip, reason)?;
    let message = format!("git-sandbox: roll back experiment {name}");
    let by_hand = format!("revert it by hand: git revert -m 1 {promoted}");
    let worktrees = cli::worktrees_on(&dir, target)?;
    match advance(&dir, target, tip, revert, &message, worktrees.first()) {
        Ok(_) => {}
        Err(Stuck::Checkout(wt, err)) => {
            return Err(AppError::refused(format!(
                "rollback failed: cannot update the checkout of {target} in {}: {err}; production still has experiment {name}",
                wt.display()
            ))
            .hint(by_hand))
        }
        Err(Stuck::Moved(e)) => {
            return Err(AppError::refused(format!(
                "rollback failed: {target} moved while rolling back ({e}); production still has experiment {name}"
            ))
            .hint(by_hand))
        }
        Err(Stuck::Other(e)) => return Err(e),
    }
    cli::update_refs(
        &dir,
        &format!("update {} {revert}\n", rolled_back_ref(name)),
        &message,
    )?;
    ctx.index
        .set_experiment_state(&row.repository_id, name, State::RolledBack)?;
    let data = serde_json::json!({"experiment": name, "target": target, "promoted": promoted.to_string(),
                                  "revert": revert.to_string(), "reason": reason});
    crate::app::publish::emit(
        ctx,
        crate::app::publish::Event::News {
            kind: EventKind::ExperimentRolledBack,
            row: Some(row),
            data: data.clone(),
        },
    );
    ctx.index.add_event(
        EventKind::ExperimentRolledBack,
        Some(&row.repository_id),
        None,
        Some(&revert.to_string()),
        &data,
    )?;
    // Production's run of what it is now: the tree it had before, so usually its result already.
    let opts = RunOptions::new(Trigger::Manual, Some(production), interrupt);
    let result = run_commits(at, &[revert], &opts, &mut |_| {})?
        .records
        .into_iter()
        .next();
    Ok(RolledBack {
        experiment: name.to_string(),
        target: target.to_string(),
        promoted: promoted.to_string(),
        revert: revert.to_string(),
        reason: reason.to_string(),
        result,
    })
}

/// The commit on `tip` that undoes what `promoted` brought over `previous`.
///
/// A three-way merge with `promoted` as base, so what landed on production since is kept; made
/// in the object store only.
fn revert_commit(
    dir: &Path,
    name: &str,
    target: &str,
    previous: ObjectId,
    promoted: ObjectId,
    tip: ObjectId,
    reason: &str,
) -> Result<ObjectId> {
    let (ok, out, err) = cli::git_status(
        dir,
        &[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            &format!("--merge-base={promoted}"),
            &tip.to_string(),
            &previous.to_string(),
        ],
        &[],
    )?;
    let tree = out.lines().next().unwrap_or("").trim().to_string();
    if !ok || tree.is_empty() {
        let files: Vec<&str> = out.lines().skip(1).take_while(|l| !l.is_empty()).collect();
        return Err(AppError::refused(format!(
            "rollback failed: reverting experiment {name} on {target} conflicts{}; production still has it",
            if files.is_empty() {
                format!(" ({})", err.trim())
            } else {
                format!(" in {}", files.join(", "))
            }
        ))
        .hint(format!("revert it by hand: git revert -m 1 {promoted}")));
    }
    let message = format!(
        "Roll back experiment {name}\n\n{reason}; this reverts {promoted}, its promotion into {target}.\n\nGit-Sandbox-Experiment: {name}\nGit-Sandbox-Rollback: {promoted}\n"
    );
    let env = cli::fallback_identity(dir);
    let commit = cli::git_with_env(
        dir,
        &["commit-tree", &tree, "-p", &tip.to_string(), "-m", &message],
        &env,
    )?;
    ObjectId::from_hex(commit.trim().as_bytes())
        .map_err(|e| gs_git::GitError::gix_in("git commit-tree gave no commit id", e).into())
}
