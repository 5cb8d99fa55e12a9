//! Commit statuses on GitHub: each result of a repository whose remote is on GitHub becomes two
//! statuses, `git-sandbox/tests` and `git-sandbox/analysis`, and one `git-sandbox/check/NAME`
//! per named check, queued in the index with the result; the outbox (`publish/`) posts them.
//! Also the token, and connecting a new repository to GitHub.

use crate::app::{Context, Repo, Result};
use gs_config::GithubConfig;
use gs_github as github;
use gs_github::Answer;
use gs_model::{RunRecord, Status};
use gs_store::{RepoRow, StatusRow};

pub const TESTS_CONTEXT: &str = "git-sandbox/tests";
pub const ANALYSIS_CONTEXT: &str = "git-sandbox/analysis";
/// A named check's context is this and its name.
pub const CHECK_CONTEXT: &str = "git-sandbox/check/";

/// Whether a token can be had without asking anyone: `GITHUB_TOKEN`, `[github] token_command`,
/// or a GitHub App.
fn token_configured(config: &GithubConfig) -> bool {
    std::env::var("GITHUB_TOKEN").is_ok_and(|t| !t.trim().is_empty())
        || config.token_command.is_some()
        || config.app_id.is_some()
}

/// The GitHub App to post check runs as: (app id, its private key, installation id).
pub(super) fn app(config: &GithubConfig) -> Result<Option<(u64, String, u64)>> {
    match (config.app_id, &config.app_key_file, config.installation_id) {
        (None, None, None) => Ok(None),
        (Some(id), Some(file), Some(inst)) => {
            let path = match file.strip_prefix("~/") {
                Some(rest) => std::env::var_os("HOME")
                    .map(|h| std::path::Path::new(&h).join(rest))
                    .unwrap_or_else(|| file.into()),
                None => file.into(),
            };
            let pem = std::fs::read_to_string(&path).map_err(|e| {
                crate::app::AppError::usage(format!(
                    "cannot read the GitHub App's private key {}: {e}",
                    path.display()
                ))
                .hint("download it from the app's settings and name it in [github] app_key_file")
            })?;
            Ok(Some((id, pem, inst)))
        }
        _ => Err(crate::app::AppError::usage(
            "[github] app_id, app_key_file and installation_id go together",
        )
        .hint("set all three for check runs, or none for commit statuses")),
    }
}

/// The token: `GITHUB_TOKEN` of this process (never handed to a test), else what
/// `[github] token_command` prints.
pub fn token(config: &GithubConfig) -> Result<Option<String>> {
    if let Ok(t) = std::env::var("GITHUB_TOKEN") {
        if !t.trim().is_empty() {
            return Ok(Some(t.trim().to_string()));
        }
    }
    let Some(cmd) = &config.token_command else {
        return Ok(None);
    };
    let out = std::process::Command::new("sh")
        .args(["-c", cmd])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| crate::app::AppError::Io {
            context: "cannot run [github] token_command".into(),
            source: e,
        })?;
    let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || t.is_empty() {
        return Err(crate::app::AppError::usage(format!(
            "[github] token_command {cmd:?} printed no token (exit {})",
            out.status.code().unwrap_or(-1)
        ))
        .hint("run it yourself to see why (for `gh auth token`: `gh auth login`), or set GITHUB_TOKEN"));
    }
    Ok(Some(t))
}

/// `owner/repo` of the repository's remote on GitHub, when statuses are wanted for it.
pub(super) fn github_repo(ctx: &Context, repo: &gs_git::Repository) -> Option<(String, String)> {
    let config = ctx.layers.resolve().github;
    if !config.statuses || !token_configured(&config) {
        return None;
    }
    let dir = gs_git::repo_root(repo);
    let remote = crate::app::locate::remote_name(&dir, None).ok()?;
    let url = gs_git::cli::get_config(&dir, &format!("remote.{remote}.url"))?;
    github::repo_of(&url, &config.web_url)
}

