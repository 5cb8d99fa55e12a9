//! One config file as written (every key optional) and its parser with file:line:key errors.

pub use super::checks::TestFile;
use super::de::{de_duration, de_timeout, hinted, set, HINT_MARK};
pub use super::machine::{GithubFile, IndexFile, NotifyFile, RemoteFile, TrustFile};
use super::network::{de_network, NetworkMode};
use super::{Config, ConfigError, Location};
use gs_util::hint::Hinted;
use serde::{Deserialize, Deserializer};
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub test: TestFile,
    #[serde(default)]
    pub limits: LimitsFile,
    #[serde(default)]
    pub analysis: AnalysisFile,
    #[serde(default)]
    pub watch: WatchFile,
    #[serde(default)]
    pub promote: PromoteFile,
    /// User config and environment only: [`parse_repository_file`] refuses it.
    #[serde(default)]
    pub gc: GcFile,
    /// User config and environment only, like `[gc]`.
    #[serde(default)]
    pub audit: AuditFile,
    #[serde(default)]
    pub cache: CacheFile,
    #[serde(default)]
    pub hooks: HooksFile,
    /// `[checks.NAME]`, in the order the file declares them (`[checks.test]` is folded into
    /// `[test]` once parsed).
    #[serde(default, deserialize_with = "super::checks::de_checks")]
    pub checks: Vec<(String, super::checks::CheckFile)>,
    /// User config and environment only, like `[gc]`.
    #[serde(default)]
    pub remote: RemoteFile,
    /// User config and environment only, like `[gc]`.
    #[serde(default)]
    pub github: GithubFile,
    /// User config and environment only, like `[gc]`.
    #[serde(default)]
    pub index: IndexFile,
    /// User config only, like `[gc]`.
    #[serde(default)]
    pub notify: NotifyFile,
    /// User config only, like `[gc]`.
    #[serde(default)]
    pub trust: TrustFile,
    /// `allow` and `setup_allow` narrow the user's; `resolve` is the user's only.
    #[serde(default)]
    pub network: super::network::NetworkFile,
    /// `image` and a lower `image_mb` from anywhere; the registries from the user only.
    #[serde(default)]
    pub environment: super::environment::EnvironmentFile,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheFile {
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "de_cache_dirs")]
    pub dirs: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_memory")]
    pub max_mb: Option<Limit>,
}

/// Directories of the tree whose build output is kept between runs: each inside the checkout.
fn de_cache_dirs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let dirs = Vec::<String>::deserialize(d)?;
    for s in &dirs {
        let p = std::path::Path::new(s);
        let bad = s.is_empty()
            || s.contains('\0')
            || p.is_absolute()
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)));
        if bad {
            return Err(hinted(
                format!("the cache directory {s:?} is not a plain path inside the checkout"),
                "name directories relative to the checkout's root, like \"target\" or \"web/node_modules\"",
            ));
        }
    }
    Ok(Some(dirs))
}

/// A limit as written: a positive number, or `"unlimited"` (only the user's own config may say
/// that; a repository's config that does is an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    At(u64),
    Unlimited,
}

