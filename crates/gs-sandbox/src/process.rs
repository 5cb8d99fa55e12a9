//! Supervising one test command: the sandbox helper in its own session and process group, stdin
//! from /dev/null, output to a capped log with the tail kept, a wall timeout that ends the whole
//! tree (terminate, grace, kill), the helper's per-layer report, what killed the run, and resource
//! usage from `wait4`.

pub use super::launch::Output;
use super::sandbox::{self, cgroup::RunCgroup, Artifact, Plan, PlanLimits, Report, Sandbox};
use gs_config::Limits;
use gs_model::{AppliedLimits, Isolation, KilledBy, Layer, LayerStatus, Resources};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a terminated process group gets before it is killed.
const GRACE: Duration = Duration::from_millis(1500);
/// How much of the end of the output the record keeps.
const TAIL_BYTES: usize = 4096;
const TAIL_LINES: usize = 40;

pub struct Spec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    /// The run's private directory (holds `cwd`, HOME and TMPDIR): the only writable host path.
    pub root: &'a Path,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub output: Output<'a>,
    pub limits: &'a Limits,
    pub sandbox: &'a Sandbox,
    /// Set from outside (Ctrl-C) to stop the run early.
    pub interrupt: &'a AtomicBool,
    /// Files (relative to `cwd`) to hand back once the command has ended (a JUnit report).
    pub artifacts: &'a [String],
    /// A kept checkout to lay the run's overlay over (see [`Plan::lower`]).
    pub lower: Option<&'a Path>,
    /// As root, the uid the run gets (a slot's).
    pub run_uid: Option<u32>,
    /// Build-cache layers, the branch cache to keep writes in, and what is kept (see [`Plan`]).
    pub cache_layers: &'a [PathBuf],
    pub cache_out: Option<&'a Path>,
    pub cache_paths: &'a [String],
    /// Layers laid *over* the kept checkout, topmost first (an agent workspace's writes so far:
    /// see [`Plan::work_layers`]).
    pub work_layers: &'a [PathBuf],
    /// Watch the captured output for the first failing test as it streams.
    pub watch: Option<Watch<'a>>,
    /// Where the run reaches the network, if anywhere.
    pub egress: Egress,
}

/// Where a run reaches the network.
#[derive(Debug, Clone, Default)]
pub enum Egress {
    /// Nowhere: a network namespace of its own, loopback only.
    #[default]
    Closed,
    /// A network namespace of its own whose one way out is git-sandbox's proxy, to the hosts
    /// `allow` names (`None`: any public host).
    Proxy {
        allow: Option<Vec<String>>,
        resolve: std::collections::BTreeMap<String, std::net::IpAddr>,
    },
    /// The host's own network namespace (`network = "host"` in the user's config).
    Host,
}

impl Egress {
    /// The tests' and the checks' (`[limits] network`, `[network] allow`).
    pub fn tests(config: &gs_config::Config) -> Egress {
        Self::of(config, config.limits.network, config.network.allow.clone())
    }

    /// The setup step's (`setup_network`, `[network] setup_allow` or the registries).
    pub fn setup(config: &gs_config::Config) -> Egress {
        Self::of(
            config,
            config.limits.setup_network,
            Some(config.network.setup_hosts()),
        )
    }

    fn of(config: &gs_config::Config, on: bool, allow: Option<Vec<String>>) -> Egress {
        match (on, config.limits.network_host) {
            (false, _) => Egress::Closed,
            (true, true) => Egress::Host,
            (true, false) => Egress::Proxy {
                allow,
                resolve: config.network.resolve.clone(),
            },
        }
    }

    /// The proxy's policy, for a run that has one.
    pub fn policy(&self) -> Option<gs_egress::Policy> {
        let Egress::Proxy { allow, resolve } = self else {
            return None;
        };
        Some(gs_egress::Policy {
            allow: allow.as_ref().map(|a| {
                a.iter()
                    .filter_map(|p| gs_egress::HostPattern::parse(p).ok())
                    .collect()
            }),
            resolve: resolve.clone(),
            // The user's own proxy, from the environment git-sandbox runs in, carries ours.
            upstream: gs_egress::Upstream::from_env(|k| std::env::var(k).ok()),
            ..gs_egress::Policy::default()
        })
    }

