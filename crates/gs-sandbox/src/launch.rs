//! Starting a run's sandbox helper, the fastest way this process can: a *spare* started ahead
//! of the run, else one forked by the fork server, else one exec'd here.
//!
//! A spare is a helper forked after the previous run (on a thread of its own, while the caller
//! records that run and prepares the next workspace) with a plan that holds only what its
//! namespaces depend on — whether the run has the network and which layers the machine lacks.
//! It makes its namespaces, then waits for the whole plan on its stdin (a socket only this
//! process holds); the cgroup, the mounts, the uid and everything else come after. A spare is
//! used once, by a run whose output is captured and whose namespaces it was made for, and only
//! while it is young (a namespace made long ago would show the run an old mount table); any
//! other is called off (its socket closed: it exits without a word, having made nothing outside
//! itself) and reaped. Only processes that serve many runs (where the fork server was warmed)
//! keep spares.

use super::sandbox::{self, forkserver, Plan};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where a run's output goes.
#[derive(Clone, Copy)]
pub enum Output<'a> {
    /// Capture stdout and stderr together into `log`, at most `cap` bytes.
    Capture { log: &'a Path, cap: u64 },
    /// Pass the caller's stdout and stderr through (for `exec`).
    Inherit,
    /// Throw it away (the machine probe).
    Discard,
}

/// How long a spare may wait for its run.
const SPARE_AGE: Duration = Duration::from_secs(2);

/// The descriptors between this process and a run's helper.
pub struct Pipes {
    /// The helper's stdin: /dev/null, or for a spare the socket its plan comes on.
    stdin: OwnedFd,
    /// A spare's end of that socket.
    plan_w: Option<std::os::unix::net::UnixStream>,
    /// The report's socket (the proxy's listener may come on it first: see `gs_egress::door`).
    pub report: (
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    ),
    pub artifacts: (std::io::PipeReader, std::io::PipeWriter),
    /// The captured output: one pipe, its write end twice (stdout and stderr).
    pub output: Option<(
        std::io::PipeReader,
        std::io::PipeWriter,
        std::io::PipeWriter,
    )>,
    /// /dev/null, for output thrown away.
    pub null: Option<std::fs::File>,
}

impl Pipes {
    fn new(output: &Output<'_>, spare: bool) -> std::io::Result<Pipes> {
        let (stdin, plan_w) = if spare {
            let (w, r) = std::os::unix::net::UnixStream::pair()?;
            (OwnedFd::from(r), Some(w))
        } else {
            (OwnedFd::from(std::fs::File::open("/dev/null")?), None)
        };
        let mut pipes = Pipes {
            stdin,
            plan_w,
            report: std::os::unix::net::UnixStream::pair()?,
            artifacts: std::io::pipe()?,
            output: None,
            null: None,
        };
        match output {
            Output::Capture { .. } => {
                let (r, w) = std::io::pipe()?;
                let w2 = w.try_clone()?;
                pipes.output = Some((r, w, w2));
            }
            Output::Inherit => {}
            Output::Discard => pipes.null = Some(std::fs::File::open("/dev/null")?),
        }
        Ok(pipes)
    }

    /// The helper's stdin, stdout, stderr, report and artifact descriptors (this process's own
    /// stdout and stderr when the output is passed through).
    fn fds(&self) -> [i32; 5] {
        let (out, err) = match (&self.output, &self.null) {
            (Some((_, w, w2)), _) => (w.as_raw_fd(), w2.as_raw_fd()),
            (None, Some(n)) => (n.as_raw_fd(), n.as_raw_fd()),
            (None, None) => (1, 2),
        };
        [
            self.stdin.as_raw_fd(),
            out,
            err,
            self.report.1.as_raw_fd(),
            self.artifacts.1.as_raw_fd(),
        ]
    }
}

/// A started helper: its pid (a child of this process, reaped by `wait4`), when it was started
/// (for the trace) and the pipes to read.
pub struct Launched {
    pub pid: libc::pid_t,
    pub spawned_ns: u64,
    pub pipes: Pipes,
}

/// What a spare was made for: its namespaces (the network, the layers the machine lacks) and
/// its output (captured, or this process's own stdout and stderr).
#[derive(Clone, PartialEq)]
struct Key {
    helper: PathBuf,
    network: bool,
    skip: BTreeMap<String, String>,
    inherit: bool,
}

impl Key {
    fn new(
        helper: &Path,
        network: bool,
        skip: &BTreeMap<String, String>,
        output: &Output<'_>,
    ) -> Option<Key> {
        let inherit = match output {
            Output::Capture { .. } => false,
            Output::Inherit => true,
            Output::Discard => return None,
        };
        Some(Key {
            helper: helper.to_path_buf(),
            network,
            skip: skip.clone(),
            inherit,
        })
    }
}

