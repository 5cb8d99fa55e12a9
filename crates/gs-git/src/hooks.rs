//! Installing the hooks that call `git sandbox notify`, without ever replacing a hook that is
//! already there (pre-commit, lefthook, husky): the old hook is kept and chained to.

use super::{cli, GitError, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The hooks we install: `reference-transaction` alone would queue every commit, the post-*
/// hooks cover git < 2.28; `pre-push` is the gate (`[hooks] pre_push`, off unless turned on).
pub const HOOK_NAMES: &[&str] = &[
    "reference-transaction",
    "post-commit",
    "post-merge",
    "post-rewrite",
    "pre-push",
];

const SCRIPT: &str = include_str!("../hooks/sandbox-hook.sh");
const MARKER: &str = "# git-sandbox hook:";
const CHAINED_SUFFIX: &str = ".pre-sandbox";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HookInstall {
    pub name: String,
    pub path: PathBuf,
    /// installed | updated | unchanged | skipped
    pub action: &'static str,
    /// Where the hook that was there before now lives (it still runs, first).
    pub chained: Option<PathBuf>,
    /// For a skipped hook: what to add by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The hooks directory git uses for the repository at `root` (honours `core.hooksPath`).
pub fn hooks_dir(root: &Path, git_common_dir: &Path) -> PathBuf {
    match cli::get_config(root, "core.hooksPath") {
        Some(p) => {
            let p = if let Some(rest) = p.strip_prefix("~/") {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(rest)
            } else {
                PathBuf::from(p)
            };
            if p.is_absolute() {
                p
            } else {
                root.join(p)
            }
        }
        None => git_common_dir.join("hooks"),
    }
}

/// The script as installed: `fallback` is this binary's path, used when `git-sandbox` is not on
/// PATH. With a git that has the reference-transaction hook (2.28+), the post-* hooks only chain
/// to the hooks they replaced and leave the notification to reference-transaction.
pub fn script(fallback: &Path, notify_from_post: bool) -> String {
    SCRIPT
        .replace(
            "@GIT_SANDBOX_FALLBACK@",
            &fallback.display().to_string().replace('"', ""),
        )
        .replace(
            "@NOTIFY_FROM_POST@",
            if notify_from_post { "1" } else { "0" },
        )
}

/// Whether the git on PATH runs the reference-transaction hook (added in git 2.28).
pub fn git_has_reference_transaction() -> bool {
    let Ok(out) = std::process::Command::new("git").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(2).unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 28)
}

/// What [`install`] would do, without doing it (so bad input can be refused before anything changes).
pub fn check_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(GitError::Io {
            context: format!("the hooks path {} is not a directory", dir.display()),
            source: std::io::Error::other("fix core.hooksPath"),
        });
    }
    Ok(())
}

pub fn install(dir: &Path, fallback: &Path) -> Result<Vec<HookInstall>> {
    let io = |context: String| move |source| GitError::Io { context, source };
    check_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let ours = script(fallback, !git_has_reference_transaction());
    let mut out = Vec::new();
    for name in HOOK_NAMES {
        let path = dir.join(name);
        let mut chained = None;
        let action = match std::fs::read(&path) {
            Ok(existing) if existing == ours.as_bytes() => "unchanged",
            Ok(existing) if is_ours(&existing) => "updated",
            Ok(_) => {
                // Someone else's hook: keep it and run it first.
                let keep = dir.join(format!("{name}{CHAINED_SUFFIX}"));
                if keep.exists() {
                    let backup = dir.join(format!(
                        "{name}{CHAINED_SUFFIX}.{}",
                        gs_util::time::compact(gs_util::time::now_millis())
                    ));
                    std::fs::rename(&keep, &backup)
                        .map_err(io(format!("cannot move {}", keep.display())))?;
                }
                std::fs::rename(&path, &keep)
                    .map_err(io(format!("cannot move {}", path.display())))?;
                chained = Some(keep);
                "installed"
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "installed",
            Err(e) => return Err(io(format!("cannot read {}", path.display()))(e)),
        };
        if action != "unchanged" {
            gs_util::write_atomic(&path, ours.as_bytes())
                .map_err(io(format!("cannot write {}", path.display())))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("cannot make {} executable", path.display())))?;
        }
        let keep = dir.join(format!("{name}{CHAINED_SUFFIX}"));
        if chained.is_none() && keep.exists() {
            chained = Some(keep);
        }
        out.push(HookInstall {
            name: name.to_string(),
            path,
            action,
            chained,
            hint: None,
        });
    }
    Ok(out)
}

