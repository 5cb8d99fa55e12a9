//! Build caches: what a run leaves in its build directories (`target/`, `node_modules/`, its
//! home) kept for the next run of the same branch, as overlay layers on disk.
//!
//! Layout: `$GIT_SANDBOX_HOME/cache/<repository key>/<branch key>/` holds `gen-<N>/` (one
//! *generation* each: `layer/`, the kept files as overlayfs sees them, whiteouts for what a run
//! deleted; `added`, bytes merged; `lock`; `base` when nothing below it counts), `branch` (the
//! branch's name, for `gc`) and `lock` (held while a generation is published).
//!
//! A run reads the newest chain of generations of its branch (from the newest `base` up), each
//! held shared while the run's overlay may be mounted, and production's chain below it. What it
//! writes is merged into a new directory of its own, and once it has ended that directory becomes
//! the branch's next generation, laid over the others: no layer ever changes while it is mounted,
//! and runs of one branch never wait for each other. Past [`MAX_CHAIN`] generations a chain is
//! folded into one new base (files hard-linked, never rewritten); generations no chain uses any
//! more go as soon as no run holds them, or with `gc`.
//!
//! Whose cache a run may write is decided in one place, [`writes`]: only a run of a commit on the
//! branch it is a run of. Candidate merges, trials, snapshots, `exec` and bisect probes read the
//! layers they are given and write a throw-away upper.

use std::fs::File;
use std::path::{Path, PathBuf};

mod generations;

use generations::{added, generations, hold_chain, made};
pub use generations::{drop_spares, prune, settle, Generation, Made, Stage, MAX_CHAIN};

/// What a run is, as far as build caches care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOf {
    /// A commit run as a commit of the branch it was named through: `on_branch` says whether the
    /// commit is the branch's tip or one of its ancestors (a candidate merge, for one, is not).
    Branch { on_branch: bool },
    /// A trial (`run --command`, `--timeout`): not the commit's own config.
    Trial,
    /// `run --worktree` / `--staged`: work no commit holds.
    Snapshot,
    /// `exec`: any command at all.
    Exec,
    /// A bisect probe: an old commit run to judge it.
    Probe,
}

/// The rule: whether a run's writes may become its branch's next cache generation. Only a run of
/// a commit on the branch it is a run of writes that branch's cache; everything else reads the
/// layers it is given and throws its writes away.
pub fn writes(run: RunOf) -> bool {
    matches!(run, RunOf::Branch { on_branch: true })
}

/// Which build caches a run uses and keeps.
#[derive(Clone, Copy)]
pub struct CacheUse<'a> {
    /// Where caches live (`$GIT_SANDBOX_HOME/cache`: on disk, not in memory).
    pub home: &'a Path,
    /// The branch whose cache the run reads (`main`, `experiment/x`); `None`: production's.
    pub branch: Option<&'a str>,
    /// What [`writes`] says: the run's writes become `branch`'s next generation.
    pub writes: bool,
    /// `false` (`run --clean`): no layer is read, and what the run writes becomes a new base.
    pub read: bool,
    pub production: &'a str,
    /// In-tree directories kept (`target`, `node_modules`).
    pub dirs: &'a [String],
    /// The download caches of the run's home that are kept ([`home_caches`]); the rest of the
    /// home is fresh for every run.
    pub home_dirs: &'a [String],
    /// Over this many MiB added, a branch's cache starts over.
    pub max_mb: u64,
    /// What else the caches are kept apart by: the image a run's root is (its digest), whose
    /// toolchain built them; empty on the host's root.
    pub variant: &'a str,
}

impl CacheUse<'_> {
    /// The directory name of `branch`'s caches for this use.
    fn key(&self, branch: &str) -> String {
        branch_key(branch, self.variant)
    }
}

/// Name a branch's cache directory after its branch (and variant), for `gc`.
fn mark(dir: &Path, branch: &str, variant: &str) {
    if !dir.join("branch").exists() {
        let _ = std::fs::write(dir.join("branch"), branch);
        if !variant.is_empty() {
            let _ = std::fs::write(dir.join("variant"), variant);
        }
    }
}

