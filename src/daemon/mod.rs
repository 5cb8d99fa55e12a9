//! The daemon: watches every registered repository and runs each new commit of a watched branch
//! through the same pipeline as `git sandbox run`. Its edge runs on tokio: the control socket's
//! tasks and the ref watcher only send messages on one channel; the scheduler (a task on this
//! thread, woken by messages, signals and a 200 ms tick) owns the queue and hands jobs to N
//! worker threads, where runs stay synchronous. Background threads poll remotes, deliver the
//! outbox (statuses, notifications, auto-push) and fetch webhook deliveries. Critical errors (cannot lock, bind or open the
//! index) stop it; runtime errors are recorded as events and survived.

mod control;
mod doors;
mod health;
mod http;
mod listen;
mod outbox;
mod poller;
mod scan;
mod watch;
mod worker;

use crate::app::{AppError, Context};
use crate::model::EventKind;
use crate::store::RepoRow;
use crate::util::hint::{display_hinted, Hinted};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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
    pub workers: usize,
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
}

pub fn run(opts: Options) -> Result<(), DaemonError> {
    init_logging();
    let ctx = Context::load()?;
    let home = ctx.paths.home.clone();
    let _lock = crate::ipc::lock(&home).map_err(|e| match e {
        crate::ipc::LockError::Held(pid) => DaemonError::AlreadyRunning {
            home: home.clone(),
            pid: pid.map_or("unknown".into(), |p| p.to_string()),
        },
        crate::ipc::LockError::Io(source) => DaemonError::Lock {
            path: crate::ipc::lock_path(&home),
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
    crate::util::few_malloc_arenas();
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
        .reap(crate::store::Held::OwnerPrefix(&format!(
            "{home_id}/daemon/"
        )))
        .map_err(AppError::from)?;
    let expired = ctx
        .index
        .reap(crate::store::Held::Expired)
        .map_err(AppError::from)?;
    let requeued = reaped.requeued + expired.requeued;
    let dead = reaped.dead + expired.dead;
    // Deliveries recorded before a crash are fetched now; new ones when the listener wakes it.
    let (wake_deliveries, deliveries) = mpsc::channel::<()>();
    http::start_deliveries(deliveries);
    let mut served = None;
    if let Some(addr) = opts.http {
        let webhooks = secrets.is_some();
        let bound = http::start(addr, secrets, wake_deliveries.clone())
            .map_err(|source| DaemonError::HttpBind { addr, source })?;
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
    let shared = Arc::new(Shared {
        abort: AtomicBool::new(false),
    });
    let workers = opts.workers.max(1);
    let (job_tx, job_rx) = mpsc::channel::<worker::Assignment>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    let mut handles = Vec::new();
    for n in 0..workers {
        let (rx, tx, shared) = (job_rx.clone(), tx.clone(), shared.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("worker-{n}"))
                .spawn(move || worker::work(rx, tx, shared))
                .expect("spawning a thread"),
        );
    }
    let mut repos = Repos {
        rows: HashMap::new(),
        cloning: Arc::new(Mutex::new(HashSet::new())),
        tx: tx.clone(),
    };
    repos.reload(&ctx);
    let watcher = watch::start(&repos.git_dirs(), tx.clone());
    let stop_polling = Arc::new(AtomicBool::new(false));
    if let Some(every) = ctx.layers.resolve().remote.poll {
        poller::start(every, stop_polling.clone());
    }
    // `[remote] auto_push`: every repository once at start, for what was made while no daemon
    // pushed; then each result queues its own push.
    crate::app::publish::queue_pushes(&ctx, &repos.rows.values().collect::<Vec<_>>());
    let stop_outbox = Arc::new(AtomicBool::new(false));
    let outbox = outbox::start(stop_outbox.clone());
    let event = |kind: EventKind, data: serde_json::Value| {
        let _ = ctx.index.add_event(kind, None, None, None, &data);
    };
    crate::app::repo::daemons::started(&ctx, &me.owner, workers, served);
    // On PostgreSQL an idle daemon sleeps until a job is queued anywhere (`LISTEN`).
    let listening = match crate::app::index_url(&ctx.layers).ok().flatten() {
        Some(url) => {
            listen::start(url, tx.clone());
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
                crate::store::MAX_ATTEMPTS
            )
        } else {
            String::new()
        }
    ));

    let started = Instant::now();
    let mut dirty: HashSet<Option<String>> = HashSet::from([None]);
    let mut last_wake = Instant::now() - DEBOUNCE;
    let mut last_beat = Instant::now();
    let mut slots = Slots::new(workers);
    let mut stopping: Option<Instant> = None;
    let mut want_jobs = true;
    let mut last_claim = Instant::now();
    let mut last_lease = Instant::now();
    let mut health = health::Health::default();
    let mut looked = scan::Looked::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    rt.block_on(async { loop {
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => Some(m),
                None => break,
            },
            _ = next_signal(&mut sigterm) => {
                stopping.get_or_insert_with(Instant::now);
                None
            }
            _ = next_signal(&mut sigint) => {
                stopping.get_or_insert_with(Instant::now);
                None
            }
            _ = tick.tick() => None,
        };
        match msg {
            Some(Msg::Wake(r)) => {
                dirty.insert(r);
                last_wake = Instant::now();
            }
            Some(Msg::Status(reply)) => {
                // An index that is away is not asked (a connect could hang the scheduler).
                let (depth, why) = if health.may_try() {
                    let depth = ctx.index.queue_depth();
                    health.record(&depth);
                    (depth.ok(), ctx.index.pending_by_trigger().ok())
                } else {
                    (None, None)
                };
                let _ = reply.send(serde_json::json!({
                    "pid": std::process::id(), "id": me.owner, "workers": workers,
                    "busy_workers": workers - slots.idle,
                    "pending_jobs": depth.map(|d| d.0), "pending_by_trigger": why.unwrap_or_default(),
                    "running_jobs": depth.map(|d| d.1), "repositories": repos.rows.len(),
                    "uptime_s": started.elapsed().as_secs(), "stopping": stopping.is_some(),
                    "index": health.json(),
                }));
            }
            Some(Msg::Stop) => {
                stopping.get_or_insert_with(Instant::now);
            }
            Some(Msg::Done { jobs, ran }) => {
                slots.done(&jobs, ran);
                want_jobs = true;
            }
            Some(Msg::Jobs) => want_jobs = true,
            None => {}
        }
        // The leases of what this daemon holds (running or waiting for its tree) are renewed
        // every third of a lease; expired ones, any daemon's, go back to the queue.
        if last_lease.elapsed() >= me.lease / 3 && health.may_try() {
            last_lease = Instant::now();
            let ids: Vec<i64> = slots
                .held
                .iter()
                .copied()
                .chain(slots.waiting.iter().flat_map(|a| a.ids()))
                .collect();
            // Only what reached the index tells whether it answers (no jobs held: not asked).
            if !ids.is_empty() {
                let renewed = me.renew(&ctx, &ids);
                health.record_app(&renewed);
            }
            let reaped = ctx.index.reap(crate::store::Held::Expired);
            health.record(&reaped);
            if let Ok(r) = reaped {
                if r.requeued + r.dead > 0 {
                    event(
                        EventKind::JobReaped,
                        serde_json::json!({"requeued": r.requeued, "dead": r.dead}),
                    );
                    warn(&format!(
                        "{} jobs whose daemon stopped renewing its lease were queued again, {} given up",
                        r.requeued, r.dead
                    ));
                    want_jobs = true;
                }
            }
        }
        if let Some(since) = stopping {
            if slots.idle == workers {
                break;
            }
            if since.elapsed() > opts.grace && !shared.abort.swap(true, Ordering::Relaxed) {
                log("grace period over: stopping running tests; their commits are queued again");
            }
            continue;
        }
        // While the index is away nothing new is asked of it (no scans, no claims).
        if !health.may_try() {
            continue;
        }
        if last_beat.elapsed() >= HEARTBEAT {
            last_beat = Instant::now();
            let depth = ctx.index.queue_depth();
            health.record(&depth);
            let (pending, running) = depth.unwrap_or((0, 0));
            event(
                EventKind::DaemonHeartbeat,
                serde_json::json!({"pending_jobs": pending, "running_jobs": running, "busy_workers": workers - slots.idle}),
            );
            let _ = ctx
                .index
                .daemon_heartbeat(&me.owner, (workers - slots.idle) as i64);
            repos.reload(&ctx);
            watcher.update(&repos.git_dirs());
            dirty.insert(None);
        }
        if !dirty.is_empty() && last_wake.elapsed() >= DEBOUNCE {
            for target in std::mem::take(&mut dirty) {
                if target
                    .as_ref()
                    .is_some_and(|id| !repos.rows.contains_key(id))
                {
                    repos.reload(&ctx);
                    watcher.update(&repos.git_dirs());
                }
                for (id, row) in &repos.rows {
                    if target.as_ref().is_none_or(|t| t == id) {
                        scan::scan(&ctx, row, target.is_none(), &mut looked);
                    }
                }
                if target.is_none() {
                    // A full scan's records are freed; their pages go back to the system.
                    crate::util::release_freed_memory();
                }
            }
            want_jobs = true;
        }
        // SQLite is asked every tick (a local file); PostgreSQL when a job may be there (a
        // notification, a finished job, a rescan) and every few seconds for retries that came due.
        if !listening || last_claim.elapsed() >= IDLE_CLAIM {
            want_jobs = true;
        }
        if slots.free() > 0 && want_jobs {
            want_jobs = false;
            last_claim = Instant::now();
            // A claim that handed every worker a batch while results are being served leaves
            // room for one batch ahead: claimed at once, not at the next wake-up (on PostgreSQL
            // that is the next finished batch, and its worker would wait for the claim).
            for _ in 0..2 {
                let claimed = dispatch(&ctx, &me, &repos, &mut slots, &job_tx);
                if !matches!(claimed, Ok(None)) {
                    health.record(&claimed);
                }
                if !matches!(claimed, Ok(Some(n)) if n > 0) || slots.free() == 0 {
                    break;
                }
            }
        }
    } });
    stop_polling.store(true, Ordering::Relaxed);
    drop(job_tx);
    for h in handles {
        let _ = h.join();
    }
    drop(listener);
    // The last results' statuses, notifications and pushes go out; a remote or GitHub that
    // hangs does not hold the stop for long (what was not delivered waits in the index).
    stop_outbox.store(true, Ordering::Relaxed);
    if let Some(handle) = outbox {
        let since = Instant::now();
        while !handle.is_finished() && since.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(50));
        }
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
    let _ = std::fs::remove_file(crate::ipc::socket_path(&home));
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
    crate::util::trace::init_log();
}

