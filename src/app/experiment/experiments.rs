//! Experiments as branches: `experiment/<name>`, its metadata outside the tree in
//! `refs/sandbox/experiments/<name>` ([`meta`]), archived under `refs/sandbox/archive/<name>`
//! when killed, remembered under `refs/sandbox/promoted/<name>` when promoted. Git holds the
//! state; the index follows it ([`sync`]) and `reindex` rebuilds it from the refs.

use crate::app::locate::check_name;
use crate::app::{records::results, AppError, Context, Repo, Result};
use gs_config::{parse_repository_file, Config};
use gs_git as git;
use gs_git::cli;
use gs_git::ObjectId;
use gs_model::EventKind;
use gs_model::{Evaluation, Experiment, ExperimentFile, RunRecord, State};
use gs_store::RepoRow;
use gs_util::time;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub use crate::app::config::experiment_meta as meta;
mod scan;

pub use meta::{meta_ref, Origin};
pub use scan::{scan, Scanned, Snapshot};

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

/// The commit a ref points at, if the ref exists.
pub fn ref_tip(repo: &gs_git::Repository, refname: &str) -> Result<Option<ObjectId>> {
    Ok(git::objects::ref_commit(repo, refname)?)
}

/// The directory git commands run in: the work tree, or the git dir of a bare repository.
pub fn git_dir_for_cli(repo: &gs_git::Repository) -> PathBuf {
    git::repo_root(repo)
}

/// The settings that decide production: the user's layers with the `.sandbox.toml` of the work
/// tree (what the user sees and edits) over the settings the repository was adopted with.
pub fn production_config(ctx: &Context, repo: &gs_git::Repository) -> Result<Config> {
    Ok(ctx.checkout_layers(repo)?.resolve())
}

/// The production branch (`[promote] target`) and its tip.
pub fn production_tip(repo: &gs_git::Repository, config: &Config) -> Result<(String, ObjectId)> {
    let target = config.promote.target.clone();
    match ref_tip(repo, &format!("refs/heads/{target}"))? {
        Some(id) => Ok((target, id)),
        None => Err(
            AppError::usage(format!("the production branch {target:?} does not exist"))
                .hint("create it, or name another one with [promote] target in .sandbox.toml"),
        ),
    }
}

