//! Housekeeping (`git sandbox gc`): run logs and events past the user's `[gc]` retention, logs
//! beyond the size bound (oldest first), checkouts of dead processes, and registrations of
//! repositories that are gone from disk. Never a log of a run in progress, never a note, never
//! anything inside a repository.

use crate::app::repo::forget::{self, Forgotten};
use crate::app::{Context, Result};
use gs_config::GcConfig;
use gs_git as git;
use gs_git::checkout;
use gs_runner::{caches, rundir};
use gs_util as util;
use gs_util::time;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Per repository, the newest runs whose trees keep their analysis tallies through a `gc`: a
/// new commit's analysis starts from its parent's (or a near ancestor's) tally.
const TALLIES_KEPT: u32 = 256;

/// How many files and bytes were removed (or, in a dry run, would be).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Freed {
    pub count: u64,
    pub bytes: u64,
}

impl Freed {
    fn add(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }
}

/// The retention `gc` applied, as the user config spells it.
#[derive(Debug, Clone, Serialize)]
pub struct Retention {
    pub logs: String,
    pub events: String,
    pub max_log_mb: u64,
    pub caches: String,
    pub max_cache_mb: u64,
    pub images: String,
}

#[derive(Debug, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub retention: Retention,
    /// Logs older than `[gc] logs`.
    pub logs_expired: Freed,
    /// The oldest of the remaining logs, while they took more than `[gc] max_log_mb`.
    pub logs_over_bound: Freed,
    /// Logs that would have gone (by age or size) but were kept because their run is going on.
    pub logs_in_progress: u64,
    /// The logs that remain.
    pub logs_kept: Freed,
    /// Checkouts left behind by processes that no longer exist.
    pub checkouts: Freed,
    /// Build caches of branches that are gone, of repositories that are no longer registered,
    /// unused for longer than `[gc] caches`, or the least recently used of a repository's while
    /// they take more than `[gc] max_cache_mb`.
    pub caches: Freed,
    /// Kept checkouts of repositories that are no longer registered or unused for longer than
    /// `[gc] caches`.
    pub kept_checkouts: Freed,
    /// Agents' workspaces whose experiment's branch is gone (killed, deleted) or whose
    /// repository is no longer registered.
    pub workspaces: Freed,
    /// Build-cache generations that no run reads any more (a newer base replaced them).
    pub generations: Freed,
    /// Images no run used for `[gc] images` (with their layers no other image uses).
    pub images: Freed,
    /// Caches and kept checkouts that would have gone but a run is using them.
    pub caches_busy: u64,
    /// The build caches that remain.
    pub caches_kept: Freed,
    /// Events older than `[gc] events`.
    pub events: u64,
    /// Jobs that completed longer ago than `[gc] events`.
    pub jobs: u64,
    /// Stored analysis tallies of trees that none of a repository's newest runs has.
    pub tallies: u64,
    /// Repositories unregistered because their directory is gone (their notes lived in them).
    pub repositories: Vec<Forgotten>,
    /// Repositories that are gone but were kept this time because a run of theirs is going on.
    pub repositories_busy: Vec<String>,
    /// What could not be removed; the rest was.
    pub warnings: Vec<String>,
}

/// One run log, `logs/<repository id>/<commit>[.trial][.setup].log`.
#[derive(Debug, Clone)]
pub(crate) struct LogFile {
    pub path: PathBuf,
    pub repository_id: String,
    pub commit: String,
    pub bytes: u64,
    pub modified_ms: i64,
}

/// The run logs of one repository (`dir` is `logs/<id>`), or of all when `dir` is `logs/`.
pub(crate) fn log_files(logs: &Path, only: Option<&str>) -> Vec<LogFile> {
    let mut out = Vec::new();
    for repo_dir in std::fs::read_dir(logs).into_iter().flatten().flatten() {
        let id = repo_dir.file_name().to_string_lossy().into_owned();
        if only.is_some_and(|o| o != id) || !repo_dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for f in std::fs::read_dir(repo_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = f.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".log") else {
                continue;
            };
            let Ok(meta) = f.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            out.push(LogFile {
                path: f.path(),
                repository_id: id.clone(),
                commit: stem
                    .trim_end_matches(".setup")
                    .trim_end_matches(".trial")
                    .to_string(),
                bytes: meta.len(),
                modified_ms,
            });
        }
    }
    out.sort_by(|a, b| (a.modified_ms, &a.path).cmp(&(b.modified_ms, &b.path)));
    out
}

