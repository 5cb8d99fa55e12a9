//! Which test ran which line, from a run whose pytest recorded per-test coverage
//! (`--cov --cov-context=test`): coverage.py's data file is kept per commit under the data dir
//! (`contexts/<repository>/<commit>.coverage`, the newest few), and a child's selection reads
//! its parent's to pick the tests that ran the lines the child changed.

use gs_sandbox::{sandbox::Artifact, sandbox::DATA_FILE_CAP};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// pytest-cov's data file, beside the checkout's root (coverage.py's default name).
pub const DATA_FILE: &str = ".coverage";

/// How many commits' data files a repository keeps (a few MB each for a project of click's size).
const KEPT: usize = 16;

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// The longest any statement on a data file may run: the file is the commit's (its tests wrote
/// it), so its size and shape are an attacker's; past this the answer is "no coverage".
const UNTRUSTED_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// Open a data file the commit wrote so that nothing its schema holds runs (triggers, views,
/// functions a schema may name), and no statement outlives [`UNTRUSTED_BUDGET`]: the returned
/// watchdog interrupts one that does, until it is dropped.
fn untrusted(path: &Path, flags: rusqlite::OpenFlags) -> Option<(rusqlite::Connection, Watchdog)> {
    use rusqlite::config::DbConfig;
    let db = rusqlite::Connection::open_with_flags(path, flags).ok()?;
    for (setting, on) in [
        (DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false),
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true),
    ] {
        db.set_db_config(setting, on).ok()?;
    }
    let watchdog = Watchdog::start(db.get_interrupt_handle(), UNTRUSTED_BUDGET);
    Some((db, watchdog))
}

/// Interrupts the statement its connection runs when the budget is spent; dropping it first
/// stops it.
struct Watchdog(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

impl Watchdog {
    fn start(handle: rusqlite::InterruptHandle, budget: std::time::Duration) -> Watchdog {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(budget) {
                handle.interrupt();
            }
        });
        Watchdog(stop)
    }
}

/// Whether the test command records which test ran each line.
pub fn recorded_by(command: &str) -> bool {
    gs_runner::pytest_cmd::recognise(command).is_some_and(|p| p.records_contexts())
}

/// The data file the tests left: as the sandbox handed it back, else (no mount namespace) read
/// beneath the checkout.
pub fn data_of(artifacts: &[Artifact], dir: &Path) -> Option<Vec<u8>> {
    let bytes = match artifacts.iter().find(|a| a.path == DATA_FILE) {
        Some(a) => a.bytes()?,
        None => gs_util::beneath::read_beneath(dir, DATA_FILE, DATA_FILE_CAP).ok()?,
    };
    bytes.starts_with(SQLITE_MAGIC).then_some(bytes)
}

/// Where a repository's per-test coverage is kept.
pub fn dir(home: &Path, repository: &str) -> PathBuf {
    home.join("contexts").join(repository)
}

/// Keep `commit`'s data file, and only the newest [`KEPT`] of the repository's; a failure is
/// logged (the next commit's selection falls back to the import graph).
pub fn keep(home: &Path, repository: &str, commit: &str, bytes: &[u8]) {
    if let Err(e) = try_keep(home, repository, commit, bytes) {
        tracing::warn!("per-test coverage not kept: {e}");
    }
}

fn try_keep(home: &Path, repository: &str, commit: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = dir(home, repository);
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{commit}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(format!("{commit}.coverage")))?;
    super::testmap::prune(&dir, ".coverage", KEPT);
    Ok(())
}

