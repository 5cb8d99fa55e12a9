//! Configuration: the places the tool keeps its data, and the layered settings
//! (built-in defaults < user config < repository `.sandbox.toml` < `SANDBOX_*` environment < flags),
//! where the repository may only tighten the user's limits, pre-push gate and watch mode.

mod checks;
mod de;
pub mod devcontainer;
mod env;
mod environment;
mod file;
mod machine;
mod network;

/// Every key a repository's `.sandbox.toml` may hold, each with what it does: embedded, so an
/// installed binary prints it (`git sandbox config --example`).
pub const EXAMPLE: &str = include_str!("../sandbox.toml.example");

pub use checks::{valid_name as valid_check_name, CheckConfig, TEST_CHECK};
pub use environment::{EnvironmentConfig, DEFAULT_IMAGE_MB};
pub use file::{parse_file, parse_repository_file, ConfigFile, Limit};
pub use machine::{
    check_index_url, redact_url, GithubConfig, IndexConfig, NotifyConfig, RemoteConfig, TrustConfig,
};
pub use network::{NetworkConfig, NetworkMode, SETUP_REGISTRIES};

use gs_util::{glob::GlobError, glob::Globs};
use gs_util::{hint::display_hinted, hint::Hinted};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A config problem, named by file, line and key so the user can go straight to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}", .source_label, .line.map(|l| format!(":{l}")).unwrap_or_default(), .key.as_ref().map(|k| format!(": key `{k}`")).unwrap_or_default())]
pub struct Location {
    pub source_label: String,
    pub line: Option<usize>,
    pub key: Option<String>,
}

/// A config problem where it is, and what to do about it. `Display` is one line with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub location: Location,
    pub message: String,
    pub hints: Vec<String>,
}

impl Hinted for ConfigError {
    fn problem(&self) -> String {
        format!("{}: {}", self.location, self.message)
    }

    fn hints(&self) -> Vec<String> {
        self.hints.clone()
    }
}

display_hinted!(ConfigError);

/// The most of a work tree's `.sandbox.toml` (or the adopted file) read.
const REPO_CONFIG_CAP: u64 = 1024 * 1024;

/// The adopted settings' file in the git directory (the common one, shared by worktrees).
pub const ADOPTED_FILE: &str = "sandbox.toml";

/// The file `name` in `dir` with its label, read without following a symlink and up to the cap
/// (the work tree holds whatever a commit put there); `None` when there is none.
fn read_capped(dir: &Path, name: &str) -> Result<Option<(String, String)>, ConfigError> {
    use gs_util::{beneath::read_beneath, beneath::Skip};
    let label = dir.join(name).display().to_string();
    match read_beneath(dir, name, REPO_CONFIG_CAP) {
        Ok(bytes) => Ok(Some((label, String::from_utf8_lossy(&bytes).into_owned()))),
        Err(Skip::Missing(_)) => Ok(None),
        Err(skip) => Err(ConfigError {
            location: Location {
                source_label: label,
                line: None,
                key: None,
            },
            message: skip.to_string(),
            hints: vec!["make it a regular file of at most 1 MiB".into()],
        }),
    }
}

/// Where the tool keeps its data and reads its user config.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `$GIT_SANDBOX_HOME`: index.db, logs/, repos/.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME/git-sandbox/config.toml`.
    pub user_config: PathBuf,
}

impl Paths {
    pub fn from_env() -> Paths {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home_dir = var("HOME").unwrap_or_else(|| PathBuf::from("/"));
        let home = var("GIT_SANDBOX_HOME").unwrap_or_else(|| {
            var("XDG_DATA_HOME")
                .unwrap_or_else(|| home_dir.join(".local/share"))
                .join("git-sandbox")
        });
        let user_config = var("XDG_CONFIG_HOME")
            .unwrap_or_else(|| home_dir.join(".config"))
            .join("git-sandbox/config.toml");
        Paths { home, user_config }
    }

    pub fn index_db(&self) -> PathBuf {
        self.home.join("index.db")
    }

    pub fn logs(&self) -> PathBuf {
        self.home.join("logs")
    }

