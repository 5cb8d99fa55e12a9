//! Audits of warm results, off the critical path: now and then the daemon runs a branch's newest
//! warm result again cold. A warm run read what earlier runs of its branch left in the build
//! cache, and a commit's tests can leave there what decides a later run (a patched dependency
//! in `node_modules/`, a doctored rlib in `target/`); a cold run read nothing of it. When the two
//! disagree, the branch's cache is discarded (the cold run's writes are its new base), the
//! results made on the discarded generations are made again, and the event log and `doctor`
//! say so. Verdicts that decide (`eval`, `promote`) never wait for an audit: they are witnessed
//! cold themselves (see `experiment::eval`).
//!
//! At most one audit per branch per `[audit] generations` new generations or per `[audit]
//! every` (with at least one new generation), whichever comes first, so that the cold runs stay
//! a small share of the machine; `generations = 0` switches audits off.

use super::{run_commits, RunOptions};
use crate::app::{Context, Repo, Result};
use gs_git::ObjectId;
use gs_model::{EventKind, RunRecord, Status, Trigger};
use gs_runner::caches::{self, AuditState};
use gs_store::RepoRow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;

/// What an audit found.
#[derive(Debug, Clone)]
pub struct Audited {
    pub branch: String,
    pub commit: String,
    pub warm: Status,
    pub cold: Option<Status>,
    pub state: AuditState,
}

/// The records of `made` (a batch's) whose branch is due an audit, each audited: its branch's
/// newest warm, first-hand result, run again cold.
pub fn after(
    ctx: &Context,
    row: &RepoRow,
    made: &[RunRecord],
    interrupt: &AtomicBool,
) -> Result<Vec<Audited>> {
    let cfg = ctx.layers.resolve().audit;
    // `generations = 0`: no audits at all.
    if cfg.generations == 0 {
        return Ok(Vec::new());
    }
    // Each branch's newest warm result among those just made.
    let mut newest: BTreeMap<String, &RunRecord> = BTreeMap::new();
    for r in made.iter().filter(|r| auditable(r)) {
        let Some(branch) = r
            .refname
            .as_deref()
            .and_then(|b| b.strip_prefix("refs/heads/"))
        else {
            continue;
        };
        let slot = newest.entry(branch.to_string()).or_insert(r);
        if r.finished_at > slot.finished_at {
            *slot = r;
        }
    }
    if newest.is_empty() {
        return Ok(Vec::new());
    }
    let repo = gs_git::open_recent(std::path::Path::new(&row.path))?;
    let home = ctx.paths.caches();
    let key = gs_runner::rundir::repo_key(&repo);
    let now = gs_util::time::now_millis();
    let mut out = Vec::new();
    for (branch, warm) in newest {
        let Some(top) = own_generation(warm, &branch) else {
            continue;
        };
        let last = caches::audit_state(&home, &key, &branch);
        let due = match &last {
            // Counting starts where the branch is now.
            None => false,
            Some(l) => {
                let by_count = top >= l.generation + cfg.generations;
                let by_time = top > l.generation && now - l.at_ms >= cfg.every.as_millis() as i64;
                by_count || by_time
            }
        };
        if !due {
            if last.is_none() {
                let start = AuditState {
                    generation: top,
                    at_ms: now,
                    ..AuditState::default()
                };
                caches::set_audit_state(&home, &key, &branch, &start);
            }
            continue;
        }
        out.push(audit(Repo::new(ctx, &repo, row), &branch, warm, interrupt)?);
    }
    Ok(out)
}

/// A result an audit may question: made here, first-hand, warm, of a commit named through its
/// branch, with a result.
fn auditable(r: &RunRecord) -> bool {
    r.cached_from.is_none() && !r.is_cold() && r.status.is_result() && !r.snapshot
}

/// The number of the newest generation of `branch`'s own that `r` read (`branch@N`).
fn own_generation(r: &RunRecord, branch: &str) -> Option<u64> {
    r.cache_generations
        .iter()
        .filter_map(|g| g.strip_prefix(branch)?.strip_prefix('@')?.parse().ok())
        .max()
}

