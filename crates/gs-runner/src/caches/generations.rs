//! A branch's build cache as generations: each run's writes become the next one, laid over the
//! others; no layer changes while a run has it mounted, and long chains are folded into a base
//! (see the parent module for the layout and the rule of who writes).

use super::lock;
use std::fs::File;
use std::path::{Path, PathBuf};

/// More generations than this in one chain are folded into one.
pub const MAX_CHAIN: usize = 8;

/// Bytes merged into a generation.
pub(super) fn added(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("added"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum()
}

/// Which run made a generation: the tree it ran, the kept checkout (slot) it ran in, and when it
/// ended (ms since the epoch). Build tools take an output newer than its sources as built from
/// them (make's rule, cargo's fingerprints of local crates), so a run must know which trees the
/// outputs it reads were built from (see `workspace`). `tree` is `*` when that is not known (a
/// generation made before the record, or records a fold left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub tree: String,
    pub slot: String,
    pub end_ms: i64,
}

/// The file of a generation that says which runs made it, a line each: `tree slot end_ms`.
const MADE: &str = "made";

/// At most this many records are kept in a folded base; older ones become one `*` record.
const MAX_MADE: usize = 256;

/// The runs that made the generation in `dir`.
pub(super) fn made(dir: &Path) -> Vec<Made> {
    let Ok(text) = std::fs::read_to_string(dir.join(MADE)) else {
        return vec![Made {
            tree: "*".into(),
            slot: "-".into(),
            end_ms: gs_util::modified_ms(&dir.join("added")).max(gs_util::modified_ms(dir)),
        }];
    };
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (tree, slot, end) = (w.next()?, w.next()?, w.next()?.parse().ok()?);
            Some(Made {
                tree: tree.into(),
                slot: slot.into(),
                end_ms: end,
            })
        })
        .collect()
}

fn made_text(records: &[Made]) -> String {
    records
        .iter()
        .map(|m| format!("{} {} {}\n", m.tree, m.slot, m.end_ms))
        .collect()
}

/// One generation of a branch's cache.
#[derive(Debug, Clone)]
pub struct Generation {
    pub number: u64,
    pub dir: PathBuf,
    pub base: bool,
}

/// A branch's published generations, oldest first.
pub(super) fn generations(branch_dir: &Path) -> Vec<Generation> {
    let mut out: Vec<Generation> = std::fs::read_dir(branch_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix("gen-")?.parse::<u64>().ok()?;
            let dir = e.path();
            Some(Generation {
                number: n,
                base: n == 0 || dir.join("base").exists(),
                dir,
            })
        })
        .collect();
    out.sort_by_key(|g| g.number);
    out
}

/// The generations a run of the branch sees now: the newest base and those above it, newest
/// first.
pub(super) fn chain(branch_dir: &Path) -> Vec<Generation> {
    let all = generations(branch_dir);
    let from = all.iter().rposition(|g| g.base).unwrap_or(0);
    let mut chain = all[from..].to_vec();
    chain.reverse();
    chain
}

/// A cache of the layout before generations (one `layer/` in the branch's dir) becomes its
/// generation 0, once no run of the old layout holds it.
fn migrate(branch_dir: &Path) {
    if !branch_dir.join("layer").is_dir() {
        return;
    }
    let Some(_held) = lock(branch_dir, true) else {
        return;
    };
    let gen0 = branch_dir.join("gen-0");
    if std::fs::create_dir(&gen0).is_ok() {
        let _ = std::fs::rename(branch_dir.join("layer"), gen0.join("layer"));
        let _ = std::fs::rename(branch_dir.join("added"), gen0.join("added"));
    }
}

/// Hold the chain of `branch_dir` shared: its generations (newest first) and their locks. A
/// generation removed between the listing and its lock (a fold made a newer base) sends the
/// listing round again.
pub(super) fn hold_chain(branch_dir: &Path) -> (Vec<Generation>, Vec<File>) {
    migrate(branch_dir);
    for _ in 0..4 {
        let chain = chain(branch_dir);
        let locks: Vec<File> = chain.iter().filter_map(|g| lock(&g.dir, false)).collect();
        if locks.len() == chain.len() && chain.iter().all(|g| g.dir.join("layer").is_dir()) {
            return (chain, locks);
        }
    }
    (Vec::new(), Vec::new())
}

/// A directory's root is writable for the gid every run gets, as root (runs of other slots, with
/// other uids, build on what one run kept).
pub(super) fn open_to_runs(dir: &Path, as_root: bool) {
    if as_root {
        use std::os::unix::fs::PermissionsExt;
        let gid = gs_sandbox::sandbox::RUN_GID;
        let _ = std::os::unix::fs::lchown(dir, Some(0), Some(gid));
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o775));
    }
}

