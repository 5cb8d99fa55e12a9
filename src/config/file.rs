//! One config file as written (every key optional), its parser with file:line:key errors, and the
//! `SANDBOX_*` environment mapped onto the same shape.

use super::{parse_duration, Config, ConfigError, Location};
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
    /// User config and environment only: [`parse_repo_file`] refuses it.
    #[serde(default)]
    pub gc: GcFile,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    pub command: Option<String>,
    #[serde(default, deserialize_with = "de_duration")]
    pub timeout: Option<Duration>,
    pub junit: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    pub memory_mb: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub output_bytes: Option<u64>,
    pub network: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisFile {
    pub enabled: Option<bool>,
    pub exclude: Option<Vec<String>>,
    pub max_complexity: Option<u64>,
    pub max_function_lines: Option<u64>,
    pub max_parameters: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchFile {
    pub branches: Option<Vec<String>>,
    pub backfill: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteFile {
    pub target: Option<String>,
    #[serde(default, deserialize_with = "de_strategy")]
    pub strategy: Option<String>,
    #[serde(default, deserialize_with = "de_minimum")]
    pub minimum: Option<String>,
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
}

fn de_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(serde::de::Error::custom(
            "must be at least 1; to keep logs by age alone, set a large bound",
        )),
        n => Ok(Some(n)),
    }
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    let text = match Raw::deserialize(d)? {
        Raw::Secs(n) => n.to_string(),
        Raw::Text(t) => t,
    };
    parse_duration(&text).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "invalid duration {text:?}: write a positive number with a unit, like \"90s\", \"5m\", \"1h\" or \"30d\""
        ))
    })
}

fn one_of<'de, D: Deserializer<'de>>(d: D, allowed: &[&str]) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if allowed.contains(&s.as_str()) {
        Ok(Some(s))
    } else {
        Err(serde::de::Error::custom(format!(
            "invalid value {s:?}: use one of {}",
            allowed.join(", ")
        )))
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
        let l = &self.limits;
        set(&mut c.limits.memory_mb, l.memory_mb);
        set(&mut c.limits.cpu_seconds, l.cpu_seconds);
        set(&mut c.limits.processes, l.processes);
        set(&mut c.limits.open_files, l.open_files);
        set(&mut c.limits.file_size_mb, l.file_size_mb);
        set(&mut c.limits.output_bytes, l.output_bytes);
        set(&mut c.limits.network, l.network);
        let a = &self.analysis;
        set(&mut c.analysis.enabled, a.enabled);
        set(&mut c.analysis.exclude, a.exclude.clone());
        set(&mut c.analysis.max_complexity, a.max_complexity);
        set(&mut c.analysis.max_function_lines, a.max_function_lines);
        set(&mut c.analysis.max_parameters, a.max_parameters);
        set(&mut c.watch.branches, self.watch.branches.clone());
        set(&mut c.watch.backfill, self.watch.backfill);
        let p = &self.promote;
        set(&mut c.promote.target, p.target.clone());
        set(&mut c.promote.strategy, p.strategy.clone());
        set(&mut c.promote.minimum, p.minimum.clone());
        let g = &self.gc;
        set(&mut c.gc.logs, g.logs);
        set(&mut c.gc.events, g.events);
        set(&mut c.gc.max_log_mb, g.max_log_mb);
    }
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// Parse one config text. Errors name `label`, the line and the dotted key.
pub fn parse_file(label: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    toml::from_str::<ConfigFile>(text).map_err(|e| {
        let (line, key) = match e.span() {
            Some(span) => locate(text, span.start),
            None => (None, None),
        };
        let mut message = e.message().trim().replace('\n', " ");
        if message.starts_with("unknown field") {
            message.push_str("; remove it or fix its spelling (see .sandbox.toml.example)");
        }
        ConfigError {
            location: Location {
                source_label: label.to_string(),
                line,
                key,
            },
            message,
        }
    })
}

