//! Which commits a command's revision arguments name: git's own syntax (see [`gs_git::revs`]),
//! with `--all` standing for every watched branch (`[watch] branches`) rather than every ref.

use super::{Context, Result};
use gs_git::ObjectId;
use gs_git::{revs, revs::Walk};

/// `[watch] branches`: the repository's `.sandbox.toml` as checked out, over the settings it
/// was adopted with and the user's config.
pub fn watch_globs(ctx: &Context, repo: &gs_git::Repository) -> Result<gs_util::glob::Globs> {
    ctx.checkout_layers(repo)?
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

/// The branch a run of the commits `args` name is a run of, as a full ref: the branch they name
/// ([`branch_named`]), else the watched branch that holds every tip they name (production
/// first, then the branch checked out), so a range such as `main~19..main~15` gets that
/// branch's setup layer and build cache. Else `None`, with one line saying why (none with
/// `--all`, whose commits belong to several branches).
pub fn run_branch(
    ctx: &Context,
    repo: &gs_git::Repository,
    args: &[String],
    all: bool,
) -> Result<(Option<String>, Option<String>)> {
    if let Some(named) = branch_named(repo, args, all) {
        return Ok((Some(named), None));
    }
    if all {
        return Ok((None, None));
    }
    let mut words: Vec<String> = args
        .iter()
        .filter_map(|a| revs::RevArg::parse(a).ok())
        .flat_map(|a| a.tips().into_iter().map(str::to_string).collect::<Vec<_>>())
        .collect();
    if args.is_empty() {
        words.push("HEAD".into());
    }
    let tips: Vec<ObjectId> = words
        .iter()
        .filter_map(|w| revs::resolve(repo, w).ok())
        .collect();
    let cold = "they run without a branch's setup layer and build cache";
    // The work tree's config may be mid-edit: an old commit still runs, and says why it is cold.
    let config = match ctx.checkout_layers(repo) {
        Ok(layers) => layers.resolve(),
        Err(e) => {
            return Ok((
                None,
                Some(format!("{e}: so no watched branch is known, and {cold}")),
            ))
        }
    };
    let globs = match config.watched_branches() {
        Ok(g) => g,
        Err(e) => return Ok((None, Some(format!("[watch] branches: {e}: {cold}")))),
    };
    let head = gs_git::head_branch(repo);
    let mut branches: Vec<(String, ObjectId)> = gs_git::branches(repo)?
        .into_iter()
        .filter(|(name, _)| globs.is_match(name))
        .collect();
    branches.sort_by_key(|(name, _)| {
        (
            *name != config.promote.target,
            Some(name) != head.as_ref(),
            name.clone(),
        )
    });
    let holds = |tip: ObjectId| {
        tips.iter()
            .all(|&c| gs_git::objects::is_ancestor(repo, c, tip))
    };
    if !tips.is_empty() {
        if let Some((name, _)) = branches.iter().find(|(_, tip)| holds(*tip)) {
            return Ok((Some(format!("refs/heads/{name}")), None));
        }
    }
    let watched = config.watch.branches.join(", ");
    Ok((
        None,
        Some(format!(
            "no watched branch ({watched}) holds {}: {cold} (end the range at a watched branch, or watch it under [watch] branches)",
            if args.is_empty() { "HEAD".to_string() } else { args.join(" ") }
        )),
    ))
}