/// The next generation of a branch's cache while a run writes it: a directory of its own (its
/// `layer/` made by the run's helper, `added` written once the merge ended). Dropped, it is
/// published as the branch's newest generation when the merge ended, else removed.
pub struct Stage {
    branch_dir: PathBuf,
    dir: PathBuf,
    /// A new base: published even when empty, since it replaces the chain below it.
    base: bool,
    discard: bool,
    /// The run's tree and slot, recorded with the time it ended when published.
    made: Option<(String, String)>,
    /// The caches of other branches laid under this branch's (production's, for an
    /// experiment): a fold keeps the whiteouts that hide a name of theirs.
    below: Vec<PathBuf>,
    run_uid: Option<u32>,
    /// An agent workspace's next layer (see [`Stage::for_workspace`]).
    workspace: bool,
}

impl Stage {
    /// The next layer of an agent workspace whose layers are kept in `dir` as generations (laid
    /// over a checkout, not under one): published when the command's merge ended, folded past
    /// [`MAX_CHAIN`] keeping every whiteout, never a spare.
    pub fn for_workspace(dir: &Path, run_uid: Option<u32>) -> Option<Stage> {
        let stage = tempfile::Builder::new()
            .prefix(gs_sandbox::sandbox::layers::WORK_STAGE_PREFIX)
            .tempdir_in(dir)
            .ok()?
            .keep();
        open_to_runs(&stage, run_uid.is_some());
        Some(Stage {
            branch_dir: dir.to_path_buf(),
            dir: stage,
            base: false,
            discard: false,
            made: None,
            below: Vec::new(),
            run_uid,
            workspace: true,
        })
    }