impl Limit {
    /// The value the sandbox applies: 0 means no limit to rlimits and cgroups.
    pub fn raw(self) -> u64 {
        match self {
            Limit::At(n) => n,
            Limit::Unlimited => 0,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    #[serde(default, deserialize_with = "de_memory")]
    pub memory_mb: Option<Limit>,
    #[serde(default, deserialize_with = "de_cpu")]
    pub cpu_seconds: Option<Limit>,
    /// The run's share of the CPU, in thousandths of a core (written as cores: `1.5`).
    #[serde(default, deserialize_with = "de_cores")]
    pub cpu_cores: Option<Limit>,
    #[serde(default, deserialize_with = "de_processes")]
    pub processes: Option<Limit>,
    #[serde(default, deserialize_with = "de_open_files")]
    pub open_files: Option<Limit>,
    #[serde(default, deserialize_with = "de_memory")]
    pub file_size_mb: Option<Limit>,
    #[serde(default, deserialize_with = "de_output")]
    pub output_bytes: Option<Limit>,
    #[serde(default, deserialize_with = "de_memory")]
    pub disk_mb: Option<Limit>,
    #[serde(default, deserialize_with = "de_network")]
    pub network: Option<NetworkMode>,
    pub setup_network: Option<bool>,
    /// The largest tree a run checks out, in MiB.
    #[serde(default, deserialize_with = "de_memory")]
    pub checkout_mb: Option<Limit>,
}

impl LimitsFile {
    /// The keys set to `"unlimited"`, for refusing them where only the user may say so.
    pub fn unlimited_keys(&self) -> Vec<&'static str> {
        [
            ("memory_mb", self.memory_mb),
            ("cpu_seconds", self.cpu_seconds),
            ("cpu_cores", self.cpu_cores),
            ("processes", self.processes),
            ("open_files", self.open_files),
            ("file_size_mb", self.file_size_mb),
            ("output_bytes", self.output_bytes),
            ("disk_mb", self.disk_mb),
            ("checkout_mb", self.checkout_mb),
        ]
        .into_iter()
        .filter(|(_, v)| *v == Some(Limit::Unlimited))
        .map(|(k, _)| k)
        .collect()
    }
}

/// The largest value that still means something for each kind of limit; beyond it a value is
/// a mistake (or an attempt to loosen a limit), not a limit.
const MAX_MB: u64 = 16 << 20; // 16 TiB
const MAX_CPU_SECONDS: u64 = 366 * 24 * 3600;
const MAX_PROCESSES: u64 = 4 << 20;
const MAX_OPEN_FILES: u64 = 1 << 20;
const MAX_OUTPUT_BYTES: u64 = 1 << 40;

fn de_limit<'de, D: Deserializer<'de>>(
    d: D,
    max: u64,
    unit: &str,
) -> Result<Option<Limit>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(i64),
        Text(String),
    }
    match Raw::deserialize(d).map_err(|_: D::Error| {
        hinted::<D::Error>(
            "not a limit",
            format!("write a positive number of {unit}, or \"unlimited\" in your user config"),
        )
    })? {
        Raw::Int(n) if n <= 0 => Err(hinted(
            format!("{n} is not a limit"),
            format!("write a positive number of {unit} (no limit at all is \"unlimited\", in your user config only)"),
        )),
        Raw::Int(n) if n as u64 > max => Err(hinted(
            format!("{n} {unit} is beyond any real limit (at most {max})"),
            "write a real limit, or \"unlimited\" in your user config",
        )),
        Raw::Int(n) => Ok(Some(Limit::At(n as u64))),
        Raw::Text(t) if t == "unlimited" => Ok(Some(Limit::Unlimited)),
        Raw::Text(t) => Err(hinted(
            format!("invalid limit {t:?}"),
            format!("write a positive number of {unit}, or \"unlimited\" in your user config"),
        )),
    }
}

fn de_memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    de_limit(d, MAX_MB, "MiB")
}

fn de_cpu<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    de_limit(d, MAX_CPU_SECONDS, "CPU seconds")
}

/// The most cores a run may be given, and the fewest (a cgroup's quota is at least 1 ms per
/// 100 ms period).
const MAX_CORES: f64 = 4096.0;
const MIN_MILLICORES: u64 = 10;

/// `cpu_cores`: a positive number of cores (`1.5`, `2`), kept in thousandths of a core.
fn de_cores<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(i64),
        Float(f64),
        Text(String),
    }
    let fix = "write a number of cores like 1.5 (no quota at all is \"unlimited\", in your user config only)";
    let cores = match Raw::deserialize(d)
        .map_err(|_: D::Error| hinted::<D::Error>("not a number of cores", fix))?
    {
        Raw::Text(t) if t == "unlimited" => return Ok(Some(Limit::Unlimited)),
        Raw::Text(t) => return Err(hinted(format!("invalid number of cores {t:?}"), fix)),
        Raw::Int(n) => n as f64,
        Raw::Float(f) => f,
    };
    if !cores.is_finite() || cores <= 0.0 {
        return Err(hinted(format!("{cores} is not a number of cores"), fix));
    }
    if cores > MAX_CORES {
        return Err(hinted(
            format!("{cores} cores is beyond any real machine (at most {MAX_CORES})"),
            fix,
        ));
    }
    let millicores = (cores * 1000.0).round() as u64;
    if millicores < MIN_MILLICORES {
        return Err(hinted(
            format!("{cores} cores is less than a cgroup can give (at least 0.01)"),
            "write 0.01 cores or more",
        ));
    }
    Ok(Some(Limit::At(millicores)))
}

