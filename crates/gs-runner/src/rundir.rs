//! The directory a run works in. Where the machine has overlayfs, a run's tree is an overlay over
//! a checkout kept per *slot* (one run at a time holds a slot) and per repository, brought from
//! its last tree to the next by the tree diff: a run costs what its commit changed, not the size
//! of the tree, and nothing it writes reaches the kept checkout (its writes land in the overlay's
//! upper layer, a tmpfs that goes with the run). Elsewhere each run gets a fresh checkout.
//!
//! Layout: `<scratch>/git-sandbox-cache-<euid>/home-<home id>/slot-<n>/<repository key>/` holds
//! `lower/` (the overlay's lower layer: `tree/`, `home/`, `tmp/`) and `state` (the tree it holds,
//! its size, and the seal of its files' stat stamps, see [`super::stamps`]). Each data dir has
//! its own slots (data dirs of one user share the scratch dir, and each one's `gc` judges only
//! the repositories it knows; the slots of a data dir that is gone are removed by the next new
//! data dir or `gc`). A slot
//! is held with a lock; as root, slot `n` also owns the uid `SLOT_UID_BASE + n` (held through a
//! lock of its own under `/run`, for every data dir), which owns the kept files, so a run can
//! write its tree through the overlay and no two runs share a uid.

use super::stamps::{self, Seal};
use gix::ObjectId;
use gs_git as git;
use gs_git::{checkout, GitError};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The uid of slot `n`, as root, is this plus `n` (below the per-helper uids, which start at
/// [`gs_sandbox::sandbox::UID_BASE`]).
pub const SLOT_UID_BASE: u32 = 900_000;
/// How many slots there may be: runs beyond that many at once get fresh checkouts.
const MAX_SLOTS: u32 = 64;
/// Where the locks of slot uids live as root: one place for every scratch dir.
const UID_LOCKS: &str = "/run/git-sandbox";

/// How a run directory came about, for events and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepared {
    /// A fresh checkout for this run alone.
    Fresh,
    /// A kept checkout, checked out afresh (first use of the slot, or it could not be trusted).
    Rebuilt,
    /// A kept checkout brought to the tree by its diff (or already there).
    Updated,
}

/// A run's directory: `root()` holds `tree/` (the working directory), `home/` and `tmp/`.
pub struct RunDir {
    root: tempfile::TempDir,
    /// The kept checkout to lay the overlay over (`None`: `root` holds a fresh checkout).
    lower: Option<PathBuf>,
    /// The uid the run is to get (root, kept checkouts): the slot's, which owns the kept files.
    pub run_uid: Option<u32>,
    /// Files written to get here (0 when the kept checkout already held the tree).
    pub files: usize,
    pub prepared: Prepared,
    /// Build-cache layers to lay under the kept checkout (which always wins), topmost first.
    pub cache_layers: Vec<PathBuf>,
    /// The branch cache this run's writes are kept in (see `Plan::cache_out`).
    pub cache_out: Option<PathBuf>,
    /// What of the run's directory is kept (`tree/target`, `home`).
    pub cache_paths: Vec<String>,
    /// The cache generations the run reads, topmost first (`main@7`), for its record.
    pub cache_generations: Vec<String>,
    /// The branch's next cache generation, published when the run directory goes (unless the run
    /// turned out not to have seen the commit's tree).
    cache_stage: Option<super::caches::Stage>,
    /// The check of a kept checkout against its stamps, going on while the run starts.
    verify: Option<std::thread::JoinHandle<bool>>,
    state_path: Option<PathBuf>,
    _slot: Option<Slot>,
    /// Held while the run's overlay may be mounted over the cache layers.
    _cache_locks: Vec<File>,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // Whatever the caller did with it, a kept checkout that failed its check is not trusted
        // again.
        self.confirm();
    }
}