    /// `run_uid`: the run's uid as root (the stage is then writable for every run's gid).
    pub(super) fn new(
        branch_dir: &Path,
        base: bool,
        run_uid: Option<u32>,
        below: Vec<PathBuf>,
    ) -> Option<Stage> {
        let dir = match spare(branch_dir, run_uid) {
            Some(dir) => dir,
            None => {
                let dir = tempfile::Builder::new()
                    .prefix(gs_sandbox::sandbox::layers::STAGE_PREFIX)
                    .tempdir_in(branch_dir)
                    .ok()?
                    .keep();
                open_to_runs(&dir, run_uid.is_some());
                dir
            }
        };
        if base && std::fs::write(dir.join("base"), "").is_err() {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some(Stage {
            branch_dir: branch_dir.to_path_buf(),
            dir,
            base,
            discard: false,
            made: None,
            below,
            run_uid,
            workspace: false,
        })
    }

    /// The tree the run sees and the kept checkout it runs in, for the generation's record.
    pub fn record(&mut self, tree: &str, slot: &str) {
        self.made = Some((tree.to_string(), slot.to_string()));
    }

    /// The directory the run's writes are merged into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the run wrote is not kept (it did not see the commit's tree).
    pub fn discard(&mut self) {
        self.discard = true;
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let layer = self.dir.join("layer");
        if !self.base && !self.workspace && holds_nothing(&self.dir) {
            keep_spare(&self.branch_dir, self.run_uid, &self.dir);
            return;
        }
        if self.discard || !self.dir.join("added").exists() || !layer.is_dir() {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        // A run that wrote nothing under the cached paths (no file, no whiteout) would add an
        // empty layer: the chain reads the same without it, and skipping it spares every such
        // run a publication, and every eighth a fold, on the data dir's disk.
        let empty = std::fs::read_dir(&layer).is_ok_and(|mut d| d.next().is_none());
        if empty && !self.base {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        // Without a record the generation counts as made from an unknown tree.
        if let Some((tree, slot)) = &self.made {
            let record = Made {
                tree: tree.clone(),
                slot: slot.clone(),
                end_ms: gs_util::time::now_millis(),
            };
            let _ = std::fs::write(self.dir.join(MADE), made_text(&[record]));
        }
        let _t = gs_util::trace::span("build caches: publish");
        publish(&self.branch_dir, &self.dir, &self.below, self.workspace);
    }
}

/// A stage a run merged nothing into is kept for this process's next run of the branch (of the
/// same uid) rather than removed: making and removing a directory on the data dir's disk cost
/// 2-6 ms per run on ext4, more than the rest of a run of `true`. Idle longer than this, a
/// spare is removed instead (`prune` takes a `new-` dir untouched for a day as left by a
/// killed run).
const SPARE_FOR: std::time::Duration = std::time::Duration::from_secs(600);

struct Spare {
    branch_dir: PathBuf,
    run_uid: Option<u32>,
    dir: PathBuf,
    since: std::time::Instant,
}

fn spares() -> &'static std::sync::Mutex<Vec<Spare>> {
    static SPARES: std::sync::Mutex<Vec<Spare>> = std::sync::Mutex::new(Vec::new());
    &SPARES
}

/// Whether a stage holds nothing a run wrote: at most `added` and an empty `layer/` (a merge
/// that failed leaves `failed`; a discarded run's writes fill `layer/`). `added` goes, so the
/// stage is as new.
fn holds_nothing(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut added = false;
    for e in entries {
        let Ok(e) = e else { return false };
        let empty_layer = e.file_name() == "layer"
            && e.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_none());
        added |= e.file_name() == "added";
        if !(empty_layer || e.file_name() == "added") {
            return false;
        }
    }
    !added || std::fs::remove_file(dir.join("added")).is_ok()
}

fn keep_spare(branch_dir: &Path, run_uid: Option<u32>, dir: &Path) {
    spares().lock().expect("spare stages").push(Spare {
        branch_dir: branch_dir.to_path_buf(),
        run_uid,
        dir: dir.to_path_buf(),
        since: std::time::Instant::now(),
    });
}

/// A spare stage of `branch_dir` for a run of `run_uid`, if this process kept one.
fn spare(branch_dir: &Path, run_uid: Option<u32>) -> Option<PathBuf> {
    let mut stale = Vec::new();
    let found = {
        let mut all = spares().lock().expect("spare stages");
        let i = all
            .iter()
            .position(|s| s.branch_dir == branch_dir && s.run_uid == run_uid);
        i.map(|i| all.swap_remove(i)).and_then(|s| {
            if s.since.elapsed() < SPARE_FOR && s.dir.is_dir() {
                // A spare reused for a day by a daemon must not look left behind to `prune`
                // (a `new-` dir untouched for a day).
                if let Ok(f) = std::fs::File::open(&s.dir) {
                    let _ = f.set_modified(std::time::SystemTime::now());
                }
                Some(s.dir)
            } else {
                stale.push(s.dir);
                None
            }
        })
    };
    for dir in stale {
        let _ = std::fs::remove_dir_all(dir);
    }
    found
}

/// Remove the spare stages this process kept (when it ends).
pub fn drop_spares() {
    let all = std::mem::take(&mut *spares().lock().expect("spare stages"));
    for s in all {
        let _ = std::fs::remove_dir_all(s.dir);
    }
}

/// Make `staged` the branch's newest generation, then tidy the chain.
///
/// It waits for another run's publication, never dropping this one; a chain grown past
/// [`MAX_CHAIN`] is folded, and the generations no chain uses that no run holds are removed (in
/// the background).
fn publish(branch_dir: &Path, staged: &Path, below: &[PathBuf], keep_whiteouts: bool) {
    let Ok(mutex) = gs_util::private::open_rw(&branch_dir.join("lock")) else {
        let _ = std::fs::remove_dir_all(staged);
        return;
    };
    if mutex.lock().is_err() {
        let _ = std::fs::remove_dir_all(staged);
        return;
    }
    let next = generations(branch_dir).last().map_or(1, |g| g.number + 1);
    if std::fs::rename(staged, branch_dir.join(format!("gen-{next}"))).is_err() {
        let _ = std::fs::remove_dir_all(staged);
        return;
    }
    if chain(branch_dir).len() > MAX_CHAIN {
        fold(branch_dir, next + 1, below, keep_whiteouts);
    }
    drop(mutex);
    // Off the run's path: removing a folded chain unlinks every file of every generation in it
    // (50-160 ms on a loaded disk, every eighth run), which held up the run that published
    // (and with it the next commit of its worker). A command waits for it before it exits
    // ([`settle`]); cut short (killed), it leaves renamed `old-gen-*` dirs no run reads, which
    // the next prune removes.
    let dir = branch_dir.to_path_buf();
    *PRUNING.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let done = || {
        let mut n = PRUNING.0.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        PRUNING.1.notify_all();
    };
    let pruning = std::thread::Builder::new()
        .name("cache-prune".into())
        .spawn(move || {
            prune(&dir, false);
            done();
        });
    if pruning.is_err() {
        prune(branch_dir, false);
        done();
    }
}

/// Prunes under way in this process, and the signal that one ended.
static PRUNING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Wait for the prunes this process started (before it exits, so that a command leaves no
/// generation it made unused behind it).
pub fn settle() {
    let mut n = PRUNING.0.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        n = PRUNING.1.wait(n).unwrap_or_else(|e| e.into_inner());
    }
}

/// Fold the branch's chain into one new base generation `number`: what the chain shows, taken
/// newest first from the generation that has each entry and hard-linked (a layer's files are
/// never written in place), so a run reads one layer where it read many. Whiteouts are kept
/// where they hide a name of a layer a run lays under the chain: the setup layers of the
/// branch, and the chains and setup layers of the caches `below` it. Called with the branch's
/// lock held.
fn fold(branch_dir: &Path, number: u64, below: &[PathBuf], keep_whiteouts: bool) {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::fs::MetadataExt;
    let chain = chain(branch_dir);
    let Ok(tmp) = tempfile::Builder::new()
        .prefix("fold-")
        .tempdir_in(branch_dir)
    else {
        return;
    };
    let layer = tmp.path().join("layer");
    let Some(oldest) = chain
        .last()
        .and_then(|g| std::fs::metadata(g.dir.join("layer")).ok())
    else {
        return;
    };
    if std::fs::create_dir(&layer).is_err() {
        return;
    }
    let owner = (oldest.uid(), oldest.gid());
    let _ = std::os::unix::fs::lchown(&layer, Some(owner.0), Some(owner.1));
    let _ = std::fs::set_permissions(&layer, oldest.permissions());
    let Ok(into) = File::open(&layer) else { return };
    let mut layers = Vec::new();
    for g in &chain {
        let Ok(from) = File::open(g.dir.join("layer")) else {
            return;
        };
        layers.push(OwnedFd::from(from));
    }
    // Held shared while the fold looks at them, like a run's.
    let (mut under, mut _held) = (Vec::new(), Vec::new());
    for dir in std::iter::once(branch_dir).chain(below.iter().map(PathBuf::as_path)) {
        if dir != branch_dir {
            let (chain, locks) = hold_chain(dir);
            under.extend(chain.iter().map(|g| g.dir.join("layer")));
            _held.extend(locks);
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with("setup-") {
                under.push(e.path().join("layer"));
            }
        }
    }
    let below: Vec<OwnedFd> = under
        .iter()
        .filter_map(|l| File::open(l).ok().map(OwnedFd::from))
        .collect();
    let mut merged = gs_sandbox::sandbox::layers::Merged::default();
    if keep_whiteouts {
        merged = merged.keeping_every_whiteout();
    }
    gs_sandbox::sandbox::layers::fold(
        &layers,
        &below,
        into.as_raw_fd(),
        "layer",
        owner,
        &mut merged,
    );
    // A fold missing entries is not published: the chain it would replace stays.
    if merged.failure().is_some() {
        return;
    }
    // What the folded generations were made from, the oldest records beyond the bound as one
    // of an unknown tree.
    let mut records: Vec<Made> = chain.iter().rev().flat_map(|g| made(&g.dir)).collect();
    if records.len() > MAX_MADE {
        let dropped = records.drain(..records.len() - MAX_MADE + 1);
        let end_ms = dropped.map(|m| m.end_ms).max().unwrap_or(0);
        records.insert(
            0,
            Made {
                tree: "*".into(),
                slot: "-".into(),
                end_ms,
            },
        );
    }
    if std::fs::write(tmp.path().join(MADE), made_text(&records)).is_err() {
        return;
    }
    // What the base holds (once per fold), not the sum of what each generation wrote: a file
    // rewritten by every run would count once per run, and the bound's check past that sum
    // measures the whole cache on every run.
    let bytes = gs_util::disk_size(&layer);
    if std::fs::write(tmp.path().join("added"), format!("{bytes}\n")).is_err()
        || std::fs::write(tmp.path().join("base"), "").is_err()
    {
        return;
    }
    let _ = std::fs::rename(tmp.keep(), branch_dir.join(format!("gen-{number}")));
}

/// Remove a branch's generations that its chain no longer uses, unless a run holds them (or,
/// with `dry_run`, say which could go). Returns how many went and the bytes they held.
pub fn prune(branch_dir: &Path, dry_run: bool) -> (u64, u64) {
    // What no chain uses is older than the chain's base; a generation published since the
    // chain was read is newer than all of it (a prune running beside a publication, in this
    // process or another, removed it when it went by "not in the chain" alone).
    let base = chain(branch_dir).last().map_or(0, |g| g.number);
    let (mut count, mut freed) = (0, 0);
    for g in generations(branch_dir) {
        if g.number >= base {
            continue;
        }
        let Some(_held) = lock(&g.dir, true) else {
            continue;
        };
        count += 1;
        freed += gs_util::disk_size(&g.dir);
        if !dry_run {
            // Renamed away first: a run listing the branch now never finds half of it.
            let gone = branch_dir.join(format!("old-gen-{}", g.number));
            if std::fs::rename(&g.dir, &gone).is_ok() {
                let _ = std::fs::remove_dir_all(&gone);
            }
        }
    }
    // What a killed run or fold left half-made, and what a prune cut short left (renamed away
    // under the generation's exclusive lock: no run reads it again).
    for e in std::fs::read_dir(branch_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        let stale = n.starts_with("old-gen-")
            || ["new-", "fold-", "work-"].iter().any(|p| n.starts_with(p))
                && gs_util::modified_ms(&e.path()) < gs_util::time::now_millis() - 24 * 3600 * 1000;
        if stale {
            freed += gs_util::disk_size(&e.path());
            if !dry_run {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    (count, freed)
}

#[cfg(test)]
mod tests {
    use super::super::{for_run, CacheUse, Caches};
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    static HOME: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec![".cache/pip/http".to_string()]);

    fn use_<'a>(home: &'a Path, branch: &'a str) -> CacheUse<'a> {
        CacheUse {
            home,
            branch: Some(branch),
            writes: true,
            read: true,
            production: "main",
            dirs: &[],
            home_dirs: &HOME,
            max_mb: 0,
            variant: "",
        }
    }

    /// A run that made `made` (files) and deleted `gone` (whiteouts, as overlayfs records them;
    /// `false` when this process may not make one).
    fn run(home: &Path, branch: &str, made: &[&str], gone: &[&str]) -> bool {
        let c: Caches = for_run(&use_(home, branch), "r", None);
        let layer = c.out.as_ref().expect("a stage").join("layer");
        for f in made {
            let p = layer.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, f).unwrap();
        }
        for f in gone {
            let p = layer.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            // SAFETY: mknod with a valid path.
            if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) } != 0 {
                return false;
            }
        }
        std::fs::write(c.out.as_ref().unwrap().join("added"), "1\n").unwrap();
        true
    }