    /// Build caches, per repository and branch (see `runner::caches`).
    pub fn caches(&self) -> PathBuf {
        self.home.join("cache")
    }

    pub fn repos(&self) -> PathBuf {
        self.home.join("repos")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestConfig {
    /// `None`: detect from the tree.
    pub command: Option<String>,
    #[serde(serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// A JUnit XML report the command writes, relative to the checkout.
    pub junit: Option<String>,
    /// A command run before the tests (`npm ci`), once per change of the tree's lockfiles and
    /// manifests; what it writes is kept as a cache layer under the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// A build the tests need (`pnpm build`), run before them in their sandbox for every tree
    /// (what it writes under the kept build directories is the branch's cache). Unset, it is
    /// left out of the result key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Run at the same time as the checks that say `parallel = true`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
    /// A line-coverage report the command writes, relative to the checkout (`None`: looked for
    /// where the usual tools write one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<String>,
    /// Run the tests a change can reach as a probe beside the run (`[test] phases`). Not part of
    /// the result key: the record is the command's own run either way.
    #[serde(skip)]
    pub phases: bool,
    /// How often a failure only of known-flaky or quarantined tests is retried (`[test] retries`,
    /// the default of `run --retry-flaky N`). Unset, it is left out of the result key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// How often a test new to a commit (not in its parent's run) runs in it, the first run in
    /// the suite's order deciding (`[test] new_test_runs`, default 3). Not part of the result key:
    /// the extra runs only mark a test flaky at birth.
    #[serde(skip)]
    pub new_test_runs: u32,
}

/// How often a new test runs in its commit's run when the config does not say.
pub const NEW_TEST_RUNS: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    pub memory_mb: u64,
    pub cpu_seconds: u64,
    /// The run's share of the CPU (`cpu_cores = 1.5` in a file), in thousandths of a core; 0: no
    /// quota (and then it is left out of the result key).
    #[serde(rename = "cpu_cores", serialize_with = "ser_cores")]
    pub cpu_millicores: u64,
    pub processes: u64,
    pub open_files: u64,
    /// RLIMIT_FSIZE: the largest file the tests may write.
    pub file_size_mb: u64,
    pub output_bytes: u64,
    /// Everything the tests may write (their tree, HOME, temp dirs), on any backing.
    pub disk_mb: u64,
    pub network: bool,
    /// `network = "host"` in the user's config: runs with the network (the tests with `network`,
    /// the setup with `setup_network`) share the host's network namespace instead of reaching
    /// out through the supervisor's proxy. Only in the result key when set.
    pub network_host: bool,
    /// Whether the setup step (`[test] setup`) may use the network.
    pub setup_network: bool,
    /// The most a checkout may write (the sum of its blobs), checked before anything is written.
    pub checkout_mb: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisConfig {
    pub enabled: bool,
    pub exclude: Vec<String>,
    pub max_complexity: u64,
    pub max_function_lines: u64,
    pub max_parameters: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchConfig {
    pub branches: Vec<String>,
    /// How many of the newest commits of each watched branch `init` queues (0: none; history
    /// is run only when asked).
    pub backfill: u64,
    /// `every` commit queued is run, or only the `latest` of its branch: a queued commit whose
    /// branch moved past it before its run started is skipped.
    pub mode: String,
}

/// What the hooks do beyond queueing runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HooksConfig {
    /// The pre-push gate: `off`, `warn` (print failing tips), `block` (refuse a push whose
    /// tip failed) or `wait` (also wait for tips without a result, up to the timeout).
    pub pre_push: String,
    #[serde(serialize_with = "ser_duration")]
    pub pre_push_timeout: Duration,
}

/// Build caches kept between runs of a branch (`target/`, `node_modules/`, the run's `~/.cache`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheConfig {
    pub enabled: bool,
    /// In-tree directories kept; `None`: detected from the tree (Cargo.toml: `target`,
    /// package.json: `node_modules`).
    pub dirs: Option<Vec<String>>,
    /// The most one branch's cache may hold (a limit: a repository can only lower it).
    pub max_mb: u64,
}

/// Audits of warm results (the daemon's): a branch's newest warm result is made again cold once
/// `generations` new cache generations, or `every` with at least one new generation, have passed
/// since the last audit (`generations = 0`: no audits). User config and environment only: a
/// repository cannot set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditConfig {
    pub generations: u64,
    #[serde(serialize_with = "ser_duration")]
    pub every: Duration,
}

