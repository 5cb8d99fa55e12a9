//! The setup step (`[test] setup = "npm ci"`): run once per change of the tree's lockfiles and
//! manifests, in the sandbox, with the network only when the user's own config allows it
//! (`[limits] setup_network`); what it writes (`node_modules/`, `.venv/`, its home's package
//! caches) is kept as a layer under the runs of its branch — and of branches that start from
//! production's, read-only — so the tests themselves need no network.

use gs_config::Config;
use gs_git::ObjectId;
use gs_model::{KilledBy, SetupRun};
use gs_runner::caches;
use gs_runner::{rundir, rundir::RunDir};
use gs_sandbox::{process, Sandbox};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The files whose contents decide what a setup step installs, wherever they are in the tree:
/// a workspace's packages each have a manifest (`packages/*/package.json`, a uv or Cargo
/// workspace's members), and the package manager reads them all.
const INPUTS: &[&str] = &[
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "pnpm-workspace.yaml",
    ".npmrc",
    ".yarnrc.yml",
    "bun.lockb",
    "bun.lock",
    "Cargo.toml",
    "Cargo.lock",
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "poetry.lock",
    "Pipfile",
    "Pipfile.lock",
    "uv.lock",
    "pdm.lock",
    "Gemfile",
    "Gemfile.lock",
    "composer.json",
    "composer.lock",
    "mix.exs",
    "mix.lock",
];

/// Whether a file named `name` is one a package manager reads to install (`requirements.txt`,
/// `requirements-dev.txt`, … included).
fn is_input(name: &str) -> bool {
    INPUTS.contains(&name) || (name.starts_with("requirements") && name.ends_with(".txt"))
}

/// What keys a setup: its command, where its network leads (nowhere, the hosts its proxy allows,
/// the host's), the paths and blob ids of every lockfile and manifest in the tree, and the
/// mirrors it installs from.
pub fn key(config: &Config, command: &str, repo: &gs_git::Repository, tree: ObjectId) -> String {
    let mut text = format!("{command}\0{}", config.setup_network_key());
    for (path, id) in inputs(repo, tree) {
        text.push_str(&format!("{path}\0{id}\0"));
    }
    // In an image, what it installs with is the image's (none keeps the keys of host layers).
    let image = crate::app::config::image::cache_variant(config);
    if !image.is_empty() {
        text.push_str(&format!("image\0{image}\0"));
    }
    // What it installs from: a company's mirror (none set keeps the keys of layers before).
    for (k, v) in gs_sandbox::env::mirrors() {
        text.push_str(&format!("mirror\0{k}={v}\0"));
    }
    gs_util::fnv64_hex(text.as_bytes())
}

/// The tree's lockfiles and manifests, in the tree's order. A tree that cannot be read has
/// none (the key then changes with the command only, as for a tree without any).
fn inputs(repo: &gs_git::Repository, tree: ObjectId) -> Vec<(String, ObjectId)> {
    let Ok(entries) = gs_git::objects::walk(repo, tree) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter(|e| e.kind.is_file())
        .filter_map(|e| {
            let name = e.path.rsplit('/').next().unwrap_or(&e.path);
            is_input(name).then_some((e.path.clone(), e.id))
        })
        .collect()
}

/// What an inline setup step prints when it fails, before the tests would run.
const INLINE_FAILED: &str = "git-sandbox: the setup step failed";

/// What the build step (`[test] build`) prints when it fails, before the tests would run.
const BUILD_FAILED: &str = "git-sandbox: the build step failed";

/// The test command with the build step run first, in the tests' sandbox, with their network
/// and within their timeout: a build that fails stops there. The command's own words stay as
/// they are (the probe, the first-failure watch and the reporter read them).
pub fn with_build(build: Option<&str>, command: &str) -> String {
    match build {
        Some(b) => format!("(\n{b}\n) >&2 || {{ echo '{BUILD_FAILED}' >&2; exit 1; }}\n{command}"),
        None => command.to_string(),
    }
}

/// Why the tests did not run, when the build step failed: its marker is in `output`.
pub fn build_failed(build: Option<&str>, output: &str) -> Option<String> {
    let build = build?;
    output.lines().any(|l| l.trim() == BUILD_FAILED).then(|| {
        format!(
            "the build step `{build}` failed, so the tests did not run (its output is in the log)"
        )
    })
}

/// A run's setup, once ready.
pub enum Setup {
    /// Its layer is laid under the run's tree (held until the run ends).
    Layer(caches::SetupLayer, SetupRun),
    /// No kept checkout here: the command runs just before the tests, in their sandbox.
    Inline(String, SetupRun),
}

