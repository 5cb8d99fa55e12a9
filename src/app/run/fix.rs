//! `git sandbox fix RANGE --check NAME`: a check marked `fix = true` (a formatter, a linter's
//! `--fix`) runs in the sandbox on each commit of a line of commits; what it wrote to the tree
//! is taken (modified and deleted tracked files; new files the tree's `.gitignore` does not
//! ignore; nothing under a cached directory) from the run's overlay upper layer, and each
//! commit whose tree it changed is made again with the fixed tree, its descendants after it with
//! theirs (messages, people and dates kept). The branch moves once, at the end; the work tree
//! follows only when it was clean. `--fixup` instead writes `fixup!` commits on the tip, each
//! commit's fix applied three-way.
//!
//! Each commit runs the check the range's tip declares (or the user's config), so no commit
//! rewrites its neighbours with a command of its own. A check's result is kept by (tree, check
//! config); a tree the check produced is taken as fixed (a formatter's output is its own fixed
//! point), so fixing the same range again runs nothing.

use super::exec::{self, At, Output, Written};
use crate::app::config::commit_config::{cache_dirs, config_for};
use crate::app::{AppError, Repo, Result};
use gs_config::{CheckConfig, Config, ConfigFile};
use gs_git as git;
use gs_git::upper::{self, ChangeKind, Layout};
use gs_git::{cli, ObjectId};
use gs_util::hint::Hinted;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// What `fix` is asked.
pub struct FixOptions<'a> {
    pub range: &'a str,
    pub check: &'a str,
    /// `fixup!` commits on the tip instead of rewriting the range.
    pub fixup: bool,
    pub interrupt: &'a AtomicBool,
}

/// One commit of the range and what the check made of it.
#[derive(Debug, Clone, Serialize)]
pub struct FixedCommit {
    pub commit: String,
    /// Its new id (the same when neither its tree nor its parent changed; with `--fixup`, the
    /// `fixup!` commit, if one was made).
    pub new: Option<String>,
    /// The paths the check changed, each `M`, `A` or `D` and the path.
    pub changed: Vec<String>,
    /// Served from an earlier run of the check on the same tree.
    pub cached: bool,
    /// How the check exited (absent when served).
    pub exit_code: Option<i32>,
    /// What it wrote and was not taken, each with why.
    pub not_taken: Vec<String>,
}

/// What `fix` did.
#[derive(Debug, Clone, Serialize)]
pub struct Fixed {
    pub branch: String,
    pub check: String,
    pub old_tip: String,
    pub new_tip: String,
    pub fixup: bool,
    pub commits: Vec<FixedCommit>,
    /// Commits made (rewritten, or `fixup!` commits).
    pub written: usize,
    /// The work trees that had the branch checked out, brought to the new tip.
    pub work_trees: Vec<String>,
}

/// A check's result on one tree, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Kept {
    tree: String,
    changed: Vec<String>,
    not_taken: Vec<String>,
}

/// The most output of one run of the check kept in memory (its end shows in errors).
const OUTPUT_CAP: u64 = 64 << 10;

pub fn fix(at: Repo<'_>, o: &FixOptions<'_>) -> Result<Fixed> {
    let Repo { ctx, repo, row } = at;
    let dir = git::repo_root(repo);
    let (branch, base) = range(ctx, repo, &dir, o.range)?;
    let old_tip = rev(&dir, &format!("refs/heads/{branch}"))?;
    let commits = line_of(&dir, &base, &branch)?;
    let tip_info = git::commit_info(repo, old_tip)?;
    let config = config_for(ctx, repo, &tip_info, None, &ConfigFile::default())?;
    let check = fix_check(&config, o.check, &old_tip)?;
    let work_trees = clean_work_trees(&dir, &branch)?;
    let key = gs_util::fnv64_hex(
        serde_json::json!({"config": config.result_key(), "check": check})
            .to_string()
            .as_bytes(),
    );
    let store = ctx
        .paths
        .home
        .join("fix")
        .join(&row.repository_id)
        .join(&key);
    let mut out = Vec::new();
    let mut fixed_trees = Vec::new();
    for (commit, _) in &commits {
        let info = git::commit_info(repo, *commit)?;
        let (kept, ran) = match kept_result(repo, &store, info.tree) {
            Some(k) => (k, None),
            None => {
                let (k, exit) = run_check(at, &config, &check, &info, o.interrupt)?;
                keep_result(&store, info.tree, &k);
                // What the check made is fixed: running it there again would change nothing.
                if k.tree != info.tree {
                    let same = Kept {
                        tree: k.tree.clone(),
                        changed: Vec::new(),
                        not_taken: Vec::new(),
                    };
                    keep_result(&store, parse_id(&k.tree)?, &same);
                }
                (k, Some(exit))
            }
        };
        fixed_trees.push(parse_id(&kept.tree)?);
        out.push(FixedCommit {
            commit: commit.to_string(),
            new: None,
            changed: kept.changed,
            cached: ran.is_none(),
            exit_code: ran.flatten(),
            not_taken: kept.not_taken,
        });
    }
    let new_tip = if o.fixup {
        fixups(
            repo,
            &dir,
            &commits,
            &fixed_trees,
            &check.name,
            old_tip,
            &mut out,
        )?
    } else {
        rewrite(repo, &commits, &fixed_trees, &mut out)?
    };
    let written = out
        .iter()
        .filter(|c| c.new.as_deref().is_some_and(|n| n != c.commit))
        .count();
    let mut moved = Vec::new();
    if new_tip != old_tip {
        let message = format!("git-sandbox fix --check {}", check.name);
        cli::update_refs(
            &dir,
            &format!("update refs/heads/{branch} {new_tip} {old_tip}\n"),
            &message,
        )?;
        for wt in &work_trees {
            let (old, new) = (old_tip.to_string(), new_tip.to_string());
            cli::git(wt, &["read-tree", "-m", "-u", &old, &new]).map_err(|e| {
                AppError::refused(format!(
                    "{branch} moved to {}, but the work tree at {} could not follow: {}",
                    gs_util::short(&new),
                    wt.display(),
                    e.problem()
                ))
                .hint(format!("run `git -C {} reset --keep {new}`", wt.display()))
            })?;
            moved.push(wt.display().to_string());
        }
    }
    Ok(Fixed {
        branch,
        check: check.name.clone(),
        old_tip: old_tip.to_string(),
        new_tip: new_tip.to_string(),
        fixup: o.fixup,
        commits: out,
        written,
        work_trees: moved,
    })
}