/// Run `warm`'s commit again cold and compare; on a disagreement, make again the results that
/// read the generations the cold run's new base discarded.
fn audit(at: Repo<'_>, branch: &str, warm: &RunRecord, interrupt: &AtomicBool) -> Result<Audited> {
    let Repo { ctx, repo, row } = at;
    let refname = format!("refs/heads/{branch}");
    let commit = ObjectId::from_hex(warm.commit.as_bytes())
        .map_err(|_| crate::app::AppError::usage("a record names no commit"))?;
    let cold_opts = RunOptions {
        force: true,
        clean: true,
        ..RunOptions::new(Trigger::Watch, Some(refname.clone()), interrupt)
    };
    let cold = run_commits(at, &[commit], &cold_opts, &mut |_| {})?
        .records
        .into_iter()
        .next();
    let discarded: Vec<String> = warm
        .cache_generations
        .iter()
        .filter(|g| g.starts_with(&format!("{branch}@")))
        .cloned()
        .collect();
    let mut state = AuditState {
        generation: own_generation(warm, branch).unwrap_or(0),
        at_ms: gs_util::time::now_millis(),
        commit: Some(warm.commit.clone()),
        ..AuditState::default()
    };
    let outcome = match &cold {
        Some(c) if c.status.is_result() => {
            if same_outcome(warm, c) {
                "agreed"
            } else {
                "disagreed"
            }
        }
        _ => "inconclusive",
    };
    state.outcome = Some(outcome.to_string());
    if outcome == "disagreed" {
        state.discarded = discarded.clone();
        state.rerun = rerun_made_on(at, &refname, &discarded, &warm.commit, interrupt)?;
    }
    let key = gs_runner::rundir::repo_key(repo);
    caches::set_audit_state(&ctx.paths.caches(), &key, branch, &state);
    ctx.index.add_event(
        EventKind::CacheAudited,
        Some(&row.repository_id),
        None,
        Some(&warm.commit),
        &serde_json::json!({
            "branch": branch,
            "outcome": outcome,
            "warm": warm.status,
            "cold": cold.as_ref().map(|c| c.status),
            "generations": warm.cache_generations,
            "discarded": state.discarded,
            "rerun": state.rerun,
        }),
    )?;
    Ok(Audited {
        branch: branch.to_string(),
        commit: warm.commit.clone(),
        warm: warm.status,
        cold: cold.map(|c| c.status),
        state,
    })
}

/// Whether two results of one commit say the same: the same status and the same failing tests.
fn same_outcome(a: &RunRecord, b: &RunRecord) -> bool {
    let failed = |r: &RunRecord| -> BTreeSet<String> {
        r.tests
            .iter()
            .flat_map(|t| &t.failures)
            .map(|f| gs_model::test_name::canonical(&f.name))
            .collect()
    };
    a.status == b.status && failed(a) == failed(b)
}

/// How many of the repository's newest results are looked at for ones made on a discarded
/// generation.
const RECENT: usize = 500;

/// Make again (on the branch's new, cold base) the newest results of `refname`'s commits that
/// read one of the `discarded` generations, but `audited`'s (its cold result stands). Returns
/// their commits.
fn rerun_made_on(
    at: Repo<'_>,
    refname: &str,
    discarded: &[String],
    audited: &str,
    interrupt: &AtomicBool,
) -> Result<Vec<String>> {
    let Repo { ctx, row, .. } = at;
    let recent = ctx.index.recent_runs(&row.repository_id, RECENT)?;
    let commits: Vec<&str> = recent.iter().map(|(c, _, _)| c.as_str()).collect();
    let rows = ctx.index.runs_for_commits(&row.repository_id, &commits)?;
    let mut again: Vec<(String, ObjectId)> = rows
        .into_iter()
        .filter(|(c, run)| {
            c != audited
                && run.record.commit == *c
                && run.record.cached_from.is_none()
                && run.record.refname.as_deref() == Some(refname)
                && run
                    .record
                    .cache_generations
                    .iter()
                    .any(|g| discarded.contains(g))
        })
        .filter_map(|(c, run)| {
            let id = ObjectId::from_hex(c.as_bytes()).ok()?;
            Some((run.record.finished_at, id))
        })
        .collect();
    // Oldest first, as they were made.
    again.sort();
    let ids: Vec<ObjectId> = again.into_iter().map(|(_, id)| id).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let opts = RunOptions {
        force: true,
        ..RunOptions::new(Trigger::Watch, Some(refname.to_string()), interrupt)
    };
    let outcome = run_commits(at, &ids, &opts, &mut |_| {})?;
    Ok(outcome.records.into_iter().map(|r| r.commit).collect())
}