impl Setup {
    pub fn record(&self) -> SetupRun {
        match self {
            Setup::Layer(_, r) | Setup::Inline(_, r) => r.clone(),
        }
    }

    /// Lay the setup's layer (if it has one) under another workspace of the same run.
    pub fn lay_under(&self, work: &mut RunDir) {
        if let Setup::Layer(layer, _) = self {
            work.cache_layers.push(layer.layer());
        }
    }

    /// The same step run inline (when the run falls back to a fresh checkout).
    pub fn inline(record: SetupRun, config: &Config) -> Setup {
        let command = record.command.clone();
        Setup::Inline(
            command,
            SetupRun {
                how: "inline".into(),
                duration_ms: 0,
                network: config.limits.network,
                traffic: None,
                ..record
            },
        )
    }

    /// Why the tests did not run, when this setup ran inline and failed before them (`output`
    /// holds the line [`Setup::wrap`] prints then).
    pub fn failed_inline(&self, output: &str) -> Option<String> {
        let Setup::Inline(command, record) = self else {
            return None;
        };
        if !output.lines().any(|l| l.trim() == INLINE_FAILED) {
            return None;
        }
        // Inline, it has the tests' network policy (no kept checkout here to build a layer in).
        let hint = if record.network {
            String::new()
        } else {
            format!(
                "; {}: vendor its dependencies, or run where a kept checkout lets it build with `setup_network = true`",
                gs_model::attempt::SETUP_OFFLINE
            )
        };
        Some(format!(
            "{}`{command}` failed, run inline just before the tests (its output is in the tests' log){hint}",
            gs_model::attempt::SETUP_FAILED
        ))
    }

    /// The test command with the setup run first, when the setup is inline.
    pub fn wrap(&self, command: &str) -> String {
        match self {
            Setup::Layer(..) => command.to_string(),
            Setup::Inline(setup, _) => {
                format!("(\n{setup}\n) >&2 || {{ echo '{INLINE_FAILED}' >&2; exit 1; }}\n{command}")
            }
        }
    }
}

/// Why a setup is not ready.
#[derive(Debug)]
pub enum SetupError {
    /// The step failed: the one-line reason.
    Failed(String),
    /// The kept checkout failed its check: prepare the workspace again (it is rebuilt).
    Untrusted,
}

/// Where the setup step's output goes.
#[derive(Clone, Copy)]
pub enum SetupOutput<'a> {
    Log(&'a Path),
    Terminal,
}

