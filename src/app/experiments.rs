//! Experiments as branches: `experiment/<name>` holding `experiments/<name>/experiment.toml`,
//! archived under `refs/sandbox/archive/<name>` when killed, remembered under
//! `refs/sandbox/promoted/<name>` when promoted. Git holds the state; the index follows it
//! ([`sync`]) and `reindex` rebuilds it from the refs.

use super::{io_err, repos, results, AppError, Context, Result};
use crate::config::{parse_repository_file, Config, ConfigFile};
use crate::git::{self, cli, CommitInfo};
use crate::model::{Evaluation, Experiment, ExperimentFile, RunRecord, State};
use crate::store::RepoRow;
use crate::util::{self, time};
use gix::ObjectId;
use std::path::{Path, PathBuf};

pub const BRANCH_PREFIX: &str = "refs/heads/experiment/";
pub const ARCHIVE_PREFIX: &str = "refs/sandbox/archive/";
pub const PROMOTED_PREFIX: &str = "refs/sandbox/promoted/";
/// Points at the revert commit that took a promoted experiment back out of production.
pub const ROLLED_BACK_PREFIX: &str = "refs/sandbox/rolled-back/";

/// How many commits of a branch `show` lists.
const SHOW_LIMIT: usize = 200;

pub fn branch_ref(name: &str) -> String {
    format!("{BRANCH_PREFIX}{name}")
}

pub fn archive_ref(name: &str) -> String {
    format!("{ARCHIVE_PREFIX}{name}")
}

pub fn promoted_ref(name: &str) -> String {
    format!("{PROMOTED_PREFIX}{name}")
}

pub fn rolled_back_ref(name: &str) -> String {
    format!("{ROLLED_BACK_PREFIX}{name}")
}

/// Where the metadata lives in the experiment's tree.
pub fn metadata_path(name: &str) -> String {
    format!("experiments/{name}/experiment.toml")
}

/// The commit a ref points at, if the ref exists.
pub fn ref_tip(repo: &gix::Repository, refname: &str) -> Result<Option<ObjectId>> {
    let Some(mut r) = repo.try_find_reference(refname).map_err(git::gix_err)? else {
        return Ok(None);
    };
    Ok(Some(
        r.peel_to_commit().map_err(git::gix_err)?.id().detach(),
    ))
}

/// The directory git commands run in: the work tree, or the git dir of a bare repository.
pub fn git_dir_for_cli(repo: &gix::Repository) -> PathBuf {
    git::repo_root(repo)
}

/// The settings that decide production: the user's layers with the `.sandbox.toml` of the work
/// tree (what the user sees and edits), or the defaults in a bare repository.
pub fn production_config(ctx: &Context, repo: &gix::Repository) -> Result<Config> {
    let layers = match repo.workdir() {
        Some(dir) => ctx.layers.with_repo_dir(dir)?,
        None => ctx.layers.clone(),
    };
    Ok(layers.resolve())
}

/// The production branch (`[promote] target`) and its tip.
pub fn production_tip(repo: &gix::Repository, config: &Config) -> Result<(String, ObjectId)> {
    let target = config.promote.target.clone();
    match ref_tip(repo, &format!("refs/heads/{target}"))? {
        Some(id) => Ok((target, id)),
        None => Err(
            AppError::usage(format!("the production branch {target:?} does not exist"))
                .hint("create it, or name another one with [promote] target in .sandbox.toml"),
        ),
    }
}

/// The `[config]` of an experiment's `experiment.toml` in a commit, as a config layer.
pub fn config_overrides(
    repo: &gix::Repository,
    info: &CommitInfo,
    name: &str,
) -> Result<ConfigFile> {
    let path = metadata_path(name);
    let label = format!("{}:{path}", util::short(&info.id.to_string()));
    let Some(text) = super::commit_config::committed_text(repo, info, &path, &label)? else {
        return Ok(ConfigFile::default());
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        AppError::usage(format!("{label}: {}", e.message().trim())).hint("fix the TOML syntax")
    })?;
    match table.get("config") {
        Some(toml::Value::Table(config)) => {
            let text = toml::to_string(config).expect("a TOML table always serializes");
            Ok(parse_repository_file(&format!("{label} [config]"), &text)?)
        }
        Some(_) => Err(
            AppError::usage(format!("{label}: `config` must be a table"))
                .hint("write it as [config] with keys as in .sandbox.toml"),
        ),
        None => Ok(ConfigFile::default()),
    }
}

