//! The daemon: watches every registered repository and runs each new commit of a watched branch
//! through the same pipeline as `git sandbox run`. Its edge runs on tokio: the control socket's
//! tasks and the ref watcher only send messages on one channel; the scheduler (`scheduler.rs`, a
//! task on this thread, woken by messages, signals and a 200 ms tick) owns the queue and hands
//! jobs to N worker threads, where runs stay synchronous. Every background activity (the
//! workers, polling remotes, the outbox's statuses, notifications and auto-push, webhook
//! deliveries, the HTTP listener, PostgreSQL's `LISTEN`) is a named loop of one supervisor
//! (`supervise.rs`), restarted when it fails and joined on stop. Critical errors (cannot lock,
//! bind or open the index) stop it; runtime errors are recorded as events and survived.

mod control;
mod doors;
mod health;
mod http;
mod lease;
mod listen;
mod outbox;
mod poller;
mod scan;
mod scheduler;
mod supervise;
mod watch;
mod worker;

use crate::app::{AppError, Context};
use gs_model::EventKind;
use gs_store::RepoRow;
use gs_util::{hint::display_hinted, hint::Hinted};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// How often the daemon writes a heartbeat and rescans every repository (the safety net for
/// anything the hooks and the watcher missed).
pub const HEARTBEAT: Duration = crate::app::repo::daemons::HEARTBEAT;
/// How often a daemon on PostgreSQL asks for jobs with no notification (retries whose back-off
/// ended, a notification lost while the connection was down).
const IDLE_CLAIM: Duration = Duration::from_secs(5);
/// Watcher events closer together than this are handled as one.
const DEBOUNCE: Duration = Duration::from_millis(30);
/// How long the loops have to end after the workers did (the outbox's last drain takes up to
/// [`crate::app::publish::BRIEFLY`]).
const STOP_DEADLINE: Duration = Duration::from_secs(15);

/// Why the daemon cannot start (its critical errors). `Display` is one line with the fix.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    AlreadyRunning {
        home: PathBuf,
        pid: String,
    },
    /// The lock file cannot be opened or locked (not: another daemon holds it).
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    HttpBind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    App(#[from] AppError),
}

impl Hinted for DaemonError {
    fn problem(&self) -> String {
        match self {
            DaemonError::AlreadyRunning { home, pid } => format!(
                "a daemon is already running on {} (pid {pid})",
                home.display()
            ),
            DaemonError::Lock { path, source } => {
                format!("cannot open the daemon lock {}: {source}", path.display())
            }
            DaemonError::Bind { path, source } => {
                format!("cannot listen on {}: {source}", path.display())
            }
            DaemonError::HttpBind { addr, source } => format!("cannot listen on {addr}: {source}"),
            DaemonError::App(e) => e.problem(),
        }
    }

    fn hints(&self) -> Vec<String> {
        match self {
            DaemonError::AlreadyRunning { .. } => {
                vec!["stop it with `git sandbox daemon stop`".into()]
            }
            DaemonError::Lock { path, source }
                if source.kind() == std::io::ErrorKind::IsADirectory =>
            {
                vec![format!(
                    "remove the directory {} (no daemon uses it), or set GIT_SANDBOX_HOME",
                    path.display()
                )]
            }
            DaemonError::Lock { path, .. } => vec![format!(
                "make {} a directory you can write, or set GIT_SANDBOX_HOME to one",
                path.parent().unwrap_or(path).display()
            )],
            DaemonError::Bind { source, .. }
                if source.kind() == std::io::ErrorKind::InvalidFilename =>
            {
                vec!["set GIT_SANDBOX_HOME to a shorter path".into()]
            }
            DaemonError::Bind { path, .. } => vec![format!(
                "remove {} if no daemon runs, or set GIT_SANDBOX_HOME",
                path.display()
            )],
            DaemonError::HttpBind { .. } => {
                vec!["pick a free address and port with --http, like 127.0.0.1:8787".into()]
            }
            DaemonError::App(e) => e.hints(),
        }
    }
}

display_hinted!(DaemonError);