    /// What the record says of it, with the proxy's traffic.
    fn used(&self, traffic: Option<gs_egress::Traffic>) -> Option<gs_model::NetworkUse> {
        let t = traffic.unwrap_or_default();
        match self {
            Egress::Closed => None,
            Egress::Host => Some(gs_model::NetworkUse {
                policy: "host".into(),
                ..Default::default()
            }),
            Egress::Proxy { allow, .. } => Some(gs_model::NetworkUse {
                policy: "proxy".into(),
                allow: allow.clone().unwrap_or_else(|| vec!["*".into()]),
                contacted: t.contacted,
                refused: t.refused,
            }),
        }
    }
}

/// What watches a run's output for its first failing test (see [`super::first_fail`]).
pub struct Watch<'a> {
    pub runner: super::first_fail::Runner,
    /// Told on the caller's thread, while the command runs, what the output showed and the
    /// moment it was read.
    pub on_found: &'a dyn Fn(super::first_fail::Found, Instant),
}

#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// What ended the run early: `timeout`, `output`, `processes`, `memory`, `cpu`,
    /// `file_size`, `interrupt` or `signal`.
    pub killed_by: Option<KilledBy>,
    /// Every sandbox layer and what happened to it.
    pub isolation: Isolation,
    pub duration: Duration,
    pub resources: Resources,
    pub output_tail: String,
    /// The whole captured output (up to the cap), for parsers.
    pub output: Vec<u8>,
    pub truncated: bool,
    pub log: Option<PathBuf>,
    /// The command could not be started at all.
    pub spawn_error: Option<String>,
    /// The limits the run actually had, read back from the kernel.
    pub limits: AppliedLimits,
    /// The files asked for in [`Spec::artifacts`], as read inside the sandbox; empty when the
    /// sandbox had no namespace to read them in (the caller reads them beneath the checkout).
    pub artifacts: Vec<Artifact>,
    /// What the run reached of the network, and was refused (`None`: it had none).
    pub network: Option<gs_model::NetworkUse>,
}

enum Event {
    Exited(i32, libc::rusage),
    OutputCapped,
    Found(super::first_fail::Found, Instant),
}

/// Start the helper of a one-off run about to be prepared, so that it starts and makes its
/// namespaces while the caller prepares the workspace (see `launch`); the run with these limits'
/// network policy and this kind of output takes it.
pub fn start_ahead(sandbox: &Sandbox, limits: &Limits, output: &Output<'_>) {
    let host = limits.network && limits.network_host;
    super::launch::start_ahead(&sandbox.helper, host, &sandbox.skip, output);
}

