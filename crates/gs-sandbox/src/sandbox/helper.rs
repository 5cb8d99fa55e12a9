//! The helper, `git-sandbox __sandbox-exec`: a fresh, single-threaded process (exec'd, or forked
//! by the fork server) that applies every layer to itself, reports each one on [`REPORT_FD`],
//! and ends as `/bin/sh -c CMD`.
//!
//! Order matters and is forced by the kernel: the namespaces are created first (as root without
//! a user namespace, else with one; a helper started ahead of its run makes them, then waits for
//! the rest of its plan), the cgroup is joined next (as root: there is no user namespace then,
//! and without root there is no cgroup), the directories
//! to bind back are opened inside the new mount namespace (bind mounts only take mounts of the
//! caller's own namespace) and before the uid drop (the run's uid may not search them); the drop
//! to the run's uid comes after the mounts, rlimits after the drop (so NPROC counts the run's own
//! uid), and Landlock and seccomp last.

use super::artifacts::{hand_back, hide_artifacts};
use super::fsview::{self, Keep};
use super::keep::{clone_mount, keep_caches};
use super::{
    cgroup::RunCgroup, errno_text, guard, Plan, Report, ARTIFACT_FD, PLAN_VAR, REPORT_FD, RUN_GID,
    UID_BASE,
};
use gs_model::{AppliedLimits, Layer, LayerStatus};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

/// Exit code when the helper itself cannot work (the command never ran).
pub(super) const HELPER_FAILED: i32 = 125;

static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let to = FORWARD_TO.load(Ordering::Relaxed);
    if to != 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(to, sig) };
    }
}

fn forward_signals_to(pid: i32) {
    FORWARD_TO.store(pid, Ordering::Relaxed);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installing an async-signal-safe handler.
        unsafe { libc::signal(sig, forward as *const () as libc::sighandler_t) };
    }
}

/// Die when the parent dies. `PR_SET_PDEATHSIG` follows the parent *thread*, which is why this
/// runs here, in single-threaded processes, and again after every credential change (which
/// clears it).
fn die_with_parent(expected_parent: Option<i32>) -> bool {
    // SAFETY: plain prctl/getppid.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        expected_parent.is_none_or(|p| libc::getppid() == p)
    }
}

/// The set-up's steps so far, when the plan asks for them (this process is single-threaded).
static STEPS: std::sync::Mutex<Vec<(String, u64)>> = std::sync::Mutex::new(Vec::new());

fn step(plan: &Plan, what: &str) {
    if plan.trace {
        if let Ok(mut s) = STEPS.lock() {
            s.push((what.to_string(), gs_util::trace::mono_ns()));
        }
    }
}

pub(super) fn last_err() -> String {
    errno_text(&std::io::Error::last_os_error())
}

/// The helper exec'd by the supervisor: its plan comes in the environment.
pub fn main() -> i32 {
    match std::env::var(PLAN_VAR)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
    {
        Some(plan) => run(plan),
        None => {
            eprintln!("error: {} is internal to git-sandbox and needs its plan from the supervisor; run `git sandbox exec` instead", super::HELPER_SUBCOMMAND);
            HELPER_FAILED
        }
    }
}