fn parse_id(hex: &str) -> Result<ObjectId> {
    ObjectId::from_hex(hex.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("reading an object id", e)))
}

/// `git rev-parse --verify REV^{commit}`.
fn rev(dir: &Path, name: &str) -> Result<ObjectId> {
    let out = cli::git(
        dir,
        &["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")],
    )
    .map_err(|_| {
        AppError::usage(format!("{name:?} names no commit"))
            .hint("give RANGE as BASE..BRANCH, like main..my-branch or HEAD~3..")
    })?;
    parse_id(&out)
}

/// The branch RANGE ends at (the one `fix` moves) and where it starts: `BASE..BRANCH`,
/// `BASE..` (the current branch), or `BRANCH` (from the production branch).
fn range(
    ctx: &crate::app::Context,
    repo: &gs_git::Repository,
    dir: &Path,
    range: &str,
) -> Result<(String, String)> {
    if range.contains("...") || range.starts_with('-') || range.contains(['\0', '\n']) {
        return Err(AppError::usage(format!("{range:?} is no range fix takes"))
            .hint("give RANGE as BASE..BRANCH, like main..my-branch, HEAD~3.. or a branch name"));
    }
    let (base, tip) = match range.split_once("..") {
        Some((a, b)) => (
            if a.is_empty() { "HEAD" } else { a }.to_string(),
            if b.is_empty() { "HEAD" } else { b },
        ),
        None => {
            let head = git::commit_info(repo, rev(dir, "HEAD")?)?;
            let target = config_for(ctx, repo, &head, None, &ConfigFile::default())?
                .promote
                .target;
            (target, range)
        }
    };
    rev(dir, &base)?;
    let branch = if tip == "HEAD" {
        cli::git(dir, &["symbolic-ref", "-q", "--short", "HEAD"])
            .map(|s| s.trim().to_string())
            .map_err(|_| {
                AppError::usage("HEAD is detached: fix moves a branch")
                    .hint("switch to the branch to fix, or name it: BASE..BRANCH")
            })?
    } else {
        let name = tip.strip_prefix("refs/heads/").unwrap_or(tip);
        let known = cli::git(
            dir,
            &["show-ref", "--verify", "-q", &format!("refs/heads/{name}")],
        );
        if known.is_err() {
            return Err(AppError::usage(format!(
                "{tip:?} is no branch: fix rewrites commits and moves the branch they are on"
            ))
            .hint("end RANGE at a branch, like main..my-branch"));
        }
        name.to_string()
    };
    Ok((branch, base))
}

