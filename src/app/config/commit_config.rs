//! A commit's config as a run sees it: the user's layers with the commit's own `.sandbox.toml`
//! (read small and UTF-8 only: the commit is hostile), an experiment branch's `[config]`, and
//! the in-tree build directories a run keeps.

use crate::app::{AppError, Context, Result};
use gs_config::{Config, ConfigFile};
use gs_git as git;
use gs_git::CommitInfo;
use gs_util as util;

/// The experiment a ref is the branch of: `refs/heads/experiment/NAME`, or the same branch of a
/// followed remote (`refs/remotes/<remote>/experiment/NAME`).
pub fn experiment_of(refname: Option<&str>) -> Option<String> {
    let r = refname?;
    r.strip_prefix("refs/heads/experiment/")
        .or_else(|| {
            r.strip_prefix("refs/remotes/")
                .and_then(|rest| rest.split_once('/'))
                .and_then(|(_, branch)| branch.strip_prefix("experiment/"))
        })
        .map(str::to_string)
}

/// The effective config for a commit: the user's layers with the commit's own `.sandbox.toml`
/// (or, when it has none, the settings the repository was adopted with), and, for a run of an experiment's branch, the `[config]` of its `experiment.toml`.
pub fn config_for(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    experiment: Option<&str>,
    flags: &ConfigFile,
) -> Result<Config> {
    let label = format!("{}:.sandbox.toml", util::short(&info.id.to_string()));
    let text = committed_text(repo, info, ".sandbox.toml", &label)?;
    let mut layers = ctx
        .adopted_layers(repo)?
        .with_repo_text(&label, text.as_deref())?;
    if let Some(name) = experiment {
        layers.experiment =
            crate::app::config::experiment_meta::config_overrides(repo, info, name)?;
    }
    layers.flags = flags.clone();
    let mut config = layers.resolve();
    // A devcontainer.json of the commit's own names the image, its variables and its setup.
    if let Some(path) = config.environment.devcontainer.clone() {
        let label = format!("{}:{path}", util::short(&info.id.to_string()));
        let text = committed_text(repo, info, &path, &label)?.ok_or_else(|| {
            AppError::usage(format!("{label}: no such file in the commit"))
                .hint("commit it, or take [environment] devcontainer out of the config")
        })?;
        let dc = gs_config::devcontainer::parse(&label, &text)?;
        gs_config::devcontainer::apply(&dc, &path, &mut config)?;
    }
    // In an image, the image is the toolchain (the host's is not in the view).
    config.toolchain = match super::image::toolchain_held(ctx, repo, info, &config) {
        Some(image) => image,
        None => toolchain_of(&config, repo, info),
    };
    Ok(config)
}

/// The tools a commit's runs would use: the program words of its test command (or, when it has
/// none, of the tools its tree's manifests call for), of its named checks and of its setup step.
fn toolchain_of(
    config: &Config,
    repo: &gs_git::Repository,
    info: &CommitInfo,
) -> std::collections::BTreeMap<String, String> {
    use gs_runner::toolchain;
    let mut words = Vec::new();
    match &config.test.command {
        Some(c) => words.extend(toolchain::program_words(c)),
        None => {
            let has = |f: &str| git::blob_at(repo, info.tree, f).ok().flatten().is_some();
            let found = [
                ("Cargo.toml", &["cargo", "rustc"][..]),
                ("go.mod", &["go"][..]),
                ("package.json", &["npm", "node"][..]),
            ]
            .into_iter()
            .find(|(marker, _)| has(marker));
            match found {
                Some((_, tools)) => words.extend(tools.iter().map(|t| t.to_string())),
                // Python's test runners, else `node --test`.
                None => words.extend(["python3".to_string(), "node".to_string()]),
            }
        }
    }
    for c in &config.checks {
        words.extend(toolchain::program_words(&c.command));
    }
    if let Some(s) = &config.test.setup {
        words.extend(toolchain::program_words(s));
    }
    toolchain::describe(&words, &gs_sandbox::env::toolchain_env())
}

/// [`config_for`] a run of `commit` made for `refname` (an experiment's branch adds its
/// `[config]`), with no flags: the config its result is made and judged under.
pub fn config_at(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: gs_git::ObjectId,
    refname: Option<&str>,
) -> Result<Config> {
    let info = git::commit_info(repo, commit)?;
    let experiment = experiment_of(refname);
    config_for(
        ctx,
        repo,
        &info,
        experiment.as_deref(),
        &ConfigFile::default(),
    )
}

/// The in-tree directories whose build output a run keeps: `[cache] dirs`, else what the tree's
/// toolchain writes (Cargo.toml: `target`, package.json: `node_modules`, CMakeLists.txt: the
/// build directory the detected command configures).
pub(crate) fn cache_dirs(
    config: &Config,
    repo: &gs_git::Repository,
    info: &CommitInfo,
) -> Vec<String> {
    if let Some(d) = &config.cache.dirs {
        return d.clone();
    }
    let mut out = Vec::new();
    for (marker, dir) in [("Cargo.toml", "target"), ("package.json", "node_modules")] {
        if git::blob_at(repo, info.tree, marker)
            .ok()
            .flatten()
            .is_some()
        {
            out.push(dir.to_string());
        }
    }
    let has = |path: &str| git::objects::entry_at(repo, info.tree, path).is_some();
    if has("CMakeLists.txt") {
        // As `gs_runner::detect` names it: `build`, unless the tree has a `build` of its own.
        out.push(if has("build") { "cmake-build" } else { "build" }.to_string());
    }
    out
}

/// The download caches of a run's home that its branch keeps, for the toolchains the commit's
/// root says it uses ([`gs_runner::caches::HOME_CACHES`]): not a key of any config.
pub(crate) fn home_caches(repo: &gs_git::Repository, info: &CommitInfo) -> Vec<String> {
    gs_runner::caches::home_caches(|marker| {
        git::blob_at(repo, info.tree, marker)
            .ok()
            .flatten()
            .is_some()
    })
}

/// The most a config file in a commit may hold: it is read whole, by the supervisor.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of a small file the commit holds (its `.sandbox.toml`, an `experiment.toml`), read
/// only when it is small and UTF-8: anything else is a config error, never a big read.
pub(crate) fn committed_text(
    repo: &gs_git::Repository,
    info: &CommitInfo,
    path: &str,
    label: &str,
) -> Result<Option<String>> {
    let Some((id, size)) = git::blob_at(repo, info.tree, path)? else {
        return Ok(None);
    };
    if size > MAX_CONFIG_BYTES {
        return Err(AppError::usage(format!(
            "{label}: the file is {size} bytes, more than a config file may hold (1 MiB)"
        ))
        .hint("keep it to settings"));
    }
    let bytes = git::objects::blob(repo, id)?;
    String::from_utf8(bytes).map(Some).map_err(|_| {
        AppError::usage(format!("{label}: the file is not UTF-8")).hint("save it as UTF-8 text")
    })
}
