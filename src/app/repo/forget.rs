//! Unregistering a repository: `forget` drops what this machine keeps about it (index rows,
//! registry entry, run logs); `init --remove` also takes our hooks, git config and watermarks
//! out of the repository. Neither deletes a note: results stay in git.

use crate::app::repo::gc::{self, Activity, Freed};
use crate::app::repo::repos::{self, ID_KEY};
use crate::app::{io_err, AppError, Context, Result};
use gs_git as git;
use gs_git::{cli, hooks};
use gs_model::EventKind;
use gs_store::{registry, RepoRows};
use gs_util as util;
use serde::Serialize;
use std::path::{Component, Path, PathBuf};

/// A repository this machine knows, from the index, the registry or both.
#[derive(Debug, Clone)]
pub struct Known {
    pub repository_id: String,
    pub name: String,
    pub path: PathBuf,
}

/// What unregistering a repository removed (or, in a dry run, would remove).
#[derive(Debug, Clone, Serialize)]
pub struct Forgotten {
    pub repository_id: String,
    pub name: String,
    pub path: String,
    /// Index rows: runs, experiments, evaluations, jobs, events.
    #[serde(flatten)]
    pub rows: RepoRows,
    /// Its run logs under `$GIT_SANDBOX_HOME/logs/<id>/`.
    pub logs: Freed,
    /// Whether it had a registry entry.
    pub registry: bool,
}

/// Every repository the index or the registry holds, the index's name first.
pub fn known(ctx: &Context) -> Result<Vec<Known>> {
    let mut out: Vec<Known> = ctx
        .index
        .repositories()?
        .into_iter()
        .map(|r| Known {
            repository_id: r.repository_id,
            name: r.name,
            path: PathBuf::from(r.path),
        })
        .collect();
    for e in registry::list(&ctx.paths.home) {
        if !out.iter().any(|k| k.repository_id == e.id) {
            out.push(Known {
                name: e
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| e.id.clone()),
                repository_id: e.id,
                path: e.path,
            });
        }
    }
    Ok(out)
}

/// The known repository `target` names (an id, a path or a name, in that order), or the one
/// around `cwd` when there is no target.
pub fn resolve(ctx: &Context, target: Option<&str>, cwd: &Path) -> Result<Known> {
    let known = known(ctx)?;
    let Some(t) = target else {
        let repo = git::discover(cwd).map_err(|_| {
            AppError::usage(format!("{} is not inside a git repository", cwd.display()))
                .hint("run this in the repository to forget, or name it (see `git sandbox list`)")
        })?;
        return around(&known, &repo).ok_or_else(|| {
            AppError::usage(format!(
                "{} is not a registered repository, so there is nothing to forget",
                git::repo_root(&repo).display()
            ))
            .hint("see `git sandbox list`")
        });
    };
    if t.is_empty() {
        return Err(AppError::usage("the repository to forget is empty")
            .hint("name it by id, name or path (see `git sandbox list`)"));
    }
    if let Some(k) = known.iter().find(|k| k.repository_id == t) {
        return Ok(k.clone());
    }
    let path = normalize(&cwd.join(t));
    if let Some(k) = known.iter().find(|k| normalize(&k.path) == path) {
        return Ok(k.clone());
    }
    if path.exists() {
        if let Some(k) = git::discover(&path).ok().and_then(|r| around(&known, &r)) {
            return Ok(k);
        }
    }
    let named: Vec<&Known> = known.iter().filter(|k| k.name == t).collect();
    match named.as_slice() {
        [k] => Ok((*k).clone()),
        [] => Err(AppError::usage(format!(
            "no registered repository has the id, name or path {t:?}"
        ))
        .hint("see `git sandbox list` (`--json` shows ids)")),
        many => Err(AppError::usage(format!(
            "{} registered repositories are called {t:?} ({})",
            many.len(),
            many.iter()
                .map(|k| format!("{} at {}", k.repository_id, k.path.display()))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint("name one by its id or path")),
    }
}

/// The known repository `repo` is: by the id in its git config, else by its path.
fn around(known: &[Known], repo: &gs_git::Repository) -> Option<Known> {
    let id = gs_git::objects::config_string(repo, ID_KEY);
    let root = git::repo_root(repo);
    known
        .iter()
        .find(|k| Some(&k.repository_id) == id.as_ref())
        .or_else(|| known.iter().find(|k| normalize(&k.path) == root))
        .cloned()
}

/// `path` made absolute and free of `.`/`..`, with the part that exists resolved as the file
/// system sees it (symbolic links), so a repository deleted since can still be named.
fn normalize(path: &Path) -> PathBuf {
    let mut lexical = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            c => lexical.push(c),
        }
    }
    let mut base = lexical.clone();
    let mut rest = Vec::new();
    while !base.exists() {
        match (base.file_name().map(|n| n.to_os_string()), base.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                base = parent.to_path_buf();
            }
            _ => return lexical,
        }
    }
    let mut out = std::fs::canonicalize(&base).unwrap_or(base);
    out.extend(rest.iter().rev());
    out
}