/// The commits of `base..branch`, oldest first, each with its parent; a merge is refused.
fn line_of(dir: &Path, base: &str, branch: &str) -> Result<Vec<(ObjectId, Option<ObjectId>)>> {
    let spec = format!("{base}..refs/heads/{branch}");
    let listing = cli::git(
        dir,
        &["rev-list", "--reverse", "--topo-order", "--parents", &spec],
    )?;
    let mut out = Vec::new();
    for line in listing.lines().filter(|l| !l.trim().is_empty()) {
        let ids: Vec<&str> = line.split_whitespace().collect();
        if ids.len() > 2 {
            return Err(AppError::refused(format!(
                "{} is a merge: fix rewrites a line of commits",
                gs_util::short(ids[0])
            ))
            .hint("fix the commits on either side of the merge, each range on its own"));
        }
        out.push((
            parse_id(ids[0])?,
            ids.get(1).map(|p| parse_id(p)).transpose()?,
        ));
    }
    if out.is_empty() {
        return Err(AppError::usage(format!("{spec} holds no commit"))
            .hint("give a range with commits in it, like main..my-branch"));
    }
    Ok(out)
}

/// The check `name` of the tip's config, which must say `fix = true`.
fn fix_check(config: &Config, name: &str, tip: &ObjectId) -> Result<CheckConfig> {
    let Some(check) = config.checks.iter().find(|c| c.name == name) else {
        return Err(AppError::usage(format!(
            "no check `{name}` in the config of {}",
            gs_util::short(&tip.to_string())
        ))
        .hint(format!(
            "declare it under [checks.{name}] with fix = true, in the tip's .sandbox.toml or your user config"
        )));
    };
    if !check.fix {
        return Err(AppError::refused(format!(
            "the check `{name}` is not marked fix = true, so what it writes is not taken"
        ))
        .hint(format!("add fix = true under [checks.{name}]")));
    }
    Ok(check.clone())
}

/// The work trees that have `branch` checked out, each clean (else refused, before anything).
fn clean_work_trees(dir: &Path, branch: &str) -> Result<Vec<PathBuf>> {
    let trees = cli::worktrees_on(dir, branch)?;
    for wt in &trees {
        let status = cli::git(wt, &["status", "--porcelain", "--untracked-files=no"])?;
        if !status.trim().is_empty() {
            return Err(AppError::refused(format!(
                "the work tree at {} has uncommitted changes on {branch}, which fix would move",
                wt.display()
            ))
            .hint("commit or stash them (git stash), then run fix again"));
        }
    }
    Ok(trees)
}

fn kept_result(repo: &gs_git::Repository, store: &Path, tree: ObjectId) -> Option<Kept> {
    let text = std::fs::read_to_string(store.join(tree.to_string())).ok()?;
    let k: Kept = serde_json::from_str(&text).ok()?;
    // A tree git has since pruned is made again.
    git::objects::size(repo, ObjectId::from_hex(k.tree.as_bytes()).ok()?)?;
    Some(k)
}

fn keep_result(store: &Path, tree: ObjectId, k: &Kept) {
    // A result not kept is made again next time: nothing is lost.
    let _ = std::fs::create_dir_all(store).and_then(|_| {
        gs_util::write_atomic(
            &store.join(tree.to_string()),
            serde_json::to_string(k).unwrap_or_default().as_bytes(),
        )
    });
}

/// Run `check` in the sandbox on `info`'s tree and take what it wrote; its exit code.
fn run_check(
    at: Repo<'_>,
    config: &Config,
    check: &CheckConfig,
    info: &git::CommitInfo,
    interrupt: &AtomicBool,
) -> Result<(Kept, Option<i32>)> {
    let Repo { ctx, repo, .. } = at;
    let short = gs_util::short(&info.id.to_string()).to_string();
    let keep = tempfile::Builder::new()
        .prefix("git-sandbox-fix-")
        .tempdir_in(&ctx.paths.home)
        .map_err(crate::app::io_err(
            "cannot make a directory for the check's writes",
        ))?;
    let mut run_config = config.clone();
    run_config.test.timeout = config.check_timeout(check);
    let command = check.command.clone();
    let line = move |_: &gs_runner::rundir::RunDir| Some(command.clone());
    let max = config
        .limits
        .checkout_mb
        .saturating_mul(1 << 20)
        .max(1 << 20);
    let read = |w: Written| -> Result<upper::Changes> {
        let (path, layout) = match w {
            Written::Layer(p) => (p, Layout::Upper),
            Written::Whole(p) => (p, Layout::Whole),
            Written::Lost(why) => {
                return Err(AppError::refused(format!(
                    "what the check `{}` wrote on {short} could not be kept: {why}",
                    check.name
                ))
                .hint("run fix again; if it says this again, run `git sandbox doctor`"))
            }
        };
        Ok(upper::read(repo, info.tree, &path, layout, max)?)
    };
    let place = At {
        config: Some(run_config),
        ..At::commit(ctx, repo, info.id)
    };
    let (executed, changes) = exec::run_in(
        &place,
        &line,
        &[],
        None,
        Output::Capture(OUTPUT_CAP),
        interrupt,
        Some((keep.path(), &read)),
    )?;
    let outcome = &executed.outcome;
    if let Some(k) = &outcome.killed_by {
        return Err(AppError::refused(format!(
            "the check `{}` did not end by itself on {short} (stopped by {}): nothing was moved",
            check.name,
            k.as_str()
        ))
        .hint("fix the check, or raise its timeout or limits"));
    }
    let changes = changes.expect("asked for")?;
    let cached = cache_dirs(config, repo, info);
    let under_cache = |p: &str| {
        cached
            .iter()
            .any(|d| p == d || p.starts_with(&format!("{d}/")))
    };
    let added: Vec<String> = changes
        .changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Added && !under_cache(&c.path))
        .map(|c| c.path.clone())
        .collect();
    let ignored = git::rewrite::ignored(repo, info.tree, &added)?;
    let mut taken = Vec::new();
    let mut not_taken: Vec<String> = changes
        .skipped
        .iter()
        .map(|(p, why)| format!("{p}: {why}"))
        .collect();
    for c in changes.changes {
        if under_cache(&c.path) {
            not_taken.push(format!("{}: under a cached directory", c.path));
        } else if c.kind == ChangeKind::Added && ignored.contains(&c.path) {
            not_taken.push(format!("{}: ignored by the tree's .gitignore", c.path));
        } else {
            taken.push(c);
        }
    }
    let tree = upper::apply(repo, info.tree, &taken)?;
    let changed = taken
        .iter()
        .map(|c| {
            let k = match c.kind {
                ChangeKind::Added => 'A',
                ChangeKind::Modified => 'M',
                ChangeKind::Deleted => 'D',
            };
            format!("{k} {}", c.path)
        })
        .collect();
    Ok((
        Kept {
            tree: tree.to_string(),
            changed,
            not_taken,
        },
        outcome.exit_code,
    ))
}

