//! Small helpers with no knowledge of the product: time stamps, ids, names, atomic files.

pub mod beneath;
pub mod glob;
pub mod private;
pub mod time;

use std::path::Path;

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
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all().ok();
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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

/// Shorten a 40-hex id the way `git log --oneline` does.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(7)]
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn random_ids_differ() {
        assert_eq!(random_hex(6).len(), 12);
        assert_ne!(random_hex(8), random_hex(8));
    }
}
