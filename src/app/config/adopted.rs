//! The settings `git sandbox init` adopts a repository with: what it detects and proposes, kept
//! in the git directory (`$GIT_DIR/sandbox.toml`), never in the work tree. They stand for the
//! `.sandbox.toml` of every commit without one (history included), parsed as a repository file
//! (they were derived from a hostile tree, so they only tighten the user's policy); their
//! `[watch]` and `[promote]` name the repository's own branches under any commit's file.

use crate::app::{io_err, AppError, Result};
use gs_config::ADOPTED_FILE;
use gs_git as git;
use gs_model::Framework;
use gs_runner::detect_setup::Proposal;
use gs_util as util;
use std::path::{Path, PathBuf};

/// Where the adopted settings of `repo` are kept: its common git directory (one file for all of
/// its worktrees).
pub fn path(repo: &gs_git::Repository) -> PathBuf {
    git::objects::common_dir(repo).join(ADOPTED_FILE)
}

/// The adopted settings' text, or `None` when `init` wrote none.
pub fn read(repo: &gs_git::Repository) -> Result<Option<String>> {
    let dir = git::objects::common_dir(repo);
    match util::beneath::read_beneath(dir, ADOPTED_FILE, 1 << 20) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(util::beneath::Skip::Missing(_)) => Ok(None),
        Err(e) => Err(AppError::usage(format!("{}: {e}", path(repo).display()))
            .hint("remove it and run `git sandbox init` again")),
    }
}

/// What `init` adopts a repository with.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// The file's text.
    pub text: String,
    /// The test command detected, if any.
    pub command: Option<String>,
    /// The setup step its lockfiles and manifests call for.
    pub setup: Option<Proposal>,
    /// The build step its CI runs before the tests.
    pub build: Option<Proposal>,
    /// The branches watched, and the production branch (with why it is production).
    pub watch: Vec<String>,
    pub production: String,
    pub production_why: String,
    /// Whether the work tree has its own `.sandbox.toml`, so only the branches were adopted.
    pub branches_only: bool,
    /// The setup's program, when runs cannot find it here, and how to get it.
    pub missing: Option<String>,
}

/// Write the adopted settings of `repo` unless it has some; `None` when it had.
pub fn adopt(repo: &gs_git::Repository) -> Result<Option<Adoption>> {
    let file = path(repo);
    if file.exists() || file.is_symlink() {
        return Ok(None);
    }
    let adoption = propose(repo);
    util::write_atomic(&file, adoption.text.as_bytes())
        .map_err(io_err(format!("cannot write {}", file.display())))?;
    Ok(Some(adoption))
}