/// Which logs belong to a run that is going on: held open by a process (the run writing it),
/// written in the last minute (a run that is just starting), or of a job the daemon is running.
/// Where `/proc` cannot tell, anything written in the last hour counts as going on.
pub(crate) struct Activity {
    open: Option<HashSet<PathBuf>>,
    now_ms: i64,
}

impl Activity {
    pub fn now() -> Activity {
        Activity {
            open: util::files_held_open(),
            now_ms: time::now_millis(),
        }
    }

    pub fn log_in_progress(&self, ctx: &Context, log: &LogFile) -> bool {
        let recent = match &self.open {
            Some(open) => {
                let real = std::fs::canonicalize(&log.path).unwrap_or_else(|_| log.path.clone());
                if open.contains(&real) {
                    return true;
                }
                60_000
            }
            None => 3_600_000,
        };
        if self.now_ms - log.modified_ms < recent {
            return true;
        }
        matches!(
            ctx.index.job_state(&log.repository_id, &log.commit),
            Ok(Some(s)) if s == "assigned" || s == "running"
        )
    }

    /// Whether a run of the repository is going on: a job the daemon is running, or a log a
    /// process is writing. (A log that was merely written a moment ago does not count: the run
    /// that wrote it is over.)
    pub fn repository_busy(&self, ctx: &Context, id: &str) -> Result<bool> {
        if ctx.index.has_running_job(id)? {
            return Ok(true);
        }
        let Some(open) = &self.open else {
            return Ok(false);
        };
        Ok(log_files(&ctx.paths.logs(), Some(id)).iter().any(|l| {
            open.contains(&std::fs::canonicalize(&l.path).unwrap_or_else(|_| l.path.clone()))
        }))
    }
}

/// `git sandbox gc`: remove what the retention in `cfg` no longer keeps; with `dry_run`, only
/// report it.
pub fn gc(ctx: &Context, dry_run: bool) -> Result<GcReport> {
    let cfg = ctx.layers.resolve().gc;
    let activity = Activity::now();
    let now = time::now_millis();
    let mut report = GcReport {
        dry_run,
        retention: Retention {
            logs: duration_text(cfg.logs),
            events: duration_text(cfg.events),
            max_log_mb: cfg.max_log_mb,
            caches: duration_text(cfg.caches),
            max_cache_mb: cfg.max_cache_mb,
            images: duration_text(cfg.images),
        },
        logs_expired: Freed::default(),
        logs_over_bound: Freed::default(),
        logs_in_progress: 0,
        logs_kept: Freed::default(),
        checkouts: Freed::default(),
        caches: Freed::default(),
        kept_checkouts: Freed::default(),
        workspaces: Freed::default(),
        generations: Freed::default(),
        images: Freed::default(),
        caches_busy: 0,
        caches_kept: Freed::default(),
        events: 0,
        jobs: 0,
        tallies: 0,
        repositories: Vec::new(),
        repositories_busy: Vec::new(),
        warnings: Vec::new(),
    };

    // Repositories gone from disk: everything the index and the data dir hold for them.
    let mut gone = Vec::new();
    for k in forget::known(ctx)? {
        if std::fs::symlink_metadata(&k.path).is_ok() {
            continue;
        }
        if activity.repository_busy(ctx, &k.repository_id)? {
            report.repositories_busy.push(k.repository_id);
            continue;
        }
        gone.push(k.repository_id.clone());
        report
            .repositories
            .push(forget::unregister(ctx, &k, dry_run)?);
    }

    prune_logs(ctx, &cfg, &activity, &gone, now, dry_run, &mut report);

    let before = time::rfc3339(now - cfg.events.as_millis().min(i64::MAX as u128) as i64);
    report.events = ctx.index.prune_events(&before, &gone, dry_run)?;
    report.jobs = ctx.index.prune_completed_jobs(&before, dry_run)?;
    report.tallies = ctx.index.prune_tallies(TALLIES_KEPT, dry_run)?;

    for dir in checkout::stale_checkouts(&checkout::scratch_root()) {
        let bytes = util::disk_size(&dir);
        if !dry_run {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                report
                    .warnings
                    .push(format!("cannot remove {}: {e}", dir.display()));
                continue;
            }
        }
        report.checkouts.add(bytes);
    }
    prune_caches(ctx, &cfg, &gone, now, dry_run, &mut report)?;
    prune_workspaces(ctx, dry_run, &mut report)?;
    for image in crate::app::config::image::store(ctx).gc(cfg.images, dry_run) {
        report.images.add(image.size + image.unpacked);
    }
    Ok(report)
}

