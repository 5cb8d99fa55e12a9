//! The fork server, `git-sandbox __sandbox-forkserver`: a helper started once per supervisor
//! process and kept, from which each run's helper is forked instead of exec'd afresh. Exec'ing
//! this binary and linking it costs 2-5 ms per run; forking a small, single-threaded process that
//! has already done so costs 0.2 ms.
//!
//! The server is this same binary, started with an empty environment and nothing but a socket
//! (a `SOCK_SEQPACKET` pair whose other end only the supervisor holds). A request is one message:
//! the plan (JSON) with six descriptors (the helper's stdin, the command's stdout and stderr, the
//! report and the artifact pipes, and a pipe the helper waits on for the supervisor's go). The server forks with
//! `CLONE_PARENT`, so the helper is the *supervisor's* child — waited for, its usage read and its
//! group killed exactly as an exec'd helper's — and answers with its pid. The forked helper sets its descriptors up as an exec'd one finds them
//! and runs the same code ([`super::helper::run`]); what it inherits from the server is the
//! state of a process that has done nothing but start and wait on its socket.
//!
//! The server dies with the supervisor (its socket closes; `PR_SET_PDEATHSIG` too). It is started
//! by a thread kept for the purpose, which never ends, because the helpers' parent-death signal
//! follows the thread that started their parent. Whenever the server cannot be used (it failed
//! to start, died, or a plan is too large for one message) the supervisor execs the helper as
//! before.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The hidden subcommand that runs the server.
pub const SUBCOMMAND: &str = "__sandbox-forkserver";
/// The environment variable naming the supervisor's pid (the server checks it is its parent).
const PARENT_VAR: &str = "GIT_SANDBOX_PARENT";
/// Where the server finds its socket when it starts.
const SOCKET_FD: RawFd = 3;
/// Descriptors of the server, and those received, are moved at or above this one while they are
/// put in place, so none is overwritten by another's `dup2`.
const HIGH_FD: RawFd = 64;
/// The largest plan sent in one message (an exec'd helper's plan, an environment variable, may
/// hold up to 128 KiB).
const MAX_PLAN: usize = 120 << 10;
/// How long the supervisor waits for the server to start or to answer.
const WAIT: Duration = Duration::from_secs(5);

enum State {
    Starting,
    Ready(Server),
    /// It could not start: this process's runs exec their helper.
    Failed,
}

struct Server {
    sock: OwnedFd,
    /// The process that started it (a forked copy of the supervisor must not use it).
    owner: u32,
}

type Servers = (Mutex<HashMap<PathBuf, State>>, Condvar);

fn servers() -> &'static Servers {
    static S: std::sync::OnceLock<Servers> = std::sync::OnceLock::new();
    S.get_or_init(|| (Mutex::new(HashMap::new()), Condvar::new()))
}

/// Start the server for `helper` in the background, unless it is running.
///
/// It is then ready when the first run needs it: its start overlaps the workspace's preparation.
pub fn warm(helper: &Path) {
    let (map, _) = servers();
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let stale = match map.get(helper) {
        None => true,
        Some(State::Ready(s)) => s.owner != std::process::id(),
        Some(_) => false,
    };
    if stale {
        map.insert(helper.to_path_buf(), State::Starting);
        // `start` takes the lock itself when it cannot start its thread.
        drop(map);
        start(helper.to_path_buf());
    }
}

/// Whether this process runs its helpers from a server for `helper` (it was warmed and started).
pub fn serves(helper: &Path) -> bool {
    let (map, _) = servers();
    let map = map.lock().unwrap_or_else(|e| e.into_inner());
    matches!(map.get(helper), Some(State::Ready(s)) if s.owner == std::process::id())
}

/// Start the server from a thread that stays: it records the outcome and wakes the waiters.
fn start(helper: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("sandbox-forkserver".into())
        .spawn(move || {
            let (child, state) = match launch(&helper) {
                Ok((child, sock)) => (
                    Some(child),
                    State::Ready(Server {
                        sock,
                        owner: std::process::id(),
                    }),
                ),
                Err(_) => (None, State::Failed),
            };
            let (map, ready) = servers();
            map.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(helper, state);
            ready.notify_all();
            if let Some(mut child) = child {
                let _ = child.wait();
            }
            // The helpers forked by the server are children of this thread's process, and their
            // parent-death signal follows this thread: it must outlive them.
            loop {
                std::thread::park();
            }
        });
    if spawned.is_err() {
        let (map, ready) = servers();
        if let Ok(mut m) = map.lock() {
            m.retain(|_, s| !matches!(s, State::Starting));
        }
        ready.notify_all();
    }
}

