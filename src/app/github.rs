//! Commit statuses on GitHub: each result of a repository whose remote is on GitHub becomes two
//! statuses, `git-sandbox/tests` and `git-sandbox/analysis`, and one `git-sandbox/check/NAME`
//! per named check, queued in the index and posted by
//! whoever comes next (the daemon, else `run` itself when it ends). Posting is serialized per
//! token, keeps under GitHub's secondary limit (80 content-creating requests a minute), waits out
//! `retry-after` and `x-ratelimit-reset`, retries a GitHub that is down with back-off, and never
//! blocks or fails a run.

use super::{Context, Result};
use crate::config::GithubConfig;
use crate::github::{self, Answer};
use crate::model::{RunRecord, Status};
use crate::store::{RepoRow, StatusRow};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub const TESTS_CONTEXT: &str = "git-sandbox/tests";
pub const ANALYSIS_CONTEXT: &str = "git-sandbox/analysis";
/// A named check's context is this and its name.
pub const CHECK_CONTEXT: &str = "git-sandbox/check/";

/// Content-creating requests GitHub allows a token per minute.
const PER_MINUTE: usize = 80;
/// Attempts of a status GitHub could not be reached for, before it is given up.
const ATTEMPTS: i64 = 10;

/// Whether a token can be had without asking anyone: `GITHUB_TOKEN`, `[github] token_command`,
/// or a GitHub App.
fn token_configured(config: &GithubConfig) -> bool {
    std::env::var("GITHUB_TOKEN").is_ok_and(|t| !t.trim().is_empty())
        || config.token_command.is_some()
        || config.app_id.is_some()
}