fn state_of(status: Status) -> &'static str {
    match status {
        Status::Passed => "success",
        Status::Error | Status::Skipped | Status::Unknown => "error",
        _ => "failure",
    }
}

/// GitHub's state and a description (at most 140 characters) of a result's tests: the run's
/// status, or with named checks (which have contexts of their own) the tests' own.
pub fn describe_tests(r: &RunRecord) -> (&'static str, String) {
    let (status, secs) = match r.tests.as_ref() {
        Some(t) if !r.checks.is_empty() && r.status != Status::Error => {
            (t.status.unwrap_or(r.status), t.duration_ms as f64 / 1000.0)
        }
        _ => (r.status, r.duration_ms as f64 / 1000.0),
    };
    let state = state_of(status);
    if r.no_tests() {
        // A commit status has no neutral state; a check run's conclusion is `neutral`.
        return (
            state,
            clip(&format!("no tests: nothing was tested ({secs:.1}s)")),
        );
    }
    let text = match (&r.tests, status) {
        (_, Status::Error) => format!(
            "error: {}",
            r.error.as_deref().unwrap_or("the run could not be made")
        ),
        (Some(t), _) if t.passed.is_some() || t.failed.is_some() => format!(
            "{}: {} passed, {} failed, {} errors in {secs:.1}s",
            status,
            t.passed.unwrap_or(0),
            t.failed.unwrap_or(0),
            t.errors.unwrap_or(0)
        ),
        _ => format!("{} in {secs:.1}s", status),
    };
    (state, clip(&text))
}

/// The contexts, states and descriptions of a result's named checks.
pub fn describe_checks(r: &RunRecord) -> Vec<(String, &'static str, String)> {
    r.checks
        .iter()
        .map(|(name, c)| {
            let t = &c.run;
            let how = match (&t.killed_by, t.exit_code) {
                (Some(k), _) => format!("killed by {k}"),
                (None, Some(code)) => format!("exit {code}"),
                (None, None) => "no exit code".into(),
            };
            let optional = if c.required { "" } else { " (optional)" };
            let text = match &c.error {
                Some(e) if c.status() != Status::Passed => format!("{}{optional}: {e}", c.status()),
                _ => format!(
                    "{}{optional}: {how} in {:.1}s",
                    c.status(),
                    t.duration_ms as f64 / 1000.0
                ),
            };
            (
                format!("{CHECK_CONTEXT}{name}"),
                state_of(c.status()),
                clip(&text),
            )
        })
        .collect()
}

/// The analysis status of a result, if it has an analysis.
pub fn describe_analysis(r: &RunRecord) -> Option<(&'static str, String)> {
    let a = r.analysis.as_ref()?;
    Some((
        "success",
        clip(&format!(
            "{} functions, mean complexity {:.1}, {} potential issues",
            a.functions_found,
            a.complexity_score,
            a.potential_issues.len()
        )),
    ))
}

fn clip(s: &str) -> String {
    let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= 140 {
        return one;
    }
    let mut out: String = one.chars().take(139).collect();
    out.push('…');
    out
}

/// Queue the statuses of `records` for `owner/name` on GitHub (see [`github_repo`]). Never
/// fails the caller: the worst is that no status is posted.
pub(super) fn queue_statuses(
    ctx: &Context,
    (owner, name): &(String, String),
    row: &RepoRow,
    records: &[RunRecord],
) {
    // A skipped commit has no result to show (GitHub's statuses have no "skipped").
    for r in records.iter().filter(|r| r.status != Status::Skipped) {
        let (state, description) = describe_tests(r);
        let mut rows = vec![(TESTS_CONTEXT.to_string(), state, description)];
        if let Some((s, d)) = describe_analysis(r) {
            rows.push((ANALYSIS_CONTEXT.to_string(), s, d));
        }
        rows.extend(describe_checks(r));
        for (context, state, description) in rows {
            let _ = ctx.index.queue_status(&StatusRow {
                repository_id: row.repository_id.clone(),
                commit_id: r.commit.clone(),
                context,
                owner: owner.clone(),
                repo: name.clone(),
                state: state.into(),
                description,
                attempts: 0,
            });
        }
    }
}