/// The helper with its plan, exec'd or forked by the fork server: stdin is /dev/null, stdout
/// and stderr the command's, [`REPORT_FD`] and [`ARTIFACT_FD`] the supervisor's pipes.
pub fn run(plan: Plan) -> i32 {
    // Nothing else: whatever the supervisor (or the server, or whoever started either) held
    // without close-on-exec would otherwise stay open in this process, in init, and through
    // `/proc/1/fd` or inheritance reach the command.
    gs_util::fds::close_from(ARTIFACT_FD + 1);
    // SAFETY: fcntl on the descriptors the supervisor gave us; exec must not leak them.
    unsafe {
        libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(ARTIFACT_FD, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    if !die_with_parent(Some(plan.parent_pid)) {
        return HELPER_FAILED;
    }
    step(&plan, "started, plan read");
    let mut layers = Vec::new();
    // SAFETY: plain getters.
    let (euid, pid) = unsafe { (libc::geteuid(), libc::getpid()) };
    let root = euid == 0;

    // The namespaces first: they depend on nothing of the run but whether it has the network,
    // so a helper started ahead of its run (`rest_on_stdin`) makes them before it waits. The
    // cgroup follows (as root, still root: there is no user namespace then).
    let ns = unshare(&plan, root);
    step(&plan, "namespaces");
    let ahead = plan.rest_on_stdin;
    let plan = if ahead {
        match rest_of(&plan) {
            Ok(full) => full,
            Err(None) => {
                // Not wanted after all (the supervisor closed the pipe): nothing was done
                // beyond this process, and nothing is said.
                return HELPER_FAILED;
            }
            Err(Some(why)) => {
                eprintln!("git-sandbox: {why}");
                return HELPER_FAILED;
            }
        }
    } else {
        plan
    };
    if ahead {
        step(&plan, "rest of the plan read");
    }
    let (cgroup, (cgroup_memory_mb, cgroup_pids_max, cpu)) = join_cgroup(&plan, root, pid);
    layers.push(cgroup);
    step(&plan, "cgroup made and joined");
    let mut limits = AppliedLimits {
        cgroup_memory_mb,
        cgroup_pids_max,
        cpu_cores: cpu.map(gs_model::Millicores),
        ..AppliedLimits::default()
    };
    let run_uid = if root {
        match plan.run_uid {
            // A slot's uid, which already owns the kept checkout: only the mount point is new.
            Some(u) => {
                chown_tree(&plan.root, u);
                u
            }
            None => {
                let u = UID_BASE + pid as u32;
                chown_tree(&plan.root, u);
                u
            }
        }
    } else {
        euid
    };

    step(&plan, "run dir given to its uid");
    let ns_ok = ns.is_ok();
    layers.extend(namespace_layers(&plan, root, &ns));
    if !ns_ok {
        // Without namespaces there is no PID 1 to fork: confine this process and become the
        // command. Its files are read back by the supervisor, beneath the checkout.
        layers.push(Layer::new(
            "disk_limit",
            LayerStatus::Unavailable,
            "needs a mount namespace: the run writes to its directory's file system unbounded",
        ));
        if plan.proxy {
            gs_egress::door::send_none(REPORT_FD);
        }
        layers.push(drop_privileges(root, run_uid));
        die_with_parent(None);
        layers.push(guard::rlimits(
            &plan.limits,
            limits.cgroup_memory_mb.is_some(),
        ));
        guard::read_rlimits(&mut limits);
        confine(&plan, &mut layers, &[], false);
        // The checkout is this run's own (a fresh one): nothing can fail to be hidden but a
        // file the run could not remove itself, which it cannot have rewritten either.
        let _ = hide_artifacts(&plan);
        write_report(&layers, &limits);
        super::command::exec(&plan);
    }
    // The run's directory: the kept checkout when there is one (to lay the overlay over, at the
    // run's own mount point), else the fresh checkout itself.
    // A workspace's layers, every one (a run without one of them would not see its edits).
    let mut above = Vec::new();
    for l in &plan.work_layers {
        match fsview::open_keep(l, false) {
            Some(k) => above.push(k.fd),
            None => {
                eprintln!("git-sandbox: cannot open the layer {}", l.display());
                return HELPER_FAILED;
            }
        }
    }
    let mut keeps: Vec<Keep> = match &plan.lower {
        Some(lower) => fsview::open_keep(lower, true).map(|mut k| {
            k.path = plan.root.clone();
            k.kept = true;
            k.layers = plan
                .cache_layers
                .iter()
                .filter_map(|l| fsview::open_keep(l, false).map(|c| c.fd))
                .collect();
            k.above = std::mem::take(&mut above);
            k
        }),
        None => fsview::open_keep(&plan.root, true),
    }
    .into_iter()
    .collect();
    keeps.extend(
        plan.toolchains
            .iter()
            .filter_map(|t| fsview::open_keep(t, false)),
    );
    // An image's layers, every one (a run that asked for an image never runs without it).
    let mut image_layers = Vec::new();
    for l in plan.image.iter().flat_map(|i| &i.layers) {
        match fsview::open_keep(l, false) {
            Some(k) => image_layers.push(k.fd),
            None => {
                eprintln!("git-sandbox: cannot open the image's layer {}", l.display());
                return HELPER_FAILED;
            }
        }
    }
    // The branch cache this run's writes go to: a detached clone of its mount, taken before
    // init makes every mount of this namespace read-only, so the merge can write it afterwards.
    let cache_out = plan
        .cache_out
        .as_ref()
        .filter(|_| plan.lower.is_some())
        .and_then(|p| clone_mount(p));
    step(&plan, "layers opened");
    let mut status_pipe = [0; 2];
    // SAFETY: a pipe for the command's raw wait status, from the namespace's init to us.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        eprintln!("git-sandbox: cannot create a pipe: {}", last_err());
        return HELPER_FAILED;
    }
    // SAFETY: we are single-threaded; the child only calls into code that is fine after fork.
    let init = unsafe { libc::fork() };
    if init < 0 {
        eprintln!("git-sandbox: cannot fork: {}", last_err());
        return HELPER_FAILED;
    }
    if init == 0 {
        // SAFETY: closing our copy of the read end.
        unsafe { libc::close(status_pipe[0]) };
        let view = Views {
            keeps,
            image_layers,
        };
        run_init(&plan, layers, limits, view, root, run_uid, status_pipe[1]);
    }
    drop((keeps, image_layers));
    // SAFETY: closing descriptors we own (init holds the report and artifact ones).
    unsafe {
        libc::close(REPORT_FD);
        libc::close(ARTIFACT_FD);
        libc::close(status_pipe[1]);
    }
    forward_signals_to(init);
    let mut status = wait_for(init);
    if let Some(out) = &cache_out {
        keep_caches(&plan, out, run_uid);
    }
    let mut buf = [0u8; 4];
    // SAFETY: reading into a local buffer.
    if unsafe { libc::read(status_pipe[0], buf.as_mut_ptr().cast(), 4) } == 4 {
        status = i32::from_ne_bytes(buf);
    }
    relay(status)
}

fn wait_for(pid: i32) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return status;
        }
    }
}