/// Agents' workspaces (`$GIT_SANDBOX_HOME/workspaces/<repository id>/<name>/`, see
/// `app/workspace`) that nothing can use any more: their repository is not registered, or
/// their branch `experiment/<name>` is gone. Never one a command holds (its `lock`).
fn prune_workspaces(ctx: &Context, dry_run: bool, report: &mut GcReport) -> Result<()> {
    let root = ctx.paths.home.join("workspaces");
    let known: HashMap<String, PathBuf> = forget::known(ctx)?
        .into_iter()
        .map(|k| (k.repository_id, k.path))
        .collect();
    for repo_dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let id = repo_dir.file_name().to_string_lossy().into_owned();
        let repo = known.get(&id).and_then(|p| gs_git::open(p).ok());
        for ws in std::fs::read_dir(repo_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = ws.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                // A removal cut short (`.removed-…`): nothing reads it.
            } else if let Some(repo) = &repo {
                let branch = format!("refs/heads/experiment/{name}");
                if gs_git::objects::ref_commit(repo, &branch)?.is_some() {
                    continue;
                }
            }
            let held = gs_util::private::open_rw(&ws.path().join("lock"))
                .ok()
                .filter(|f| f.try_lock().is_ok());
            if held.is_none() && !name.starts_with('.') {
                report.caches_busy += 1;
                continue;
            }
            let bytes = util::disk_size(&ws.path());
            if !dry_run {
                if let Err(e) = std::fs::remove_dir_all(ws.path()) {
                    report
                        .warnings
                        .push(format!("cannot remove {}: {e}", ws.path().display()));
                    continue;
                }
            }
            report.workspaces.add(bytes);
        }
    }
    Ok(())
}

/// Build caches and kept checkouts: those of repositories that are not registered (or gone),
/// unused for longer than `[gc] caches`, of branches that no longer exist, and, per repository,
/// the least recently used branches' while the rest take more than `[gc] max_cache_mb`. Never one
/// a run is using.
fn prune_caches(
    ctx: &Context,
    cfg: &GcConfig,
    gone: &[String],
    now: i64,
    dry_run: bool,
    report: &mut GcReport,
) -> Result<()> {
    let mut live: HashMap<String, gs_git::Repository> = HashMap::new();
    for k in forget::known(ctx)? {
        if gone.contains(&k.repository_id) {
            continue;
        }
        if let Ok(repo) = git::open(&k.path) {
            live.insert(rundir::repo_key(&repo), repo);
        }
    }
    let cutoff = now - cfg.caches.as_millis().min(i64::MAX as u128) as i64;
    let remove = |c: &caches::BranchCache, report: &mut GcReport| -> bool {
        match caches::remove(c, dry_run) {
            Ok(true) => {
                report.caches.add(c.bytes);
                true
            }
            Ok(false) => {
                report.caches_busy += 1;
                false
            }
            Err(e) => {
                report
                    .warnings
                    .push(format!("cannot remove {}: {e}", c.dir.display()));
                false
            }
        }
    };
    let mut kept: HashMap<String, Vec<caches::BranchCache>> = HashMap::new();
    for c in caches::list(&ctx.paths.caches()) {
        // A cache that names no branch of its layout's (one of an older layout) is no
        // branch's: no run reads it again.
        let branch_gone = |repo: &gs_git::Repository| match &c.branch {
            None => true,
            Some(b) => !gs_git::objects::has_ref(repo, &format!("refs/heads/{b}")),
        };
        let stale = match live.get(&c.repo_key) {
            None => true,
            Some(repo) => c.used_ms < cutoff || branch_gone(repo),
        };
        if !(stale && remove(&c, report)) {
            let (count, bytes) = caches::prune(&c.dir, dry_run);
            report.generations.count += count;
            report.generations.bytes += bytes;
            kept.entry(c.repo_key.clone()).or_default().push(c);
        }
    }
    // Per repository, the most recently used first; past the bound, the rest go.
    let bound = cfg.max_cache_mb.saturating_mul(1 << 20);
    for mut list in kept.into_values() {
        list.sort_by_key(|c| std::cmp::Reverse(c.used_ms));
        let mut total = 0u64;
        for c in list {
            if total + c.bytes > bound && remove(&c, report) {
                continue;
            }
            total += c.bytes;
            report.caches_kept.add(c.bytes);
        }
    }
    // This data dir's own, judged by the repositories it knows; those of the old layout,
    // which no data dir uses any more, only by age.
    let scratch = checkout::scratch_root();
    let home_id = crate::app::home::home_id(&ctx.paths.home);
    let own = rundir::kept_checkouts(&scratch, &home_id)
        .into_iter()
        .filter(|k| !(live.contains_key(&k.repo_key) && k.used_ms >= cutoff));
    let old = rundir::old_kept_checkouts(&scratch)
        .into_iter()
        .filter(|k| k.used_ms < cutoff);
    for k in own.chain(old) {
        match rundir::remove_kept(&k, dry_run) {
            Ok(true) => report.kept_checkouts.add(k.bytes),
            Ok(false) => report.caches_busy += 1,
            Err(e) => report
                .warnings
                .push(format!("cannot remove {}: {e}", k.dir.display())),
        }
    }
    // Those of data dirs that are gone: no one can use them again.
    for (dir, kept) in rundir::orphaned_homes(&scratch) {
        match rundir::remove_home(&dir, dry_run) {
            Ok(true) => kept.iter().for_each(|k| report.kept_checkouts.add(k.bytes)),
            Ok(false) => report.caches_busy += 1,
            Err(e) => report
                .warnings
                .push(format!("cannot remove {}: {e}", dir.display())),
        }
    }
    Ok(())
}