/// Exec the server with one end of a new socket pair at [`SOCKET_FD`]; wait until it says it is
/// ready.
fn launch(helper: &Path) -> std::io::Result<(std::process::Child, OwnedFd)> {
    use std::os::unix::process::CommandExt;
    let (mine, theirs) = socket_pair()?;
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new(helper);
    cmd.arg(SUBCOMMAND)
        .current_dir("/")
        .env_clear()
        .env(PARENT_VAR, std::process::id().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Not in the terminal's process group: Ctrl-C is the supervisor's to handle.
        .process_group(0);
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let ok = if theirs_fd == SOCKET_FD {
                libc::fcntl(SOCKET_FD, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(theirs_fd, SOCKET_FD) == SOCKET_FD
            };
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn()?;
    drop(theirs);
    set_timeout(&mine)?;
    let mut byte = [0u8; 1];
    // SAFETY: reading into a local buffer from our socket.
    let n = unsafe { libc::recv(mine.as_raw_fd(), byte.as_mut_ptr().cast(), 1, 0) };
    if n != 1 || byte[0] != b'R' {
        let _ = child.kill();
        let _ = child.wait();
        return Err(std::io::Error::other("the fork server did not start"));
    }
    Ok((child, mine))
}

fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array, which we then own.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_timeout(sock: &OwnedFd) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: WAIT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: setting a socket option from a local value of the right size.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What became of a request to the fork server.
pub enum Spawned {
    /// The helper's pid: a child of this process.
    Forked(i32),
    /// The server could not be used, and nothing was sent: the caller execs the helper.
    NotUsed,
    /// Sent, but no answer came: the caller execs the helper, with descriptors of its own (the
    /// lost request may hold these until its server wakes or dies; its helper never runs).
    Lost,
}

/// Have the server for `helper` fork a helper with `plan` and `fds` (stdin, stdout, stderr,
/// report, artifacts).
pub fn spawn(helper: &Path, plan: &[u8], fds: [RawFd; 5]) -> Spawned {
    if plan.len() > MAX_PLAN {
        return Spawned::NotUsed;
    }
    let (map, ready) = servers();
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    // Started by `warm` for processes that run many commands; a one-off (`exec`, the probe)
    // execs its helper, which costs the same as starting a server.
    if !map.contains_key(helper) {
        return Spawned::NotUsed;
    }
    if matches!(map.get(helper), Some(State::Ready(s)) if s.owner != std::process::id()) {
        drop(map);
        warm(helper);
        map = servers().0.lock().unwrap_or_else(|e| e.into_inner());
    }
    let deadline = std::time::Instant::now() + WAIT;
    while matches!(map.get(helper), Some(State::Starting)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Spawned::NotUsed;
        }
        map = ready
            .wait_timeout(map, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let Some(State::Ready(server)) = map.get(helper) else {
        return Spawned::NotUsed;
    };
    match request(&server.sock, plan, fds) {
        Ok(pid) => Spawned::Forked(pid),
        Err(_) => {
            // Gone or hung: this run execs its helper, and the next one starts a new server
            // (its socket closed here, the old one reads end-of-file if it ever wakes).
            map.remove(helper);
            drop(map);
            warm(helper);
            Spawned::Lost
        }
    }
}

/// One request. The forked helper waits for a byte on a pipe of its own before it does anything:
/// it is written once the pid has come back, so a helper whose answer was lost (the server died
/// or hung after forking) reads end-of-file and exits, and the run's fallback does not run twice.
fn request(sock: &OwnedFd, plan: &[u8], fds: [RawFd; 5]) -> std::io::Result<i32> {
    use std::io::Write;
    let (go_r, mut go_w) = std::io::pipe()?;
    let all = [fds[0], fds[1], fds[2], fds[3], fds[4], go_r.as_raw_fd()];
    send_with_fds(sock.as_raw_fd(), plan, &all)?;
    let mut answer = [0u8; 4];
    // SAFETY: reading into a local buffer from our socket.
    let n = unsafe { libc::recv(sock.as_raw_fd(), answer.as_mut_ptr().cast(), 4, 0) };
    if n != 4 {
        return Err(std::io::Error::other("the fork server did not answer"));
    }
    let pid = i32::from_ne_bytes(answer);
    if pid <= 0 {
        return Err(std::io::Error::from_raw_os_error(-pid));
    }
    // Our read end stays open until the go is written: a helper that died before reading it
    // must not make this write raise SIGPIPE (which ends a supervisor that restored it).
    go_w.write_all(b"G")?;
    drop(go_r);
    Ok(pid)
}

fn send_with_fds(sock: RawFd, body: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    // u64 words keep the control buffer aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: body.as_ptr() as *mut libc::c_void,
        iov_len: body.len(),
    };
    // SAFETY: msghdr is plain old data; every pointer set below points into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds one header with room for `fds` (CMSG_SPACE above).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
    }
    loop {
        // SAFETY: msg is fully set up above.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One request received by the server: the plan and the descriptors that came with it.
fn receive(sock: RawFd, buf: &mut [u8]) -> std::io::Result<Option<(usize, Vec<RawFd>)>> {
    const MOST: usize = 8;
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE((MOST * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain old data; the pointers set below point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: msg is set up above; received descriptors are close-on-exec.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote, within msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*cmsg).cmsg_len as usize).saturating_sub(header)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(std::ptr::read_unaligned(data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        for fd in fds {
            // SAFETY: closing descriptors we were just given.
            unsafe { libc::close(fd) };
        }
        return Err(std::io::Error::other("a request did not fit"));
    }
    Ok(Some((n, fds)))
}

/// The server's main loop (the hidden subcommand): fork a helper per request until the
/// supervisor closes its end.
pub fn serve() -> i32 {
    let parent: Option<i32> = std::env::var(PARENT_VAR).ok().and_then(|p| p.parse().ok());
    // SAFETY: plain prctl/getppid/fcntl/close on our own descriptors.
    let sock = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if parent.is_none() || Some(libc::getppid()) != parent {
            eprintln!(
                "error: {SUBCOMMAND} is internal to git-sandbox and is started by it; run `git sandbox run` instead"
            );
            return 125;
        }
        let sock = libc::fcntl(SOCKET_FD, libc::F_DUPFD_CLOEXEC, HIGH_FD);
        if sock < 0 {
            return 125;
        }
        libc::close(SOCKET_FD);
        sock
    };
    // Only the socket: every helper forked from here starts with what this process holds.
    gs_util::fds::close_between(3, sock as u32 - 1);
    gs_util::fds::close_from(sock + 1);
    std::env::remove_var(PARENT_VAR);
    // SAFETY: telling the supervisor we are ready.
    if unsafe { libc::send(sock, b"R".as_ptr().cast(), 1, libc::MSG_NOSIGNAL) } != 1 {
        return 125;
    }
    // What every helper needs and no plan decides, done once here rather than in each.
    super::guard::prepare_seccomp();
    let mut buf = vec![0u8; MAX_PLAN + 1];
    loop {
        let (n, fds) = match receive(sock, &mut buf) {
            Ok(Some(r)) => r,
            Ok(None) => return 0,
            Err(e) if e.raw_os_error().is_some() => return 0,
            Err(_) => {
                answer(sock, -libc::EINVAL);
                continue;
            }
        };
        if fds.len() != 6 || n > MAX_PLAN {
            close_all(&fds);
            answer(sock, -libc::EINVAL);
            continue;
        }
        // SAFETY: a fork (the child's parent is ours): this process is single-threaded, and the
        // child only sets up its descriptors and runs the helper, as an exec'd one would.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
                0usize,
                0usize,
                0usize,
                0usize,
            )
        } as i32;
        if pid == 0 {
            // SAFETY: the child's own copy of the server's socket.
            unsafe { libc::close(sock) };
            let fds: [RawFd; 6] = [fds[0], fds[1], fds[2], fds[3], fds[4], fds[5]];
            std::process::exit(helper_child(&buf[..n], fds));
        }
        close_all(&fds);
        answer(
            sock,
            if pid > 0 {
                pid
            } else {
                -std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EAGAIN)
            },
        );
    }
}