struct Spare {
    key: Key,
    made: Instant,
    launched: Launched,
    /// The thread that exec'd it, which alone may use it: its parent-death signal follows that
    /// thread, which is busy as long as its own run lasts (another thread's run might outlast
    /// it). `None` for one forked by the fork server (its parent thread stays).
    owner: Option<std::thread::ThreadId>,
}

/// This process's spare, and whether one is being made.
static SPARE: Mutex<(Option<Spare>, bool)> = Mutex::new((None, false));

/// Start the helper for `plan` (a whole plan) with `output`.
pub fn launch(helper: &Path, plan: &Plan, output: &Output<'_>) -> Result<Launched, String> {
    let json = serde_json::to_string(plan).expect("plans always serialize");
    if let Some(key) = Key::new(helper, plan.network, &plan.skip, output) {
        if let Some(mut spare) = take_spare(&key) {
            // Closed once sent: the helper reads the plan to its end.
            let sent = spare
                .launched
                .pipes
                .plan_w
                .take()
                .is_some_and(|w| send_all(&w, json.as_bytes()));
            if sent {
                return Ok(spare.launched);
            }
            call_off(spare.launched);
        }
    }
    let pipe_failed = |e: std::io::Error| format!("cannot create a pipe: {e}");
    let mut pipes = Pipes::new(output, false).map_err(pipe_failed)?;
    let spawned_ns = gs_util::trace::mono_ns();
    let forked = match forkserver::spawn(helper, json.as_bytes(), pipes.fds()) {
        forkserver::Spawned::Forked(pid) => Some(pid),
        forkserver::Spawned::NotUsed => None,
        // The lost request may still hold the pipes' write ends: the exec'd helper gets new
        // ones, so that the run's readers see their end when it ends.
        forkserver::Spawned::Lost => {
            pipes = Pipes::new(output, false).map_err(pipe_failed)?;
            None
        }
    };
    let pid = match forked {
        Some(pid) => pid,
        None => exec_helper(helper, &json, &pipes)
            .map_err(|e| format!("cannot start the sandbox helper {}: {e}", helper.display()))?,
    };
    Ok(Launched {
        pid,
        spawned_ns,
        pipes,
    })
}

/// As a run starts: make the next run's spare, when this process serves many runs (its fork
/// server was warmed).
pub fn prepare_spare(helper: &Path, plan: &Plan, output: &Output<'_>) {
    if forkserver::serves(helper) {
        start_ahead(helper, plan.network, &plan.skip, output);
    }
}

/// Start the helper of a run about to be prepared, so that it makes its namespaces while the
/// caller prepares the workspace; the run with that network policy and output takes it. Nothing
/// happens when one is there or being made. With a fork server, the request goes from a thread
/// of its own; without one the helper is exec'd from the calling thread, which must outlive the
/// run (a helper's parent-death signal follows the thread that started it).
pub fn start_ahead(
    helper: &Path,
    network: bool,
    skip: &BTreeMap<String, String>,
    output: &Output<'_>,
) {
    let Some(key) = Key::new(helper, network, skip, output) else {
        return;
    };
    {
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare.1
            || spare
                .0
                .as_ref()
                .is_some_and(|s| s.made.elapsed() < SPARE_AGE)
        {
            return;
        }
        spare.1 = true;
    }
    let early = Plan {
        network,
        skip: skip.clone(),
        parent_pid: std::process::id() as i32,
        trace: gs_util::trace::wanted(),
        rest_on_stdin: true,
        ..Plan::default()
    };
    let keep = move |key: Key, launched: Option<Launched>, owner| {
        let old = {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            spare.1 = false;
            let old = spare.0.take();
            spare.0 = launched.map(|launched| Spare {
                key,
                made: Instant::now(),
                launched,
                owner,
            });
            old
        };
        if let Some(old) = old {
            call_off(old.launched);
        }
    };
    if !forkserver::serves(helper) {
        let launched = make_spare(&key, &early, true);
        return keep(key, launched, Some(std::thread::current().id()));
    }
    let made = std::thread::Builder::new()
        .name("sandbox-spare".into())
        .spawn(move || {
            // Forked by the server (as a child of the thread that started it), never exec'd
            // from this short-lived thread.
            let launched = make_spare(&key, &early, false);
            keep(key, launched, None)
        });
    if made.is_err() {
        SPARE.lock().unwrap_or_else(|e| e.into_inner()).1 = false;
    }
}