impl RunDir {
    /// The working directory of the run.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("tree")
    }

    /// Where the supervisor reads the tree's files (to detect the test command): the kept
    /// checkout, or the fresh one. Only the run sees its tree at [`RunDir::path`] when it is
    /// an overlay.
    pub fn host_tree(&self) -> PathBuf {
        match &self.lower {
            Some(lower) => lower.join("tree"),
            None => self.path(),
        }
    }

    /// The run's directory (the overlay's mount point, or the fresh checkout's temp dir).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The kept checkout the run's directory is an overlay of, if any.
    pub fn lower(&self) -> Option<&Path> {
        self.lower.as_deref()
    }

    /// Give up the slot and the cache locks (before preparing another run directory for the same
    /// run, which may then take the same slot).
    pub fn release(&mut self) {
        self.confirm();
        self.lower = None;
        self._slot = None;
        self._cache_locks.clear();
    }

    /// Whether the tree the run saw is the commit's: a kept checkout brought up to date from
    /// stamps that this process had not checked is checked against them while the run goes on,
    /// and this waits for that. `false`: the kept checkout was altered outside git-sandbox; it
    /// is marked to be checked out afresh, and what the run made is not evidence of the commit.
    pub fn confirm(&mut self) -> bool {
        let Some(handle) = self.verify.take() else {
            return true;
        };
        if handle.join().unwrap_or(false) {
            return true;
        }
        if let Some(stage) = &mut self.cache_stage {
            stage.discard();
        }
        if let Some(lower) = &self.lower {
            verified_here().lock().expect("cache map").remove(lower);
        }
        if let Some(state) = &self.state_path {
            let _ = std::fs::remove_file(state);
        }
        false
    }
}

/// A held slot: its directory and locks (released when dropped).
struct Slot {
    dir: PathBuf,
    uid: Option<u32>,
    _locks: Vec<File>,
}

fn euid() -> u32 {
    // SAFETY: plain getter.
    unsafe { libc::geteuid() }
}

/// This user's directory of kept checkouts under a scratch dir, shared by its data dirs.
fn user_root(scratch: &Path) -> PathBuf {
    scratch.join(format!("git-sandbox-cache-{}", euid()))
}

/// The directory of the kept checkouts of the data dir `home_id` names, under a scratch dir.
pub fn cache_root(scratch: &Path, home_id: &str) -> PathBuf {
    user_root(scratch).join(format!("home-{home_id}"))
}

fn try_lock(path: &Path) -> Option<File> {
    let f = gs_util::private::open_rw(path).ok()?;
    f.try_lock().ok()?;
    Some(f)
}

/// The file in a data dir's slots that names the data dir (its path).
///
/// Once the data dir is gone, its kept checkouts can be told from those of one still in use.
const OWNER: &str = "data-dir";

fn acquire(cache: &Path, data_dir: &Path) -> Option<Slot> {
    let user = cache.parent()?;
    gs_util::private::create_private_dir(user).ok()?;
    gs_util::private::create_private_dir(cache).ok()?;
    let owner = cache.join(OWNER);
    if !owner.exists() {
        // A new data dir: say whose these slots are, and clear those of data dirs that are gone
        // (a test suite's, or one removed by hand), which nothing else would.
        let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        gs_util::replace_file(&owner, dir.as_os_str().as_encoded_bytes(), false).ok()?;
        for (home, _) in orphaned_in(user) {
            let _ = remove_home(&home, false);
        }
    }
    let root = euid() == 0;
    if root {
        gs_util::private::create_private_dir(Path::new(UID_LOCKS)).ok()?;
    }
    for n in 0..MAX_SLOTS {
        let Some(lock) = try_lock(&cache.join(format!("slot-{n}.lock"))) else {
            continue;
        };
        let mut locks = vec![lock];
        if root {
            match try_lock(&Path::new(UID_LOCKS).join(format!("uid-{n}.lock"))) {
                Some(l) => locks.push(l),
                None => continue,
            }
        }
        return Some(Slot {
            dir: cache.join(format!("slot-{n}")),
            uid: root.then_some(SLOT_UID_BASE + n),
            _locks: locks,
        });
    }
    None
}

