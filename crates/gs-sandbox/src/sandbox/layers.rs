//! Build caches as overlay layers. A branch's cache is a directory laid out like a run's
//! directory (`tree/`, `home/`) and used as an overlay lower layer above the kept checkout, so a
//! run starts with the `target/`, `node_modules/` or `~/.cache` its branch left. What the run
//! writes lands in its upper layer (a tmpfs bounded by `disk_mb`); once the command has ended,
//! the helper — outside the sandbox's confinement, never following a link — merges the upper's
//! changes under the cached paths into the branch's own layer, with overlayfs' own notation
//! (whiteouts for deletions, opaque directories), so the next run sees what this one left. A
//! branch only ever writes its own layer: production's is written only by production's runs.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

mod fold;
mod reuse;
pub use fold::fold;

/// How a build cache's next generation is named while a run's writes are merged into it. The
/// helper leaves such a stage as it is (no `layer/`, no `added`) when the run wrote nothing under
/// the cached paths, unless it starts a base (holds `base`): the supervisor keeps it for its
/// next run. Any other place writes are merged into (a setup step's layer) is always made.
pub const STAGE_PREFIX: &str = "new-";
/// How an agent workspace's next layer is named while a command writes it: not a build cache's
/// stage, so what the command wrote is kept whole (its start-up files among it).
pub const WORK_STAGE_PREFIX: &str = "work-";

/// What a merge did.
#[derive(Debug, Default)]
pub struct Merged {
    pub files: u64,
    pub bytes: u64,
    /// Files with several names (cargo links each binary it builds under two, pnpm and uv link
    /// every installed file from their store): the first name merged, by (device, inode) in the
    /// upper layer, as the merge it was in and its path there, so the others become links to
    /// it. A path, not a descriptor: one descriptor per such file ran out of open files on a
    /// pnpm install of 48,000 files.
    links: std::collections::HashMap<(u64, u64), (usize, Vec<u8>)>,
    /// The `into` of each call of [`merge`], what those paths are relative to.
    roots: Vec<OwnedFd>,
    /// The first entry that did not arrive (its path, why) and how many did not.
    failed: Option<(String, String)>,
    failures: u64,
    /// The layers below the run, whose files a copied-up file is linked back to.
    below: reuse::Below,
    /// Refuse the files that run code at a program's start ([`startup_file`]): a build cache's
    /// merge (never a setup step's, whose `pip install -e .` writes a `.pth`).
    refuse_startup: bool,
    /// The start-up files a run wrote that were not kept, up to a few paths, and how many.
    pub refused: Vec<String>,
    pub refused_count: u64,
    /// A fold keeps every whiteout, not only those hiding a name of the layers below it (an
    /// agent workspace's layers lie over a checkout the fold does not see).
    keep_whiteouts: bool,
}

impl Merged {
    /// A merge of a run's writes over `layers` (the cache layers it ran on, on the file system
    /// of the merge's `into`): a file the run copied up from one of them unchanged is linked to
    /// it, not copied.
    pub fn over(layers: Vec<OwnedFd>) -> Merged {
        Merged {
            below: reuse::Below::new(layers),
            ..Merged::default()
        }
    }

    /// A fold of layers over something it does not see: every whiteout is kept.
    pub fn keeping_every_whiteout(mut self) -> Merged {
        self.keep_whiteouts = true;
        self
    }

    /// A build cache's merge: the start-up files a run wrote are not kept ([`startup_file`]).
    pub fn refusing_startup_files(mut self) -> Merged {
        self.refuse_startup = true;
        self
    }

    fn refuse(&mut self, path: &[u8]) {
        self.refused_count += 1;
        if self.refused.len() < 3 {
            self.refused
                .push(String::from_utf8_lossy(path).into_owned());
        }
    }

    /// Why the merge is incomplete, naming the first entry that did not arrive; `None` when
    /// every entry did. A layer missing entries is not to be used.
    pub fn failure(&self) -> Option<String> {
        let (path, why) = self.failed.as_ref()?;
        let more = match self.failures {
            0 | 1 => String::new(),
            n => format!(" (and {} more entries)", n - 1),
        };
        Some(format!("{path}: {why}{more}"))
    }

