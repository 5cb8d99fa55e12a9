//! Which limit ended a run, and how to raise it. The supervisor knows when it stopped a run
//! (timeout, output) or when the kernel did (an OOM kill, the pids cap); a run may also end by
//! itself because a limit took something away: an abort the output puts down to a failed
//! allocation (V8's "Fatal JavaScript invalid size error", "std::bad_alloc") under a memory
//! limit, or a write that found its file system full (ENOSPC on the run's tmpfs).

use gs_config::Limits;
use gs_model::KilledBy;

/// The limit a run that ended by itself (non-zero, not stopped by the supervisor) ran into,
/// read from how it ended and what it printed last.
pub fn attribute(
    exit_code: Option<i32>,
    signal: Option<i32>,
    output_tail: &str,
    limits: &Limits,
) -> Option<KilledBy> {
    if exit_code == Some(0) {
        return None;
    }
    let text = output_tail.to_ascii_lowercase();
    let aborted = signal == Some(libc::SIGABRT) || exit_code == Some(128 + libc::SIGABRT);
    const ALLOCATION: &[&str] = &[
        "out of memory",
        "bad_alloc",
        "cannot allocate memory",
        "memory allocation of",
        "allocation failed",
        "failed to allocate",
        "heap limit",
    ];
    if limits.memory_mb > 0 && aborted && ALLOCATION.iter().any(|p| text.contains(p)) {
        return Some(KilledBy::Memory);
    }
    if limits.disk_mb > 0 && (text.contains("no space left on device") || text.contains("enospc")) {
        return Some(KilledBy::Disk);
    }
    None
}

/// The one-line reason a run stopped by `killed_by` gives, naming the limit and how to raise
/// it; `None` for what is no limit of the user's (an interrupt, a signal). `what` is "the
/// tests" or "the check `lint`", `were` its verb.
pub fn explain(killed_by: &KilledBy, limits: &Limits, what: &str, were: &str) -> Option<String> {
    const RAISE: &str = "raise it under [limits] in your user config (~/.config/git-sandbox/config.toml; a repository's config may only lower it)";
    let (why, key) = match killed_by {
        KilledBy::Memory => (
            format!(
                "ran out of memory under [limits] memory_mb = {} (memory in use, with what it wrote to its tmpfs where a cgroup counts it)",
                limits.memory_mb
            ),
            "memory_mb",
        ),
        KilledBy::Disk => (
            format!(
                "filled the {} MiB its writes may take ([limits] disk_mb)",
                limits.disk_mb
            ),
            "disk_mb",
        ),
        KilledBy::Processes => (
            format!(
                "hit the cap of {} processes ([limits] processes)",
                limits.processes
            ),
            "processes",
        ),
        KilledBy::FileSize => (
            format!(
                "wrote a file past [limits] file_size_mb = {}",
                limits.file_size_mb
            ),
            "file_size_mb",
        ),
        KilledBy::Output => (
            format!(
                "printed more than [limits] output_bytes = {}",
                limits.output_bytes
            ),
            "output_bytes",
        ),
        _ => return None,
    };
    Some(format!("{what} {why} and {were} stopped; {RAISE} ({key})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abort_put_down_to_an_allocation_is_the_memory_limit() {
        let limits = gs_config::Config::default().limits;
        let v8 = "<--- Last few GCs --->\nFATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\nAborted";
        assert_eq!(
            attribute(Some(134), None, v8, &limits),
            Some(KilledBy::Memory)
        );
        assert_eq!(
            attribute(
                None,
                Some(libc::SIGABRT),
                "terminate called after throwing an instance of 'std::bad_alloc'",
                &limits
            ),
            Some(KilledBy::Memory)
        );
        // An abort of another cause, or a failure that only mentions memory, is no limit's.
        assert_eq!(
            attribute(Some(134), None, "assertion failed", &limits),
            None
        );
        assert_eq!(
            attribute(Some(1), None, "test_out_of_memory FAILED", &limits),
            None
        );
        assert_eq!(
            attribute(
                Some(1),
                None,
                "npm ERR! code ENOSPC\nnpm ERR! nospc ENOSPC: no space left on device, write",
                &limits
            ),
            Some(KilledBy::Disk)
        );
        assert_eq!(attribute(Some(0), None, "ENOSPC", &limits), None);
    }
}
