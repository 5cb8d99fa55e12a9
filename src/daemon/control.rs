//! The control socket: `ping [REPO]` wakes the scheduler, `status` answers with JSON, `stop`
//! asks for a graceful stop. The listener thread only forwards messages.

use super::{DaemonError, Msg};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

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
    let listener = UnixListener::bind(&path).map_err(|source| DaemonError::Bind {
        path: path.clone(),
        source,
    })?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let tx = tx.clone();
                // One short-lived thread per client keeps a slow client from blocking pings.
                let _ = std::thread::Builder::new().spawn(move || serve(stream, &tx));
            }
        })
        .expect("spawning a thread");
    Ok(Listener { path })
}

fn serve(stream: UnixStream, tx: &mpsc::SyncSender<Msg>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
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
    let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
}
