//! Promoting an experiment into production: check the evaluation against `[promote] minimum`,
//! merge without touching any work tree (`git merge-tree --write-tree` + `commit-tree` + a
//! compare-and-swap ref update), or fast-forward; run the commit production would get *before*
//! anything moves and refuse when it fails; then move production (and a clean checkout of it)
//! and mark the experiment promoted.

use crate::app::experiment::experiments::{self, branch_ref, promoted_ref, ref_tip};
use crate::app::run::{run_commits, RunOptions};
use crate::app::{experiment::eval, records::results, AppError, Context, Repo, Result};
use gs_git::cli;
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_model::{Recommendation, RunRecord, State, Trigger};
use std::path::Path;
use std::sync::atomic::AtomicBool;

pub struct PromoteOptions {
    /// `merge` or `ff`; `None`: `[promote] strategy`.
    pub strategy: Option<String>,
    pub force: bool,
    /// Do everything up to moving production (build the commit it would get and run it), and
    /// report; move nothing.
    pub dry_run: bool,
    /// Watch production's run of the promoted commit and roll the promotion back when it
    /// fails; `None`: `[promote] rollback`.
    pub watch: Option<bool>,
    /// What asked for it (`manual`, `mcp`): the trigger of the runs it makes.
    pub trigger: Trigger,
}

#[derive(Debug, serde::Serialize)]
pub struct Promoted {
    pub experiment: String,
    pub target: String,
    pub strategy: String,
    pub recommendation: Recommendation,
    pub minimum: Recommendation,
    pub forced: bool,
    /// The production branch before and after.
    pub previous: String,
    pub commit: String,
    /// The work tree brought along, when production was checked out there.
    pub worktree_updated: Option<String>,
    /// The run of the promoted commit, made before production moved.
    pub result: Option<RunRecord>,
    /// Tests failing on the promoted commit that pass on the experiment's head (with --force).
    pub broken: Vec<String>,
    /// Nothing moved: `commit` is what production would get, and `result` its run.
    pub dry_run: bool,
    /// Production's run of the promoted commit was watched (`--watch`, `[promote] rollback`).
    pub watched: bool,
    /// It failed, and the promotion was taken back.
    pub rolled_back: Option<crate::app::experiment::rollback::RolledBack>,
}

/// What a promotion starts from, once the experiment, its evaluation and the minimum allow it.
pub(crate) struct Checked {
    pub strategy: String,
    pub minimum: Recommendation,
    pub target: String,
    pub base: ObjectId,
    pub head: ObjectId,
    pub ev: gs_model::Evaluation,
    pub dir: std::path::PathBuf,
}

/// The strategy a promotion uses: the one asked for, else `[promote] strategy`.
pub fn strategy(ctx: &Context, repo: &gs_git::Repository, opts: &PromoteOptions) -> Result<String> {
    Ok(opts.strategy.clone().unwrap_or_else(|| {
        experiments::production_config(ctx, repo)
            .map(|c| c.promote.strategy)
            .unwrap_or_else(|_| "merge".into())
    }))
}

