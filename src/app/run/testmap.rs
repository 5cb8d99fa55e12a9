//! git-sandbox's own test map: which functions of the project each pytest test, or each mocha
//! test file, calls (see `gs_select::testmap`), so that a change inside a function runs only the
//! tests that called it in phase one, where the import graph would run every file that imports
//! the package.
//!
//! Recording calls slows the tests (about 1.5–2× on Python 3.11, 1.35× for mocha on express), so
//! the map is never made by the recorded run, whose time the record keeps: after a batch, a
//! production commit with no map among its last [`MAP_EVERY`] first-parent ancestors has one
//! made by a process of its own (`git-sandbox __testmap`), at idle priority (`SCHED_IDLE`), in
//! the same sandbox as a run, its output thrown away. A selection reads the map nearest its
//! parent, for the files whose blobs are the same in both; any other file is left to the import
//! graph.

use super::exec::{self, Output};
use crate::app::{AppError, Context, Result};
use gs_git::{objects, ObjectId, Repository};
use gs_model::{Framework, RunRecord};
use gs_select::{testmap::TestMap, PerTest};
use gs_store::RepoRow;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// How many production commits a map serves before the next is made.
pub const MAP_EVERY: usize = 20;

/// How far back along first parents a selection looks for a map.
const LOOK_BACK: usize = 200;

/// How many maps a repository keeps (the newest; a selection reads the one nearest its parent,
/// so older ones serve only commits on old branches).
const KEPT: usize = 8;

/// A claim on making a map older than this was left by a maker that died.
const STALE_CLAIM_SECS: u64 = 2 * 3600;

/// Where a repository's maps are kept, one file per commit.
pub fn dir(home: &Path, repository: &str) -> PathBuf {
    home.join("testmaps").join(repository)
}

fn file_of(home: &Path, repository: &str, commit: &ObjectId) -> PathBuf {
    dir(home, repository).join(format!("{commit}.json"))
}

/// The first-parent line from `from`, at most `n` commits.
fn first_parents(repo: &Repository, from: ObjectId, n: usize) -> Vec<ObjectId> {
    let mut out = vec![from];
    while out.len() < n {
        let Ok(info) = gs_git::commit_info(repo, *out.last().unwrap_or(&from)) else {
            break;
        };
        match info.parents.first() {
            Some(p) => out.push(*p),
            None => break,
        }
    }
    out
}

/// The map at `from` or nearest it along first parents, and where it was made.
pub fn nearest(
    home: &Path,
    repository: &str,
    repo: &Repository,
    from: ObjectId,
) -> Option<(ObjectId, TestMap)> {
    let dir = dir(home, repository);
    if !dir.is_dir() {
        return None;
    }
    first_parents(repo, from, LOOK_BACK)
        .into_iter()
        .find_map(|c| {
            let bytes = read_map(&file_of(home, repository, &c))?;
            Some((c, TestMap::parse(&bytes).ok()?))
        })
}

/// A kept map's bytes, at most as many as the sandbox hands back for one file.
fn read_map(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let cap = gs_sandbox::sandbox::ARTIFACT_CAP;
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= cap).then_some(bytes)
}

/// A map made at one commit, answering for another's files: a file whose blob differs between
/// the two (its lines moved, its functions changed) answers `None`.
pub struct MapAt<'a> {
    pub map: TestMap,
    pub repo: &'a Repository,
    pub made_at: ObjectId,
    pub parent: ObjectId,
}

impl MapAt<'_> {
    /// `Some` when `path` is the same blob where the map was made as in the parent (so its
    /// lines are the map's).
    fn same_file(&self, path: &str) -> Option<()> {
        if self.made_at != self.parent {
            let blob = |c: ObjectId| {
                let tree = objects::tree_of(self.repo, c)?;
                Some(objects::entry_at(self.repo, tree, path)?.id)
            };
            if blob(self.made_at)? != blob(self.parent)? {
                return None;
            }
        }
        Some(())
    }
}

impl PerTest for MapAt<'_> {
    fn tests(&self) -> &BTreeSet<String> {
        self.map.tests()
    }

    fn tests_running(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        self.same_file(path)?;
        self.map.tests_running(path, lines)
    }

    fn tests_calling_lines(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        self.same_file(path)?;
        self.map.tests_calling_lines(path, lines)
    }

    fn tests_calling(&self, path: &str) -> Option<BTreeSet<String>> {
        self.map.tests_calling(path)
    }
}

/// Whether `r` is a production run of pytest or mocha tests, not measured by the user's own
/// per-test coverage (which serves instead).
fn mappable(r: &RunRecord, production: &str) -> bool {
    r.refname.as_deref() == Some(production)
        && r.tests.as_ref().is_some_and(|t| {
            matches!(t.framework, Some(Framework::Pytest | Framework::Mocha))
                && t.total.unwrap_or(0) > 0
                && !super::testcov::recorded_by(&t.command)
        })
}

