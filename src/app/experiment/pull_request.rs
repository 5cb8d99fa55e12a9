//! Promotion by pull request (`promote --strategy pull-request`): the same checks as a local
//! promotion, then the experiment's branch (with the notes, its evidence) is pushed to GitHub and
//! a pull request into production is opened, its body the evaluation. The experiment stays
//! active until the pull request is merged; `refs/sandbox/pull/<name>` remembers what was
//! proposed, and when production's branch on the remote contains it (seen by a fetch, a poll or
//! a webhook), the experiment is marked promoted.

use crate::app::experiment::experiments::{self, branch_ref, promoted_ref};
use crate::app::experiment::promote::{check, PromoteOptions};
use crate::app::{AppError, Repo, Result};
use gs_git::cli;
use gs_github::Answer;
use gs_model::EventKind;
use gs_model::{Evaluation, State};
use std::sync::atomic::AtomicBool;

/// Where the head a pull request proposed is remembered.
pub fn pull_ref(name: &str) -> String {
    format!("refs/sandbox/pull/{name}")
}

#[derive(Debug, serde::Serialize)]
pub struct PullRequested {
    pub experiment: String,
    pub base: String,
    pub head: String,
    pub title: String,
    pub body: String,
    pub dry_run: bool,
    pub number: Option<u64>,
    pub html_url: Option<String>,
    /// GitHub already had an open pull request for this branch.
    pub existing: bool,
}

/// The evaluation as a Markdown table, for the pull request's body.
pub fn body(ev: &Evaluation) -> String {
    let mut out = format!(
        "Promotes experiment `{}`: **{}** — {}\n\n| criterion | result | value | threshold |\n| --- | --- | --- | --- |\n",
        ev.experiment, ev.recommendation, ev.reason
    );
    for c in &ev.criteria {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            c.description.replace('|', "\\|"),
            if c.pass { "✔" } else { "✘" },
            c.value,
            c.threshold
        ));
    }
    out.push_str(&format!(
        "\nBase `{}` · head `{}` · evaluated {} by git-sandbox. The full records are in `refs/notes/sandbox` (`git sandbox fetch`).\n",
        gs_util::short(&ev.base.commit),
        gs_util::short(&ev.head.commit),
        ev.evaluated_at
    ));
    out
}

pub fn open(
    at: Repo<'_>,
    name: &str,
    opts: &PromoteOptions,
    dry_run: bool,
    interrupt: &AtomicBool,
) -> Result<PullRequested> {
    let Repo { ctx, repo, row } = at;
    let mut c = check(at, name, opts, interrupt)?;
    let config = ctx.layers.resolve().github;
    let remote = crate::app::locate::remote_name(&c.dir, None)?;
    let url = cli::get_config(&c.dir, &format!("remote.{remote}.url")).unwrap_or_default();
    let Some((owner, gh_repo)) = gs_github::repo_of(&url, &config.web_url) else {
        return Err(AppError::usage(format!(
            "the remote {remote} is not on GitHub ({})",
            config.web_url
        ))
        .hint(
            "connect the repository with `git sandbox remote add-github`, or set [github] web_url",
        ));
    };
    let mut out = PullRequested {
        experiment: name.to_string(),
        base: c.target.clone(),
        head: format!("experiment/{name}"),
        title: format!("Promote experiment {name}"),
        body: body(&c.ev),
        dry_run,
        number: None,
        html_url: None,
        existing: false,
    };
    if dry_run {
        return Ok(out);
    }
    let Some(token) = crate::app::publish::github::token(&config)? else {
        return Err(
            AppError::usage("opening a pull request needs a GitHub token").hint(
                "set GITHUB_TOKEN or [github] token_command (see the README's GitHub section)",
            ),
        );
    };
    drop_bookkeeping(repo, &mut c, name)?;
    let pushed = crate::app::publish::remote::push_branch(at, Some(&remote), &out.head)?;
    if let Some(r) = pushed.rejected.iter().find(|r| r.name == branch_ref(name)) {
        return Err(AppError::refused(format!(
            "the remote refused experiment/{name} ({}); no pull request was opened",
            r.reason
        ))
        .hint(format!("bring it up to date with {remote}'s (git pull {remote} experiment/{name}), then promote again")));
    }
    let client = gs_github::Client::new(&config.api_url, &token)
        .map_err(|e| AppError::usage(e).hint("fix [github] api_url in your user config"))?;
    let answer = client.post(
        &format!("/repos/{owner}/{gh_repo}/pulls"),
        &serde_json::json!({"title": out.title, "head": out.head, "base": out.base, "body": out.body}),
    );
    match answer {
        Answer::Ok(v) => {
            out.number = v["number"].as_u64();
            out.html_url = v["html_url"].as_str().map(str::to_string);
        }
        Answer::Rejected {
            status: 422,
            message,
        } if message.contains("already exists") => {
            out.existing = true;
        }
        Answer::Rejected { status, message } => {
            return Err(AppError::refused(format!(
                "GitHub refused the pull request ({status}: {message}); the branch was pushed"
            ))
            .hint("a token needs Pull requests: write; see the README's GitHub section"))
        }
        Answer::RateLimited(w) => {
            return Err(AppError::refused(format!(
                "GitHub's rate limit: try again in {} s; the branch was pushed",
                w.as_secs()
            )))
        }
        Answer::Unreachable(e) => {
            return Err(AppError::refused(format!(
                "GitHub could not be reached ({e}); the branch was pushed"
            ))
            .hint(format!(
                "run `git sandbox promote {name} --strategy pull-request` again"
            )))
        }
    }
    cli::update_refs(
        &c.dir,
        &format!("update {} {}\n", pull_ref(name), c.head),
        &format!("git-sandbox: pull request for experiment {name}"),
    )?;
    ctx.index.add_event(
        EventKind::ExperimentPullRequest,
        Some(&row.repository_id),
        None,
        Some(&c.head.to_string()),
        &serde_json::json!({"experiment": name, "number": out.number, "url": out.html_url, "existing": out.existing}),
    )?;
    Ok(out)
}

