//! Timings of the hot path's steps (checkout, the sandbox's set-up, the command): where a run's
//! milliseconds go, measured on the machine at hand. Printed on stderr when `GIT_SANDBOX_TRACE`
//! is set, and always given to `tracing` as spans and events of the target `timings` at debug
//! level, so a log filter (`GIT_SANDBOX_LOG=timings=debug`) puts them in the daemon's log.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `GIT_SANDBOX_TRACE` is set (to anything but empty or `0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("GIT_SANDBOX_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// The `tracing` target of the timings.
pub const TARGET: &str = "timings";

/// Whether the timings are wanted at all: on stderr, or by the log's filter.
pub fn wanted() -> bool {
    enabled() || tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
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

/// One step's duration: a line on stderr (with `GIT_SANDBOX_TRACE`) and a debug event in the
/// log. Also for steps measured elsewhere (the sandbox helper's, on its own monotonic clock).
pub fn line(what: &str, ms: f64) {
    if enabled() {
        eprintln!("trace: {what:<28} {ms:>8.2} ms");
    }
    tracing::debug!(target: TARGET, step = what, ms = (ms * 100.0).round() / 100.0, "took");
}

/// A step that reports its duration when it ends (when wanted), inside a `tracing` span of the
/// same name, so what is logged during the step carries it.
pub struct Span {
    what: &'static str,
    start: Option<Instant>,
    _span: tracing::span::EnteredSpan,
}

pub fn span(what: &'static str) -> Span {
    Span {
        what,
        _span: tracing::debug_span!(target: TARGET, "step", step = what).entered(),
        start: wanted().then(Instant::now),
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(s) = self.start {
            line(self.what, s.elapsed().as_secs_f64() * 1000.0);
        }
    }
}

/// Logs go to stderr through `tracing`, filtered by `GIT_SANDBOX_LOG` (`info` by default;
/// `debug`, `warn`, or directives like `git_sandbox=debug` or `timings=debug`). A log reader
/// that went away (`daemon 2>&1 | head`) does not stop the process: the write fails with EPIPE
/// (SIGPIPE is ignored there) and the line is dropped.
pub fn init_log() {
    use tracing_subscriber::EnvFilter;
    let (filter, bad) = match std::env::var("GIT_SANDBOX_LOG") {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(v.trim()) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new("info"), Some(format!("{v:?} ({e})"))),
        },
        _ => (EnvFilter::new("info"), None),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
    if let Some(bad) = bad {
        tracing::warn!(
            "GIT_SANDBOX_LOG={bad} is not a log filter; logging at info (write info, debug, warn or error)"
        );
    }
}

/// Whether `GIT_SANDBOX_LOG` asks for a log (the commands other than the daemon log only then).
pub fn log_asked() -> bool {
    std::env::var("GIT_SANDBOX_LOG").is_ok_and(|v| !v.trim().is_empty())
}