/// What `init` would adopt `repo` with: the test command detection finds in the work tree (what
/// runs would use anyway) and the setup step its files call for, unless the work tree has a
/// `.sandbox.toml` of its own; and always the branches. Never the template of a new experiment
/// repository, whose Python tests would turn a passing project red.
pub fn propose(repo: &gs_git::Repository) -> Adoption {
    let (production, production_why) = production_branch(repo);
    let mut watch = Vec::new();
    if let Some(current) = git::head_branch(repo).filter(|b| !b.starts_with("experiment/")) {
        watch.push(current);
    }
    if !watch.contains(&production) {
        watch.push(production.clone());
    }
    watch.push("experiment/*".into());
    let workdir = git::objects::workdir(repo);
    let own_file = workdir.is_some_and(|d| {
        let f = d.join(".sandbox.toml");
        f.exists() || f.is_symlink()
    });
    let (detected, setup) = match workdir {
        Some(dir) if !own_file => detected(dir),
        _ => (None, None),
    };
    let build = workdir
        .filter(|_| !own_file && detected.is_some())
        .and_then(gs_runner::detect_setup::propose_build);
    let mut text = String::from(
        "# What `git sandbox init` adopted this repository with. It stands for the .sandbox.toml\n\
         # of every commit that has none; make it the repository's with\n\
         #   git sandbox config --adopted > .sandbox.toml && git add .sandbox.toml\n",
    );
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    // What the tree named (a workflow's file name) stays on its comment line.
    let comment = |s: &str| s.replace(|c: char| c.is_control(), " ");
    if !own_file {
        text.push_str("\n[test]\n");
        match &detected {
            Some((c, framework)) => text.push_str(&format!(
                "# Detected ({framework}); change it to what your project runs.\ncommand = {}\n",
                quote(c)
            )),
            None => text.push_str(
                "# No test command was detected, so runs analyse the code only. Name one:\n# command = \"make test\"\n",
            ),
        }
        if let Some(s) = &setup {
            text.push_str(&format!(
                "# Proposed from {}; it runs once per change of those files,\n# with the network only when your user config says `setup_network = true` under [limits].\nsetup = {}\n",
                comment(&s.why),
                quote(&s.command)
            ));
        }
        if let Some(b) = &build {
            text.push_str(&format!(
                "# Proposed from what the project's CI does: {}. It runs before the tests for every tree.\nbuild = {}\n",
                comment(&b.why),
                quote(&b.command)
            ));
        }
    }
    // A devcontainer.json names the environment: the runs' image, variables and create commands.
    let devcontainer = workdir.filter(|_| !own_file).and_then(|d| {
        [".devcontainer/devcontainer.json", ".devcontainer.json"]
            .into_iter()
            .find(|p| std::fs::symlink_metadata(d.join(p)).is_ok_and(|m| m.file_type().is_file()))
    });
    if let Some(path) = devcontainer {
        text.push_str(&format!(
            "\n[environment]\n# Proposed from {path}: the runs' root is its image (from a registry your user\n# config allows under [environment] registries), with its containerEnv, and its\n# onCreateCommand and postCreateCommand are the setup step when [test] names none.\ndevcontainer = {}\n",
            quote(path)
        ));
    }
    let list = watch
        .iter()
        .map(|b| quote(b))
        .collect::<Vec<_>>()
        .join(", ");
    text.push_str(&format!(
        "\n[watch]\n# The branch checked out when it was adopted and production.\nbranches = [{list}]\n\n[promote]\n# Production: {}.\ntarget = {}\n",
        comment(&production_why),
        quote(&production)
    ));
    let missing = setup.as_ref().and_then(|s| missing_tool(&s.command));
    Adoption {
        text,
        command: detected.map(|(c, _)| c),
        setup,
        build,
        watch,
        production,
        production_why,
        branches_only: own_file,
        missing,
    }
}

/// How to get each package manager a proposed setup runs.
const HOW_TO_GET: &[(&str, &str)] = &[
    (
        "uv",
        "`pipx install uv` (or see https://docs.astral.sh/uv/)",
    ),
    ("poetry", "`pipx install poetry`"),
    (
        "pnpm",
        "`corepack enable pnpm` (corepack comes with Node.js), or `npm install -g pnpm`",
    ),
    (
        "yarn",
        "`corepack enable yarn` (corepack comes with Node.js), or `npm install -g yarn`",
    ),
    ("bun", "see https://bun.sh"),
    ("npm", "install Node.js, which brings npm"),
    (
        "python3",
        "install Python 3 (Debian: `apt install python3 python3-venv`)",
    ),
    ("cargo", "install Rust with rustup (https://rustup.rs)"),
    ("go", "install Go (https://go.dev/dl/)"),
];

/// Whether runs find the program `tool` on their `PATH`.
fn found_here(tool: &str) -> bool {
    let tool = tool.to_string();
    gs_runner::toolchain::describe(
        std::slice::from_ref(&tool),
        &gs_sandbox::env::toolchain_env(),
    )
    .contains_key(&tool)
}

/// The program a setup `command` starts with, when the sandbox's `PATH` does not hold it: one
/// line naming it and how to get it (runs would say only `not found`).
fn missing_tool(command: &str) -> Option<String> {
    let program = gs_runner::toolchain::program_words(command)
        .into_iter()
        .next()?;
    if found_here(&program) {
        return None;
    }
    let how = HOW_TO_GET
        .iter()
        .find(|(p, _)| *p == program)
        .map_or("install it, or change the setup step", |(_, how)| how);
    Some(format!("{program} is not on the PATH runs see: {how}"))
}