/// What a kept checkout holds, written after every change to it (`updating` first, so a change
/// cut short by a kill is never trusted).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    tree: String,
    bytes: u64,
    files: u64,
    updating: bool,
    /// What a walk of `lower/tree` must find (none: a state written before seals, not trusted).
    #[serde(default)]
    seal: Option<Seal>,
    /// Every file of the tree was written at or after this time (ms since the epoch): outputs
    /// of runs that ended before it are older than any file (see [`super::newer`]).
    #[serde(default)]
    fresh_ms: i64,
}

/// The seals of the kept checkouts this process verified.
///
/// A kept checkout is verified in full once per process; its seal is then kept here and brought
/// up to date by what each update touches (no run can reach a kept checkout: it is only ever an
/// overlay's lower layer).
fn verified_here() -> &'static std::sync::Mutex<std::collections::HashMap<PathBuf, Seal>> {
    static SEEN: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, Seal>>> =
        std::sync::OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// What [`prepare`] needs beyond the repository and the tree.
pub struct Options<'a> {
    /// The scratch dir (`checkout::scratch_root()`).
    pub scratch: &'a Path,
    /// The data dir's home id: its kept checkouts are its own.
    pub home_id: &'a str,
    /// The data dir itself (`$GIT_SANDBOX_HOME`).
    pub data_dir: &'a Path,
    /// Whether runs get an overlay here (the machine probe): else fresh checkouts.
    pub overlay: bool,
    /// The most the tree's blobs may hold, in bytes.
    pub ceiling: u64,
    pub interrupt: &'a AtomicBool,
    /// Build caches to use and keep, when the run has a kept checkout.
    pub cache: Option<super::caches::CacheUse<'a>>,
}

/// The run directory for a run of `tree` on a kept checkout, when the machine allows them and a
/// slot is free; `None` otherwise (nothing is checked out).
pub fn prepare_kept(
    repo: &gix::Repository,
    tree: ObjectId,
    opts: &Options<'_>,
) -> Result<Option<RunDir>, GitError> {
    if !opts.overlay {
        return Ok(None);
    }
    match acquire(&cache_root(opts.scratch, opts.home_id), opts.data_dir) {
        Some(slot) => kept(repo, tree, opts, slot).map(Some),
        None => Ok(None),
    }
}

/// The run directory for a run of `tree`: a kept checkout brought to the tree where the machine
/// allows it, else a fresh checkout.
pub fn prepare(
    repo: &gix::Repository,
    tree: ObjectId,
    opts: &Options<'_>,
) -> Result<RunDir, GitError> {
    if let Some(work) = prepare_kept(repo, tree, opts)? {
        return Ok(work);
    }
    let fresh = checkout::checkout_tree(repo, tree, opts.scratch, opts.interrupt, opts.ceiling)?;
    let files = fresh.files;
    Ok(RunDir {
        root: fresh.into_dir(),
        lower: None,
        run_uid: None,
        files,
        prepared: Prepared::Fresh,
        cache_layers: Vec::new(),
        cache_out: None,
        cache_generations: Vec::new(),
        cache_stage: None,
        cache_paths: Vec::new(),
        verify: None,
        state_path: None,
        _slot: None,
        _cache_locks: Vec::new(),
    })
}