    fn fail(&mut self, path: &[u8], why: String) {
        self.failures += 1;
        if self.failed.is_none() {
            self.failed = Some((String::from_utf8_lossy(path).into_owned(), why));
        }
    }
}

/// Whether a file named `name` in the directory `dir` (its path below the merge's root) is one
/// that a program reads at its start and that can make it run code: Python's `.pth` files and
/// `sitecustomize`/`usercustomize`, npm's and yarn's rc files (`node-options`), shell rc files,
/// git's and pip's config, cargo's config (`rustflags`, runners). A build cache never carries
/// one a run wrote: it would run in the branch's next runs, whatever their commit holds. The
/// files themselves are not the guarantee (a run can also patch a cached dependency): a verdict
/// that decides is witnessed cold.
pub fn startup_file(dir: &[u8], name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[
        b".npmrc",
        b".yarnrc",
        b".yarnrc.yml",
        b".bashrc",
        b".bash_profile",
        b".bash_login",
        b".bash_logout",
        b".profile",
        b".zshrc",
        b".zshenv",
        b".zprofile",
        b".kshrc",
        b".mkshrc",
        b".inputrc",
        b".gitconfig",
        b"pip.conf",
        b"pip.ini",
        b".pydistutils.cfg",
        b".pythonrc",
        b".pythonrc.py",
    ];
    if NAMES.contains(&name) || name.ends_with(b".pth") {
        return true;
    }
    if name.starts_with(b"sitecustomize") || name.starts_with(b"usercustomize") {
        return true;
    }
    // `~/.config/git/config`, `.cargo/config(.toml)`.
    let last = dir.rsplit(|&b| b == b'/').next().unwrap_or(dir);
    (last == b".cargo" && (name == b"config" || name == b"config.toml"))
        || (dir.ends_with(b".config/git") && name == b"config")
}

fn last_error() -> String {
    super::errno_text(&std::io::Error::last_os_error())
}

fn cstr(s: &[u8]) -> Option<CString> {
    CString::new(s).ok()
}

fn openat(dir: i32, name: &[u8], flags: i32) -> Option<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: openat with a valid descriptor and NUL-terminated name; the result is owned below.
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
    };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open the directory `path` (components separated by `/`) under `dir`, never through a link.
pub fn open_dir_beneath(dir: i32, path: &str) -> Option<OwnedFd> {
    open_beneath(dir, path.as_bytes())
}

fn open_beneath(dir: i32, path: &[u8]) -> Option<OwnedFd> {
    let mut cur = openat(dir, b".", libc::O_DIRECTORY | libc::O_RDONLY)?;
    for comp in path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        if comp == b".." {
            return None;
        }
        cur = openat(cur.as_raw_fd(), comp, libc::O_DIRECTORY | libc::O_RDONLY)?;
    }
    Some(cur)
}

fn lstatat(dir: i32, name: &[u8]) -> Option<libc::stat> {
    let c = cstr(name)?;
    // SAFETY: a zeroed stat filled by the kernel.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0).then_some(st)
    }
}

/// Remove `name` in `dir`, a directory with everything under it included.
fn remove_at(dir: i32, name: &[u8]) {
    let Some(c) = cstr(name) else { return };
    // SAFETY: unlinkat with a valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir, c.as_ptr(), 0) } == 0 {
        return;
    }
    if let Some(sub) = openat(dir, name, libc::O_DIRECTORY | libc::O_RDONLY) {
        for entry in entries(sub.as_raw_fd()).unwrap_or_default() {
            remove_at(sub.as_raw_fd(), &entry);
        }
    }
    // SAFETY: as above.
    unsafe { libc::unlinkat(dir, c.as_ptr(), libc::AT_REMOVEDIR) };
}

/// The names in the directory `dir` (not `.` and `..`), read from the descriptor itself: the
/// helper sees no `/proc` of its own once its init mounted the new PID namespace's.
fn entries(dir: i32) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    // SAFETY: fdopendir takes a duplicate we own; readdir's entries are read at once, and the
    // stream (with its descriptor) is closed on every path.
    unsafe {
        let fd = libc::openat(
            dir,
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            libc::close(fd);
            return None;
        }
        loop {
            let e = libc::readdir(stream);
            if e.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                out.push(name.to_vec());
            }
        }
        libc::closedir(stream);
    }
    Some(out)
}