/// Each commit again with its fixed tree on its (new) parent; unchanged ones keep their ids
/// while their parents do. The new tip.
fn rewrite(
    repo: &gs_git::Repository,
    commits: &[(ObjectId, Option<ObjectId>)],
    trees: &[ObjectId],
    out: &mut [FixedCommit],
) -> Result<ObjectId> {
    let mut map: std::collections::HashMap<ObjectId, ObjectId> = Default::default();
    let mut tip = commits[0].0;
    for (((commit, parent), tree), o) in commits.iter().zip(trees).zip(out.iter_mut()) {
        let new_parent = parent.map(|p| map.get(&p).copied().unwrap_or(p));
        let same_tree = git::objects::tree_of(repo, *commit) == Some(*tree);
        let new = if same_tree && new_parent == *parent {
            *commit
        } else {
            let parents: Vec<ObjectId> = new_parent.into_iter().collect();
            git::rewrite::with_tree(repo, *commit, *tree, &parents)?
        };
        map.insert(*commit, new);
        o.new = Some(new.to_string());
        tip = new;
    }
    Ok(tip)
}

/// `fixup! SUBJECT` commits on `tip`, one for each commit the check changed: its change applied
/// three-way onto the tip. A conflict refuses with nothing moved. The new tip.
fn fixups(
    repo: &gs_git::Repository,
    dir: &Path,
    commits: &[(ObjectId, Option<ObjectId>)],
    trees: &[ObjectId],
    check: &str,
    mut tip: ObjectId,
    out: &mut [FixedCommit],
) -> Result<ObjectId> {
    for (((commit, _), tree), o) in commits.iter().zip(trees).zip(out.iter_mut()) {
        if git::objects::tree_of(repo, *commit) == Some(*tree) {
            continue;
        }
        // The commit with its fix, as a commit three-way merge can take.
        let fixed = git::rewrite::with_tree(repo, *commit, *tree, &[*commit])?;
        let (c, t, f) = (commit.to_string(), tip.to_string(), fixed.to_string());
        let base = format!("--merge-base={c}");
        let merged =
            cli::git(dir, &["merge-tree", "--write-tree", "-z", &base, &t, &f]).map_err(|_| {
                AppError::refused(format!(
                    "the fix of {} conflicts with the commits after it: nothing was moved",
                    gs_util::short(&c)
                ))
                .hint("rewrite the range instead (without --fixup), or fix it by hand")
            })?;
        let merged_tree = merged.split('\0').next().unwrap_or_default().trim();
        if Some(parse_id(merged_tree)?) == git::objects::tree_of(repo, tip) {
            continue;
        }
        let subject = cli::git(dir, &["log", "-1", "--format=%s", &c])?;
        let message = format!(
            "fixup! {}\n\nWhat `git sandbox fix --check {check}` changed in {}.",
            subject.trim(),
            gs_util::short(&c)
        );
        let new = cli::git_with_env(
            dir,
            &["commit-tree", merged_tree, "-p", &t, "-m", &message],
            &cli::fallback_identity(dir),
        )?;
        tip = parse_id(&new)?;
        o.new = Some(tip.to_string());
    }
    Ok(tip)
}
