//! The SQLite index at `$GIT_SANDBOX_HOME/index.db`: a cache of what git holds (notes, refs) plus
//! the job queue and the event log. Opening it checks the schema version and migrates.

mod alerts;
mod attempts;
mod daemons;
mod deliveries;
mod events;
mod experiments;
mod jobs;
mod outcomes;
mod pg;
pub mod registry;
mod repos;
mod runs;
mod signing_keys;
pub mod sql;
mod statuses;

pub use alerts::AlertRow;
pub use attempts::AttemptRow;
pub use daemons::DaemonRow;
pub use deliveries::Delivery;
pub use events::{Event, EventFilter};
pub use experiments::ExperimentCounts;
pub use jobs::{Held, Job, Reaped, MAX_ATTEMPTS};
pub use outcomes::{FlakyTest, CACHE_DEPENDENT, FLAKY};
pub use pg::Listener;
pub use repos::{clone_path, RepoRow, RepoRows, RepoStats};
pub use runs::RunRow;
pub use statuses::StatusRow;

use gs_util::{hint::display_hinted, hint::Hinted};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// The schema this build writes. Bump it with a new entry in [`MIGRATIONS`].
pub const SCHEMA_VERSION: i64 = 19;
// Each migration moves the schema one version on: a migration added without its version (or the
// other way round) does not build.
const _: () = assert!(SCHEMA_VERSION as usize == MIGRATIONS.len());