/// What became of connecting a repository to a new repository on GitHub.
#[derive(Debug, serde::Serialize)]
pub struct Connected {
    /// Whether GitHub created it.
    pub created: bool,
    /// `owner/name` on GitHub.
    pub full_name: Option<String>,
    pub html_url: Option<String>,
    /// Whether the branches and results reached it.
    pub pushed: bool,
    /// Why it was not created, or not pushed (one line), and how to go on.
    pub problem: Option<String>,
}

/// Create `name` on GitHub (private unless `public`; under `org` when given), add it as
/// `origin`, and push the branches and results there. Never undoes the local repository: a
/// missing token, no network or an API error is reported in `problem`, with how to connect it
/// later.
pub fn connect(at: Repo<'_>, org: Option<&str>, public: bool) -> Result<Connected> {
    let Repo { ctx, repo, row } = at;
    let config = ctx.layers.resolve().github;
    let later = "connect it later with `git sandbox remote add-github`, or `git remote add origin URL && git sandbox push`";
    let mut out = Connected {
        created: false,
        full_name: None,
        html_url: None,
        pushed: false,
        problem: None,
    };
    let dir = gs_git::repo_root(repo);
    if gs_git::remote::remotes(&dir)?.iter().any(|r| r == "origin") {
        return Err(crate::app::AppError::refused(
            "this repository already has a remote named origin",
        )
        .hint("push to it with `git sandbox push`, or remove it first: git remote remove origin"));
    }
    let token = match token(&config) {
        Ok(Some(t)) => t,
        Ok(None) => {
            out.problem = Some(format!("no GitHub token (set GITHUB_TOKEN or [github] token_command); created it here only; {later}"));
            return Ok(out);
        }
        Err(e) => {
            out.problem = Some(format!("{e}; created it here only; {later}"));
            return Ok(out);
        }
    };
    let client = github::Client::new(&config.api_url, &token).map_err(|e| {
        crate::app::AppError::usage(e).hint("fix [github] api_url in your user config")
    })?;
    let made = match client.create_repo(org, &row.name, !public) {
        Answer::Ok(v) => v,
        Answer::Rejected { status, message } => {
            out.problem = Some(format!(
                "GitHub refused to create {} ({status}: {message}); created it here only; {later}",
                row.name
            ));
            return Ok(out);
        }
        Answer::RateLimited(w) => {
            out.problem = Some(format!(
                "GitHub's rate limit: try again in {} s; created it here only; {later}",
                w.as_secs()
            ));
            return Ok(out);
        }
        Answer::Unreachable(e) => {
            out.problem = Some(format!(
                "GitHub could not be reached ({e}); created it here only; {later}"
            ));
            return Ok(out);
        }
    };
    out.created = true;
    out.full_name = made["full_name"].as_str().map(str::to_string);
    out.html_url = made["html_url"].as_str().map(str::to_string);
    let Some(clone_url) = made["clone_url"].as_str() else {
        out.problem = Some(
            "GitHub's answer has no clone_url; add the remote yourself: git remote add origin URL"
                .into(),
        );
        return Ok(out);
    };
    gs_git::cli::git(&dir, &["remote", "add", "origin", clone_url])?;
    match crate::app::publish::remote::push(at, Some("origin"), false) {
        Ok(p) if p.rejected.is_empty() => out.pushed = true,
        Ok(p) => {
            out.problem = Some(format!(
                "created, but the push was refused ({}); push again with `git sandbox push`",
                p.rejected.iter().map(|r| format!("{} {}", r.name, r.reason)).collect::<Vec<_>>().join("; ")
            ))
        }
        Err(e) => {
            out.problem = Some(format!(
                "created, but the push failed ({e}); set up git's credentials for github.com (`gh auth setup-git`), then `git sandbox push`"
            ))
        }
    }
    Ok(out)
}