fn is_opaque(fd: i32) -> bool {
    let mut buf = [0u8; 4];
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        // SAFETY: reading an xattr into a local buffer.
        let n = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 1 && buf[0] == b'y' {
            return true;
        }
    }
    false
}

fn set_opaque(fd: i32) {
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        // SAFETY: writing an xattr from a local buffer; which namespace works depends on the
        // mounter's privileges, so both are tried.
        unsafe { libc::fsetxattr(fd, name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    }
}

/// The mode a cached file or directory gets: its own, without set-id bits, and with what its
/// owner may do also allowed to the group every run shares (a run of another slot, with another
/// uid, builds on it).
fn cached_mode(mode: u32) -> u32 {
    let mode = mode & 0o777;
    mode | ((mode & 0o700) >> 3)
}

/// Merge everything under `from` into `into`, as overlayfs would see `into` over what is below.
///
/// `from` is a directory of the run's upper layer, `into` the same path in the branch's layer.
/// Files are owned by `owner` (uid, gid); set-id bits are dropped; times are kept (build tools
/// compare them). `at` names `into` in failures; an entry that could not be merged is counted in
/// `out` ([`Merged::failure`]) and the merge goes on, so that the failure names the first one.
pub fn merge(from: i32, into: i32, at: &str, owner: (u32, u32), out: &mut Merged) {
    // SAFETY: dup of a descriptor we were given, owned by `out`.
    let dup = unsafe { libc::fcntl(into, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        out.fail(at.as_bytes(), last_error());
        return;
    }
    // SAFETY: a fresh descriptor we own.
    out.roots.push(unsafe { OwnedFd::from_raw_fd(dup) });
    let root = out.roots.len() - 1;
    let mut cursor = Cursor {
        root,
        at: at.trim_end_matches('/').as_bytes().to_vec(),
        rel: Vec::new(),
        dir: None,
    };
    merge_dir(from, into, &mut cursor, owner, out);
}

/// Where a merge is: the path below its root, and the one directory opened to link a file's
/// later names to its first.
struct Cursor {
    root: usize,
    at: Vec<u8>,
    rel: Vec<u8>,
    dir: Option<(usize, Vec<u8>, OwnedFd)>,
}

impl Cursor {
    fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
        let mut p = base.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        p
    }

    /// The path shown in a failure.
    fn shown(&self, name: &[u8]) -> Vec<u8> {
        Cursor::join(&Cursor::join(&self.at, &self.rel), name)
    }
}

fn merge_dir(from: i32, into: i32, cur: &mut Cursor, owner: (u32, u32), out: &mut Merged) {
    let (uid, gid) = owner;
    let Some(names) = entries(from) else {
        out.fail(&cur.shown(b""), format!("cannot read: {}", last_error()));
        return;
    };
    for name in names {
        let Some(c) = cstr(&name) else { continue };
        let Some(st) = lstatat(from, &name) else {
            out.fail(&cur.shown(&name), last_error());
            continue;
        };
        let kind = st.st_mode & libc::S_IFMT;
        let whiteout = kind == libc::S_IFCHR && st.st_rdev == 0;
        if out.refuse_startup && !whiteout {
            let dir = Cursor::join(&cur.at, &cur.rel);
            if startup_file(&dir, &name) {
                out.refuse(&cur.shown(&name));
                continue;
            }
        }
        match kind {
            libc::S_IFCHR if st.st_rdev == 0 => {
                // A whiteout: gone in the merged view; say so in the layer too.
                remove_at(into, &name);
                // SAFETY: mknodat with a valid descriptor and NUL-terminated name.
                if unsafe { libc::mknodat(into, c.as_ptr(), libc::S_IFCHR, 0) } != 0 {
                    out.fail(&cur.shown(&name), last_error());
                }
            }
            libc::S_IFDIR => {
                let Some(src) = openat(from, &name, libc::O_DIRECTORY | libc::O_RDONLY) else {
                    out.fail(&cur.shown(&name), last_error());
                    continue;
                };
                let opaque = is_opaque(src.as_raw_fd());
                let existing = lstatat(into, &name);
                if opaque || existing.is_some_and(|e| e.st_mode & libc::S_IFMT != libc::S_IFDIR) {
                    remove_at(into, &name);
                }
                // SAFETY: mkdirat with a valid descriptor and NUL-terminated name.
                unsafe { libc::mkdirat(into, c.as_ptr(), 0o755) };
                let Some(dst) = openat(into, &name, libc::O_DIRECTORY | libc::O_RDONLY) else {
                    out.fail(&cur.shown(&name), last_error());
                    continue;
                };
                if opaque {
                    set_opaque(dst.as_raw_fd());
                }
                let below = Cursor::join(&cur.rel, &name);
                let parent = std::mem::replace(&mut cur.rel, below);
                merge_dir(src.as_raw_fd(), dst.as_raw_fd(), cur, owner, out);
                cur.rel = parent;
                // SAFETY: plain calls on a descriptor we own.
                unsafe {
                    libc::fchown(dst.as_raw_fd(), uid, gid);
                    libc::fchmod(dst.as_raw_fd(), cached_mode(st.st_mode));
                }
            }
            libc::S_IFREG => {
                remove_at(into, &name);
                let key = (st.st_dev, st.st_ino);
                if st.st_nlink > 1 && link_to_first(key, into, &c, cur, out) {
                    out.files += 1;
                    continue;
                }
                let dir = Cursor::join(&cur.at, &cur.rel);
                let copied = if out.below.link((from, &dir), &name, &st, into) {
                    Ok(())
                } else {
                    copy_file(from, into, &name, &st, owner)
                };
                match copied {
                    Ok(()) => {
                        out.files += 1;
                        out.bytes += st.st_size as u64;
                        if st.st_nlink > 1 {
                            out.links
                                .entry(key)
                                .or_insert_with(|| (cur.root, Cursor::join(&cur.rel, &name)));
                        }
                    }
                    Err(why) => out.fail(&cur.shown(&name), why),
                }
            }
            libc::S_IFLNK => {
                remove_at(into, &name);
                let mut target = vec![0u8; 4096];
                // SAFETY: reading a link into a local buffer of the size passed.
                let n = unsafe {
                    libc::readlinkat(from, c.as_ptr(), target.as_mut_ptr().cast(), target.len())
                };
                if n <= 0 {
                    out.fail(&cur.shown(&name), last_error());
                    continue;
                }
                target.truncate(n as usize);
                let Some(t) = cstr(&target) else { continue };
                // SAFETY: symlinkat and fchownat with valid strings and descriptor.
                unsafe {
                    if libc::symlinkat(t.as_ptr(), into, c.as_ptr()) != 0 {
                        out.fail(&cur.shown(&name), last_error());
                        continue;
                    }
                    libc::fchownat(into, c.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW);
                }
                out.files += 1;
            }
            // FIFOs, sockets and devices are no cache.
            _ => {}
        }
    }
}

/// Link `name` in `into` to the first name merged of the file `key`, if there was one. The
/// directory of that first name is opened again from its merge's root, never through a link
/// (the layer is only written by this merge), and kept open for the next name: an install
/// links many files of one directory in turn.
fn link_to_first(
    key: (u64, u64),
    into: i32,
    name: &CString,
    cur: &mut Cursor,
    out: &Merged,
) -> bool {
    let Some((root, path)) = out.links.get(&key) else {
        return false;
    };
    let (dir, file) = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&path[..0], &path[..]),
    };
    let cached = cur
        .dir
        .as_ref()
        .is_some_and(|(r, d, _)| r == root && d.as_slice() == dir);
    if !cached {
        let Some(root_fd) = out.roots.get(*root) else {
            return false;
        };
        let Some(fd) = open_beneath(root_fd.as_raw_fd(), dir) else {
            return false;
        };
        cur.dir = Some((*root, dir.to_vec(), fd));
    }
    let (Some((_, _, dir_fd)), Some(first)) = (cur.dir.as_ref(), cstr(file)) else {
        return false;
    };
    // SAFETY: linkat between descriptors we hold, NUL-terminated names.
    unsafe { libc::linkat(dir_fd.as_raw_fd(), first.as_ptr(), into, name.as_ptr(), 0) == 0 }
}