pub fn run(spec: Spec<'_>) -> Outcome {
    let started = Instant::now();
    // No C string holds a NUL: the helper could only run something else than asked.
    if spec.command.contains('\0') {
        return spawn_failed(
            started,
            "the command contains a NUL byte, which no shell can run: remove it".into(),
        );
    }
    let online = !matches!(spec.egress, Egress::Closed);
    let image = spec.sandbox.image.as_ref();
    let env = match image {
        // The image's variables, under the sandbox's own; none of the host's toolchain.
        Some(i) => super::env::in_image(&i.env, spec.env.clone(), spec.root),
        None => spec.env.clone(),
    };
    let mut env = super::env::with_offline(env, online);
    // The user's CA files, for a run that reaches the network: its TLS clients trust them too
    // (an image's clients trust the image's store: the bundle is a host path).
    let mut ca = Vec::new();
    match spec
        .sandbox
        .ca_bundle
        .as_ref()
        .filter(|_| online && image.is_none())
    {
        Some(Ok(bundle)) => {
            env.extend(sandbox::egress::ca_env(bundle));
            ca.push(bundle.clone());
        }
        Some(Err(e)) => return spawn_failed(started, format!("your [network] ca_files: {e}")),
        None => {}
    }
    let plan = Plan {
        command: spec.command.to_string(),
        cwd: spec.cwd.to_path_buf(),
        env,
        root: spec.root.to_path_buf(),
        limits: PlanLimits {
            memory_mb: spec.limits.memory_mb,
            cpu_seconds: spec.limits.cpu_seconds,
            cpu_millicores: spec.limits.cpu_millicores,
            processes: spec.limits.processes,
            open_files: spec.limits.open_files,
            file_size_mb: spec.limits.file_size_mb,
            disk_mb: spec.limits.disk_mb,
        },
        network: matches!(spec.egress, Egress::Host),
        proxy: matches!(spec.egress, Egress::Proxy { .. }),
        skip: spec.sandbox.skip.clone(),
        parent_pid: std::process::id() as i32,
        artifacts: spec.artifacts.to_vec(),
        lower: spec.lower.map(Path::to_path_buf),
        run_uid: spec.run_uid,
        cache_layers: spec.cache_layers.to_vec(),
        cache_out: spec.cache_out.map(Path::to_path_buf),
        cache_paths: spec.cache_paths.to_vec(),
        work_layers: spec.work_layers.to_vec(),
        trace: gs_util::trace::wanted(),
        image: image.cloned(),
        ..Plan::default()
    };
    // In an image, nothing of the host is bound back: no toolchain, no program.
    let plan = if image.is_some() {
        plan
    } else {
        plan.with_paths(spec.sandbox.hide.clone())
            .with_user_programs(&spec.sandbox.programs)
            // The bundle's directory is kept readable as a user-named program's is.
            .with_user_programs(&ca)
    };
    let launched = match super::launch::launch(&spec.sandbox.helper, &plan, &spec.output) {
        Ok(l) => l,
        Err(e) => return spawn_failed(started, e),
    };
    let (pid, spawned_ns) = (launched.pid, launched.spawned_ns);
    // The next run's helper starts now, on the core this one leaves free while it sets up.
    super::launch::prepare_spare(&spec.sandbox.helper, &plan, &spec.output);
    let super::launch::Pipes {
        report: (report_r, report_w),
        artifacts: (artifact_r, artifact_w),
        output,
        null,
        ..
    } = launched.pipes;
    // Our copies of the write ends go, so that the readers see the helper's end.
    drop((report_w, artifact_w, null));
    let reader = output.map(|(r, w, w2)| {
        drop((w, w2));
        r
    });
    let capture = match spec.output {
        Output::Capture { log, cap } => Some((log, cap)),
        _ => None,
    };
    // With a proxy, its listener comes first on the report's socket: served from then on.
    let proxy = std::sync::Arc::new(std::sync::Mutex::new(None::<gs_egress::Proxy>));
    let report = {
        let (policy, proxy) = (spec.egress.policy(), proxy.clone());
        read_in_background(move || {
            let mut first = None;
            if let Some(policy) = policy {
                match gs_egress::door::receive(&report_r) {
                    gs_egress::door::Received::Listener(listener) => {
                        let served = gs_egress::Proxy::serve(listener, policy);
                        *proxy.lock().unwrap_or_else(|p| p.into_inner()) = Some(served);
                    }
                    gs_egress::door::Received::Report(b) => first = Some(b),
                    gs_egress::door::Received::Nothing => {}
                }
            }
            (read_report(first, report_r), gs_util::trace::mono_ns())
        })
    };
    let artifacts = read_in_background(move || read_artifacts(artifact_r));
    let (tx, rx) = mpsc::channel::<Event>();

    let capped = std::sync::Arc::new(AtomicBool::new(false));
    let collector = match (reader, capture) {
        (Some(r), Some((log, cap))) => {
            let tx = tx.clone();
            let log = log.to_path_buf();
            let capped = capped.clone();
            let watcher = spec
                .watch
                .as_ref()
                .map(|w| super::first_fail::Watcher::new(w.runner));
            Some(read_in_background(move || {
                collect(r, &log, cap, &capped, tx, watcher)
            }))
        }
        _ => None,
    };
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: plain FFI call with valid pointers; rusage is plain old data.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            loop {
                let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                if r == pid
                    || (r < 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
                {
                    break;
                }
            }
            let _ = tx.send(Event::Exited(status, usage));
        });
    }
    drop(tx);

    super::sandbox::cgroup::sweep_stale();
    let cgroup = RunCgroup::for_helper(pid);
    let deadline = started + spec.timeout;
    let mut killed_by: Option<KilledBy> = None;
    let mut term_sent: Option<Instant> = None;
    let mut exit: Option<(i32, libc::rusage)> = None;
    let mut exited_ns = 0;
    while exit.is_none() {
        let now = Instant::now();
        let wait = if let Some(t) = term_sent {
            (t + GRACE).saturating_duration_since(now)
        } else {
            deadline.saturating_duration_since(now)
        }
        .min(Duration::from_millis(50));
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(status, usage)) => {
                exited_ns = gs_util::trace::mono_ns();
                exit = Some((status, usage))
            }
            Ok(Event::OutputCapped) => stop(pid, &mut killed_by, &mut term_sent, KilledBy::Output),
            Ok(Event::Found(f, at)) => found(&spec, f, at),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if exit.is_some() {
            break;
        }
        let now = Instant::now();
        if let Some(cg) = cgroup.as_ref().filter(|cg| cg.exists()) {
            if cg.pids_hit() {
                stop(pid, &mut killed_by, &mut term_sent, KilledBy::Processes);
            } else if cg.oom_killed() {
                stop(pid, &mut killed_by, &mut term_sent, KilledBy::Memory);
            }
        }
        if spec.interrupt.load(Ordering::Relaxed) {
            stop(pid, &mut killed_by, &mut term_sent, KilledBy::Interrupt);
        }
        if now >= deadline {
            stop(pid, &mut killed_by, &mut term_sent, KilledBy::Timeout);
        }
        if let Some(t) = term_sent {
            if now >= t + GRACE {
                // SAFETY: signalling our own child's process group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
    }
    // Whatever the command left behind in its group goes with it.
    // SAFETY: signalling our own child's process group.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    // So does anything that left the group but not the cgroup (when there is no PID namespace).
    let (mut oom, mut pids_hit) = (false, false);
    if let Some(cg) = cgroup.as_ref().filter(|cg| cg.exists()) {
        oom = cg.oom_killed();
        pids_hit = cg.pids_hit();
        cg.kill_all();
        cg.remove();
    }
    let duration = started.elapsed();

    let mut out = Outcome {
        duration,
        ..Outcome::default()
    };
    if let Some((status, usage)) = exit {
        if libc::WIFEXITED(status) {
            out.exit_code = Some(libc::WEXITSTATUS(status));
        } else if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            out.signal = Some(sig);
        }
        let ms = |t: libc::timeval| (t.tv_sec as u64) * 1000 + (t.tv_usec as u64) / 1000;
        out.resources = Resources {
            cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss.max(0) as u64,
        };
        if killed_by.is_none() {
            if let Some(sig) = out.signal {
                let cpu_spent = spec.limits.cpu_seconds > 0
                    && out.resources.cpu_ms >= spec.limits.cpu_seconds * 1000;
                killed_by = Some(match sig {
                    libc::SIGXCPU => KilledBy::Cpu,
                    libc::SIGXFSZ => KilledBy::FileSize,
                    libc::SIGKILL if oom => KilledBy::Memory,
                    libc::SIGKILL if cpu_spent => KilledBy::Cpu,
                    _ => KilledBy::Signal,
                });
            } else if out.exit_code != Some(0) && (oom || pids_hit) {
                // It ended by itself, but because a limit took its memory or its forks away.
                killed_by = Some(if oom {
                    KilledBy::Memory
                } else {
                    KilledBy::Processes
                });
            }
        }
    }
    out.killed_by = killed_by;
    let (
        Report {
            layers: helper_layers,
            limits,
            steps,
        },
        reported_ns,
    ) = join_bounded(report).unwrap_or_default();
    out.limits = AppliedLimits {
        timeout_ms: spec.timeout.as_millis() as u64,
        output_bytes: match spec.output {
            Output::Capture { cap, .. } => cap,
            _ => 0,
        },
        ..limits
    };
    out.artifacts = join_bounded(artifacts).unwrap_or_default();
    let traffic = proxy
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .map(gs_egress::Proxy::stop);
    out.network = spec.egress.used(traffic);
    if let Some(Collected { output, tail, log }) = collector.and_then(join_bounded) {
        out.output = output;
        out.output_tail = tail;
        out.log = log;
    }
    // What the output showed after the command exited (the pipe is read to its end).
    for e in rx.try_iter() {
        if let Event::Found(f, at) = e {
            found(&spec, f, at);
        }
    }
    out.truncated = capped.load(Ordering::Relaxed);
    if helper_layers.is_empty() && out.exit_code == Some(125) {
        out.spawn_error = Some(format!(
            "the sandbox helper failed before starting the command: {}",
            out.output_tail.lines().last().unwrap_or("no message")
        ));
    }
    out.isolation = isolation(&spec, helper_layers);
    if gs_util::trace::wanted() {
        trace_steps(spawned_ns, &steps, reported_ns, exited_ns);
    }
    out
}

