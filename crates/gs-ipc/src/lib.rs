//! Talking to the daemon: its lock (one daemon per data dir) and its Unix control socket, with a
//! line protocol (`ping [REPO]`, `status`, `stop`). Clients never block for long: a hook that
//! pings a daemon that is down or busy must still return at once.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn socket_path(home: &Path) -> PathBuf {
    home.join("daemon.sock")
}

pub fn lock_path(home: &Path) -> PathBuf {
    home.join("daemon.lock")
}

/// An exclusive lock held for the daemon's lifetime (released by the kernel when it dies,
/// even on kill -9).
pub struct DaemonLock {
    _file: std::fs::File,
}

/// Why the daemon lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: the pid it wrote, if readable.
    Held(Option<u32>),
    /// The lock file cannot be opened or locked at all (a directory in its place, a data dir
    /// the user cannot write): no daemon is known to run.
    Io(std::io::Error),
}

/// How long a lock whose daemon is gone may still be held: a process the daemon forked just
/// before it was killed keeps the lock's descriptor until it notices and exits.
const DEAD_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Take the daemon lock, or say which pid holds it. When the pid it names is gone, a process
/// it left behind may hold the lock a moment longer: it is waited for (at most
/// [`DEAD_HOLDER_WAIT`]).
pub fn lock(home: &Path) -> Result<DaemonLock, LockError> {
    let deadline = std::time::Instant::now() + DEAD_HOLDER_WAIT;
    loop {
        match try_lock(home) {
            Err(LockError::Held(Some(pid)))
                if !alive(pid) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Whether process `pid` exists (a zombie counts: its parent has not waited for it yet).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0 && (unsafe { libc::kill(pid, 0) } == 0 || last_errno() == Some(libc::EPERM))
}

fn last_errno() -> Option<i32> {
    std::io::Error::last_os_error().raw_os_error()
}

fn try_lock(home: &Path) -> Result<DaemonLock, LockError> {
    use std::os::fd::AsRawFd;
    let path = lock_path(home);
    let file = gs_util::private::open_rw(&path).map_err(LockError::Io)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(LockError::Io(e));
        }
        return Err(LockError::Held(read_pid(&path)));
    }
    let _ = file.set_len(0);
    let _ = (&file).write_all(std::process::id().to_string().as_bytes());
    Ok(DaemonLock { _file: file })
}

/// Held by the one `git sandbox mcp` server that runs a repository's queue while no daemon
/// runs (released by the kernel when that server dies).
pub struct RunnerLock {
    _file: std::fs::File,
}

/// Take the queue runner's lock of a repository: `Ok(None)` when another server holds it; an
/// error when the lock file cannot be opened or locked (no one holds it: the caller says so
/// rather than wait for it forever).
pub fn runner_lock(home: &Path, repository_id: &str) -> std::io::Result<Option<RunnerLock>> {
    use std::os::fd::AsRawFd;
    let path = home.join(format!("runner-{repository_id}.lock"));
    let file = gs_util::private::open_rw(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(RunnerLock { _file: file }));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(None);
    }
    Err(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The pid of the running daemon, if one holds the lock.
pub fn running(home: &Path) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let path = lock_path(home);
    let file = std::fs::File::open(&path).ok()?;
    // SAFETY: flock on a descriptor we own; a shared lock that succeeds means nobody holds it.
    let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        // SAFETY: as above.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        None
    } else {
        read_pid(&path).or(Some(0))
    }
}

/// Send one line and read one line back (empty when the daemon closed without answering).
pub fn request(home: &Path, line: &str, timeout: Duration) -> std::io::Result<String> {
    let stream = UnixStream::connect(socket_path(home))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    (&stream).write_all(format!("{line}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply)?;
    Ok(reply.trim_end().to_string())
}

/// Wake the daemon (fire and forget): new jobs are waiting.
pub fn ping(home: &Path, repository_id: &str) {
    if let Ok(stream) = UnixStream::connect(socket_path(home)) {
        let _ = stream.set_write_timeout(Some(Duration::from_millis(50)));
        let _ = (&stream).write_all(format!("ping {repository_id}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    /// A daemon killed while a process it forked still holds the lock: the next daemon waits
    /// for that process rather than refuse to start; a live holder is refused at once.
    #[test]
    fn a_lock_left_held_by_a_dead_daemons_child_is_waited_for() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let home = tempfile::tempdir().unwrap();
        let path = super::lock_path(home.path());
        let mut file = std::fs::File::create(&path).unwrap();
        // SAFETY: flock and fcntl on a descriptor we own.
        unsafe {
            assert_eq!(
                libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB),
                0
            );
            libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0);
        }
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        write!(file, "{dead}").unwrap();
        // The child inherits the descriptor, and with it the lock.
        let mut child = std::process::Command::new("sleep")
            .arg("1")
            .spawn()
            .unwrap();
        drop(file);
        let started = std::time::Instant::now();
        let taken = super::lock(home.path());
        assert!(
            taken.is_ok(),
            "the lock was not taken once its holder ended"
        );
        assert!(started.elapsed() >= std::time::Duration::from_millis(500));
        child.wait().unwrap();
        drop(taken);
        // A live holder is refused at once.
        let _held = super::lock(home.path()).unwrap();
        let started = std::time::Instant::now();
        assert!(matches!(
            super::try_lock(home.path()),
            Err(super::LockError::Held(Some(p))) if p == std::process::id()
        ));
        assert!(matches!(
            super::lock(home.path()),
            Err(super::LockError::Held(_))
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    use super::*;

    #[test]
    fn a_runner_lock_is_taken_once_and_an_unopenable_one_is_an_error() {
        let home = tempfile::tempdir().unwrap();
        let held = runner_lock(home.path(), "r1").unwrap();
        assert!(held.is_some());
        assert!(runner_lock(home.path(), "r1").unwrap().is_none(), "held");
        drop(held);
        // Released: taken again once no process shares the descriptor (a child another test
        // of this binary forks holds a copy of every descriptor until it execs; seen in CI).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut again = runner_lock(home.path(), "r1").unwrap();
        while again.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            again = runner_lock(home.path(), "r1").unwrap();
        }
        assert!(again.is_some(), "released");
        drop(again);
        // A directory where the lock file goes: nobody holds it, and it cannot be taken.
        std::fs::create_dir(home.path().join("runner-r2.lock")).unwrap();
        let e = runner_lock(home.path(), "r2").err().expect("an error");
        assert!(e.to_string().contains("runner-r2.lock"), "{e}");
    }
}