/// End this process the way the command ended, so the supervisor's wait4 sees it.
fn relay(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and raising the same signal on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        return 128 + sig;
    }
    HELPER_FAILED
}

/// Join the run's cgroup; the layer, and the limits the kernel then holds for it.
type Held = (Option<u64>, Option<u64>, Option<u64>);

fn join_cgroup(plan: &Plan, root: bool, pid: i32) -> (Layer, Held) {
    if let Some(reason) = plan.skip.get("cgroup") {
        return (
            Layer::new("cgroup", LayerStatus::Unavailable, reason.clone()),
            (None, None, None),
        );
    }
    let cg = RunCgroup::for_helper(pid);
    // A v2 subtree may be delegated to a user; v1 controllers are root's.
    if !root && !cg.as_ref().is_some_and(|c| c.v2) {
        return (
            Layer::new(
                "cgroup",
                LayerStatus::Unavailable,
                "needs root: cgroup v1 controllers are not delegated to users here",
            ),
            (None, None, None),
        );
    }
    match cg {
        Some(cg) => match cg.create_and_join(
            plan.limits.memory_mb,
            plan.limits.processes.saturating_add(1), // and the helper itself
            plan.limits.cpu_millicores,
        ) {
            Ok(d) => (
                Layer::new("cgroup", LayerStatus::Enforced, d),
                cg.read_limits(),
            ),
            Err(e) => (
                Layer::new("cgroup", LayerStatus::Unavailable, e),
                (None, None, None),
            ),
        },
        None => (
            Layer::new(
                "cgroup",
                LayerStatus::Unavailable,
                "no memory and pids controllers in /proc/self/cgroup (v1), and /sys/fs/cgroup is no cgroup v2 hierarchy",
            ),
            (None, None, None),
        ),
    }
}