/// A budget as written ("30m", "2h", "90s"): CPU milliseconds, more than zero.
pub fn parse_budget(text: &str) -> Option<u64> {
    crate::config::parse_duration(text)
        .map(|d| d.as_millis() as u64)
        .filter(|ms| *ms > 0)
}

/// [`parse_budget`], or a usage error that names `text` (after `label`, where it was found)
/// and how to write one.
fn budget_from(label: &str, text: &str) -> Result<u64> {
    parse_budget(text).ok_or_else(|| {
        AppError::usage(format!("{label}invalid budget {text:?}"))
            .hint("write a CPU time like \"30m\", \"2h\" or \"90s\"")
    })
}

/// An experiment's CPU budget and what its runs have spent of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Budget {
    pub limit_ms: u64,
    pub spent_ms: u64,
    pub exhausted: bool,
}

/// The budget of `e` (the index's, set when it was started or by `experiment budget`), with
/// what every run of its commits made here has spent; `None` without one.
pub fn budget(ctx: &Context, row: &RepoRow, e: &Experiment) -> Result<Option<Budget>> {
    let Some(limit_ms) = e.budget_ms else {
        return Ok(None);
    };
    let spent_ms = ctx.index.experiment_cpu_ms(&row.repository_id, &e.name)?;
    Ok(Some(Budget {
        limit_ms,
        spent_ms,
        exhausted: spent_ms >= limit_ms,
    }))
}

/// How an experiment stands, as `list`, `show` and `status` say it: its state, or
/// `budget_exhausted` for an active one whose runs have spent their budget.
pub fn status_of(e: &Experiment, budget: Option<&Budget>) -> String {
    match (e.state, budget) {
        (State::Active, Some(b)) if b.exhausted => "budget_exhausted".into(),
        (s, _) => s.to_string(),
    }
}