/// A budget as written ("30m", "2h", "90s"): CPU milliseconds, more than zero.
pub fn parse_budget(text: &str) -> Option<u64> {
    gs_config::parse_duration(text)
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

/// The commit an experiment's results hang off: its branch, else its archive, else what was
/// promoted.
pub fn head_of(repo: &gs_git::Repository, name: &str) -> Result<Option<ObjectId>> {
    for r in [branch_ref(name), archive_ref(name), promoted_ref(name)] {
        if let Some(id) = ref_tip(repo, &r)? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Bring the index in line with git (see [`scan::sync`]).
pub fn sync(at: Repo<'_>) -> Result<()> {
    scan::sync(at).map(|_| ())
}

/// The experiment called `name`, or a not-found error naming the experiments there are.
pub fn find(at: Repo<'_>, name: &str) -> Result<Experiment> {
    let Repo { ctx, row, .. } = at;
    check_name(name)?;
    sync(at)?;
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
    Err(AppError::not_found(format!("unknown experiment {name:?}")).hint(hint))
}

#[derive(Debug, serde::Serialize)]
pub struct Started {
    pub experiment: String,
    pub branch: String,
    pub commit: String,
    pub base: String,
    pub base_commit: String,
}

/// `experiment start`: the metadata written to its ref and the branch created at `from`
/// (default production) in one ref transaction: no commit, so nothing new to run and nothing
/// of it in the tree production gets. The work tree is not touched. Then the index row.
#[allow(clippy::too_many_arguments)]
pub fn start(
    at: Repo<'_>,
    name: &str,
    hypothesis: Option<&str>,
    from: Option<&str>,
    budget: Option<&str>,
    config: Option<&str>,
) -> Result<Started> {
    let Repo { ctx, repo, row } = at;
    check_name(name)?;
    let budget_ms = budget.map(|b| budget_from("", b)).transpose()?;
    let config = match config {
        Some(text) => {
            // Checked as a `.sandbox.toml` is, so a mistake is found now, not at its first run.
            parse_repository_file("--config", text)?;
            toml::from_str::<toml::Table>(text).map_err(|e| {
                AppError::usage(format!("--config: {}", e.message().trim()))
                    .hint("write keys as in .sandbox.toml")
            })?
        }
        None => toml::Table::new(),
    };
    let branch = branch_ref(name);
    for (r, what) in [
        (branch.clone(), "its branch exists"),
        (archive_ref(name), "it was killed and is archived"),
        (promoted_ref(name), "it was promoted"),
        (meta_ref(name), "its metadata exists"),
    ] {
        if ref_tip(repo, &r)?.is_some() {
            return Err(AppError::usage(format!(
                "experiment {name:?} already exists ({what}: {r})"
            ))
            .hint("choose another name, see `git sandbox experiment list`"));
        }
    }
    let production = production_config(ctx, repo)?;
    let (base_label, base) = match from {
        Some(rev) => (rev.to_string(), git::resolve_commit(repo, rev)?),
        None => {
            let target = &production.promote.target;
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
    let file = ExperimentFile {
        name: name.to_string(),
        hypothesis: hypothesis
            .map(str::to_string)
            .filter(|h| !h.trim().is_empty()),
        created_at: now.clone(),
        author: author(&dir, &env),
        base_commit: base.to_string(),
        base: base_label.clone(),
        budget: budget.map(|b| b.trim().to_string()),
        config,
    };
    let mut message = format!("start experiment {name}");
    if let Some(h) = &file.hypothesis {
        message.push_str(&format!("\n\nHypothesis: {h}"));
    }
    let meta_line = meta::update_line(repo, &dir, &file, None, &message)?;
    let meta_new = meta_line
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string();
    cli::update_refs(
        &dir,
        &format!("{meta_line}create {branch} {base}\n"),
        &format!("git-sandbox: start experiment {name}"),
    )?;
    let e = Experiment {
        name: name.to_string(),
        branch: format!("experiment/{name}"),
        state: State::Active,
        hypothesis: file.hypothesis.clone(),
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
                EventKind::ExperimentStarted,
                Some(&row.repository_id),
                None,
                Some(&base.to_string()),
                &serde_json::json!({"experiment": name, "base": base_label, "base_commit": base.to_string()}),
            )
        });
    if let Err(err) = indexed {
        // Take the refs back so a retry starts clean.
        let _ = cli::update_refs(
            &dir,
            &format!(
                "delete {branch} {base}\ndelete {} {meta_new}\n",
                meta_ref(name)
            ),
            "git-sandbox: undo start",
        );
        return Err(err.into());
    }
    Ok(Started {
        experiment: name.to_string(),
        branch: e.branch,
        commit: base.to_string(),
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

/// One commit of an experiment's branch with its result.
#[derive(Debug, Clone, serde::Serialize)]
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
    /// Shared: experiments with no commits of their own share their base's.
    #[serde(serialize_with = "shared")]
    pub latest_result: Option<Rc<RunRecord>>,
    pub latest_evaluation: Option<Evaluation>,
    /// Where its metadata was read: `local`, or `{"remote": NAME}` for a remote's copy (read
    /// where this repository has none); absent without metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_from: Option<Origin>,
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
fn rollback_of(repo: &gs_git::Repository, name: &str) -> Result<Option<Rollback>> {
    let Some(revert) = ref_tip(repo, &rolled_back_ref(name))? else {
        return Ok(None);
    };
    let message = git::objects::message(repo, revert).unwrap_or_default();
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

fn shared<S: serde::Serializer>(
    r: &Option<Rc<RunRecord>>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&r.as_deref(), s)
}

/// What the overviews of many experiments share: one note reader, production's tip, the
/// results of the commits read so far (experiments with no commits of their own share their
/// base), and the index's evaluations read in one query.
struct Lister<'a> {
    ctx: &'a Context,
    repo: &'a gs_git::Repository,
    row: &'a RepoRow,
    reader: results::NoteReader,
    production: Option<Option<ObjectId>>,
    evidence: HashMap<ObjectId, Option<Rc<RunRecord>>>,
    eval_notes: HashMap<ObjectId, Option<Evaluation>>,
    evaluations: Option<HashMap<String, Evaluation>>,
    /// Production's newest ancestors, read once for the branches that have no base of their
    /// own (thousands of agents' branches, most of them behind production or merged).
    production_history: Option<Option<git::objects::Ancestors>>,
    /// Each (head, hidden) pair's commits, walked once: many branches share a head.
    walked: HashMap<(ObjectId, Option<ObjectId>), Vec<BranchRun>>,
}

/// How many of production's commits are read to tell the branches behind it.
const PRODUCTION_HISTORY: usize = 50_000;

impl<'a> Lister<'a> {
    fn new(ctx: &'a Context, repo: &'a gs_git::Repository, row: &'a RepoRow) -> Result<Self> {
        Ok(Lister {
            ctx,
            repo,
            row,
            reader: results::NoteReader::new(repo)?,
            production: None,
            evidence: HashMap::new(),
            eval_notes: HashMap::new(),
            evaluations: None,
            production_history: None,
            walked: HashMap::new(),
        })
    }

    fn evidence(&mut self, commit: ObjectId) -> Result<Option<Rc<RunRecord>>> {
        if let Some(r) = self.evidence.get(&commit) {
            return Ok(r.clone());
        }
        let r = results::find_evidence(
            Repo::new(self.ctx, self.repo, self.row),
            &mut self.reader,
            commit,
        )?
        .map(Rc::new);
        self.evidence.insert(commit, r.clone());
        Ok(r)
    }

    fn production(&mut self) -> Option<ObjectId> {
        let (ctx, repo) = (self.ctx, self.repo);
        *self.production.get_or_insert_with(|| {
            production_config(ctx, repo)
                .ok()
                .and_then(|c| production_tip(repo, &c).ok())
                .map(|(_, tip)| tip)
        })
    }

    /// The commits of an experiment since its base, newest first, with their results. An
    /// experiment started with `experiment start` has its base in its metadata; a branch pushed
    /// as `experiment/NAME` without it (agents do this) starts where it leaves production.
    fn branch_runs(&mut self, e: &Experiment, head: ObjectId) -> Result<Vec<BranchRun>> {
        let base = e
            .base_commit
            .as_deref()
            .and_then(|b| ObjectId::from_hex(b.as_bytes()).ok())
            .filter(|b| git::objects::is_commit(self.repo, *b));
        let hidden = match base {
            Some(b) => Some(b),
            None => self.production(),
        };
        // No commits of its own yet: nothing to walk.
        if hidden == Some(head) {
            return Ok(Vec::new());
        }
        if let Some(found) = self.walked.get(&(head, hidden)) {
            return Ok(found.clone());
        }
        let own = match (base, hidden) {
            (None, Some(production)) => self.own_commits_beside(head, production)?,
            _ => None,
        };
        let own = match own {
            Some(own) => own,
            None => {
                let hidden: Vec<ObjectId> = hidden.into_iter().collect();
                git::objects::walk_commits(self.repo, head, &hidden, |_| true)?
                    .take(SHOW_LIMIT)
                    .collect::<git::Result<Vec<_>>>()?
            }
        };
        let mut out = Vec::with_capacity(own.len());
        for id in own {
            let summary = git::commit_info(self.repo, id)?.summary;
            let result = self.evidence(id)?.map(|r| (*r).clone());
            out.push(BranchRun {
                commit: id.to_string(),
                summary,
                result,
            });
        }
        self.walked.insert((head, hidden), out.clone());
        Ok(out)
    }

    /// The commits of `head` that production's history does not hold, as the walk that hides
    /// production finds them, from production's ancestors read once for every branch (each walk
    /// that hides production would read production's history down to the branch again: 20,000
    /// branches behind it took 44 s). `None` when that history's bound leaves a commit unjudged:
    /// the caller walks.
    fn own_commits_beside(
        &mut self,
        head: ObjectId,
        production: ObjectId,
    ) -> Result<Option<Vec<ObjectId>>> {
        let repo = self.repo;
        let history = self.production_history.get_or_insert_with(|| {
            git::objects::Ancestors::of(repo, production, PRODUCTION_HISTORY).ok()
        });
        let Some(history) = history.as_ref() else {
            return Ok(None);
        };
        if history.contains(head) {
            return Ok(Some(Vec::new()));
        }
        let mut own = Vec::new();
        for id in git::objects::walk_commits(repo, head, &[], |id| !history.contains(id))? {
            let id = id?;
            let time = git::objects::commit_time(repo, id).unwrap_or(i64::MIN);
            if !history.knows(time) {
                return Ok(None);
            }
            own.push(id);
            if own.len() >= SHOW_LIMIT {
                break;
            }
        }
        Ok(Some(own))
    }

    /// The evaluation of the experiment's head (its note), else the newest one the index has.
    fn latest_evaluation(
        &mut self,
        name: &str,
        head: Option<ObjectId>,
    ) -> Result<Option<Evaluation>> {
        if let Some(h) = head {
            if !self.eval_notes.contains_key(&h) {
                let ev = git::notes::read_note(self.repo, git::EVAL_NOTES_REF, h)?
                    .and_then(|body| serde_json::from_slice::<Evaluation>(&body).ok())
                    .filter(|ev| ev.head.commit == h);
                self.eval_notes.insert(h, ev);
            }
            if let Some(ev) = self.eval_notes[&h]
                .as_ref()
                .filter(|ev| ev.experiment == name)
            {
                return Ok(Some(ev.clone()));
            }
        }
        Ok(match &self.evaluations {
            Some(all) => all.get(name).cloned(),
            None => self
                .ctx
                .index
                .latest_evaluation(&self.row.repository_id, name)?,
        })
    }

    fn overview(
        &mut self,
        e: Experiment,
        head: Option<ObjectId>,
        metadata_from: Option<Origin>,
    ) -> Result<(Overview, Vec<BranchRun>)> {
        let commits = match head {
            Some(h) => self.branch_runs(&e, h)?,
            None => Vec::new(),
        };
        let latest_result = match head {
            Some(h) => self.evidence(h)?,
            None => None,
        };
        let latest_evaluation = self.latest_evaluation(&e.name, head)?;
        let budget = budget(self.ctx, self.row, &e)?;
        Ok((
            Overview {
                status: status_of(&e, budget.as_ref()),
                budget,
                runs: commits.iter().filter(|c| c.result.is_some()).count(),
                head: head.map(|h| h.to_string()),
                latest_result,
                latest_evaluation,
                metadata_from,
                experiment: e,
            },
            commits,
        ))
    }
}

/// The evaluation of the experiment's head (its note), else the newest one the index has.
pub fn latest_evaluation(
    at: Repo<'_>,
    name: &str,
    head: Option<ObjectId>,
) -> Result<Option<Evaluation>> {
    let Repo { ctx, repo, row } = at;
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

pub fn list(at: Repo<'_>) -> Result<Vec<Overview>> {
    let Repo { ctx, repo, row } = at;
    let (snap, scanned) = scan::sync(at)?;
    let origins: HashMap<String, Origin> = scanned
        .into_iter()
        .filter_map(|s| s.meta.map(|m| (s.experiment.name, m.origin)))
        .collect();
    let _t = gs_util::trace::span("experiments: overviews");
    let mut lister = Lister::new(ctx, repo, row)?;
    lister.evaluations = Some(ctx.index.latest_evaluations(&row.repository_id)?);
    ctx.index
        .experiments(&row.repository_id)?
        .into_iter()
        .map(|e| {
            let head = snap.head(&e.name);
            let origin = origins.get(&e.name).cloned();
            lister.overview(e, head, origin).map(|(o, _)| o)
        })
        .collect()
}

/// `experiment budget`: set or lift (`None`) an experiment's CPU budget.
pub fn set_budget(at: Repo<'_>, name: &str, value: Option<&str>) -> Result<Option<Budget>> {
    let Repo { ctx, repo, row } = at;
    let mut e = find(at, name)?;
    let ms = value.map(|b| budget_from("", b)).transpose()?;
    // Kept in its metadata too, so that `reindex` and other clones know it: this repository's
    // (a remote's copy becomes ours, changed).
    let head = head_of(repo, name)?;
    if let Some(m) = meta::metadata(repo, name, head) {
        let mut file = m.file;
        file.budget = value.map(|v| v.trim().to_string());
        let old = (m.origin == Origin::Local).then_some(m.commit);
        let dir = git_dir_for_cli(repo);
        meta::write(
            repo,
            &dir,
            &file,
            old,
            &format!("experiment {name}: budget {}", value.unwrap_or("none")),
        )?;
    }
    ctx.index
        .set_experiment_budget(&row.repository_id, name, ms)?;
    ctx.index.add_event(
        EventKind::ExperimentBudget,
        Some(&row.repository_id),
        None,
        None,
        &serde_json::json!({"experiment": name, "budget_ms": ms}),
    )?;
    e.budget_ms = ms;
    budget(ctx, row, &e)
}

pub fn show(at: Repo<'_>, name: &str) -> Result<Detail> {
    let Repo { ctx, repo, row } = at;
    let e = find(at, name)?;
    let head = Snapshot::read(repo)?.head(name);
    let meta = meta::metadata(repo, name, head);
    let mut lister = Lister::new(ctx, repo, row)?;
    let origin = meta.as_ref().map(|m| m.origin.clone());
    let (overview, commits) = lister.overview(e, head, origin)?;
    Ok(Detail {
        overview,
        metadata: meta.map(|m| m.file),
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
pub fn kill(at: Repo<'_>, name: &str, delete: bool) -> Result<Killed> {
    let Repo { ctx, repo, row } = at;
    let e = find(at, name)?;
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
                // Its metadata alone (the branch deleted by hand): nothing to archive.
                return match ref_tip(repo, &meta_ref(name))? {
                    Some(_) if !delete => Err(AppError::usage(format!(
                        "experiment {name:?} has no branch {branch}, only its metadata"
                    ))
                    .hint("pass --delete to remove it")),
                    Some(m) => {
                        cli::update_refs(
                            &dir,
                            &format!("delete {} {m}\n", meta_ref(name)),
                            &format!("git-sandbox: kill experiment {name}"),
                        )?;
                        ctx.index
                            .set_experiment_state(&row.repository_id, name, State::Killed)?;
                        Ok(Killed {
                            experiment: name.to_string(),
                            commit: None,
                            archive: None,
                            deleted: true,
                        })
                    }
                    None => Err(AppError::usage(format!(
                        "experiment {name:?} has no branch {branch}"
                    ))
                    .hint("see `git sandbox experiment list`")),
                };
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
    let mut tx = tx;
    if delete {
        // Nothing of it stays: the name may be started afresh.
        if let Some(m) = ref_tip(repo, &meta_ref(name))? {
            tx.push_str(&format!("delete {} {m}\n", meta_ref(name)));
        }
    }
    let commit = head_of(repo, name)?.map(|c| c.to_string());
    cli::update_refs(&dir, &tx, &format!("git-sandbox: kill experiment {name}"))?;
    ctx.index
        .set_experiment_state(&row.repository_id, name, State::Killed)?;
    ctx.index.add_event(
        EventKind::ExperimentKilled,
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