/// A key for the repository that survives a lost index: its git dir.
pub fn repo_key(repo: &gix::Repository) -> String {
    let dir = std::fs::canonicalize(repo.common_dir())
        .unwrap_or_else(|_| repo.common_dir().to_path_buf());
    gs_util::fnv64_hex(dir.as_os_str().as_encoded_bytes())
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> GitError {
    move |source| GitError::Io { context, source }
}

fn kept(
    repo: &gix::Repository,
    tree: ObjectId,
    opts: &Options<'_>,
    slot: Slot,
) -> Result<RunDir, GitError> {
    let dir = slot.dir.join(repo_key(repo));
    let lower = dir.join("lower");
    let tree_dir = lower.join("tree");
    let state_path = dir.join("state");
    gs_util::private::create_dir_all(&dir)
        .map_err(io(format!("cannot create {}", dir.display())))?;
    let mut trusted: Option<State> = std::fs::read(&state_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|s: &State| !s.updating && s.seal.is_some() && tree_dir.is_dir());
    let key = lower.clone();
    // A seal this process checked, if the state still says the same (no other process used the
    // slot since); else the state's, and the tree is checked against it in full while the run
    // goes on (see `RunDir::confirm`).
    let mut known = verified_here()
        .lock()
        .expect("cache map")
        .remove(&key)
        .filter(|k| trusted.as_ref().and_then(|s| s.seal) == Some(*k));
    // A check of this seal started with the process (`check_ahead`) is waited for here, before
    // the tree is touched: a tree that fails it is checked out afresh.
    if let (None, Some(seal)) = (known, trusted.as_ref().and_then(|s| s.seal)) {
        match checked_ahead(&key, seal) {
            Some(true) => known = Some(seal),
            Some(false) => trusted = None,
            None => {}
        }
    }
    let sealed = trusted.as_ref().and_then(|s| s.seal);
    let unverified = known.is_none();
    let write_state = |s: &State| -> Result<(), GitError> {
        let body = serde_json::to_vec(s).expect("states serialize");
        gs_util::replace_file(&state_path, &body, false)
            .map_err(io(format!("cannot write {}", state_path.display())))
    };
    let mut prepared = Prepared::Updated;
    let mut files = 0;
    let mut bytes = 0;
    let from = trusted
        .as_ref()
        .and_then(|s| ObjectId::from_hex(s.tree.as_bytes()).ok());
    // The same tree again (a one-off exec after a run): nothing will change, so the check of
    // the seal read starts now, beside everything that follows.
    let mut early = match (sealed, from) {
        (Some(seal), Some(old)) if unverified && old == tree => {
            Some(verify_in_background(tree_dir.clone(), seal))
        }
        _ => None,
    };
    // The paths the diff touched, and their stamps before it.
    let mut before = (Vec::new(), stamps::Stamps::new());
    let mut updated = None;
    if let (Some(old), Some(st)) = (from, trusted.as_ref()) {
        if old == tree {
            updated = Some(Vec::new());
            bytes = st.bytes;
            if st.bytes > opts.ceiling {
                return Err(GitError::TreeTooLarge {
                    size: st.bytes,
                    ceiling: opts.ceiling,
                });
            }
        } else {
            write_state(&State {
                updating: true,
                ..State::default()
            })?;
            let _t = gs_util::trace::span("kept checkout: apply diff");
            match git::cache::update(
                repo,
                &tree_dir,
                old,
                tree,
                st.bytes,
                opts.ceiling,
                opts.interrupt,
                &mut |paths| before = (paths.to_vec(), stamps::around(&tree_dir, paths)),
            ) {
                Ok(Some(u)) => {
                    files = u.written.len();
                    bytes = u.bytes;
                    let mut touched = u.written.clone();
                    touched.extend(u.removed.iter().cloned());
                    updated = Some(touched);
                }
                Ok(None) => {}
                Err(e @ GitError::TreeTooLarge { .. }) => {
                    // The kept tree is untouched: keep trusting it.
                    write_state(st)?;
                    return Err(e);
                }
                Err(_) => {}
            }
        }
    }
    let mut fresh_ms = trusted.as_ref().map_or(0, |s| s.fresh_ms);
    let touched = match updated {
        Some(t) => t,
        None => {
            fresh_ms = gs_util::time::now_millis();
            // First use of the slot for this repository, a change that cannot be applied
            // piecemeal, or a kept tree that cannot be trusted: check it out afresh.
            prepared = Prepared::Rebuilt;
            write_state(&State {
                updating: true,
                ..State::default()
            })?;
            let _ = std::fs::remove_dir_all(&lower);
            // Left by versions that kept a line per file.
            for old in ["stamps", "stamps.journal"] {
                let _ = std::fs::remove_file(dir.join(old));
            }
            let _t = gs_util::trace::span("kept checkout: rebuild");
            let fresh = checkout::checkout_tree(repo, tree, &dir, opts.interrupt, opts.ceiling)?;
            files = fresh.files;
            bytes = fresh.bytes;
            let tmp = fresh.into_dir().keep();
            std::fs::rename(&tmp, &lower)
                .map_err(io(format!("cannot move {}", lower.display())))?;
            for sub in ["home", "tmp"] {
                let _ = std::fs::create_dir(lower.join(sub));
            }
            if let Some(uid) = slot.uid {
                chown_all(&lower, uid);
            }
            evict_beyond(&slot.dir, &dir, KEPT_PER_SLOT);
            Vec::new()
        }
    };
    if let Some(uid) = slot.uid {
        chown_touched(&tree_dir, &touched, uid);
    }
    let t = gs_util::trace::span("build caches: locks");
    let mut caches = match &opts.cache {
        Some(c) => super::caches::for_run(c, &repo_key(repo), slot.uid),
        None => super::caches::Caches::default(),
    };
    drop(t);
    let slot_key = gs_util::fnv64_hex(lower.as_os_str().as_encoded_bytes());
    if let Some(stage) = caches.stage.as_mut() {
        stage.record(&tree.to_string(), &slot_key);
    }
    let t = gs_util::trace::span("kept checkout: newer than cached outputs");
    let stale = super::newer::stale(repo, tree, &caches.made, &slot_key, fresh_ms);
    // The check of the seal started early walks the files as they were: it ends first.
    let mut checked = None;
    if stale.is_some() {
        checked = early.take().map(|h| h.join().unwrap_or(false));
    }
    drop(t);
    let _t = gs_util::trace::span("kept checkout: seal, state");
    let mut seal = match (prepared, sealed) {
        (Prepared::Updated, Some(mut seal)) => {
            let (paths, stamps_before) = &before;
            seal.replace(stamps_before, &stamps::around(&tree_dir, paths));
            seal
        }
        _ => stamps::of(&tree_dir),
    };
    match stale {
        Some(super::newer::Stale::Files(files)) => {
            let stamps_before = stamps::around(&tree_dir, &files);
            super::newer::touch(&tree_dir, &files);
            seal.replace(&stamps_before, &stamps::around(&tree_dir, &files));
        }
        Some(super::newer::Stale::All) => {
            // The seal is taken afresh: what it says now is checked first, not blessed.
            if checked.is_none() && unverified && prepared == Prepared::Updated {
                checked = Some(stamps::intact(&tree_dir, &seal));
            }
            fresh_ms = gs_util::time::now_millis();
            super::newer::touch_all(&tree_dir);
            seal = stamps::of(&tree_dir);
        }
        None => {}
    }
    write_state(&State {
        tree: tree.to_string(),
        bytes,
        files: seal.count,
        updating: false,
        seal: Some(seal),
        fresh_ms,
    })?;
    // A tree brought up to date from a seal this process has not checked: check that it holds
    // exactly what the seal says now, on another thread, while the run starts.
    let verify = match checked {
        Some(ok) => (!ok).then(|| std::thread::spawn(|| false)),
        None => early.or_else(|| {
            (unverified && prepared == Prepared::Updated)
                .then(|| verify_in_background(tree_dir.clone(), seal))
        }),
    };
    verified_here().lock().expect("cache map").insert(key, seal);
    // The run's own directory: the overlay's mount point, swept with the others when stale.
    let root = checkout::run_dir(opts.scratch)?;
    drop(_t);
    Ok(RunDir {
        root,
        lower: Some(lower),
        run_uid: slot.uid,
        files,
        prepared,
        cache_layers: caches.layers,
        cache_out: caches.out,
        cache_paths: caches.paths,
        cache_generations: caches.generations,
        cache_stage: caches.stage,
        verify,
        state_path: Some(state_path),
        _slot: Some(slot),
        _cache_locks: caches.locks,
    })
}

/// How many repositories' kept checkouts a slot holds: making one more removes the least
/// recently used beyond that (a machine that runs many repositories, or tests that make them,
/// does not fill its scratch dir — tmpfs, memory — between `gc`s).
pub const KEPT_PER_SLOT: usize = 8;

/// Remove the least recently used kept checkouts of a slot (whose lock the caller holds) so that
/// at most `most` stay, `keep` among them.
fn evict_beyond(slot: &Path, keep: &Path, most: usize) {
    let mut others: Vec<(i64, PathBuf)> = std::fs::read_dir(slot)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.path() != keep)
        .map(|e| {
            let dir = e.path();
            (gs_util::modified_ms(&dir.join("state")), dir)
        })
        .collect();
    if others.len() < most {
        return;
    }
    // Newest first; those past the newest `most - 1` go.
    others.sort_by_key(|o| std::cmp::Reverse(o.0));
    for (_, dir) in others.into_iter().skip(most.saturating_sub(1)) {
        let _t = gs_util::trace::span("kept checkout: evict one");
        verified_here()
            .lock()
            .expect("cache map")
            .remove(&dir.join("lower"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Check on another thread that `tree` holds exactly what `expected` seals.
fn verify_in_background(tree: PathBuf, expected: Seal) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let _t = gs_util::trace::span("kept checkout: verify seal");
        stamps::intact(&tree, &expected)
    })
}

/// Checks of kept checkouts started with the process, by `lower/`, with the seal each checks.
type Ahead = std::collections::HashMap<PathBuf, (Seal, std::thread::JoinHandle<bool>)>;

fn ahead() -> &'static std::sync::Mutex<Ahead> {
    static AHEAD: std::sync::OnceLock<std::sync::Mutex<Ahead>> = std::sync::OnceLock::new();
    AHEAD.get_or_init(Default::default)
}

