//! The pre-push gate (`[hooks] pre_push`): what `git push` is about to send, judged by the
//! results of the commits at the tips of the refs it updates, each under the config that tip
//! has now (whose `.sandbox.toml` may make the gate stricter than the user's, never looser:
//! see `config::Layers::resolve`). `warn` only says; `block` refuses a push whose tip failed; `wait` also waits for a
//! tip that has no result yet (a running daemon's run, else one made here) up to
//! `[hooks] pre_push_timeout`, and refuses one that still has none. Earlier new commits that
//! failed are listed, never refused: a branch may fix forward.

use crate::app::run::{run_commits, RunOptions};
use crate::app::{config::commit_config, records::results, AppError, Repo, Result};
use gs_git::ObjectId;
use gs_model::{RunRecord, Status, Trigger};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How many new commits below a tip are looked at for earlier failures.
const EARLIER: usize = 200;

/// One line of what git gives the pre-push hook: `<local ref> <local oid> <remote ref> <remote
/// oid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub local_ref: String,
    pub local: ObjectId,
    pub remote_ref: String,
    /// `None`: the remote does not have the ref yet.
    pub remote: Option<ObjectId>,
}

/// The updates of a pre-push hook's input; deletions (nothing to judge) are left out.
pub fn parse_updates(input: &str) -> Result<Vec<Update>> {
    let mut out = Vec::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let oid = |s: &str| {
            ObjectId::from_hex(s.as_bytes()).map_err(|_| {
                AppError::usage(format!("not a pre-push line: {line:?}"))
                    .hint("git gives the hook `<local ref> <local oid> <remote ref> <remote oid>` lines on stdin")
            })
        };
        let [local_ref, local, remote_ref, remote] = f[..] else {
            return Err(AppError::usage(format!("not a pre-push line: {line:?}"))
                .hint("git gives the hook `<local ref> <local oid> <remote ref> <remote oid>` lines on stdin"));
        };
        let (local, remote) = (oid(local)?, oid(remote)?);
        if local.is_null() {
            continue;
        }
        out.push(Update {
            local_ref: local_ref.to_string(),
            local,
            remote_ref: remote_ref.to_string(),
            remote: (!remote.is_null()).then_some(remote),
        });
    }
    Ok(out)
}

/// What the gate found for one pushed ref.
#[derive(Debug, Clone)]
pub struct Tip {
    pub update: Update,
    /// `off`, `warn`, `block` or `wait`: the user's, or the tip's config's when that is stricter.
    pub mode: String,
    /// The tip's result under the config it has now (`None`: not run yet).
    pub record: Option<RunRecord>,
    /// Earlier new commits (not on the remote) whose result failed, newest first.
    pub earlier_failed: Vec<RunRecord>,
    /// A tip without a result that `wait` waited for in vain.
    pub waited_in_vain: bool,
}

impl Tip {
    /// Whether this tip stops the push.
    pub fn refuses(&self) -> bool {
        match self.mode.as_str() {
            "block" => self
                .record
                .as_ref()
                .is_some_and(|r| r.status != Status::Passed),
            "wait" => {
                self.waited_in_vain
                    || self
                        .record
                        .as_ref()
                        .is_some_and(|r| r.status != Status::Passed)
            }
            _ => false,
        }
    }
}

/// Judge every update of a push to `remote`.
pub fn judge(at: Repo<'_>, remote: &str, updates: &[Update]) -> Result<Vec<Tip>> {
    let Repo { ctx, repo, .. } = at;
    let mut tips = Vec::new();
    for u in updates {
        // A tag or another object: only commits have results.
        let Some(commit) = gs_git::objects::peel_to_commit(repo, u.local) else {
            continue;
        };
        let refname = u
            .local_ref
            .starts_with("refs/heads/")
            .then_some(u.local_ref.as_str());
        let mode = match commit_config::config_at(ctx, repo, commit, refname) {
            Ok(c) => c.hooks.pre_push,
            // A tip whose config is broken has an `error` result, or will: judged by `block`.
            Err(_) => ctx.layers.resolve().hooks.pre_push,
        };
        if mode == "off" {
            continue;
        }
        let mut record = results::current_record(at, commit, refname)?;
        let mut waited_in_vain = false;
        if record.is_none() && mode == "wait" {
            let timeout = ctx.layers.resolve().hooks.pre_push_timeout;
            record = wait_for(at, commit, refname, timeout)?;
            waited_in_vain = record.is_none();
        }
        let earlier_failed = earlier_failures(at, remote, u, commit)?;
        tips.push(Tip {
            update: Update {
                local: commit,
                ..u.clone()
            },
            mode,
            record,
            earlier_failed,
            waited_in_vain,
        });
    }
    Ok(tips)
}

/// The tip's result, waited for: a running daemon makes it (the hooks queued it), else it is
/// made here; `None` when the timeout passes first.
fn wait_for(
    at: Repo<'_>,
    commit: ObjectId,
    refname: Option<&str>,
    timeout: Duration,
) -> Result<Option<RunRecord>> {
    let Repo { ctx, repo, .. } = at;
    let deadline = Instant::now() + timeout;
    if gs_ipc::running(&ctx.paths.home).is_some() {
        let _ = crate::app::intake::notify::notify(ctx, &gs_git::repo_root(repo), "hook");
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(250));
            if let Some(r) = results::current_record(at, commit, refname)? {
                return Ok(Some(r));
            }
        }
        return Ok(None);
    }
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if Instant::now() >= deadline {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let opts = RunOptions::new(Trigger::Hook, refname.map(str::to_string), &stop);
        let outcome = run_commits(at, &[commit], &opts, &mut |_| {});
        done.store(true, Ordering::Relaxed);
        Ok(outcome?
            .records
            .into_iter()
            .next()
            .filter(|_| !stop.load(Ordering::Relaxed)))
    })
}

/// The new commits below a tip (not on the remote) whose result failed, newest first.
fn earlier_failures(
    at: Repo<'_>,
    remote: &str,
    u: &Update,
    tip: ObjectId,
) -> Result<Vec<RunRecord>> {
    let Repo { repo, .. } = at;
    let dir = gs_git::repo_root(repo);
    let mut args = vec![
        "rev-list".to_string(),
        format!("--max-count={EARLIER}"),
        format!("{tip}^@"),
        "--not".to_string(),
        format!("--remotes={remote}"),
    ];
    if let Some(r) = u.remote {
        args.push(r.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // A remote commit we do not have, or a root tip: nothing earlier to list.
    let Ok(out) = gs_git::cli::git(&dir, &args) else {
        return Ok(Vec::new());
    };
    let mut reader = results::NoteReader::new(repo)?;
    let mut failed = Vec::new();
    for line in out.lines() {
        let Ok(c) = ObjectId::from_hex(line.trim().as_bytes()) else {
            continue;
        };
        if let Some(r) =
            results::own_record(at, &mut reader, c)?.filter(gs_model::RunRecord::is_evidence)
        {
            if r.status != Status::Passed {
                failed.push(r);
            }
        }
    }
    Ok(failed)
}
