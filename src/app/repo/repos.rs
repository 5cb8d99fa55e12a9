//! Experiment repositories: create one from the embedded templates, adopt an existing one, and
//! keep the registration (the repository's id lives in its own git config, so the index can be
//! rebuilt from the repositories themselves).

use crate::app::locate::remote_url_of;
// Where the faces have always found it.
pub use crate::app::locate::check_name;
use crate::app::{io_err, AppError, Context, Repo, Result};
use gs_git as git;
use gs_git::{cli, hooks};
use gs_model::EventKind;
use gs_store::RepoRow;
use gs_util as util;
use std::path::{Path, PathBuf};

/// git config key holding the repository's id.
pub const ID_KEY: &str = "sandbox.repositoryId";

/// The files of a new experiment repository: (path in the repository, contents).
const TEMPLATES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../templates/README.md")),
    (
        ".sandbox.toml",
        include_str!("../../../templates/sandbox.toml"),
    ),
    (".gitignore", include_str!("../../../templates/gitignore")),
    ("results/.gitkeep", ""),
    ("logs/.gitkeep", ""),
    (
        "tests/test_example.py",
        include_str!("../../../templates/tests/test_example.py"),
    ),
];

/// The repository config `init` writes when a repository has none.
pub fn default_repo_config() -> &'static str {
    include_str!("../../../templates/sandbox.toml")
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Created {
    #[serde(flatten)]
    pub repo: RepoRow,
    #[serde(skip)]
    pub hooks: Vec<hooks::HookInstall>,
    /// The settings `init` adopted the repository with (`$GIT_DIR/sandbox.toml`), when it
    /// wrote them this time.
    #[serde(skip)]
    pub adopted: Option<crate::app::config::adopted::Adoption>,
    /// Commits queued by `[watch] backfill`.
    #[serde(skip)]
    pub backfill_queued: usize,
    /// Whether the user's config gives a setup step the network.
    #[serde(skip)]
    pub setup_network: bool,
}

/// `git sandbox new`: create, commit, install hooks, register. On any failure nothing remains.
/// What queues a new repository's history per `[watch] backfill` (the intake's
/// `notify::adopt_history`, passed in by the caller): a repository's registration knows
/// nothing of how commits are queued. Returns how many were queued.
pub type Backfill<'a> = &'a dyn Fn(&Context, &gs_git::Repository, &str) -> Result<usize>;

pub fn create(
    ctx: &Context,
    name: Option<&str>,
    path: Option<&Path>,
    backfill: Backfill<'_>,
) -> Result<Created> {
    let now = util::time::now_millis();
    let name = match name {
        Some(n) => n.to_string(),
        None => format!("ai-sandbox-experiments-{}", util::time::compact(now)),
    };
    check_name(&name)?;
    let target = match path {
        Some(p) => absolute(p)?,
        None => ctx.paths.repos().join(&name),
    };
    if target.exists() || target.is_symlink() {
        return Err(
            AppError::usage(format!("{} already exists", target.display())).hint(
                "choose another name or --path, or adopt an existing repository with `git sandbox init`",
            ),
        );
    }
    let parent = target
        .parent()
        .ok_or_else(|| {
            AppError::usage(format!("{} has no parent directory", target.display()))
                .hint("pass a --path inside a directory")
        })?
        .to_path_buf();
    // Remember the first directory we create so a failure can take everything back.
    let first_created = first_missing_ancestor(&parent);
    let result = (|| {
        std::fs::create_dir_all(&parent).map_err(|e| {
            AppError::usage(format!("cannot create {}: {e}", parent.display()))
                .hint("choose a writable --path or set GIT_SANDBOX_HOME")
        })?;
        let staging = tempfile::Builder::new()
            .prefix(&format!(".{name}.creating-"))
            .tempdir_in(&parent)
            .map_err(|e| {
                AppError::usage(format!("cannot write in {}: {e}", parent.display()))
                    .hint("choose a writable --path or set GIT_SANDBOX_HOME")
            })?;
        let repo_id = format!("repo_{}", util::random_hex(8));
        populate(staging.path(), &name, &repo_id)?;
        // Move the finished repository into place in one step.
        let staged = staging.keep();
        std::fs::rename(&staged, &target).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            AppError::Io {
                context: format!("cannot move the new repository to {}", target.display()),
                source: e,
            }
        })?;
        finish(ctx, &target, &name, &repo_id, now, backfill).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&target);
        })
    })();
    if result.is_err() {
        if let Some(dir) = first_created {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    result
}

fn populate(dir: &Path, name: &str, repo_id: &str) -> Result<()> {
    cli::git(dir, &["init", "-q", "-b", "main"])?;
    for (rel, body) in TEMPLATES {
        let path = dir.join(rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(io_err(format!("cannot create {}", p.display())))?;
        }
        std::fs::write(&path, body.replace("{{name}}", name))
            .map_err(io_err(format!("cannot write {}", path.display())))?;
    }
    configure(dir, repo_id)?;
    cli::git(dir, &["add", "-A"])?;
    let env = cli::fallback_identity(dir);
    // No hook may run here: ours is not installed yet and a global core.hooksPath is not ours to run.
    cli::git_with_env(
        dir,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            &format!("Create experiment repository {name}"),
        ],
        &env,
    )?;
    Ok(())
}

