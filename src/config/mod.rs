//! Configuration: the places the tool keeps its data, and the layered settings
//! (built-in defaults < user config < repository `.sandbox.toml` < `SANDBOX_*` environment < flags),
//! where the repository may only tighten the user's limits.

mod file;

pub use file::{parse_file, parse_repo_file, ConfigFile};

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ConfigError {
    pub location: Location,
    pub message: String,
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
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    pub memory_mb: u64,
    pub cpu_seconds: u64,
    pub processes: u64,
    pub open_files: u64,
    /// RLIMIT_FSIZE: the largest file the tests may write.
    pub file_size_mb: u64,
    pub output_bytes: u64,
    pub network: bool,
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
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromoteConfig {
    pub target: String,
    pub strategy: String,
    pub minimum: String,
}

/// The effective settings for one repository (and, for runs, one commit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub test: TestConfig,
    pub limits: Limits,
    pub analysis: AnalysisConfig,
    pub watch: WatchConfig,
    pub promote: PromoteConfig,
    pub gc: GcConfig,
}

const DAY: u64 = 86_400;

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            test: TestConfig {
                command: None,
                timeout: Duration::from_secs(300),
                junit: None,
            },
            limits: Limits {
                memory_mb: 2048,
                cpu_seconds: 600,
                processes: 256,
                open_files: 1024,
                file_size_mb: 1024,
                output_bytes: 10 * 1024 * 1024,
                network: false,
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
            },
            promote: PromoteConfig {
                target: "main".into(),
                strategy: "merge".into(),
                minimum: "RECOMMEND".into(),
            },
            gc: GcConfig {
                logs: Duration::from_secs(30 * DAY),
                events: Duration::from_secs(90 * DAY),
                max_log_mb: 1024,
            },
        }
    }
}

/// The layers that make up a [`Config`], lowest priority first (the defaults are implied).
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub user: ConfigFile,
    pub repo: ConfigFile,
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
                })
            }
        };
        let env = file::from_env(std::env::vars())?;
        Ok(Layers {
            user,
            env,
            ..Layers::default()
        })
    }

    /// The same layers with a repository's `.sandbox.toml` (text as found in a commit or a work tree).
    pub fn with_repo_text(&self, label: &str, text: Option<&str>) -> Result<Layers, ConfigError> {
        let repo = match text {
            Some(text) => parse_repo_file(label, text)?,
            None => ConfigFile::default(),
        };
        Ok(Layers {
            repo,
            ..self.clone()
        })
    }

    /// Read the repository config from a work tree, if it has one.
    pub fn with_repo_dir(&self, dir: &Path) -> Result<Layers, ConfigError> {
        let path = dir.join(".sandbox.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => self.with_repo_text(&path.display().to_string(), Some(&text)),
            Err(_) => Ok(self.clone()),
        }
    }

    pub fn resolve(&self) -> Config {
        let mut c = Config::default();
        self.user.apply(&mut c);
        let policy = c.limits.clone();
        let gc = c.gc.clone();
        self.repo.apply(&mut c);
        self.experiment.apply(&mut c);
        // Housekeeping is the machine's business: committed files never set it (their parser
        // refuses `[gc]`; this keeps it so whatever builds the layers).
        c.gc = gc;
        // The repository (often written by an agent) may only tighten the user's policy.
        c.limits = Limits {
            memory_mb: c.limits.memory_mb.min(policy.memory_mb),
            cpu_seconds: c.limits.cpu_seconds.min(policy.cpu_seconds),
            processes: c.limits.processes.min(policy.processes),
            open_files: c.limits.open_files.min(policy.open_files),
            file_size_mb: c.limits.file_size_mb.min(policy.file_size_mb),
            output_bytes: c.limits.output_bytes.min(policy.output_bytes),
            network: c.limits.network && policy.network,
        };
        self.env.apply(&mut c);
        self.flags.apply(&mut c);
        c
    }
}