/// The GitHub App to post check runs as: (app id, its private key, installation id).
fn app(config: &GithubConfig) -> Result<Option<(u64, String, u64)>> {
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
                super::AppError::usage(format!(
                    "cannot read the GitHub App's private key {}: {e}",
                    path.display()
                ))
                .hint("download it from the app's settings and name it in [github] app_key_file")
            })?;
            Ok(Some((id, pem, inst)))
        }
        _ => Err(super::AppError::usage(
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
        .map_err(|e| super::AppError::Io {
            context: "cannot run [github] token_command".into(),
            source: e,
        })?;
    let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || t.is_empty() {
        return Err(super::AppError::usage(format!(
            "[github] token_command {cmd:?} printed no token (exit {})",
            out.status.code().unwrap_or(-1)
        ))
        .hint("run it yourself to see why (for `gh auth token`: `gh auth login`), or set GITHUB_TOKEN"));
    }
    Ok(Some(t))
}

/// `owner/repo` of the repository's remote on GitHub, when statuses are wanted for it.
fn github_repo(ctx: &Context, repo: &gix::Repository) -> Option<(String, String)> {
    let config = ctx.layers.resolve().github;
    if !config.statuses || !token_configured(&config) {
        return None;
    }
    let dir = crate::git::repo_root(repo);
    let remote = super::locate::remote_name(&dir, None).ok()?;
    let url = crate::git::cli::get_config(&dir, &format!("remote.{remote}.url"))?;
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

/// Queue the statuses of `records` when the repository is on GitHub and a token is configured.
/// Never fails the caller: the worst is that no status is posted.
pub fn queue_statuses(ctx: &Context, repo: &gix::Repository, row: &RepoRow, records: &[RunRecord]) {
    let Some((owner, name)) = github_repo(ctx, repo) else {
        return;
    };
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

/// Posts statuses for one token, remembering the last minute's requests and any wait GitHub
/// asked for.
#[derive(Default)]
pub struct Poster {
    /// The API it talks to, the client, and (a GitHub App's installation token) until when the
    /// token holds.
    client: Option<(String, github::Client, Option<Instant>)>,
    sent: VecDeque<Instant>,
    blocked_until: Option<Instant>,
}

/// What one round of posting did.
#[derive(Debug, Default)]
pub struct Posted {
    pub posted: usize,
    /// Still waiting (rate limit, GitHub unreachable, no token yet).
    pub waiting: i64,
    /// Given up, with GitHub's answer.
    pub failed: Vec<String>,
}

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Poster {
    /// Post what is due, until `deadline` or a limit stops the round.
    pub fn post_due(&mut self, ctx: &Context, deadline: Instant) -> Result<Posted> {
        let mut out = Posted::default();
        let config = ctx.layers.resolve().github;
        loop {
            // A wait GitHub asked for is waited out when it ends before the deadline.
            if let Some(b) = self.blocked_until.filter(|b| Instant::now() < *b) {
                if b >= deadline {
                    break;
                }
                std::thread::sleep(b - Instant::now());
            }
            if Instant::now() >= deadline {
                break;
            }
            let due = ctx.index.due_statuses(now_epoch(), 20)?;
            if due.is_empty() {
                break;
            }
            let app = app(&config)?;
            let stale = self.client.as_ref().is_none_or(|(api, _, until)| {
                *api != config.api_url || until.is_some_and(|u| Instant::now() >= u)
            });
            if stale {
                let made = match &app {
                    Some((id, pem, inst)) => self.installation(&config.api_url, *id, pem, *inst)?,
                    None => {
                        let Some(token) = token(&config)? else { break };
                        let client = github::Client::new(&config.api_url, &token)
                            .map_err(|e| super::AppError::usage(e).hint("fix [github] api_url"))?;
                        Some((client, None))
                    }
                };
                let Some((client, until)) = made else { break };
                self.client = Some((config.api_url.clone(), client, until));
            }
            let Some((_, client, _)) = &self.client else {
                break;
            };
            for s in due {
                while self
                    .sent
                    .front()
                    .is_some_and(|t| t.elapsed() > Duration::from_secs(60))
                {
                    self.sent.pop_front();
                }
                if self.sent.len() >= PER_MINUTE || Instant::now() >= deadline {
                    self.blocked_until = self.sent.front().map(|t| *t + Duration::from_secs(60));
                    break;
                }
                self.sent.push_back(Instant::now());
                let answer = if app.is_some() {
                    let record = ctx
                        .index
                        .run_for_commit(&s.repository_id, &s.commit_id)?
                        .map(|r| r.record)
                        .filter(|r| r.commit == s.commit_id && r.is_evidence());
                    client.create_check_run(&s.owner, &s.repo, &check_run(&s, record.as_ref()))
                } else {
                    let body = serde_json::json!({
                        "state": s.state, "description": s.description, "context": s.context,
                    });
                    client.create_status(&s.owner, &s.repo, &s.commit_id, &body)
                };
                match answer {
                    Answer::Ok(_) => {
                        ctx.index.status_done(&s, None)?;
                        out.posted += 1;
                    }
                    Answer::RateLimited(wait) => {
                        self.blocked_until = Some(Instant::now() + wait);
                        ctx.index.status_later(
                            &s,
                            now_epoch() + wait.as_secs() as i64,
                            "rate limited",
                        )?;
                        break;
                    }
                    Answer::Rejected { status, message } => {
                        let why = format!(
                            "GitHub refused the status of {} on {}/{} ({status}: {message})",
                            crate::util::short(&s.commit_id),
                            s.owner,
                            s.repo
                        );
                        ctx.index.status_done(&s, Some(&why))?;
                        ctx.index.add_event(
                            "github.status_failed",
                            Some(&s.repository_id),
                            None,
                            Some(&s.commit_id),
                            &serde_json::json!({"context": s.context, "error": why}),
                        )?;
                        out.failed.push(why);
                    }
                    Answer::Unreachable(e) if s.attempts + 1 >= ATTEMPTS => {
                        let why = format!("GitHub could not be reached ({e})");
                        ctx.index.status_done(&s, Some(&why))?;
                        out.failed.push(why);
                    }
                    Answer::Unreachable(e) => {
                        let backoff = 5i64 << s.attempts.clamp(0, 8);
                        ctx.index.status_later(&s, now_epoch() + backoff, &e)?;
                    }
                }
            }
        }
        out.waiting = ctx.index.pending_statuses()?;
        Ok(out)
    }

    /// A client authenticated as the app's installation, with when its token runs out; `None`
    /// when GitHub could not be asked now (tried again at the next round).
    fn installation(
        &mut self,
        api: &str,
        app_id: u64,
        pem: &str,
        installation_id: u64,
    ) -> Result<Option<(github::Client, Option<Instant>)>> {
        let jwt = github::app::jwt(app_id, pem, now_epoch() as u64)
            .map_err(|e| super::AppError::usage(e).hint("check [github] app_key_file"))?;
        let as_app = github::Client::new(api, &jwt)
            .map_err(|e| super::AppError::usage(e).hint("fix [github] api_url"))?;
        match as_app.installation_token(installation_id) {
            Answer::Ok(v) => {
                let Some(token) = v["token"].as_str() else {
                    return Ok(None);
                };
                let client = github::Client::new(api, token)
                    .map_err(|e| super::AppError::usage(e).hint("fix [github] api_url"))?;
                // Installation tokens hold an hour; take a new one well before.
                Ok(Some((
                    client,
                    Some(Instant::now() + Duration::from_secs(50 * 60)),
                )))
            }
            Answer::Rejected { status, message } => Err(super::AppError::usage(format!(
                "GitHub refused the app's credentials ({status}: {message})"
            ))
            .hint("check [github] app_id, installation_id and app_key_file")),
            Answer::RateLimited(w) => {
                self.blocked_until = Some(Instant::now() + w);
                Ok(None)
            }
            Answer::Unreachable(_) => Ok(None),
        }
    }
}

/// A check run for a queued status: the result's summary as a table and, for the analysis, its
/// potential issues as annotations on their lines (at most 50, GitHub's limit per request).
fn check_run(s: &StatusRow, record: Option<&RunRecord>) -> serde_json::Value {
    let check = record.and_then(|r| {
        s.context
            .strip_prefix(CHECK_CONTEXT)
            .and_then(|name| r.checks.get(name))
    });
    let status = match check {
        Some(c) => Some(c.status()),
        None => record.map(|r| r.status),
    };
    let conclusion = match (s.state.as_str(), status) {
        ("success", _) => "success",
        (_, Some(Status::Timeout)) => "timed_out",
        _ => "failure",
    };
    let mut summary = String::new();
    let mut annotations = Vec::new();
    if let Some(r) = record {
        if s.context == TESTS_CONTEXT {
            summary.push_str("| status | passed | failed | errors | duration |\n| --- | --- | --- | --- | --- |\n");
            let t = r.tests.as_ref();
            let n = |v: Option<u64>| v.map_or("–".to_string(), |v| v.to_string());
            summary.push_str(&format!(
                "| {} | {} | {} | {} | {:.1}s |\n",
                r.status,
                n(t.and_then(|t| t.passed)),
                n(t.and_then(|t| t.failed)),
                n(t.and_then(|t| t.errors)),
                r.duration_ms as f64 / 1000.0
            ));
            for f in t
                .map(|t| t.failures.as_slice())
                .unwrap_or_default()
                .iter()
                .take(10)
            {
                summary.push_str(&format!(
                    "\n**{}**\n```\n{}\n```\n",
                    f.name,
                    f.message.chars().take(1000).collect::<String>()
                ));
            }
        } else if let Some(c) = s
            .context
            .strip_prefix(CHECK_CONTEXT)
            .and_then(|name| r.checks.get(name))
        {
            let tail: Vec<&str> = c.run.output_tail.lines().rev().take(30).collect();
            summary.push_str(&format!(
                "`{}` ({}{})\n\n```\n{}\n```\n",
                c.run.command,
                c.status(),
                if c.required { "" } else { ", optional" },
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        } else if let (true, Some(a)) = (s.context == ANALYSIS_CONTEXT, &r.analysis) {
            summary.push_str(&format!(
                "| functions | mean complexity | max complexity | potential issues |\n| --- | --- | --- | --- |\n| {} | {:.1} | {} | {} |\n",
                a.functions_found,
                a.complexity_score,
                a.complexity_max,
                a.potential_issues.len()
            ));
            for i in a.potential_issues.iter().take(50) {
                annotations.push(serde_json::json!({
                    "path": i.path, "start_line": i.line.max(1), "end_line": i.line.max(1),
                    "annotation_level": "warning", "title": i.kind, "message": i.message,
                }));
            }
        }
    }
    if summary.is_empty() {
        summary = s.description.clone();
    }
    serde_json::json!({
        "name": s.context,
        "head_sha": s.commit_id,
        "status": "completed",
        "conclusion": conclusion,
        "output": {"title": s.description, "summary": summary, "annotations": annotations},
    })
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
pub fn connect(
    ctx: &Context,
    repo: &gix::Repository,
    row: &RepoRow,
    org: Option<&str>,
    public: bool,
) -> Result<Connected> {
    let config = ctx.layers.resolve().github;
    let later = "connect it later with `git sandbox remote add-github`, or `git remote add origin URL && git sandbox push`";
    let mut out = Connected {
        created: false,
        full_name: None,
        html_url: None,
        pushed: false,
        problem: None,
    };
    let dir = crate::git::repo_root(repo);
    if crate::git::remote::remotes(&dir)?
        .iter()
        .any(|r| r == "origin")
    {
        return Err(
            super::AppError::refused("this repository already has a remote named origin").hint(
                "push to it with `git sandbox push`, or remove it first: git remote remove origin",
            ),
        );
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
    let client = github::Client::new(&config.api_url, &token)
        .map_err(|e| super::AppError::usage(e).hint("fix [github] api_url in your user config"))?;
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
    crate::git::cli::git(&dir, &["remote", "add", "origin", clone_url])?;
    match super::remote::push(ctx, repo, row, Some("origin"), false) {
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
