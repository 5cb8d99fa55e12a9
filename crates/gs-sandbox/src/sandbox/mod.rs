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

mod artifacts;
pub mod cgroup;
mod command;
pub mod egress;
pub mod forkserver;
mod fsview;
pub use fsview::VIEW_ROOT;
mod guard;
pub mod helper;
mod imageview;
mod keep;
pub mod layers;
mod toolchains;

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
    /// Layers laid over the kept checkout, topmost first, each laid out like the run's
    /// directory: what an agent workspace's earlier commands wrote (whiteouts and opaque
    /// directories hide the checkout's entries). Never written: the run's writes go to its own
    /// upper layer.
    #[serde(default)]
    pub work_layers: Vec<PathBuf>,
    /// A helper started ahead of its run: it makes its namespaces (for `network` and `skip`, the
    /// only fields it reads first), then reads the whole plan from stdin. See
    /// `process::Spare`.
    #[serde(default)]
    pub rest_on_stdin: bool,
    /// The image the run's root is (see [`ImageRoot`]); `None`: the host's root, read-only.
    #[serde(default)]
    pub image: Option<ImageRoot>,
}

/// An image as a run's root (`[environment] image`): its unpacked layers, topmost first, where
/// the tree goes, and the variables it sets. Nothing of the host's file system is in the view
/// but `/dev` and the run's own directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageRoot {
    pub layers: Vec<PathBuf>,
    /// The image's `WorkingDir` (empty: `/src`), where the run sees its tree.
    pub workdir: PathBuf,
    /// The image's `Env` (`NAME=value`), under the sandbox's own variables.
    pub env: Vec<String>,
    /// `REFERENCE@DIGEST`, for the report.
    pub label: String,
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
    /// The image runs use as their root (`[environment] image`), set for one commit's runs.
    pub image: Option<ImageRoot>,
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
            image: None,
        }
    }

    /// Start the fork server the runs' helpers come from, in the background (see
    /// [`forkserver`]), in a process that runs many commands (`run`, the daemon): before its
    /// first workspace is prepared. Elsewhere (`exec`, the probe) helpers are exec'd.
    pub fn warm(&self) {
        forkserver::warm(&self.helper);
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

pub use gs_util::mount::errno_text;
