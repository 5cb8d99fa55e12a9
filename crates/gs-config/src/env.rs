//! The `SANDBOX_*` environment mapped onto the shape of a config file: each variable parsed as
//! a one-key file, so an error names the variable.

use super::file::{parse_file, ConfigFile};
use super::ConfigError;

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
    ("test", "setup", Kind::Text),
    ("test", "build", Kind::Text),
    ("test", "coverage", Kind::Text),
    ("limits", "memory_mb", Kind::Raw),
    ("limits", "cpu_seconds", Kind::Raw),
    ("limits", "cpu_cores", Kind::Raw),
    ("limits", "processes", Kind::Raw),
    ("limits", "open_files", Kind::Raw),
    ("limits", "file_size_mb", Kind::Raw),
    ("limits", "output_bytes", Kind::Raw),
    ("limits", "disk_mb", Kind::Raw),
    ("limits", "network", Kind::Raw),
    ("limits", "setup_network", Kind::Raw),
    ("limits", "checkout_mb", Kind::Raw),
    ("network", "allow", Kind::List),
    ("network", "setup_allow", Kind::List),
    ("analysis", "enabled", Kind::Raw),
    ("analysis", "exclude", Kind::List),
    ("analysis", "max_complexity", Kind::Raw),
    ("analysis", "max_function_lines", Kind::Raw),
    ("analysis", "max_parameters", Kind::Raw),
    ("watch", "branches", Kind::List),
    ("watch", "backfill", Kind::Raw),
    ("watch", "mode", Kind::Text),
    ("promote", "target", Kind::Text),
    ("promote", "strategy", Kind::Text),
    ("promote", "minimum", Kind::Text),
    ("promote", "max_coverage_drop", Kind::Raw),
    ("promote", "rollback", Kind::Raw),
    ("hooks", "pre_push", Kind::Text),
    ("hooks", "pre_push_timeout", Kind::Text),
    ("cache", "enabled", Kind::Raw),
    ("cache", "dirs", Kind::List),
    ("cache", "max_mb", Kind::Raw),
    ("audit", "generations", Kind::Raw),
    ("audit", "every", Kind::Text),
    ("gc", "logs", Kind::Text),
    ("gc", "events", Kind::Text),
    ("gc", "max_log_mb", Kind::Raw),
    ("gc", "caches", Kind::Text),
    ("gc", "max_cache_mb", Kind::Raw),
    ("gc", "images", Kind::Text),
    ("environment", "image", Kind::Text),
    ("environment", "registries", Kind::List),
    ("environment", "insecure_registries", Kind::List),
    ("environment", "image_mb", Kind::Raw),
    ("environment", "devcontainer", Kind::Text),
    ("environment", "dockerfile", Kind::Text),
    ("remote", "auto_push", Kind::Raw),
    ("remote", "poll", Kind::Text),
    ("remote", "webhook_secret_file", Kind::Text),
    ("github", "api_url", Kind::Text),
    ("github", "web_url", Kind::Text),
    ("github", "token_command", Kind::Text),
    ("github", "statuses", Kind::Raw),
    ("github", "app_id", Kind::Raw),
    ("github", "app_key_file", Kind::Text),
    ("github", "installation_id", Kind::Raw),
    ("index", "url", Kind::Text),
    ("index", "lease", Kind::Text),
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
            Kind::Raw if matches!(value.trim(), "unlimited" | "host") => quote(value.trim()),
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
        test.setup,
        test.build,
        limits.memory_mb,
        limits.cpu_seconds,
        limits.cpu_cores,
        limits.processes,
        limits.open_files,
        limits.file_size_mb,
        limits.output_bytes,
        limits.disk_mb,
        limits.network,
        limits.setup_network,
        limits.checkout_mb,
        network.allow,
        network.setup_allow,
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
        cache.enabled,
        cache.dirs,
        cache.max_mb,
        audit.generations,
        audit.every,
        gc.logs,
        gc.events,
        gc.max_log_mb,
        gc.caches,
        gc.max_cache_mb,
        gc.images,
        environment.image,
        environment.registries,
        environment.insecure_registries,
        environment.image_mb,
        environment.devcontainer,
        environment.dockerfile,
        remote.auto_push,
        remote.poll,
        remote.webhook_secret_file,
        github.api_url,
        github.web_url,
        github.token_command,
        github.statuses,
        github.app_id,
        github.app_key_file,
        github.installation_id
    );
}