fn de_processes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    de_limit(d, MAX_PROCESSES, "processes")
}

fn de_open_files<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    de_limit(d, MAX_OPEN_FILES, "open files")
}

fn de_output<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
    de_limit(d, MAX_OUTPUT_BYTES, "bytes")
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisFile {
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "de_globs")]
    pub exclude: Option<Vec<String>>,
    pub max_complexity: Option<u64>,
    pub max_function_lines: Option<u64>,
    pub max_parameters: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchFile {
    #[serde(default, deserialize_with = "de_globs")]
    pub branches: Option<Vec<String>>,
    pub backfill: Option<u64>,
    #[serde(default, deserialize_with = "de_watch_mode")]
    pub mode: Option<String>,
}

fn de_watch_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    one_of(d, &["every", "latest"])
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksFile {
    #[serde(default, deserialize_with = "de_pre_push")]
    pub pre_push: Option<String>,
    #[serde(default, deserialize_with = "de_timeout")]
    pub pre_push_timeout: Option<Duration>,
}

fn de_pre_push<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    one_of(d, &["off", "warn", "block", "wait"])
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteFile {
    pub target: Option<String>,
    #[serde(default, deserialize_with = "de_strategy")]
    pub strategy: Option<String>,
    #[serde(default, deserialize_with = "de_minimum")]
    pub minimum: Option<String>,
    #[serde(default, deserialize_with = "de_points")]
    pub max_coverage_drop: Option<f64>,
    pub rollback: Option<bool>,
}

/// Percentage points: 0 to 100.
fn de_points<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = f64::deserialize(d)?;
    if !(0.0..=100.0).contains(&v) {
        return Err(hinted(
            format!("{v} is not a number of percentage points"),
            "write a number from 0 to 100, like 1.0",
        ));
    }
    Ok(Some(v))
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// 0: no audits by count.
    pub generations: Option<u64>,
    #[serde(default, deserialize_with = "de_duration")]
    pub every: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcFile {
    #[serde(default, deserialize_with = "de_duration")]
    pub logs: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub events: Option<Duration>,
    #[serde(default, deserialize_with = "de_positive")]
    pub max_log_mb: Option<u64>,
    #[serde(default, deserialize_with = "de_duration")]
    pub caches: Option<Duration>,
    #[serde(default, deserialize_with = "de_positive")]
    pub max_cache_mb: Option<u64>,
    #[serde(default, deserialize_with = "de_duration")]
    pub images: Option<Duration>,
}

fn de_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(hinted(
            "must be at least 1",
            "to keep logs by age alone, set a large bound",
        )),
        n => Ok(Some(n)),
    }
}

/// A list of globs, each of which must compile (so a bad one is named with its file and line).
fn de_globs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let patterns = Vec::<String>::deserialize(d)?;
    for p in &patterns {
        gs_util::glob::check(p).map_err(|e| {
            let mut text = e.problem();
            for h in e.hints() {
                text.push(HINT_MARK);
                text.push_str(&h);
            }
            serde::de::Error::custom(text)
        })?;
    }
    Ok(Some(patterns))
}

fn one_of<'de, D: Deserializer<'de>>(d: D, allowed: &[&str]) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if allowed.contains(&s.as_str()) {
        Ok(Some(s))
    } else {
        Err(hinted(
            format!("invalid value {s:?}"),
            format!("use one of {}", allowed.join(", ")),
        ))
    }
}

fn de_strategy<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    one_of(d, &["merge", "ff", "pull-request"])
}

fn de_minimum<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    one_of(d, &["STRONGLY_RECOMMEND", "RECOMMEND", "CONSIDER"])
}

