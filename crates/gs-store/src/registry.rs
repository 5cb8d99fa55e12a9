//! The registry: which repositories this user has adopted, kept beside the index in a small
//! file of its own (`$GIT_SANDBOX_HOME/registry`, one `<id>\t<path>` line each), so that a
//! deleted or corrupt index loses nothing: `reindex` finds every repository again, wherever on
//! disk it was adopted. Each repository also carries its id in its own git config.

use std::io::Write;
use std::path::{Path, PathBuf};

const FILE: &str = "registry";
const LOCK: &str = "registry.lock";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub path: PathBuf,
}

/// Every registered repository, in the order they were added. A missing file is an empty
/// registry; unreadable lines are skipped.
pub fn list(home: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(home.join(FILE)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (id, path) = l.split_once('\t')?;
            (!id.is_empty() && !path.is_empty()).then(|| Entry {
                id: id.to_string(),
                path: PathBuf::from(path),
            })
        })
        .collect()
}

/// Register `id` at `path` (replacing an entry with the same id or path).
pub fn add(home: &Path, id: &str, path: &Path) -> std::io::Result<()> {
    if id.contains(['\t', '\n']) || path.as_os_str().to_string_lossy().contains(['\t', '\n']) {
        return Err(std::io::Error::other(
            "a repository id or path with a tab or newline cannot be registered",
        ));
    }
    update(home, |entries| {
        if entries.iter().any(|e| e.id == id && e.path == path) {
            return false;
        }
        entries.retain(|e| e.id != id && e.path != path);
        entries.push(Entry {
            id: id.to_string(),
            path: path.to_path_buf(),
        });
        true
    })
}

/// Forget the repository with `id`. Returns whether it was registered.
pub fn remove(home: &Path, id: &str) -> std::io::Result<bool> {
    let mut found = false;
    update(home, |entries| {
        let before = entries.len();
        entries.retain(|e| e.id != id);
        found = entries.len() != before;
        found
    })?;
    Ok(found)
}

/// Read, change and write the registry under an exclusive lock, atomically (temp file and
/// rename), so concurrent `init`s never lose each other's entry.
fn update(home: &Path, change: impl FnOnce(&mut Vec<Entry>) -> bool) -> std::io::Result<()> {
    gs_util::private::create_private_dir(home)?;
    let lock = gs_util::private::open_rw(&home.join(LOCK))?;
    lock.lock()?;
    let mut entries = list(home);
    if change(&mut entries) {
        let mut body = Vec::new();
        for e in &entries {
            writeln!(body, "{}\t{}", e.id, e.path.display())?;
        }
        gs_util::write_atomic(&home.join(FILE), &body)?;
    }
    lock.unlock()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_replace_remove() {
        let d = tempfile::tempdir().unwrap();
        assert!(list(d.path()).is_empty());
        add(d.path(), "repo_a", Path::new("/x/a")).unwrap();
        add(d.path(), "repo_b", Path::new("/x/b")).unwrap();
        add(d.path(), "repo_a", Path::new("/x/a2")).unwrap();
        let ids: Vec<(String, PathBuf)> =
            list(d.path()).into_iter().map(|e| (e.id, e.path)).collect();
        assert_eq!(
            ids,
            vec![
                ("repo_b".into(), PathBuf::from("/x/b")),
                ("repo_a".into(), PathBuf::from("/x/a2"))
            ]
        );
        assert!(remove(d.path(), "repo_b").unwrap());
        assert!(!remove(d.path(), "repo_b").unwrap());
        assert_eq!(list(d.path()).len(), 1);
        assert!(add(d.path(), "bad\tid", Path::new("/y")).is_err());
    }
}