/// Start checking, on another thread, the kept checkout the first run will most likely get.
///
/// That is `repo`'s in the first slot free now, checked against the seal its state holds: the walk
/// of the whole tree (4 ms at 2,000 files, 18 ms at 10,000) then overlaps the process's start
/// instead of its first run. Nothing is made or locked; [`prepare`] waits for the result before
/// it touches the tree, and takes it only if the state, read again with the slot held, still
/// holds that seal (no other process changed the tree meanwhile).
pub fn check_ahead(repo: &gix::Repository, scratch: &Path, home_id: &str) {
    let cache = cache_root(scratch, home_id);
    // Free now (a slot never used is free too: no kept checkout to check there), its uid too as
    // root, as `acquire` takes them.
    let free = |lock: PathBuf| std::fs::File::open(lock).map_or(true, |f| f.try_lock().is_ok());
    let Some(n) = (0..MAX_SLOTS).find(|n| {
        free(cache.join(format!("slot-{n}.lock")))
            && (euid() != 0 || free(Path::new(UID_LOCKS).join(format!("uid-{n}.lock"))))
    }) else {
        return;
    };
    let dir = cache.join(format!("slot-{n}")).join(repo_key(repo));
    let Some(seal) = std::fs::read(dir.join("state"))
        .ok()
        .and_then(|b| serde_json::from_slice::<State>(&b).ok())
        .filter(|s| !s.updating)
        .and_then(|s| s.seal)
    else {
        return;
    };
    let lower = dir.join("lower");
    if verified_here().lock().expect("cache map").get(&lower) == Some(&seal) {
        return;
    }
    let tree = lower.join("tree");
    let handle = std::thread::spawn(move || {
        let _t = gs_util::trace::span("kept checkout: verify seal ahead");
        stamps::intact(&tree, &seal)
    });
    ahead()
        .lock()
        .expect("ahead map")
        .insert(lower, (seal, handle));
}

