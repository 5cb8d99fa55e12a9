//! Running any command at a revision in the same sandbox as a test run (a kept checkout behind an
//! overlay where the machine allows, else a fresh one), with its output passed through. Nothing
//! is recorded.

use crate::app::{config::commit_config::config_for, run::setup, AppError, Context, Result};
use gs_config::ConfigFile;
use gs_git as git;
use gs_git::checkout;
use gs_runner::{caches, rundir};
use gs_sandbox::{env, process};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What ran and how it ended.
pub struct Executed {
    /// With [`Output::Capture`], `outcome.output` holds what the command (and a setup step it
    /// needed) printed, up to the cap, and `outcome.truncated` says whether more was cut.
    pub outcome: process::Outcome,
    /// The timeout it ran under.
    pub timeout: Duration,
}

/// Where the command's output goes.
#[derive(Debug, Clone, Copy)]
pub enum Output {
    /// The caller's stdout and stderr (the command line).
    Inherit,
    /// Kept (stdout and stderr together), at most this many bytes; nothing is printed (MCP,
    /// whose stdout is the protocol).
    Capture(u64),
}

/// Run `argv` in a sandboxed checkout of `commit`, under the commit's own limits; `timeout`
/// replaces its test timeout.
pub fn exec(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: gs_git::ObjectId,
    argv: &[String],
    timeout: Option<Duration>,
    output: Output,
    interrupt: &AtomicBool,
) -> Result<Executed> {
    let _t = gs_util::trace::span("exec in all (after start-up)");
    let command = command_line(argv)?;
    let line = |_: &rundir::RunDir| Some(command.clone());
    run_line(ctx, repo, commit, &line, &[], timeout, output, interrupt)
}

/// `argv` as the shell line that runs it (`exec` and each word quoted). Refused before anything
/// is prepared: a NUL cannot reach `sh` (it used to cut the command line short, down to nothing).
pub fn command_line(argv: &[String]) -> Result<String> {
    let mut words = Vec::with_capacity(argv.len());
    for (i, a) in argv.iter().enumerate() {
        words.push(gs_util::shell::quote(a).map_err(|_| {
            AppError::usage(format!(
                "argument {} of the command holds a NUL byte, which no command line can carry",
                i + 1
            ))
            .hint("leave the NUL out (pass such data in a file)")
        })?);
    }
    Ok(format!("exec {}", words.join(" ")))
}

/// What [`run_line`] runs in the workspace: the line, or `None` for nothing to run.
pub type Line<'a> = &'a dyn Fn(&rundir::RunDir) -> Option<String>;

/// Run the shell line `line` makes in a sandboxed checkout of `commit`, as [`exec`] runs its
/// command; the files `artifacts` names are read back into `outcome.artifacts`. `None` when
/// `line` gives nothing to run.
#[allow(clippy::too_many_arguments)]
pub fn run_line(
    ctx: &Context,
    repo: &gs_git::Repository,
    commit: gs_git::ObjectId,
    line: Line<'_>,
    artifacts: &[String],
    timeout: Option<Duration>,
    output: Output,
    interrupt: &AtomicBool,
) -> Result<Executed> {
    let at = At::commit(ctx, repo, commit);
    run_in::<()>(&at, line, artifacts, timeout, output, interrupt, None).map(|(e, _)| e)
}

/// Where [`run_in`] runs: a commit, under its own config unless one is given.
pub struct At<'a> {
    pub ctx: &'a Context,
    pub repo: &'a gs_git::Repository,
    pub commit: gs_git::ObjectId,
    pub config: Option<gs_config::Config>,
    /// Layers laid over the commit's tree, topmost first (an agent workspace's), which need an
    /// overlay: without one the command is refused.
    pub over: Vec<std::path::PathBuf>,
    /// The branch whose build cache is read (`None`: production's).
    pub branch: Option<String>,
    /// Keep what the command wrote to its home too, not only to its tree.
    pub keep_home: bool,
}

impl<'a> At<'a> {
    /// The commit alone, under its own config.
    pub fn commit(
        ctx: &'a Context,
        repo: &'a gs_git::Repository,
        commit: gs_git::ObjectId,
    ) -> Self {
        At {
            ctx,
            repo,
            commit,
            config: None,
            over: Vec::new(),
            branch: None,
            keep_home: false,
        }
    }
}

