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
    "RBENV_ROOT",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "VOLTA_HOME",
    "SOURCE_DATE_EPOCH",
    // How many jobs `cmake --build` runs (the detected CMake command passes none).
    "CMAKE_BUILD_PARALLEL_LEVEL",
];

/// The version managers whose shims (or bin directory) a `PATH` entry may be: the variable that
/// names the manager's root, and how to recognise the root from the entry.
const MANAGERS: &[(&str, &str, &str)] = &[
    // (variable, the entry's last component, a file or directory the root holds)
    ("PYENV_ROOT", "shims", "libexec/pyenv"),
    ("RBENV_ROOT", "shims", "libexec/rbenv"),
    ("ASDF_DATA_DIR", "shims", "installs"),
    ("MISE_DATA_DIR", "shims", "installs"),
    ("VOLTA_HOME", "bin", "tools/image"),
];

/// The managers' roots that `PATH`'s shim directories belong to: (variable, root). A shim is a
/// script that runs the manager from its root (`~/.pyenv/libexec/pyenv`, …), so that root must
/// be readable and named, whatever the caller's own variables say: a daemon, cron or an MCP
/// client without `PYENV_ROOT` then runs what the user's shell runs. A plugin's shims
/// (`~/.pyenv/plugins/pyenv-virtualenv/shims`) belong to the manager two levels up. nvm puts a
/// version's own `bin` on `PATH` (`~/.nvm/versions/node/v20/bin`): its root is `NVM_DIR`.
pub fn shim_roots(path: &str) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut out: Vec<(&'static str, std::path::PathBuf)> = Vec::new();
    for entry in path.split(':').filter(|e| e.starts_with('/')) {
        let entry = Path::new(entry);
        let last = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut found = None;
        for (var, leaf, marker) in MANAGERS {
            if last != *leaf {
                continue;
            }
            let parent = entry.parent();
            let plugin_root = parent
                .filter(|p| p.parent().and_then(|g| g.file_name()) == Some("plugins".as_ref()))
                .and_then(|p| p.parent()?.parent());
            found = [parent, plugin_root]
                .into_iter()
                .flatten()
                .find(|root| root.join(marker).exists())
                // asdf's and mise's roots look alike: mise's is named so.
                .filter(|root| {
                    let mise = root.to_string_lossy().contains("mise");
                    match *var {
                        "ASDF_DATA_DIR" => !mise,
                        "MISE_DATA_DIR" => mise,
                        _ => true,
                    }
                })
                .map(|root| (*var, root.to_path_buf()));
            if found.is_some() {
                break;
            }
        }
        // nvm: <NVM_DIR>/versions/node/<version>/bin
        if found.is_none() && last == "bin" {
            let nvm = entry.ancestors().nth(4);
            let kind = entry.ancestors().nth(2).and_then(|p| p.file_name());
            let versions = entry.ancestors().nth(3).and_then(|p| p.file_name());
            if let (Some(root), Some(kind), Some(versions)) = (nvm, kind, versions) {
                if kind == "node" && versions == "versions" && root.join("nvm.sh").exists() {
                    found = Some(("NVM_DIR", root.to_path_buf()));
                }
            }
        }
        if let Some(f) = found {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// The package managers' mirror settings passed from the caller's environment (a company's
/// index or registry): the URLs they install from, never a credential.
const MIRRORS: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
    "npm_config_registry",
    "NPM_CONFIG_REGISTRY",
    "YARN_NPM_REGISTRY_SERVER",
    "GOPROXY",
];

/// Whether a mirror setting holds a credential: a URL with a user or password in it
/// (`https://user:token@pypi.corp/simple`). Such a setting is not passed: a test could read it.
fn holds_credentials(value: &str) -> bool {
    value
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '|' | ';'))
        .filter_map(|word| word.split_once("://").map(|(_, rest)| rest))
        .any(|rest| {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            authority.contains('@')
        })
}

/// The mirror settings of `vars` a run is given: set, not empty, and without credentials.
pub fn mirrors_of(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vars
        .filter(|(k, v)| MIRRORS.contains(&k.as_str()) && !v.is_empty() && !holds_credentials(v))
        .collect();
    out.sort();
    out
}

/// [`mirrors_of`] the caller's environment.
pub fn mirrors() -> Vec<(String, String)> {
    mirrors_of(std::env::vars())
}

/// Build the environment for a run whose private directory is `root` (HOME and TMPDIR go there).
pub fn sandbox_env(root: &Path) -> Vec<(String, String)> {
    let mut env = toolchain_env();
    env.extend(mirrors());
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
        // No user site: a `.pth` there runs in every Python the run starts.
        ("PYTHONNOUSERSITE".to_string(), "1".to_string()),
        ("NO_COLOR".to_string(), "1".to_string()),
    ]);
    // Downloads go to the run's home, where the branch's caches carry them and a setup step
    // (`cargo fetch`, `go mod download`) may write them: the toolchain's home found under the
    // caller's own home is read-only inside. A home the caller names stays the caller's.
    let named = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if !named("CARGO_HOME") {
        env.retain(|(k, _)| k != "CARGO_HOME");
        env.push((
            "CARGO_HOME".into(),
            home.join(".cargo").display().to_string(),
        ));
    }
    if named("GOPATH") {
        env.push((
            "GOMODCACHE".into(),
            home.join("go/pkg/mod").display().to_string(),
        ));
    }
    env
}

