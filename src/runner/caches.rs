//! Build caches: what a run leaves in its build directories (`target/`, `node_modules/`, its
//! home) kept for the next run of the same branch, as an overlay layer on disk.
//!
//! Layout: `$GIT_SANDBOX_HOME/cache/<repository key>/<branch key>/` holds `layer/` (the kept
//! files, as overlayfs sees them: whiteouts for what a run deleted), `added` (bytes merged, for
//! the bound), `branch` (the branch's name, for `gc`) and `lock`. A run of a branch holds its
//! branch's lock exclusively (it writes the layer after the run) and production's shared (it
//! reads it); a layer whose lock is held otherwise is not used, so no layer changes under a
//! mounted overlay. A cache is written only by its own branch's runs: an experiment starts from
//! production's cache, read-only below its own, and never writes production's.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Which build caches a run uses and keeps.
#[derive(Clone, Copy)]
pub struct CacheUse<'a> {
    /// Where caches live (`$GIT_SANDBOX_HOME/cache`: on disk, not in memory).
    pub home: &'a Path,
    /// The branch the run is of (`main`, `experiment/x`); `None`: production's cache is used
    /// read-only and nothing is kept.
    pub branch: Option<&'a str>,
    pub production: &'a str,
    /// In-tree directories kept (`target`, `node_modules`); the run's home is always kept.
    pub dirs: &'a [String],
    /// Over this many MiB added, a branch's cache starts over.
    pub max_mb: u64,
}

/// A run's build caches: the layers it sees (topmost first), the branch dir it keeps its writes
/// in, what of its directory is kept, and the locks that hold the layers still while it runs.
#[derive(Default)]
pub struct Caches {
    pub layers: Vec<PathBuf>,
    pub out: Option<PathBuf>,
    pub paths: Vec<String>,
    pub locks: Vec<File>,
}

fn branch_key(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("{safe}-{}", &crate::util::fnv64_hex(name.as_bytes())[..8])
}

fn lock(dir: &Path, exclusive: bool) -> Option<File> {
    let f = crate::util::private::open_rw(&dir.join("lock")).ok()?;
    let held = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    held.ok()?;
    Some(f)
}