/// The result of the check started ahead for the kept checkout at `lower`, if it checked `seal`
/// (waited for).
fn checked_ahead(lower: &Path, seal: Seal) -> Option<bool> {
    let (checked, handle) = ahead().lock().expect("ahead map").remove(lower)?;
    (checked == seal).then(|| handle.join().unwrap_or(false))
}

/// A kept checkout of one repository in one slot, for `gc`.
#[derive(Debug, Clone)]
pub struct KeptCheckout {
    pub repo_key: String,
    pub dir: PathBuf,
    /// When a run last used it (ms since the epoch).
    pub used_ms: i64,
    pub bytes: u64,
    slot_lock: PathBuf,
}

/// Every kept checkout under `scratch` of the data dir `home_id` names.
pub fn kept_checkouts(scratch: &Path, home_id: &str) -> Vec<KeptCheckout> {
    in_slots(&cache_root(scratch, home_id))
}

/// The kept checkouts of this user laid out as before they were per data dir (slots straight
/// under [`user_root`]): no run uses them any more, and whose they were is not known.
pub fn old_kept_checkouts(scratch: &Path) -> Vec<KeptCheckout> {
    in_slots(&user_root(scratch))
}

/// The slots of data dirs that are gone (their `home-id` is not the one their slots were made
/// for), each with its kept checkouts. Slots that do not say whose they are yet (being made) are
/// not among them.
pub fn orphaned_homes(scratch: &Path) -> Vec<(PathBuf, Vec<KeptCheckout>)> {
    orphaned_in(&user_root(scratch))
}

