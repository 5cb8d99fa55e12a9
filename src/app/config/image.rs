//! A commit's environment (`[environment] image`): the image its runs use as their root, pulled
//! from the registries the user allows into the home's image store, and what stands for it in
//! the result key (its digest and platform, in place of the host's toolchain).

use crate::app::{AppError, Context, Result};
use gs_config::Config;
use gs_image::{Image, Pulled, Reference, Store};
use std::collections::BTreeMap;

/// Why a run has no image: the start of its record's `error` (an attempt, never a result).
pub const UNAVAILABLE: &str = gs_model::IMAGE_UNAVAILABLE;

/// An image ready for a run: its sandbox root and what the record says of it.
#[derive(Debug, Clone)]
pub struct ForRun {
    pub root: gs_sandbox::sandbox::ImageRoot,
    pub environment: gs_model::Environment,
    pub toolchain: BTreeMap<String, String>,
    /// A Dockerfile's `RUN`s that ran now (0: each was kept, or there are none).
    pub ran: usize,
}

/// The home's image store.
pub fn store(ctx: &Context) -> Store {
    Store::at(&ctx.paths.home)
}

/// `text` as a reference, or a usage error naming what is wrong.
pub fn parse(text: &str) -> Result<Reference> {
    Reference::parse(text).map_err(|e| match e.split_once("; write ") {
        Some((problem, fix)) => AppError::usage(problem).hint(format!("write {fix}")),
        None => AppError::usage(e),
    })
}

/// Pull `reference` under `config`'s `[environment]`: refused before any connection when its
/// registry is not one the user allows.
pub fn pull(ctx: &Context, config: &Config, reference: &Reference) -> Result<Pulled> {
    pulled(ctx, config, reference).map_err(|e| {
        let unreachable = gs_image::http::is_unreachable(&e);
        let (problem, fix) = match e.split_once("; ") {
            Some((p, f)) => (p.to_string(), Some(f.to_string())),
            None => (e.clone(), None),
        };
        let err = AppError::refused(format!("cannot pull {reference}: {problem}"));
        match (fix, unreachable) {
            (Some(f), _) => err.hint(f),
            (None, true) => err.hint("check that the registry is reachable from this machine"),
            (None, false) => err,
        }
    })
}

/// [`pull`], its error as the client said it.
fn pulled(
    ctx: &Context,
    config: &Config,
    reference: &Reference,
) -> std::result::Result<Pulled, String> {
    let env = &config.environment;
    let registries = gs_image::Registries {
        allowed: env.registries.clone(),
        insecure: env.insecure_registries.clone(),
    };
    registries.check(reference)?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let docker = std::env::var_os("DOCKER_CONFIG").map(std::path::PathBuf::from);
    let opts = gs_image::PullOptions {
        net: registries.net(),
        credentials: gs_image::registry::docker_credentials(
            reference.registry_host(),
            home.as_deref(),
            docker.as_deref(),
        ),
        max_bytes: env.image_mb.saturating_mul(1 << 20),
        how: gs_image::isolate::How::Helper(
            std::env::current_exe().unwrap_or_else(|_| "git-sandbox".into()),
        ),
    };
    store(ctx).pull(reference, &opts)
}

/// What stands for the image in the result key: its digest and platform.
fn toolchain_of(image: &Image) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("image".to_string(), image.digest.clone()),
        ("image_platform".to_string(), image.platform.clone()),
    ])
}

/// What keeps the build caches and setup layers of runs in an image apart from the host's and
/// other images': the image's digest (empty on the host's root).
pub fn cache_variant(config: &Config) -> &str {
    match config.environment.image {
        Some(_) => config.toolchain.get("image").map_or("", String::as_str),
        None => "",
    }
}

/// The key's stand-in for the image `config` names, from what this machine resolved it to last
/// (no registry is asked): looking a result up needs no network. `None` without an image.
pub fn toolchain_held(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &gs_git::CommitInfo,
    config: &Config,
) -> Option<BTreeMap<String, String>> {
    if config.environment.dockerfile.is_some() {
        // Built from the commit's Dockerfile on the base's last digest: the key, nothing built.
        let held = (|| {
            let plan = super::build::read(repo, info, config).ok()??;
            let base = store(ctx).find(&plan.from)?;
            let key = super::build::key(ctx, repo, info, config, &plan, &base).ok()?;
            Some(BTreeMap::from([
                ("image".to_string(), key),
                ("image_platform".to_string(), base.platform),
            ]))
        })();
        return Some(held.unwrap_or_else(|| {
            BTreeMap::from([("image".to_string(), "Dockerfile (not built)".to_string())])
        }));
    }
    let text = config.environment.image.as_deref()?;
    let held = Reference::parse(text)
        .ok()
        .and_then(|r| store(ctx).find(&r));
    Some(match held {
        Some(image) => toolchain_of(&image),
        // Nothing matches until it is pulled.
        None => BTreeMap::from([("image".to_string(), format!("{text} (not pulled)"))]),
    })
}