/// The environment of a run in an image: the image's `Env` (`NAME=value`), then the run's own
/// variables over it, but for the host's toolchain (`PATH`, the managers' roots, the locale:
/// [`PASS`]), which the image has its own of. A passed variable the run itself points into
/// `root` (`CARGO_HOME` in its home) stays.
pub fn in_image(
    image: &[String],
    run: Vec<(String, String)>,
    root: &Path,
) -> Vec<(String, String)> {
    // A name set twice (the image's, then the environment's own) is the later one's.
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in image
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| !k.is_empty())
    {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v.to_string()));
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
    }
    for (k, v) in run {
        let host_tool = PASS.contains(&k.as_str()) && !Path::new(&v).starts_with(root);
        if host_tool {
            continue;
        }
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
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
    // The managers whose shims are on PATH, found from PATH itself.
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    // The first of a manager's roots on PATH is the one its shims find first.
    for (var, root) in shim_roots(&path) {
        if !env.iter().any(|(k, v)| k == var && !v.is_empty()) {
            env.retain(|(k, _)| k != var);
            env.push((var.to_string(), root.display().to_string()));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    #[test]
    fn mirror_settings_pass_without_credentials() {
        let vars = [
            ("PIP_INDEX_URL", "https://pypi.corp.example/simple"),
            ("UV_INDEX_URL", "https://me:s3cret@pypi.corp.example/simple"),
            ("npm_config_registry", "https://npm.corp.example/"),
            ("GOPROXY", "https://proxy.corp.example,direct"),
            (
                "PIP_EXTRA_INDEX_URL",
                "https://a.example/simple https://tok@b.example/simple",
            ),
            ("UV_DEFAULT_INDEX", ""),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("PIP_CERT", "/etc/ssl/corp.pem"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let got: Vec<String> = super::mirrors_of(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(got, ["GOPROXY", "PIP_INDEX_URL", "npm_config_registry"]);
    }

    #[test]
    fn shim_directories_name_their_managers_root() {
        let d = tempfile::tempdir().unwrap();
        let at = |rel: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let pyenv = at("py/libexec/pyenv")
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        let rbenv = at("rb/libexec/rbenv")
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        let asdf = at("asdf/installs").parent().unwrap().to_path_buf();
        let mise = at("mise/installs").parent().unwrap().to_path_buf();
        let volta = at("volta/tools/image")
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        let nvm = at("nvm");
        std::fs::write(nvm.join("nvm.sh"), "").unwrap();
        let path = [
            at("py/plugins/pyenv-virtualenv/shims"),
            at("py/shims"),
            at("rb/shims"),
            at("asdf/shims"),
            at("mise/shims"),
            at("volta/bin"),
            at("nvm/versions/node/v20.1.0/bin"),
            at("plain/shims"),
            "/usr/bin".into(),
        ]
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
        assert_eq!(
            super::shim_roots(&path),
            [
                ("PYENV_ROOT", pyenv),
                ("RBENV_ROOT", rbenv),
                ("ASDF_DATA_DIR", asdf),
                ("MISE_DATA_DIR", mise),
                ("VOLTA_HOME", volta),
                ("NVM_DIR", nvm),
            ]
        );
    }
}

#[cfg(test)]
mod image_tests {
    use super::in_image;
    use std::path::Path;

    #[test]
    fn in_an_image_its_variables_stand_under_the_runs_and_no_host_toolchain_passes() {
        let env = in_image(
            &[
                "PATH=/opt/py/bin:/usr/bin".into(),
                "LANG=C.UTF-8".into(),
                "HOME=/root".into(),
                "BROKEN".into(),
                "LANG=en_US.UTF-8".into(),
            ],
            vec![
                ("PATH".into(), "/root/.pyenv/shims:/usr/bin".into()),
                ("PYENV_ROOT".into(), "/root/.pyenv".into()),
                ("HOME".into(), "/run/x/home".into()),
                ("CARGO_HOME".into(), "/run/x/home/.cargo".into()),
                ("CI".into(), "true".into()),
            ],
            Path::new("/run/x"),
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/opt/py/bin:/usr/bin"));
        // Set twice (the image's, then a devcontainer's), the later stands, once.
        assert_eq!(get("LANG"), Some("en_US.UTF-8"));
        assert_eq!(env.iter().filter(|(k, _)| k == "LANG").count(), 1);
        assert_eq!(get("PYENV_ROOT"), None);
        assert_eq!(get("HOME"), Some("/run/x/home"));
        assert_eq!(get("CARGO_HOME"), Some("/run/x/home/.cargo"));
        assert_eq!(get("CI"), Some("true"));
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
        // An image without PATH gets the usual one.
        let bare = in_image(&[], vec![], Path::new("/r"));
        assert!(bare
            .iter()
            .any(|(k, v)| k == "PATH" && v.contains("/usr/bin")));
    }
}