/// Housekeeping (`git sandbox gc`): how long run logs and events are kept, and how much disk the
/// logs may take. User config and environment only: a repository cannot set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GcConfig {
    #[serde(serialize_with = "ser_duration")]
    pub logs: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub events: Duration,
    pub max_log_mb: u64,
    /// Build caches and kept checkouts unused for this long are removed.
    #[serde(serialize_with = "ser_duration")]
    pub caches: Duration,
    /// The most a repository's build caches may take; past it, the least recently used
    /// branches' caches go first.
    pub max_cache_mb: u64,
    /// Images no run used for this long are removed from the image store.
    #[serde(serialize_with = "ser_duration")]
    pub images: Duration,
}

pub fn ser_opt_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis() as u64),
        None => s.serialize_none(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromoteConfig {
    pub target: String,
    pub strategy: String,
    pub minimum: String,
    /// How many percentage points of line coverage an experiment may lose against production
    /// and still pass `eval`'s `coverage` criterion.
    pub max_coverage_drop: f64,
    /// Watch production's run of a promoted commit and revert the promotion when it fails
    /// (`promote --watch` by default).
    pub rollback: bool,
}

/// Thousandths of a core written as cores (`1500` as `1.5`).
fn ser_cores<S: serde::Serializer>(m: &u64, s: S) -> Result<S::Ok, S::Error> {
    gs_util::serialize_cores(*m, s)
}

impl Limits {
    /// The checkout ceiling in bytes (`u64::MAX` when the user said "unlimited").
    pub fn checkout_bytes(&self) -> u64 {
        match self.checkout_mb {
            0 => u64::MAX,
            mb => mb.saturating_mul(1024 * 1024),
        }
    }
}

/// The effective settings for one repository (and, for runs, one commit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub test: TestConfig,
    /// The named checks besides the tests (`[checks.NAME]`), in the order declared.
    pub checks: Vec<CheckConfig>,
    /// The tools the commands run, as this machine has them (see `runner::toolchain`): filled
    /// in for a commit's runs, part of the result key.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub toolchain: std::collections::BTreeMap<String, String>,
    pub limits: Limits,
    pub analysis: AnalysisConfig,
    pub watch: WatchConfig,
    pub promote: PromoteConfig,
    pub cache: CacheConfig,
    pub hooks: HooksConfig,
    pub gc: GcConfig,
    pub audit: AuditConfig,
    pub remote: RemoteConfig,
    pub github: GithubConfig,
    pub index: IndexConfig,
    pub notify: NotifyConfig,
    pub trust: TrustConfig,
    /// Where runs with the network may reach (`[network]`).
    pub network: NetworkConfig,
    /// The image runs use as their root, and where images may come from (`[environment]`).
    pub environment: EnvironmentConfig,
}

const DAY: u64 = 86_400;

