//! Posting the queued commit statuses (or, as a GitHub App, check runs): serialized per token,
//! under GitHub's secondary limit (80 content-creating requests a minute), waiting out
//! `retry-after` and `x-ratelimit-reset`, and trying a GitHub that is down again by the outbox's
//! policy ([`super::RETRY`]).

use super::super::{Context, Result};
use super::now_epoch;
use crate::app::publish::github::{app, token, ANALYSIS_CONTEXT, CHECK_CONTEXT, TESTS_CONTEXT};
use gs_github as github;
use gs_github::Answer;
use gs_model::EventKind;
use gs_model::{RunRecord, Status};
use gs_store::StatusRow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Content-creating requests GitHub allows a token per minute.
const PER_MINUTE: usize = 80;

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
                        let client = github::Client::new(&config.api_url, &token).map_err(|e| {
                            super::super::AppError::usage(e).hint("fix [github] api_url")
                        })?;
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
                            gs_util::short(&s.commit_id),
                            s.owner,
                            s.repo
                        );
                        ctx.index.status_done(&s, Some(&why))?;
                        ctx.index.add_event(
                            EventKind::GithubStatusFailed,
                            Some(&s.repository_id),
                            None,
                            Some(&s.commit_id),
                            &serde_json::json!({"context": s.context, "error": why}),
                        )?;
                        out.failed.push(why);
                    }
                    Answer::Unreachable(e) if s.attempts + 1 >= super::ATTEMPTS => {
                        let why = format!("GitHub could not be reached ({e})");
                        ctx.index.status_done(&s, Some(&why))?;
                        out.failed.push(why);
                    }
                    Answer::Unreachable(e) => {
                        ctx.index
                            .status_later(&s, super::retry_at(s.attempts), &e)?;
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
            .map_err(|e| super::super::AppError::usage(e).hint("check [github] app_key_file"))?;
        let as_app = github::Client::new(api, &jwt)
            .map_err(|e| super::super::AppError::usage(e).hint("fix [github] api_url"))?;
        match as_app.installation_token(installation_id) {
            Answer::Ok(v) => {
                let Some(token) = v["token"].as_str() else {
                    return Ok(None);
                };
                let client = github::Client::new(api, token)
                    .map_err(|e| super::super::AppError::usage(e).hint("fix [github] api_url"))?;
                // Installation tokens hold an hour; take a new one well before.
                Ok(Some((
                    client,
                    Some(Instant::now() + Duration::from_secs(50 * 60)),
                )))
            }
            Answer::Rejected { status, message } => Err(super::super::AppError::usage(format!(
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
    let no_tests = s.context == TESTS_CONTEXT && record.is_some_and(RunRecord::no_tests);
    let conclusion = match (s.state.as_str(), status) {
        ("success", _) if no_tests => "neutral",
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