/// An old experiment's committed metadata would reach production with the pull request's
/// merge: a commit on the branch drops it first (refused while the branch is checked out, whose
/// work tree would then lag behind it).
fn drop_bookkeeping(
    repo: &gs_git::Repository,
    c: &mut crate::app::experiment::promote::Checked,
    name: &str,
) -> Result<()> {
    let paths = crate::app::experiment::promote::bookkeeping(repo, c.head, c.base);
    if paths.is_empty() {
        return Ok(());
    }
    if let Some(wt) = cli::worktrees_on(&c.dir, &format!("experiment/{name}"))?.first() {
        return Err(AppError::refused(format!(
            "experiment/{name} holds {}, which production must not get, and is checked out in {}; no pull request was opened",
            paths.join(", "),
            wt.display()
        ))
        .hint(format!(
            "drop it there (git rm {} && git commit -m 'Drop experiment bookkeeping'), then promote again",
            paths.join(" ")
        )));
    }
    let dropped = experiments::meta::drop_commit(&c.dir, c.head, name, &paths)?;
    cli::update_refs(
        &c.dir,
        &format!("update {} {dropped} {}\n", branch_ref(name), c.head),
        &format!("git-sandbox: drop experiment bookkeeping from experiment/{name}"),
    )?;
    c.head = dropped;
    Ok(())
}

/// Mark promoted the experiments whose pull request was merged: what `refs/sandbox/pull/<name>`
/// proposed is contained in production's branch on `remote` (as fetched). Returns their names.
pub fn adopt_merged(at: Repo<'_>, remote: &str) -> Result<Vec<String>> {
    let Repo { ctx, repo, row } = at;
    let dir = experiments::git_dir_for_cli(repo);
    let config = experiments::production_config(ctx, repo)?;
    let Some(production) = gs_git::remote::ref_tip(
        &dir,
        &format!("refs/remotes/{remote}/{}", config.promote.target),
    ) else {
        return Ok(Vec::new());
    };
    let mut done = Vec::new();
    for e in ctx.index.experiments(&row.repository_id)? {
        if e.state != State::Active {
            continue;
        }
        let Some(proposed) = gs_git::remote::ref_tip(&dir, &pull_ref(&e.name)) else {
            continue;
        };
        let (merged, _, _) = cli::git_status(
            &dir,
            &["merge-base", "--is-ancestor", &proposed, &production],
            &[],
        )?;
        if !merged {
            continue;
        }
        cli::update_refs(
            &dir,
            &format!("update {} {production}\n", promoted_ref(&e.name)),
            &format!("git-sandbox: experiment {} merged on {remote}", e.name),
        )?;
        ctx.index
            .set_experiment_state(&row.repository_id, &e.name, State::Promoted)?;
        crate::app::publish::emit(
            ctx,
            crate::app::publish::Event::News {
                kind: EventKind::ExperimentPromoted,
                row: Some(row),
                data: serde_json::json!({"experiment": e.name, "target": config.promote.target,
                               "commit": production.to_string(), "strategy": "pull-request"}),
            },
        );
        ctx.index.add_event(
            EventKind::ExperimentPromoted,
            Some(&row.repository_id),
            None,
            Some(&production),
            &serde_json::json!({"experiment": e.name, "target": config.promote.target, "strategy": "pull-request", "remote": remote}),
        )?;
        done.push(e.name);
    }
    Ok(done)
}