impl Config {
    /// A stable fingerprint of everything that changes a result: with the tree id it is the
    /// cache key, so a different command, limit or threshold runs again.
    pub fn result_key(&self) -> String {
        let json = serde_json::json!({
            "test": self.test, "limits": self.limits, "analysis": self.analysis,
        });
        crate::util::fnv64_hex(json.to_string().as_bytes())
    }

    /// Whether a short branch name (`main`, `experiment/x`) is watched.
    pub fn watches(&self, branch: &str) -> bool {
        self.watch.branches.iter().any(|p| glob_match(p, branch))
    }
}

/// `*` matches within one path segment, `**` across segments, `?` one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => {
                let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
                (0..=t.len()).any(|i| go(rest, &t[i..]) || (i > 0 && go(&p[2..], &t[i..])))
            }
            Some(b'*') => (0..=t.len())
                .take_while(|&i| i == 0 || t[i - 1] != b'/')
                .any(|i| go(&p[1..], &t[i..])),
            Some(b'?') => !t.is_empty() && t[0] != b'/' && go(&p[1..], &t[1..]),
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// `"90s"`, `"5m"`, `"1h"`, `"30d"`, `"250ms"` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let d = match unit.trim() {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        "d" => Duration::from_secs(n.checked_mul(DAY)?),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Some(Duration::from_secs(12)));
        assert_eq!(
            parse_duration("30d"),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(parse_duration("99999999999999999d"), None);
        assert_eq!(parse_duration("0s"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
        assert_eq!(parse_duration("-1s"), None);
    }

    #[test]
    fn globs() {
        assert!(glob_match("experiment/*", "experiment/fast"));
        assert!(!glob_match("experiment/*", "experiment/a/b"));
        assert!(glob_match("vendor/**", "vendor/a/b.py"));
        assert!(glob_match("**/gen_*.py", "a/b/gen_x.py"));
        assert!(glob_match("**/gen_*.py", "gen_x.py"));
        assert!(glob_match("main", "main"));
        assert!(!glob_match("main", "mainline"));
    }

    #[test]
    fn repository_may_only_tighten_limits() {
        let user = parse_file("user", "[limits]\nmemory_mb = 512\nnetwork = false\n").unwrap();
        let repo = parse_file(
            "repo",
            "[limits]\nmemory_mb = 99999\nprocesses = 10\nnetwork = true\n[test]\ntimeout = \"5s\"\n",
        )
        .unwrap();
        let c = Layers {
            user,
            repo,
            ..Layers::default()
        }
        .resolve();
        assert_eq!(c.limits.memory_mb, 512);
        assert_eq!(c.limits.processes, 10);
        assert!(!c.limits.network);
        assert_eq!(c.test.timeout, Duration::from_secs(5));
    }

    #[test]
    fn gc_comes_from_the_user_config_only() {
        let user = parse_file("user", "[gc]\nlogs = \"7d\"\nmax_log_mb = 10\n").unwrap();
        let mut experiment = ConfigFile::default();
        // Even a layer built without the repository parser cannot change it.
        experiment.gc.logs = Some(Duration::from_secs(1));
        let c = Layers {
            user,
            experiment,
            ..Layers::default()
        }
        .resolve();
        assert_eq!(c.gc.logs, Duration::from_secs(7 * 86_400));
        assert_eq!(c.gc.events, Duration::from_secs(90 * 86_400));
        assert_eq!(c.gc.max_log_mb, 10);
        let err = parse_repo_file(
            ".sandbox.toml",
            "[test]\ncommand = \"x\"\n\n[gc]\nlogs = \"1d\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(".sandbox.toml:4: key `gc`: [gc] is read from your user config only"),
            "{err}"
        );
        let err = parse_repo_file("r", "gc.events = \"1d\"\n").unwrap_err();
        assert_eq!(err.location.line, Some(1), "{err}");
    }

    #[test]
    fn result_key_follows_the_command() {
        let a = Config::default();
        let mut b = Config::default();
        b.test.command = Some("true".into());
        assert_ne!(a.result_key(), b.result_key());
        assert_eq!(a.result_key(), Config::default().result_key());
    }
}
