//! Which of the caller's toolchains a run sees: the directories its environment names (PATH,
//! VIRTUAL_ENV, PYENV_ROOT, …) that lie under a hidden home or a private temp dir are bound back
//! read-only when nobody but the caller could have put them there, with the packages PATH's
//! links lead into; and, for a program a run did not find, why it was not there.

use super::Plan;
use std::path::{Path, PathBuf};

/// Secrets that live under a home directory. The whole home is hidden; these names are never
/// re-exposed even when a toolchain path would cover them.
const SECRET_NAMES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".netrc",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".git-credentials",
    "gcloud",
    "gh",
    "git-sandbox",
];

/// Variables whose values name toolchain directories that must stay readable.
const TOOLCHAIN_VARS: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "GOROOT",
    "GOPATH",
    "JAVA_HOME",
    "NVM_DIR",
    "RBENV_ROOT",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "VOLTA_HOME",
];

/// How long [`Plan::with_paths`] reuses what it found for the same candidates and environment:
/// the runs of a range ask the same of the file system each time (a `canonicalize` of every PATH
/// entry and every hidden dir, 60 `readlink`s and more per run).
const PATHS_FOR: std::time::Duration = std::time::Duration::from_secs(2);

type PathsMemo = Option<(std::time::Instant, Vec<String>, Vec<PathBuf>, Vec<PathBuf>)>;

static PATHS_MEMO: std::sync::Mutex<PathsMemo> = std::sync::Mutex::new(None);

impl Plan {
    /// Fill in what to hide (`hide`: candidates, see [`hidden_dirs`]) and which toolchain
    /// directories under them stay readable (from the run's env: PATH, PYENV_ROOT, …).
    pub fn with_paths(mut self, hide: Vec<PathBuf>) -> Plan {
        // What this depends on: the candidates and the env's toolchain variables and PATH.
        let key: Vec<String> = hide
            .iter()
            .map(|p| p.display().to_string())
            .chain(TOOLCHAIN_VARS.iter().chain(&["PATH"]).map(|k| {
                match self.env.iter().find(|(n, _)| n == k) {
                    Some((_, v)) => format!("{k}={v}"),
                    None => String::new(),
                }
            }))
            .collect();
        let mut memo = PATHS_MEMO.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, k, hide, keep)) = memo.as_ref() {
            if *k == key && at.elapsed() < PATHS_FOR {
                self.hide = hide.clone();
                self.toolchains = keep.clone();
                return self;
            }
        }
        let plan = self.paths_of(hide);
        *memo = Some((
            std::time::Instant::now(),
            key,
            plan.hide.clone(),
            plan.toolchains.clone(),
        ));
        plan
    }

    fn paths_of(mut self, mut hide: Vec<PathBuf>) -> Plan {
        hide.retain(|p| p.is_absolute() && p.components().count() > 1 && p.is_dir());
        let mut hide: Vec<PathBuf> = hide
            .into_iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        hide.sort();
        hide.dedup();
        let mut candidates: Vec<PathBuf> = TOOLCHAIN_VARS
            .iter()
            .filter_map(|k| self.env.iter().find(|(n, _)| n == k))
            .map(|(_, v)| PathBuf::from(v))
            .collect();
        let mut path_dirs: Vec<PathBuf> = Vec::new();
        if let Some((_, path)) = self.env.iter().find(|(k, _)| k == "PATH") {
            path_dirs.extend(
                path.split(':')
                    .filter_map(|e| Path::new(e).canonicalize().ok()),
            );
            candidates.extend(path_dirs.iter().cloned());
            // Every manager root a shim directory belongs to, not only the one a variable names.
            candidates.extend(crate::env::shim_roots(path).into_iter().map(|(_, r)| r));
        }
        let mut keep: Vec<PathBuf> = Vec::new();
        for c in candidates {
            let Ok(c) = c.canonicalize() else { continue };
            if let Some(c) = unseen_toolchain(&hide, &c) {
                keep.push(c);
            }
        }
        // What a PATH entry's programs link to elsewhere (`~/.local/bin/pnpm` into
        // `~/.local/lib/node_modules/pnpm`): the package they belong to, not its whole parent.
        for dir in &path_dirs {
            if !keep.iter().any(|k| dir.starts_with(k)) {
                continue;
            }
            for target in link_targets(dir) {
                if keep.iter().any(|k| target.starts_with(k)) {
                    continue;
                }
                if let Some(root) = package_root(&target, &hide) {
                    if let Some(root) = unseen_toolchain(&hide, &root) {
                        keep.push(root);
                    }
                }
            }
        }
        keep.sort();
        keep.dedup();
        // A directory under another kept one is already visible.
        let all = keep.clone();
        keep.retain(|k| !all.iter().any(|o| o != k && k.starts_with(o)));
        self.hide = hide;
        self.toolchains = keep;
        self
    }
}