const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
    CREATE TABLE repositories (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        path TEXT NOT NULL UNIQUE,
        url TEXT NOT NULL,
        repository_type TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_activity TEXT
    );
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        branch TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'active',
        hypothesis TEXT,
        base_commit TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (repository_id, name)
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        commit_id TEXT NOT NULL,
        tree_id TEXT NOT NULL,
        config_hash TEXT,
        refname TEXT,
        experiment TEXT,
        trigger TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        passed INTEGER, failed INTEGER, skipped INTEGER, errors INTEGER, total INTEGER,
        cached_from TEXT,
        record TEXT NOT NULL,
        UNIQUE (repository_id, commit_id)
    );
    CREATE INDEX runs_by_tree ON runs (repository_id, tree_id, config_hash);
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        commit_id TEXT NOT NULL,
        refname TEXT,
        trigger TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (repository_id, commit_id)
    );
    CREATE INDEX jobs_by_state ON jobs (state, id);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        kind TEXT NOT NULL,
        repository_id TEXT,
        run_id INTEGER,
        commit_id TEXT,
        data TEXT
    );
    CREATE TABLE analysis_cache (
        blob_id TEXT NOT NULL,
        key TEXT NOT NULL,
        result TEXT NOT NULL,
        PRIMARY KEY (blob_id, key)
    ) WITHOUT ROWID;
    "#,
    // 2: the daemon's queue: retry back-off and when a job started.
    r#"
    ALTER TABLE jobs ADD COLUMN not_before TEXT;
    ALTER TABLE jobs ADD COLUMN started_at TEXT;
    CREATE INDEX events_by_kind ON events (kind, id);
    "#,
    // 3: evaluations of experiments (a cache of the refs/notes/sandbox-eval notes).
    r#"
    CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        head_commit TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        recommendation TEXT NOT NULL,
        evaluated_at TEXT NOT NULL,
        record TEXT NOT NULL,
        UNIQUE (repository_id, experiment, head_commit, base_commit)
    );
    "#,
    // 4: sandbox profiles: the full layer table of each way runs were sandboxed (a note keeps
    // only the profile id and the layers that were not enforced).
    r#"
    CREATE TABLE sandbox_profiles (
        id TEXT PRIMARY KEY,
        layers TEXT NOT NULL,
        first_seen TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 5: webhook deliveries: recorded in the transaction that queues their work (a fetch of what
    // they announce), so a redelivery is recognised and a crash loses nothing.
    r#"
    CREATE TABLE deliveries (
        id TEXT NOT NULL,
        source TEXT NOT NULL,
        event TEXT NOT NULL,
        repository_id TEXT NOT NULL,
        remote TEXT NOT NULL,
        refspec TEXT NOT NULL,
        local_ref TEXT NOT NULL,
        received_at TEXT NOT NULL,
        done_at TEXT,
        error TEXT,
        PRIMARY KEY (id, repository_id)
    ) WITHOUT ROWID;
    CREATE INDEX deliveries_pending ON deliveries (done_at, received_at);
    "#,
    // 6: commit statuses waiting to be posted to GitHub, the newest per (commit, context).
    r#"
    CREATE TABLE statuses (
        repository_id TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        context TEXT NOT NULL,
        owner TEXT NOT NULL,
        repo TEXT NOT NULL,
        state TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL DEFAULT 0,
        done_at TEXT,
        error TEXT,
        PRIMARY KEY (repository_id, commit_id, context)
    ) WITHOUT ROWID;
    CREATE INDEX statuses_due ON statuses (done_at, next_at);
    "#,
    // 7: the daemons that served this index: who, where, how many workers, their last heartbeat.
    r#"
    CREATE TABLE daemons (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        workers INTEGER NOT NULL,
        http TEXT,
        started_at TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL,
        busy_workers INTEGER NOT NULL DEFAULT 0,
        stopped_at TEXT
    );
    "#,
    // 8: many daemons on one queue: a claimed job names its owner and holds a lease that owner
    // renews (`attempts` is the fencing token: each claim adds one); a repository records the
    // remote other machines clone it from.
    r#"
    ALTER TABLE jobs ADD COLUMN owner TEXT;
    ALTER TABLE jobs ADD COLUMN lease_until TEXT;
    ALTER TABLE repositories ADD COLUMN remote_url TEXT;
    CREATE INDEX jobs_by_lease ON jobs (state, lease_until);
    "#,
    // 9: a tree's result is found among the runs that made one (not the many commits served
    // from it: every empty commit on one tree shares it).
    r#"
    CREATE INDEX runs_made_by_tree ON runs (repository_id, tree_id, finished_at) WHERE cached_from IS NULL;
    "#,
    // 10: notifications waiting to be delivered (`[notify]`), one row per channel, each with its
    // attempts and the time before which it must not be tried again.
    r#"
    CREATE TABLE alerts (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        kind TEXT NOT NULL,
        repository_id TEXT,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL DEFAULT 0,
        done_at TEXT,
        error TEXT
    );
    CREATE INDEX alerts_due ON alerts (done_at, next_at);
    "#,
    // 11: every run that executed (not served from another commit's result), kept when a later
    // run of the same commit replaces its row in `runs`: the CPU an experiment spent (budgets)
    // and which tests failed on each run of a tree (flaky tests). `complete`: the run's failure
    // list names every test that failed, so a test it does not name passed. An experiment's
    // CPU budget, as it was started (`experiment start --budget`) or set (`experiment budget`).
    r#"
    CREATE TABLE executions (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        commit_id TEXT NOT NULL,
        tree_id TEXT NOT NULL,
        config_hash TEXT,
        experiment TEXT,
        status TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        cpu_ms INTEGER NOT NULL,
        complete INTEGER NOT NULL,
        UNIQUE (repository_id, commit_id, finished_at)
    );
    CREATE INDEX executions_by_tree ON executions (repository_id, tree_id, config_hash);
    CREATE INDEX executions_by_experiment ON executions (repository_id, experiment);
    CREATE TABLE test_failures (
        execution_id INTEGER NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        PRIMARY KEY (execution_id, name)
    );
    CREATE INDEX test_failures_by_name ON test_failures (name);
    ALTER TABLE experiments ADD COLUMN budget_ms INTEGER;
    "#,
    // 12: attempts: runs that could not run their tests here (a tool missing on this machine),
    // kept beside the commit's result in `runs`, never in its place; a new table, so an
    // existing index only gains it.
    r#"
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        repository_id TEXT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        commit_id TEXT NOT NULL,
        tree_id TEXT NOT NULL,
        config_hash TEXT,
        trigger TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        reason TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX attempts_by_commit ON attempts (repository_id, commit_id, id);
    "#,
    // 13: a delivery's body SHA-256: a signed body replayed under a new delivery id is recognised.
    r#"
    ALTER TABLE deliveries ADD COLUMN body_sha256 TEXT;
    CREATE INDEX deliveries_by_body ON deliveries (body_sha256);
    "#,
    // 14: who vouches for each run (NULL: nobody this machine trusts, as every row indexed
    // before records were signed), and the signing keys of the daemons sharing the index.
    r#"
    ALTER TABLE runs ADD COLUMN verified TEXT;
    CREATE TABLE signing_keys (
        home_id TEXT PRIMARY KEY,
        public_key TEXT NOT NULL,
        registered_at TEXT NOT NULL
    );
    "#,
    // 15: a repository's runs newest first, a page at a time (the dashboard's commit list) as
    // one range of an index, not a sort of every run of the repository.
    r#"
    CREATE INDEX runs_newest ON runs (repository_id, id);
    "#,
    // 16: each repository's run figures kept as runs are written (`status`, `list` and the API
    // read a row, not every run), and a generation that moves with every change to its runs
    // (the daemon's heartbeat looks again only at what moved). Triggers keep them, so no
    // writer can forget to; PostgreSQL has its own text of this one (`pg::PG_MIGRATION_16`).
    r#"
    CREATE TABLE run_totals (
        repository_id TEXT PRIMARY KEY,
        runs INTEGER NOT NULL DEFAULT 0,
        passed INTEGER NOT NULL DEFAULT 0,
        made INTEGER NOT NULL DEFAULT 0,
        made_ms INTEGER NOT NULL DEFAULT 0,
        generation INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    INSERT INTO run_totals (repository_id, runs, passed, made, made_ms, generation)
        SELECT repository_id,
               SUM(CASE WHEN status != 'skipped' THEN 1 ELSE 0 END),
               SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END),
               SUM(CASE WHEN status != 'skipped' AND cached_from IS NULL THEN 1 ELSE 0 END),
               SUM(CASE WHEN status != 'skipped' AND cached_from IS NULL THEN duration_ms ELSE 0 END),
               1
        FROM runs GROUP BY repository_id;
    CREATE TRIGGER run_totals_insert AFTER INSERT ON runs BEGIN
        INSERT INTO run_totals (repository_id, runs, passed, made, made_ms, generation)
        VALUES (NEW.repository_id,
                CASE WHEN NEW.status != 'skipped' THEN 1 ELSE 0 END,
                CASE WHEN NEW.status = 'passed' THEN 1 ELSE 0 END,
                CASE WHEN NEW.status != 'skipped' AND NEW.cached_from IS NULL THEN 1 ELSE 0 END,
                CASE WHEN NEW.status != 'skipped' AND NEW.cached_from IS NULL THEN NEW.duration_ms ELSE 0 END,
                1)
        ON CONFLICT (repository_id) DO UPDATE SET
            runs = runs + excluded.runs, passed = passed + excluded.passed, made = made + excluded.made,
            made_ms = made_ms + excluded.made_ms, generation = generation + 1;
    END;
    CREATE TRIGGER run_totals_delete AFTER DELETE ON runs BEGIN
        UPDATE run_totals SET
            runs = runs - CASE WHEN OLD.status != 'skipped' THEN 1 ELSE 0 END,
            passed = passed - CASE WHEN OLD.status = 'passed' THEN 1 ELSE 0 END,
            made = made - CASE WHEN OLD.status != 'skipped' AND OLD.cached_from IS NULL THEN 1 ELSE 0 END,
            made_ms = made_ms - CASE WHEN OLD.status != 'skipped' AND OLD.cached_from IS NULL THEN OLD.duration_ms ELSE 0 END,
            generation = generation + 1
        WHERE repository_id = OLD.repository_id;
    END;
    CREATE TRIGGER run_totals_update AFTER UPDATE ON runs BEGIN
        UPDATE run_totals SET
            runs = runs - CASE WHEN OLD.status != 'skipped' THEN 1 ELSE 0 END,
            passed = passed - CASE WHEN OLD.status = 'passed' THEN 1 ELSE 0 END,
            made = made - CASE WHEN OLD.status != 'skipped' AND OLD.cached_from IS NULL THEN 1 ELSE 0 END,
            made_ms = made_ms - CASE WHEN OLD.status != 'skipped' AND OLD.cached_from IS NULL THEN OLD.duration_ms ELSE 0 END
        WHERE repository_id = OLD.repository_id;
        INSERT INTO run_totals (repository_id, runs, passed, made, made_ms, generation)
        VALUES (NEW.repository_id,
                CASE WHEN NEW.status != 'skipped' THEN 1 ELSE 0 END,
                CASE WHEN NEW.status = 'passed' THEN 1 ELSE 0 END,
                CASE WHEN NEW.status != 'skipped' AND NEW.cached_from IS NULL THEN 1 ELSE 0 END,
                CASE WHEN NEW.status != 'skipped' AND NEW.cached_from IS NULL THEN NEW.duration_ms ELSE 0 END,
                1)
        ON CONFLICT (repository_id) DO UPDATE SET
            runs = runs + excluded.runs, passed = passed + excluded.passed, made = made + excluded.made,
            made_ms = made_ms + excluded.made_ms, generation = generation + 1;
    END;
    "#,
    // 17: whether each execution read a build cache (`warm`): a warm run and a cold one of the
    // same tree that disagree say the cache decided, not that the test is flaky. Rows kept
    // before read the branch's whole home layer: warm.
    r#"
    ALTER TABLE executions ADD COLUMN warm INTEGER NOT NULL DEFAULT 1;
    "#,
    // 18: the tip of `refs/notes/sandbox` whose every note the index holds as its run (see
    // `Index::advance_notes_tip`): while the ref is there, a run row of this machine's stands
    // for its note without reading it.
    r#"
    ALTER TABLE repositories ADD COLUMN notes_tip TEXT;
    "#,
    // 19: whether an execution ran a commit again after a failure only of known-flaky or
    // quarantined tests (`retry`): its CPU counts, its outcome is no evidence of the tree
    // (a retry never makes a test flaky, passes a tree or releases a quarantine).
    r#"
    ALTER TABLE executions ADD COLUMN retry INTEGER NOT NULL DEFAULT 0;
    "#,
];

/// An event to append with [`Index::add_events`].
pub struct NewEvent<'a> {
    pub kind: gs_model::EventKind,
    pub repository_id: Option<&'a str>,
    pub run_id: Option<i64>,
    pub commit: Option<&'a str>,
    pub data: serde_json::Value,
}