/// Two phases' data files as one: each phase runs in its own view of the checkout, so phase
/// two's file holds only its own tests. Files and contexts are matched by name; a line run in
/// both is run. `None` when either is not coverage.py's data (then neither is kept).
pub fn combine(one: &[u8], two: &[u8]) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().ok()?;
    let (a, b) = (dir.path().join("one"), dir.path().join("two"));
    std::fs::write(&a, one).ok()?;
    std::fs::write(&b, two).ok()?;
    let (db, watchdog) = untrusted(
        &b,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.execute("ATTACH DATABASE ?1 AS one", [a.to_string_lossy()])
        .ok()?;
    db.execute_batch(
        "INSERT INTO file (path) SELECT path FROM one.file WHERE path NOT IN (SELECT path FROM file);
         INSERT INTO context (context) SELECT context FROM one.context
           WHERE context NOT IN (SELECT context FROM context);
         CREATE TEMP TABLE moved AS
           SELECT f.id AS file_id, c.id AS context_id, l.numbits AS numbits
           FROM one.line_bits l
           JOIN one.file f1 ON f1.id = l.file_id JOIN file f ON f.path = f1.path
           JOIN one.context c1 ON c1.id = l.context_id JOIN context c ON c.context = c1.context;
         INSERT OR IGNORE INTO line_bits (file_id, context_id, numbits)
           SELECT file_id, context_id, numbits FROM moved;
         INSERT OR IGNORE INTO arc (file_id, context_id, fromno, tono)
           SELECT f.id, c.id, a.fromno, a.tono FROM one.arc a
           JOIN one.file f1 ON f1.id = a.file_id JOIN file f ON f.path = f1.path
           JOIN one.context c1 ON c1.id = a.context_id JOIN context c ON c.context = c1.context;",
    )
    .ok()?;
    // A (file, context) both phases measured (the no-test context of imports): the union of
    // its lines.
    let both: Vec<(i64, i64, Vec<u8>, Vec<u8>)> = {
        let mut q = db
            .prepare(
                "SELECT m.file_id, m.context_id, m.numbits, l.numbits FROM moved m
                 JOIN line_bits l ON l.file_id = m.file_id AND l.context_id = m.context_id
                 WHERE l.numbits != m.numbits",
            )
            .ok()?;
        let rows = q
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .ok()?;
        rows.filter_map(|r| r.ok()).collect()
    };
    for (file, context, x, y) in both {
        let (long, short) = if x.len() >= y.len() { (x, y) } else { (y, x) };
        let mut union = long;
        for (u, s) in union.iter_mut().zip(short) {
            *u |= s;
        }
        db.execute(
            "UPDATE line_bits SET numbits = ?1 WHERE file_id = ?2 AND context_id = ?3",
            rusqlite::params![union, file, context],
        )
        .ok()?;
    }
    db.execute_batch("DETACH DATABASE one").ok()?;
    drop(db);
    drop(watchdog);
    std::fs::read(&b).ok()
}

/// One commit's per-test coverage.
pub struct Contexts {
    db: rusqlite::Connection,
    _watchdog: Watchdog,
    /// Every test (node id) that ran at least one measured line.
    pub tests: BTreeSet<String>,
}

/// The node id of a pytest-cov context (`tests/t.py::test_x|run`); `None` for the context of
/// no test (imports, collection).
fn node_id(context: &str) -> Option<&str> {
    let id = match context.rsplit_once('|') {
        Some((id, "run" | "setup" | "teardown")) => id,
        _ => context,
    };
    (!id.is_empty()).then_some(id)
}

