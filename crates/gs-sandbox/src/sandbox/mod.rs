//! The sandbox around one test command: what the supervisor hands to the helper process (the
//! [`Plan`]), the helper itself (a hidden subcommand of this binary that applies every layer to
//! itself and then runs `/bin/sh -c CMD`), and the once-per-machine probe of what is available.
//!
//! Process tree of a run, all in one new session:
//!
//! ```text
//! supervisor (process.rs: timeout, output cap, log)
//!  ├─ fork server  git-sandbox __sandbox-forkserver: one per supervisor, forks each helper as
//!  │               the supervisor's child (forkserver.rs); else the helper is exec'd
//!  └─ helper   git-sandbox __sandbox-exec   cgroup, drop to a per-run uid, unshare namespaces,
//!      │                                    rlimits; waits and relays the exit status
//!      └─ init (pid 1 of the new PID namespace): read-only root view, private /tmp, secrets
//!          │   hidden, fresh /proc, loopback, Landlock, seccomp; forwards signals, reaps
//!          └─ /bin/sh -c CMD
//! ```
//!
//! Every one of them dies with its parent (`PR_SET_PDEATHSIG`, set by single-threaded processes),
//! and when init dies the kernel kills everything left in its PID namespace.

pub mod cgroup;
mod command;
pub mod egress;
pub mod forkserver;
mod fsview;
pub use fsview::VIEW_ROOT;
mod guard;
pub mod helper;
pub mod layers;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The environment variable that carries the plan (JSON) to the helper.
pub const PLAN_VAR: &str = "GIT_SANDBOX_PLAN";
/// The helper writes its report (JSON: every layer, the limits read back) to this descriptor.
pub const REPORT_FD: i32 = 3;
/// The namespace's init writes the files the command left for the supervisor (the
/// [`Plan::artifacts`], read inside the sandbox with its own rights) to this descriptor, one JSON
/// line each, once the command has ended.
pub const ARTIFACT_FD: i32 = 4;
/// The most one artifact may hold.
pub const ARTIFACT_CAP: u64 = 8 << 20;
/// The most coverage.py's data file (`.coverage`, SQLite) may hold: with a context per test it
/// is larger than any report.
pub const DATA_FILE_CAP: u64 = 48 << 20;

/// The most the artifact `rel` may hold.
pub fn artifact_cap(rel: &str) -> u64 {
    if rel == ".coverage" {
        DATA_FILE_CAP
    } else {
        ARTIFACT_CAP
    }
}
/// How many files one artifact pattern (`DIR/*.xml`) hands back at most.
pub const ARTIFACT_FILES: usize = 200;

/// An artifact asked for as every file of a directory with a suffix: `DIR/*.xml` is
/// `("DIR", ".xml")`.
pub fn artifact_pattern(rel: &str) -> Option<(&str, &str)> {
    let (dir, name) = rel.rsplit_once('/')?;
    let suffix = name.strip_prefix('*')?;
    (!dir.is_empty() && !suffix.contains(['*', '/'])).then_some((dir, suffix))
}

/// The files of `dir` under `root` an artifact pattern names, each read safely.
///
/// Each is read as [`read_beneath`] reads one (no link followed, regular files only, each at
/// most [`ARTIFACT_CAP`]), at most [`ARTIFACT_FILES`] of them and `ARTIFACT_CAP * 2` bytes in
/// all; or why the directory could not be read (or that it holds none), as the pattern's own
/// artifact.
///
/// [`read_beneath`]: gs_util::beneath::read_beneath
pub fn read_pattern(root: &std::path::Path, rel: &str, dir: &str, suffix: &str) -> Vec<Artifact> {
    use gs_util::{beneath::list_beneath, beneath::read_beneath};
    let names = match list_beneath(root, dir, ARTIFACT_FILES * 4) {
        Ok(n) => n,
        Err(why) => return vec![Artifact::skipped(rel.to_string(), why.to_string())],
    };
    let mut out = Vec::new();
    let mut budget = ARTIFACT_CAP * 2;
    for name in names
        .iter()
        .filter(|n| n.ends_with(suffix))
        .take(ARTIFACT_FILES)
    {
        let path = format!("{dir}/{name}");
        let artifact = match read_beneath(root, &path, ARTIFACT_CAP.min(budget)) {
            Ok(bytes) => {
                budget -= bytes.len() as u64;
                Artifact::read(path, bytes)
            }
            Err(why) => Artifact::skipped(path, why.to_string()),
        };
        out.push(artifact);
        if budget == 0 {
            break;
        }
    }
    if out.is_empty() {
        // Said, so that a reader can tell "none" from "not looked for".
        out.push(Artifact::skipped(
            rel.to_string(),
            format!("{dir} holds no *{suffix} file"),
        ));
    }
    out
}
/// The hidden subcommand that runs the helper.
pub const HELPER_SUBCOMMAND: &str = "__sandbox-exec";
/// As root, every run's gid: build caches are group-writable for it, so a branch's run can build
/// on production's cache whichever run (and uid) wrote it. Runs cannot signal each other by a
/// shared group; their uids stay their own.
pub const RUN_GID: u32 = 899_999;
/// As root, the run's uid is this plus the helper's pid: unprivileged, and unique per run, so
/// RLIMIT_NPROC counts only the run's own processes and runs cannot signal each other.
pub const UID_BASE: u32 = 1_000_000;