/// Append `text` to the file `name` in `dir` (made if need be, never through a link).
pub fn append_at(dir: i32, name: &str, text: &str) {
    let Ok(c) = CString::new(name) else { return };
    // SAFETY: openat with a valid descriptor and NUL-terminated name; closed below.
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        // SAFETY: writing a local buffer to a descriptor we own, then closing it.
        unsafe {
            libc::write(fd, text.as_ptr().cast(), text.len());
            libc::close(fd);
        }
    }
}

fn copy_file(
    from: i32,
    into: i32,
    name: &[u8],
    st: &libc::stat,
    owner: (u32, u32),
) -> Result<(), String> {
    let Some(src) = openat(from, name, libc::O_RDONLY | libc::O_NONBLOCK) else {
        return Err(format!("cannot open: {}", last_error()));
    };
    let Some(c) = cstr(name) else {
        return Err("a NUL in the name".into());
    };
    let mode = cached_mode(st.st_mode);
    // SAFETY: openat with a valid descriptor and NUL-terminated name; owned below.
    let fd = unsafe {
        libc::openat(
            into,
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(format!("cannot create: {}", last_error()));
    }
    // SAFETY: a fresh descriptor we own.
    let dst = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut src_file = std::fs::File::from(src);
    let mut dst_file = std::fs::File::from(dst);
    if let Err(e) = std::io::copy(&mut src_file, &mut dst_file) {
        // SAFETY: removing the half-written file we created.
        unsafe { libc::unlinkat(into, c.as_ptr(), 0) };
        return Err(format!("cannot copy: {}", super::errno_text(&e)));
    }
    let times = [
        libc::timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec,
        },
        libc::timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec,
        },
    ];
    // SAFETY: plain calls on a descriptor we own.
    unsafe {
        libc::fchown(dst_file.as_raw_fd(), owner.0, owner.1);
        libc::fchmod(dst_file.as_raw_fd(), mode);
        libc::futimens(dst_file.as_raw_fd(), times.as_ptr());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(p).unwrap())
    }

    #[test]
    fn a_build_caches_merge_keeps_no_start_up_file_a_setup_layers_does() {
        let d = tempfile::tempdir().unwrap();
        let up = d.path().join("up");
        let site = "home/.local/lib/python3.11/site-packages";
        for (path, body) in [
            (format!("{site}/evil.pth"), "import evil"),
            (format!("{site}/sitecustomize.py"), "import evil"),
            (format!("{site}/usercustomize/__init__.py"), "import evil"),
            (format!("{site}/kept.py"), "x = 1"),
            ("home/.npmrc".into(), "node-options=--require ./q.js"),
            ("home/.bashrc".into(), "evil"),
            ("home/.config/git/config".into(), "[core]"),
            ("home/.cargo/config.toml".into(), "[build]"),
            ("tree/node_modules/a/index.js".into(), "module.exports = 1"),
            ("tree/node_modules/a/.yarnrc.yml".into(), "x"),
        ] {
            let p = up.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let merge_all = |layer: &std::path::Path, out: &mut Merged| {
            std::fs::create_dir_all(layer).unwrap();
            merge(
                dir_fd(&up).as_raw_fd(),
                dir_fd(layer).as_raw_fd(),
                "",
                (0, 0),
                out,
            );
        };
        let cache = d.path().join("cache");
        let mut out = Merged::default().refusing_startup_files();
        merge_all(&cache, &mut out);
        assert!(cache.join(format!("{site}/kept.py")).is_file());
        assert!(cache.join("tree/node_modules/a/index.js").is_file());
        for gone in [
            format!("{site}/evil.pth"),
            format!("{site}/sitecustomize.py"),
            format!("{site}/usercustomize"),
            "home/.npmrc".into(),
            "home/.bashrc".into(),
            "home/.config/git/config".into(),
            "home/.cargo/config.toml".into(),
            "tree/node_modules/a/.yarnrc.yml".into(),
        ] {
            assert!(!cache.join(&gone).exists(), "{gone} kept");
        }
        assert_eq!(out.refused_count, 8);
        assert_eq!(out.refused.len(), 3, "a few named");
        assert!(out.failure().is_none());
        // A setup step's layer keeps what the install wrote (`pip install -e .`'s `.pth`).
        let setup = d.path().join("setup");
        let mut out = Merged::default();
        merge_all(&setup, &mut out);
        assert!(setup.join(format!("{site}/evil.pth")).is_file());
        assert_eq!(out.refused_count, 0);
    }

    #[test]
    fn a_merge_copies_files_links_and_deletions_never_following_a_link() {
        let d = tempfile::tempdir().unwrap();
        let (up, layer) = (d.path().join("up"), d.path().join("layer"));
        std::fs::create_dir_all(up.join("target/debug")).unwrap();
        std::fs::create_dir_all(layer.join("target/old")).unwrap();
        std::fs::write(layer.join("target/stale.txt"), "stale").unwrap();
        std::fs::write(layer.join("target/old/x"), "x").unwrap();
        std::fs::write(up.join("target/debug/app"), "binary").unwrap();
        std::fs::set_permissions(
            up.join("target/debug/app"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", up.join("target/link")).unwrap();
        // Two names of one file (cargo's deps/app-hash and app): one copy, two names.
        std::fs::create_dir_all(up.join("target/debug/deps")).unwrap();
        std::fs::write(up.join("target/debug/deps/lib-1"), "a library").unwrap();
        std::fs::hard_link(
            up.join("target/debug/deps/lib-1"),
            up.join("target/debug/lib"),
        )
        .unwrap();
        // A deletion, as overlayfs records it (needs CAP_MKNOD: tests run as root).
        let c = CString::new(up.join("target/stale.txt").as_os_str().as_bytes()).unwrap();
        // SAFETY: mknod with a valid path.
        let whiteout = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) } == 0;
        let mut out = Merged::default();
        merge(
            dir_fd(&up).as_raw_fd(),
            dir_fd(&layer).as_raw_fd(),
            "layer",
            (12345, 54321),
            &mut out,
        );
        assert_eq!(
            std::fs::read_to_string(layer.join("target/debug/app")).unwrap(),
            "binary"
        );
        let meta = std::fs::metadata(layer.join("target/debug/app")).unwrap();
        assert_eq!(
            meta.mode() & 0o7777,
            0o775,
            "set-id dropped, the group may write"
        );
        assert_eq!((meta.uid(), meta.gid()), (12345, 54321));
        let (a, b) = (
            std::fs::metadata(layer.join("target/debug/deps/lib-1")).unwrap(),
            std::fs::metadata(layer.join("target/debug/lib")).unwrap(),
        );
        assert_eq!(
            (a.ino(), a.nlink()),
            (b.ino(), 2),
            "linked, not copied twice"
        );
        assert_eq!(out.bytes, "binary".len() as u64 + "a library".len() as u64);
        assert_eq!(
            std::fs::read_link(layer.join("target/link")).unwrap(),
            std::path::Path::new("/etc/passwd"),
            "a link is copied as a link"
        );
        assert!(
            layer.join("target/old/x").exists(),
            "untouched entries stay"
        );
        if whiteout {
            let st = std::fs::symlink_metadata(layer.join("target/stale.txt")).unwrap();
            assert!(std::os::unix::fs::FileTypeExt::is_char_device(
                &st.file_type()
            ));
        }
        assert!(out.bytes >= 6 && out.files >= 2, "{out:?}");
    }

    #[test]
    fn a_merge_that_misses_an_entry_says_which_and_why() {
        let d = tempfile::tempdir().unwrap();
        let (up, layer) = (d.path().join("up"), d.path().join("layer"));
        std::fs::create_dir_all(up.join("deps")).unwrap();
        std::fs::create_dir_all(&layer).unwrap();
        std::fs::write(up.join("deps/big"), vec![7u8; 1 << 20]).unwrap();
        // A layer with no room for it (tests run as root, which may mount).
        let target = CString::new(layer.as_os_str().as_bytes()).unwrap();
        // SAFETY: mount with valid NUL-terminated strings.
        let mounted = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=64k".as_ptr().cast(),
            )
        } == 0;
        if !mounted {
            eprintln!("cannot mount a tmpfs here: skipped");
            return;
        }
        let mut out = Merged::default();
        merge(
            dir_fd(&up).as_raw_fd(),
            dir_fd(&layer).as_raw_fd(),
            "tree",
            (0, 0),
            &mut out,
        );
        // SAFETY: unmounting what we mounted.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let why = out.failure().expect("the merge says it is incomplete");
        assert!(why.starts_with("tree/deps/big: cannot copy: "), "{why}");
        assert!(why.contains("ENOSPC"), "{why}");
    }
}