/// The whole plan of a helper started ahead of its run, read from stdin to its end (then stdin
/// is /dev/null, as for any helper). What the namespaces were made for must not have changed.
/// `Err(None)`: the supervisor sent nothing (the run was called off).
fn rest_of(early: &Plan) -> Result<Plan, Option<String>> {
    use std::io::Read;
    let mut body = Vec::new();
    // SAFETY: fd 0 is ours; the File is forgotten below so that it is not closed twice.
    let mut stdin = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(0) };
    let read = (&mut stdin).take(8 << 20).read_to_end(&mut body);
    std::mem::forget(stdin);
    // SAFETY: /dev/null in place of the pipe.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null > 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
    }
    if read.is_err() || body.is_empty() {
        return Err(None);
    }
    let full: Plan = serde_json::from_slice(&body)
        .map_err(|e| Some(format!("the rest of the plan is unreadable: {e}")))?;
    if full.rest_on_stdin
        || full.network != early.network
        || full.skip != early.skip
        || full.parent_pid != early.parent_pid
    {
        return Err(Some(
            "the rest of the plan does not match the namespaces made for it".into(),
        ));
    }
    Ok(full)
}

/// Give the run's directory to the run's uid (as root), without following symlinks.
fn chown_tree(dir: &Path, uid: u32) {
    let c = CString::new(dir.as_os_str().as_bytes()).unwrap_or_default();
    // SAFETY: valid C string.
    unsafe { libc::lchown(c.as_ptr(), uid, uid) };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => chown_tree(&path, uid),
            Ok(_) => {
                let c = CString::new(path.as_os_str().as_bytes()).unwrap_or_default();
                // SAFETY: valid C string.
                unsafe { libc::lchown(c.as_ptr(), uid, uid) };
            }
            Err(_) => {}
        }
    }
}

