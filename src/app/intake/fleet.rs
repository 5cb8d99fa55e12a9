//! Many machines on one shared index (PostgreSQL): every daemon runs jobs of every repository
//! the index knows, each in a clone its own data dir keeps. A repository adopted on this machine
//! runs where it was adopted; one adopted on another machine is cloned (bare) from the remote it
//! was registered with into `$GIT_SANDBOX_HOME/clones/<id>.git`. A job naming a commit the clone
//! lacks fetches first; a commit not on the remote yet (made on another machine, not pushed)
//! waits a little for its own machine to run it.

use crate::app::{intake::fetch, AppError, Context, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_store::RepoRow;
use std::path::Path;

/// Whether `row` is run in a clone this data dir keeps (not a repository adopted here).
pub fn is_managed(ctx: &Context, row: &RepoRow) -> bool {
    ctx.index.is_shared()
        && Path::new(&row.path) == gs_store::clone_path(&ctx.paths.home, &row.repository_id)
}

/// Make this data dir's clone of a repository adopted elsewhere, if it has none and the
/// repository has a remote. The clone appears whole or not at all (made beside, then renamed).
/// Returns whether one was made.
pub fn clone_if_missing(ctx: &Context, row: &RepoRow) -> Result<bool> {
    let dir = Path::new(&row.path);
    let Some(url) = row.remote_url.as_deref() else {
        return Ok(false);
    };
    if !is_managed(ctx, row) || dir.exists() {
        return Ok(false);
    }
    // The URL comes from the shared database: never an option, never a `<transport>::` helper
    // (`ext::` runs a command; git refuses it by default, refused here whatever the git config
    // says).
    let transport = url.split_once("::").is_some_and(|(t, _)| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    if url.starts_with('-') || transport {
        return Err(AppError::usage(format!(
            "the remote recorded for {} ({url}) is not a URL git may clone from",
            row.name
        ))
        .hint("push the repository from the machine that adopted it to a normal remote (`git sandbox push`)"));
    }
    let parent = dir.parent().expect("clones/<id>.git has a parent");
    std::fs::create_dir_all(parent).map_err(|e| AppError::Io {
        context: format!("cannot create {}", parent.display()),
        source: e,
    })?;
    let tmp = parent.join(format!(
        ".{}.{}.tmp",
        row.repository_id,
        gs_util::random_hex(4)
    ));
    let made = (|| -> Result<()> {
        let t = tmp.display().to_string();
        git::cli::git(parent, &["init", "--bare", "-q", &t])?;
        git::cli::git(&tmp, &["remote", "add", "--", "origin", url])?;
        git::cli::set_config(&tmp, crate::app::repo::repos::ID_KEY, &row.repository_id)?;
        git::remote::ensure_notes_refspec(&tmp, "origin")?;
        git::cli::git(&tmp, &["fetch", "-q", "origin"])?;
        std::fs::rename(&tmp, dir).map_err(|e| AppError::Io {
            context: format!("cannot move the new clone to {}", dir.display()),
            source: e,
        })
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // The results the remote holds come in as after any fetch (merged, indexed).
    let repo = git::open(dir)?;
    fetch::fetch(Repo::new(ctx, &repo, row), Some("origin"))?;
    Ok(true)
}

/// Why a job's commit cannot run here yet.
#[derive(Debug)]
pub enum Missing {
    /// Not on the remote either (made on another machine and not pushed yet).
    NotHere,
    /// The clone cannot be opened or fetched, or the id is no commit id: the error's line.
    Failed(String),
}

/// Make sure `commits` are in `row`'s repository on this machine: a clone this data dir keeps
/// is fetched (once) when it lacks some. One answer per commit, in order.
pub fn ensure_commits(
    ctx: &Context,
    row: &RepoRow,
    commits: &[&str],
) -> Vec<std::result::Result<(), Missing>> {
    let dir = Path::new(&row.path);
    let have = |repo: &gs_git::Repository, commit: &str| {
        ObjectId::from_hex(commit.as_bytes()).is_ok_and(|id| gs_git::objects::is_commit(repo, id))
    };
    let repo = match git::open_recent(dir) {
        Ok(repo) => repo,
        Err(e) => {
            let e = AppError::from(e).to_string();
            return commits
                .iter()
                .map(|_| Err(Missing::Failed(e.clone())))
                .collect();
        }
    };
    let mut found: Vec<bool> = commits.iter().map(|c| have(&repo, c)).collect();
    if found.iter().all(|&f| f) {
        return commits.iter().map(|_| Ok(())).collect();
    }
    let mut failed = None;
    if is_managed(ctx, row) {
        match fetch::fetch(Repo::new(ctx, &repo, row), Some("origin")) {
            // The fetched objects are seen by a handle opened after the fetch.
            Ok(_) => match git::open(dir) {
                Ok(again) => {
                    for (f, c) in found.iter_mut().zip(commits) {
                        *f = *f || have(&again, c);
                    }
                }
                Err(e) => failed = Some(AppError::from(e).to_string()),
            },
            Err(e) => failed = Some(e.to_string()),
        }
    }
    commits
        .iter()
        .zip(found)
        .map(|(c, f)| match (f, &failed) {
            (true, _) => Ok(()),
            _ if ObjectId::from_hex(c.as_bytes()).is_err() => {
                Err(Missing::Failed(format!("bad commit id {c} in the queue")))
            }
            (false, Some(e)) => Err(Missing::Failed(e.clone())),
            (false, None) => Err(Missing::NotHere),
        })
        .collect()
}
