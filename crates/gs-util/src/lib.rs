//! Small helpers with no knowledge of the product: time stamps, ids, names, atomic files.

pub mod backoff;
pub mod beneath;
pub mod fds;
pub mod glob;
pub mod hint;
pub mod mount;
pub mod private;
pub mod shell;
pub mod time;
pub mod trace;

use std::path::Path;

/// When `path` was last modified, in ms since the epoch (0 when it cannot be read).
pub fn modified_ms(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// A random id of `bytes` bytes as lowercase hex, from the kernel's random source.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .is_ok();
    if !filled {
        // Fall back to time and pid: ids only need to be unique on this machine.
        let seed = time::now_nanos() ^ ((std::process::id() as u128) << 64);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A name made of `text` that [`name_problem`] accepts: lower-case letters and digits, the rest
/// as single '-' (`"Faster Parser!"` → `faster-parser`).
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(60).collect();
    if out.is_empty() {
        "experiment".into()
    } else {
        out
    }
}

/// Why a name cannot be used for a repository or an experiment, or `None` when it is fine.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    if name.chars().count() > 100 {
        return Some("is longer than 100 characters");
    }
    if name.starts_with('-') {
        return Some("starts with '-'");
    }
    if name.contains('/') || name.contains('\\') {
        return Some("contains a slash");
    }
    if name.contains("..") {
        return Some("contains '..'");
    }
    if name == "." {
        return Some("is '.'");
    }
    if name.chars().any(char::is_whitespace) {
        return Some("contains whitespace");
    }
    if name.chars().any(char::is_control) {
        return Some("contains a control character");
    }
    if name
        .chars()
        .any(|c| matches!(c, ':' | '?' | '*' | '[' | '~' | '^' | '@' | '{'))
    {
        return Some("contains a character git does not allow in branch names (: ? * [ ~ ^ @ {)");
    }
    if name.ends_with(".lock") || name.ends_with('.') {
        return Some("ends with '.lock' or '.'");
    }
    None
}

/// Write `bytes` to `path` through a temp file and a rename, so readers never see half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_file(path, bytes, true)
}

/// As [`write_atomic`], without waiting for the disk: for state that is cheap to lose in a
/// crash and written on a hot path (a hook's), where an fsync would cost milliseconds.
pub fn replace_file(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    if durable {
        tmp.as_file().sync_all().ok();
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// For a long-lived process (the daemon): allocations from at most two malloc arenas, not one
/// per thread that ever allocated (glibc makes up to 8 per core, each keeping what was freed
/// in it). No-op elsewhere than glibc.
pub fn few_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Hand the heap's free pages back to the system (glibc keeps them after a burst of work, such
/// as a full scan reading thousands of records). No-op elsewhere than glibc.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether a process with this pid exists (EPERM counts as alive: it exists, it is not ours).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The bytes the files under `path` take (symbolic links are not followed); 0 when it is gone.
pub fn disk_size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| disk_size(&e.path()))
        .sum()
}

/// Every file some process of this user holds open, read from `/proc/<pid>/fd`; `None` where
/// `/proc` cannot tell (no procfs), so a caller can fall back to caution.
pub fn files_held_open() -> Option<std::collections::HashSet<std::path::PathBuf>> {
    let procs = std::fs::read_dir("/proc").ok()?;
    let mut open = std::collections::HashSet::new();
    let mut seen_any = false;
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        // Processes of other users are not readable, and do not write our files.
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        seen_any = true;
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                open.insert(target);
            }
        }
    }
    seen_any.then_some(open)
}

