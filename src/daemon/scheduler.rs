//! The scheduler: a task on the daemon's thread, woken by messages, signals and a 200 ms tick,
//! that owns the queue. Each tick runs its activities in turn, each a method named here: the
//! message, the reaping of expired leases, the stop, the heartbeat, the scan, the claim, and
//! last what it holds, for the lease loop (`lease.rs`) to renew. They share the
//! scheduler's state (the workers' slots, the repositories, the index's health), so they are
//! steps of one loop, not loops of their own.

use super::{
    health, log, next_signal, scan, warn, worker, Msg, Repos, Shared, DEBOUNCE, HEARTBEAT,
    IDLE_CLAIM,
};
use crate::app::intake::queue::Claimant;
use crate::app::Context;
use gs_model::EventKind;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::signal::unix::Signal;

pub(super) struct Scheduler<'a> {
    pub ctx: &'a Context,
    pub me: &'a Claimant,
    pub workers: usize,
    pub grace: Duration,
    pub shared: &'a Shared,
    pub job_tx: mpsc::Sender<worker::Assignment>,
    pub repos: Repos,
    pub watcher: super::watch::RefWatcher,
    pub loops: &'a super::supervise::Supervisor,
    /// On PostgreSQL: the listen loop wakes the scheduler when jobs are queued.
    pub listening: bool,
    started: Instant,
    dirty: HashSet<Option<String>>,
    last_wake: Instant,
    last_beat: Instant,
    slots: Slots,
    stopping: Option<Instant>,
    want_jobs: bool,
    last_claim: Instant,
    last_lease: Instant,
    health: health::Health,
    looked: scan::Looked,
}