/// What went wrong with the index. `Display` is one line with the fix; [`Hinted`] splits them.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    Home {
        path: PathBuf,
        source: std::io::Error,
    },
    Corrupt {
        path: PathBuf,
        detail: String,
    },
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    Sql(#[from] sql::Error),
    /// The PostgreSQL index cannot be reached (its URL shown with the password masked).
    Unreachable {
        url: String,
        detail: String,
    },
}

impl StoreError {
    /// Whether the database could not be reached at all (down, restarting, cut off), as
    /// opposed to refusing a statement: worth trying again later, with back-off.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } => true,
            StoreError::Sql(sql::Error::Lost(_)) => true,
            StoreError::Sql(sql::Error::Pg(e)) => e.as_db_error().is_none(),
            _ => false,
        }
    }
}

impl Hinted for StoreError {
    fn problem(&self) -> String {
        match self {
            StoreError::Home { path, source } => format!(
                "cannot create the data directory {}: {source}",
                path.display()
            ),
            StoreError::Corrupt { path, detail } => {
                format!("the index {} is corrupt ({detail})", path.display())
            }
            StoreError::TooNew { path, found, known } => format!(
                "the index {} was written by a newer git-sandbox (schema {found}, this build knows {known})",
                path.display()
            ),
            StoreError::Sql(e) => format!("index query failed: {e}"),
            StoreError::Unreachable { url, detail } => {
                format!("cannot reach the index at {url}: {detail}")
            }
        }
    }