impl ConfigFile {
    /// Lay this file's keys over `c`.
    pub fn apply(&self, c: &mut Config) {
        let t = &self.test;
        if let Some(v) = &t.command {
            c.test.command = Some(v.clone()).filter(|s| !s.trim().is_empty());
        }
        set(&mut c.test.timeout, t.timeout);
        if let Some(v) = &t.junit {
            c.test.junit = Some(v.clone());
        }
        if let Some(v) = &t.setup {
            c.test.setup = Some(v.clone()).filter(|s| !s.trim().is_empty());
        }
        if let Some(v) = &t.build {
            c.test.build = Some(v.clone()).filter(|s| !s.trim().is_empty());
        }
        set(&mut c.test.parallel, t.parallel);
        set(&mut c.test.phases, t.phases);
        if let Some(r) = t.retries {
            c.test.retries = Some(r);
        }
        set(&mut c.test.new_test_runs, t.new_test_runs);
        if let Some(v) = &t.coverage {
            c.test.coverage = Some(v.clone());
        }
        super::checks::apply(&self.checks, c);
        let n = &self.network;
        if let Some(a) = &n.allow {
            c.network.allow = Some(a.clone());
        }
        if let Some(a) = &n.setup_allow {
            c.network.setup_allow = Some(a.clone());
        }
        if let Some(r) = &n.resolve {
            c.network.resolve = r.clone();
        }
        if let Some(f) = &n.ca_files {
            c.network.ca_files = f.clone();
        }
        let l = &self.limits;
        set(&mut c.limits.memory_mb, l.memory_mb.map(Limit::raw));
        set(&mut c.limits.cpu_seconds, l.cpu_seconds.map(Limit::raw));
        set(&mut c.limits.cpu_millicores, l.cpu_cores.map(Limit::raw));
        set(&mut c.limits.processes, l.processes.map(Limit::raw));
        set(&mut c.limits.open_files, l.open_files.map(Limit::raw));
        set(&mut c.limits.file_size_mb, l.file_size_mb.map(Limit::raw));
        set(&mut c.limits.output_bytes, l.output_bytes.map(Limit::raw));
        set(&mut c.limits.disk_mb, l.disk_mb.map(Limit::raw));
        if let Some(mode) = l.network {
            c.limits.network = mode != NetworkMode::Off;
            c.limits.network_host = mode == NetworkMode::Host;
        }
        set(&mut c.limits.setup_network, l.setup_network);
        set(&mut c.limits.checkout_mb, l.checkout_mb.map(Limit::raw));
        let a = &self.analysis;
        set(&mut c.analysis.enabled, a.enabled);
        set(&mut c.analysis.exclude, a.exclude.clone());
        set(&mut c.analysis.max_complexity, a.max_complexity);
        set(&mut c.analysis.max_function_lines, a.max_function_lines);
        set(&mut c.analysis.max_parameters, a.max_parameters);
        set(&mut c.watch.branches, self.watch.branches.clone());
        set(&mut c.watch.backfill, self.watch.backfill);
        set(&mut c.watch.mode, self.watch.mode.clone());
        let p = &self.promote;
        set(&mut c.promote.target, p.target.clone());
        set(&mut c.promote.strategy, p.strategy.clone());
        set(&mut c.promote.minimum, p.minimum.clone());
        set(&mut c.promote.max_coverage_drop, p.max_coverage_drop);
        set(&mut c.promote.rollback, p.rollback);
        set(&mut c.hooks.pre_push, self.hooks.pre_push.clone());
        set(&mut c.hooks.pre_push_timeout, self.hooks.pre_push_timeout);
        let k = &self.cache;
        set(&mut c.cache.enabled, k.enabled);
        if let Some(d) = &k.dirs {
            c.cache.dirs = Some(d.clone());
        }
        set(&mut c.cache.max_mb, k.max_mb.map(Limit::raw));
        set(&mut c.audit.generations, self.audit.generations);
        set(&mut c.audit.every, self.audit.every);
        let g = &self.gc;
        set(&mut c.gc.logs, g.logs);
        set(&mut c.gc.events, g.events);
        set(&mut c.gc.max_log_mb, g.max_log_mb);
        set(&mut c.gc.caches, g.caches);
        set(&mut c.gc.max_cache_mb, g.max_cache_mb);
        set(&mut c.gc.images, g.images);
        self.environment.apply(&mut c.environment);
        // The machine's own sections.
        set(&mut c.remote.auto_push, self.remote.auto_push);
        if let Some(p) = self.remote.poll {
            c.remote.poll = Some(p);
        }
        if let Some(f) = &self.remote.webhook_secret_file {
            c.remote.webhook_secret_file = Some(f.clone());
        }
        let h = &self.github;
        set(&mut c.github.api_url, h.api_url.clone());
        set(&mut c.github.web_url, h.web_url.clone());
        if let Some(t) = &h.token_command {
            c.github.token_command = Some(t.clone());
        }
        set(&mut c.github.statuses, h.statuses);
        if let Some(v) = h.app_id {
            c.github.app_id = Some(v);
        }
        if let Some(v) = &h.app_key_file {
            c.github.app_key_file = Some(v.clone());
        }
        if let Some(v) = h.installation_id {
            c.github.installation_id = Some(v);
        }
        if let Some(u) = &self.index.url {
            c.index.url = Some(u.clone());
        }
        set(&mut c.index.lease, self.index.lease);
        if let Some(a) = &self.trust.allowed_signers {
            c.trust.allowed_signers = Some(a.clone());
        }
        let n = &self.notify;
        for (slot, v) in [
            (&mut c.notify.webhook, &n.webhook),
            (&mut c.notify.secret_file, &n.secret_file),
            (&mut c.notify.command, &n.command),
        ] {
            if let Some(v) = v {
                *slot = Some(v.clone()).filter(|s| !s.trim().is_empty());
            }
        }
    }
}