/// Refuse to unregister a repository while a run of it is going on: the run would write into
/// rows and a log that are gone.
fn refuse_if_busy(ctx: &Context, k: &Known) -> Result<()> {
    if Activity::now().repository_busy(ctx, &k.repository_id)? {
        return Err(AppError::refused(format!(
            "{} has a run in progress; nothing was changed",
            k.name
        ))
        .hint("wait for it to finish (or `git sandbox daemon stop`), then try again"));
    }
    Ok(())
}

/// Before `init` adopts the repository around `cwd`: unregister what the index holds for its
/// path under another id. The repository registered there was removed and this one (which has
/// no id of its own yet) took its place — a fresh clone at the same path. A repository that was
/// only moved registers itself again from its notes the next time a command runs in it.
pub fn replaced(ctx: &Context, cwd: &Path) -> Result<()> {
    let repo = git::discover(cwd)?;
    if ctx.index.is_shared() || git::objects::config_string(&repo, ID_KEY).is_some() {
        return Ok(());
    }
    let here = git::repo_root(&repo).display().to_string();
    for stale in ctx.index.repositories()? {
        if stale.path == here {
            let known = Known {
                repository_id: stale.repository_id,
                name: stale.name,
                path: PathBuf::from(stale.path),
            };
            unregister(ctx, &known, false)?;
        }
    }
    Ok(())
}

/// `git sandbox forget`: unregister the repository `target` names (see [`resolve`]).
pub fn forget(ctx: &Context, target: Option<&str>, cwd: &Path) -> Result<Forgotten> {
    let k = resolve(ctx, target, cwd)?;
    refuse_if_busy(ctx, &k)?;
    unregister(ctx, &k, false)
}

/// Drop what this machine keeps about `k`: its index rows, registry entry and run logs.
/// With `dry_run`, only count them.
pub(crate) fn unregister(ctx: &Context, k: &Known, dry_run: bool) -> Result<Forgotten> {
    let id = &k.repository_id;
    let rows = if dry_run {
        ctx.index.repository_rows(id)?
    } else {
        ctx.index.delete_repository(id)?
    };
    let mut logs = Freed::default();
    // The id comes from a git config anyone can edit: only a plain name is a directory of ours.
    if util::name_problem(id).is_none() {
        for log in gc::log_files(&ctx.paths.logs(), Some(id)) {
            logs.count += 1;
            logs.bytes += log.bytes;
        }
        let dir = ctx.paths.logs().join(id);
        if !dry_run && dir.is_dir() {
            std::fs::remove_dir_all(&dir)
                .map_err(io_err(format!("cannot remove {}", dir.display())))?;
        }
        // Its test maps and the per-test coverage its runs kept go with it.
        let home = &ctx.paths.home;
        let kept = [
            crate::app::run::testmap::dir(home, id),
            crate::app::run::testcov::dir(home, id),
        ];
        for dir in kept.iter().filter(|d| !dry_run && d.is_dir()) {
            std::fs::remove_dir_all(dir)
                .map_err(io_err(format!("cannot remove {}", dir.display())))?;
        }
    }
    let registry = if dry_run {
        registry::list(&ctx.paths.home).iter().any(|e| &e.id == id)
    } else {
        registry::remove(&ctx.paths.home, id).map_err(io_err(format!(
            "cannot write the registry in {}",
            ctx.paths.home.display()
        )))?
    };
    if !dry_run {
        // Not filed under the repository: its events are gone with it.
        ctx.index.add_event(
            EventKind::RepositoryForgotten,
            None,
            None,
            None,
            &serde_json::json!({"repository_id": id, "name": k.name, "path": k.path}),
        )?;
    }
    Ok(Forgotten {
        repository_id: id.clone(),
        name: k.name.clone(),
        path: k.path.display().to_string(),
        rows,
        logs,
        registry,
    })
}