/// The budget a commit of experiment `name` runs under: the index's, tightened by the one in
/// the commit's own `experiment.toml` (a commit may lower it, never raise or lift it).
pub fn run_budget(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    info: &CommitInfo,
    name: &str,
) -> Result<Option<u64>> {
    let indexed = ctx
        .index
        .experiment(&row.repository_id, name)?
        .and_then(|e| e.budget_ms);
    let path = metadata_path(name);
    let label = format!("{}:{path}", util::short(&info.id.to_string()));
    let own = match super::commit_config::committed_text(repo, info, &path, &label)? {
        None => None,
        Some(text) => {
            let table: toml::Table = toml::from_str(&text).map_err(|e| {
                AppError::usage(format!("{label}: {}", e.message().trim()))
                    .hint("fix the TOML syntax")
            })?;
            match table.get("budget") {
                None => None,
                Some(toml::Value::String(s)) => Some(budget_from(&format!("{label}: "), s)?),
                Some(_) => {
                    return Err(AppError::usage(format!("{label}: budget must be a string"))
                        .hint("write it like budget = \"30m\""))
                }
            }
        }
    };
    Ok(match (indexed, own) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

fn read_metadata(repo: &gix::Repository, commit: ObjectId, name: &str) -> Option<ExperimentFile> {
    let info = git::commit_info(repo, commit).ok()?;
    let path = metadata_path(name);
    let text = super::commit_config::committed_text(repo, &info, &path, &path).ok()??;
    toml::from_str(&text).ok()
}

/// The commit an experiment's results hang off: its branch, else its archive, else what was
/// promoted.
pub fn head_of(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    for r in [branch_ref(name), archive_ref(name), promoted_ref(name)] {
        if let Some(id) = ref_tip(repo, &r)? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

fn names_under(repo: &gix::Repository, prefix: &str) -> Result<Vec<String>> {
    let refs = repo.references().map_err(git::gix_err)?;
    let mut out = Vec::new();
    for r in refs.prefixed(prefix).map_err(git::gix_err)? {
        let Ok(r) = r else { continue };
        let full = r.name().as_bstr().to_string();
        if let Some(name) = full.strip_prefix(prefix) {
            if util::name_problem(name).is_none() {
                out.push(name.to_string());
            }
        }
    }
    Ok(out)
}

/// Every experiment git knows of, with its state read from the refs: a rolled-back ref means
/// rolled back, else a promoted ref means promoted, else a branch means active, else an archive
/// means killed.
pub fn scan(repo: &gix::Repository) -> Result<Vec<Experiment>> {
    let mut names = std::collections::BTreeSet::new();
    for prefix in [BRANCH_PREFIX, ARCHIVE_PREFIX, PROMOTED_PREFIX] {
        names.extend(names_under(repo, prefix)?);
    }
    let mut out = Vec::new();
    for name in names {
        let state = if ref_tip(repo, &rolled_back_ref(&name))?.is_some() {
            State::RolledBack
        } else if ref_tip(repo, &promoted_ref(&name))?.is_some() {
            State::Promoted
        } else if ref_tip(repo, &branch_ref(&name))?.is_some() {
            State::Active
        } else {
            State::Killed
        };
        let head = head_of(repo, &name)?;
        let meta = head.and_then(|h| read_metadata(repo, h, &name));
        let created_at = match &meta {
            Some(m) => m.created_at.clone(),
            None => head
                .and_then(|h| repo.find_commit(h).ok())
                .and_then(|c| c.time().ok())
                .map(|t| time::rfc3339(t.seconds * 1000))
                .unwrap_or_else(time::now_rfc3339),
        };
        out.push(Experiment {
            branch: format!("experiment/{name}"),
            state,
            hypothesis: meta.as_ref().and_then(|m| m.hypothesis.clone()),
            base_commit: meta.as_ref().map(|m| m.base_commit.clone()),
            budget_ms: meta
                .as_ref()
                .and_then(|m| m.budget.as_deref())
                .and_then(parse_budget),
            updated_at: created_at.clone(),
            created_at,
            name,
        });
    }
    Ok(out)
}

/// Bring the index in line with git: experiments found in refs are added or get their state
/// from the refs. Rows git no longer knows (killed with `--delete`) are kept as history.
pub fn sync(ctx: &Context, repo: &gix::Repository, row: &RepoRow) -> Result<()> {
    for mut e in scan(repo)? {
        match ctx.index.experiment(&row.repository_id, &e.name)? {
            Some(old) if old.state == e.state => continue,
            Some(old) => {
                e.created_at = old.created_at;
                e.updated_at = time::now_rfc3339();
            }
            None => {}
        }
        ctx.index.put_experiment(&row.repository_id, &e)?;
    }
    Ok(())
}

/// The experiment called `name`, or a usage error naming the fix.
pub fn find(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
) -> Result<Experiment> {
    repos::check_name(name)?;
    sync(ctx, repo, row)?;
    if let Some(e) = ctx.index.experiment(&row.repository_id, name)? {
        return Ok(e);
    }
    // A typo is the likely cause: name the experiments there are, not a way to start this one.
    let all = ctx.index.experiments(&row.repository_id)?;
    let mut names: Vec<String> = all.into_iter().map(|e| e.name).collect();
    names.sort();
    let hint = match names.len() {
        0 => "this repository has no experiments yet (`git sandbox experiment start NAME` starts one)".to_string(),
        n => format!(
            "its experiments are: {}{} (`git sandbox experiment list` shows them)",
            names[..n.min(10)].join(", "),
            if n > 10 { ", …" } else { "" }
        ),
    };
    Err(AppError::usage(format!("unknown experiment {name:?}")).hint(hint))
}

#[derive(Debug, serde::Serialize)]
pub struct Started {
    pub experiment: String,
    pub branch: String,
    pub commit: String,
    pub base: String,
    pub base_commit: String,
}

/// `experiment start`: the branch from `from` (default production) with the metadata committed
/// on it, without touching the work tree, then the index row.
pub fn start(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
    hypothesis: Option<&str>,
    from: Option<&str>,
    budget: Option<&str>,
) -> Result<Started> {
    repos::check_name(name)?;
    let budget_ms = budget.map(|b| budget_from("", b)).transpose()?;
    let branch = branch_ref(name);
    for (r, what) in [
        (branch.clone(), "its branch exists"),
        (archive_ref(name), "it was killed and is archived"),
        (promoted_ref(name), "it was promoted"),
    ] {
        if ref_tip(repo, &r)?.is_some() {
            return Err(AppError::usage(format!(
                "experiment {name:?} already exists ({what}: {r})"
            ))
            .hint("choose another name, see `git sandbox experiment list`"));
        }
    }
    let config = production_config(ctx, repo)?;
    let (base_label, base) = match from {
        Some(rev) => (rev.to_string(), git::resolve_commit(repo, rev)?),
        None => {
            let target = &config.promote.target;
            match ref_tip(repo, &format!("refs/heads/{target}"))? {
                Some(tip) => (target.clone(), tip),
                None => {
                    return Err(AppError::usage(format!(
                        "the production branch {target:?} does not exist"
                    ))
                    .hint("pass --from REV, or name the production branch with [promote] target in .sandbox.toml"))
                }
            }
        }
    };
    let dir = git_dir_for_cli(repo);
    let env = cli::fallback_identity(&dir);
    let now = time::now_rfc3339();
    let meta = ExperimentFile {
        name: name.to_string(),
        hypothesis: hypothesis
            .map(str::to_string)
            .filter(|h| !h.trim().is_empty()),
        created_at: now.clone(),
        author: author(&dir, &env),
        base_commit: base.to_string(),
        base: base_label.clone(),
        budget: budget.map(|b| b.trim().to_string()),
        config: toml::Table::new(),
    };
    let body = format!(
        "# Experiment {name}, started by `git sandbox experiment start`.\n\
         # [config] takes keys as in .sandbox.toml; they apply to the runs of experiment/{name}\n\
         # (limits may only be tightened).\n{}",
        toml::to_string(&meta).expect("metadata always serializes")
    );
    let commit = commit_file(
        repo,
        &dir,
        &env,
        base,
        &metadata_path(name),
        body.as_bytes(),
        &{
            let mut m = format!("Start experiment {name}");
            if let Some(h) = &meta.hypothesis {
                m.push_str(&format!("\n\nHypothesis: {h}"));
            }
            m
        },
    )?;
    cli::update_refs(
        &dir,
        &format!("create {branch} {commit}\n"),
        &format!("git-sandbox: start experiment {name}"),
    )?;
    let e = Experiment {
        name: name.to_string(),
        branch: format!("experiment/{name}"),
        state: State::Active,
        hypothesis: meta.hypothesis.clone(),
        base_commit: Some(base.to_string()),
        created_at: now.clone(),
        updated_at: now,
        budget_ms,
    };
    let indexed = ctx
        .index
        .put_experiment(&row.repository_id, &e)
        .and_then(|_| {
            ctx.index.add_event(
                "experiment.started",
                Some(&row.repository_id),
                None,
                Some(&commit.to_string()),
                &serde_json::json!({"experiment": name, "base": base_label, "base_commit": base.to_string()}),
            )
        });
    if let Err(err) = indexed {
        // Take the branch back so a retry starts clean.
        let _ = cli::update_refs(
            &dir,
            &format!("delete {branch} {commit}\n"),
            "git-sandbox: undo start",
        );
        return Err(err.into());
    }
    Ok(Started {
        experiment: name.to_string(),
        branch: e.branch,
        commit: commit.to_string(),
        base: base_label,
        base_commit: base.to_string(),
    })
}

/// `Name <email>` of whoever commits here (the fallback identity when git has none).
fn author(dir: &Path, env: &[(&str, &str)]) -> String {
    cli::git_with_env(dir, &["var", "GIT_AUTHOR_IDENT"], env)
        .ok()
        .and_then(|ident| {
            let ident = ident.trim();
            ident.rfind('>').map(|end| ident[..=end].to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A commit on top of `parent` whose tree is the parent's with one file written: built in a
/// private index, so the user's index and work tree are never touched.
fn commit_file(
    repo: &gix::Repository,
    dir: &Path,
    env: &[(&str, &str)],
    parent: ObjectId,
    path: &str,
    body: &[u8],
    message: &str,
) -> Result<ObjectId> {
    let blob = repo.write_blob(body).map_err(git::gix_err)?.detach();
    let tmp = tempfile::tempdir().map_err(io_err("cannot create a temporary index"))?;
    let index = tmp.path().join("index");
    let index = index.to_string_lossy().into_owned();
    let with_index = [("GIT_INDEX_FILE", index.as_str())];
    cli::git_with_env(dir, &["read-tree", &parent.to_string()], &with_index)?;
    cli::git_with_env(
        dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ],
        &with_index,
    )?;
    let tree = cli::git_with_env(dir, &["write-tree"], &with_index)?;
    let commit = cli::git_with_env(
        dir,
        &[
            "commit-tree",
            tree.trim(),
            "-p",
            &parent.to_string(),
            "-m",
            message,
        ],
        env,
    )?;
    ObjectId::from_hex(commit.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::Gix(format!("git commit-tree: {e}"))))
}

/// One commit of an experiment's branch with its result.
#[derive(Debug, serde::Serialize)]
pub struct BranchRun {
    pub commit: String,
    pub summary: String,
    pub result: Option<RunRecord>,
}

/// An experiment with what `list` and `show` print about it.
#[derive(Debug, serde::Serialize)]
pub struct Overview {
    #[serde(flatten)]
    pub experiment: Experiment,
    /// Its state, or `budget_exhausted` for an active one out of budget.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    pub head: Option<String>,
    /// Commits on the branch (since its base) that have a result.
    pub runs: usize,
    pub latest_result: Option<RunRecord>,
    pub latest_evaluation: Option<Evaluation>,
}

#[derive(Debug, serde::Serialize)]
pub struct Detail {
    #[serde(flatten)]
    pub overview: Overview,
    pub metadata: Option<ExperimentFile>,
    /// The branch's commits since its base, newest first.
    pub commits: Vec<BranchRun>,
    /// For a rolled-back experiment: the revert commit and why (from its message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
}

#[derive(Debug, serde::Serialize)]
pub struct Rollback {
    pub revert: String,
    pub reason: String,
}

/// The revert commit `refs/sandbox/rolled-back/<name>` points at, and the reason its message
/// gives (the paragraph after the subject, up to "; this reverts").
fn rollback_of(repo: &gix::Repository, name: &str) -> Result<Option<Rollback>> {
    let Some(revert) = ref_tip(repo, &rolled_back_ref(name))? else {
        return Ok(None);
    };
    let message = repo
        .find_commit(revert)
        .ok()
        .and_then(|c| c.message_raw().ok().map(|m| m.to_string()))
        .unwrap_or_default();
    let reason = message
        .split("\n\n")
        .nth(1)
        .map(|p| {
            p.split("; this reverts")
                .next()
                .unwrap_or(p)
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    Ok(Some(Rollback {
        revert: revert.to_string(),
        reason,
    }))
}

/// The commits of an experiment since its base, newest first, with their results. An
/// experiment started with `experiment start` has its base in its metadata; a branch pushed as
/// `experiment/NAME` without it (agents do this) starts where it leaves production.
fn branch_runs(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    reader: &mut results::NoteReader,
    e: &Experiment,
    head: ObjectId,
) -> Result<Vec<BranchRun>> {
    let base = e
        .base_commit
        .as_deref()
        .and_then(|b| ObjectId::from_hex(b.as_bytes()).ok())
        .filter(|b| repo.find_commit(*b).is_ok());
    let hidden = match base {
        Some(b) => Some(b),
        None => production_config(ctx, repo)
            .ok()
            .and_then(|c| production_tip(repo, &c).ok())
            .map(|(_, tip)| tip),
    };
    let mut walk = repo.rev_walk([head]);
    if let Some(h) = hidden {
        walk = walk.with_hidden([h]);
    }
    let mut out = Vec::new();
    for info in walk.all().map_err(git::gix_err)? {
        let id = info.map_err(git::gix_err)?.id;
        let summary = git::commit_info(repo, id)?.summary;
        let result = results::find_evidence(ctx, repo, row, reader, id)?;
        out.push(BranchRun {
            commit: id.to_string(),
            summary,
            result,
        });
        if out.len() >= SHOW_LIMIT {
            break;
        }
    }
    Ok(out)
}

fn overview(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    e: Experiment,
) -> Result<(Overview, Vec<BranchRun>)> {
    let head = head_of(repo, &e.name)?;
    let mut reader = results::NoteReader::new(repo)?;
    let commits = match head {
        Some(h) => branch_runs(ctx, repo, row, &mut reader, &e, h)?,
        None => Vec::new(),
    };
    let latest_result = match head {
        Some(h) => results::find_evidence(ctx, repo, row, &mut reader, h)?,
        None => None,
    };
    let latest_evaluation = latest_evaluation(ctx, repo, row, &e.name, head)?;
    let budget = budget(ctx, row, &e)?;
    Ok((
        Overview {
            status: status_of(&e, budget.as_ref()),
            budget,
            runs: commits.iter().filter(|c| c.result.is_some()).count(),
            head: head.map(|h| h.to_string()),
            latest_result,
            latest_evaluation,
            experiment: e,
        },
        commits,
    ))
}

/// The evaluation of the experiment's head (its note), else the newest one the index has.
pub fn latest_evaluation(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
    head: Option<ObjectId>,
) -> Result<Option<Evaluation>> {
    if let Some(h) = head {
        if let Some(body) = git::notes::read_note(repo, git::EVAL_NOTES_REF, h)? {
            if let Ok(ev) = serde_json::from_slice::<Evaluation>(&body) {
                if ev.experiment == name && ev.head.commit == h {
                    return Ok(Some(ev));
                }
            }
        }
    }
    Ok(ctx.index.latest_evaluation(&row.repository_id, name)?)
}

pub fn list(ctx: &Context, repo: &gix::Repository, row: &RepoRow) -> Result<Vec<Overview>> {
    sync(ctx, repo, row)?;
    ctx.index
        .experiments(&row.repository_id)?
        .into_iter()
        .map(|e| overview(ctx, repo, row, e).map(|(o, _)| o))
        .collect()
}

/// `experiment budget`: set or lift (`None`) an experiment's CPU budget.
pub fn set_budget(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
    value: Option<&str>,
) -> Result<Option<Budget>> {
    let mut e = find(ctx, repo, row, name)?;
    let ms = value.map(|b| budget_from("", b)).transpose()?;
    ctx.index
        .set_experiment_budget(&row.repository_id, name, ms)?;
    ctx.index.add_event(
        "experiment.budget",
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"experiment": name, "budget_ms": ms}),
    )?;
    e.budget_ms = ms;
    budget(ctx, row, &e)
}

pub fn show(ctx: &Context, repo: &gix::Repository, row: &RepoRow, name: &str) -> Result<Detail> {
    let e = find(ctx, repo, row, name)?;
    let head = head_of(repo, name)?;
    let metadata = head.and_then(|h| read_metadata(repo, h, name));
    let (overview, commits) = overview(ctx, repo, row, e)?;
    Ok(Detail {
        overview,
        metadata,
        commits,
        rollback: rollback_of(repo, name)?,
    })
}

#[derive(Debug, serde::Serialize)]
pub struct Killed {
    pub experiment: String,
    pub commit: Option<String>,
    /// Where the branch went; `None` with `--delete`.
    pub archive: Option<String>,
    pub deleted: bool,
}

/// `kill`: move the branch to the archive (kept reachable, so its results stay) in one ref
/// transaction, or with `delete` drop it; mark the experiment killed.
pub fn kill(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    name: &str,
    delete: bool,
) -> Result<Killed> {
    let e = find(ctx, repo, row, name)?;
    let dir = git_dir_for_cli(repo);
    let branch = branch_ref(name);
    let archive = archive_ref(name);
    let tx = match e.state {
        State::Promoted => {
            return Err(AppError::usage(format!(
                "experiment {name:?} was promoted; its work is in production and there is nothing to kill"
            )))
        }
        State::RolledBack => {
            return Err(AppError::usage(format!(
                "experiment {name:?} was promoted and rolled back; there is nothing to kill"
            ))
            .hint(format!(
                "fix it in a new experiment: git sandbox experiment start NAME --from {}",
                branch_ref(name)
            )))
        }
        State::Killed => match ref_tip(repo, &archive)? {
            Some(tip) if delete => format!("delete {archive} {tip}\n"),
            _ => {
                return Err(if ref_tip(repo, &archive)?.is_some() {
                    AppError::usage(format!(
                        "experiment {name:?} is already killed (archived at {archive})"
                    ))
                    .hint("pass --delete to remove the archive")
                } else {
                    AppError::usage(format!("experiment {name:?} is already killed"))
                })
            }
        },
        State::Active => {
            let Some(tip) = ref_tip(repo, &branch)? else {
                return Err(
                    AppError::usage(format!("experiment {name:?} has no branch {branch}"))
                        .hint("see `git sandbox experiment list`"),
                );
            };
            if let Some(wt) = cli::worktrees_on(&dir, &format!("experiment/{name}"))?.first() {
                return Err(AppError::refused(format!(
                    "kill refused: experiment/{name} is checked out in {}; nothing was changed",
                    wt.display()
                ))
                .hint("switch to another branch there first (git switch main)"));
            }
            if delete {
                format!("delete {branch} {tip}\n")
            } else {
                format!("create {archive} {tip}\ndelete {branch} {tip}\n")
            }
        }
    };
    let commit = head_of(repo, name)?.map(|c| c.to_string());
    cli::update_refs(&dir, &tx, &format!("git-sandbox: kill experiment {name}"))?;
    ctx.index
        .set_experiment_state(&row.repository_id, name, State::Killed)?;
    ctx.index.add_event(
        "experiment.killed",
        Some(&row.repository_id),
        None,
        commit.as_deref(),
        &serde_json::json!({"experiment": name, "deleted": delete}),
    )?;
    Ok(Killed {
        experiment: name.to_string(),
        commit,
        archive: (!delete).then_some(archive),
        deleted: delete,
    })
}
