//! Bytes both ways between a client and its origin, counted, until either side closes, the
//! connection passes no byte either way for the idle time, or the proxy stops (it shuts the
//! sockets down).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Send `first` to the origin, then relay (at most `up_limit` more bytes to the origin, when
/// given: the rest of a request's body); (bytes to the origin, bytes to the client).
pub fn relay(
    client: TcpStream,
    mut origin: TcpStream,
    first: &[u8],
    up_limit: Option<u64>,
    idle: Duration,
) -> (u64, u64) {
    if !first.is_empty() && origin.write_all(first).is_err() {
        return (0, 0);
    }
    let started = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let (Ok(client2), Ok(origin2)) = (client.try_clone(), origin.try_clone()) else {
        return (first.len() as u64, 0);
    };
    let up = {
        let last = last.clone();
        std::thread::spawn(move || copy(client2, origin2, up_limit, idle, started, &last))
    };
    let down = copy(origin, client, None, idle, started, &last);
    let up = up.join().unwrap_or(0);
    (up + first.len() as u64, down)
}

/// Copy `from` into `to` until the end, an error, or `idle` without a byte either way; then
/// shut both down so the other direction ends too. Returns the bytes copied.
fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    limit: Option<u64>,
    idle: Duration,
    started: Instant,
    last: &AtomicU64,
) -> u64 {
    let tick = idle.min(Duration::from_secs(1));
    let _ = from.set_read_timeout(Some(tick));
    let _ = to.set_write_timeout(Some(idle));
    let mut buf = vec![0u8; 64 * 1024];
    let mut n_total = 0u64;
    // Whether it ended by the end of what `from` sent (else: idle, an error, a stop).
    let mut ended = false;
    loop {
        // A body sent whole: the origin's write side ends; whatever the client sends after it
        // is read and dropped, so the other way goes on until the origin is done.
        if limit.is_some_and(|l| n_total >= l) {
            let _ = to.shutdown(Shutdown::Write);
            drain(&mut from, idle, started, last);
            return n_total;
        }
        let room = limit.map_or(buf.len(), |l| buf.len().min((l - n_total) as usize));
        match from.read(&mut buf[..room]) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                n_total += n as u64;
                last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let quiet = started.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
                if quiet >= idle.as_millis() as u64 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if ended {
        // Half a close: the peer sees the end of what was relayed; the other way goes on.
        let _ = to.shutdown(Shutdown::Write);
        let _ = from.shutdown(Shutdown::Read);
    } else {
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    }
    n_total
}

/// Read and drop what `from` sends until its end or the idle time (no byte either way).
fn drain(from: &mut TcpStream, idle: Duration, started: Instant, last: &AtomicU64) {
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let quiet = started.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
                if quiet >= idle.as_millis() as u64 {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