/// Parse one config text. Errors name `label`, the line and the dotted key.
pub fn parse_file(label: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let mut file = parse_toml(label, text)?;
    super::checks::settle(label, text, &mut file.checks, &mut file.test)?;
    Ok(file)
}

fn parse_toml(label: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    toml::from_str::<ConfigFile>(text).map_err(|e| {
        let (line, key) = match e.span() {
            Some(span) => locate(text, span.start),
            None => (None, None),
        };
        let text = e.message().trim().replace('\n', " ");
        let mut parts = text.split(HINT_MARK).map(str::to_string);
        let message = parts.next().unwrap_or_default();
        let mut hints: Vec<String> = parts.collect();
        if message.starts_with("unknown field") {
            hints.push(
                "remove it or fix its spelling (`git sandbox config --example` prints every key)"
                    .into(),
            );
        }
        ConfigError {
            location: Location {
                source_label: label.to_string(),
                line,
                key,
            },
            message,
            hints,
        }
    })
}

/// Parse the config of a repository (its `.sandbox.toml`, or an experiment's `[config]`):
/// written by whoever commits, so it may only tighten the user's policy, and "no limit" is not
/// its to say; nor are `[gc]` (what the machine keeps on its disk) and `[remote]` (where it sends
/// results).
pub fn parse_repository_file(label: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let file = parse_file(label, text)?;
    let user_only = [
        (
            "gc",
            file.gc != GcFile::default(),
            "what the machine keeps on its disk",
        ),
        (
            "remote",
            file.remote != RemoteFile::default(),
            "where this machine sends results",
        ),
        (
            "audit",
            file.audit != AuditFile::default(),
            "how often this machine checks its build caches",
        ),
        (
            "github",
            file.github != GithubFile::default(),
            "how this machine talks to GitHub, with its token",
        ),
        (
            "index",
            file.index != IndexFile::default(),
            "which database this machine keeps its index in",
        ),
        (
            "notify",
            file.notify != NotifyFile::default(),
            "where this machine sends notifications",
        ),
        (
            "trust",
            file.trust != TrustFile::default(),
            "whose results this machine takes as evidence",
        ),
    ];
    if let Some((section, _, what)) = user_only.iter().find(|(_, set, _)| *set) {
        let (line, key) = section_line(text, section);
        return Err(ConfigError {
            location: Location {
                source_label: label.to_string(),
                line,
                key: Some(key),
            },
            message: format!("[{section}] is read from your user config only (~/.config/git-sandbox/config.toml), never from a repository: it says {what}"),
            hints: vec!["move it there or remove it".into()],
        });
    }
    // Keys a repository may not set in a section it otherwise may: each widens what a run reaches.
    let user_only_keys = [
        (
            "network.resolve",
            file.network.resolve.is_some(),
            "where names lead on this machine",
        ),
        (
            "network.ca_files",
            file.network.ca_files.is_some(),
            "which certificate authorities this machine's runs trust",
        ),
        (
            "environment.registries",
            file.environment.registries.is_some(),
            "which registries this machine pulls images from",
        ),
        (
            "environment.insecure_registries",
            file.environment.insecure_registries.is_some(),
            "which registries this machine reaches over plain HTTP, at any address",
        ),
        (
            "limits.network",
            file.limits.network == Some(NetworkMode::Host),
            "that runs share the host's own network (\"host\")",
        ),
    ];
    if let Some((full, _, what)) = user_only_keys.iter().find(|(_, set, _)| *set) {
        let key = full.rsplit('.').next().unwrap_or(full);
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(key))
            .map(|i| i + 1);
        return Err(ConfigError {
            location: Location {
                source_label: label.to_string(),
                line,
                key: Some(full.to_string()),
            },
            message: format!("a repository cannot set this: it says {what}, which is your user config's to say (~/.config/git-sandbox/config.toml)"),
            hints: vec!["move it there or remove it".into()],
        });
    }
    let mut unlimited: Vec<String> = file
        .limits
        .unlimited_keys()
        .into_iter()
        .map(|k| format!("limits.{k}"))
        .collect();
    if file.cache.max_mb == Some(Limit::Unlimited) {
        unlimited.push("cache.max_mb".into());
    }
    if let Some(full) = unlimited.first() {
        let key = full.rsplit('.').next().unwrap_or(full);
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(key) && l.contains("unlimited"))
            .map(|i| i + 1);
        return Err(ConfigError {
            location: Location {
                source_label: label.to_string(),
                line,
                key: Some(full.clone()),
            },
            message:
                "a repository cannot lift a limit (\"unlimited\" is for your user config only)"
                    .into(),
            hints: vec!["write a positive number, or leave the key out to keep your policy".into()],
        });
    }
    Ok(file)
}