/// The temp dirs a run sees as its own empty ones, where a PATH entry or `VIRTUAL_ENV` may be
/// bound back.
const TMP_ROOTS: &[&str] = &["/tmp", "/var/tmp"];

/// Every temp dir a run gets empty (its `/dev/shm` too).
const PRIVATE_TMPS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Whether a component of `path` is one of [`SECRET_NAMES`].
fn is_secret(path: &Path) -> bool {
    path.components().any(|part| {
        SECRET_NAMES
            .iter()
            .any(|s| part.as_os_str() == std::ffi::OsStr::new(s))
    })
}

/// The canonical directory `c` when a run would not see it and may: under a hidden directory
/// (not covering one, not a secret's), or under a temp dir where nobody but the caller (or root)
/// could have put it — every directory below the sticky one owned by one of them and writable by
/// no group or other, or another local user could plant a "toolchain" there.
fn unseen_toolchain(hide: &[PathBuf], c: &Path) -> Option<PathBuf> {
    let hidden = hide.iter().any(|h| c.starts_with(h) && c != h);
    let covers_hidden = hide.iter().any(|h| h.starts_with(c));
    let secret = is_secret(c);
    let in_tmp = TMP_ROOTS
        .iter()
        .find(|t| c.starts_with(t) && c != Path::new(t))
        .is_some_and(|t| only_the_callers(Path::new(t), c));
    ((hidden && !covers_hidden) || in_tmp)
        .then_some(())
        .filter(|_| !secret && c.is_dir())
        .map(|_| c.to_path_buf())
}

/// Whether every directory from below `root` down to `dir` is owned by the caller or root and
/// writable by no group or other.
fn only_the_callers(root: &Path, dir: &Path) -> bool {
    others_could_write(root, dir).is_none()
}

/// The first directory from below `root` down to `dir` that someone but the caller or root could
/// have written, and how: another owner, a group- or world-writable mode, or no directory.
fn others_could_write(root: &Path, dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let dirs: Vec<&Path> = dir.ancestors().take_while(|a| *a != root).collect();
    dirs.into_iter()
        .rev()
        .find_map(|a| match std::fs::symlink_metadata(a) {
            Ok(m) if !m.is_dir() => Some(format!("{} is no directory", a.display())),
            Ok(m) if m.uid() != me && m.uid() != 0 => {
                Some(format!("{} is owned by uid {}", a.display(), m.uid()))
            }
            Ok(m) if m.mode() & 0o022 != 0 => Some(format!(
                "{} is writable by {} (mode {:o})",
                a.display(),
                if m.mode() & 0o002 != 0 {
                    "everyone"
                } else {
                    "its group"
                },
                m.mode() & 0o7777
            )),
            Ok(_) => None,
            Err(e) => Some(format!("{} cannot be read ({e})", a.display())),
        })
}

/// The most entries of one PATH directory looked at for links.
const MAX_LINKS: usize = 2000;

/// Where the symbolic links of the PATH directory `dir` lead, outside `dir` (canonical).
fn link_targets(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .take(MAX_LINKS)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| e.path().canonicalize().ok())
        .filter(|t| !t.starts_with(dir))
        .collect()
}