/// Hand jobs to idle workers, never two jobs of the same tree to different workers at once:
/// first the claimed jobs that waited for their tree, then new claims among the repositories
/// this daemon serves, in batches of one repository's jobs (as many per worker as the batch
/// size, which grows while results come without running tests). Returns how many jobs it
/// claimed, None when the index was not asked.
fn dispatch(
    ctx: &Context,
    me: &crate::app::intake::queue::Claimant,
    repos: &Repos,
    slots: &mut Slots,
    job_tx: &mpsc::Sender<worker::Assignment>,
) -> Result<Option<usize>, crate::store::StoreError> {
    let mut i = 0;
    while i < slots.waiting.len() && slots.free() > 0 {
        if slots.is_busy(&slots.waiting[i]) {
            i += 1;
            continue;
        }
        // With the waiting jobs of its repository that are free too, up to a batch.
        let mut a = slots.waiting.remove(i);
        let mut j = i;
        while j < slots.waiting.len() && a.jobs.len() < slots.batch {
            let b = &slots.waiting[j];
            if b.row.repository_id == a.row.repository_id
                && !slots.is_busy(b)
                && a.jobs.len() + b.jobs.len() <= slots.batch
            {
                a.jobs.extend(slots.waiting.remove(j).jobs);
            } else {
                j += 1;
            }
        }
        slots.send(a, job_tx);
    }
    let free = slots.free();
    if free == 0 {
        return Ok(None);
    }
    let served: Vec<&str> = repos.rows.keys().map(String::as_str).collect();
    let jobs = ctx
        .index
        .claim_jobs(&me.owner, free * slots.batch, &me.lease_until(), &served)?;
    let claimed = jobs.len();
    // Shared out among the idle workers (a burst of many is not one worker's).
    let per_worker = jobs.len().div_ceil(free).clamp(1, slots.batch);
    // Each repository is opened once to find its jobs' trees.
    let mut opened: HashMap<String, Option<gix::Repository>> = HashMap::new();
    let mut batches: Vec<worker::Assignment> = Vec::new();
    for job in jobs {
        let Some(row) = repos.rows.get(&job.repository_id) else {
            let _ = ctx.index.release_job(&job);
            continue;
        };
        let repo = opened
            .entry(row.repository_id.clone())
            .or_insert_with(|| crate::git::open_recent(std::path::Path::new(&row.path)).ok());
        let tree = repo
            .as_ref()
            .and_then(|r| worker::tree_of(r, &job.commit_id))
            .unwrap_or_else(|| job.commit_id.clone());
        let key = (job.repository_id.clone(), tree);
        if slots.busy.contains(&key) {
            // Its tree runs in another worker: it waits, alone, to be served from that result.
            slots.waiting.push(worker::Assignment {
                row: row.clone(),
                jobs: vec![(job, key)],
            });
            continue;
        }
        match batches
            .iter_mut()
            .find(|a| a.row.repository_id == job.repository_id && a.jobs.len() < per_worker)
        {
            Some(a) => a.jobs.push((job, key)),
            None => batches.push(worker::Assignment {
                row: row.clone(),
                jobs: vec![(job, key)],
            }),
        }
    }
    for a in batches {
        if slots.free() > 0 && !slots.is_busy(&a) {
            slots.send(a, job_tx);
        } else {
            slots.waiting.push(a);
        }
    }
    Ok(Some(claimed))
}