/// Parse a config that is committed in a repository (`.sandbox.toml`, an experiment's
/// `[config]`): as [`parse_file`], but `[gc]` is refused, since what the machine keeps on its
/// disk is not a repository's to decide.
pub fn parse_repo_file(label: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let file = parse_file(label, text)?;
    if file.gc == GcFile::default() {
        return Ok(file);
    }
    let (line, key) = gc_line(text);
    Err(ConfigError {
        location: Location {
            source_label: label.to_string(),
            line,
            key: Some(key),
        },
        message: "[gc] is read from your user config only (~/.config/git-sandbox/config.toml), never from a repository; move it there or remove it".into(),
    })
}

/// Where `text` opens its `gc` table (`[gc]`, `[gc.x]`) or sets a `gc.` key at the top level.
fn gc_line(text: &str) -> (Option<usize>, String) {
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
            if name == "gc" || name.starts_with("gc.") {
                return (Some(i + 1), "gc".into());
            }
            top = false;
        } else if top {
            let k = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if k == "gc" || k.starts_with("gc.") {
                return (Some(i + 1), k.into());
            }
        }
    }
    (None, "gc".into())
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

#[derive(Clone, Copy)]
enum Kind {
    Text,
    Raw,
    List,
}

/// Every key the environment may set, as (section, key, kind).
const ENV_KEYS: &[(&str, &str, Kind)] = &[
    ("test", "command", Kind::Text),
    ("test", "timeout", Kind::Text),
    ("test", "junit", Kind::Text),
    ("limits", "memory_mb", Kind::Raw),
    ("limits", "cpu_seconds", Kind::Raw),
    ("limits", "processes", Kind::Raw),
    ("limits", "open_files", Kind::Raw),
    ("limits", "file_size_mb", Kind::Raw),
    ("limits", "output_bytes", Kind::Raw),
    ("limits", "network", Kind::Raw),
    ("analysis", "enabled", Kind::Raw),
    ("analysis", "exclude", Kind::List),
    ("analysis", "max_complexity", Kind::Raw),
    ("analysis", "max_function_lines", Kind::Raw),
    ("analysis", "max_parameters", Kind::Raw),
    ("watch", "branches", Kind::List),
    ("watch", "backfill", Kind::Raw),
    ("promote", "target", Kind::Text),
    ("promote", "strategy", Kind::Text),
    ("promote", "minimum", Kind::Text),
    ("gc", "logs", Kind::Text),
    ("gc", "events", Kind::Text),
    ("gc", "max_log_mb", Kind::Raw),
];

/// `SANDBOX_<SECTION>_<KEY>` variables, e.g. `SANDBOX_TEST_TIMEOUT=90s`,
/// `SANDBOX_WATCH_BRANCHES=main,exp/*`. Other `SANDBOX_*` names are ignored.
pub fn from_env(vars: impl Iterator<Item = (String, String)>) -> Result<ConfigFile, ConfigError> {
    let mut text = String::new();
    let mut names = Vec::new();
    let vars: Vec<(String, String)> = vars.filter(|(k, _)| k.starts_with("SANDBOX_")).collect();
    for (section, key, kind) in ENV_KEYS {
        let name = format!("SANDBOX_{}_{}", section, key).to_uppercase();
        let Some((_, value)) = vars.iter().find(|(k, _)| *k == name) else {
            continue;
        };
        let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
        let value = match kind {
            Kind::Text => quote(value),
            Kind::Raw => value.trim().to_string(),
            Kind::List => {
                let items: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(quote)
                    .collect();
                format!("[{}]", items.join(", "))
            }
        };
        // One table per variable keeps each on its own line for error reporting.
        text.push_str(&format!("[{section}]\n{key} = {value}\n"));
        names.push(name);
    }
    if text.is_empty() {
        return Ok(ConfigFile::default());
    }
    // Tables may repeat in this synthetic text; parse each variable alone to name it in errors.
    let mut merged = ConfigFile::default();
    for (chunk, name) in text
        .split_inclusive('\n')
        .collect::<Vec<_>>()
        .chunks(2)
        .zip(&names)
    {
        let one = chunk.concat();
        let parsed =
            parse_file(&format!("environment variable {name}"), &one).map_err(|mut e| {
                e.location.line = None;
                e.location.key = None;
                e
            })?;
        merge(&mut merged, parsed);
    }
    Ok(merged)
}