/// The package a linked program belongs to: the nearest directory above it with a
/// `package.json` (npm's `node_modules/pnpm`) or a `pyvenv.cfg` (pipx's venv of `black`), and
/// for a program of a `node_modules` tree that `node_modules` itself (its dependencies sit
/// beside it). None for a program of no package: its directory could hold anything of the
/// user's, so it stays hidden. Never above a hidden or temp directory's first level.
fn package_root(target: &Path, hide: &[PathBuf]) -> Option<PathBuf> {
    let dir = target.parent()?;
    let stop =
        |a: &Path| hide.iter().any(|h| a == h) || TMP_ROOTS.iter().any(|t| a == Path::new(t));
    for a in dir.ancestors().take_while(|a| !stop(a)) {
        if a.join("pyvenv.cfg").is_file() {
            return Some(a.to_path_buf());
        }
        if a.join("package.json").is_file() {
            // A project's `node_modules` (not a global `lib/node_modules`) holds the
            // package's dependencies beside it.
            let parent = a.parent()?;
            let name = |p: &Path, n: &str| p.file_name() == Some(std::ffi::OsStr::new(n));
            let in_tree =
                name(parent, "node_modules") && !parent.parent().is_some_and(|p| name(p, "lib"));
            return Some(if in_tree { parent } else { a }.to_path_buf());
        }
    }
    None
}

impl Plan {
    /// Keep readable the programs the user's own config names by absolute path when they lie
    /// under a hidden directory or a private temp dir: a virtual environment's whole directory
    /// (the one with `pyvenv.cfg` above its `bin/`), else the program's directory. A committed
    /// file never gets here: only the user's config is the user's word.
    pub fn with_user_programs(mut self, programs: &[PathBuf]) -> Plan {
        for program in programs.iter().filter(|p| p.is_absolute()) {
            let Some(dir) = program.parent() else {
                continue;
            };
            let venv = dir.parent().filter(|v| v.join("pyvenv.cfg").is_file());
            let Ok(keep) = venv.unwrap_or(dir).canonicalize() else {
                continue;
            };
            let hidden = self.hide.iter().any(|h| keep.starts_with(h) && &keep != h)
                || PRIVATE_TMPS
                    .iter()
                    .any(|t| keep.starts_with(t) && keep != Path::new(t));
            let secret = is_secret(&keep);
            let covered = self.toolchains.iter().any(|t| keep.starts_with(t));
            if hidden && !secret && !covered && keep.is_dir() {
                self.toolchains.push(keep);
            }
        }
        self
    }
}