/// The most jobs one worker is handed at once.
const MAX_BATCH: usize = 128;

/// The scheduler's hold on its workers and jobs.
struct Slots {
    /// The trees being run now (by repository): never two runs of one tree at once.
    busy: HashSet<worker::TreeKey>,
    /// Workers without a job.
    idle: usize,
    /// Claimed jobs whose tree is busy: handed out when it is free (their leases renewed).
    waiting: Vec<worker::Assignment>,
    /// The jobs handed to workers, whose leases this daemon renews until they are done.
    held: HashSet<i64>,
    /// How many jobs a worker is handed at once: four times more (up to [`MAX_BATCH`]) after a batch
    /// whose results came without running tests, back to one after a batch that ran some.
    batch: usize,
    /// Whether a batch waits in the channel for the first worker to be free: while results
    /// come without running tests, the next batch is claimed while the workers are busy, so
    /// a worker goes on at once instead of waiting for the scheduler's claim.
    ahead: bool,
}

impl Slots {
    fn new(workers: usize) -> Slots {
        Slots {
            busy: HashSet::new(),
            idle: workers,
            waiting: Vec::new(),
            held: HashSet::new(),
            batch: 1,
            ahead: false,
        }
    }

    /// How many batches may be handed out now: one per idle worker, else one ahead while
    /// results are being served.
    fn free(&self) -> usize {
        self.idle + usize::from(self.idle == 0 && !self.ahead && self.batch > 1)
    }

    fn is_busy(&self, a: &worker::Assignment) -> bool {
        a.jobs.iter().any(|(_, key)| self.busy.contains(key))
    }

    fn send(&mut self, a: worker::Assignment, job_tx: &mpsc::Sender<worker::Assignment>) {
        self.busy.extend(a.jobs.iter().map(|(_, key)| key.clone()));
        self.held.extend(a.ids());
        if self.idle > 0 {
            self.idle -= 1;
        } else {
            self.ahead = true;
        }
        let _ = job_tx.send(a);
    }

    /// A worker is done with its batch.
    fn done(&mut self, jobs: &[(i64, worker::TreeKey)], ran: bool) {
        for (id, key) in jobs {
            self.held.remove(id);
            self.busy.remove(key);
        }
        // The worker that is done takes the batch waiting ahead, if there is one.
        if self.ahead {
            self.ahead = false;
        } else {
            self.idle += 1;
        }
        self.batch = if ran {
            1
        } else {
            (self.batch * 4).min(MAX_BATCH)
        };
    }
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
                let repo = crate::git::open(std::path::Path::new(&r.path)).ok()?;
                Some((r.repository_id.clone(), repo.common_dir().to_path_buf()))
            })
            .collect()
    }
}