/// Settings every adopted repository gets: its id, and the summary notes shown by plain
/// `git log`. Our notes are never carried along by amend and rebase (`notes.rewriteRef`): a
/// rewritten commit is a new commit whose result is found by its tree, never copied from the
/// old one, so `notes.rewriteRef` entries naming our refs (set by older versions) are removed.
fn configure(dir: &Path, repo_id: &str) -> Result<()> {
    cli::set_config(dir, ID_KEY, repo_id)?;
    let display = cli::get_all_config(dir, "notes.displayRef");
    if !display.iter().any(|v| v == git::SUMMARY_NOTES_REF) {
        cli::git(
            dir,
            &[
                "config",
                "--local",
                "--add",
                "notes.displayRef",
                git::SUMMARY_NOTES_REF,
            ],
        )?;
    }
    // A plain `git fetch` brings the remote's results beside ours (`git sandbox fetch` merges).
    for remote in git::remote::remotes(dir)? {
        git::remote::ensure_notes_refspec(dir, &remote)?;
    }
    for (key, ours) in [
        ("notes.displayRef", git::NOTES_REF),
        ("notes.rewriteRef", git::NOTES_REF),
        ("notes.rewriteRef", git::SUMMARY_NOTES_REF),
    ] {
        if cli::get_all_config(dir, key).iter().any(|v| v == ours) {
            cli::git(
                dir,
                &[
                    "config",
                    "--local",
                    "--unset-all",
                    key,
                    &format!("^{}$", gs_util::regex_escape(ours)),
                ],
            )?;
        }
    }
    Ok(())
}

fn finish(
    ctx: &Context,
    root: &Path,
    name: &str,
    repo_id: &str,
    now: i64,
    backfill: Backfill<'_>,
) -> Result<Created> {
    let root = std::fs::canonicalize(root)
        .map_err(io_err(format!("cannot resolve {}", root.display())))?;
    let hooks = install_hooks(&root)?;
    // The hooks write a commit's news there, without starting a process.
    let _ = crate::app::home::make_spool(&ctx.paths.home);
    let row = local_row(repo_id, Some(name), &root, now);
    register(ctx, &row)?;
    let repo = git::open(&root)?;
    let queued = backfill(ctx, &repo, repo_id)?;
    ctx.index.add_event(
        EventKind::RepositoryCreated,
        Some(repo_id),
        None,
        None,
        &serde_json::json!({"name": name, "path": row.path}),
    )?;
    Ok(Created {
        repo: row,
        hooks,
        adopted: None,
        backfill_queued: queued,
        setup_network: false,
    })
}

/// Record a repository in the registry (which survives a lost index) and the index.
fn register(ctx: &Context, row: &RepoRow) -> Result<()> {
    gs_store::registry::add(&ctx.paths.home, &row.repository_id, Path::new(&row.path)).map_err(
        io_err(format!(
            "cannot write the registry in {}",
            ctx.paths.home.display()
        )),
    )?;
    ctx.index.upsert_repository(row)?;
    Ok(())
}

fn install_hooks(root: &Path) -> Result<Vec<hooks::HookInstall>> {
    let repo = git::open(root)?;
    let dir = hooks::hooks_dir(root, git::objects::common_dir(&repo));
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("git-sandbox"));
    // A hooks directory the project manages (husky's `.husky/_`, a committed `githooks/`):
    // nothing is written there, the user is told what line to add.
    if project_manages(&repo, &dir) {
        return Ok(hooks::managed_elsewhere(&dir, root));
    }
    Ok(hooks::install(&dir, &exe)?)
}

