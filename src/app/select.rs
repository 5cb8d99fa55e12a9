//! Which commits a command's revision arguments name: git's own syntax (see [`gs_git::revs`]),
//! with `--all` standing for every watched branch (`[watch] branches`) rather than every ref.

use super::{Context, Result};
use gs_git::ObjectId;
use gs_git::{revs, revs::Walk};

/// `[watch] branches`: the repository's `.sandbox.toml` as checked out, over the user's config.
pub fn watch_globs(ctx: &Context, repo: &gs_git::Repository) -> Result<gs_util::glob::Globs> {
    let layers = match gs_git::objects::workdir(repo) {
        Some(dir) => ctx.layers.with_repo_dir(dir)?,
        None => ctx.layers.clone(),
    };
    layers
        .resolve()
        .watched_branches()
        .map_err(|e| super::AppError::Usage(super::Message::of("[watch] branches", &e)))
}

/// The branches `[watch] branches` names, with their tips.
pub fn watched_branches(
    ctx: &Context,
    repo: &gs_git::Repository,
) -> Result<Vec<(String, ObjectId)>> {
    let globs = watch_globs(ctx, repo)?;
    Ok(gs_git::branches(repo)?
        .into_iter()
        .filter(|(name, _)| globs.is_match(name))
        .collect())
}

/// The commits `args` name (none: `HEAD`), and with `all` those of every watched branch, in
/// git's order. May be empty (`A..A`): the caller says so.
pub fn commits(
    ctx: &Context,
    repo: &gs_git::Repository,
    args: &[String],
    all: bool,
    walk: Walk,
) -> Result<Vec<ObjectId>> {
    let tips: Option<Vec<ObjectId>> = if all {
        Some(
            watched_branches(ctx, repo)?
                .into_iter()
                .map(|(_, id)| id)
                .collect(),
        )
    } else {
        None
    };
    Ok(revs::commits(repo, args, tips.as_deref(), walk)?)
}

/// The branch the arguments name when they name exactly one (`HEAD`: the checked-out branch), as
/// a full ref; `None` for several tips, `--all`, or a revision that is no branch.
pub fn branch_named(repo: &gs_git::Repository, args: &[String], all: bool) -> Option<String> {
    if all {
        return None;
    }
    let parsed: Vec<revs::RevArg> = args
        .iter()
        .filter_map(|a| revs::RevArg::parse(a).ok())
        .collect();
    let tips: Vec<&str> = parsed.iter().flat_map(|a| a.tips()).collect();
    let tip = match tips.as_slice() {
        [] if args.is_empty() => "HEAD",
        [one] => one,
        _ => return None,
    };
    if tip == "HEAD" {
        return gs_git::head_branch(repo).map(|b| format!("refs/heads/{b}"));
    }
    let full = format!("refs/heads/{}", tip.trim_start_matches("refs/heads/"));
    gs_git::objects::has_ref(repo, &full).then_some(full)
}