/// The image `config` names, pulled for a run (a tag is resolved anew: one manifest request;
/// offline, the digest it resolved to last; a Dockerfile is built for a run of `scope`). `None`
/// without an image; an error that starts with [`UNAVAILABLE`] when it cannot be had.
pub fn for_run(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &gs_git::CommitInfo,
    config: &Config,
    scope: &super::build::Scope<'_>,
) -> Result<Option<ForRun>> {
    // Built from the commit's Dockerfile: a file the commit got wrong is its error; a base that
    // cannot be had, or a build that cannot be made here, leaves the run an attempt.
    if let Some(plan) = super::build::read(repo, info, config)? {
        let unavailable =
            |why: String| AppError::refused(format!("{UNAVAILABLE} {}: {why}", plan.label));
        let base = pulled(ctx, config, &plan.from).map_err(unavailable)?;
        let super::build::Built { image, key, ran } =
            super::build::build(ctx, repo, info, config, &plan, &base.image, scope).map_err(
                |e| match e {
                    e @ AppError::Usage(_) => e,
                    e => unavailable(e.to_string()),
                },
            )?;
        let built: Vec<String> = image.layers[base.image.layers.len().min(image.layers.len())..]
            .iter()
            .map(|l| l.diff_id.clone())
            .collect();
        let mut run = ready(ctx, config, &image, &image.reference, base.offline, built);
        // The plan's key stands for it in the result key: the same on every branch, whose layers
        // of a step with the network it had (the record's digest says which).
        run.toolchain.insert("image".into(), key);
        run.ran = ran;
        return Ok(Some(run));
    }
    let Some(text) = config.environment.image.as_deref() else {
        return Ok(None);
    };
    let unavailable = |why: String| AppError::refused(format!("{UNAVAILABLE} {text}: {why}"));
    let reference = Reference::parse(text).map_err(unavailable)?;
    let pulled = pulled(ctx, config, &reference).map_err(unavailable)?;
    Ok(Some(ready(
        ctx,
        config,
        &pulled.image,
        text,
        pulled.offline,
        Vec::new(),
    )))
}

/// `image` (named `text`) as a run's root and what its record says.
fn ready(
    ctx: &Context,
    config: &Config,
    image: &Image,
    text: &str,
    offline: bool,
    built: Vec<String>,
) -> ForRun {
    let root = gs_sandbox::sandbox::ImageRoot {
        layers: store(ctx).layer_dirs(image),
        workdir: image.working_dir.clone().unwrap_or_default().into(),
        // The environment's own variables (a devcontainer's `containerEnv`) over the image's.
        env: image
            .env
            .iter()
            .cloned()
            .chain(
                config
                    .environment
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={v}")),
            )
            .collect(),
        label: format!("{text}@{}", image.digest),
    };
    ForRun {
        root,
        ran: 0,
        toolchain: toolchain_of(image),
        environment: gs_model::Environment {
            image: text.to_string(),
            digest: image.digest.clone(),
            platform: image.platform.clone(),
            user: config
                .environment
                .remote_user
                .clone()
                .or_else(|| image.user.clone())
                .filter(|u| !u.is_empty()),
            layers: built,
            offline,
        },
    }
}

/// The image the config of `commit` names (its `.sandbox.toml`, the adopted settings or its
/// devcontainer.json), with that config; a usage error when it names none.
pub fn named_at(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: gs_git::ObjectId,
) -> Result<(Config, Reference)> {
    let config = super::commit_config::config_at(ctx, repo, commit, None)?;
    let Some(text) = config.environment.image.clone() else {
        return Err(AppError::usage(format!(
            "the config of {} names no image",
            gs_util::short(&commit.to_string())
        ))
        .hint("name one: `git sandbox image pull REF`, or [environment] image in .sandbox.toml"));
    };
    Ok((config, parse(&text)?))
}

/// The environment the config of `commit` names, built or pulled now as a run of `branch`
/// would have it (kept for the branch when `commit` is its tip), and how many of a
/// Dockerfile's `RUN`s ran now; `None` when it names none.
pub fn environment_at(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: gs_git::ObjectId,
    branch: Option<&str>,
) -> Result<Option<(gs_model::Environment, usize)>> {
    let info = gs_git::commit_info(repo, commit)?;
    let config = super::commit_config::config_at(ctx, repo, commit, None)?;
    let tip = branch.and_then(|b| gs_git::objects::ref_peeled(repo, &format!("refs/heads/{b}")));
    let scope = super::build::Scope {
        branch,
        production: &config.promote.target,
        writes: tip == Some(commit),
        read: true,
    };
    Ok(for_run(ctx, repo, &info, &config, &scope)?.map(|r| (r.environment, r.ran)))
}

/// Every image in the store, most recently used first.
pub fn list(ctx: &Context) -> Vec<Image> {
    store(ctx).images()
}

/// Remove the image `reference` names from the store.
pub fn remove(ctx: &Context, reference: &Reference) -> Result<Image> {
    store(ctx).remove(reference).map_err(|e| {
        let (problem, fix) = e.split_once("; ").unwrap_or((&e, ""));
        AppError::not_found(problem.to_string()).hint(fix.to_string())
    })
}