/// The helper's set-up step by step, then the command, then the supervisor's clean-up.
fn trace_steps(spawned: u64, steps: &[(String, u64)], reported: u64, exited: u64) {
    use gs_util::{trace::line, trace::mono_ns};
    let ms = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1e6;
    let mut prev = spawned;
    for (what, at) in steps {
        line(&format!("helper: {what}"), ms(prev, *at));
        prev = *at;
    }
    line("command, until it exits", ms(prev.max(reported), exited));
    line("after: cgroup, output, report", ms(exited, mono_ns()));
    line("sandbox in all", ms(spawned, mono_ns()));
}

/// A thread that reads one of the helper's pipes to its end; its result comes on the channel.
fn read_in_background<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

/// A reader's result, waited for a bounded time: an escaped process may hold its pipe open.
fn join_bounded<T>(rx: mpsc::Receiver<T>) -> Option<T> {
    rx.recv_timeout(Duration::from_secs(1)).ok()
}

fn read_report(first: Option<u8>, r: std::os::unix::net::UnixStream) -> Report {
    let mut body = Vec::from_iter(first);
    let _ = r.take(1 << 20).read_to_end(&mut body);
    serde_json::from_slice(&body).unwrap_or_default()
}

/// The files the namespace's init handed back: one JSON line each, bounded in all.
fn read_artifacts(r: std::io::PipeReader) -> Vec<Artifact> {
    let cap = sandbox::ARTIFACT_CAP
        .saturating_mul(8)
        .saturating_add(sandbox::DATA_FILE_CAP * 4 / 3 + 1024);
    let mut body = Vec::new();
    let _ = r.take(cap).read_to_end(&mut body);
    body.split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Artifact>(line).ok())
        .collect()
}