fn answer(sock: RawFd, value: i32) {
    let bytes = value.to_ne_bytes();
    // SAFETY: sending a local buffer on our socket.
    unsafe { libc::send(sock, bytes.as_ptr().cast(), 4, libc::MSG_NOSIGNAL) };
}

fn close_all(fds: &[RawFd]) {
    for &fd in fds {
        // SAFETY: closing descriptors received with this request.
        unsafe { libc::close(fd) };
    }
}

/// In the forked helper: its own session, the descriptors where an exec'd helper finds them
/// (stdin, stdout, stderr, report, artifacts), the plan read, then the supervisor's go (see
/// [`request`]) and the helper itself. Nothing reaches beyond this process before the go.
fn helper_child(plan: &[u8], fds: [RawFd; 6]) -> i32 {
    use super::{ARTIFACT_FD, REPORT_FD};
    let mut high = [0; 6];
    // SAFETY: plain syscalls on descriptors this process owns.
    unsafe {
        libc::setsid();
        // Out of the way first, so that no `dup2` below lands on one still to be moved.
        for (h, fd) in high.iter_mut().zip(fds) {
            *h = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FD);
            libc::close(fd);
        }
        for (from, to) in [
            (high[0], 0),
            (high[1], 1),
            (high[2], 2),
            (high[3], REPORT_FD),
            (high[4], ARTIFACT_FD),
        ] {
            if from < 0 {
                return 125;
            }
            if from == to {
                libc::fcntl(to, libc::F_SETFD, 0);
                continue;
            }
            if libc::dup2(from, to) != to {
                return 125;
            }
            libc::close(from);
        }
    }
    let plan = serde_json::from_slice(plan);
    let mut go = [0u8; 1];
    // SAFETY: reading into a local buffer from our own pipe.
    let n = loop {
        let n = unsafe { libc::read(high[5], go.as_mut_ptr().cast(), 1) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break n;
        }
    };
    if n != 1 {
        // Not wanted: nothing of the run may happen, not even a message on its output.
        // SAFETY: leaving at once, without running anything more.
        unsafe { libc::_exit(125) };
    }
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(high[5]) };
    match plan {
        Ok(plan) => super::helper::run(plan),
        Err(_) => 125,
    }
}
