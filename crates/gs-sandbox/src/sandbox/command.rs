//! The command itself, `/bin/sh -c CMD`, as the helper starts it: spawned by the namespace's
//! init, or exec'd in place of the helper when there are no namespaces. Either way with the
//! plan's environment and directory, and the signal state a shell gives its children.

use super::helper::{last_err, HELPER_FAILED};
use super::{errno_text, Plan};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// Start `/bin/sh -c CMD` as init's child: in the plan's directory, with the plan's environment,
/// every signal at its default action and none blocked (as [`default_signals`] leaves them), by
/// `posix_spawn` — a vfork and exec, which does not copy this process's memory as a fork would.
/// It needs no parent-death signal: when init ends, the kernel kills its PID namespace. The
/// exit code to report when it cannot start.
pub(super) fn spawn(plan: &Plan) -> Result<i32, i32> {
    if !enter(plan) {
        return Err(HELPER_FAILED);
    }
    let Some((argv, envp)) = command_line(plan) else {
        return Err(HELPER_FAILED);
    };
    // The command gets stdin, stdout and stderr; init keeps its own (the artifact and status
    // pipes) across the spawn.
    gs_util::fds::cloexec_from(3);
    let mut argv_p: Vec<*mut libc::c_char> = argv.iter().map(|s| s.as_ptr().cast_mut()).collect();
    argv_p.push(std::ptr::null_mut());
    let mut envp_p: Vec<*mut libc::c_char> = envp.iter().map(|s| s.as_ptr().cast_mut()).collect();
    envp_p.push(std::ptr::null_mut());
    // SAFETY: the attributes are initialized before use and destroyed after; the arrays are
    // null-terminated and outlive the call.
    let r = unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::posix_spawnattr_setsigdefault(&mut attr, &all);
        libc::posix_spawnattr_setsigmask(&mut attr, &none);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        );
        let mut pid = 0;
        let r = libc::posix_spawn(
            &mut pid,
            argv_p[0],
            std::ptr::null(),
            &attr,
            argv_p.as_ptr(),
            envp_p.as_ptr(),
        );
        libc::posix_spawnattr_destroy(&mut attr);
        if r == 0 {
            Ok(pid)
        } else {
            Err(r)
        }
    };
    r.map_err(|e| {
        eprintln!(
            "git-sandbox: cannot start /bin/sh: {}",
            errno_text(&std::io::Error::from_raw_os_error(e))
        );
        127
    })
}

/// Go to the plan's directory, where the command starts; says why not on stderr (the run's
/// output) when it cannot.
fn enter(plan: &Plan) -> bool {
    let cwd = CString::new(plan.cwd.as_os_str().as_bytes()).unwrap_or_default();
    // SAFETY: valid C string.
    if unsafe { libc::chdir(cwd.as_ptr()) } < 0 {
        eprintln!(
            "git-sandbox: cannot enter {}: {}",
            plan.cwd.display(),
            last_err()
        );
        return false;
    }
    true
}

/// `/bin/sh -c CMD` and the plan's environment, as C strings; `None` (said on stderr, the
/// run's output) when one holds a NUL byte, which no C string can: cut there, the command
/// would run as another (`sh -c ""` passes).
fn command_line(plan: &Plan) -> Option<(Vec<CString>, Vec<CString>)> {
    let Some(command) = CString::new(plan.command.as_str()).ok() else {
        eprintln!("git-sandbox: the command contains a NUL byte, which no shell can run");
        return None;
    };
    let argv = vec![c"/bin/sh".to_owned(), c"-c".to_owned(), command];
    let envp = plan
        .env
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).ok())
        .collect::<Option<Vec<_>>>();
    if envp.is_none() {
        eprintln!("git-sandbox: an environment variable contains a NUL byte");
    }
    Some((argv, envp?))
}

/// Hand the command the signal state a shell gives its children: every signal at its default
/// action and none blocked. Caught signals reset on exec anyway, but ignored ones and the mask are
/// inherited, and this process ignores SIGPIPE (Rust's runtime does): without this, `yes | head
/// -1` in a test would see EPIPE instead of dying, and `sh` cannot reset a signal ignored on entry.
fn default_signals() {
    for sig in 1..libc::SIGRTMAX() {
        // SAFETY: querying and resetting dispositions in a single-threaded process about to exec;
        // signals the C library reserves for itself refuse the call, which is fine.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
    // SAFETY: an empty set unblocks everything.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

pub(super) fn exec(plan: &Plan) -> ! {
    let code = (|| {
        if !enter(plan) {
            return HELPER_FAILED;
        }
        let Some((argv, envp)) = command_line(plan) else {
            return HELPER_FAILED;
        };
        let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
        argv_p.push(std::ptr::null());
        let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
        envp_p.push(std::ptr::null());
        default_signals();
        gs_util::fds::close_from(3);
        // SAFETY: null-terminated arrays of valid C strings that outlive the call.
        unsafe { libc::execve(argv_p[0], argv_p.as_ptr(), envp_p.as_ptr()) };
        eprintln!("git-sandbox: cannot start /bin/sh: {}", last_err());
        127
    })();
    // SAFETY: leaving without unwinding (possibly in a forked child).
    unsafe { libc::_exit(code) }
}