/// Everything the helper needs, decided by the supervisor.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Plan {
    pub command: String,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// The run's private directory (checkout, HOME, TMPDIR): the only writable host path.
    pub root: PathBuf,
    pub limits: PlanLimits,
    /// Keep the host network (only when the user's policy says `network = "host"`).
    pub network: bool,
    /// A network namespace of its own whose only way out is git-sandbox's proxy: its init
    /// listens on 127.0.0.1 and hands the socket over (see [`egress`]).
    #[serde(default)]
    pub proxy: bool,
    /// Directories replaced by an empty tmpfs: home directories, the tool's config and data.
    pub hide: Vec<PathBuf>,
    /// Directories under a hidden one that stay readable (toolchains such as ~/.pyenv).
    pub toolchains: Vec<PathBuf>,
    /// Layers the machine probe found unavailable, with the reason: not attempted again.
    pub skip: BTreeMap<String, String>,
    /// The supervisor's pid: the helper exits if it is already gone.
    pub parent_pid: i32,
    /// Files (relative to `cwd`) to hand back once the command has ended, such as a JUnit
    /// report: read inside the sandbox, with its rights, never following a link.
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// A kept checkout to lay the run's overlay over (its `root` is then only the mount point).
    /// It is never written: without an overlay it is bound read-only.
    #[serde(default)]
    pub lower: Option<PathBuf>,
    /// Report when each step of the set-up ended (`GIT_SANDBOX_TRACE`).
    #[serde(default)]
    pub trace: bool,
    /// As root, the uid to run as (a slot's, which owns the kept checkout), instead of one made
    /// from the helper's pid.
    #[serde(default)]
    pub run_uid: Option<u32>,
    /// Build-cache layers laid under the kept checkout (the tree always wins), topmost first
    /// (each laid out like the run's directory: `tree/`, `home/`).
    #[serde(default)]
    pub cache_layers: Vec<PathBuf>,
    /// The branch's cache directory: this run's writes under `cache_paths` are merged into its
    /// `layer/` once it has ended, and their size added to its `added` (`None`: nothing kept).
    #[serde(default)]
    pub cache_out: Option<PathBuf>,
    /// The paths, relative to the run's directory (`tree/target`, `home`), whose writes are kept.
    #[serde(default)]
    pub cache_paths: Vec<String>,
    /// A helper started ahead of its run: it makes its namespaces (for `network` and `skip`, the
    /// only fields it reads first), then reads the whole plan from stdin. See
    /// `process::Spare`.
    #[serde(default)]
    pub rest_on_stdin: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlanLimits {
    pub memory_mb: u64,
    pub cpu_seconds: u64,
    /// The run cgroup's CPU quota, in thousandths of a core (0: none).
    #[serde(default)]
    pub cpu_millicores: u64,
    pub processes: u64,
    pub open_files: u64,
    pub file_size_mb: u64,
    /// The size of the run's writable file systems (0: unlimited).
    #[serde(default)]
    pub disk_mb: u64,
}

/// What the helper reports on [`REPORT_FD`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub layers: Vec<gs_model::Layer>,
    pub limits: gs_model::AppliedLimits,
    /// With `Plan::trace`: each step of the set-up and when it ended (`CLOCK_MONOTONIC` ns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<(String, u64)>,
}

/// One file handed back on [`ARTIFACT_FD`]: its text (lossy UTF-8), or why it was not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The bytes, base64, of an SQLite database (coverage.py's data file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
}

impl Artifact {
    /// A file that was read: its text (lossy), or its bytes for an SQLite database.
    pub fn read(path: String, bytes: Vec<u8>) -> Artifact {
        use base64::Engine;
        if bytes.starts_with(b"SQLite format 3\0") {
            return Artifact {
                path,
                text: None,
                skipped: None,
                binary: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
            };
        }
        Artifact {
            path,
            text: Some(String::from_utf8_lossy(&bytes).into_owned()),
            skipped: None,
            binary: None,
        }
    }

    /// A file that was not read, and why.
    pub fn skipped(path: String, why: String) -> Artifact {
        Artifact {
            path,
            text: None,
            skipped: Some(why),
            binary: None,
        }
    }

    /// The bytes of a file that was read.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        match (&self.binary, &self.text) {
            (Some(b), _) => base64::engine::general_purpose::STANDARD.decode(b).ok(),
            (None, Some(t)) => Some(t.clone().into_bytes()),
            (None, None) => None,
        }
    }
}