/// The hooks we would install in `dir`, a hooks directory that belongs to the project (inside
/// its work tree, like husky's `.husky/_`): none is written; each says what line to add to the
/// project's own hook instead. (`reference-transaction` is left out: hook managers do not run
/// it; the post-* hooks and the daemon's ref watcher cover the same commits.)
pub fn managed_elsewhere(dir: &Path, root: &Path) -> Vec<HookInstall> {
    let shown = dir.strip_prefix(root).unwrap_or(dir);
    HOOK_NAMES
        .iter()
        .filter(|n| **n != "reference-transaction")
        .map(|name| HookInstall {
            name: name.to_string(),
            path: dir.join(name),
            action: "skipped",
            chained: None,
            hint: Some(format!(
                "core.hooksPath ({}) is inside the work tree and belongs to the project, so git-sandbox wrote nothing there; add this line to your {name} hook (e.g. .husky/{name}): {}",
                shown.display(),
                if *name == "pre-push" {
                    "git-sandbox pre-push \"$@\" || exit 1".to_string()
                } else {
                    format!("git-sandbox notify --hook {name} >/dev/null 2>&1 || true")
                }
            )),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HookRemoval {
    pub name: String,
    pub path: PathBuf,
    /// removed (ours, nothing chained) | restored (ours, the chained hook moved back) |
    /// kept (not ours: left as it is) | absent
    pub action: &'static str,
    /// The chained hook that was moved back to `path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<PathBuf>,
}

/// Undo [`install`] in `dir`: each hook of ours is removed and the hook it chained to
/// (`<name>.pre-sandbox`) moved back in its place, as it was byte for byte; a hook that is not
/// ours is left untouched. Running it again finds nothing to do.
pub fn uninstall(dir: &Path) -> Result<Vec<HookRemoval>> {
    let io = |context: String| move |source| GitError::Io { context, source };
    let mut out = Vec::new();
    for name in HOOK_NAMES {
        let path = dir.join(name);
        let keep = dir.join(format!("{name}{CHAINED_SUFFIX}"));
        let ours = match std::fs::read(&path) {
            Ok(body) => Some(is_ours(&body)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(format!("cannot read {}", path.display()))(e)),
        };
        // A chained hook with no hook of ours in front of it (ours was deleted by hand) goes
        // back too: nothing would run it otherwise.
        let restore = matches!(ours, Some(true) | None) && keep.is_file();
        let action = if restore {
            // One rename replaces ours with the original: git never sees the hook missing.
            std::fs::rename(&keep, &path)
                .map_err(io(format!("cannot move {} back", keep.display())))?;
            "restored"
        } else {
            match ours {
                Some(true) => {
                    std::fs::remove_file(&path)
                        .map_err(io(format!("cannot remove {}", path.display())))?;
                    "removed"
                }
                Some(false) => "kept",
                None => "absent",
            }
        };
        out.push(HookRemoval {
            name: name.to_string(),
            path,
            action,
            restored_from: restore.then_some(keep),
        });
    }
    Ok(out)
}

/// Whether `dir` holds a hook we chained to (`<name>.pre-sandbox`).
pub fn any_chained(dir: &Path) -> bool {
    HOOK_NAMES
        .iter()
        .any(|n| dir.join(format!("{n}{CHAINED_SUFFIX}")).is_file())
}

/// Whether `dir` holds any hook of ours.
pub fn any_ours(dir: &Path) -> bool {
    HOOK_NAMES
        .iter()
        .any(|n| std::fs::read(dir.join(n)).is_ok_and(|b| is_ours(&b)))
}

fn is_ours(body: &[u8]) -> bool {
    String::from_utf8_lossy(body).contains(MARKER)
}

#[cfg(test)]
mod tests {
    /// The hook's source is the repository's top-level `hooks/` (the crate reaches it through a
    /// link, which `cargo package` follows: `.ci/package-check` builds from the package).
    #[test]
    fn the_embedded_hook_is_the_top_level_one() {
        let top = concat!(env!("CARGO_MANIFEST_DIR"), "/../../hooks/sandbox-hook.sh");
        if let Ok(text) = std::fs::read_to_string(top) {
            assert_eq!(super::SCRIPT, text);
        }
    }

    use super::*;

    #[test]
    fn uninstall_restores_the_chained_hook_and_keeps_others() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let theirs = b"#!/bin/sh\necho theirs \xff\n";
        std::fs::write(dir.join("post-commit"), theirs).unwrap();
        std::fs::set_permissions(
            dir.join("post-commit"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        install(dir, Path::new("/usr/bin/git-sandbox")).unwrap();
        // Someone replaced our post-merge with their own after install.
        std::fs::write(dir.join("post-merge"), "#!/bin/sh\nexit 0\n").unwrap();
        let removed = uninstall(dir).unwrap();
        let by_name = |n: &str| removed.iter().find(|r| r.name == n).unwrap().action;
        assert_eq!(by_name("post-commit"), "restored");
        assert_eq!(by_name("reference-transaction"), "removed");
        assert_eq!(by_name("post-rewrite"), "removed");
        assert_eq!(by_name("post-merge"), "kept");
        assert_eq!(std::fs::read(dir.join("post-commit")).unwrap(), theirs);
        let mode = std::fs::metadata(dir.join("post-commit"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o751);
        assert!(!dir.join("post-commit.pre-sandbox").exists());
        assert!(!dir.join("reference-transaction").exists());
        assert!(dir.join("post-merge").exists());
        let again = uninstall(dir).unwrap();
        assert!(
            again.iter().all(|r| matches!(r.action, "absent" | "kept")),
            "{again:?}"
        );
    }
}
