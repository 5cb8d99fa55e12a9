//! Timings of the hot path's steps (checkout, the sandbox's set-up, the command), printed on
//! stderr when `GIT_SANDBOX_TRACE` is set: where a run's milliseconds go, measured on the machine
//! at hand.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `GIT_SANDBOX_TRACE` is set (to anything but empty or `0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("GIT_SANDBOX_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in every process, so the helper's steps line
/// up with the supervisor's.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writing into a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Print one line: what took how long.
pub fn line(what: &str, ms: f64) {
    eprintln!("trace: {what:<28} {ms:>8.2} ms");
}

/// A step that prints its duration when it ends (when tracing).
pub struct Span {
    what: &'static str,
    start: Option<Instant>,
}

pub fn span(what: &'static str) -> Span {
    Span {
        what,
        start: enabled().then(Instant::now),
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(s) = self.start {
            line(self.what, s.elapsed().as_secs_f64() * 1000.0);
        }
    }
}
