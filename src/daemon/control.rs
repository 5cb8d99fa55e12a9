//! The control socket: `ping [REPO]` wakes the scheduler, `status` answers with JSON, `stop`
//! asks for a graceful stop. A task on the daemon's runtime accepts clients and only forwards
//! messages. Only the daemon's own uid may talk to it (socket 0600 and the peer's credentials),
//! and each client is bounded: one line of at most 64 KiB, sent within 2 s, and at most 32
//! clients at once.

use super::{DaemonError, Msg};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

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

/// Bind the socket (the daemon lock is held, so a leftover file is stale) and serve it on the
/// current tokio runtime.
pub fn listen(home: &Path, tx: mpsc::Sender<Msg>) -> Result<Listener, DaemonError> {
    let path = gs_ipc::socket_path(home);
    let _ = std::fs::remove_file(&path);
    let bind_err = |source| DaemonError::Bind {
        path: path.clone(),
        source,
    };
    let listener = bind_private(&path).map_err(bind_err)?;
    listener.set_nonblocking(true).map_err(bind_err)?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(bind_err)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(_) => {
                    // Out of descriptors, say: do not spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue; // over the cap: dropping the stream closes it
            };
            let tx = tx.clone();
            // One task per client keeps a slow client from holding up pings.
            tokio::spawn(async move {
                let _slot = slot;
                serve(stream, &tx).await;
            });
        }
    });
    Ok(Listener { path })
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
            std::os::unix::fs::PermissionsExt::from_mode(gs_util::private::FILE_MODE),
        )?;
        if libc::listen(fd.as_raw_fd(), 128) != 0 {
            return Err(last());
        }
        Ok(UnixListener::from(fd))
    }
}

enum ReadError {
    TooLong,
    Io,
}

/// One request line (without its newline), read by `deadline` and at most [`MAX_REQUEST`]
/// bytes long. End of input also ends the line.
async fn read_request(
    stream: &mut UnixStream,
    deadline: tokio::time::Instant,
) -> Result<String, ReadError> {
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return Err(ReadError::Io),
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return Err(ReadError::Io),
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

async fn serve(mut stream: UnixStream, tx: &mpsc::Sender<Msg>) {
    let deadline = tokio::time::Instant::now() + REQUEST_DEADLINE;
    // SAFETY: plain getter.
    let me = unsafe { libc::geteuid() };
    let reply = match stream.peer_cred().map(|c| c.uid()) {
        Ok(uid) if uid == me => match read_request(&mut stream, deadline).await {
            Ok(line) => request(&line, tx).await,
            Err(ReadError::TooLong) => format!(
                "error: request longer than {} KiB; send one short line: ping, status or stop",
                MAX_REQUEST / 1024
            ),
            Err(ReadError::Io) => return,
        },
        Ok(uid) => {
            // Read (boundedly) what it sent, so closing does not reset the connection before
            // the refusal arrives.
            let _ = read_request(&mut stream, deadline).await;
            format!(
                "error: uid {uid} may not control this daemon; only its own user (uid {me}) may"
            )
        }
        Err(_) => return,
    };
    let _ = tokio::time::timeout(
        REQUEST_DEADLINE,
        stream.write_all(format!("{reply}\n").as_bytes()),
    )
    .await;
}

async fn request(line: &str, tx: &mpsc::Sender<Msg>) -> String {
    let mut words = line.split_whitespace();
    match words.next() {
        Some("ping") => {
            let _ = tx.try_send(Msg::Wake(words.next().map(str::to_string)));
            "ok".to_string()
        }
        Some("status") => {
            let (rtx, rrx) = tokio::sync::oneshot::channel();
            let _ = tx.send(Msg::Status(rtx)).await;
            tokio::time::timeout(Duration::from_secs(2), rrx)
                .await
                .ok()
                .and_then(|r| r.ok())
                .map(|v| v.to_string())
                .unwrap_or_else(|| "{}".into())
        }
        Some("stop") => {
            let _ = tx.send(Msg::Stop).await;
            "stopping".to_string()
        }
        _ => "error: unknown request; use ping, status or stop".to_string(),
    }
}