    #[test]
    fn a_prune_beside_a_publication_never_removes_the_generation_just_published() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        assert!(run(&home, "main", &["home/0"], &[]));
        let dir = home.join("r").join(super::super::branch_key("main", ""));
        // Another process's prune (gc's, or a run's of the same branch) at any moment.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pruner = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    prune(&dir, false);
                }
            })
        };
        for i in 1..=3 * MAX_CHAIN {
            assert!(run(&home, "main", &[&format!("home/{i}")], &[]));
            let c = for_run(&use_(&home, "main"), "r", None);
            let seen = c
                .layers
                .iter()
                .any(|l| l.join(format!("home/{i}")).is_file());
            assert!(seen, "run {i}'s generation is read: {:?}", c.generations);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        pruner.join().unwrap();
    }

    fn whiteout(p: &Path) -> bool {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
    }

    #[test]
    fn a_fold_keeps_a_whiteout_only_where_it_hides_something_below_the_chain() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        // Production keeps a file an experiment's runs delete.
        if !run(home, "main", &["home/prod"], &[]) {
            eprintln!("cannot make a whiteout here: skipped");
            return;
        }
        // Each run of the experiment makes a session dir and removes the one before (as rustc's
        // incremental sessions), and deletes production's file.
        for i in 0..=MAX_CHAIN {
            let made = format!("home/inc/s{i}/obj");
            let gone = if i == 0 {
                "home/prod".to_string()
            } else {
                format!("home/inc/s{}", i - 1)
            };
            assert!(run(home, "exp", &[&made], &[&gone]));
        }
        settle();
        let dir = home.join("r").join(super::super::branch_key("exp", ""));
        let chain = chain(&dir);
        assert_eq!(chain.len(), 1, "folded: {chain:?}");
        let base = chain[0].dir.join("layer");
        assert!(base.join(format!("home/inc/s{MAX_CHAIN}/obj")).is_file());
        for i in 0..MAX_CHAIN {
            let s = base.join(format!("home/inc/s{i}"));
            assert!(
                std::fs::symlink_metadata(&s).is_err(),
                "{} hides nothing below the chain: not carried",
                s.display()
            );
        }
        assert!(
            whiteout(&base.join("home/prod")),
            "production's file stays hidden"
        );
    }
}