/// `s` with the characters special in git's value regexes (`git config --unset KEY REGEX`)
/// escaped.
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.^$*+?()[]{}|".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `path` under `base` (an absolute `path` stands for itself), made clean and relative to the
/// root: `.` and empty components dropped, `..` taken back; `None` when it would leave the root.
/// Lexical only: nothing on disk is looked at (so no link is followed).
pub fn path_within(base: &str, path: &str) -> Option<String> {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{base}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in joined.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// `s` percent-encoded for a URL: every byte but the unreserved ones (letters, digits, `-`,
/// `_`, `.`, `~`) and those of `keep` (`/` for a path) as `%XX`.
pub fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// FNV-1a 64 of `bytes` as 16 hex digits: stable across builds and platforms, unlike std's
/// hasher; for fingerprints, not for security.
pub fn fnv64_hex(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `x` rounded to `decimals` places, never `-0.0`: a difference too small to show is no
/// difference, and prints as `0.0`.
pub fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    // Adding 0.0 turns -0.0 into 0.0 and leaves every other value as it is.
    (x * scale).round() / scale + 0.0
}

/// Shorten a 40-hex id the way `git log --oneline` does.
pub fn short(id: &str) -> &str {
    // By characters, not bytes: an id read from a fetched note may hold anything.
    let end = id.char_indices().nth(7).map_or(id.len(), |(i, _)| i);
    &id[..end]
}

/// Run `f` with SIGPIPE blocked on this thread.
///
/// A write into a pipe whose reader has gone (a child that exited early) then fails with EPIPE
/// instead of killing the process: the CLI gives SIGPIPE its default action so that `git sandbox
/// log | head -1` ends quietly. A SIGPIPE raised meanwhile is discarded.
pub fn without_sigpipe<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: signal-set manipulation on local values; the mask change is per thread and undone
    // before returning.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
        let result = f();
        if libc::sigismember(&old, libc::SIGPIPE) == 0 {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            if libc::sigismember(&pending, libc::SIGPIPE) == 1 {
                let now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&pipe, std::ptr::null_mut(), &now);
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_within_the_root() {
        assert_eq!(path_within("/app", "src").as_deref(), Some("app/src"));
        assert_eq!(path_within("/app", "/etc/x").as_deref(), Some("etc/x"));
        assert_eq!(path_within("/app", "./a/../b").as_deref(), Some("app/b"));
        assert_eq!(path_within("", ".").as_deref(), Some(""));
        assert_eq!(path_within("/", "../../etc"), None);
    }

    #[test]
    fn percent_encoding_keeps_the_unreserved_and_what_is_asked() {
        assert_eq!(percent_encode("a b/c~d?é", b""), "a%20b%2Fc~d%3F%C3%A9");
        assert_eq!(percent_encode("/tmp/a b", b"/"), "/tmp/a%20b");
    }

    #[test]
    fn names() {
        assert_eq!(name_problem("good-name_1.2"), None);
        for bad in [
            "", "a/b", "..", "a..b", "a b", "-x", "a\tb", "a\u{7}b", "x.lock",
        ] {
            assert!(name_problem(bad).is_some(), "{bad:?} should be refused");
        }
        assert!(name_problem(&"x".repeat(101)).is_some());
        assert_eq!(name_problem(&"x".repeat(100)), None);
    }

    #[test]
    fn an_open_file_is_seen_and_a_closed_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(d.path()).unwrap().join("x.log");
        let f = std::fs::File::create(&path).unwrap();
        std::fs::write(d.path().join("y.log"), b"abc").unwrap();
        let open = files_held_open().expect("procfs");
        assert!(open.contains(&path));
        assert!(!open.contains(&path.with_file_name("y.log")));
        drop(f);
        assert!(!files_held_open().unwrap().contains(&path));
        assert_eq!(disk_size(d.path()), 3);
    }

    #[test]
    fn random_ids_differ() {
        assert_eq!(random_hex(6).len(), 12);
        assert_ne!(random_hex(8), random_hex(8));
    }

    #[test]
    fn a_write_into_a_closed_pipe_fails_instead_of_killing() {
        // In a forked child, so that SIGPIPE's default action cannot kill the test binary.
        // SAFETY: the child only makes system calls and leaves with _exit.
        unsafe {
            let child = libc::fork();
            if child == 0 {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                let mut fds = [0; 2];
                libc::pipe(fds.as_mut_ptr());
                libc::close(fds[0]);
                let n = without_sigpipe(|| libc::write(fds[1], b"x".as_ptr().cast(), 1));
                let epipe = n < 0 && *libc::__errno_location() == libc::EPIPE;
                let mut pending: libc::sigset_t = std::mem::zeroed();
                libc::sigpending(&mut pending);
                let left = libc::sigismember(&pending, libc::SIGPIPE);
                libc::_exit(if epipe && left == 0 { 0 } else { 3 });
            }
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
            assert!(libc::WIFEXITED(status), "killed: status {status:#x}");
            assert_eq!(libc::WEXITSTATUS(status), 0);
        }
    }
}

#[cfg(test)]
mod short_tests {
    #[test]
    fn short_never_splits_a_character() {
        assert_eq!(super::short("0123456789abcdef"), "0123456");
        assert_eq!(super::short("ééééééééé"), "ééééééé");
        assert_eq!(super::short("ab"), "ab");
    }
}

/// Thousandths of a core as a person writes cores: `1500` as `1.5`, `500` as `0.5`, `2000` as `2`.
pub fn cores_text(millicores: u64) -> String {
    let (whole, frac) = (millicores / 1000, millicores % 1000);
    if frac == 0 {
        return whole.to_string();
    }
    format!("{whole}.{frac:03}")
        .trim_end_matches('0')
        .to_string()
}

/// Thousandths of a core serialized as cores: a whole number as an integer (`2`), else a decimal
/// (`0.5`), as a person writes `[limits] cpu_cores`.
pub fn serialize_cores<S: serde::Serializer>(millicores: u64, s: S) -> Result<S::Ok, S::Error> {
    if millicores.is_multiple_of(1000) {
        s.serialize_u64(millicores / 1000)
    } else {
        s.serialize_f64(millicores as f64 / 1000.0)
    }
}