/// The supervisor's own layers, then the helper's.
fn isolation(spec: &Spec<'_>, helper: Vec<Layer>) -> Isolation {
    use LayerStatus::*;
    let mut layers = vec![
        Layer::new(
            "environment",
            Enforced,
            "an allowlist of variables, no tokens; HOME and TMPDIR inside the run's directory",
        ),
        Layer::new(
            "session",
            Enforced,
            "new session and process group, stdin from /dev/null, dies with the supervisor",
        ),
        Layer::new(
            "timeout",
            Enforced,
            "wall clock, then terminate, grace, kill the whole tree",
        ),
        match spec.lower {
            Some(_) => Layer::new(
                "kept_checkout",
                Enforced,
                "the run's tree is an overlay over a checkout kept for its slot and brought up to date by the tree diff; nothing the run does reaches it",
            ),
            None => Layer::new(
                "kept_checkout",
                Off,
                "a fresh checkout for this run (no overlay here, or every slot was busy)",
            ),
        },
        match spec.output {
            Output::Capture { .. } => Layer::new(
                "output_cap",
                Enforced,
                "output_bytes captured, then the run is stopped",
            ),
            Output::Inherit => {
                Layer::new("output_cap", Off, "output goes straight to your terminal")
            }
            Output::Discard => Layer::new(
                "output_cap",
                Off,
                "this probe keeps none of its output; runs stop at [limits] output_bytes",
            ),
        },
    ];
    if helper.is_empty() {
        layers.push(Layer::new(
            "helper",
            Unavailable,
            "the sandbox helper reported nothing: no isolation layer can be vouched for",
        ));
    }
    layers.extend(helper);
    Isolation::from_layers(layers)
}