/// Where `text` opens the table `section` (`[gc]`, `[gc.x]`) or sets a `gc.` key at the top
/// level.
fn section_line(text: &str, section: &str) -> (Option<usize>, String) {
    let mut top = true;
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if let Some(header) = l.strip_prefix('[') {
            let name = header
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("");
            let name = name.trim().trim_matches('"');
            if name == section
                || name
                    .strip_prefix(section)
                    .is_some_and(|r| r.starts_with('.'))
            {
                return (Some(i + 1), section.into());
            }
            top = false;
        } else if top {
            let k = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if k == section || k.strip_prefix(section).is_some_and(|r| r.starts_with('.')) {
                return (Some(i + 1), k.into());
            }
        }
    }
    (None, section.into())
}

/// The 1-based line of byte `offset` and the dotted key written there (`limits.memory_mb`).
fn locate(text: &str, offset: usize) -> (Option<usize>, Option<String>) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let mut section = None;
    for l in before
        .lines()
        .rev()
        .skip(usize::from(!before.ends_with('\n')))
    {
        let l = l.trim();
        if l.starts_with('[') {
            section = Some(l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
            break;
        }
    }
    let trimmed = line.trim();
    let key = if trimmed.starts_with('[') {
        Some(
            trimmed
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string(),
        )
    } else {
        trimmed.split_once('=').map(|(k, _)| {
            let k = k.trim().trim_matches('"');
            match &section {
                Some(s) => format!("{s}.{k}"),
                None => k.to_string(),
            }
        })
    };
    (Some(line_no), key)
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
