//! The control socket: `ping [REPO]` wakes the scheduler, `status` answers with JSON, `stop`
//! asks for a graceful stop. The listener thread only forwards messages. Only the daemon's own
//! uid may talk to it (socket 0600 and the peer's credentials), and each client is bounded: one
//! line of at most 64 KiB, sent within 2 s, and at most 32 clients at once.

use super::{DaemonError, Msg};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The longest request line read; longer ones are refused.
pub const MAX_REQUEST: usize = 64 * 1024;
/// The time a client has to send its whole request line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// Clients served at once; more are closed at once.
pub const MAX_CLIENTS: usize = 32;

pub struct Listener {
    path: std::path::PathBuf,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Bind the socket (the daemon lock is held, so a leftover file is stale) and serve it.
pub fn listen(home: &Path, tx: mpsc::SyncSender<Msg>) -> Result<Listener, DaemonError> {
    let path = crate::ipc::socket_path(home);
    let _ = std::fs::remove_file(&path);
    let listener = bind_private(&path).map_err(|source| DaemonError::Bind {
        path: path.clone(),
        source,
    })?;
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let stream = match stream {
                    Ok(s) => s,
                    Err(_) => {
                        // Out of descriptors, say: do not spin.
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                let Some(slot) = Slot::take(&active) else {
                    continue; // over the cap: dropping the stream closes it
                };
                let tx = tx.clone();
                // One short-lived thread per client keeps a slow client from blocking pings.
                let _ = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        let _slot = slot;
                        serve(stream, &tx);
                    });
            }
        })
        .expect("spawning a thread");
    Ok(Listener { path })
}

/// One of the [`MAX_CLIENTS`] places, given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(active: &Arc<AtomicUsize>) -> Option<Slot> {
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            active.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(active.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Bind a socket that is 0600 before it accepts anyone: bind, chmod, only then listen (until
/// `listen`, a connect is refused), so the umask never decides who may connect.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::ffi::OsStrExt;
    let last = std::io::Error::last_os_error;
    // SAFETY: a zeroed sockaddr_un is valid; the path is copied within its bounds below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidFilename,
            format!(
                "the socket path is longer than {} bytes",
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: plain system calls on a descriptor we own, with a valid address.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(last());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), len) != 0 {
            return Err(last());
        }
        std::fs::set_permissions(
            path,
            std::os::unix::fs::PermissionsExt::from_mode(crate::util::private::FILE_MODE),
        )?;
        if libc::listen(fd.as_raw_fd(), 128) != 0 {
            return Err(last());
        }
        Ok(UnixListener::from(fd))
    }
}

/// The uid of the process at the other end.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    // SAFETY: getsockopt writes at most `len` bytes into a ucred we own.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        let r = libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        );
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(cred.uid)
    }
}

enum ReadError {
    TooLong,
    Io,
}

/// One request line (without its newline), read by `deadline` and at most [`MAX_REQUEST`]
/// bytes long. End of input also ends the line.
fn read_request(mut stream: &UnixStream, deadline: Instant) -> Result<String, ReadError> {
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Io);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| ReadError::Io)?;
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Io),
        };
        let chunk = &buf[..n];
        let end = chunk.iter().position(|&b| b == b'\n');
        line.extend_from_slice(&chunk[..end.unwrap_or(n)]);
        if line.len() > MAX_REQUEST {
            return Err(ReadError::TooLong);
        }
        if end.is_some() {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn serve(stream: UnixStream, tx: &mpsc::SyncSender<Msg>) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
    let answer = |reply: &str| {
        let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
    };
    // SAFETY: plain getter.
    let me = unsafe { libc::geteuid() };
    match peer_uid(&stream) {
        Ok(uid) if uid == me => {}
        Ok(uid) => {
            // Read (boundedly) what it sent, so closing does not reset the connection before
            // the refusal arrives.
            let _ = read_request(&stream, deadline);
            return answer(&format!(
                "error: uid {uid} may not control this daemon; only its own user (uid {me}) may"
            ));
        }
        Err(_) => return,
    }
    let line = match read_request(&stream, deadline) {
        Ok(line) => line,
        Err(ReadError::TooLong) => {
            return answer(&format!(
                "error: request longer than {} KiB; send one short line: ping, status or stop",
                MAX_REQUEST / 1024
            ))
        }
        Err(ReadError::Io) => return,
    };
    let mut words = line.split_whitespace();
    let reply = match words.next() {
        Some("ping") => {
            let _ = tx.try_send(Msg::Wake(words.next().map(str::to_string)));
            "ok".to_string()
        }
        Some("status") => {
            let (rtx, rrx) = mpsc::channel();
            let _ = tx.send(Msg::Status(rtx));
            rrx.recv_timeout(Duration::from_secs(2))
                .map(|v| v.to_string())
                .unwrap_or_else(|_| "{}".into())
        }
        Some("stop") => {
            let _ = tx.send(Msg::Stop);
            "stopping".to_string()
        }
        _ => "error: unknown request; use ping, status or stop".to_string(),
    };
    answer(&reply);
}