/// Bytes merged into a cache since it was last measured.
fn added(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("added"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum()
}

/// The build caches of a run of `use_.branch` in the repository `repo_key`. `run_uid` is set
/// as root: the layers' roots are then writable for every run's gid.
pub fn for_run(use_: &CacheUse<'_>, repo_key: &str, run_uid: Option<u32>) -> Caches {
    let mut c = Caches::default();
    let base = use_.home.join(repo_key);
    if crate::util::private::create_dir_all(&base).is_err() {
        return c;
    }
    let prod = base.join(branch_key(use_.production));
    if let Some(b) = use_.branch {
        let own = base.join(branch_key(b));
        let _ = std::fs::create_dir(&own);
        if let Some(l) = lock(&own, true) {
            // Last used, for gc.
            let _ = l.set_modified(std::time::SystemTime::now());
            if !own.join("branch").exists() {
                let _ = std::fs::write(own.join("branch"), b);
            }
            let max = use_.max_mb.saturating_mul(1 << 20);
            // `added` counts every byte merged, rewrites included: past the bound, the real size
            // decides whether the cache starts over.
            if use_.max_mb > 0 && added(&own) > max {
                let size = crate::util::disk_size(&own.join("layer"));
                if size > max {
                    let _ = std::fs::remove_dir_all(own.join("layer"));
                    let _ = std::fs::remove_file(own.join("added"));
                } else {
                    let _ = std::fs::write(own.join("added"), format!("{size}\n"));
                }
            }
            if ready(&own.join("layer"), run_uid.is_some()) {
                c.layers.push(own.join("layer"));
                c.out = Some(own);
                c.locks.push(l);
            }
        }
    }
    if use_.branch != Some(use_.production) && prod.join("layer").is_dir() {
        if let Some(l) = lock(&prod, false) {
            c.layers.push(prod.join("layer"));
            c.locks.push(l);
        }
    }
    c.paths = use_.dirs.iter().map(|d| format!("tree/{d}")).collect();
    c.paths.push("home".into());
    c
}

/// A layer's root exists; as root, it is writable for the gid every run gets (runs of other
/// slots, with other uids, build on what one run kept).
fn ready(layer: &Path, as_root: bool) -> bool {
    if !layer.is_dir() && std::fs::create_dir(layer).is_err() {
        return false;
    }
    if as_root {
        use std::os::unix::fs::PermissionsExt;
        let gid = super::sandbox::RUN_GID;
        let _ = std::os::unix::fs::lchown(layer, Some(0), Some(gid));
        let _ = std::fs::set_permissions(layer, std::fs::Permissions::from_mode(0o775));
    }
    true
}

/// The layer a setup step (`[test] setup`) leaves: `<branch dir>/setup-<key>/{layer/,lock,done}`,
/// per branch like the build caches. A run uses its branch's layer for the key, else
/// production's (read-only); else it builds its branch's (holding it exclusively while the setup
/// runs); a run of no branch (`exec`, a trial) builds a throw-away one.
pub struct SetupLayer {
    /// The setup dir: its `layer/` goes under the run once it is `ready`; while not, the setup
    /// step's writes are merged into it.
    pub dir: PathBuf,
    pub ready: bool,
    _lock: File,
    _temp: Option<tempfile::TempDir>,
}

impl SetupLayer {
    pub fn layer(&self) -> PathBuf {
        self.dir.join("layer")
    }

    /// The setup step succeeded and its writes were merged: later runs may use the layer.
    /// (A merge that did not finish leaves no `added`, and the layer is not trusted.)
    pub fn finish(&mut self) -> bool {
        if !self.dir.join("added").exists() {
            return false;
        }
        if self._temp.is_none() && std::fs::write(self.dir.join("done"), "").is_err() {
            return false;
        }
        self.ready = true;
        true
    }
}

/// The setup layer for `key` of a run of `use_.branch`, or `None` when none can be had (a
/// cache dir that cannot be made).
pub fn setup_layer(use_: &CacheUse<'_>, repo_key: &str, key: &str) -> Option<SetupLayer> {
    let base = use_.home.join(repo_key);
    crate::util::private::create_dir_all(&base).ok()?;
    let name = format!("setup-{key}");
    let mut dirs = Vec::new();
    if let Some(b) = use_.branch {
        dirs.push(base.join(branch_key(b)).join(&name));
    }
    if use_.branch != Some(use_.production) {
        dirs.push(base.join(branch_key(use_.production)).join(&name));
    }
    for dir in &dirs {
        if dir.join("done").exists() {
            if let Some(l) = lock(dir, false) {
                return Some(SetupLayer {
                    dir: dir.clone(),
                    ready: true,
                    _lock: l,
                    _temp: None,
                });
            }
        }
    }
    let (dir, temp) = match use_.branch {
        Some(b) => {
            let branch = base.join(branch_key(b));
            std::fs::create_dir_all(&branch).ok()?;
            if !branch.join("branch").exists() {
                let _ = std::fs::write(branch.join("branch"), b);
            }
            // A branch keeps the setup of its latest key only.
            for e in std::fs::read_dir(&branch).into_iter().flatten().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with("setup-") && n != name {
                    if let Some(_held) = lock(&e.path(), true) {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
            (branch.join(&name), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("setup-once-")
                .tempdir_in(&base)
                .ok()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    std::fs::create_dir_all(&dir).ok()?;
    let f = crate::util::private::open_rw(&dir.join("lock")).ok()?;
    // Another run of the branch may be building it: wait, then use what it built.
    f.lock().ok()?;
    if dir.join("done").exists() {
        drop(f);
        let l = lock(&dir, false)?;
        return Some(SetupLayer {
            dir,
            ready: true,
            _lock: l,
            _temp: temp,
        });
    }
    let _ = std::fs::remove_dir_all(dir.join("layer"));
    let _ = std::fs::remove_file(dir.join("added"));
    Some(SetupLayer {
        dir,
        ready: false,
        _lock: f,
        _temp: temp,
    })
}

/// One branch's build cache, for `gc`.
#[derive(Debug, Clone)]
pub struct BranchCache {
    pub repo_key: String,
    /// The branch's name (`None` for a cache that does not say).
    pub branch: Option<String>,
    pub dir: PathBuf,
    /// When a run last used it (ms since the epoch).
    pub used_ms: i64,
    pub bytes: u64,
}

/// Every branch cache under `home` (`$GIT_SANDBOX_HOME/cache`).
pub fn list(home: &Path) -> Vec<BranchCache> {
    let mut out = Vec::new();
    for repo in std::fs::read_dir(home).into_iter().flatten().flatten() {
        if !repo.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let repo_key = repo.file_name().to_string_lossy().into_owned();
        for b in std::fs::read_dir(repo.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if !b.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = b.path();
            let branch = std::fs::read_to_string(dir.join("branch"))
                .ok()
                .filter(|n| branch_key(n) == b.file_name().to_string_lossy());
            out.push(BranchCache {
                repo_key: repo_key.clone(),
                branch,
                used_ms: crate::util::modified_ms(&dir.join("lock"))
                    .max(crate::util::modified_ms(&dir.join("added"))),
                bytes: crate::util::disk_size(&dir),
                dir,
            });
        }
    }
    out
}

/// Remove a branch cache unless a run holds it. Returns whether it was removed (or, with
/// `dry_run`, could be).
pub fn remove(cache: &BranchCache, dry_run: bool) -> std::io::Result<bool> {
    // Held while removing: a run that comes now finds no layer, or a whole one.
    let Some(_held) = lock(&cache.dir, true) else {
        return Ok(false);
    };
    if !dry_run {
        std::fs::remove_dir_all(cache.dir.join("layer")).or_else(ignore_missing)?;
        for f in ["added", "branch"] {
            std::fs::remove_file(cache.dir.join(f)).or_else(ignore_missing)?;
        }
        // The lock goes last: a run that opened it before holds a lock on a removed file and
        // makes the directory afresh.
        std::fs::remove_dir_all(&cache.dir).or_else(ignore_missing)?;
        // The repository's dir, once its last branch is gone.
        if let Some(parent) = cache.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(true)
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn use_<'a>(home: &'a Path, branch: Option<&'a str>, dirs: &'a [String]) -> CacheUse<'a> {
        CacheUse {
            home,
            branch,
            production: "main",
            dirs,
            max_mb: 1,
        }
    }

    #[test]
    fn a_branch_sees_its_own_cache_over_productions_and_writes_only_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = vec!["target".to_string()];
        let main = for_run(&use_(tmp.path(), Some("main"), &dirs), "r", None);
        assert_eq!(main.layers.len(), 1);
        let prod_layer = main.layers[0].clone();
        assert_eq!(main.out.as_deref(), prod_layer.parent());
        assert_eq!(main.paths, ["tree/target", "home"]);
        drop(main);
        let exp = for_run(&use_(tmp.path(), Some("experiment/x"), &dirs), "r", None);
        assert_eq!(exp.layers.len(), 2);
        assert_eq!(exp.layers[1], prod_layer, "production's below");
        assert_ne!(exp.out.as_deref(), prod_layer.parent());
        // While the experiment runs, production's cache is read by it: a run of production
        // cannot take it to write, so it runs without its cache rather than change a layer
        // under a mounted overlay.
        let busy = for_run(&use_(tmp.path(), Some("main"), &dirs), "r", None);
        assert!(busy.layers.is_empty() && busy.out.is_none());
        drop(exp);
        let listed = list(tmp.path());
        let mut names: Vec<_> = listed.iter().filter_map(|c| c.branch.clone()).collect();
        names.sort();
        assert_eq!(names, ["experiment/x", "main"]);
    }

    #[test]
    fn a_cache_past_its_bound_starts_over() {
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let dir = c.out.clone().unwrap();
        std::fs::write(dir.join("layer/big"), vec![1u8; 2 << 20]).unwrap();
        std::fs::write(dir.join("added"), format!("{}\n", 2 << 20)).unwrap();
        drop(c);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert!(!dir.join("layer/big").exists());
        assert!(c.out.is_some(), "and is used afresh");
    }

    #[test]
    fn remove_skips_a_cache_a_run_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let held = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let cache = list(tmp.path()).pop().unwrap();
        assert!(!remove(&cache, false).unwrap());
        assert!(cache.dir.join("layer").is_dir());
        drop(held);
        assert!(remove(&cache, false).unwrap());
        assert!(!cache.dir.exists());
        assert!(
            !tmp.path().join("r").exists(),
            "the repository's dir goes with its last"
        );
    }
}