pub fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            test: TestConfig {
                command: None,
                timeout: Duration::from_secs(300),
                junit: None,
                setup: None,
                build: None,
                parallel: false,
                coverage: None,
                phases: true,
                retries: None,
                new_test_runs: NEW_TEST_RUNS,
            },
            checks: Vec::new(),
            toolchain: Default::default(),
            limits: Limits {
                memory_mb: 4096,
                cpu_seconds: 600,
                cpu_millicores: 0,
                processes: 256,
                open_files: 1024,
                file_size_mb: 1024,
                output_bytes: 10 * 1024 * 1024,
                disk_mb: 4096,
                network: false,
                network_host: false,
                setup_network: false,
                checkout_mb: 1024,
            },
            analysis: AnalysisConfig {
                enabled: true,
                exclude: vec!["vendor/**".into(), "third_party/**".into()],
                max_complexity: 10,
                max_function_lines: 60,
                max_parameters: 5,
            },
            watch: WatchConfig {
                branches: vec!["main".into(), "experiment/*".into()],
                backfill: 0,
                mode: "every".into(),
            },
            promote: PromoteConfig {
                target: "main".into(),
                strategy: "merge".into(),
                minimum: "RECOMMEND".into(),
                max_coverage_drop: 1.0,
                rollback: false,
            },
            hooks: HooksConfig {
                pre_push: "off".into(),
                pre_push_timeout: Duration::from_secs(600),
            },
            cache: CacheConfig {
                enabled: true,
                dirs: None,
                max_mb: 4096,
            },
            audit: AuditConfig {
                generations: 10,
                every: Duration::from_secs(3600),
            },
            gc: GcConfig {
                logs: Duration::from_secs(30 * DAY),
                events: Duration::from_secs(90 * DAY),
                max_log_mb: 1024,
                caches: Duration::from_secs(14 * DAY),
                max_cache_mb: 16_384,
                images: Duration::from_secs(14 * DAY),
            },
            remote: RemoteConfig {
                auto_push: false,
                poll: None,
                webhook_secret_file: None,
            },
            github: GithubConfig {
                api_url: "https://api.github.com".into(),
                web_url: "https://github.com".into(),
                token_command: None,
                statuses: true,
                app_id: None,
                app_key_file: None,
                installation_id: None,
            },
            index: IndexConfig::default(),
            notify: NotifyConfig::default(),
            trust: TrustConfig::default(),
            network: NetworkConfig::default(),
            environment: EnvironmentConfig::default(),
        }
    }
}

/// The layers that make up a [`Config`], lowest priority first (the defaults are implied).
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub user: ConfigFile,
    /// What `git sandbox init` detected and proposed (`$GIT_DIR/sandbox.toml`): parsed as a
    /// repository file (it was derived from a hostile tree), it stands for the `.sandbox.toml`
    /// of every commit that has none. Under a commit's own file only its `[watch]` and
    /// `[promote]` (which branches are the repository's) still apply.
    pub adopted: ConfigFile,
    pub repo: ConfigFile,
    /// Whether the commit (or work tree) has a `.sandbox.toml` of its own, even an empty one.
    pub repo_found: bool,
    /// The `[config]` table of an experiment's `experiment.toml`: committed like `.sandbox.toml`,
    /// so it too may only tighten the user's limits.
    pub experiment: ConfigFile,
    pub env: ConfigFile,
    pub flags: ConfigFile,
}