    fn hints(&self) -> Vec<String> {
        match self {
            StoreError::Home { .. } => vec!["set GIT_SANDBOX_HOME to a writable directory".into()],
            StoreError::Corrupt { .. } => vec![
                "move it away and run `git sandbox reindex` to rebuild it from git notes".into(),
            ],
            StoreError::TooNew { .. } => vec![
                "upgrade git-sandbox, or move the file away and run `git sandbox reindex`".into(),
            ],
            StoreError::Sql(_) => Vec::new(),
            StoreError::Unreachable { .. } => vec![
                "check that PostgreSQL runs and the URL in [index] url or GIT_SANDBOX_INDEX is right; unset both to use the SQLite file in the data dir".into(),
            ],
        }
    }
}

display_hinted!(StoreError);

pub type Result<T> = std::result::Result<T, StoreError>;

/// The largest WAL [`Index::keep_wal_on_close`] leaves behind: about 60 pages, ten hook runs'
/// rows, which the next process reads back in a fraction of a millisecond.
pub const KEPT_WAL_MAX: u64 = 256 * 1024;

pub struct Index {
    pub conn: sql::Db,
    path: PathBuf,
    /// On a shared index: this machine's data dir, whose registry (else its `clones/`) says
    /// where each repository is on this machine (the `path` column is the registering one's).
    local: Option<PathBuf>,
}