/// Everything a promotion checks before it changes anything: the experiment is active and has
/// something production lacks, and its evaluation (made now when there is none for these two
/// heads) meets `[promote] minimum` unless forced.
pub(crate) fn check(
    at: Repo<'_>,
    name: &str,
    opts: &PromoteOptions,
    interrupt: &AtomicBool,
) -> Result<Checked> {
    let Repo { ctx, repo, .. } = at;
    let e = experiments::find(at, name)?;
    match e.state {
        State::Active => {}
        State::Promoted => {
            return Err(
                AppError::usage(format!("experiment {name:?} is already promoted"))
                    .hint("start a new experiment for further changes"),
            )
        }
        State::RolledBack => {
            return Err(AppError::usage(format!(
                "experiment {name:?} was promoted and rolled back"
            ))
            .hint(format!(
                "fix it in a new experiment: git sandbox experiment start NAME --from {}",
                branch_ref(name)
            )))
        }
        State::Killed => {
            return Err(
                AppError::usage(format!("experiment {name:?} was killed")).hint(format!(
            "start a new one from its archive with `git sandbox experiment start NAME --from {}`",
            experiments::archive_ref(name)
        )),
            )
        }
    }
    let config = experiments::production_config(ctx, repo)?;
    let strategy = opts
        .strategy
        .clone()
        .unwrap_or_else(|| config.promote.strategy.clone());
    if !["merge", "ff", "pull-request"].contains(&strategy.as_str()) {
        return Err(
            AppError::usage(format!("promote strategy {strategy:?} is not supported"))
                .hint("use --strategy merge, ff or pull-request"),
        );
    }
    let minimum =
        Recommendation::parse(&config.promote.minimum).unwrap_or(Recommendation::Recommend);
    let (target, base) = experiments::production_tip(repo, &config)?;
    let Some(head) = ref_tip(repo, &branch_ref(name))? else {
        return Err(AppError::usage(format!(
            "experiment {name:?} has no branch {}",
            branch_ref(name)
        ))
        .hint(format!("see `git sandbox experiment show {name}`")));
    };
    let dir = experiments::git_dir_for_cli(repo);
    if is_ancestor(&dir, head, base)? {
        return Err(AppError::refused(format!(
            "promote refused: experiment/{name} has nothing {target} lacks; nothing was changed"
        )));
    }

    // The evaluation of exactly these two heads, witnessed cold, made now if there is none.
    let (head_hex, base_hex) = (head.to_string(), base.to_string());
    let ev = match experiments::latest_evaluation(at, name, Some(head))? {
        Some(ev)
            if ev.head.commit == head_hex
                && ev.base.commit == base_hex
                && ev.head.cold
                && (ev.base.cold || ev.base.status.is_none()) =>
        {
            ev
        }
        _ => eval::evaluate(at, name, opts.trigger, interrupt)?,
    };
    if ev.recommendation < minimum && !opts.force {
        return Err(AppError::refused(format!(
            "promote refused: experiment {name} is {} ({}), below the minimum {minimum} ([promote] minimum); nothing was changed",
            ev.recommendation, ev.reason
        ))
        .hint(format!(
            "see `git sandbox eval {name}`, fix it on experiment/{name}, or pass --force"
        )));
    }

    Ok(Checked {
        strategy,
        minimum,
        target,
        base,
        head,
        ev,
        dir,
    })
}