/// The test command detection finds in `workdir`, run with the Python the proposed setup
/// installs into, and that setup.
fn detected(workdir: &Path) -> (Option<(String, Framework)>, Option<Proposal>) {
    let setup = gs_runner::detect_setup::propose_with(workdir, &|tool| found_here(tool));
    let command = gs_runner::detect::detect(workdir).map(|(command, framework)| {
        match setup
            .as_ref()
            .and_then(|s| s.python.map(|py| (py, s.pytest)))
        {
            // The tests run with the Python the setup installed into, under the runner it installed.
            Some((py, pytest)) if command.starts_with("python3 ") => {
                let command = if pytest && framework == Framework::Unittest {
                    format!("{py} -m pytest -q -rfE")
                } else {
                    command.replacen("python3", py, 1)
                };
                (command, if pytest { Framework::Pytest } else { framework })
            }
            _ => (command, framework),
        }
    });
    (command, setup)
}

/// The production branch and why: the default branch of the remote the current branch follows
/// (else `origin`, else the only one), else a local `main`, `master` or `trunk`, else the
/// current branch, else `main`.
fn production_branch(repo: &gs_git::Repository) -> (String, String) {
    let remotes = git::objects::remote_names(repo);
    let current = git::head_branch(repo);
    let remote = current
        .as_ref()
        .and_then(|b| git::objects::config_string(repo, &format!("branch.{b}.remote")))
        .filter(|r| remotes.contains(r))
        .or_else(|| remotes.iter().find(|r| *r == "origin").cloned())
        .or_else(|| (remotes.len() == 1).then(|| remotes[0].clone()));
    if let Some(r) = remote {
        let prefix = format!("refs/remotes/{r}/");
        if let Some(b) = git::objects::symbolic_target(repo, &format!("{prefix}HEAD"))
            .and_then(|t| t.strip_prefix(&prefix).map(str::to_string))
            .filter(|b| !b.is_empty() && b != "HEAD")
        {
            return (b, format!("the default branch of {r}"));
        }
    }
    for b in ["main", "master", "trunk"] {
        if git::objects::has_ref(repo, &format!("refs/heads/{b}")) {
            return (b.to_string(), format!("the repository's {b} branch"));
        }
    }
    match current {
        Some(b) => (b, "the branch checked out when it was adopted".into()),
        None => ("main".into(), "the default".into()),
    }
}

/// One line when the work tree's `.sandbox.toml` is not the one `commit` holds (changed, added
/// or removed and not committed): its run uses the commit's (or the adopted settings).
pub fn worktree_differs(repo: &gs_git::Repository, commit: gs_git::ObjectId) -> Option<String> {
    let dir = git::objects::workdir(repo)?;
    let here = util::beneath::read_beneath(dir, ".sandbox.toml", 1 << 20).ok();
    let info = git::commit_info(repo, commit).ok()?;
    let short = util::short(&commit.to_string()).to_string();
    let committed = super::commit_config::committed_text(repo, &info, ".sandbox.toml", &short)
        .ok()?
        .map(String::into_bytes);
    let instead = if path(repo).exists() {
        "the settings init adopted (git sandbox config --adopted prints them)"
    } else {
        "the defaults"
    };
    match (here, committed) {
        (Some(a), Some(b)) if a == b => None,
        (None, None) => None,
        (Some(_), Some(_)) => Some(format!(
            "the work tree's .sandbox.toml differs from {short}'s: the run uses {short}'s (commit the change to run with it)"
        )),
        (Some(_), None) => Some(format!(
            "the work tree's .sandbox.toml is not in {short}: the run uses {instead}; commit it to run with it"
        )),
        (None, Some(_)) => Some(format!(
            "{short} has a .sandbox.toml the work tree lacks: the run uses {short}'s"
        )),
    }
}