/// What `init --remove` did.
#[derive(Debug, Serialize)]
pub struct Removed {
    pub path: String,
    pub hooks: Vec<hooks::HookRemoval>,
    /// What to do by hand: a line added to the project's own hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// git config entries unset (`key=value`).
    pub config: Vec<String>,
    /// Whether the branch watermarks were removed.
    pub watermarks: bool,
    /// The registration dropped, when it was registered.
    pub forgotten: Option<Forgotten>,
    pub changed: bool,
}

/// `git sandbox init --remove`: undo `init` in the repository around `cwd` (hooks, git config,
/// watermarks) and unregister it. Notes, `.sandbox.toml` and every tracked file are left.
/// Running it again changes nothing.
pub fn remove(ctx: &Context, cwd: &Path) -> Result<Removed> {
    let repo = git::discover(cwd)?;
    let root = git::repo_root(&repo);
    let common = gs_git::objects::common_dir(&repo).to_path_buf();
    let registered = around(&known(ctx)?, &repo);
    if let Some(k) = &registered {
        refuse_if_busy(ctx, k)?;
    }

    // Ours may be in the hooks directory git uses now, or in `.git/hooks` if that changed since.
    let dir = hooks::hooks_dir(&root, &common);
    let mut removed = if dir.is_dir() {
        hooks::uninstall(&dir)?
    } else {
        Vec::new()
    };
    let default = common.join("hooks");
    if default.is_dir() && !same_dir(&default, &dir) {
        removed.extend(
            hooks::uninstall(&default)?
                .into_iter()
                .filter(|h| h.action != "absent"),
        );
    }
    let hint = repos::project_manages(&repo, &dir).then(|| {
        format!(
            "core.hooksPath ({}) belongs to the project, so init wrote nothing there; remove any `git-sandbox notify` line you added to those hooks",
            dir.strip_prefix(&root).unwrap_or(&dir).display()
        )
    });

    let mut config = Vec::new();
    if let Some(id) = local_values(&root, ID_KEY).into_iter().next() {
        cli::git(&root, &["config", "--local", "--unset-all", ID_KEY])?;
        config.push(format!("{ID_KEY}={id}"));
        if local_values(&root, "sandbox").is_empty() {
            let _ = cli::git(&root, &["config", "--local", "--remove-section", "sandbox"]);
        }
    }
    let display = "notes.displayRef";
    if local_values(&root, display)
        .iter()
        .any(|v| v == git::SUMMARY_NOTES_REF)
    {
        let pattern = format!("^{}$", gs_util::regex_escape(git::SUMMARY_NOTES_REF));
        cli::git(
            &root,
            &["config", "--local", "--unset-all", display, &pattern],
        )?;
        config.push(format!("{display}={}", git::SUMMARY_NOTES_REF));
    }
    for (remote, spec) in git::remote::remove_notes_refspecs(&root) {
        config.push(format!("remote.{remote}.fetch={spec}"));
    }
    let watermarks = git::marks::remove(&repo)?;
    let forgotten = match &registered {
        Some(k) => Some(unregister(ctx, k, false)?),
        None => None,
    };
    let changed = removed
        .iter()
        .any(|h| matches!(h.action, "removed" | "restored"))
        || !config.is_empty()
        || watermarks
        || forgotten.is_some();
    Ok(Removed {
        path: root.display().to_string(),
        hooks: removed,
        hint,
        config,
        watermarks,
        forgotten,
        changed,
    })
}

/// The values of `key` in the repository's own config (not the user's global one); a key
/// without a dot (`sandbox`) lists every entry of that section.
fn local_values(root: &Path, key: &str) -> Vec<String> {
    let out = if key.contains('.') {
        cli::git(root, &["config", "--local", "--get-all", key])
    } else {
        cli::git(
            root,
            &["config", "--local", "--get-regexp", &format!("^{key}\\.")],
        )
    };
    out.map(|s| s.lines().map(|l| l.trim().to_string()).collect())
        .unwrap_or_default()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