fn unshare(plan: &Plan, root: bool) -> Result<(), String> {
    if let Some(reason) = plan.skip.get("mount_namespace") {
        return Err(reason.clone());
    }
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if !plan.network {
        flags |= libc::CLONE_NEWNET;
    }
    if !root {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: plain syscalls; this process is single-threaded, as unshare(CLONE_NEWUSER) needs.
    unsafe {
        let (uid, gid) = (libc::geteuid(), libc::getegid());
        if libc::unshare(flags) < 0 {
            return Err(format!("unshare: {}", last_err()));
        }
        if !root {
            let w = |file: &str, text: String| {
                std::fs::write(file, text).map_err(|e| format!("{file}: {}", errno_text(&e)))
            };
            w("/proc/self/setgroups", "deny".into())?;
            w("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
            w("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        }
    }
    Ok(())
}

fn namespace_layers(plan: &Plan, root: bool, ns: &Result<(), String>) -> Vec<Layer> {
    let mut out = Vec::new();
    if root && ns.is_ok() {
        out.push(Layer::new(
            "user_namespace",
            LayerStatus::Off,
            "not needed as root: the namespaces are made with root's own privileges, then the run drops to an unprivileged uid with no capabilities",
        ));
    }
    let mut add = |name: &str, on: &str| {
        out.push(match ns {
            Ok(()) => Layer::new(name, LayerStatus::Enforced, on),
            Err(e) => Layer::new(name, LayerStatus::Unavailable, e.clone()),
        })
    };
    if !(root && ns.is_ok()) {
        add(
            "user_namespace",
            "your uid mapped to itself: no capabilities once the command starts",
        );
    }
    add("mount_namespace", "private mount table");
    add(
        "pid_namespace",
        "the command's tree lives in its own PID namespace: when the run ends, all of it is killed",
    );
    add("ipc_namespace", "private System V IPC and POSIX queues");
    add("uts_namespace", "private hostname");
    if plan.network {
        out.push(Layer::new(
            "network",
            LayerStatus::Off,
            "network = \"host\" in your user config: the host network is shared",
        ));
    } else if plan.proxy {
        add(
            "network",
            "own network namespace: loopback only; its one way out is git-sandbox's proxy, to the hosts your policy allows",
        );
    } else {
        add(
            "network",
            "own network namespace: loopback only, no route out",
        );
    }
    if let Err(e) = ns {
        for name in ["read_only_root", "private_tmp", "secrets_hidden"] {
            out.push(Layer::new(
                name,
                LayerStatus::Unavailable,
                format!("needs a mount namespace ({e})"),
            ));
        }
    }
    out
}

fn drop_privileges(root: bool, uid: u32) -> Layer {
    if !root {
        return Layer::new(
            "unprivileged_uid",
            LayerStatus::Enforced,
            "runs as your own uid",
        );
    }
    // SAFETY: plain credential syscalls; errors are checked.
    let ok = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(RUN_GID, RUN_GID, RUN_GID) == 0
            && libc::setresuid(uid, uid, uid) == 0
            && libc::getuid() == uid
    };
    if ok {
        Layer::new(
            "unprivileged_uid",
            LayerStatus::Enforced,
            "root dropped to a uid of the run's own (1,000,000 + the helper's pid): no capabilities, RLIMIT_NPROC applies",
        )
    } else {
        Layer::new("unprivileged_uid", LayerStatus::Unavailable, last_err())
    }
}

/// PID 1 of the new namespaces: finish the view, confine, start the command, reap, hand back
/// the files the supervisor asked for, relay the status.
fn run_init(
    plan: &Plan,
    mut layers: Vec<Layer>,
    mut limits: AppliedLimits,
    opened: Views,
    root: bool,
    uid: u32,
    status_fd: i32,
) -> ! {
    die_with_parent(None);
    step(plan, "init forked");
    let Views {
        keeps,
        image_layers,
    } = opened;
    let view = match &plan.image {
        Some(image) => {
            match super::imageview::setup(image, &image_layers, &keeps, plan.limits.disk_mb, uid) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("git-sandbox: cannot make the image the run's root: {e}");
                    // SAFETY: leaving the forked init without unwinding.
                    unsafe { libc::_exit(HELPER_FAILED) }
                }
            }
        }
        None => fsview::setup(&keeps, &plan.hide, plan.limits.disk_mb, uid),
    };
    drop((keeps, image_layers));
    step(plan, "mounts (view, overlay)");
    let relocated = view
        .root
        .as_deref()
        .map(|r| relocate(plan, r, view.tree_at.as_deref()));
    let plan = relocated.as_ref().unwrap_or(plan);
    layers.extend(view.layers);
    limits.disk_mb = view.disk_mb;
    if let Err(e) = fsview::fresh_proc() {
        if let Some(l) = layers.iter_mut().find(|l| l.layer == "pid_namespace") {
            l.detail
                .push_str(&format!("; /proc is the host's, read-only ({e})"));
        }
    }
    if !plan.network {
        if let Err(e) = gs_egress::door::loopback_up() {
            if let Some(l) = layers.iter_mut().find(|l| l.layer == "network") {
                l.detail.push_str(&format!("; loopback is down ({e})"));
            }
        }
    }
    // The proxy's listener, on the loopback just brought up; the command is told where it is.
    let with_proxy = plan.proxy.then(|| {
        let (note, p) = match gs_egress::door::listen_and_send(REPORT_FD) {
            Ok(port) => {
                let mut p = plan.clone();
                p.env.extend(gs_egress::door::proxy_env(port));
                (format!("; the proxy listens on 127.0.0.1:{port}"), Some(p))
            }
            Err(e) => (format!("; no way out: {e}"), None),
        };
        if let Some(l) = layers.iter_mut().find(|l| l.layer == "network") {
            l.detail.push_str(&note);
        }
        p
    });
    let plan = with_proxy.as_ref().and_then(Option::as_ref).unwrap_or(plan);
    fsview::set_hostname("git-sandbox");
    step(plan, "proc, loopback, hostname");
    layers.push(drop_privileges(root, uid));
    die_with_parent(None);
    layers.push(guard::rlimits(
        &plan.limits,
        limits.cgroup_memory_mb.is_some(),
    ));
    guard::read_rlimits(&mut limits);
    step(plan, "uid dropped, rlimits");
    let mut writable = view.private_tmp.clone();
    writable.extend(view.tree_at.clone());
    confine(plan, &mut layers, &writable, !plan.network);
    step(plan, "landlock, seccomp");
    let unhidden = hide_artifacts(plan);
    write_report(&layers, &limits);
    let cmd = super::command::spawn(plan);
    // SAFETY: closing our copy of the report descriptor (the command's copy closes on exec).
    unsafe { libc::close(REPORT_FD) };
    let ended = |status: i32| -> ! {
        hand_back(plan, &unhidden);
        let bytes = status.to_ne_bytes();
        // SAFETY: writing a local buffer; leaving kills the rest of the namespace.
        unsafe {
            libc::write(status_fd, bytes.as_ptr().cast(), 4);
            libc::_exit(0);
        }
    };
    let cmd = match cmd {
        Ok(pid) => pid,
        // It never started (the message is in its output): it ends as a shell would have.
        Err(code) => ended(code << 8),
    };
    // As PID 1, forward termination to everyone in the namespace, not only our child.
    forward_signals_to(-1);
    loop {
        let mut status = 0;
        // SAFETY: reaping our own (and orphaned) children.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == cmd {
            ended(status);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            // SAFETY: as above.
            unsafe { libc::_exit(HELPER_FAILED) };
        }
    }
}