pub fn promote(
    at: Repo<'_>,
    name: &str,
    opts: &PromoteOptions,
    interrupt: &AtomicBool,
) -> Result<Promoted> {
    let Repo { ctx, repo, row } = at;
    let Checked {
        strategy,
        minimum,
        target,
        base,
        head,
        ev,
        dir,
    } = check(at, name, opts, interrupt)?;
    if strategy == "pull-request" {
        return Err(
            AppError::usage("a pull request promotes on GitHub, not here").hint(format!(
                "run `git sandbox promote {name} --strategy pull-request`"
            )),
        );
    }
    let base_hex = base.to_string();

    // A checkout of production must be clean before anything moves.
    let worktrees = cli::worktrees_on(&dir, &target)?;
    for wt in &worktrees {
        let dirty = cli::git(wt, &["status", "--porcelain", "--untracked-files=no"])?;
        if !dirty.trim().is_empty() {
            return Err(AppError::refused(format!(
                "promote refused: {target} is checked out in {} with uncommitted changes; nothing was changed",
                wt.display()
            ))
            .hint("commit or stash them (git stash), then promote again"));
        }
    }

    let new = match strategy.as_str() {
        "ff" => {
            if !is_ancestor(&dir, base, head)? {
                return Err(AppError::refused(format!(
                    "promote refused: {target} cannot be fast-forwarded to experiment/{name}, it has commits the experiment lacks; nothing was changed"
                ))
                .hint(format!(
                    "use --strategy merge, or rebase (git rebase {target} experiment/{name})"
                )));
            }
            // An old experiment's committed metadata is left behind: production gets the
            // experiment's head with one commit more that drops it.
            match bookkeeping(repo, head, base).as_slice() {
                [] => head,
                paths => experiments::meta::drop_commit(&dir, head, name, paths)?,
            }
        }
        _ => merge_commit(
            repo,
            &dir,
            &target,
            name,
            base,
            head,
            &ev,
            opts.force && ev.recommendation < minimum,
        )?,
    };

    // Run the commit production would get before anything moves: a merge whose tests fail is
    // refused, not left on production.
    let run_opts = RunOptions::new(
        opts.trigger,
        Some(format!("refs/heads/{target}")),
        interrupt,
    );
    let outcome = run_commits(at, &[new], &run_opts, &mut |_| {})?;
    if outcome.interrupted {
        return Err(AppError::refused(format!(
            "promote interrupted while testing the merge; nothing was changed ({target} stays at {})",
            gs_util::short(&base_hex)
        )));
    }
    let result = outcome.records.into_iter().next();
    let broken = broken_tests(at, name, head, result.as_ref())?;
    let passed = result.as_ref().is_some_and(|r| r.status.is_success());
    if !passed && !opts.force {
        let status = result
            .as_ref()
            .map_or("not run".to_string(), |r| r.status.to_string());
        let which = if broken.is_empty() {
            String::new()
        } else {
            format!(
                "; the merge broke {}",
                broken
                    .iter()
                    .take(10)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(AppError::refused(format!(
            "promote refused: the merge of experiment/{name} into {target} ({}) is {status}{which}; nothing was changed ({target} stays at {})",
            gs_util::short(&new.to_string()),
            gs_util::short(&base_hex),
        ))
        .hint(format!(
            "see `git sandbox show {new}`, fix it on experiment/{name} (git merge {target}), or pass --force"
        )));
    }

    let mut promoted = Promoted {
        experiment: name.to_string(),
        target,
        strategy,
        recommendation: ev.recommendation,
        minimum,
        forced: opts.force,
        previous: base_hex,
        commit: new.to_string(),
        worktree_updated: None,
        result,
        broken,
        dry_run: opts.dry_run,
        watched: false,
        rolled_back: None,
    };
    if opts.dry_run {
        return Ok(promoted);
    }
    let target = promoted.target.as_str();

    let message = format!("git-sandbox: promote experiment {name}");
    promoted.worktree_updated = match advance(&dir, target, base, new, &message, worktrees.first())
    {
        Ok(wt) => wt.map(|w| w.display().to_string()),
        Err(Stuck::Checkout(wt, err)) => {
            return Err(AppError::refused(format!(
                "promote refused: cannot update the checkout of {target} in {}: {err}; nothing was changed",
                wt.display()
            )))
        }
        Err(Stuck::Moved(e)) => {
            return Err(AppError::refused(format!(
                "promote refused: {target} moved while promoting ({e}); nothing was changed"
            ))
            .hint(format!("run `git sandbox promote {name}` again")))
        }
        Err(Stuck::Other(e)) => return Err(e),
    };

    // Promoted from here on: the ref records it in git, the index follows.
    cli::update_refs(
        &dir,
        &format!("update {} {new}\n", promoted_ref(name)),
        &message,
    )?;
    ctx.index
        .set_experiment_state(&row.repository_id, name, State::Promoted)?;
    crate::app::publish::emit(
        ctx,
        crate::app::publish::Event::News {
            kind: EventKind::ExperimentPromoted,
            row: Some(row),
            data: serde_json::json!({"experiment": name, "target": target, "commit": new.to_string(),
                           "strategy": promoted.strategy, "recommendation": ev.recommendation}),
        },
    );
    ctx.index.add_event(
        EventKind::ExperimentPromoted,
        Some(&row.repository_id),
        None,
        Some(&new.to_string()),
        &serde_json::json!({"experiment": name, "target": target, "strategy": promoted.strategy,
                            "recommendation": ev.recommendation, "forced": opts.force,
                            "merge_status": promoted.result.as_ref().map(|r| r.status)}),
    )?;
    // Production's run of the promoted commit is the one made above, before it moved: a
    // failing one (a forced promotion) is taken back at once.
    let watch = opts.watch.unwrap_or_else(|| {
        experiments::production_config(ctx, repo).is_ok_and(|c| c.promote.rollback)
    });
    if watch {
        promoted.watched = true;
        if let Some(r) = promoted.result.as_ref().filter(|r| !r.status.is_success()) {
            let reason = crate::app::experiment::rollback::failure_reason(r);
            promoted.rolled_back = Some(crate::app::experiment::rollback::roll_back(
                at, name, target, base, new, &reason, interrupt,
            )?);
        }
    }
    Ok(promoted)
}

/// Why production could not be moved forward.
pub(crate) enum Stuck {
    /// Its clean checkout refused the fast-forward (git's words).
    Checkout(std::path::PathBuf, String),
    /// It is no longer at the commit it was expected at.
    Moved(gs_git::GitError),
    Other(AppError),
}

/// Move production (`refs/heads/<target>`) from `from` forward to `to`: through its checkout
/// when it has one (`git merge --ff-only`, which never overwrites the user's files), else by a
/// compare-and-swap ref update. Returns the checkout brought along.
pub(crate) fn advance<'w>(
    dir: &Path,
    target: &str,
    from: ObjectId,
    to: ObjectId,
    message: &str,
    worktree: Option<&'w std::path::PathBuf>,
) -> std::result::Result<Option<&'w std::path::PathBuf>, Stuck> {
    match worktree {
        Some(wt) => {
            let (ok, _, err) =
                cli::git_status(wt, &["merge", "--ff-only", "--quiet", &to.to_string()], &[])
                    .map_err(|e| Stuck::Other(e.into()))?;
            if ok {
                Ok(Some(wt))
            } else {
                Err(Stuck::Checkout(wt.clone(), err))
            }
        }
        None => cli::update_refs(
            dir,
            &format!("update refs/heads/{target} {to} {from}\n"),
            message,
        )
        .map(|_| None)
        .map_err(Stuck::Moved),
    }
}