/// After a batch: the newest production run of pytest among `made`, when its commit has no map
/// among its last [`MAP_EVERY`] first-parent ancestors, has one made by a process of its own at
/// idle priority that outlives this one. `false` when none was due.
pub fn after(ctx: &Context, row: &RepoRow, made: &[RunRecord]) -> bool {
    if std::env::var_os("GIT_SANDBOX_NO_TEST_MAP").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    let production = format!("refs/heads/{}", ctx.layers.resolve().promote.target);
    let Some(r) = made
        .iter()
        .filter(|r| mappable(r, &production))
        .max_by(|a, b| a.finished_at.cmp(&b.finished_at))
    else {
        return false;
    };
    let Ok(commit) = ObjectId::from_hex(r.commit.as_bytes()) else {
        return false;
    };
    let Ok(repo) = gs_git::open_recent(Path::new(&row.path)) else {
        return false;
    };
    let home = &ctx.paths.home;
    let mapped = first_parents(&repo, commit, MAP_EVERY)
        .iter()
        .any(|c| file_of(home, &row.repository_id, c).is_file());
    if mapped {
        return false;
    }
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["__testmap", &r.commit])
        .current_dir(&row.path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Its own process group: a Ctrl-C of this command does not reach it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    match cmd.spawn() {
        // Reaped by a thread, so that a daemon keeps no zombie.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            true
        }
        Err(_) => false,
    }
}

/// Removes all but the newest `kept` files of `dir` whose names end with `suffix` (by when
/// they were written): the test maps here, the per-test coverage in [`super::testcov`].
pub(super) fn prune(dir: &Path, suffix: &str, kept: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    all.sort();
    let excess = all.len().saturating_sub(kept);
    for (_, p) in all.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
}

/// What making a map gave.
#[derive(Debug)]
pub struct Made {
    pub commit: String,
    pub tests: usize,
    pub files: usize,
    pub path: PathBuf,
    pub ms: u64,
}

/// A claim on making `repository`'s map, released when dropped.
struct Claim(PathBuf);

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn claim(dir: &Path) -> Result<Claim> {
    std::fs::create_dir_all(dir)
        .map_err(crate::app::io_err("cannot create the test maps' directory"))?;
    let path = dir.join(".making");
    let stale = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > STALE_CLAIM_SECS);
    if stale {
        let _ = std::fs::remove_file(&path);
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(_) => Ok(Claim(path)),
        Err(_) => Err(AppError::refused(
            "a test map of this repository is being made by another process",
        )
        .hint("wait for it to end")),
    }
}

/// Makes the test map of `commit` now: its tests run in the sandbox with the map on, at idle
/// priority, their output thrown away; the map, checked, is kept for the selections after it.
pub fn make(
    ctx: &Context,
    repo: &Repository,
    row: &RepoRow,
    commit: ObjectId,
    interrupt: &AtomicBool,
) -> Result<Made> {
    let started = std::time::Instant::now();
    let dir = dir(&ctx.paths.home, &row.repository_id);
    let _claim = claim(&dir)?;
    // Idle priority for this process and all it starts: the map waits for every other run.
    // SAFETY: sched_setscheduler with a valid policy and parameter changes only this process.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
    // pytest's map through its reporter, mocha's through node's preload: each is inert where
    // the other runs, and a command running both makes both.
    let reporter = gs_runner::pytest_report::Reporter::mapping();
    let mocha = gs_runner::mocha_map::MochaMap::new();
    let Some(py_file) = reporter.map.clone() else {
        return Err(AppError::refused("no map file was named"));
    };
    let map_files = [py_file, mocha.file.clone()];
    let info = gs_git::commit_info(repo, commit)?;
    let config = crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        None,
        &gs_config::ConfigFile::default(),
    )?;
    let line = |work: &gs_runner::rundir::RunDir| {
        let command = match config.test.command.clone() {
            Some(c) => c,
            None => gs_runner::detect::detect(&work.host_tree())?.0,
        };
        Some(mocha.wrap(&reporter.wrap(&command)))
    };
    let executed = exec::run_line(
        ctx,
        repo,
        commit,
        &line,
        &map_files,
        None,
        // As much as a run may print (a spec reporter prints a line per test), thrown away.
        Output::Capture(config.limits.output_bytes),
        interrupt,
    )?;
    let outcome = executed.outcome;
    if outcome.killed_by.is_some() {
        return Err(AppError::refused(format!(
            "the tests of {} did not run to their end ({}), so their map would be partial",
            gs_util::short(&commit.to_string()),
            outcome.killed_by.map(|k| k.to_string()).unwrap_or_default()
        ))
        .hint("a map is made again after the next production run"));
    }
    let mut map: Option<TestMap> = None;
    for text in outcome
        .artifacts
        .iter()
        .filter(|a| map_files.contains(&a.path))
        .filter_map(|a| a.text.as_deref())
    {
        let one = TestMap::parse(text.as_bytes())
            .map_err(|e| AppError::refused(format!("the test map was refused: {}", e.0)))?;
        map = Some(match map {
            Some(m) => m.merge(one),
            None => one,
        });
    }
    let map = map.ok_or_else(|| {
        AppError::refused(
            "the tests wrote no test map: is the test command a pytest that loads plugins from PYTEST_PLUGINS, or mocha run by node (not in --parallel)?",
        )
    })?;
    let path = file_of(&ctx.paths.home, &row.repository_id, &commit);
    gs_util::write_atomic(&path, &map.to_json())
        .map_err(crate::app::io_err("cannot write the test map"))?;
    prune(&dir, ".json", KEPT);
    Ok(Made {
        commit: commit.to_string(),
        tests: map.len(),
        files: map.files().len(),
        path,
        ms: started.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_maps_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for i in 0..5u64 {
            let p = dir.path().join(format!("{i}.json"));
            std::fs::write(&p, "{}").unwrap();
            let f = std::fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(t0 + std::time::Duration::from_secs(i))
                .unwrap();
        }
        std::fs::write(dir.path().join(".making"), "").unwrap();
        prune(dir.path(), ".json", 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".making", "3.json", "4.json"]);
    }
}