/// What init builds the run's view from: the directories opened before anything was mounted.
struct Views {
    keeps: Vec<Keep>,
    image_layers: Vec<std::os::fd::OwnedFd>,
}

/// The plan as the run sees it when its directory is at `view` instead of its host path: its
/// working directory, and the variables that point into it (HOME, TMPDIR); with `tree_at` (an
/// image's working directory), the tree is seen there.
fn relocate(plan: &Plan, view: &Path, tree_at: Option<&Path>) -> Plan {
    let moved = |p: &Path| match p.strip_prefix(&plan.root) {
        Ok(rest) => view.join(rest),
        Err(_) => p.to_path_buf(),
    };
    let mut out = plan.clone();
    out.cwd = moved(&plan.cwd);
    if let Some(at) = tree_at {
        if let Ok(rest) = plan.cwd.strip_prefix(plan.root.join("tree")) {
            out.cwd = at.join(rest);
        }
    }
    out.root = view.to_path_buf();
    for (_, v) in &mut out.env {
        if Path::new(v.as_str()).starts_with(&plan.root) {
            *v = moved(Path::new(v.as_str())).to_string_lossy().into_owned();
        }
    }
    out
}

/// Landlock and seccomp, the last layers before the command.
fn confine(plan: &Plan, layers: &mut Vec<Layer>, private_tmp: &[PathBuf], netns: bool) {
    if let Some(reason) = plan.skip.get("landlock") {
        layers.push(Layer::new(
            "landlock",
            LayerStatus::Unavailable,
            reason.clone(),
        ));
    } else {
        let mut writable = vec![plan.root.as_path()];
        writable.extend(private_tmp.iter().map(PathBuf::as_path));
        layers.push(guard::landlock(&guard::FsRules {
            writable,
            deny_tcp: !plan.network && !netns,
        }));
    }
    if let Some(reason) = plan.skip.get("seccomp") {
        layers.push(Layer::new(
            "seccomp",
            LayerStatus::Unavailable,
            reason.clone(),
        ));
    } else {
        layers.push(guard::seccomp());
    }
}

fn write_report(layers: &[Layer], limits: &AppliedLimits) {
    let body = serde_json::to_vec(&Report {
        layers: layers.to_vec(),
        limits: limits.clone(),
        steps: STEPS.lock().map(|s| s.clone()).unwrap_or_default(),
    })
    .unwrap_or_default();
    write_all(REPORT_FD, &body);
}

pub(super) fn write_all(fd: i32, body: &[u8]) {
    let mut off = 0;
    while off < body.len() {
        // SAFETY: writing from a live buffer.
        let n = unsafe { libc::write(fd, body[off..].as_ptr().cast(), body.len() - off) };
        if n <= 0 {
            break;
        }
        off += n as usize;
    }
}