/// `commit`'s per-test coverage, when its run kept any.
pub fn open(home: &Path, repository: &str, commit: &str) -> Option<Contexts> {
    let path = dir(home, repository).join(format!("{commit}.coverage"));
    if !path.is_file() {
        return None;
    }
    // Read: not among the oldest to go (every child of a commit reads its data).
    if let Ok(f) = std::fs::File::options().append(true).open(&path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
    let (db, watchdog) = untrusted(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let tests = {
        let mut q = db.prepare("SELECT context FROM context").ok()?;
        let rows = q.query_map([], |r| r.get::<_, String>(0)).ok()?;
        rows.filter_map(|r| r.ok())
            .filter_map(|c| node_id(&c).map(str::to_string))
            .collect()
    };
    Some(Contexts {
        db,
        _watchdog: watchdog,
        tests,
    })
}

/// Whether bit `line` is set in coverage.py's numbits (byte `line / 8`, bit `line % 8`).
fn has_line(numbits: &[u8], line: u32) -> bool {
    numbits
        .get((line / 8) as usize)
        .is_some_and(|b| b & (1 << (line % 8)) != 0)
}

impl Contexts {
    /// The tests that ran any of `lines` of `path` (relative to the checkout); `None` when the
    /// file was not measured, or one of the lines ran outside any test (at import or
    /// collection, so for every test).
    pub fn tests_running(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        let suffix = format!("/{path}");
        let file_id: i64 = {
            let mut q = self.db.prepare("SELECT id, path FROM file").ok()?;
            let rows = q
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .ok()?;
            let found: Vec<i64> = rows
                .filter_map(|r| r.ok())
                .filter(|(_, p)| p.ends_with(&suffix) || p == path)
                .map(|(id, _)| id)
                .collect();
            match found[..] {
                [id] => id,
                _ => return None,
            }
        };
        let mut out = BTreeSet::new();
        // Line data, or arcs when branches were measured (a line is either end of an arc).
        let mut q = self
            .db
            .prepare(
                "SELECT c.context, l.numbits FROM line_bits l JOIN context c ON c.id = l.context_id WHERE l.file_id = ?1",
            )
            .ok()?;
        let rows = q
            .query_map([file_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .ok()?;
        for (context, bits) in rows.filter_map(|r| r.ok()) {
            if lines.iter().any(|&l| has_line(&bits, l)) {
                out.insert(node_id(&context)?.to_string());
            }
        }
        let arcs = self.db.prepare(
            "SELECT c.context, a.fromno, a.tono FROM arc a JOIN context c ON c.id = a.context_id WHERE a.file_id = ?1",
        );
        if let Ok(mut q) = arcs {
            let rows = q
                .query_map([file_id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .ok()?;
            for (context, from, to) in rows.filter_map(|r| r.ok()) {
                if lines
                    .iter()
                    .any(|&l| i64::from(l) == from || i64::from(l) == to)
                {
                    out.insert(node_id(&context)?.to_string());
                }
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_name_tests_and_numbits_name_lines() {
        assert_eq!(
            node_id("tests/t.py::test_x[a|b]|run"),
            Some("tests/t.py::test_x[a|b]")
        );
        assert_eq!(
            node_id("tests/t.py::T::test_y|setup"),
            Some("tests/t.py::T::test_y")
        );
        assert_eq!(node_id(""), None);
        // Lines 1 and 9: bit 1 of byte 0, bit 1 of byte 1.
        let bits = [0b10, 0b10];
        assert!(has_line(&bits, 1) && has_line(&bits, 9));
        assert!(!has_line(&bits, 2) && !has_line(&bits, 17));
    }

    /// A statement that never ends: counting an endless recursion.
    const ENDLESS: &str =
        "SELECT count(*) FROM (WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r)";

    /// A data file shaped like coverage.py's, with `extra` SQL in its schema.
    fn data_file(extra: &str) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(&format!(
            "CREATE TABLE file (id INTEGER PRIMARY KEY, path TEXT UNIQUE);
             CREATE TABLE line_bits (file_id INTEGER, context_id INTEGER, numbits BLOB,
               UNIQUE (file_id, context_id));
             CREATE TABLE arc (file_id INTEGER, context_id INTEGER, fromno INTEGER, tono INTEGER,
               UNIQUE (file_id, context_id, fromno, tono));
             {extra}"
        ))
        .unwrap();
        drop(db);
        std::fs::read(&path).unwrap()
    }

    /// `f` on another thread; `None` if it has not answered within a minute (it hangs).
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(60)).ok()
    }

    #[test]
    fn a_data_file_the_commit_wrote_runs_none_of_its_own_sql_and_cannot_hang_the_supervisor() {
        // A view in place of the contexts table that never ends: reading the parent's data
        // gives up (no coverage: the import graph decides) instead of hanging the run.
        let home = tempfile::tempdir().unwrap();
        let d = dir(home.path(), "r");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("c1.coverage"),
            data_file(&format!("CREATE VIEW context AS {ENDLESS};")),
        )
        .unwrap();
        let h = home.path().to_path_buf();
        let read = within_a_minute(move || open(&h, "r", "c1").is_some());
        assert_eq!(
            read,
            Some(false),
            "reading a hostile data file hung or trusted its view"
        );

        // A trigger that never ends on the table the merge inserts into: it does not run.
        let plain = "CREATE TABLE context (id INTEGER PRIMARY KEY, context TEXT UNIQUE);";
        let one = data_file(&format!(
            "{plain} INSERT INTO file (path) VALUES ('/x/a.py');"
        ));
        let two = data_file(&format!(
            "{plain} CREATE TRIGGER t AFTER INSERT ON file BEGIN {ENDLESS}; END;"
        ));
        let merged = within_a_minute(move || combine(&one, &two).is_some());
        assert_eq!(
            merged,
            Some(true),
            "merging a hostile data file ran its trigger or hung"
        );
    }
}
