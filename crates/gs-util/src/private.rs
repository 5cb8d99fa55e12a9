//! Files and directories only their owner may open (0600 / 0700), whatever the umask: the data
//! directory holds the test output of private repositories.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// `mkdir -p` where every directory it creates is 0700. An existing directory is left as it is.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    // Created one by one, so each new one can be set to 0700 even under a umask like 0200.
    let mut missing = Vec::new();
    let mut p = path;
    while !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err() {
        missing.push(p);
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
            Ok(()) => std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    if path.is_dir() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} exists and is not a directory", path.display()),
        ))
    }
}

/// As [`create_dir_all`], and a directory of ours that others may enter is made 0700.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    create_dir_all(path)?;
    let meta = std::fs::metadata(path)?;
    // SAFETY: plain getter.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == me && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Why a file that must be ours alone cannot be read as such.
#[derive(Debug)]
pub enum NotPrivate {
    /// The path is a symbolic link (never followed).
    Link,
    /// It is not a regular file.
    NotAFile,
    /// Its group or others may read or write it: its mode.
    Open(u32),
    Io(io::Error),
}

/// The text of `path`, a regular file only its owner may read or write, opened without
/// following a link; `None` when there is none.
pub fn read_private(path: &Path) -> Result<Option<String>, NotPrivate> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(NotPrivate::Link),
        Err(e) => return Err(NotPrivate::Io(e)),
    };
    let meta = file.metadata().map_err(NotPrivate::Io)?;
    if !meta.is_file() {
        return Err(NotPrivate::NotAFile);
    }
    if meta.mode() & 0o077 != 0 {
        return Err(NotPrivate::Open(meta.mode() & 0o7777));
    }
    io::read_to_string(file).map(Some).map_err(NotPrivate::Io)
}

/// Create (or truncate) a 0600 file for writing.
pub fn create_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Open a file for reading and writing, creating it 0600; an existing file of ours is made 0600.
pub fn open_rw(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    restrict_file(&file)?;
    Ok(file)
}

/// Make an open file of ours 0600 when others may read it (a file from an older version).
pub fn restrict_file(file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    // SAFETY: plain getter.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == me && meta.mode() & 0o7777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Create `path` as an empty 0600 file unless it exists; an existing file of ours is made 0600.
/// An existing file is never opened: closing a descriptor of a file drops every POSIX lock the
/// process holds on it, and SQLite keeps such locks on its database, `-wal` and `-shm`.
pub fn ensure_file(path: &Path) -> io::Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file.set_permissions(Permissions::from_mode(FILE_MODE)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => restrict_path(path),
        Err(e) => Err(e),
    }
}

/// Make a regular file of ours 0600 by path (chmod, no descriptor: see [`ensure_file`]); a
/// missing file is fine, a symlink is left alone.
pub fn restrict_path(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // SAFETY: plain getter.
    let me = unsafe { libc::geteuid() };
    if meta.is_file() && meta.uid() == me && meta.mode() & 0o7777 != FILE_MODE {
        std::fs::set_permissions(path, Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_private_and_loose_files_are_tightened() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode_of(&d.path().join(p)), 0o700, "{p}");
        }
        let f = deep.join("f");
        drop(create_file(&f).unwrap());
        assert_eq!(mode_of(&f), 0o600);
        std::fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        drop(open_rw(&f).unwrap());
        assert_eq!(mode_of(&f), 0o600);
        std::fs::set_permissions(&f, Permissions::from_mode(0o666)).unwrap();
        restrict_path(&f).unwrap();
        assert_eq!(mode_of(&f), 0o600);
        restrict_path(&deep.join("missing")).unwrap();
        std::fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&f, "kept").unwrap();
        ensure_file(&f).unwrap();
        assert_eq!(mode_of(&f), 0o600);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "kept");
        ensure_file(&deep.join("new")).unwrap();
        assert_eq!(mode_of(&deep.join("new")), 0o600);
        let loose = d.path().join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&loose).unwrap();
        assert_eq!(mode_of(&loose), 0o700);
        std::fs::write(d.path().join("file"), "").unwrap();
        assert!(create_dir_all(&d.path().join("file")).is_err());
    }

    #[test]
    fn a_symlink_is_not_followed_when_creating() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("link")).unwrap();
        assert!(create_file(&d.path().join("link")).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