/// Tests that fail on the promoted commit but not on the experiment's head: what the merge broke.
fn broken_tests(
    at: Repo<'_>,
    name: &str,
    head: ObjectId,
    merged: Option<&RunRecord>,
) -> Result<Vec<String>> {
    let Some(tests) = merged.and_then(|r| r.tests.as_ref()) else {
        return Ok(Vec::new());
    };
    let before: std::collections::HashSet<String> =
        results::current_record(at, head, Some(&branch_ref(name)))?
            .and_then(|r| r.tests)
            .map(|t| t.failures.into_iter().map(|f| f.name).collect())
            .unwrap_or_default();
    Ok(tests
        .failures
        .iter()
        .map(|f| f.name.clone())
        .filter(|n| !before.contains(n))
        .collect())
}

/// The old experiments' metadata files `head`'s tree holds that production's (`base`) does not:
/// what production must not receive.
pub(crate) fn bookkeeping(
    repo: &gs_git::Repository,
    head: ObjectId,
    base: ObjectId,
) -> Vec<String> {
    let tree = |c: ObjectId| gs_git::objects::tree_of(repo, c);
    match (tree(head), tree(base)) {
        (Some(h), Some(b)) => experiments::meta::bookkeeping(repo, h, b),
        _ => Vec::new(),
    }
}

fn is_ancestor(dir: &Path, ancestor: ObjectId, of: ObjectId) -> Result<bool> {
    let (ok, _, err) = cli::git_status(
        dir,
        &[
            "merge-base",
            "--is-ancestor",
            &ancestor.to_string(),
            &of.to_string(),
        ],
        &[],
    )?;
    if !ok && !err.is_empty() {
        return Err(gs_git::GitError::Cli {
            cmd: "git merge-base --is-ancestor".into(),
            stderr: err,
        }
        .into());
    }
    Ok(ok)
}

/// The `--no-ff` merge commit of the experiment into production, made in the object store only.
/// A conflict refuses with the files and the way to resolve it.
#[allow(clippy::too_many_arguments)]
fn merge_commit(
    repo: &gs_git::Repository,
    dir: &Path,
    target: &str,
    name: &str,
    base: ObjectId,
    head: ObjectId,
    ev: &gs_model::Evaluation,
    forced: bool,
) -> Result<ObjectId> {
    let (ok, out, err) = cli::git_status(
        dir,
        &[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            &base.to_string(),
            &head.to_string(),
        ],
        &[],
    )?;
    let mut lines = out.lines();
    let tree = lines.next().unwrap_or("").trim().to_string();
    if !ok {
        if tree.is_empty() || !err.is_empty() {
            return Err(gs_git::GitError::Cli {
                cmd: "git merge-tree --write-tree".into(),
                stderr: err,
            }
            .into());
        }
        let files: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
        return Err(AppError::refused(format!(
            "promote refused: merging experiment/{name} into {target} conflicts in {}; nothing was changed",
            files.join(", ")
        ))
        .hint(format!(
            "resolve it on the experiment: git switch experiment/{name} && git merge {target}, fix and commit, then promote again"
        )));
    }
    let mut tree = tree;
    let paths = bookkeeping(repo, head, base);
    if !paths.is_empty() {
        let id = ObjectId::from_hex(tree.as_bytes())
            .map_err(|e| gs_git::GitError::gix_in("git merge-tree gave no tree id", e))?;
        tree = experiments::meta::tree_without(dir, id, &paths)?.to_string();
    }
    let message = format!(
        "Promote experiment {name} ({rec}{forced})\n\nMerge experiment/{name} into {target}. Evaluation: {reason}.\n\nGit-Sandbox-Experiment: {name}\nGit-Sandbox-Recommendation: {rec}\n",
        rec = ev.recommendation,
        forced = if forced { ", forced" } else { "" },
        reason = ev.reason,
    );
    let env = cli::fallback_identity(dir);
    let commit = cli::git_with_env(
        dir,
        &[
            "commit-tree",
            &tree,
            "-p",
            &base.to_string(),
            "-p",
            &head.to_string(),
            "-m",
            &message,
        ],
        &env,
    )?;
    ObjectId::from_hex(commit.trim().as_bytes())
        .map_err(|e| gs_git::GitError::gix_in("git commit-tree gave no commit id", e).into())
}