/// A run's build caches: the layers it sees (topmost first), the directory its writes are
/// merged into, what of its directory is kept, and the locks that hold the layers still while
/// it runs.
#[derive(Default)]
pub struct Caches {
    pub layers: Vec<PathBuf>,
    pub out: Option<PathBuf>,
    pub paths: Vec<String>,
    pub locks: Vec<File>,
    /// The generations read, topmost first, as `branch@N` (for the record).
    pub generations: Vec<String>,
    /// The next generation, published when dropped.
    pub stage: Option<Stage>,
    /// The runs that made the generations read.
    pub made: Vec<Made>,
}

/// The layers of an agent workspace kept as generations in `dir` (see [`Stage::for_workspace`]),
/// topmost first, each held shared until the locks go: what its commands wrote so far.
pub fn workspace_layers(dir: &Path) -> (Vec<PathBuf>, Vec<File>) {
    let (chain, locks) = hold_chain(dir);
    (chain.iter().map(|g| g.dir.join("layer")).collect(), locks)
}

/// The download caches of a run's home a branch keeps, by the file of the commit's root that
/// says which toolchain it uses: only caches whose *archives* the package manager checks against
/// a digest when it uses them (cargo's `.crate` files against `Cargo.lock`, Go's module zips
/// against `go.sum`, npm's content-addressed `_cacache`, pip's HTTP cache), never the trees
/// unpacked from them (`registry/src`, `git/checkouts`, `pkg/mod/<module>`, pip's `wheels/`),
/// which nothing checks again. Everything else a run writes in its home goes with the run: a
/// `.pth` in the user site, a `~/.npmrc` or a shell rc file never runs in the branch's next run.
/// Runs download into their home: `CARGO_HOME` is the run's `~/.cargo` and, when the user's
/// environment names a `GOPATH`, `GOMODCACHE` the run's `~/go/pkg/mod`. A `CARGO_HOME` the
/// user's environment names stays the user's, read-only, and cargo's caches are not carried.
pub const HOME_CACHES: &[(&[&str], &[&str])] = &[
    (
        &["Cargo.toml"],
        &[
            ".cargo/registry/index",
            ".cargo/registry/cache",
            ".cargo/git/db",
        ],
    ),
    (&["go.mod", "go.work"], &["go/pkg/mod/cache/download"]),
    (&["package.json"], &[".npm/_cacache"]),
    (
        &[
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
        &[".cache/pip/http", ".cache/pip/http-v2"],
    ),
];

/// The home caches ([`HOME_CACHES`]) of a tree whose root holds the files `has` says it does.
pub fn home_caches(has: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (markers, dirs) in HOME_CACHES {
        if markers.iter().any(|m| has(m)) {
            out.extend(dirs.iter().map(|d| d.to_string()));
        }
    }
    out
}

/// The version of the caches' layout, part of every branch's key: caches made before a run's
/// home stopped being kept whole (layout 1) are never read again, and `gc` removes them as
/// caches of no branch.
const LAYOUT: &str = "2";

fn branch_key(name: &str, variant: &str) -> String {
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
    let versioned = if variant.is_empty() {
        format!("{LAYOUT}\0{name}")
    } else {
        format!("{LAYOUT}\0{name}\0{variant}")
    };
    format!("{safe}-{}", &gs_util::fnv64_hex(versioned.as_bytes())[..8])
}

fn lock(dir: &Path, exclusive: bool) -> Option<File> {
    let f = gs_util::private::open_rw(&dir.join("lock")).ok()?;
    let held = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    held.ok()?;
    Some(f)
}

/// The build caches of a run of `use_.branch` in the repository `repo_key`. `run_uid` is set
/// as root: the layers' roots are then writable for every run's gid.
pub fn for_run(use_: &CacheUse<'_>, repo_key: &str, run_uid: Option<u32>) -> Caches {
    let mut c = Caches::default();
    // Nothing the toolchains keep: the run reads no layer (it is cold) and keeps nothing.
    if use_.dirs.is_empty() && use_.home_dirs.is_empty() {
        return c;
    }
    let base = use_.home.join(repo_key);
    if gs_util::private::create_dir_all(&base).is_err() {
        return c;
    }
    let read = |c: &mut Caches, name: &str, chain: Vec<Generation>, locks: Vec<File>| {
        for g in &chain {
            c.layers.push(g.dir.join("layer"));
            c.generations.push(format!("{name}@{}", g.number));
            c.made.extend(made(&g.dir));
        }
        c.locks.extend(locks);
    };
    if let Some(b) = use_.branch {
        let own = base.join(use_.key(b));
        let _ = std::fs::create_dir(&own);
        mark(&own, b, use_.variant);
        // Last used, for gc.
        if let Ok(f) = gs_util::private::open_rw(&own.join("lock")) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        let (mut chain, mut locks) = if use_.read {
            hold_chain(&own)
        } else {
            Default::default()
        };
        // Past the bound, the branch starts over: this run reads none of its generations, and
        // what it writes becomes a new base.
        let max = use_.max_mb.saturating_mul(1 << 20);
        if use_.max_mb > 0 && chain.iter().map(|g| added(&g.dir)).sum::<u64>() > max {
            let size: u64 = chain
                .iter()
                .map(|g| gs_util::disk_size(&g.dir.join("layer")))
                .sum();
            if size > max {
                chain.clear();
                locks.clear();
            }
        }
        if use_.writes {
            let below = (Some(use_.production) != use_.branch)
                .then(|| base.join(use_.key(use_.production)))
                .into_iter()
                .collect();
            c.stage = Stage::new(&own, chain.is_empty(), run_uid, below);
            c.out = c.stage.as_ref().map(|s| s.dir().to_path_buf());
        }
        read(&mut c, b, chain, locks);
    }
    if use_.read && use_.branch != Some(use_.production) {
        let prod = base.join(use_.key(use_.production));
        if prod.is_dir() {
            let (chain, locks) = hold_chain(&prod);
            read(&mut c, use_.production, chain, locks);
        }
    }
    c.paths = use_.dirs.iter().map(|d| format!("tree/{d}")).collect();
    c.paths
        .extend(use_.home_dirs.iter().map(|d| format!("home/{d}")));
    c
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
    /// (A merge that did not finish leaves no `added`, and the layer is not trusted; one that
    /// missed an entry says which in `failed`.) `Err`: why the layer cannot be kept.
    pub fn finish(&mut self) -> Result<(), String> {
        let failed = std::fs::read_to_string(self.dir.join("failed")).unwrap_or_default();
        if let Some(first) = failed.lines().next().filter(|l| !l.trim().is_empty()) {
            return Err(format!("could not be kept: {}", first.trim()));
        }
        if !self.dir.join("added").exists() {
            return Err("could not be kept: the merge of its writes did not finish".into());
        }
        if self._temp.is_none() {
            if let Err(e) = std::fs::write(self.dir.join("done"), "") {
                return Err(format!("could not be marked done: {e}"));
            }
        }
        self.ready = true;
        Ok(())
    }
}

/// The setup layer for `key` of a run of `use_.branch`, or `None` when none can be had (a
/// cache dir that cannot be made).
pub fn setup_layer(use_: &CacheUse<'_>, repo_key: &str, key: &str) -> Option<SetupLayer> {
    let base = use_.home.join(repo_key);
    gs_util::private::create_dir_all(&base).ok()?;
    let name = format!("setup-{key}");
    let mut dirs = Vec::new();
    if let Some(b) = use_.branch {
        dirs.push(base.join(use_.key(b)).join(&name));
    }
    // Built for the branch only by a run that may write its cache and reads it; else thrown
    // away.
    let builds_for = use_.branch.filter(|_| use_.writes && use_.read);
    if !use_.read {
        dirs.clear();
    } else if use_.branch != Some(use_.production) {
        dirs.push(base.join(use_.key(use_.production)).join(&name));
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
    let (dir, temp) = match builds_for {
        Some(b) => {
            let branch = base.join(use_.key(b));
            std::fs::create_dir_all(&branch).ok()?;
            mark(&branch, b, use_.variant);
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
    let f = gs_util::private::open_rw(&dir.join("lock")).ok()?;
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
    let _ = std::fs::remove_file(dir.join("failed"));
    Some(SetupLayer {
        dir,
        ready: false,
        _lock: f,
        _temp: temp,
    })
}

/// The last audit of a branch's warm results ([`audit_state`]): kept beside its generations.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditState {
    /// The branch's newest generation when it was last audited (or first seen).
    pub generation: u64,
    /// When (ms since the epoch).
    pub at_ms: i64,
    /// The commit whose warm result was run again cold; `None` when the state only marks
    /// where counting starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// `agreed`, `disagreed` (the generations were discarded), `inconclusive` (the cold run
    /// gave no result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discarded: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerun: Vec<String>,
}

fn audit_path(home: &Path, repo_key: &str, branch: &str) -> PathBuf {
    home.join(repo_key)
        .join(branch_key(branch, ""))
        .join("audit")
}

/// The last audit of `branch`'s cache in the repository `repo_key`, if any.
pub fn audit_state(home: &Path, repo_key: &str, branch: &str) -> Option<AuditState> {
    let text = std::fs::read_to_string(audit_path(home, repo_key, branch)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Keep the last audit of `branch`'s cache (written whole, then renamed into place).
pub fn set_audit_state(home: &Path, repo_key: &str, branch: &str, state: &AuditState) {
    let path = audit_path(home, repo_key, branch);
    let Some(dir) = path.parent() else { return };
    if !dir.is_dir() {
        return;
    }
    let tmp = dir.join("audit.new");
    let body = serde_json::to_vec(state).unwrap_or_default();
    if std::fs::write(&tmp, body).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

/// A cache's last audit, for `doctor`.
pub fn audit_of(cache: &BranchCache) -> Option<AuditState> {
    let text = std::fs::read_to_string(cache.dir.join("audit")).ok()?;
    serde_json::from_str(&text).ok()
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
            let variant = std::fs::read_to_string(dir.join("variant")).unwrap_or_default();
            let branch = std::fs::read_to_string(dir.join("branch"))
                .ok()
                .filter(|n| branch_key(n, &variant) == b.file_name().to_string_lossy());
            out.push(BranchCache {
                repo_key: repo_key.clone(),
                branch,
                used_ms: gs_util::modified_ms(&dir.join("lock"))
                    .max(gs_util::modified_ms(&dir.join("added"))),
                bytes: gs_util::disk_size(&dir),
                dir,
            });
        }
    }
    out
}

/// Remove a branch cache unless a run holds any of it. Returns whether it was removed (or, with
/// `dry_run`, could be).
pub fn remove(cache: &BranchCache, dry_run: bool) -> std::io::Result<bool> {
    // Held while removing: a run that comes now finds no generation, or whole ones.
    let Some(_held) = lock(&cache.dir, true) else {
        return Ok(false);
    };
    let mut holds = Vec::new();
    for e in std::fs::read_dir(&cache.dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_type().is_ok_and(|t| t.is_dir()) && e.path().join("lock").exists() {
            match lock(&e.path(), true) {
                Some(l) => holds.push(l),
                None => return Ok(false),
            }
        }
    }
    if !dry_run {
        for e in std::fs::read_dir(&cache.dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.file_name() != "lock" {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p).or_else(ignore_missing)?;
                } else {
                    std::fs::remove_file(&p).or_else(ignore_missing)?;
                }
            }
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

/// A branch cache's generations as `doctor` shows them: (number, base, bytes), oldest first.
pub fn generations_of(cache: &BranchCache) -> Vec<(u64, bool, u64)> {
    generations(&cache.dir)
        .into_iter()
        .map(|g| (g.number, g.base, gs_util::disk_size(&g.dir)))
        .collect()
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

    /// A home cache every test's runs keep (a run that keeps nothing reads no layer).
    static HOME: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec![".cache/pip/http".to_string()]);

    fn use_<'a>(home: &'a Path, branch: Option<&'a str>, dirs: &'a [String]) -> CacheUse<'a> {
        CacheUse {
            home,
            branch,
            writes: true,
            read: true,
            production: "main",
            dirs,
            home_dirs: &HOME,
            max_mb: 1,
            variant: "",
        }
    }

    /// What a run's helper does once its command ended: its writes merged into the stage.
    fn write(c: &Caches, file: &str, body: &str) {
        let out = c.out.as_ref().expect("a stage to write");
        let path = out.join("layer").join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        std::fs::write(out.join("added"), format!("{}\n", body.len())).unwrap();
    }

    fn read(c: &Caches, file: &str) -> Option<String> {
        c.layers
            .iter()
            .find_map(|l| std::fs::read_to_string(l.join(file)).ok())
    }

    #[test]
    fn a_runs_home_keeps_only_the_download_caches_of_the_trees_toolchains() {
        let of = |files: &[&str]| home_caches(|m| files.contains(&m));
        assert!(of(&["README.md"]).is_empty());
        assert_eq!(
            of(&["Cargo.toml", "package.json"]),
            [
                ".cargo/registry/index",
                ".cargo/registry/cache",
                ".cargo/git/db",
                ".npm/_cacache"
            ]
        );
        let python = of(&["pyproject.toml"]);
        assert_eq!(python, [".cache/pip/http", ".cache/pip/http-v2"]);
        // Never an unpacked tree, nor a place a start-up file lives.
        for (_, dirs) in HOME_CACHES {
            for d in *dirs {
                assert!(
                    !d.contains("src") && !d.contains("checkouts") && !d.contains(".local"),
                    "{d}"
                );
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let home = vec![".npm/_cacache".to_string()];
        let mut u = use_(tmp.path(), Some("main"), &[]);
        u.home_dirs = &home;
        let c = for_run(&u, "r", None);
        assert_eq!(c.paths, ["home/.npm/_cacache"]);
        drop(c);
        // A run that keeps nothing reads nothing: it is cold.
        u.home_dirs = &[];
        let c = for_run(&u, "r", None);
        assert!(c.generations.is_empty() && c.out.is_none() && c.paths.is_empty());
    }

    #[test]
    fn a_cache_of_the_layout_before_a_fresh_home_is_never_read() {
        let tmp = tempfile::tempdir().unwrap();
        let old = format!("main-{}", &gs_util::fnv64_hex(b"main")[..8]);
        let dir = tmp.path().join("r").join(&old).join("gen-1");
        std::fs::create_dir_all(dir.join("layer/home/.local")).unwrap();
        std::fs::write(dir.join("layer/home/.local/evil.pth"), "import x").unwrap();
        std::fs::write(dir.join("added"), "8\n").unwrap();
        std::fs::write(dir.join("base"), "").unwrap();
        std::fs::write(tmp.path().join("r").join(&old).join("branch"), "main").unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert!(c.generations.is_empty(), "{:?}", c.generations);
        let listed = list(tmp.path());
        let stale = listed.iter().find(|b| b.dir.ends_with(&old)).unwrap();
        assert_eq!(stale.branch, None, "a cache of no branch: gc removes it");
    }

    #[test]
    fn only_a_run_of_a_commit_on_its_branch_writes_the_branchs_cache() {
        assert!(writes(RunOf::Branch { on_branch: true }));
        for other in [
            RunOf::Branch { on_branch: false },
            RunOf::Trial,
            RunOf::Snapshot,
            RunOf::Exec,
            RunOf::Probe,
        ] {
            assert!(!writes(other), "{other:?} writes nothing");
        }
        // A run the rule refuses reads the layers but keeps nothing.
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        write(&c, "home/kept", "from main");
        drop(c);
        let mut u = use_(tmp.path(), Some("main"), &[]);
        u.writes = false;
        let c = for_run(&u, "r", None);
        assert!(c.out.is_none() && c.stage.is_none());
        assert_eq!(read(&c, "home/kept").as_deref(), Some("from main"));
        assert_eq!(c.generations, ["main@1"]);
    }

    #[test]
    fn a_branch_sees_its_own_generations_over_productions_and_writes_only_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = vec!["target".to_string()];
        let main = for_run(&use_(tmp.path(), Some("main"), &dirs), "r", None);
        assert!(main.layers.is_empty(), "nothing kept yet");
        assert_eq!(
            main.paths,
            ["tree/target", "home/.cache/pip/http"],
            "the home is fresh but for its download caches"
        );
        write(&main, "home/prod", "p");
        drop(main);
        let exp = for_run(&use_(tmp.path(), Some("experiment/x"), &dirs), "r", None);
        assert_eq!(exp.generations, ["main@1"], "production's below");
        write(&exp, "home/exp", "e");
        // While the experiment runs, production's runs read and publish as ever.
        let busy = for_run(&use_(tmp.path(), Some("main"), &dirs), "r", None);
        assert_eq!(busy.generations, ["main@1"]);
        drop(busy);
        drop(exp);
        let main = for_run(&use_(tmp.path(), Some("main"), &dirs), "r", None);
        assert_eq!(
            read(&main, "home/exp"),
            None,
            "an experiment never writes production's"
        );
        let exp = for_run(&use_(tmp.path(), Some("experiment/x"), &dirs), "r", None);
        assert_eq!(exp.generations, ["experiment/x@1", "main@1"]);
        drop((main, exp));
        let listed = list(tmp.path());
        let mut names: Vec<_> = listed.iter().filter_map(|c| c.branch.clone()).collect();
        names.sort();
        assert_eq!(names, ["experiment/x", "main"]);
    }

    #[test]
    fn a_layer_never_changes_under_a_run_that_reads_it_and_parallel_runs_all_keep_theirs() {
        let tmp = tempfile::tempdir().unwrap();
        let first = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        write(&first, "home/a", "1");
        drop(first);
        // Two runs of main at once: both read generation 1, neither waits, both are kept.
        let (x, y) = (
            for_run(&use_(tmp.path(), Some("main"), &[]), "r", None),
            for_run(&use_(tmp.path(), Some("main"), &[]), "r", None),
        );
        assert_eq!(
            (&x.generations[..], &y.generations[..]),
            (&["main@1".to_string()][..], &["main@1".to_string()][..])
        );
        write(&x, "home/a", "2");
        write(&y, "home/b", "y");
        let reading = x.layers[0].clone();
        drop(x);
        assert_eq!(
            std::fs::read_to_string(reading.join("home/a")).unwrap(),
            "1",
            "generation 1 as y mounted it"
        );
        drop(y);
        let next = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(next.generations, ["main@3", "main@2", "main@1"]);
        assert_eq!(read(&next, "home/a").as_deref(), Some("2"));
        assert_eq!(read(&next, "home/b").as_deref(), Some("y"));
    }

    #[test]
    fn a_run_that_wrote_nothing_publishes_no_generation_unless_it_starts_a_base() {
        let tmp = tempfile::tempdir().unwrap();
        // What the helper leaves when the command wrote nothing it keeps: an empty layer.
        let nothing = |c: &Caches| {
            let out = c.out.as_ref().expect("a stage to write");
            std::fs::create_dir_all(out.join("layer")).unwrap();
            std::fs::write(out.join("added"), "0\n").unwrap();
        };
        let first = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        nothing(&first);
        drop(first);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@1"], "the first base is kept, empty");
        write(&c, "home/a", "1");
        drop(c);
        for _ in 0..3 {
            let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
            nothing(&c);
            drop(c);
        }
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@2", "main@1"]);
        assert_eq!(read(&c, "home/a").as_deref(), Some("1"));
        drop(c);
        // A clean run's empty base still replaces the chain (what it read is gone).
        let mut u = use_(tmp.path(), Some("main"), &[]);
        u.read = false;
        let clean = for_run(&u, "r", None);
        nothing(&clean);
        drop(clean);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@3"]);
        assert_eq!(read(&c, "home/a"), None);
    }

    #[test]
    fn a_stage_a_run_wrote_nothing_into_serves_the_next_run_of_the_branch() {
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        write(&c, "home/a", "1");
        drop(c);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let stage = c.out.clone().unwrap();
        std::fs::create_dir_all(stage.join("layer")).unwrap();
        std::fs::write(stage.join("added"), "0\n").unwrap();
        drop(c);
        // No directory made and removed on the data dir's disk per run (2-6 ms each on ext4).
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.out.as_ref(), Some(&stage), "the same stage again");
        assert!(!stage.join("added").exists(), "as new: no merge said done");
        write(&c, "home/b", "2");
        drop(c);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@2", "main@1"]);
        assert_eq!(read(&c, "home/b").as_deref(), Some("2"));
        assert_ne!(c.out.as_ref(), Some(&stage), "published, not reused");
        // Writes not kept (the run did not see its commit's tree) leave no spare behind.
        let mut discarded = c;
        let out = discarded.out.clone().unwrap();
        write(&discarded, "home/c", "3");
        discarded.stage.as_mut().unwrap().discard();
        drop(discarded);
        assert!(!out.exists());
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let spare = c.out.clone().unwrap();
        drop(c);
        assert!(spare.is_dir());
        drop_spares();
        assert!(!spare.exists(), "the process's spares go with it");
    }

    #[test]
    fn a_long_chain_is_folded_into_one_base_and_the_old_generations_go() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..=MAX_CHAIN {
            let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
            write(&c, &format!("home/f{i}"), &i.to_string());
            write(&c, "home/last", &i.to_string());
            drop(c);
        }
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations.len(), 1, "{:?}", c.generations);
        for i in 0..=MAX_CHAIN {
            assert_eq!(read(&c, &format!("home/f{i}")), Some(i.to_string()));
        }
        assert_eq!(read(&c, "home/last"), Some(MAX_CHAIN.to_string()));
        // The unused generations go in the background; a command waits for that before it
        // exits.
        settle();
        let cache = list(tmp.path()).pop().unwrap();
        assert_eq!(
            generations_of(&cache).len(),
            1,
            "unused generations removed"
        );
    }

    #[test]
    fn a_folded_base_counts_what_it_holds_not_every_rewrite_of_it() {
        // Each run rewrites the same file: folded, the base holds one, and its size is what
        // counts against the bound (summing every generation's writes made each run past the
        // bound walk the whole cache to measure it).
        let tmp = tempfile::tempdir().unwrap();
        let body = "x".repeat(100_000);
        for _ in 0..=MAX_CHAIN {
            let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
            write(&c, "home/same", &body);
            drop(c);
        }
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations.len(), 1, "{:?}", c.generations);
        let base = c.layers[0].parent().unwrap();
        assert_eq!(added(base), body.len() as u64);
    }

    #[test]
    fn a_clean_run_reads_nothing_and_its_writes_become_a_new_base() {
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        write(&c, "home/poison", "x");
        drop(c);
        let mut u = use_(tmp.path(), Some("main"), &[]);
        u.read = false;
        let clean = for_run(&u, "r", None);
        assert!(clean.layers.is_empty() && clean.generations.is_empty());
        write(&clean, "home/fresh", "y");
        drop(clean);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@2"]);
        assert_eq!(read(&c, "home/poison"), None);
        settle();
        let cache = list(tmp.path()).pop().unwrap();
        assert_eq!(
            generations_of(&cache).len(),
            1,
            "generation 1 went once no run held it"
        );
    }

    #[test]
    fn a_cache_past_its_bound_starts_over() {
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let big = "x".repeat(2 << 20);
        write(&c, "home/big", &big);
        drop(c);
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert!(c.generations.is_empty(), "over the bound: read nothing");
        assert!(c.out.is_some(), "and is written afresh");
    }

    #[test]
    fn remove_skips_a_cache_a_run_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        write(&c, "home/a", "1");
        drop(c);
        let held = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        let cache = list(tmp.path()).pop().unwrap();
        assert!(!remove(&cache, false).unwrap());
        assert!(cache.dir.join("gen-1/layer").is_dir());
        drop(held);
        assert!(remove(&cache, false).unwrap());
        assert!(!cache.dir.exists());
        assert!(
            !tmp.path().join("r").exists(),
            "the repository's dir goes with its last"
        );
    }

    #[test]
    fn a_cache_of_the_layout_before_generations_is_read_as_generation_0() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r").join(branch_key("main", ""));
        std::fs::create_dir_all(dir.join("layer/home")).unwrap();
        std::fs::write(dir.join("layer/home/old"), "kept").unwrap();
        let c = for_run(&use_(tmp.path(), Some("main"), &[]), "r", None);
        assert_eq!(c.generations, ["main@0"]);
        assert_eq!(read(&c, "home/old").as_deref(), Some("kept"));
    }
}