impl Index {
    /// Whether the index is a database many daemons share (PostgreSQL), not this home's file.
    pub fn is_shared(&self) -> bool {
        self.conn.is_pg()
    }

    /// On a shared index, read each repository's path on this machine from the data dir
    /// `home`: its registry, else the clone a daemon of this home keeps (`clones/<id>.git`).
    pub fn localize(&mut self, home: &Path) {
        if self.is_shared() {
            self.local = Some(home.to_path_buf());
        }
    }

    /// Open (creating if needed) the index in `home`, migrating it to [`SCHEMA_VERSION`].
    pub fn open(home: &Path) -> Result<Index> {
        gs_util::private::create_private_dir(home).map_err(|source| StoreError::Home {
            path: home.to_path_buf(),
            source,
        })?;
        let path = home.join("index.db");
        Self::open_file(&path)
    }

    pub fn open_file(path: &Path) -> Result<Index> {
        let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
        // SQLite creates the file 0644 (less the umask) and gives its -wal and -shm the file's
        // mode: create it 0600 first (an empty file is a new database). Never by opening an
        // existing one: that would drop the locks of this process's other connections.
        let home_err = |source: std::io::Error| StoreError::Home {
            path: path.to_path_buf(),
            source,
        };
        gs_util::private::ensure_file(path).map_err(home_err)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| match e {
            rusqlite::Error::SqliteFailure(ref f, _)
                if f.code == rusqlite::ErrorCode::CannotOpen
                    || f.code == rusqlite::ErrorCode::PermissionDenied
                    || f.code == rusqlite::ErrorCode::ReadOnly =>
            {
                StoreError::Home {
                    path: path.to_path_buf(),
                    source: std::io::Error::other(e.to_string()),
                }
            }
            e => corrupt(e),
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql::Error::from)?;
        // The first real read tells a database from garbage.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(corrupt)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(corrupt)?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
                .map_err(corrupt)?;
        }
        // Statement journals in memory: a statement of many rows inside a transaction (a
        // reindex puts its runs a hundred to a statement) keeps one, in a temp file otherwise
        // (7% of a reindex's time went to writing it).
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;",
        )
        .map_err(corrupt)?;
        // An older version left them to the umask.
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            gs_util::private::restrict_path(Path::new(&side)).map_err(home_err)?;
        }
        let mut conn = conn;
        if version < SCHEMA_VERSION {
            Self::migrate(&mut conn, version).map_err(corrupt)?;
        }
        Ok(Index {
            local: None,
            conn: sql::Db::Sqlite(conn),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leave the WAL as it is when this connection closes, for a short-lived process that
    /// writes a little and must be quick (a hook inside the user's `git commit`). The last
    /// connection to close otherwise checkpoints: it copies the WAL into the database file,
    /// fsyncs both and deletes the WAL, so that the next writer makes and fsyncs a new one —
    /// four fsyncs per hook run, milliseconds on a busy disk. Left in the WAL, the writes are
    /// as safe as any commit under `synchronous = NORMAL`. Call it when done writing: only a
    /// WAL under [`KEPT_WAL_MAX`] is kept, since the next process to open the index first
    /// reads the whole WAL (and one that SQLite's own checkpoint already copied would be
    /// copied again on every commit); a larger one is checkpointed and deleted as before.
    pub fn keep_wal_on_close(&self) {
        let sql::Db::Sqlite(c) = &self.conn else {
            return;
        };
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        let small = std::fs::metadata(Path::new(&wal)).is_ok_and(|m| m.len() <= KEPT_WAL_MAX);
        // Best effort: failing, the close checkpoints as before.
        let _ = c.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            small,
        );
    }

    /// Bring a SQLite index from schema `from` to [`SCHEMA_VERSION`].
    fn migrate(conn: &mut Connection, from: i64) -> rusqlite::Result<()> {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(current.max(from) as usize)
        {
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
        }
        tx.commit()
    }

    /// Run `f` in one transaction: what it writes lands together or not at all (and, on
    /// SQLite, with one sync instead of one per statement). `f` must not open a transaction.
    pub fn atomically<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self.conn.transaction().map_err(StoreError::from)?;
        let out = f()?;
        tx.commit().map_err(StoreError::from)?;
        Ok(out)
    }

    /// Append events in as few statements as may be (many rows each), in their order.
    pub fn add_events(&self, events: &[NewEvent<'_>]) -> Result<()> {
        let now = gs_util::time::now_rfc3339();
        for chunk in events.chunks(100) {
            let rows = (0..chunk.len())
                .map(|i| format!("({})", sql::placeholders(6 * i + 1, 6)))
                .collect::<Vec<_>>()
                .join(", ");
            let mut p = Vec::with_capacity(6 * chunk.len());
            for e in chunk {
                p.extend(sql::params![
                    now,
                    e.kind.as_str(),
                    e.repository_id,
                    e.run_id,
                    e.commit,
                    e.data.to_string()
                ]);
            }
            self.conn.execute(
                &format!(
                    "INSERT INTO events (time, kind, repository_id, run_id, commit_id, data) VALUES {rows}"
                ),
                p,
            )?;
        }
        Ok(())
    }

    /// Append an event; returns its id.
    pub fn add_event(
        &self,
        kind: gs_model::EventKind,
        repository_id: Option<&str>,
        run_id: Option<i64>,
        commit: Option<&str>,
        data: &serde_json::Value,
    ) -> Result<i64> {
        // A run adds several per commit: the statement is parsed once per connection.
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO events (time, kind, repository_id, run_id, commit_id, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             RETURNING id",
        )?;
        Ok(stmt.query_row(
            sql::params![
                gs_util::time::now_rfc3339(),
                kind.as_str(),
                repository_id,
                run_id,
                commit,
                data.to_string()
            ],
            |r| r.get(0),
        )?)
    }

    /// Remember the layer table of a sandbox profile (once per profile id).
    pub fn put_profile(&self, id: &str, layers: &[gs_model::Layer]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO sandbox_profiles (id, layers, first_seen) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO NOTHING",
        )?;
        stmt.execute(sql::params![
            id,
            serde_json::to_string(layers).expect("layers always serialize"),
            gs_util::time::now_rfc3339()
        ])?;
        Ok(())
    }

    /// The layer table of a sandbox profile, if this index has seen it.
    pub fn profile(&self, id: &str) -> Result<Option<Vec<gs_model::Layer>>> {
        use sql::OptionalExtension;
        let json: Option<String> = self
            .conn
            .query_row(
                "SELECT layers FROM sandbox_profiles WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
    }

    pub fn cached_analysis(&self, blob: &str, key: &str) -> Result<Option<String>> {
        use sql::OptionalExtension;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT result FROM analysis_cache WHERE blob_id = ?1 AND key = ?2")?;
        Ok(stmt.query_row([blob, key], |r| r.get(0)).optional()?)
    }

    pub fn put_analysis(&self, entries: &[(String, String, String)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO analysis_cache (blob_id, key, result) VALUES (?1, ?2, ?3)
                 ON CONFLICT (blob_id, key) DO UPDATE SET result = excluded.result",
            )?;
            for (blob, key, result) in entries {
                stmt.execute([blob, key, result])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_and_newer_files_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.db");
        std::fs::write(
            &path,
            b"this is not a database, just some text padding it out".repeat(100),
        )
        .unwrap();
        let err = Index::open_file(&path).err().unwrap().to_string();
        assert!(
            err.contains("is corrupt") && err.contains("reindex"),
            "{err}"
        );

        let path = dir.path().join("new.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
        drop(conn);
        let err = Index::open_file(&path).err().unwrap().to_string();
        assert!(err.contains("newer git-sandbox (schema 99"), "{err}");
    }

    #[test]
    fn opens_twice_and_keeps_wal() {
        let dir = tempfile::tempdir().unwrap();
        let a = Index::open(dir.path()).unwrap();
        let mode: String = a
            .conn
            .query_row("PRAGMA journal_mode", sql::params![], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let b = Index::open(dir.path()).unwrap();
        let v: i64 = b
            .conn
            .query_row("PRAGMA user_version", sql::params![], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }
}