/// Get the setup of `config` ready for a run in `work`: reuse the layer its key already has, or
/// run the step and keep its layer. `None` when there is no setup step.
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    config: &Config,
    repo: &gs_git::Repository,
    tree: ObjectId,
    work: &mut RunDir,
    cache: Option<&caches::CacheUse<'_>>,
    sandbox: &Sandbox,
    output: SetupOutput<'_>,
    interrupt: &AtomicBool,
) -> Result<Option<Setup>, SetupError> {
    let Some(command) = config.test.setup.clone() else {
        return Ok(None);
    };
    let key = key(config, &command, repo, tree);
    let mut record = SetupRun {
        command: command.clone(),
        key: key.clone(),
        how: "inline".into(),
        duration_ms: 0,
        network: config.limits.network,
        traffic: None,
    };
    let layer = match (work.lower(), cache) {
        (Some(_), Some(c)) => caches::setup_layer(c, &rundir::repo_key(repo), &key),
        _ => None,
    };
    let Some(mut layer) = layer else {
        return Ok(Some(Setup::Inline(command, record)));
    };
    record.network = config.limits.setup_network;
    if layer.ready {
        record.how = "reused".into();
        work.cache_layers.push(layer.layer());
        return Ok(Some(Setup::Layer(layer, record)));
    }
    // What it builds is kept for later runs: only from a tree known to be the commit's.
    if !work.confirm() {
        return Err(SetupError::Untrusted);
    }
    let mut limits = config.limits.clone();
    limits.network = config.limits.setup_network;
    let started = Instant::now();
    // On a terminal, its output goes to stderr: stdout is the command's.
    let shown = match output {
        SetupOutput::Terminal => format!("(\n{command}\n) >&2"),
        SetupOutput::Log(_) => command.clone(),
    };
    let outcome = process::run(process::Spec {
        command: &shown,
        cwd: &work.path(),
        root: work.root(),
        env: gs_sandbox::env::sandbox_env(work.root()),
        timeout: config.test.timeout,
        output: match output {
            SetupOutput::Log(log) => process::Output::Capture {
                log,
                cap: config.limits.output_bytes,
            },
            SetupOutput::Terminal => process::Output::Inherit,
        },
        limits: &limits,
        sandbox,
        interrupt,
        artifacts: &[],
        lower: work.lower(),
        run_uid: work.run_uid,
        cache_layers: &[],
        cache_out: Some(&layer.dir),
        cache_paths: &["tree".to_string(), "home".to_string()],
        work_layers: &[],
        watch: None,
        egress: process::Egress::setup(config),
    });
    record.duration_ms = started.elapsed().as_millis() as u64;
    record.traffic = outcome.network.clone();
    let hit = outcome.killed_by.clone().or_else(|| {
        gs_runner::limit_hit::attribute(
            outcome.exit_code,
            outcome.signal,
            &outcome.output_tail,
            &limits,
        )
    });
    let why = if let Some(e) = &outcome.spawn_error {
        Some(e.clone())
    } else if let Some(k) = &hit {
        Some(match k {
            KilledBy::Timeout | KilledBy::Cpu => format!(
                "ran past its limits ({}s timeout, {} CPU seconds)",
                config.test.timeout.as_secs(),
                config.limits.cpu_seconds
            ),
            other => gs_runner::limit_hit::explain(other, &limits, "", "was")
                .map(|e| e.trim_start().to_string())
                .unwrap_or_else(|| format!("was stopped ({other})")),
        })
    } else if outcome.exit_code != Some(0) {
        let last = outcome.output_tail.lines().last().unwrap_or("").trim();
        Some(format!(
            "exited with {}{}",
            outcome
                .exit_code
                .map_or("a signal".to_string(), |c| c.to_string()),
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        ))
    } else if let Err(e) = layer.finish() {
        Some(format!("succeeded, but what it wrote {e}"))
    } else {
        None
    };
    if let Some(why) = why {
        let log = match output {
            SetupOutput::Log(log) => format!(" (its output: {})", log.display()),
            SetupOutput::Terminal => String::new(),
        };
        let hint = if config.limits.setup_network {
            String::new()
        } else {
            format!("; {}: vendor its dependencies, or allow `setup_network = true` under [limits] in your user config", gs_model::attempt::SETUP_OFFLINE)
        };
        return Err(SetupError::Failed(format!(
            "{}`{command}` {why}{log}{hint}",
            gs_model::attempt::SETUP_FAILED
        )));
    }
    record.how = "built".into();
    work.cache_layers.push(layer.layer());
    Ok(Some(Setup::Layer(layer, record)))
}

/// The program a shell said it could not find (`sh: 1: mocha: not found`, `bash: mocha:
/// command not found`), from the last such line of `output`.
pub fn not_found_program(output: &str) -> Option<&str> {
    output.lines().rev().find_map(|l| {
        let l = l.trim();
        let head = l
            .strip_suffix(": command not found")
            .or_else(|| l.strip_suffix(": not found"))?;
        let program = head.rsplit(": ").next()?.trim();
        (!program.is_empty() && !program.contains(char::is_whitespace)).then_some(program)
    })
}

/// For a test command that stopped on "X: not found", when X is a program the project's
/// package manager installs: a hint naming the setup step that installs it (the one configured,
/// or the one `init` would propose), to follow the error's first clause.
pub fn not_found_hint(dir: &Path, command: &str, output: &str, config: &Config) -> Option<String> {
    use gs_runner::detect_setup;
    let program = not_found_program(output)?;
    if !detect_setup::installed_by_setup(dir, command, program) {
        return None;
    }
    let network = if config.limits.setup_network {
        String::new()
    } else {
        " (its network needs `setup_network = true` under [limits] in your user config)".into()
    };
    Some(match &config.test.setup {
        Some(setup) => format!(
            "; `{program}` is installed by the setup step `{setup}`: check that it installs it{network}"
        ),
        None => {
            let proposed = detect_setup::propose(dir)
                .map(|p| format!("`setup = \"{}\"`", p.command))
                .unwrap_or_else(|| "one".into());
            format!(
                "; `{program}` is installed by the project's package manager: add a setup step under [test] ({proposed}, as `git sandbox init` proposes){network}"
            )
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_missing_program_is_read_from_the_shells_line() {
        for (out, want) in [
            ("> mocha\nsh: 1: mocha: not found\n", Some("mocha")),
            ("bash: line 1: vitest: command not found", Some("vitest")),
            ("/bin/sh: jest: not found", Some("jest")),
            ("all good", None),
            ("error: some file: not found in cache", None),
        ] {
            assert_eq!(super::not_found_program(out), want, "{out}");
        }
    }
}