impl super::Sandbox {
    /// Why `program` — a name a run's shell did not find, or an absolute path — is not there
    /// inside a run though the caller has it: where the caller's `PATH` finds it, and what keeps
    /// it out. `None` when the caller has no such program either, or a run would see it.
    pub fn why_unseen(&self, program: &str) -> Option<String> {
        let env = crate::env::toolchain_env();
        let on_path = !program.contains('/');
        let found = if !on_path {
            Path::new(program)
                .is_absolute()
                .then(|| PathBuf::from(program))?
        } else {
            let path = env.iter().find(|(k, _)| k == "PATH")?.1.clone();
            path.split(':')
                .filter(|d| d.starts_with('/'))
                .map(|d| Path::new(d).join(program))
                .find(|p| is_executable(p))?
        };
        let plan = Plan {
            env,
            ..Plan::default()
        }
        .with_paths(self.hide.clone())
        .with_user_programs(&self.programs);
        why_unseen(&plan, &found, on_path)
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why the caller's program at `found` is not visible under `plan` (its hidden directories and
/// the toolchains bound back), as a clause to follow an error; `None` when it is visible.
/// `on_path`: the caller's `PATH` found it (else a command named it by absolute path).
fn why_unseen(plan: &Plan, found: &Path, on_path: bool) -> Option<String> {
    let real = found.canonicalize().ok()?;
    if plan.toolchains.iter().any(|t| real.starts_with(t)) {
        return None;
    }
    let shown = found.display();
    let linked = if real != found {
        format!(" (a link to {})", real.display())
    } else {
        String::new()
    };
    // The secret's own directory: the shortest ancestor that holds a secret's name.
    if let Some(secret) = real.ancestors().filter(|a| is_secret(a)).last() {
        return Some(format!(
            "`{shown}`{linked} is under {}, which runs never see (it holds secrets); install it elsewhere",
            secret.display()
        ));
    }
    if let Some(hidden) = plan.hide.iter().find(|h| real.starts_with(h)) {
        let dir = found.parent().unwrap_or(found);
        let dir_seen = dir
            .canonicalize()
            .is_ok_and(|d| plan.toolchains.iter().any(|t| d.starts_with(t)));
        return Some(if !on_path {
            format!(
                "`{shown}`{linked} is under {}, which runs do not see: they see the toolchains on PATH and those PYENV_ROOT, VIRTUAL_ENV, CARGO_HOME, … name, and programs your own config names by absolute path (`git sandbox doctor` lists them)",
                hidden.display()
            )
        } else if dir_seen {
            format!(
                "`{shown}`{linked} belongs to no package (no package.json or pyvenv.cfg above it), so it stays hidden with {}, which runs do not see; name it by absolute path in your own config's command, or install it as a package",
                hidden.display()
            )
        } else {
            format!(
                "`{shown}`{linked} is under {}, which runs do not see, and its PATH entry is not bound back (it holds that directory whole); put the program's own directory on PATH",
                hidden.display()
            )
        });
    }
    let tmp = PRIVATE_TMPS
        .iter()
        .map(Path::new)
        .find(|t| real.starts_with(t) && real != *t)?;
    let open = others_could_write(tmp, real.parent()?);
    Some(match open {
        Some(why) => format!(
            "`{shown}`{linked} is under {}, which each run gets empty, and is not bound back because {why}: another local user could have put it there; `chmod go-w` that directory, or keep the program outside {}",
            tmp.display(),
            tmp.display()
        ),
        None => format!(
            "`{shown}`{linked} is under {}, which each run gets empty; keep it outside {}, or name it by absolute path in your own config's command",
            tmp.display(),
            tmp.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolchains_under_a_hidden_home_stay_readable_but_secrets_do_not() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        for sub in [
            "home/.pyenv/shims",
            "home/.ssh",
            "home/.cargo/bin",
            "data",
            "cfg",
        ] {
            std::fs::create_dir_all(d.path().join(sub)).unwrap();
        }
        let home = home.canonicalize().unwrap();
        let plan = Plan {
            env: vec![
                (
                    "PYENV_ROOT".into(),
                    home.join(".pyenv").display().to_string(),
                ),
                (
                    "PATH".into(),
                    format!(
                        "{}:{}:{}:/usr/bin",
                        home.join(".pyenv/shims").display(),
                        home.join(".ssh").display(),
                        home.join(".cargo/bin").display()
                    ),
                ),
            ],
            ..Plan::default()
        };
        let out = plan.with_paths(vec![home.clone(), d.path().join("data"), "/".into()]);
        assert!(out.hide.contains(&home), "{:?}", out.hide);
        assert!(
            out.toolchains.contains(&home.join(".pyenv")),
            "{:?}",
            out.toolchains
        );
        assert!(out.toolchains.contains(&home.join(".cargo/bin")));
        assert!(!out.toolchains.iter().any(|t| t.ends_with(".ssh")));
        assert!(
            !out.toolchains.iter().any(|t| t.ends_with("shims")),
            "covered by .pyenv"
        );
    }

    /// A program linked from a PATH entry under the home into a package elsewhere there gets
    /// that package (a project's whole `node_modules`, whose dependencies sit beside it), never
    /// the directory above it.
    #[test]
    fn a_linked_programs_package_is_bound_back_not_its_parent() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let home = d.path().canonicalize().unwrap().join("home");
        let make = |rel: &str, body: &str| {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        make(".local/lib/node_modules/pnpm/package.json", "{}");
        make(".local/lib/node_modules/pnpm/bin/pnpm.cjs", "");
        make(".local/lib/secret.txt", "");
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        symlink(
            "../lib/node_modules/pnpm/bin/pnpm.cjs",
            home.join(".local/bin/pnpm"),
        )
        .unwrap();
        make("proj/node_modules/jest/package.json", "{}");
        make("proj/node_modules/jest/bin/jest.js", "");
        make("proj/node_modules/jest-cli/package.json", "{}");
        make("notes/diary.txt", "private");
        make("notes/tool.sh", "");
        symlink("../../notes/tool.sh", home.join(".local/bin/tool")).unwrap();
        std::fs::create_dir_all(home.join("proj/node_modules/.bin")).unwrap();
        symlink(
            "../jest/bin/jest.js",
            home.join("proj/node_modules/.bin/jest"),
        )
        .unwrap();
        let plan = Plan {
            env: vec![(
                "PATH".into(),
                format!(
                    "{}:{}:/usr/bin",
                    home.join(".local/bin").display(),
                    home.join("proj/node_modules/.bin").display()
                ),
            )],
            ..Plan::default()
        };
        let out = plan.with_paths(vec![home.clone()]);
        let t = &out.toolchains;
        assert!(
            t.contains(&home.join(".local/lib/node_modules/pnpm")),
            "{t:?}"
        );
        assert!(!t.iter().any(|p| p == &home.join(".local/lib")), "{t:?}");
        assert!(t.contains(&home.join("proj/node_modules")), "{t:?}");
        // A link to a script of no package leaves its directory hidden.
        assert!(!t.iter().any(|p| p == &home.join("notes")), "{t:?}");
    }

    /// A virtual environment or PATH entry under /tmp is bound back only when nobody but the
    /// caller (or root) could have written any directory of it below the sticky one.
    #[test]
    fn a_toolchain_under_tmp_is_bound_back_only_when_nobody_else_could_plant_it() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir_in("/tmp").unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let venv = root.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        let shared = root.join("shared");
        std::fs::create_dir_all(shared.join("bin")).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let plan = Plan {
            env: vec![
                ("VIRTUAL_ENV".into(), venv.display().to_string()),
                (
                    "PATH".into(),
                    format!("{}:/usr/bin", shared.join("bin").display()),
                ),
            ],
            ..Plan::default()
        };
        let out = plan.with_paths(Vec::new());
        assert!(out.toolchains.contains(&venv), "{:?}", out.toolchains);
        assert!(
            !out.toolchains.iter().any(|t| t.starts_with(&shared)),
            "a world-writable directory: {:?}",
            out.toolchains
        );
    }

    /// A program the caller's PATH has but a run would not see is explained: a link into no
    /// package under the home, a directory others could write under /tmp; a visible one is not.
    #[test]
    fn why_a_program_is_not_seen_inside_names_the_rule() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let d = tempfile::tempdir_in("/tmp").unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = |p: &Path| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let home = root.join("home");
        exe(&home.join("notes/tool.sh"));
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        symlink("../../notes/tool.sh", home.join(".local/bin/tool")).unwrap();
        exe(&root.join("venv/bin/pytest"));
        std::fs::write(root.join("venv/pyvenv.cfg"), "").unwrap();
        exe(&root.join("shared/bin/planted"));
        std::fs::set_permissions(root.join("shared"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let plan = Plan {
            env: vec![
                (
                    "VIRTUAL_ENV".into(),
                    root.join("venv").display().to_string(),
                ),
                (
                    "PATH".into(),
                    format!(
                        "{}:{}:/usr/bin",
                        home.join(".local/bin").display(),
                        root.join("shared/bin").display()
                    ),
                ),
            ],
            ..Plan::default()
        }
        .with_paths(vec![home.clone()]);

        let tool = why_unseen(&plan, &home.join(".local/bin/tool"), true).unwrap();
        assert!(tool.contains("belongs to no package"), "{tool}");
        assert!(
            tool.contains(&home.join("notes/tool.sh").display().to_string()),
            "{tool}"
        );
        let planted = why_unseen(&plan, &root.join("shared/bin/planted"), true).unwrap();
        assert!(
            planted.contains(&format!(
                "{} is writable by everyone",
                root.join("shared").display()
            )),
            "{planted}"
        );
        assert_eq!(why_unseen(&plan, &root.join("venv/bin/pytest"), true), None);
        let named = why_unseen(&plan, &home.join("notes/tool.sh"), false).unwrap();
        assert!(
            named.contains("your own config names by absolute path"),
            "{named}"
        );
    }
}
