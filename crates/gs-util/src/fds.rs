//! Descriptors this process was handed and must not pass on: closing them, or marking them
//! close-on-exec, from a number up. A shell that ran `exec 7<secret` before starting us would
//! otherwise lend fd 7 to every process we start, the sandboxed command among them.

/// The highest descriptor number, for "to the end".
const ALL: u32 = u32::MAX;

/// `close_range(first, last, flags)`; false when the kernel has no such call (before 5.9, or
/// 5.11 for `CLOSE_RANGE_CLOEXEC`) or refused it.
fn close_range(first: u32, last: u32, flags: u32) -> bool {
    // SAFETY: a plain system call on this process's own descriptor table.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) == 0 }
}

/// The descriptors at or above `first` that this process holds. From `/proc/self/fd`, else
/// every number below the open-files limit (bounded) that `fcntl` finds open.
fn open_from(first: i32) -> Vec<i32> {
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        let mut out: Vec<i32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd >= first)
            .collect();
        out.sort_unstable();
        // The directory's own descriptor is in the list; it is closed by now (EBADF is harmless).
        return out;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reading a limit into a local.
    let most = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 16) as i32
    } else {
        1 << 16
    };
    // SAFETY: F_GETFD only asks whether the number is open.
    (first..most)
        .filter(|fd| unsafe { libc::fcntl(*fd, libc::F_GETFD) } >= 0)
        .collect()
}

/// Close every descriptor from `first` up to `last` (inclusive). Only for a single-threaded
/// process, or one whose other threads own nothing in that range.
pub fn close_between(first: i32, last: u32) {
    if first < 0 || first as u32 > last || close_range(first as u32, last, 0) {
        return;
    }
    for fd in open_from(first) {
        if fd as u32 <= last {
            // SAFETY: closing a descriptor of this process that no one else uses (see above).
            unsafe { libc::close(fd) };
        }
    }
}

/// Close every descriptor from `first` up.
pub fn close_from(first: i32) {
    close_between(first, ALL);
}

/// Mark every descriptor from `first` up close-on-exec: this process keeps using them, no
/// process it starts gets them.
pub fn cloexec_from(first: i32) {
    if first < 0 || close_range(first as u32, ALL, libc::CLOSE_RANGE_CLOEXEC) {
        return;
    }
    for fd in open_from(first) {
        // SAFETY: setting a flag on a descriptor of this process (a closed one fails: EBADF).
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child, which alone may close what it likes: a descriptor left open without
    /// close-on-exec is marked, one past `first` is closed, those below are untouched.
    #[test]
    fn descriptors_from_a_number_up_are_marked_then_closed() {
        // SAFETY: the child only makes system calls (and reads /proc) and leaves with _exit.
        unsafe {
            let child = libc::fork();
            if child == 0 {
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                let high = libc::fcntl(fd, libc::F_DUPFD, 200);
                cloexec_from(high);
                let marked = libc::fcntl(high, libc::F_GETFD) & libc::FD_CLOEXEC != 0;
                let low_kept = libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC == 0;
                close_from(high);
                let closed = libc::fcntl(high, libc::F_GETFD) < 0;
                let still = libc::fcntl(fd, libc::F_GETFD) >= 0;
                libc::_exit(if marked && low_kept && closed && still {
                    0
                } else {
                    3
                });
            }
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
            assert!(libc::WIFEXITED(status), "status {status:#x}");
            assert_eq!(libc::WEXITSTATUS(status), 0);
        }
    }
}
