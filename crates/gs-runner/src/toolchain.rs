//! What the tools a run's commands name are on this machine: for each program word, the
//! executable the sandbox's `PATH` resolves it to (symlinks followed) with its size and mtime,
//! and for the toolchain managers that hide the real tool behind a shim (rustup's proxies,
//! pyenv's shims) the toolchain they select. Nothing is executed: a word comes from a hostile
//! commit, so it is only looked up and `stat`ed, and a word with a `/` that is not absolute
//! (inside the checkout) is left out. Measured once per process, so a daemon sees a new
//! toolchain after a restart and `git sandbox run` at once.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// How many words of one command are looked at.
const MAX_WORDS: usize = 16;

/// Program words whose fingerprint also covers another program they run (`npm` runs `node`).
const ALSO: &[(&str, &str)] = &[
    ("npm", "node"),
    ("npx", "node"),
    ("yarn", "node"),
    ("pnpm", "node"),
    ("pytest", "python3"),
    ("tox", "python3"),
    ("mvn", "java"),
    ("gradle", "java"),
];

/// What this process found, by (program word, `PATH`).
type Seen = BTreeMap<(String, String), Option<String>>;

/// Each tool's description, by program word: `path size mtime`, and the toolchain a manager's
/// shim selects. Words that name nothing on `PATH` are left out.
pub fn describe(words: &[String], env: &[(String, String)]) -> BTreeMap<String, String> {
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let path = var("PATH")
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .to_string();
    let mut wanted: Vec<&str> = words.iter().map(String::as_str).collect();
    for (w, also) in ALSO {
        if words.iter().any(|x| x == w) {
            wanted.push(also);
        }
    }
    let mut out = BTreeMap::new();
    for word in wanted {
        if out.contains_key(word) {
            continue;
        }
        let key = (word.to_string(), path.clone());
        let mut memo = seen.lock().unwrap_or_else(|e| e.into_inner());
        let found = memo
            .entry(key)
            .or_insert_with(|| one(word, &path, &var))
            .clone();
        drop(memo);
        if let Some(d) = found {
            out.insert(word.to_string(), d);
        }
    }
    out
}

/// Commands that run the program named after them (and their own flags and assignments).
const WRAPPERS: &[&str] = &["env", "exec", "time", "nice", "nohup", "command", "xargs"];

/// The program words of a shell command: the word in command position of each of its simple
/// commands (after `;`, `&&`, `|`, …, leading assignments and a wrapper such as `env` skipped),
/// never an argument (`uv sync`'s `sync`, `npm test`'s `test`); only words that could name a
/// program (no quotes or shell syntax), at most [`MAX_WORDS`].
pub fn program_words(command: &str) -> Vec<String> {
    let plain = |w: &str| {
        !w.is_empty()
            && !w.starts_with('-')
            && !w.contains('=')
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'/' | b'-'))
    };
    let mut out = Vec::new();
    for segment in command.split([';', '&', '|', '(', ')', '\n']) {
        let mut words = segment.split_whitespace();
        while let Some(word) = words
            .by_ref()
            .find(|w| !w.contains('=') && !w.starts_with('-'))
        {
            if !plain(word) {
                break;
            }
            out.push(word.to_string());
            let base = word.rsplit('/').next().unwrap_or(word);
            if !WRAPPERS.contains(&base) {
                break;
            }
        }
        if out.len() >= MAX_WORDS {
            break;
        }
    }
    out.truncate(MAX_WORDS);
    out
}

fn one<'a>(word: &str, path: &str, var: &impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let exe = resolve(word, path)?;
    let real = std::fs::canonicalize(&exe).unwrap_or(exe);
    let mut d = stat(&real)?;
    // rustup's proxies (cargo, rustc, … are rustup itself) run the toolchain rustup selects.
    if real.file_name().is_some_and(|n| n == "rustup") {
        if let Some(home) = var("RUSTUP_HOME") {
            let home = Path::new(home);
            let toolchain = var("RUSTUP_TOOLCHAIN").map(str::to_string).or_else(|| {
                let text = std::fs::read_to_string(home.join("settings.toml")).ok()?;
                let t: toml::Table = toml::from_str(&text).ok()?;
                t.get("default_toolchain")?.as_str().map(str::to_string)
            });
            if let Some(t) = toolchain.filter(|t| !t.contains('/')) {
                let tool = home.join("toolchains").join(&t).join("bin").join(word);
                d.push_str(&format!(
                    "; toolchain {t}: {}",
                    stat(&tool).unwrap_or_else(|| "missing".into())
                ));
            }
        }
    }
    // pyenv's shims run the version pyenv selects.
    if real.to_string_lossy().contains("/shims/") {
        if let Some(root) = var("PYENV_ROOT") {
            let root = Path::new(root);
            let version = var("PYENV_VERSION").map(str::to_string).or_else(|| {
                std::fs::read_to_string(root.join("version"))
                    .ok()
                    .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
            });
            if let Some(v) = version.filter(|v| !v.is_empty() && !v.contains('/')) {
                let tool = root.join("versions").join(&v).join("bin").join(word);
                let tool = std::fs::canonicalize(&tool).unwrap_or(tool);
                d.push_str(&format!(
                    "; pyenv {v}: {}",
                    stat(&tool).unwrap_or_else(|| "missing".into())
                ));
            }
        }
    }
    Some(d)
}

/// Where `PATH` finds `word`: a bare name in an absolute directory of `PATH`, or an absolute
/// path. A relative path (the checkout's own files) is no toolchain.
fn resolve(word: &str, path: &str) -> Option<PathBuf> {
    if word.contains('/') {
        return Path::new(word).is_absolute().then(|| PathBuf::from(word));
    }
    path.split(':')
        .filter(|d| Path::new(d).is_absolute())
        .map(|d| Path::new(d).join(word))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

fn stat(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    m.is_file()
        .then(|| format!("{} {} {}", p.display(), m.len(), m.mtime()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_programs_and_a_relative_path_is_never_one() {
        assert_eq!(
            program_words("FOO=1 python3 -m pytest -q && ./run.sh; cargo test"),
            ["python3", "./run.sh", "cargo"]
        );
        // Arguments are no programs: `uv sync`, `npm test`; a wrapper's program is one.
        assert_eq!(
            program_words("uv sync --frozen && npm test | tee x; env -i A=1 /usr/bin/make check"),
            ["uv", "npm", "tee", "env", "/usr/bin/make"]
        );
        assert_eq!(program_words("\"quoted\" thing"), Vec::<String>::new());
        let env = vec![("PATH".to_string(), "/usr/bin:/bin:relative".to_string())];
        let d = describe(&["sh".into(), "./run.sh".into(), "nosuchtool".into()], &env);
        assert!(d.contains_key("sh"), "{d:?}");
        assert!(!d.contains_key("./run.sh") && !d.contains_key("nosuchtool"));
    }

    #[test]
    fn a_new_executable_is_another_toolchain() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool-for-toolchain-test");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let before = one(
            "tool-for-toolchain-test",
            &dir.path().display().to_string(),
            &|_| None,
        )
        .unwrap();
        std::fs::write(&tool, "#!/bin/sh\necho newer\n").unwrap();
        let after = one(
            "tool-for-toolchain-test",
            &dir.path().display().to_string(),
            &|_| None,
        )
        .unwrap();
        assert_ne!(before, after);
    }
}