impl<'a> Scheduler<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &'a Context,
        me: &'a Claimant,
        workers: usize,
        grace: Duration,
        shared: &'a Shared,
        job_tx: mpsc::Sender<worker::Assignment>,
        repos: Repos,
        watcher: super::watch::RefWatcher,
        loops: &'a super::supervise::Supervisor,
        listening: bool,
    ) -> Self {
        Scheduler {
            ctx,
            me,
            workers,
            grace,
            shared,
            job_tx,
            repos,
            watcher,
            loops,
            listening,
            started: Instant::now(),
            dirty: HashSet::from([None]),
            last_wake: Instant::now() - DEBOUNCE,
            last_beat: Instant::now(),
            slots: Slots::new(workers),
            stopping: None,
            want_jobs: true,
            last_claim: Instant::now(),
            last_lease: Instant::now(),
            health: health::Health::default(),
            looked: scan::Looked::new(),
        }
    }

    /// Run until stopped (`daemon stop`, SIGTERM, SIGINT) and every worker is idle.
    pub async fn run(
        &mut self,
        rx: &mut tokio::sync::mpsc::Receiver<Msg>,
        sigterm: &mut Option<Signal>,
        sigint: &mut Option<Signal>,
    ) {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => Some(m),
                    None => break,
                },
                _ = next_signal(sigterm) => {
                    self.stopping.get_or_insert_with(Instant::now);
                    None
                }
                _ = next_signal(sigint) => {
                    self.stopping.get_or_insert_with(Instant::now);
                    None
                }
                _ = tick.tick() => None,
            };
            if let Some(msg) = msg {
                self.message(msg);
            }
            self.reap();
            if let Some(since) = self.stopping {
                self.publish();
                if self.slots.idle == self.workers {
                    break;
                }
                self.grace_over(since);
                continue;
            }
            // While the index is away nothing new is asked of it (no scans, no claims).
            if self.health.may_try() {
                self.heartbeat();
                self.take_spooled();
                self.scan();
                self.claim();
            }
            self.publish();
        }
    }

    fn event(&self, kind: EventKind, data: serde_json::Value) {
        let _ = self.ctx.index.add_event(kind, None, None, None, &data);
    }

    fn message(&mut self, msg: Msg) {
        match msg {
            Msg::Wake(r) => {
                self.dirty.insert(r);
                self.last_wake = Instant::now();
            }
            Msg::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Msg::Stop => {
                self.stopping.get_or_insert_with(Instant::now);
            }
            Msg::Done { jobs, ran } => {
                self.slots.done(&jobs, ran);
                self.want_jobs = true;
            }
            Msg::Jobs => self.want_jobs = true,
        }
    }

    /// What `daemon status` shows.
    fn status(&mut self) -> serde_json::Value {
        let (ctx, workers) = (self.ctx, self.workers);
        // An index that is away is not asked (a connect could hang the scheduler).
        let (depth, why) = if self.health.may_try() {
            let depth = ctx.index.queue_depth();
            self.health.record(&depth);
            (depth.ok(), ctx.index.pending_by_trigger().ok())
        } else {
            (None, None)
        };
        serde_json::json!({
            "pid": std::process::id(), "id": self.me.owner, "workers": workers,
            "busy_workers": workers - self.slots.idle,
            "pending_jobs": depth.map(|d| d.0), "pending_by_trigger": why.unwrap_or_default(),
            "running_jobs": depth.map(|d| d.1), "repositories": self.repos.rows.len(),
            "uptime_s": self.started.elapsed().as_secs(), "stopping": self.stopping.is_some(),
            "index": self.health.json(), "loops": self.loops.json(),
        })
    }

    /// Every third of a lease, expired leases (any daemon's) go back to the queue. This daemon's
    /// own leases are renewed by the lease loop (`lease.rs`), from what [`Scheduler::publish`]
    /// last said it holds.
    fn reap(&mut self) {
        let (ctx, me) = (self.ctx, self.me);
        if self.last_lease.elapsed() < me.lease / 3 || !self.health.may_try() {
            return;
        }
        self.last_lease = Instant::now();
        let reaped = ctx.index.reap(gs_store::Held::Expired);
        self.health.record(&reaped);
        if let Ok(r) = reaped {
            if r.requeued + r.dead > 0 {
                self.event(
                    EventKind::JobReaped,
                    serde_json::json!({"requeued": r.requeued, "dead": r.dead}),
                );
                warn(&format!(
                    "{} jobs whose daemon stopped renewing its lease were queued again, {} given up",
                    r.requeued, r.dead
                ));
                self.want_jobs = true;
            }
        }
    }

    /// Say which jobs this daemon holds (running, or waiting for their tree) for the lease loop.
    fn publish(&self) {
        let ids = self
            .slots
            .held
            .iter()
            .copied()
            .chain(self.slots.waiting.iter().flat_map(|a| a.ids()))
            .collect();
        self.shared.hold(ids);
    }

    /// Once the grace period after a stop is over, running tests are stopped.
    fn grace_over(&self, since: Instant) {
        if since.elapsed() > self.grace && !self.shared.abort.swap(true, Ordering::Relaxed) {
            log("grace period over: stopping running tests; their commits are queued again");
        }
    }

    /// Every [`HEARTBEAT`]: a heartbeat, and the repositories reloaded and rescanned.
    fn heartbeat(&mut self) {
        if self.last_beat.elapsed() < HEARTBEAT {
            return;
        }
        let (ctx, workers) = (self.ctx, self.workers);
        self.last_beat = Instant::now();
        let depth = ctx.index.queue_depth();
        self.health.record(&depth);
        let (pending, running) = depth.unwrap_or((0, 0));
        self.event(
            EventKind::DaemonHeartbeat,
            serde_json::json!({"pending_jobs": pending, "running_jobs": running, "busy_workers": workers - self.slots.idle}),
        );
        let _ = ctx
            .index
            .daemon_heartbeat(&self.me.owner, (workers - self.slots.idle) as i64);
        self.repos.reload(ctx);
        self.watcher.update(&self.repos.git_dirs());
        self.dirty.insert(None);
    }

    /// What the hooks spooled (a commit's branches, written without starting a process) is
    /// queued at the next tick: a directory read when there is nothing.
    fn take_spooled(&mut self) {
        if crate::app::intake::spool::take_in(self.ctx, false) > 0 {
            self.want_jobs = true;
        }
    }

    /// The repositories woken (all of them after a heartbeat) are scanned for new commits, once
    /// the watcher's events have settled.
    fn scan(&mut self) {
        if self.dirty.is_empty() || self.last_wake.elapsed() < DEBOUNCE {
            return;
        }
        let ctx = self.ctx;
        for target in std::mem::take(&mut self.dirty) {
            if target
                .as_ref()
                .is_some_and(|id| !self.repos.rows.contains_key(id))
            {
                self.repos.reload(ctx);
                self.watcher.update(&self.repos.git_dirs());
            }
            for (id, row) in &self.repos.rows {
                if target.as_ref().is_none_or(|t| t == id) {
                    scan::scan(ctx, row, target.is_none(), &mut self.looked);
                }
            }
            if target.is_none() {
                // A full scan's records are freed; their pages go back to the system.
                gs_util::release_freed_memory();
            }
        }
        self.want_jobs = true;
    }

    /// Jobs are claimed for idle workers. SQLite is asked every tick (a local file); PostgreSQL
    /// when a job may be there (a notification, a finished job, a rescan) and every few seconds
    /// for retries that came due.
    fn claim(&mut self) {
        if !self.listening || self.last_claim.elapsed() >= IDLE_CLAIM {
            self.want_jobs = true;
        }
        if self.slots.free() == 0 || !self.want_jobs {
            return;
        }
        self.want_jobs = false;
        self.last_claim = Instant::now();
        // A claim that handed every worker a batch while results are being served leaves room
        // for one batch ahead: claimed at once, not at the next wake-up (on PostgreSQL that is
        // the next finished batch, and its worker would wait for the claim).
        for _ in 0..2 {
            let claimed = dispatch(
                self.ctx,
                self.me,
                &self.repos,
                &mut self.slots,
                &self.job_tx,
            );
            if !matches!(claimed, Ok(None)) {
                self.health.record(&claimed);
            }
            if !matches!(claimed, Ok(Some(n)) if n > 0) || self.slots.free() == 0 {
                break;
            }
        }
    }
}

/// Hand jobs to idle workers, never two jobs of the same tree to different workers at once:
/// first the claimed jobs that waited for their tree, then new claims among the repositories
/// this daemon serves, in batches of one repository's jobs (as many per worker as the batch
/// size, which grows while results come without running tests). Returns how many jobs it
/// claimed, None when the index was not asked.
fn dispatch(
    ctx: &Context,
    me: &Claimant,
    repos: &Repos,
    slots: &mut Slots,
    job_tx: &mpsc::Sender<worker::Assignment>,
) -> Result<Option<usize>, gs_store::StoreError> {
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
            .or_insert_with(|| gs_git::open_recent(std::path::Path::new(&row.path)).ok());
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
