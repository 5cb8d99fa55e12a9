//! A Dockerfile's `RUN`, in a process of its own (`git-sandbox __image-run`): uid 0 of a new user
//! namespace that the supervisor (as root) maps onto the image's reserved host uids
//! ([`IMAGE_UID_BASE`], 65,536 of them; as another user, only that user), with its own mount,
//! PID, IPC, UTS and network namespaces. Its network is none, or the setup step's: the proxy
//! (`gs_egress`) to the hosts the user's setup policy allows, through a listener on the
//! namespace's own loopback handed to the supervisor (`gs_egress::door`), or the host's when the
//! user's config says `network = "host"`. Its root is an overlay of the image's layers so far whose upper
//! directory is a tmpfs of the room `image_mb` leaves: what the step wrote, written out once it
//! ended as a layer tar ([`crate::export`]) that the supervisor unpacks by the rules of any
//! pulled layer (setuid cleared, devices dropped, bounds). `/proc` is the namespace's own,
//! `/tmp` a tmpfs (not kept), `/dev` a tmpfs with the host's null, zero, full, random, urandom
//! and tty bound in. The layers are bound into its mount namespace while it is still root (as
//! root: overlayfs takes only mounts of its own namespace; as another user, it reaches them as
//! their owner); after `pivot_root` the command sees nothing of the host's file system, and runs
//! as `/bin/sh -c LINE` with no new privileges.

use crate::isolate::IMAGE_UID_BASE;
use crate::unpack::IMAGE_IDS;
use gs_util::mount::{check, mount};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden subcommand a `RUN` runs in.
pub const SUBCOMMAND: &str = "__image-run";

/// The descriptor of the handshake with the supervisor, and the one the layer's tar goes to.
const HANDSHAKE_FD: i32 = 3;
const LAYER_FD: i32 = 4;
/// Where the step writes: a tmpfs of its own (bounded), `upper` and overlayfs's `work`.
const SCRATCH: &str = "/tmp/scratch";
/// Where the step's root is assembled: a tmpfs over `/tmp` of its own mount namespace (the
/// directories bound there as root, before the user namespace, and the overlay at `root`).
const STAGE: &str = "/tmp";
const ROOT_AT: &str = "/tmp/root";

/// One `RUN` to run.
pub struct Step<'a> {
    /// This executable (it has the hidden subcommand).
    pub exe: &'a Path,
    /// The image's layers so far, topmost first.
    pub lowers: &'a [PathBuf],
    /// Where the step's layer goes, as a tar (what it wrote, whiteouts as `.wh.` files): it is
    /// unpacked as any layer is.
    pub layer_out: &'a Path,
    /// The most the step may write (its upper directory is a tmpfs of this size).
    pub max_bytes: u64,
    pub command: &'a str,
    /// `NAME=value`, as the image and the Dockerfile's `ENV` set them.
    pub env: &'a [String],
    /// Where the command starts (made when missing).
    pub workdir: &'a str,
    pub network: Network,
    pub timeout: Duration,
    /// Where its output goes.
    pub log: &'a Path,
}

/// A step's way out.
pub enum Network {
    /// None: a network namespace of its own, loopback only.
    Closed,
    /// The proxy, serving this policy from the supervisor.
    Proxy(gs_egress::Policy),
    /// The host's own network namespace (the user's `network = "host"`).
    Host,
}

/// How a step ended: its exit code (a signal as 128 + its number), and what its proxy saw.
pub struct Ended {
    pub code: i32,
    pub traffic: Option<gs_egress::Traffic>,
}

/// What the process is told. Its directories by path: an overlay takes only mounts of the
/// mount namespace it is made in, so they are bound there (as root, before the user namespace)
/// or reached as the user who owns them.
#[derive(Serialize, Deserialize)]
struct Spec {
    lowers: Vec<PathBuf>,
    max_bytes: u64,
    command: String,
    env: Vec<String>,
    workdir: String,
    host_network: bool,
    /// A listener on its loopback is handed back on the handshake socket.
    proxy: bool,
    mapped: bool,
}