fn merge(into: &mut ConfigFile, from: ConfigFile) {
    macro_rules! take {
        ($($s:ident . $k:ident),*) => { $( if from.$s.$k.is_some() { into.$s.$k = from.$s.$k.clone(); } )* };
    }
    take!(
        test.command,
        test.timeout,
        test.junit,
        limits.memory_mb,
        limits.cpu_seconds,
        limits.processes,
        limits.open_files,
        limits.file_size_mb,
        limits.output_bytes,
        limits.network,
        analysis.enabled,
        analysis.exclude,
        analysis.max_complexity,
        analysis.max_function_lines,
        analysis.max_parameters,
        watch.branches,
        watch.backfill,
        promote.target,
        promote.strategy,
        promote.minimum,
        gc.logs,
        gc.events,
        gc.max_log_mb
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse_file(
            ".sandbox.toml",
            "[test]\ncommand = \"x\"\n\n[limits]\nmemroy_mb = 5\n",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(".sandbox.toml:5: key `limits.memroy_mb`: unknown field `memroy_mb`"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_type_names_file_line_and_key() {
        let err = parse_file("cfg.toml", "[limits]\nmemory_mb = \"lots\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("cfg.toml:2: key `limits.memory_mb`:"),
            "{msg}"
        );
        let err = parse_file("cfg.toml", "[test]\ntimeout = \"soon\"\n").unwrap_err();
        assert!(
            err.to_string().contains("invalid duration \"soon\""),
            "{err}"
        );
        let err = parse_file("cfg.toml", "[promote]\nstrategy = \"yolo\"\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("use one of merge, ff, pull-request"),
            "{err}"
        );
    }

    #[test]
    fn malformed_toml_names_the_line() {
        let err = parse_file("c.toml", "[test]\ncommand = \n").unwrap_err();
        assert_eq!(err.location.line, Some(2), "{err}");
    }

    #[test]
    fn environment_overrides_and_names_the_variable() {
        let vars = vec![
            ("SANDBOX_TEST_TIMEOUT".to_string(), "90s".to_string()),
            (
                "SANDBOX_WATCH_BRANCHES".to_string(),
                "main, exp/*".to_string(),
            ),
            ("SANDBOX_LIMITS_NETWORK".to_string(), "true".to_string()),
            ("SANDBOX_SOMETHING_ELSE".to_string(), "ignored".to_string()),
        ];
        let f = from_env(vars.into_iter()).unwrap();
        assert_eq!(f.test.timeout, Some(Duration::from_secs(90)));
        assert_eq!(f.watch.branches, Some(vec!["main".into(), "exp/*".into()]));
        assert_eq!(f.limits.network, Some(true));
        let gc = vec![
            ("SANDBOX_GC_LOGS".to_string(), "2d".to_string()),
            ("SANDBOX_GC_MAX_LOG_MB".to_string(), "5".to_string()),
        ];
        let f = from_env(gc.into_iter()).unwrap();
        assert_eq!(f.gc.logs, Some(Duration::from_secs(2 * 86_400)));
        assert_eq!(f.gc.max_log_mb, Some(5));
        let bad = vec![("SANDBOX_LIMITS_MEMORY_MB".to_string(), "lots".to_string())];
        let err = from_env(bad.into_iter()).unwrap_err().to_string();
        assert!(
            err.starts_with("environment variable SANDBOX_LIMITS_MEMORY_MB:"),
            "{err}"
        );
    }
}