impl Layers {
    /// Read the user config and the environment. A missing user config is fine; a broken one is not.
    pub fn load(paths: &Paths) -> Result<Layers, ConfigError> {
        let user = match std::fs::read_to_string(&paths.user_config) {
            Ok(text) => parse_file(&paths.user_config.display().to_string(), &text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => {
                return Err(ConfigError {
                    location: Location {
                        source_label: paths.user_config.display().to_string(),
                        line: None,
                        key: None,
                    },
                    message: format!("cannot read it: {e}"),
                    hints: Vec::new(),
                })
            }
        };
        let env = env::from_env(std::env::vars())?;
        Ok(Layers {
            user,
            env,
            ..Layers::default()
        })
    }

    /// The same layers with a repository's `.sandbox.toml` (text as found in a commit or a work tree).
    pub fn with_repo_text(&self, label: &str, text: Option<&str>) -> Result<Layers, ConfigError> {
        let repo = match text {
            Some(text) => parse_repository_file(label, text)?,
            None => ConfigFile::default(),
        };
        Ok(Layers {
            repo,
            repo_found: text.is_some(),
            ..self.clone()
        })
    }

    /// The same layers with the settings `init` adopted the repository with
    /// (`$GIT_DIR/sandbox.toml`, read as a work tree's file is: no symlink, up to a cap).
    pub fn with_adopted(&self, git_dir: &Path) -> Result<Layers, ConfigError> {
        let adopted = match read_capped(git_dir, ADOPTED_FILE)? {
            Some((label, text)) => parse_repository_file(&label, &text).map_err(|mut e| {
                e.hints = vec![format!(
                    "fix it, or remove {label} and run `git sandbox init` again to detect it anew"
                )];
                e
            })?,
            None => ConfigFile::default(),
        };
        Ok(Layers {
            adopted,
            ..self.clone()
        })
    }

    /// Read the repository config from a work tree, if it has one. The work tree holds whatever
    /// a commit put there, so the file is read without following a symlink and up to a cap.
    pub fn with_repo_dir(&self, dir: &Path) -> Result<Layers, ConfigError> {
        match read_capped(dir, ".sandbox.toml")? {
            Some((label, text)) => self.with_repo_text(&label, Some(&text)),
            None => self.with_repo_text("", None),
        }
    }

    pub fn resolve(&self) -> Config {
        let mut c = Config::default();
        self.user.apply(&mut c);
        let policy = c.limits.clone();
        let net_policy = c.network.clone();
        let env_policy = c.environment.clone();
        let timeout = c.test.timeout;
        let phases = c.test.phases;
        let (retries, new_test_runs) = (c.test.retries, c.test.new_test_runs);
        let (gc, audit) = (c.gc.clone(), c.audit.clone());
        let cache_policy = c.cache.clone();
        let (gate, watch_mode) = (c.hooks.pre_push.clone(), c.watch.mode.clone());
        if self.repo_found {
            let branches = ConfigFile {
                watch: self.adopted.watch.clone(),
                promote: self.adopted.promote.clone(),
                ..ConfigFile::default()
            };
            branches.apply(&mut c);
        } else {
            self.adopted.apply(&mut c);
        }
        self.repo.apply(&mut c);
        self.experiment.apply(&mut c);
        // Housekeeping is the machine's business: committed files never set it (their parser
        // refuses `[gc]`; this keeps it so whatever builds the layers).
        c.gc = gc;
        c.audit = audit;
        // The repository and the experiment (often written by an agent) may only tighten the
        // user's policy; the policy's 0 means "unlimited", which only the user can say.
        let tighten = |policy: u64, asked: u64| match (policy, asked) {
            (0, a) => a,
            (p, 0) => p,
            (p, a) => p.min(a),
        };
        c.limits = Limits {
            memory_mb: tighten(policy.memory_mb, c.limits.memory_mb),
            cpu_seconds: tighten(policy.cpu_seconds, c.limits.cpu_seconds),
            cpu_millicores: tighten(policy.cpu_millicores, c.limits.cpu_millicores),
            processes: tighten(policy.processes, c.limits.processes),
            open_files: tighten(policy.open_files, c.limits.open_files),
            file_size_mb: tighten(policy.file_size_mb, c.limits.file_size_mb),
            output_bytes: tighten(policy.output_bytes, c.limits.output_bytes),
            disk_mb: tighten(policy.disk_mb, c.limits.disk_mb),
            network: c.limits.network && policy.network,
            // Only the user says "host" (a repository file that does is refused).
            network_host: policy.network_host,
            setup_network: c.limits.setup_network && policy.setup_network,
            checkout_mb: tighten(policy.checkout_mb, c.limits.checkout_mb),
        };
        // The user's timeout is a ceiling like every other limit; so is the cache's size, and a
        // cache the user switched off stays off.
        c.test.timeout = c.test.timeout.min(timeout);
        // Phases are the user's choice: a commit may turn them off, never on against the user.
        c.test.phases = c.test.phases && phases;
        // Retries and extra runs spend the user's CPU: a commit may ask fewer, never more.
        c.test.retries = retries.map(|r| c.test.retries.map_or(r, |a| a.min(r)));
        c.test.new_test_runs = c.test.new_test_runs.min(new_test_runs);
        c.cache.max_mb = tighten(cache_policy.max_mb, c.cache.max_mb);
        // A committed file narrows the user's hosts; the resolve table is the user's.
        c.network = NetworkConfig {
            allow: network::narrow(&net_policy.allow, &c.network.allow),
            setup_allow: network::narrow(&net_policy.setup_allow, &c.network.setup_allow),
            resolve: net_policy.resolve,
            ca_files: net_policy.ca_files,
        };
        // A committed file names the image; the registries stay the user's, the size only lowers.
        c.environment = environment::narrow(&env_policy, &c.environment);
        c.cache.enabled = c.cache.enabled && cache_policy.enabled;
        // The gate and the watch mode guard the user's remote and runs: a commit may make the
        // gate stricter and run every commit, never the other way.
        c.hooks.pre_push = stricter(&GATE_ORDER, &gate, &c.hooks.pre_push);
        c.watch.mode = stricter(&WATCH_MODE_ORDER, &watch_mode, &c.watch.mode);
        self.env.apply(&mut c);
        self.flags.apply(&mut c);
        c
    }
}

/// The gate's modes, loosest first: `wait` refuses all that `block` does, and a tip without a
/// result too.
const GATE_ORDER: [&str; 4] = ["off", "warn", "block", "wait"];

/// The watch modes, loosest first: `latest` skips commits that `every` runs.
const WATCH_MODE_ORDER: [&str; 2] = ["latest", "every"];

/// The stricter of the user's `policy` and what a committed file `asked` for, in `order`
/// (loosest first); a value not in it (none reaches here: the parser checks) keeps the policy.
fn stricter(order: &[&str], policy: &str, asked: &str) -> String {
    let rank = |v: &str| order.iter().position(|o| *o == v);
    match (rank(policy), rank(asked)) {
        (Some(p), Some(a)) if a > p => asked.to_string(),
        _ => policy.to_string(),
    }
}

/// Bumped when how a run uses the test selection changes what it records. 2: the record is the
/// user's command in its own order, the selection only a probe beside it (before, phase one's
/// files ran first, which could change a verdict: results made so are not reused).
const SELECTION_VERSION: u32 = 2;

impl Config {
    /// A stable fingerprint of everything that changes a result: with the tree id it is the
    /// cache key, so a different command, limit or threshold runs again.
    pub fn result_key(&self) -> String {
        let mut limits = serde_json::json!(self.limits);
        // Whether a tree fits only decides between a result and an error, and errors are never
        // reused: keep the keys of results recorded before this limit existed.
        if let Some(l) = limits.as_object_mut() {
            l.remove("checkout_mb");
            if !self.limits.network_host {
                l.remove("network_host");
            }
            // No quota: keep the keys of results recorded before it existed.
            if self.limits.cpu_millicores == 0 {
                l.remove("cpu_cores");
            }
            // Only a setup step uses it: keep the keys of results without one.
            if self.test.setup.is_none() {
                l.remove("setup_network");
            }
        }
        let mut json = serde_json::json!({
            "test": self.test, "limits": limits, "analysis": self.analysis,
            "selection": SELECTION_VERSION,
        });
        // Where the network leads changes the result; unset, the keys of earlier results stay.
        if self.network.is_set() {
            json["network"] = serde_json::json!(self.network);
        }
        // A run with the network reaches it through the proxy now: results made on the host's
        // network (which reached its loopback) are not served for it.
        let online =
            self.limits.network || (self.limits.setup_network && self.test.setup.is_some());
        if online && !self.limits.network_host {
            json["egress"] = "proxy".into();
        }
        // Named checks change the result; without any, the keys of earlier results stay.
        if !self.checks.is_empty() {
            json["checks"] = serde_json::json!(self.checks);
        }
        // The variables an environment sets change what runs (unset, earlier keys stay).
        if !self.environment.env.is_empty() {
            json["environment_env"] = serde_json::json!(self.environment.env);
        }
        // A result holds only for the tools it was made with.
        if !self.toolchain.is_empty() {
            json["toolchain"] = serde_json::json!(self.toolchain);
        }
        gs_util::fnv64_hex(json.to_string().as_bytes())
    }

    /// The watched branches (`main`, `experiment/*`), compiled once for any number of names.
    pub fn watched_branches(&self) -> Result<Globs, GlobError> {
        Globs::new(&self.watch.branches)
    }
}

/// A length of time as humantime reads it (`"90s"`, `"5m"`, `"1h 30m"`, `"1.5h"`, `"30d"`,
/// `"250ms"`, `"2 days"`), or a bare number of seconds, which humantime refuses and older
/// configurations use; `None` for anything else, and for zero.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let d = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        Duration::from_secs(s.parse().ok()?)
    } else {
        humantime::parse_duration(s).ok()?
    };
    (!d.is_zero()).then_some(d)
}

#[cfg(test)]
mod tests;
