//! A repository's experiments ranked against production, and the actions on them: each form
//! answers 303 back to this page with what happened, so a reload repeats nothing.

use super::*;
use crate::app::{experiment::compare, experiment::preview, Repo};
use crate::http::api::{kill_now, promote_now};
use crate::http::ApiResult;
use axum::extract::Path;
use gs_util::time::duration_text;

pub async fn repository_page(
    State(web): St,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let flash = take_flash(&headers);
    shown(
        &flash,
        experiments_view(&web, &caller, key, flash.as_ref()).await,
    )
}

/// The experiments of a repository against production, with a message on top after an action.
async fn experiments_view(
    web: &Web,
    caller: &Caller,
    key: String,
    flash: Option<&Flash>,
) -> Response {
    let admin = caller.token.role >= Role::Admin;
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let (base, ranked) = compare::ranked(ctx, &repo, &row)?;
        let mut refusals = Vec::with_capacity(ranked.len());
        for x in &ranked {
            // Only an admin sees the buttons the answer stands beside.
            let refusal = if admin && x.state == "active" {
                let status = x.row.as_ref().map(|r| r.status.as_str());
                preview::promotion_refusal(Repo::new(ctx, &repo, &row), &x.name, status)?
            } else {
                None
            };
            refusals.push(refusal);
        }
        Ok((row, base, ranked, refusals))
    })
    .await;
    let (row, base, ranked, refusals) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(caller), e),
    };
    let csrf = web.csrf(caller);
    let body = html! {
        h1 { (row.name) }
        @if let Some(f) = flash { (f.render()) }
        p.muted {
            "production " a.mono href=(branch_href(&row.name, &base.target)) title="its last commits in a chart" { (base.target) } " at "
            a.mono href=(format!("/c/{}/{}", row.name, base.commit)) { (short(&base.commit)) }
            ": " span class=(base.status.as_str()) { (words::status(&base.status)) }
            @if let Some(p) = base.passed { ", " (p) " passed" }
            " · " a href=(format!("/r/{}/commits", row.name)) { "every commit's result" }
        }
        h2 { "Experiments, best first" }
        @if ranked.is_empty() { p.muted { "No experiments yet: " code { "git sandbox experiment start NAME" } } }
        @else {
            div.card.scroll {
                table.stack {
                    thead { tr {
                        th { "experiment" } th { "state" } th { "result" } th.num { "passed" } th.num { "failed" }
                        th.num { "new failures" } th.num { "duration" } th.num { "complexity Δ" } th { "verdict" }
                        @if admin { th {} }
                    } }
                    tbody {
                        @for (x, refusal) in ranked.iter().zip(&refusals) {
                            tr {
                                td.name data-label="experiment" {
                                    @if x.state == "active" || x.state == "budget_exhausted" {
                                        a href=(branch_href(&row.name, &format!("experiment/{}", x.name))) title="its last commits in a chart" { (x.name) }
                                    } @else { (x.name) }
                                }
                                td data-label="state" { (words::experiment_state(&x.state)) }
                                td data-label="result" {
                                    @match (&x.head, &x.row) {
                                        (Some(h), Some(r)) => a href=(format!("/c/{}/{h}", row.name)) { span class=(r.status.as_str()) { (words::status(&r.status)) } },
                                        _ => span.muted { "-" },
                                    }
                                }
                                td.num data-label="passed" { (x.row.as_ref().and_then(|r| r.passed).map_or("-".into(), |v| v.to_string())) }
                                td.num data-label="failed" { (x.row.as_ref().and_then(|r| r.failed).map_or("-".into(), |v| v.to_string())) }
                                td.num data-label="new failures" title=(x.new_failures.join(", ")) { (x.new_failures.len()) }
                                td.num data-label="duration" {
                                    (x.row.as_ref().and_then(|r| r.duration_ms).map_or("-".into(), duration_text))
                                    @if let Some(d) = x.duration_delta_ms {
                                        span.muted title="against production" { " (" (if d < 0 { "−" } else { "+" }) (duration_text(d.unsigned_abs())) ")" }
                                    }
                                }
                                td.num data-label="complexity Δ" { (x.complexity_delta.map_or("-".into(), |d| format!("{d:+.2}"))) }
                                td data-label="verdict" title=(x.verdict_reason.as_deref().unwrap_or("")) { (x.verdict.map_or("-".into(), words::verdict)) }
                                @if admin {
                                    td.actions {
                                        @if x.state == "active" {
                                            @if let Some(why) = refusal {
                                                span.refused.fail { "promotion would be refused: " (why) }
                                                " "
                                            } @else {
                                                form.inline method="post" action=(format!("/r/{}/experiments/{}/promote", row.name, x.name)) {
                                                    input type="hidden" name="csrf" value=(csrf);
                                                    button.primary type="submit" name="dry_run" value="false"
                                                        data-action="promote" data-confirm="Promote this experiment into production?" { "promote" }
                                                    " "
                                                    button type="submit" name="dry_run" value="true" { "dry run" }
                                                }
                                                " "
                                            }
                                            form.inline method="post" action=(format!("/r/{}/experiments/{}/kill", row.name, x.name)) {
                                                input type="hidden" name="csrf" value=(csrf);
                                                button.danger type="submit" data-confirm="Kill this experiment? Its branch is archived." { "kill" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(&row.name, Some(caller), body).into_response()
}

#[derive(Deserialize)]
pub struct ActionForm {
    csrf: String,
    #[serde(default)]
    dry_run: Option<String>,
}

pub async fn experiment_action(
    State(web): St,
    headers: HeaderMap,
    Path((key, name, action)): Path<(String, String, String)>,
    form: Result<Form<ActionForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    // A request that is no valid form from this session changes nothing: it is answered as an
    // error, not redirected.
    let caller = match web.require(&headers, Role::Admin, true) {
        Ok(c) => c,
        Err(e) => return error_page(None, e),
    };
    let Ok(Form(form)) = form else {
        return error_page(
            Some(&caller),
            ApiError::bad_request("the form is missing its fields"),
        );
    };
    let same = tokens::constant_time_eq(web.csrf(&caller).as_bytes(), form.csrf.as_bytes());
    if !same {
        return error_page(
            Some(&caller),
            ApiError::new(
                StatusCode::FORBIDDEN,
                "the form's CSRF token does not match this session",
            )
            .hint("reload the page and try again"),
        );
    }
    let outcome: ApiResult<String> = match action.as_str() {
        "promote" => {
            let dry = form.dry_run.as_deref() == Some("true");
            promote_now(key.clone(), name.clone(), dry, None).await.map(|v| {
                let commit = v["commit"].as_str().map(short).unwrap_or("").to_string();
                if dry {
                    format!("Dry run: {name} would be promoted into {} as {commit}; its tests pass. Nothing was changed.", v["target"].as_str().unwrap_or("production"))
                } else {
                    format!("Promoted {name} into {} ({commit}).", v["target"].as_str().unwrap_or("production"))
                }
            })
        }
        "kill" => kill_now(key.clone(), name.clone(), false)
            .await
            .map(|_| format!("Killed {name}; its branch is archived.")),
        other => Err(ApiError::not_found(format!("no action {other:?}"))),
    };
    let back = format!("/r/{}", urlencode(&key));
    match outcome {
        Ok(text) => see_other(&back, Some(Flash::good(text))),
        Err(e) if e.status == StatusCode::NOT_FOUND => error_page(Some(&caller), e),
        Err(e) => see_other(&back, Some(Flash::bad(e.error))),
    }
}