fn found(spec: &Spec<'_>, f: super::first_fail::Found, at: Instant) {
    if let Some(w) = &spec.watch {
        (w.on_found)(f, at);
    }
}

fn stop(
    pid: libc::pid_t,
    killed_by: &mut Option<KilledBy>,
    term_sent: &mut Option<Instant>,
    why: KilledBy,
) {
    if term_sent.is_none() {
        *killed_by = Some(why);
        *term_sent = Some(Instant::now());
        // SAFETY: signalling our own child's process group.
        unsafe { libc::kill(-pid, libc::SIGTERM) };
    }
}

fn spawn_failed(started: Instant, message: String) -> Outcome {
    Outcome {
        duration: started.elapsed(),
        spawn_error: Some(message),
        ..Outcome::default()
    }
}

struct Collected {
    output: Vec<u8>,
    tail: String,
    log: Option<PathBuf>,
}

fn collect(
    mut r: std::io::PipeReader,
    log: &Path,
    cap: u64,
    capped: &AtomicBool,
    tx: mpsc::Sender<Event>,
    mut watcher: Option<super::first_fail::Watcher>,
) -> Collected {
    if let Some(dir) = log.parent() {
        let _ = gs_util::private::create_dir_all(dir);
    }
    let mut file = gs_util::private::create_file(log).ok();
    let mut kept: Vec<u8> = Vec::new();
    let mut tail: VecDeque<u8> = VecDeque::with_capacity(TAIL_BYTES);
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        let read_at = Instant::now();
        let room = cap.saturating_sub(total) as usize;
        let keep = &chunk[..chunk.len().min(room)];
        if !keep.is_empty() {
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(keep);
            }
            kept.extend_from_slice(keep);
        }
        // Told once the log holds what told it.
        if let Some(w) = watcher.as_mut() {
            for (f, at) in w.feed(chunk, read_at) {
                let _ = tx.send(Event::Found(f, at));
            }
        }
        total += n as u64;
        for &b in chunk {
            if tail.len() == TAIL_BYTES {
                tail.pop_front();
            }
            tail.push_back(b);
        }
        if total > cap && !capped.swap(true, Ordering::Relaxed) {
            let _ = tx.send(Event::OutputCapped);
        }
    }
    if capped.load(Ordering::Relaxed) {
        if let Some(f) = file.as_mut() {
            let _ = writeln!(
                f,
                "\n[git-sandbox: output capped at {cap} bytes; the command was stopped]"
            );
        }
    }
    let tail: Vec<u8> = tail.into_iter().collect();
    Collected {
        output: kept,
        tail: tail_lines(&tail),
        log: file.map(|_| log.to_path_buf()),
    }
}

/// The last lines of `bytes` as text (lossy for output that is not UTF-8).
pub fn tail_lines(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let mut s = lines[start..].join("\n");
    // Drop a partial first line that the byte window cut through.
    if bytes.len() >= TAIL_BYTES && start == 0 {
        if let Some(i) = s.find('\n') {
            s = s[i + 1..].to_string();
        }
    }
    s
}