/// What a command wrote to its tree: the upper layer of its overlay as the sandbox's helper
/// merged it (`Layer`), or the whole tree it ran in, where it had no overlay (`Whole`).
pub enum Written {
    Layer(std::path::PathBuf),
    Whole(std::path::PathBuf),
    /// The merge did not finish: why.
    Lost(String),
}

/// [`run_line`], with `keep` (a directory and a reader) given: what the command wrote to its
/// tree is kept in the directory, and the reader is given it as a [`Written`] while the checkout
/// is still in place; what it returns is returned beside the outcome.
#[allow(clippy::too_many_arguments)]
pub fn run_in<T>(
    at: &At<'_>,
    line: Line<'_>,
    artifacts: &[String],
    timeout: Option<Duration>,
    output: Output,
    interrupt: &AtomicBool,
    keep: Option<(&std::path::Path, &dyn Fn(Written) -> T)>,
) -> Result<(Executed, Option<T>)> {
    let At {
        ctx, repo, commit, ..
    } = *at;
    let info = git::commit_info(repo, commit)?;
    let mut config = match &at.config {
        Some(c) => c.clone(),
        None => config_for(ctx, repo, &info, None, &ConfigFile::default())?,
    };
    if let Some(t) = timeout {
        config.test.timeout = t;
    }
    let mut sandbox = ctx.sandbox();
    // The commit's image, as its runs have it (pulled: a tag resolved anew).
    // An exec keeps nothing it builds (a Dockerfile's steps with the network included).
    let scope = crate::app::config::build::Scope {
        branch: at.branch.as_deref(),
        production: &config.promote.target,
        writes: false,
        read: true,
    };
    if let Some(image) = crate::app::config::image::for_run(ctx, repo, &info, &config, &scope)? {
        config.toolchain = image.toolchain;
        sandbox.image = Some(image.root);
    }
    let scratch = checkout::scratch_root();
    let home_id = crate::app::home::home_id(&ctx.paths.home);
    let capture = match output {
        Output::Inherit => None,
        Output::Capture(cap) => Some((
            tempfile::Builder::new()
                .prefix("git-sandbox-exec-")
                .tempdir()
                .map_err(crate::app::io_err(
                    "cannot create a directory for the output",
                ))?,
            cap,
        )),
    };
    let log = capture.as_ref().map(|(d, _)| d.path().join("output.log"));
    let setup_log = capture.as_ref().map(|(d, _)| d.path().join("setup.log"));
    let output = match (&log, &capture) {
        (Some(log), Some((_, cap))) => process::Output::Capture { log, cap: *cap },
        _ => process::Output::Inherit,
    };
    // The helper starts (and makes its namespaces) while the workspace is prepared.
    process::start_ahead(&sandbox, &config.limits, &output);
    let cache_home = ctx.paths.caches();
    let dirs = crate::app::config::commit_config::cache_dirs(&config, repo, &info);
    let home_dirs = crate::app::config::commit_config::home_caches(repo, &info);
    // Production's build caches, read-only: an exec keeps nothing.
    let cache = config.cache.enabled.then(|| caches::CacheUse {
        home: &cache_home,
        branch: at.branch.as_deref(),
        read: true,
        writes: caches::writes(caches::RunOf::Exec),
        production: &config.promote.target,
        dirs: &dirs,
        home_dirs: &home_dirs,
        max_mb: config.cache.max_mb,
        variant: crate::app::config::image::cache_variant(&config),
    });
    let options = rundir::Options {
        scratch: &scratch,
        home_id: &home_id,
        data_dir: &ctx.paths.home,
        overlay: sandbox.overlay,
        ceiling: config.limits.checkout_bytes(),
        interrupt,
        cache,
    };
    // A workspace's layers go over a kept checkout: with every slot busy (runs beside it), it
    // waits for one rather than be refused, as long as its command may take — each time it
    // needs one (a kept checkout found altered is taken again below).
    let prepare = || {
        let _t = gs_util::trace::span("run directory");
        if !at.over.is_empty() && sandbox.overlay {
            let since = std::time::Instant::now();
            while since.elapsed() < config.test.timeout
                && !interrupt.load(std::sync::atomic::Ordering::Relaxed)
            {
                if let Some(w) = rundir::prepare_kept(repo, info.tree, &options)? {
                    return Ok(w);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        rundir::prepare(repo, info.tree, &options)
    };
    // The setup step's layer (production's, else one built for this exec and thrown away). A
    // kept checkout found altered before a setup is built is checked out afresh, once.
    let mut work = prepare()?;
    let mut setup = None;
    for attempt in 0..2 {
        match setup::prepare(
            &config,
            repo,
            info.tree,
            &mut work,
            cache.as_ref(),
            &sandbox,
            match &setup_log {
                Some(p) => setup::SetupOutput::Log(p),
                None => setup::SetupOutput::Terminal,
            },
            interrupt,
        ) {
            Ok(s) => {
                setup = s;
                break;
            }
            Err(setup::SetupError::Untrusted) if attempt == 0 => {
                work.release();
                work = prepare()?;
            }
            Err(setup::SetupError::Untrusted) => return Err(altered()),
            Err(setup::SetupError::Failed(e)) => {
                return Err(AppError::refused(e)
                    .hint("fix [test] setup in .sandbox.toml, or run it by hand first"))
            }
        }
    }
    let Some(command) = line(&work) else {
        return Err(AppError::refused(format!(
            "no test command at {}: none configured and none detected in its tree",
            gs_util::short(&commit.to_string())
        ))
        .hint("set [test] command in .sandbox.toml"));
    };
    let command = setup.as_ref().map_or(command.clone(), |s| s.wrap(&command));
    if !at.over.is_empty() && work.lower().is_none() {
        return Err(AppError::refused(if sandbox.overlay {
            "a workspace needs an overlay over a kept checkout, and every one of this machine's slots stayed busy"
        } else {
            "a workspace needs an overlay over a kept checkout, and this machine's sandbox has none"
        })
        .hint(if sandbox.overlay {
            "try again when fewer runs are going on"
        } else {
            "run `git sandbox doctor` to see why overlayfs is unavailable"
        }));
    }
    // The tree's writes are merged out of the overlay's upper layer as a build cache's are.
    let kept_paths = if at.keep_home {
        vec!["tree".to_string(), "home".to_string()]
    } else {
        vec!["tree".to_string()]
    };
    let keep_dir = keep.map(|(dir, _)| dir).filter(|_| work.lower().is_some());
    let outcome = process::run(process::Spec {
        command: &command,
        cwd: &work.path(),
        root: work.root(),
        env: env::sandbox_env(work.root()),
        timeout: config.test.timeout,
        output,
        limits: &config.limits,
        sandbox: &sandbox,
        interrupt,
        artifacts,
        lower: work.lower(),
        run_uid: work.run_uid,
        cache_layers: &work.cache_layers,
        cache_out: keep_dir,
        cache_paths: if keep_dir.is_some() { &kept_paths } else { &[] },
        work_layers: &at.over,
        watch: None,
        egress: process::Egress::tests(&config),
    });
    if !work.confirm() {
        return Err(altered());
    }
    let read = keep.map(|(dir, read)| {
        read(match keep_dir {
            None => Written::Whole(work.path()),
            // The helper says `added` once the merge is whole (`layer/tree` is absent when the
            // command wrote nothing there), `failed` when an entry did not arrive.
            Some(_) => match std::fs::read_to_string(dir.join("failed")) {
                Ok(why) => Written::Lost(why.trim().to_string()),
                Err(_) if dir.join("added").exists() => Written::Layer(dir.join("layer/tree")),
                Err(_) => Written::Lost("the sandbox kept nothing of what it wrote".into()),
            },
        })
    });
    Ok((
        Executed {
            outcome,
            timeout: config.test.timeout,
        },
        read,
    ))
}

/// The kept checkout the command ran in turned out to have been altered outside git-sandbox.
fn altered() -> AppError {
    AppError::refused(
        "the kept checkout this ran in had been altered outside git-sandbox, so the command did not see the commit's tree; it is checked out afresh now",
    )
    .hint("run the command again")
}
