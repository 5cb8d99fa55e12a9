//! The environment a test command sees: an allowlist, never the user's tokens or secrets, with
//! HOME and TMPDIR inside the run's own directory.

use std::path::Path;

/// Variables passed through when set. Everything else (tokens, cloud credentials, SSH agent
/// sockets, …) is dropped.
const PASS: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "GOPATH",
    "GOFLAGS",
    "JAVA_HOME",
    "NODE_PATH",
    "NVM_DIR",
    "SOURCE_DATE_EPOCH",
];

/// Build the environment for a run whose private directory is `root` (HOME and TMPDIR go there).
pub fn sandbox_env(root: &Path) -> Vec<(String, String)> {
    let mut env = toolchain_env();
    let home = root.join("home");
    let tmp = root.join("tmp");
    let _ = std::fs::create_dir_all(&home);
    let _ = std::fs::create_dir_all(&tmp);
    env.extend([
        ("HOME".to_string(), home.display().to_string()),
        ("TMPDIR".to_string(), tmp.display().to_string()),
        ("CI".to_string(), "true".to_string()),
        ("GIT_SANDBOX".to_string(), "1".to_string()),
        ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
        ("NO_COLOR".to_string(), "1".to_string()),
    ]);
    env
}

/// Without the network, package managers are told so: npm and pnpm otherwise retry every
/// request with backoff until the timeout and print nothing meanwhile; offline they fail at
/// once with their own message ("ENOTCACHED", "not in the cache"), which the log then holds.
/// A variable the command's environment already sets is left as it is.
pub fn with_offline(mut env: Vec<(String, String)>, network: bool) -> Vec<(String, String)> {
    if network {
        return env;
    }
    for (k, v) in [
        ("npm_config_offline", "true"),
        ("npm_config_fetch_retries", "0"),
        ("YARN_ENABLE_OFFLINE_MODE", "1"),
        ("UV_OFFLINE", "1"),
        ("PIP_RETRIES", "0"),
    ] {
        if !env.iter().any(|(name, _)| name == k) {
            env.push((k.to_string(), v.to_string()));
        }
    }
    env
}

/// The part of a run's environment that finds its tools: `PATH` and the toolchain managers'
/// variables, as every run gets them.
pub fn toolchain_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = PASS
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    let real_home = std::env::var("HOME").unwrap_or_default();
    // Toolchain managers find their installs through HOME; point them at the real ones
    // explicitly before HOME moves into the sandbox.
    for (var, dir) in [
        ("CARGO_HOME", ".cargo"),
        ("RUSTUP_HOME", ".rustup"),
        ("PYENV_ROOT", ".pyenv"),
    ] {
        let path = Path::new(&real_home).join(dir);
        if !env.iter().any(|(k, _)| k == var) && !real_home.is_empty() && path.is_dir() {
            env.push((var.to_string(), path.display().to_string()));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env
}