fn prune_logs(
    ctx: &Context,
    cfg: &GcConfig,
    activity: &Activity,
    gone: &[String],
    now: i64,
    dry_run: bool,
    report: &mut GcReport,
) {
    let cutoff = now - cfg.logs.as_millis().min(i64::MAX as u128) as i64;
    let remove = |log: &LogFile, freed: &mut Freed, warnings: &mut Vec<String>| {
        if !dry_run {
            match std::fs::remove_file(&log.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => {
                    warnings.push(format!("cannot remove {}: {e}", log.path.display()));
                    return;
                }
            }
        }
        freed.add(log.bytes);
    };
    // Oldest first. A log is looked at for a run in progress only when it would go: one that
    // is kept for that counts towards the bound all the same.
    let mut kept: Vec<(LogFile, bool)> = Vec::new();
    for log in log_files(&ctx.paths.logs(), None) {
        if gone.contains(&log.repository_id) {
            continue;
        }
        let mut protected = false;
        if log.modified_ms < cutoff {
            if !activity.log_in_progress(ctx, &log) {
                remove(&log, &mut report.logs_expired, &mut report.warnings);
                continue;
            }
            protected = true;
            report.logs_in_progress += 1;
        }
        kept.push((log, protected));
    }
    let bound = cfg.max_log_mb.saturating_mul(1024 * 1024);
    let mut total: u64 = kept.iter().map(|(l, _)| l.bytes).sum();
    for (log, protected) in &kept {
        if total > bound && !protected {
            if !activity.log_in_progress(ctx, log) {
                total -= log.bytes;
                remove(log, &mut report.logs_over_bound, &mut report.warnings);
                continue;
            }
            report.logs_in_progress += 1;
        }
        report.logs_kept.add(log.bytes);
    }
}

/// A retention as the config would spell it: `30d`, `12h`, `5m`, `90s`.
fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The registered repositories by the key their build caches are kept under (see
/// `gs_runner::rundir::repo_key`), read from the registry beside the data dir (no index):
/// how `doctor` names a cache.
pub fn repositories_by_cache_key(home: &Path) -> HashMap<String, PathBuf> {
    gs_store::registry::list(home)
        .into_iter()
        .filter_map(|e| {
            let repo = git::open(&e.path).ok()?;
            Some((rundir::repo_key(&repo), e.path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_reads_as_written() {
        assert_eq!(duration_text(Duration::from_secs(30 * 86_400)), "30d");
        assert_eq!(duration_text(Duration::from_secs(7200)), "2h");
        assert_eq!(duration_text(Duration::from_secs(90)), "90s");
        assert_eq!(duration_text(Duration::from_millis(250)), "250ms");
    }
}