/// A spare: forked by the fork server when this process has one, else exec'd (when `exec`).
fn make_spare(key: &Key, early: &Plan, exec: bool) -> Option<Launched> {
    let output = if key.inherit {
        Output::Inherit
    } else {
        Output::Capture {
            log: Path::new(""),
            cap: 0,
        }
    };
    let pipes = Pipes::new(&output, true).ok()?;
    let json = serde_json::to_string(early).expect("plans always serialize");
    let spawned_ns = gs_util::trace::mono_ns();
    let pid = match forkserver::spawn(&key.helper, json.as_bytes(), pipes.fds()) {
        forkserver::Spawned::Forked(pid) => pid,
        forkserver::Spawned::NotUsed if exec => exec_helper(&key.helper, &json, &pipes).ok()?,
        forkserver::Spawned::NotUsed => return None,
        forkserver::Spawned::Lost => return None,
    };
    Some(Launched {
        pid,
        spawned_ns,
        pipes,
    })
}

/// The spare for `key`, if one is there, young enough and this thread's to use; any other is
/// called off. Waits a little for one being made.
fn take_spare(key: &Key) -> Option<Spare> {
    let deadline = Instant::now() + Duration::from_millis(20);
    loop {
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if !spare.1 || Instant::now() >= deadline {
            let taken = spare.0.take()?;
            drop(spare);
            if taken.key == *key
                && taken.made.elapsed() < SPARE_AGE
                && taken.owner.is_none_or(|t| t == std::thread::current().id())
            {
                return Some(taken);
            }
            call_off(taken.launched);
            return None;
        }
        drop(spare);
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Send all of `body` on `sock` (never raising SIGPIPE: the spare may be gone).
fn send_all(sock: &std::os::unix::net::UnixStream, mut body: &[u8]) -> bool {
    while !body.is_empty() {
        // SAFETY: sending from a live buffer on our own socket.
        let n = unsafe {
            libc::send(
                sock.as_raw_fd(),
                body.as_ptr().cast(),
                body.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        body = &body[n as usize..];
    }
    true
}

/// Close a spare's socket (it exits without doing anything more) and reap it.
fn call_off(launched: Launched) {
    let pid = launched.pid;
    drop(launched.pipes);
    let _ = std::thread::Builder::new()
        .name("sandbox-spare-off".into())
        .spawn(move || {
            let mut status = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        });
}

/// Exec the helper with the plan in its environment, in its own session, with `pipes` at the
/// descriptors it expects. By `posix_spawn` (a vfork and exec), so that this process — large
/// and multi-threaded — is not copied for it. Its pid: it is reaped by `wait4`.
fn exec_helper(helper: &Path, plan: &str, pipes: &Pipes) -> std::io::Result<libc::pid_t> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |b: &[u8]| {
        CString::new(b).map_err(|_| std::io::Error::other("a NUL byte in the helper's plan"))
    };
    let path = c(helper.as_os_str().as_bytes())?;
    let argv = [path.clone(), c(sandbox::HELPER_SUBCOMMAND.as_bytes())?];
    let envp = [c(format!("{}={plan}", sandbox::PLAN_VAR).as_bytes())?];
    let mut argv_p: Vec<*mut libc::c_char> = argv.iter().map(|s| s.as_ptr().cast_mut()).collect();
    argv_p.push(std::ptr::null_mut());
    let mut envp_p: Vec<*mut libc::c_char> = envp.iter().map(|s| s.as_ptr().cast_mut()).collect();
    envp_p.push(std::ptr::null_mut());
    // Each descriptor first above the ones it goes to, so that no `dup2` in the child lands on
    // one still to be moved; these copies close at exec.
    let mut high = Vec::with_capacity(5);
    for fd in pipes.fds() {
        // SAFETY: duplicating a descriptor `pipes` holds open; the copy is owned here.
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        if h < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor of our own.
        high.push(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(h) });
    }
    let targets = [0, 1, 2, sandbox::REPORT_FD, sandbox::ARTIFACT_FD];
    let mut pid = 0;
    // SAFETY: the actions and attributes are initialized before use and destroyed after; the
    // strings and arrays are null-terminated and outlive the call.
    let r = unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut actions);
        for (from, to) in high.iter().zip(targets) {
            libc::posix_spawn_file_actions_adddup2(&mut actions, from.as_raw_fd(), to);
        }
        libc::posix_spawn_file_actions_addchdir_np(&mut actions, c"/".as_ptr());
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        libc::posix_spawnattr_setsigmask(&mut attr, &none);
        libc::posix_spawnattr_setsigdefault(&mut attr, &pipe);
        libc::posix_spawnattr_setflags(
            &mut attr,
            libc::POSIX_SPAWN_SETSID
                | (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
        );
        let r = libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            &actions,
            &attr,
            argv_p.as_ptr(),
            envp_p.as_ptr(),
        );
        libc::posix_spawnattr_destroy(&mut attr);
        libc::posix_spawn_file_actions_destroy(&mut actions);
        r
    };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(pid)
}