fn orphaned_in(user: &Path) -> Vec<(PathBuf, Vec<KeptCheckout>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(user).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_prefix("home-") else {
            continue;
        };
        let Ok(owner) = std::fs::read(e.path().join(OWNER)) else {
            continue;
        };
        let data_dir =
            PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&owner));
        let current = std::fs::read_to_string(data_dir.join("home-id")).unwrap_or_default();
        if current.trim() != id {
            out.push((e.path(), in_slots(&e.path())));
        }
    }
    out
}

/// Remove a data dir's slots whole, unless a run holds one of them. Returns whether they were
/// removed (or, with `dry_run`, could be).
pub fn remove_home(dir: &Path, dry_run: bool) -> std::io::Result<bool> {
    let mut held = Vec::new();
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("slot-") && name.ends_with(".lock") {
            match try_lock(&e.path()) {
                Some(l) => held.push(l),
                None => return Ok(false),
            }
        }
    }
    if !dry_run {
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(true)
}

fn in_slots(root: &Path) -> Vec<KeptCheckout> {
    let mut out = Vec::new();
    for slot in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = slot.file_name().to_string_lossy().into_owned();
        let numbered = name
            .strip_prefix("slot-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !numbered || !slot.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for repo in std::fs::read_dir(slot.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if !repo.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = repo.path();
            let used_ms = gs_util::modified_ms(&dir.join("state"));
            out.push(KeptCheckout {
                repo_key: repo.file_name().to_string_lossy().into_owned(),
                bytes: gs_util::disk_size(&dir),
                used_ms,
                dir,
                slot_lock: root.join(format!("{name}.lock")),
            });
        }
    }
    out
}

/// Remove a kept checkout unless a run holds its slot. Returns whether it was removed (or,
/// with `dry_run`, could be).
pub fn remove_kept(kept: &KeptCheckout, dry_run: bool) -> std::io::Result<bool> {
    let Some(_held) = try_lock(&kept.slot_lock) else {
        return Ok(false);
    };
    if !dry_run {
        verified_here()
            .lock()
            .expect("cache map")
            .remove(&kept.dir.join("lower"));
        match std::fs::remove_dir_all(&kept.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(true)
}

/// Give everything under `dir` to `uid` (links themselves, never their targets).
fn chown_all(dir: &Path, uid: u32) {
    let _ = std::os::unix::fs::lchown(dir, Some(uid), Some(uid));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let _ = std::os::unix::fs::lchown(&p, Some(uid), Some(uid));
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            chown_all(&p, uid);
        }
    }
}

/// Give the paths an update wrote (and the directories it made for them) to `uid`.
fn chown_touched(tree: &Path, touched: &[String], uid: u32) {
    for rel in touched {
        let mut p = tree.join(rel);
        loop {
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.uid() != uid => {
                    let _ = std::os::unix::fs::lchown(&p, Some(uid), Some(uid));
                }
                Ok(_) if p != tree.join(rel) => break,
                _ => {}
            }
            match p.parent() {
                Some(parent) if parent.starts_with(tree) && parent != tree => {
                    p = parent.to_path_buf()
                }
                _ => break,
            }
        }
    }
}