/// How runs of this user are sandboxed: the helper binary, what to hide, what the probe found
/// unavailable.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    /// The binary with the hidden helper subcommand (this one).
    pub helper: PathBuf,
    /// Candidates to hide (see [`hidden_dirs`]).
    pub hide: Vec<PathBuf>,
    pub skip: BTreeMap<String, String>,
    /// Whether a run's directory can be an overlay here (the probe's `disk_limit`): then runs
    /// use kept checkouts.
    pub overlay: bool,
    /// Programs the user's own config names by absolute path (a venv under `/tmp` or the home):
    /// bound back read-only (see [`Plan::with_user_programs`]).
    pub programs: Vec<PathBuf>,
    /// The CA bundle for runs with the network (the system's store and the user's
    /// `[network] ca_files`), or why it could not be made; `None` without `ca_files`.
    pub ca_bundle: Option<Result<PathBuf, String>>,
}

impl Sandbox {
    /// For runs of this user: this binary as the helper; home, config and data hidden. What the
    /// machine lacks is not known yet: [`Sandbox::probed`] (in `crate::probe`) asks.
    pub fn for_user(data_dir: &Path, config_dir: &Path) -> Sandbox {
        Sandbox {
            helper: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("git-sandbox")),
            hide: hidden_dirs(data_dir, config_dir),
            skip: BTreeMap::new(),
            overlay: false,
            programs: Vec::new(),
            ca_bundle: None,
        }
    }

    /// Start the fork server the runs' helpers come from, in the background (see
    /// [`forkserver`]), in a process that runs many commands (`run`, the daemon): before its
    /// first workspace is prepared. Elsewhere (`exec`, the probe) helpers are exec'd.
    pub fn warm(&self) {
        forkserver::warm(&self.helper);
    }
}

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

/// The temp dirs a run sees as its own empty ones.
const TMP_ROOTS: &[&str] = &["/tmp", "/var/tmp"];

/// The canonical directory `c` when a run would not see it and may: under a hidden directory
/// (not covering one, not a secret's), or under a temp dir where nobody but the caller (or root)
/// could have put it — every directory below the sticky one owned by one of them and writable by
/// no group or other, or another local user could plant a "toolchain" there.
fn unseen_toolchain(hide: &[PathBuf], c: &Path) -> Option<PathBuf> {
    let hidden = hide.iter().any(|h| c.starts_with(h) && c != h);
    let covers_hidden = hide.iter().any(|h| h.starts_with(c));
    let secret = c.components().any(|part| {
        SECRET_NAMES
            .iter()
            .any(|s| part.as_os_str() == std::ffi::OsStr::new(s))
    });
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
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    dir.ancestors().take_while(|a| *a != root).all(|a| {
        std::fs::symlink_metadata(a)
            .is_ok_and(|m| m.is_dir() && (m.uid() == me || m.uid() == 0) && m.mode() & 0o022 == 0)
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
        const TMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];
        for program in programs.iter().filter(|p| p.is_absolute()) {
            let Some(dir) = program.parent() else {
                continue;
            };
            let venv = dir.parent().filter(|v| v.join("pyvenv.cfg").is_file());
            let Ok(keep) = venv.unwrap_or(dir).canonicalize() else {
                continue;
            };
            let hidden = self.hide.iter().any(|h| keep.starts_with(h) && &keep != h)
                || TMP
                    .iter()
                    .any(|t| keep.starts_with(t) && keep != Path::new(t));
            let secret = keep.components().any(|part| {
                SECRET_NAMES
                    .iter()
                    .any(|s| part.as_os_str() == std::ffi::OsStr::new(s))
            });
            let covered = self.toolchains.iter().any(|t| keep.starts_with(t));
            if hidden && !secret && !covered && keep.is_dir() {
                self.toolchains.push(keep);
            }
        }
        self
    }
}

/// The directories a run never sees: the user's home (from HOME and from the password file), the
/// tool's config directory and its data directory (index, logs).
pub fn hidden_dirs(data_dir: &Path, config_dir: &Path) -> Vec<PathBuf> {
    let mut hide: Vec<PathBuf> = Vec::new();
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        hide.push(PathBuf::from(h));
    }
    if let Some(h) = passwd_home() {
        hide.push(h);
    }
    hide.push(config_dir.to_path_buf());
    hide.push(data_dir.to_path_buf());
    hide
}

fn passwd_home() -> Option<PathBuf> {
    // SAFETY: getpwuid returns a pointer into static storage or null; read it at once.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
        Some(PathBuf::from(
            std::ffi::OsStr::from_encoded_bytes_unchecked(dir.to_bytes()),
        ))
    }
}

/// `strerror`-style text with the errno name, e.g. "Operation not permitted (EPERM)".
pub fn errno_text(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => " (EPERM)",
        Some(libc::EACCES) => " (EACCES)",
        Some(libc::EINVAL) => " (EINVAL)",
        Some(libc::ENOSYS) => " (ENOSYS)",
        Some(libc::ENOSPC) => " (ENOSPC)",
        Some(libc::EOPNOTSUPP) => " (EOPNOTSUPP)",
        Some(libc::ENOENT) => " (ENOENT)",
        Some(libc::EROFS) => " (EROFS)",
        Some(libc::EBUSY) => " (EBUSY)",
        Some(libc::EMFILE) => " (EMFILE)",
        Some(libc::EMLINK) => " (EMLINK)",
        _ => "",
    };
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    format!("{text}{name}")
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
}