/// Whether the hooks directory `dir` belongs to the project: it holds files git tracks, or it is
/// husky's before v9 (`.husky`, whose hooks are the project's). Husky 9's `.husky/_` holds only
/// generated, untracked hooks that run the project's `.husky/<name>`: ours go there, chaining
/// to them.
pub(crate) fn project_manages(repo: &gs_git::Repository, dir: &Path) -> bool {
    let Some(workdir) = git::objects::workdir(repo) else {
        return false;
    };
    let workdir = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Ok(rel) = dir.strip_prefix(&workdir) else {
        return false;
    };
    let husky9 = rel.ends_with(".husky/_") && dir.join("h").is_file();
    if !husky9 && rel.components().any(|c| c.as_os_str() == ".husky") {
        return true;
    }
    let rel = rel.to_string_lossy();
    cli::git(&workdir, &["ls-files", "-z", "--", &rel]).is_ok_and(|out| !out.is_empty())
}

/// `git sandbox init`: adopt the repository around `cwd`. Running it again changes nothing.
/// It never modifies a tracked file.
pub fn adopt(ctx: &Context, cwd: &Path, backfill: Backfill<'_>) -> Result<(Created, bool)> {
    let repo = git::discover(cwd)?;
    let root = git::repo_root(&repo);
    let git_dir = git::objects::common_dir(&repo).to_path_buf();
    hooks::check_dir(&hooks::hooks_dir(&root, &git_dir))?;
    // A broken config (the work tree's, or adopted settings from before) is refused before
    // anything is installed.
    ctx.checkout_layers(&repo)?;
    let adopted = crate::app::config::adopted::adopt(&repo)?;
    let setup_network = ctx.layers.resolve().limits.setup_network;
    let existing = cli::get_config(&root, ID_KEY);
    // On an index many machines share, a clone of a repository another machine registered
    // joins it (the same id, so one queue and one set of results).
    let joined = match (&existing, ctx.index.is_shared(), shared_remote(&root)) {
        (None, true, Some(url)) => ctx
            .index
            .repository_by_remote(&url)?
            .map(|r| r.repository_id),
        _ => None,
    };
    let repo_id = existing
        .clone()
        .or(joined)
        .unwrap_or_else(|| format!("repo_{}", util::random_hex(8)));
    configure(&root, &repo_id)?;
    let hooks = install_hooks(&root)?;
    // The hooks write a commit's news there, without starting a process.
    let _ = crate::app::home::make_spool(&ctx.paths.home);
    // Hooks installed again: a later hook manager's rewrite is news again.
    let _ = std::fs::remove_file(git_dir.join(HOOKS_PATH_NOTICED));
    let row = match ctx.index.repository_by_id(&repo_id)? {
        Some(row) if row.path == root.display().to_string() => {
            register(ctx, &row)?;
            row
        }
        _ => {
            let row = local_row(&repo_id, None, &root, util::time::now_millis());
            register(ctx, &row)?;
            ctx.index.add_event(
                EventKind::RepositoryAdopted,
                Some(&repo_id),
                None,
                None,
                &serde_json::json!({"path": row.path}),
            )?;
            row
        }
    };
    let backfill_queued = if git::marks::read(&repo).is_none() {
        backfill(ctx, &repo, &repo_id)?
    } else {
        0
    };
    let changed = adopted.is_some()
        || existing.is_none()
        || backfill_queued > 0
        || hooks.iter().any(|h| h.action != "unchanged");
    Ok((
        Created {
            repo: row,
            hooks,
            adopted,
            backfill_queued,
            setup_network,
        },
        changed,
    ))
}

/// The registered row for the repository `repo`. When the index lost it (a deleted or rebuilt
/// index.db), it is registered again from the repository's own git config and its results,
/// experiments and evaluations are imported from its notes and refs: the index is a cache.
pub fn registration(ctx: &Context, repo: &gs_git::Repository) -> Result<Option<RepoRow>> {
    let Some(id) = git::objects::config_string(repo, ID_KEY) else {
        return Ok(None);
    };
    if let Some(row) = ctx.index.repository_by_id(&id)? {
        return Ok(Some(row));
    }
    let Some(row) = known_row(ctx, repo)? else {
        return Ok(None);
    };
    crate::app::repo::reindex::import(Repo::new(ctx, repo, &row))?;
    Ok(Some(row))
}

