//! A run that could not run its tests here ([`gs_model::could_not_run`]) beside a result of
//! the same tree and config: the result stays the commit's (note, summary, index), and the run
//! is kept as an attempt (index and a `run.attempt` event).

use super::{Along, Source};
use crate::app::{records::results, Context, Repo, Result};
use gs_config::Config;
use gs_git as git;
use gs_git::CommitInfo;
use gs_model::EventKind;
use gs_model::{could_not_run, NoteRecord, RunRecord};
use gs_store::RepoRow;

/// The result `info` keeps when `made`, its run now, could not run its tests: its own record
/// (its note, else the index's), else the newest of its tree's, made under the same config.
/// The same config means the same settings with the tools that result was made with: a tool
/// missing here changes the config's key (its fingerprint is part of it) yet is no reason to
/// drop a result made where the tool was. `None`: there is no such result, and `made` (its
/// `error`) is recorded as it is.
fn kept_result(
    at: Repo<'_>,
    info: &CommitInfo,
    made: &RunRecord,
    along: &mut Along,
) -> Result<Option<(RunRecord, Source)>> {
    let Repo { ctx, repo, row } = at;
    let Some((_, config, key)) = along.configs.get(&info.tree) else {
        return Ok(None);
    };
    let tree = info.tree.to_string();
    // Only evidence is kept in place of a run: a report nobody here trusts never is.
    let same = |r: &RunRecord| {
        r.is_evidence()
            && r.tree == tree
            && r.status.is_result()
            && r.config_hash.as_deref().is_some_and(|k| {
                k == key.as_str() || k == tools_as_then(config, r).result_key().as_str()
            })
    };
    let commit = info.id.to_string();
    let own = match along.reader.read(ctx, repo, info.id)? {
        Some(NoteRecord::Found(r)) => Some((*r, Source::Recorded)),
        // A note that holds no record for this commit: it was not run.
        Some(_) => None,
        None => ctx
            .index
            .run_for_commit(&row.repository_id, &commit)?
            .map(|run| (run.record, Source::Indexed)),
    };
    if let Some((r, source)) = own.filter(|(r, _)| r.commit == commit && same(r)) {
        if source == Source::Recorded
            && ctx
                .index
                .run_for_commit(&row.repository_id, &commit)?
                .is_none()
        {
            ctx.index.put_run(&row.repository_id, &r)?;
        }
        return Ok(Some((r, source)));
    }
    let served = along
        .seen
        .get(&(info.tree, key.clone()))
        .filter(|r| r.cached_from.as_deref() != Some(commit.as_str()))
        .cloned()
        .or_else(|| {
            // The tree's newest result under any key, when its settings are these.
            ctx.index
                .run_for_tree(&row.repository_id, &tree, None, &commit)
                .ok()
                .flatten()
                .map(|run| run.record)
                .filter(|r| same(r))
                .or_else(|| results::tree_hit(Repo::new(ctx, repo, row), info, key))
        });
    let Some(mut r) = served else {
        return Ok(None);
    };
    r.cached_from = Some(r.cached_from.take().unwrap_or_else(|| r.commit.clone()));
    r.commit = commit;
    r.parents = made.parents.clone();
    r.refname = made.refname.clone();
    r.experiment = made.experiment.clone();
    r.trigger = made.trigger;
    r.started_at = made.started_at.clone();
    r.finished_at = made.finished_at.clone();
    r.duration_ms = made.duration_ms;
    r.changes = match &made.changes {
        Some(c) => Some(c.clone()),
        None => git::diff::commit_changes(repo, info).ok(),
    };
    Ok(Some((r, Source::Made)))
}

/// `config` with the tools `r` was made with.
fn tools_as_then(config: &Config, r: &RunRecord) -> Config {
    let mut c = config.clone();
    c.toolchain = r.toolchain.clone();
    c
}

/// The attempts of a run's batch, kept when its results are written.
#[derive(Default)]
pub(super) struct Pending {
    /// Runs that could not run their tests, with why.
    attempts: Vec<(RunRecord, String)>,
    /// Commits whose tests ran now: their attempts end.
    pub ended: Vec<String>,
}

impl Pending {
    /// What `made`, a record made now for `info`, gives the commit: when it could not run its
    /// tests ([`could_not_run`]) and a result of the same tree and config is there
    /// ([`kept_result`]), that result, `made` waiting here as an attempt; else `made` itself.
    pub fn instead(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        row: &RepoRow,
        info: &CommitInfo,
        made: RunRecord,
        along: &mut Along,
    ) -> Result<(RunRecord, Source)> {
        let Some(why) = could_not_run(&made) else {
            return Ok((made, Source::Made));
        };
        match kept_result(Repo::new(ctx, repo, row), info, &made, along)? {
            Some(kept) => {
                self.attempts.push((made, why));
                Ok(kept)
            }
            None => Ok((made, Source::Made)),
        }
    }

    /// Keep the attempts in the index, each with a `run.attempt` event, and forget those of
    /// the commits whose tests ran; returns the attempts kept.
    pub fn keep(&mut self, ctx: &Context, row: &RepoRow) -> Result<Vec<RunRecord>> {
        if self.attempts.is_empty() && self.ended.is_empty() {
            return Ok(Vec::new());
        }
        ctx.index.atomically(|| {
            let ended: Vec<&str> = self.ended.iter().map(String::as_str).collect();
            ctx.index.end_attempts(&row.repository_id, &ended)?;
            for (r, reason) in &self.attempts {
                ctx.index.add_attempt(&row.repository_id, r, reason)?;
                ctx.index.add_event(
                    EventKind::RunAttempt,
                    Some(&row.repository_id),
                    None,
                    Some(&r.commit),
                    &serde_json::json!({"status": r.status, "reason": reason, "trigger": r.trigger, "duration_ms": r.duration_ms, "tree": r.tree, "config_hash": r.config_hash}),
                )?;
            }
            Ok::<_, crate::app::AppError>(())
        })?;
        self.ended.clear();
        Ok(self.attempts.drain(..).map(|(r, _)| r).collect())
    }
}