/// Run `step`: how it ended, or why it could not run.
pub fn run(step: &Step<'_>) -> Result<Ended, String> {
    // SAFETY: no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    let spec = Spec {
        lowers: step.lowers.to_vec(),
        max_bytes: step.max_bytes.max(1 << 20),
        command: step.command.to_string(),
        env: step.env.to_vec(),
        workdir: step.workdir.to_string(),
        host_network: matches!(step.network, Network::Host),
        proxy: matches!(step.network, Network::Proxy(_)),
        mapped: root,
    };
    let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
    let log =
        std::fs::File::create(step.log).map_err(|e| format!("{}: {e}", step.log.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(step.exe);
    cmd.arg(SUBCOMMAND)
        .arg(serde_json::to_string(&spec).map_err(|e| e.to_string())?)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0);
    let out = std::fs::File::create(step.layer_out)
        .map_err(|e| format!("{}: {e}", step.layer_out.display()))?;
    let (raw, out_raw) = (theirs.as_raw_fd(), out.as_raw_fd());
    // SAFETY: only fcntl and dup2, async-signal-safe, between fork and exec: both moved out of
    // the way, then to their places (which clears close-on-exec).
    unsafe {
        cmd.pre_exec(move || {
            let a = libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 100);
            let b = libc::fcntl(out_raw, libc::F_DUPFD_CLOEXEC, 100);
            if a < 0 || b < 0 || libc::dup2(a, HANDSHAKE_FD) < 0 || libc::dup2(b, LAYER_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {} {SUBCOMMAND}: {e}", step.exe.display()))?;
    drop((theirs, out));
    let mut ours = ours;
    let _ = ours.set_read_timeout(Some(Duration::from_secs(10)));
    if root {
        let mut b = [0u8; 1];
        let ready = ours.read_exact(&mut b).is_ok();
        let map = format!("0 {IMAGE_UID_BASE} {IMAGE_IDS}\n");
        let pid = child.id();
        let mapped = ready
            && ["uid_map", "gid_map"]
                .iter()
                .all(|f| std::fs::write(format!("/proc/{pid}/{f}"), &map).is_ok());
        if !mapped || ours.write_all(b"g").is_err() {
            return Err(format!(
                "its namespace could not be made: {}",
                stopped(&mut child, step.log)
            ));
        }
    }
    // Its way out: the listener it made on its loopback, served here until it ends.
    let proxy = match &step.network {
        Network::Proxy(policy) => match gs_egress::door::receive(&ours) {
            gs_egress::door::Received::Listener(l) => {
                Some(gs_egress::Proxy::serve(l, policy.clone()))
            }
            _ => {
                return Err(format!(
                    "its way out to the proxy could not be made: {}",
                    stopped(&mut child, step.log)
                ));
            }
        },
        _ => None,
    };
    drop(ours);
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            use std::os::unix::process::ExitStatusExt;
            break status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        if start.elapsed() > step.timeout {
            // SAFETY: the whole process group the step made (its namespace dies with it).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(format!(
                "it ran past {} s and was stopped",
                step.timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Ended {
        code,
        traffic: proxy.map(gs_egress::Proxy::stop),
    })
}

/// Stop `child` (it could not start the step): the last line it wrote to its log, which says why.
fn stopped(child: &mut std::process::Child, log: &Path) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let said = std::fs::read_to_string(log).unwrap_or_default();
    said.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// The process: the spec as its one argument, the handshake and the directories as
/// descriptors. Only returns on an error (said on stderr, the step's log).
pub fn child_main(args: &[String]) -> i32 {
    match child(args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("git-sandbox: the build step could not start: {e}");
            125
        }
    }
}

enum Never {}

fn cstr(s: &str) -> Result<std::ffi::CString, String> {
    std::ffi::CString::new(s).map_err(|_| format!("{s:?} holds a NUL"))
}

/// Each of `dirs` opened (`O_PATH`): the descriptors, and their names (`/proc/self/fd/N`),
/// good while the descriptors live.
fn hold(dirs: &[String]) -> Result<(Vec<std::os::fd::OwnedFd>, Vec<String>), String> {
    let mut held = Vec::new();
    for d in dirs {
        let c = cstr(d)?;
        // SAFETY: a valid C string; the result is checked.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        check(fd, d)?;
        // SAFETY: a fresh descriptor we own.
        held.push(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    }
    let names = held
        .iter()
        .map(|h| format!("/proc/self/fd/{}", h.as_raw_fd()))
        .collect();
    Ok((held, names))
}

fn open_dir(p: &str) -> Result<std::os::fd::OwnedFd, String> {
    let c = cstr(p)?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    check(fd, p)?;
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// A private tmpfs over `/tmp` holding the mount point of the step's root: nothing is made on
/// the host's `/tmp`.
fn stage() -> Result<(), String> {
    mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE, "")?;
    mount(
        "tmpfs",
        STAGE,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=0755,size=1m",
    )?;
    for d in [ROOT_AT, SCRATCH] {
        std::fs::create_dir(d).map_err(|e| format!("{d}: {e}"))?;
    }
    Ok(())
}

fn child(args: &[String]) -> Result<Never, String> {
    let [spec] = args else {
        return Err(format!(
            "{SUBCOMMAND} is internal to git-sandbox: a build's RUN runs it"
        ));
    };
    let spec: Spec = serde_json::from_str(spec).map_err(|e| e.to_string())?;
    // The directories as the overlay will take them: as root, bound under a stage of a mount
    // namespace of this process (the user namespace's own, made next, copies it); as another
    // user, where they are (that user owns them).
    let path = |p: &Path| p.display().to_string();
    let mut dirs: Vec<String> = spec.lowers.iter().map(|p| path(p)).collect();
    if spec.mapped {
        // SAFETY: plain calls, results checked.
        check(
            unsafe { libc::unshare(libc::CLONE_NEWNS) },
            "a mount namespace",
        )?;
        mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE, "")?;
        // Opened before the stage's tmpfs hides them (the store may be under /tmp).
        let (_held, names) = hold(&dirs)?;
        stage()?;
        for (i, (d, name)) in dirs.iter_mut().zip(&names).enumerate() {
            let at = format!("{STAGE}/{i}");
            std::fs::create_dir(&at).map_err(|e| format!("{at}: {e}"))?;
            mount(name, &at, "", libc::MS_BIND, "")?;
            *d = at;
        }
    }
    // SAFETY: plain calls, results checked; this process is single-threaded.
    unsafe {
        let (uid, gid) = (libc::geteuid(), libc::getegid());
        check(libc::unshare(libc::CLONE_NEWUSER), "a user namespace")?;
        if spec.mapped {
            check(
                libc::write(HANDSHAKE_FD, b"r".as_ptr().cast(), 1) as libc::c_int,
                "handshake",
            )?;
            let mut b = 0u8;
            if libc::read(HANDSHAKE_FD, (&mut b as *mut u8).cast(), 1) != 1 {
                return Err("the supervisor did not map the namespace".into());
            }
        } else {
            let _ = std::fs::write("/proc/self/setgroups", "deny");
            std::fs::write("/proc/self/uid_map", format!("0 {uid} 1\n"))
                .map_err(|e| e.to_string())?;
            std::fs::write("/proc/self/gid_map", format!("0 {gid} 1\n"))
                .map_err(|e| e.to_string())?;
        }
        if spec.mapped {
            check(libc::setgroups(0, std::ptr::null()), "setgroups")?;
        }
        check(libc::setresgid(0, 0, 0), "setresgid")?;
        check(libc::setresuid(0, 0, 0), "setresuid")?;
        let mut flags =
            libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
        if !spec.host_network {
            flags |= libc::CLONE_NEWNET;
        }
        check(libc::unshare(flags), "namespaces")?;
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    // The way out: a listener on the new namespace's loopback, handed to the supervisor.
    let mut proxy_env = Vec::new();
    if spec.proxy {
        gs_egress::door::loopback_up()?;
        let port = gs_egress::door::listen_and_send(HANDSHAKE_FD)?;
        proxy_env = gs_egress::door::proxy_env(port);
    }
    // SAFETY: our own descriptor, used no more.
    unsafe { libc::close(HANDSHAKE_FD) };
    mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE, "")?;
    let _held;
    if !spec.mapped {
        let (held, names) = hold(&dirs)?;
        stage()?;
        dirs = names;
        _held = held;
    }
    // What the step writes, bounded, in this namespace alone; held open, for the tar made of
    // it once the step ended (its root is then the namespace's, and this path is gone).
    mount(
        "tmpfs",
        SCRATCH,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        &format!("mode=0755,size={}", spec.max_bytes),
    )?;
    for d in ["upper", "work"] {
        std::fs::create_dir(format!("{SCRATCH}/{d}")).map_err(|e| format!("{d}: {e}"))?;
    }
    let upper = open_dir(&format!("{SCRATCH}/upper"))?;
    // SAFETY: a single-threaded process forks; each side's calls are checked.
    unsafe {
        let pid = libc::fork();
        check(pid, "fork")?;
        if pid > 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            if code == 0 {
                let out = <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(LAYER_FD);
                if let Err(e) = crate::export::tar_of_upper(upper, out) {
                    eprintln!("git-sandbox: the step's layer could not be kept: {e}");
                    libc::_exit(125);
                }
            }
            libc::_exit(code);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    drop(upper);
    // PID 1 of the step's namespace.
    let root_at = ROOT_AT;
    let n = spec.lowers.len();
    // Paths with ':' or ',' cannot be overlay options: the store's never have them.
    if dirs.iter().any(|d| d.contains([':', ','])) {
        return Err("a layer's path holds ':' or ','".into());
    }
    mount(
        "overlay",
        root_at,
        "overlay",
        libc::MS_NOSUID,
        &format!(
            "lowerdir={},upperdir={SCRATCH}/upper,workdir={SCRATCH}/work,userxattr",
            dirs[..n].join(":")
        ),
    )?;
    let inside = |p: &str| format!("{root_at}{p}");
    for d in ["/proc", "/dev", "/tmp"] {
        let _ = std::fs::create_dir_all(inside(d));
    }
    mount(
        "proc",
        inside("/proc"),
        "proc",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )?;
    mount(
        "tmpfs",
        inside("/tmp"),
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=1777",
    )?;
    mount(
        "tmpfs",
        inside("/dev"),
        "tmpfs",
        libc::MS_NOSUID,
        "mode=0755",
    )?;
    for dev in ["null", "zero", "full", "random", "urandom", "tty"] {
        let at = inside(&format!("/dev/{dev}"));
        std::fs::write(&at, b"").map_err(|e| format!("{at}: {e}"))?;
        mount(&format!("/dev/{dev}"), &at, "", libc::MS_BIND, "")?;
    }
    gs_util::mount::pivot_into(Path::new(root_at))?;
    // SAFETY: plain calls on static C strings.
    unsafe {
        libc::sethostname(c"build".as_ptr(), 5);
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    let workdir = if spec.workdir.is_empty() {
        "/"
    } else {
        spec.workdir.as_str()
    };
    let _ = std::fs::create_dir_all(workdir);
    std::env::set_current_dir(workdir).map_err(|e| format!("{workdir}: {e}"))?;
    let mut env: Vec<(String, String)> = Vec::new();
    for kv in &spec.env {
        if let Some((k, v)) = kv.split_once('=') {
            env.retain(|(n, _)| n != k);
            env.push((k.to_string(), v.to_string()));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
    }
    for (k, v) in proxy_env {
        env.retain(|(n, _)| *n != k);
        env.push((k, v));
    }
    if !env.iter().any(|(k, _)| k == "HOME") {
        env.push(("HOME".into(), "/root".into()));
    }
    // Nothing of the supervisor's stays open in the step: its directories are mounted.
    gs_util::fds::close_from(3);
    let e = Command::new("/bin/sh")
        .arg("-c")
        .arg(&spec.command)
        .env_clear()
        .envs(env)
        .exec();
    Err(format!("/bin/sh: {e}"))
}