/// The row of a repository whose git config names its id, registered (in the registry and the
/// index) if it was not; nothing is imported.
pub(crate) fn known_row(ctx: &Context, repo: &gs_git::Repository) -> Result<Option<RepoRow>> {
    let Some(id) = git::objects::config_string(repo, ID_KEY) else {
        return Ok(None);
    };
    let root = git::repo_root(repo);
    let row = match ctx.index.repository_by_id(&id)? {
        Some(row) if row.path == root.display().to_string() => row,
        other => {
            let mut row = local_row(&id, None, &root, util::time::now_millis());
            if let Some(old) = other {
                row.name = old.name;
                row.created_at = old.created_at;
            }
            row
        }
    };
    register(ctx, &row)?;
    Ok(Some(row))
}

/// The file in the git directory that remembers which `core.hooksPath` was already reported.
const HOOKS_PATH_NOTICED: &str = "sandbox-hookspath-noticed";

/// When git no longer runs our hooks: `core.hooksPath` names a directory without them while
/// ours sit in `.git/hooks` (a hook manager such as husky set it after `init`). The message,
/// the first time for that value of `core.hooksPath`; `None` after that (a file in the git
/// directory remembers it) and whenever our hooks run.
pub fn hooks_bypassed(repo: &gs_git::Repository) -> Option<String> {
    let root = git::repo_root(repo);
    // Read in-process (not `git config`): this runs before every `log`, `status` and `run`.
    let value =
        git::objects::config_string(repo, "core.hooksPath").filter(|v| !v.trim().is_empty())?;
    let common = git::objects::common_dir(repo);
    let default = common.join("hooks");
    let dir = hooks::hooks_dir(&root, common);
    // Ours were installed there before (its `<name>.pre-sandbox` files stay when a hook
    // manager rewrites the hooks), or in `.git/hooks`.
    let were_there = hooks::any_chained(&dir) || hooks::any_ours(&default);
    if dir == default || hooks::any_ours(&dir) || !were_there {
        return None;
    }
    let marker = common.join(HOOKS_PATH_NOTICED);
    if std::fs::read_to_string(&marker).is_ok_and(|v| v == value) {
        return None;
    }
    let _ = util::write_atomic(&marker, value.as_bytes());
    Some(format!(
        "core.hooksPath is {value}, so git no longer runs git-sandbox's hooks in {}: new commits are not queued. Run `git sandbox init` again, or add `git-sandbox notify --hook post-commit >/dev/null 2>&1 || true` to the project's post-commit hook (husky: .husky/post-commit)",
        default.display()
    ))
}

/// The registered repository around `cwd`, or a clear error saying how to register it.
pub fn require_registered(ctx: &Context, cwd: &Path) -> Result<(gs_git::Repository, RepoRow)> {
    let repo = git::discover(cwd)?;
    match registration(ctx, &repo)? {
        Some(row) => Ok((repo, row)),
        None => Err(AppError::not_found(format!(
            "{} is not an experiment repository yet",
            git::repo_root(&repo).display()
        ))
        .hint("run `git sandbox init` in it first")),
    }
}

/// The index row of a local repository at `root` (named after its directory unless `name`).
fn local_row(id: &str, name: Option<&str>, root: &Path, now: i64) -> RepoRow {
    let name = name.map(str::to_string).unwrap_or_else(|| {
        root.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "repository".into())
    });
    RepoRow {
        repository_id: id.to_string(),
        name,
        path: root.display().to_string(),
        url: file_url(root),
        repository_type: "local".into(),
        created_at: util::time::rfc3339(now),
        last_activity: Some(util::time::rfc3339(now)),
        remote_url: shared_remote(root),
    }
}

/// The URL other machines clone the repository at `root` from: its default remote's (the
/// current branch's, else `origin`), without credentials; a relative path is made absolute.
fn shared_remote(root: &Path) -> Option<String> {
    let name = crate::app::locate::remote_name(root, None).ok()?;
    remote_url_of(root, &name)
}

fn file_url(path: &Path) -> String {
    format!(
        "file://{}",
        gs_util::percent_encode(&path.display().to_string(), b"/")
    )
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.as_os_str().is_empty() {
        return Err(AppError::usage("--path is empty").hint("give a directory to create"));
    }
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(io_err("cannot read the current directory"))?
            .join(p)
    })
}

fn first_missing_ancestor(dir: &Path) -> Option<PathBuf> {
    let mut missing = None;
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.exists() {
            break;
        }
        missing = Some(d.to_path_buf());
        cur = d.parent();
    }
    missing
}