pub struct Options {
    /// `--workers`; by default as many as the user's `[limits] cpu_cores` lets the cores hold.
    pub workers: Option<usize>,
    /// How long running jobs may take to finish after a stop request.
    pub grace: Duration,
    /// Where to serve webhooks (`--http`).
    pub http: Option<std::net::SocketAddr>,
}

/// Messages to the scheduler.
pub(crate) enum Msg {
    /// Refs may have changed (None: in any repository).
    Wake(Option<String>),
    Status(tokio::sync::oneshot::Sender<serde_json::Value>),
    Stop,
    /// A worker ended its batch (the jobs with their trees); `ran`: some tests had to run.
    Done {
        jobs: Vec<(i64, worker::TreeKey)>,
        ran: bool,
    },
    /// Jobs were queued (PostgreSQL's `NOTIFY`, from any machine).
    Jobs,
}

pub(crate) struct Shared {
    /// Set after the grace period: running tests are stopped and their jobs queued again.
    pub abort: AtomicBool,
    /// The jobs this daemon holds (handed to workers, or waiting for their tree), as the
    /// scheduler last said: the lease loop renews their leases.
    held: Mutex<Vec<i64>>,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            abort: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
        }
    }

    fn held(&self) -> Vec<i64> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn hold(&self, ids: Vec<i64>) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = ids;
    }
}

