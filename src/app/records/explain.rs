//! `run --explain-cache`: why a commit's result would be taken as it is, served from another
//! commit of the same tree, or made again — and when made again, what differs from the results
//! there are (the config, the tools). Reads only; runs nothing.

use crate::app::{config::commit_config, records::results, Repo, Result};
use gs_git::ObjectId;
use gs_model::{RunRecord, Status};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub commit: String,
    pub tree: String,
    /// The config key a result must have been made under (`None`: the config is broken).
    pub config_key: Option<String>,
    pub decision: Decision,
    /// The commit whose result it would be served (`Decision::Tree`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Why, one sentence each.
    pub reasons: Vec<String>,
}

/// What `run` would do for a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Its own result stands.
    Own,
    /// Served the result of another commit of the same tree (`from`).
    Tree,
    /// It would run.
    Run,
}

/// Explain what `run` would do for `commit` (named through `refname`).
pub fn explain(at: Repo<'_>, commit: ObjectId, refname: Option<&str>) -> Result<Explanation> {
    let Repo { ctx, repo, row } = at;
    let info = gs_git::commit_info(repo, commit)?;
    let mut e = Explanation {
        commit: commit.to_string(),
        tree: info.tree.to_string(),
        config_key: None,
        decision: Decision::Run,
        from: None,
        reasons: Vec::new(),
    };
    let config = match commit_config::config_at(ctx, repo, commit, refname) {
        Ok(c) => c,
        Err(err) => {
            e.reasons.push(format!(
                "its config cannot be read ({err}): the run records an error, and an error is never reused"
            ));
            return Ok(e);
        }
    };
    let key = config.result_key();
    e.config_key = Some(key.clone());
    let mut reader = results::NoteReader::new(repo)?;
    let own = results::own_record(at, &mut reader, commit)?;
    if let Some(r) = &own {
        if results::usable(r, &info, &key) {
            e.decision = Decision::Own;
            e.reasons.push(format!(
                "its own result ({}, made {}) was made under the config and tools it has now",
                r.status, r.finished_at
            ));
            return Ok(e);
        }
        e.reasons.push(match r.status {
            _ if !r.is_evidence() => format!(
                "its note holds a report from {}, not verified: nobody this machine trusts signed it",
                r.reporter()
            ),
            Status::Error | Status::Unknown => {
                format!("its own result is {}, which is never reused", r.status)
            }
            Status::Skipped => "its own record says it was skipped, which is no result".into(),
            _ if r.tree != e.tree => "its note holds a record of another tree".into(),
            _ => format!(
                "its own result ({}, made {}) was made under another config: {}",
                r.status,
                r.finished_at,
                differences(r, &config).join("; ")
            ),
        });
    }
    if let Some(hit) = results::tree_hit(at, &info, &key) {
        e.decision = Decision::Tree;
        e.from = hit.cached_from.clone();
        e.reasons.push(format!(
            "{} made a result of the same tree under the same config and tools ({})",
            gs_util::short(hit.cached_from.as_deref().unwrap_or("")),
            hit.status
        ));
        return Ok(e);
    }
    let other = ctx
        .index
        .run_for_tree(&row.repository_id, &e.tree, None, &e.commit)?
        .map(|run| run.record);
    e.reasons.push(match other {
        Some(r) => format!(
            "no result of this tree was made under this config; the latest one (for {}, {}) differs: {}",
            gs_util::short(&r.commit),
            r.finished_at,
            differences(&r, &config).join("; ")
        ),
        None if own.is_none() => "no result of this tree has been made yet".into(),
        None => "no other commit of this tree has a result".into(),
    });
    Ok(e)
}

/// What differs between the config and tools a record was made under and `config`.
fn differences(r: &RunRecord, config: &gs_config::Config) -> Vec<String> {
    let mut out = Vec::new();
    let now = &config.toolchain;
    let then: &BTreeMap<String, String> = &r.toolchain;
    if then.is_empty() && !now.is_empty() {
        out.push("it records no tools (made before git-sandbox kept them)".into());
    } else {
        for word in then
            .keys()
            .chain(now.keys().filter(|k| !then.contains_key(*k)))
        {
            match (then.get(word), now.get(word)) {
                (Some(a), Some(b)) if a != b => out.push(format!("{word} was {a}, is {b}")),
                (Some(a), None) => out.push(format!("{word} was {a}, is not used now")),
                (None, Some(b)) => out.push(format!("{word} is used now ({b})")),
                _ => {}
            }
        }
    }
    if let (Some(t), Some(c)) = (&r.tests, &config.test.command) {
        if &t.command != c {
            out.push(format!("the test command was `{}`, is `{c}`", t.command));
        }
    }
    let names = |v: Vec<&str>| v.join(", ");
    let had: Vec<&str> = r.checks.iter().map(|(n, _)| n).collect();
    let has: Vec<&str> = config.checks.iter().map(|c| c.name.as_str()).collect();
    if had != has {
        out.push(format!(
            "the checks were [{}], are [{}]",
            names(had),
            names(has)
        ));
    }
    if out.is_empty() {
        out.push(
            "other settings differ ([limits], [analysis], a check's or the tests' timeout, report or setup)"
                .into(),
        );
    }
    out
}