pub fn run(opts: Options) -> Result<(), DaemonError> {
    init_logging();
    let ctx = Context::load()?;
    let home = ctx.paths.home.clone();
    let _lock = gs_ipc::lock(&home).map_err(|e| match e {
        gs_ipc::LockError::Held(pid) => DaemonError::AlreadyRunning {
            home: home.clone(),
            pid: pid.map_or("unknown".into(), |p| p.to_string()),
        },
        gs_ipc::LockError::Io(source) => DaemonError::Lock {
            path: gs_ipc::lock_path(&home),
            source,
        },
    })?;
    // Webhooks need a secret that works before anything starts: a daemon that would answer 401
    // to every delivery must say so now. Without `[remote] webhook_secret_file` the listener
    // serves the API and the dashboard, and webhooks answer that they are off.
    let secrets = match opts.http {
        Some(addr) => {
            // A token is the only way in: a listener others can reach needs one to exist.
            if !addr.ip().is_loopback() && crate::app::repo::tokens::list(&ctx.paths)?.is_empty() {
                return Err(AppError::usage(format!(
                    "--http {addr} can be reached from other machines, and no API token exists"
                ))
                .hint("make one first (`git sandbox token create --role admin`), or serve on 127.0.0.1")
                .into());
            }
            match ctx.layers.resolve().remote.webhook_secret_file {
                Some(_) => Some(crate::app::intake::webhook::secrets(&ctx)?),
                None => None,
            }
        }
        None => None,
    };
    // Idle memory (issue 36: under 30 MiB): the daemon's many threads each allocate a little.
    gs_util::few_malloc_arenas();
    // The edge (the control socket, signals, timers, the scheduler's channel) runs on tokio; the
    // runs stay synchronous on the worker threads.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("edge")
        .enable_all()
        .build()
        .map_err(|e| AppError::Io {
            context: "cannot start the daemon's runtime".into(),
            source: e,
        })?;
    let _in_runtime = rt.enter();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Msg>(1024);
    let listener = control::listen(&home, tx.clone())?;
    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut sigint = signal(SignalKind::interrupt()).ok();
    // Jobs this home's previous daemon held were cut off (we hold the home's lock now); jobs
    // whose owner stopped renewing its lease (on any machine) go back to the queue too.
    let me = crate::app::intake::queue::Claimant::new(&ctx, "daemon");
    let home_id = crate::app::home::home_id(&home);
    let reaped = ctx
        .index
        .reap(gs_store::Held::OwnerPrefix(&format!("{home_id}/daemon/")))
        .map_err(AppError::from)?;
    let expired = ctx
        .index
        .reap(gs_store::Held::Expired)
        .map_err(AppError::from)?;
    let requeued = reaped.requeued + expired.requeued;
    let dead = reaped.dead + expired.dead;
    // Every background activity is a loop of the supervisor's, restarted when it fails.
    let mut loops = supervise::Supervisor::default();
    let mut start = |name: &str, body: supervise::Body| {
        loops
            .start(name, health::RETRY, body)
            .map_err(|source| AppError::Io {
                context: format!("cannot start the daemon's {name} loop"),
                source,
            })
    };
    // Deliveries recorded before a crash are fetched now; new ones when the listener wakes it.
    let (wake_deliveries, deliveries) = mpsc::channel::<()>();
    start("deliveries", http::deliveries(deliveries))?;
    let mut served = None;
    if let Some(addr) = opts.http {
        let webhooks = secrets.is_some();
        let (bound, serve) = http::start(addr, secrets, wake_deliveries.clone())
            .map_err(|source| DaemonError::HttpBind { addr, source })?;
        start("http", serve)?;
        served = Some(bound.to_string());
        log(&format!(
            "serving the dashboard at http://{bound}/ and the API at http://{bound}/api/v1"
        ));
        if webhooks {
            log(&format!(
                "serving webhooks at http://{bound}/webhooks/github"
            ));
        } else {
            log("webhooks are off: no [remote] webhook_secret_file in the user config");
        }
    }
    let shared = Arc::new(Shared::new());
    // Leases are renewed on a thread of their own: a slow turn of the scheduler cannot let one
    // run out under a job that still runs.
    start("lease", lease::body(me.clone(), shared.clone()))?;
    let workers = opts
        .workers
        .unwrap_or_else(|| crate::app::run::default_workers(&ctx.layers.resolve().limits))
        .max(1);
    crate::app::run::slots::set_capacity(workers);
    let (job_tx, job_rx) = mpsc::channel::<worker::Assignment>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    for n in 0..workers {
        let (rx, tx, shared) = (job_rx.clone(), tx.clone(), shared.clone());
        start(&format!("worker-{n}"), worker::body(rx, tx, shared))?;
    }
    let mut repos = Repos {
        rows: HashMap::new(),
        cloning: Arc::new(Mutex::new(HashSet::new())),
        tx: tx.clone(),
    };
    repos.reload(&ctx);
    let watcher = watch::start(&repos.git_dirs(), tx.clone());
    if let Some(every) = ctx.layers.resolve().remote.poll {
        start("poll", poller::body(every))?;
    }
    // `[remote] auto_push`: every repository once at start, for what was made while no daemon
    // pushed; then each result queues its own push.
    crate::app::publish::queue_pushes(&ctx, &repos.rows.values().collect::<Vec<_>>());
    start("outbox", outbox::body())?;
    let event = |kind: EventKind, data: serde_json::Value| {
        let _ = ctx.index.add_event(kind, None, None, None, &data);
    };
    crate::app::repo::daemons::started(&ctx, &me.owner, workers, served);
    // On PostgreSQL an idle daemon sleeps until a job is queued anywhere (`LISTEN`).
    let listening = match crate::app::index_url(&ctx.layers).ok().flatten() {
        Some(url) => {
            start("listen", listen::body(url, tx.clone()))?;
            true
        }
        None => false,
    };
    event(
        EventKind::DaemonStarted,
        serde_json::json!({"pid": std::process::id(), "workers": workers, "repositories": repos.rows.len(), "requeued": requeued, "dead": dead, "id": me.owner}),
    );
    log(&format!(
        "started (pid {}, {workers} workers, id {}), watching {} repositories{}{}",
        std::process::id(),
        me.owner,
        repos.rows.len(),
        if requeued > 0 {
            format!(", {requeued} interrupted jobs queued again")
        } else {
            String::new()
        },
        if dead > 0 {
            format!(
                ", {dead} jobs given up after {} attempts",
                gs_store::MAX_ATTEMPTS
            )
        } else {
            String::new()
        }
    ));
    let mut scheduler = scheduler::Scheduler::new(
        &ctx, &me, workers, opts.grace, &shared, job_tx, repos, watcher, &loops, listening,
    );
    rt.block_on(scheduler.run(&mut rx, &mut sigterm, &mut sigint));
    // The workers end when the jobs' channel closes (all of them are idle by now).
    drop(scheduler);
    loops.stop(|name| name.starts_with("worker-"), None);
    drop(listener);
    // The other loops are told to stop together: the last results' statuses, notifications and
    // pushes go out; a remote or GitHub that hangs does not hold the stop for long (what was not
    // delivered waits in the index).
    let left = loops.stop(|_| true, Some(Instant::now() + STOP_DEADLINE));
    if !left.is_empty() {
        warn(&format!(
            "left behind at exit, still busy after {} s: {}",
            STOP_DEADLINE.as_secs(),
            left.join(", ")
        ));
    }
    // What it claimed and never started (jobs that waited for their tree) goes back uncounted.
    let requeued = ctx.index.release_unstarted(&me.owner).unwrap_or(0);
    event(
        EventKind::DaemonStopped,
        serde_json::json!({"requeued": requeued}),
    );
    let _ = ctx.index.daemon_stopped(&me.owner);
    log(&format!(
        "stopped{}",
        if requeued > 0 {
            format!("; {requeued} jobs queued again")
        } else {
            String::new()
        }
    ));
    let _ = std::fs::remove_file(gs_ipc::socket_path(&home));
    drop(_in_runtime);
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// The next delivery of a signal, or never when it could not be watched.
async fn next_signal(s: &mut Option<Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// What the daemon did, as a log event at level INFO (in the span of the job it belongs to).
pub(crate) fn log(msg: &str) {
    tracing::info!("{msg}");
}

/// Something that went wrong and was survived, at level WARN.
pub(crate) fn warn(msg: &str) {
    tracing::warn!("{msg}");
}

/// The daemon logs at `info` unless `GIT_SANDBOX_LOG` says otherwise.
fn init_logging() {
    gs_util::trace::init_log();
}

/// The registered repositories, reloaded from the index on each heartbeat and when a ping
/// names one we do not know yet.
struct Repos {
    rows: HashMap<String, RepoRow>,
    /// Repositories being cloned here now (on threads of their own: a big clone must not hold
    /// the scheduler, which renews the leases).
    cloning: Arc<Mutex<HashSet<String>>>,
    tx: tokio::sync::mpsc::Sender<Msg>,
}

impl Repos {
    fn reload(&mut self, ctx: &Context) {
        let Ok(rows) = ctx.index.repositories() else {
            return;
        };
        // On a shared index, repositories adopted on other machines run in clones of our own,
        // made from the remote they were registered with; each is served once it is there.
        for row in rows.iter().filter(|r| {
            !std::path::Path::new(&r.path).exists() && crate::app::intake::fleet::is_managed(ctx, r)
        }) {
            if row.remote_url.is_none()
                || !self
                    .cloning
                    .lock()
                    .expect("clone set")
                    .insert(row.repository_id.clone())
            {
                continue;
            }
            let (row, cloning, tx) = (row.clone(), self.cloning.clone(), self.tx.clone());
            let _ = std::thread::Builder::new()
                .name("clone".into())
                .spawn(move || {
                    let made = Context::load().map_err(|e| e.to_string()).and_then(|c| {
                        crate::app::intake::fleet::clone_if_missing(&c, &row)
                            .map_err(|e| e.to_string())
                    });
                    cloning
                        .lock()
                        .expect("clone set")
                        .remove(&row.repository_id);
                    match made {
                        // Served from now on (the wake reloads the repositories).
                        Ok(true) => {
                            log(&format!(
                                "{}: cloned from {} into {}",
                                row.name,
                                row.remote_url.as_deref().unwrap_or("?"),
                                row.path
                            ));
                            let _ = tx.blocking_send(Msg::Wake(Some(row.repository_id)));
                        }
                        Ok(false) => {}
                        // Tried again at the next heartbeat.
                        Err(e) => warn(&format!("{}: cannot clone it here: {e}", row.name)),
                    }
                });
        }
        self.rows = rows
            .into_iter()
            .filter(|r| std::path::Path::new(&r.path).exists())
            .map(|r| (r.repository_id.clone(), r))
            .collect();
    }

    fn git_dirs(&self) -> Vec<(String, PathBuf)> {
        self.rows
            .values()
            .filter_map(|r| {
                let repo = gs_git::open(std::path::Path::new(&r.path)).ok()?;
                Some((r.repository_id.clone(), repo.common_dir().to_path_buf()))
            })
            .collect()
    }
}
