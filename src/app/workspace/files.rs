//! A workspace's files for agents that edit without a shell: read, list, write. What the
//! workspace shows at a path is looked up as overlayfs would — its layers topmost first (a
//! whiteout hides, an opaque directory hides what is below it), then the base commit's tree in
//! git — never following a link: a path through a symlink, outside the tree or at a special
//! file is refused. A write becomes a layer of its own, as a command's writes do.

use super::{event, take, Found};
use crate::app::{AppError, Repo, Result};
use gs_git::objects::{self, Kind};
use gs_git::ObjectId;
use gs_model::EventKind;
use serde::Serialize;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The most bytes `read` returns and `write` takes.
pub const MAX_FILE: u64 = 16 << 20;

/// What a path shows.
enum Seen {
    /// A regular file in a layer (its path there) or in the base tree (its blob).
    File {
        at: Where,
        executable: bool,
        size: u64,
    },
    Link(Vec<u8>),
    Dir,
    Special,
    Missing,
    /// A component before the last is a symlink.
    ThroughLink(String),
}

enum Where {
    Layer(PathBuf),
    Blob(ObjectId),
}

/// `path` as the workspace's components, or why it is no path in it.
fn components(path: &str) -> Result<Vec<&str>> {
    let bad = |why: &str| {
        Err(AppError::usage(format!("bad path {path:?}: {why}"))
            .hint("name a path relative to the workspace's root, e.g. src/main.py"))
    };
    let trimmed = path.trim_start_matches("./");
    if path.starts_with('/') {
        return bad("it is absolute (outside the workspace)");
    }
    if path.contains('\0') {
        return bad("it holds a NUL byte");
    }
    let parts: Vec<&str> = trimmed
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return bad("it climbs out with `..`");
    }
    if parts.iter().any(|p| p.eq_ignore_ascii_case(".git")) {
        return bad("`.git` is git's, not the workspace's");
    }
    Ok(parts)
}

fn is_whiteout(m: &std::fs::Metadata) -> bool {
    m.file_type().is_char_device() && m.rdev() == 0
}

/// How one layer answers for `parts`: `Some(seen)` when it decides, `None` when the path is not
/// in it (`hides`: an opaque directory on the way hides the layers below).
fn in_layer(layer: &Path, parts: &[&str], hides: &mut bool) -> Option<Seen> {
    let mut cur = layer.join("tree");
    if std::fs::symlink_metadata(&cur).is_err() {
        return None;
    }
    for (i, part) in parts.iter().enumerate() {
        let p = cur.join(part);
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            return None;
        };
        let last = i + 1 == parts.len();
        if is_whiteout(&m) {
            return Some(Seen::Missing);
        }
        let ft = m.file_type();
        if ft.is_symlink() {
            if last {
                let target = std::fs::read_link(&p).ok()?;
                return Some(Seen::Link(
                    std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec(),
                ));
            }
            return Some(Seen::ThroughLink(parts[..=i].join("/")));
        }
        if ft.is_dir() {
            *hides |= gs_git::upper::is_opaque(&p);
            if last {
                return Some(Seen::Dir);
            }
            cur = p;
            continue;
        }
        if !last {
            // A file where a directory would be: nothing below it.
            return Some(Seen::Missing);
        }
        if ft.is_file() {
            return Some(Seen::File {
                at: Where::Layer(p),
                executable: m.mode() & 0o111 != 0,
                size: m.len(),
            });
        }
        return Some(Seen::Special);
    }
    Some(Seen::Dir)
}

/// What the workspace shows at `parts`, looked up through `layers` (topmost first) and the tree.
fn lookup(repo: &gs_git::Repository, layers: &[PathBuf], tree: ObjectId, parts: &[&str]) -> Seen {
    for layer in layers {
        let mut hides = false;
        if let Some(seen) = in_layer(layer, parts, &mut hides) {
            return seen;
        }
        if hides {
            return Seen::Missing;
        }
    }
    if parts.is_empty() {
        return Seen::Dir;
    }
    for i in 1..=parts.len() {
        let prefix = parts[..i].join("/");
        let Some(e) = objects::entry_at(repo, tree, &prefix) else {
            return Seen::Missing;
        };
        let last = i == parts.len();
        match e.kind {
            Kind::Link if !last => return Seen::ThroughLink(prefix),
            Kind::Link => {
                return Seen::Link(objects::small_blob(repo, e.id, 4096).unwrap_or_default())
            }
            Kind::Tree if last => return Seen::Dir,
            Kind::Tree => {}
            Kind::File | Kind::Executable if last => {
                return Seen::File {
                    size: objects::size(repo, e.id).unwrap_or(0),
                    executable: e.kind == Kind::Executable,
                    at: Where::Blob(e.id),
                }
            }
            _ => return Seen::Missing,
        }
    }
    Seen::Missing
}

/// The workspace's layers and base tree, held still while read.
struct View {
    layers: Vec<PathBuf>,
    _locks: Vec<std::fs::File>,
    tree: ObjectId,
}

fn view(repo: &gs_git::Repository, found: &Found) -> Result<View> {
    let (layers, locks) = gs_runner::caches::workspace_layers(&found.layers());
    Ok(View {
        layers,
        _locks: locks,
        tree: gs_git::commit_info(repo, found.base())?.tree,
    })
}

fn refused_link(name: &str, path: &str, through: &str) -> AppError {
    AppError::refused(format!(
        "{path:?} in workspace {name:?} is reached through the symlink {through:?}, which is not followed"
    ))
    .hint("name the path the link points to, inside the workspace")
}

/// A file as `read` gives it.
#[derive(Debug, Serialize)]
pub struct FileRead {
    pub path: String,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    pub size: u64,
    pub executable: bool,
}

/// `workspace read NAME PATH`: the bytes of a regular file the workspace shows.
pub fn read_file(at: Repo<'_>, name: &str, path: &str) -> Result<FileRead> {
    let parts = components(path)?;
    let found = super::find(at, name)?;
    let v = view(at.repo, &found)?;
    let shown = parts.join("/");
    match lookup(at.repo, &v.layers, v.tree, &parts) {
        Seen::File {
            at: place,
            executable,
            size,
        } => {
            if size > MAX_FILE {
                return Err(AppError::refused(format!(
                    "{shown:?} holds {size} bytes, more than the {} MiB read gives",
                    MAX_FILE >> 20
                ))
                .hint(format!(
                    "read part of it with `git sandbox workspace exec {name} -- head -c 100000 {shown}`"
                )));
            }
            let bytes = match place {
                Where::Blob(id) => objects::small_blob(at.repo, id, MAX_FILE).unwrap_or_default(),
                Where::Layer(p) => read_no_follow(&p, MAX_FILE)?,
            };
            Ok(FileRead {
                path: shown,
                size: bytes.len() as u64,
                bytes,
                executable,
            })
        }
        Seen::Missing => Err(not_found(name, &shown)),
        Seen::Dir => Err(
            AppError::usage(format!("{shown:?} is a directory")).hint(format!(
                "list it with `git sandbox workspace ls {name} {shown}`"
            )),
        ),
        Seen::Link(target) => Err(AppError::refused(format!(
            "{shown:?} is a symlink (to {:?}), which is not followed",
            String::from_utf8_lossy(&target)
        ))
        .hint("read the file it points to, inside the workspace")),
        Seen::Special => Err(special(&shown)),
        Seen::ThroughLink(l) => Err(refused_link(name, &shown, &l)),
    }
}

fn not_found(name: &str, path: &str) -> AppError {
    AppError::not_found(format!("workspace {name:?} has no {path:?}"))
        .hint(format!("see `git sandbox workspace ls {name}`"))
}

fn special(path: &str) -> AppError {
    AppError::refused(format!(
        "{path:?} is a special file (a FIFO, socket or device), which is neither read nor written"
    ))
    .hint("name a regular file")
}

/// A regular file's bytes, opened without following a link and without blocking on a FIFO.
fn read_no_follow(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(crate::app::io_err(format!(
            "cannot read {}",
            path.display()
        )))?;
    let m = f
        .metadata()
        .map_err(crate::app::io_err("cannot read the file"))?;
    if !m.is_file() {
        return Err(special(&path.display().to_string()));
    }
    let mut out = Vec::new();
    f.take(max)
        .read_to_end(&mut out)
        .map_err(crate::app::io_err(format!(
            "cannot read {}",
            path.display()
        )))?;
    Ok(out)
}

/// One entry of a directory as `ls` lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirEntry {
    pub name: String,
    /// `file`, `executable`, `link`, `dir` or `special`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// `workspace ls NAME [PATH]`: a directory's entries as the workspace shows them, by name.
pub fn list_dir(at: Repo<'_>, name: &str, path: &str) -> Result<Vec<DirEntry>> {
    let parts = components(path)?;
    let found = super::find(at, name)?;
    let v = view(at.repo, &found)?;
    let shown = parts.join("/");
    match lookup(at.repo, &v.layers, v.tree, &parts) {
        Seen::Dir => {}
        Seen::Missing => return Err(not_found(name, &shown)),
        Seen::ThroughLink(l) => return Err(refused_link(name, &shown, &l)),
        _ => {
            return Err(
                AppError::usage(format!("{shown:?} is not a directory")).hint(format!(
                    "read it with `git sandbox workspace read {name} {shown}`"
                )),
            )
        }
    }
    let mut out: std::collections::BTreeMap<String, DirEntry> = Default::default();
    let mut hidden: std::collections::HashSet<String> = Default::default();
    let mut below = true;
    for layer in &v.layers {
        // The directory in this layer: what it holds, and whether it hides the layers below.
        let mut dir = layer.join("tree");
        let mut reached = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        let mut hides = false;
        for part in &parts {
            if !reached {
                break;
            }
            dir = dir.join(part);
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => hides |= gs_git::upper::is_opaque(&dir),
                Ok(_) => {
                    // A whiteout or a file here hides the directory below (lookup said the
                    // directory is above it).
                    reached = false;
                    hides = true;
                }
                Err(_) => reached = false,
            }
        }
        if reached {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let Some(n) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if out.contains_key(&n) || hidden.contains(&n) || n.eq_ignore_ascii_case(".git") {
                    continue;
                }
                let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                    continue;
                };
                if is_whiteout(&m) {
                    hidden.insert(n);
                    continue;
                }
                let ft = m.file_type();
                let (kind, size) = if ft.is_dir() {
                    ("dir", None)
                } else if ft.is_symlink() {
                    ("link", None)
                } else if ft.is_file() {
                    let x = m.mode() & 0o111 != 0;
                    (if x { "executable" } else { "file" }, Some(m.len()))
                } else {
                    ("special", None)
                };
                out.insert(
                    n.clone(),
                    DirEntry {
                        name: n,
                        kind,
                        size,
                    },
                );
            }
        }
        if hides {
            below = false;
            break;
        }
    }
    if below {
        let tree = if parts.is_empty() {
            Some(v.tree)
        } else {
            objects::entry_at(at.repo, v.tree, &shown)
                .filter(|e| e.kind == Kind::Tree)
                .map(|e| e.id)
        };
        if let Some(t) = tree {
            for e in objects::entries(at.repo, t)? {
                if out.contains_key(&e.path) || hidden.contains(&e.path) {
                    continue;
                }
                let (kind, size) = match e.kind {
                    Kind::Tree => ("dir", None),
                    Kind::Link => ("link", None),
                    Kind::Executable => ("executable", objects::size(at.repo, e.id)),
                    Kind::File => ("file", objects::size(at.repo, e.id)),
                    Kind::Submodule => ("dir", None),
                };
                out.insert(
                    e.path.clone(),
                    DirEntry {
                        name: e.path,
                        kind,
                        size,
                    },
                );
            }
        }
    }
    Ok(out.into_values().collect())
}

/// What `write` did.
#[derive(Debug, Serialize)]
pub struct Written {
    pub path: String,
    pub bytes: u64,
    pub created: bool,
    pub lines_added: u64,
    pub lines_removed: u64,
}

/// `workspace write NAME PATH` (content from stdin): the file made or replaced, as a layer of
/// its own. Refused where a directory on the way is a symlink or a file, or the path is a
/// directory, a symlink or a special file; its mode is kept when it existed (else 0644).
pub fn write_file(at: Repo<'_>, name: &str, path: &str, content: &[u8]) -> Result<Written> {
    let parts = components(path)?;
    if parts.is_empty() {
        return Err(AppError::usage("bad path \"\": name a file to write")
            .hint("name a path relative to the workspace's root, e.g. src/main.py"));
    }
    if content.len() as u64 > MAX_FILE {
        return Err(AppError::usage(format!(
            "the content holds {} bytes, more than the {} MiB a write takes",
            content.len(),
            MAX_FILE >> 20
        ))
        .hint("write it in a command instead (`git sandbox workspace exec`)"));
    }
    let (mut found, _held) = take(at, name)?;
    let v = view(at.repo, &found)?;
    let shown = parts.join("/");
    for i in 1..parts.len() {
        match lookup(at.repo, &v.layers, v.tree, &parts[..i]) {
            Seen::Dir | Seen::Missing => {}
            Seen::ThroughLink(l) => return Err(refused_link(name, &shown, &l)),
            Seen::Link(_) => return Err(refused_link(name, &shown, &parts[..i].join("/"))),
            _ => {
                return Err(AppError::refused(format!(
                    "{:?} in workspace {name:?} is a file, so {shown:?} cannot be below it",
                    parts[..i].join("/")
                ))
                .hint("remove that file first, or write elsewhere"))
            }
        }
    }
    let (created, executable) = match lookup(at.repo, &v.layers, v.tree, &parts) {
        Seen::Missing => (true, false),
        Seen::File { executable, .. } => (false, executable),
        Seen::Dir => {
            return Err(
                AppError::usage(format!("{shown:?} is a directory")).hint("name a file below it")
            )
        }
        Seen::Link(_) => {
            return Err(AppError::refused(format!(
                "{shown:?} is a symlink, which a write does not follow"
            ))
            .hint("write the file it points to, inside the workspace"))
        }
        Seen::Special => return Err(special(&shown)),
        Seen::ThroughLink(l) => return Err(refused_link(name, &shown, &l)),
    };
    drop(v);
    let before = super::commit::view_tree(at, &found)?;
    let mut stage = gs_runner::caches::Stage::for_workspace(&found.layers(), as_root())
        .ok_or_else(|| {
            AppError::refused("cannot make the workspace's next layer")
                .hint("check the data dir's disk (`git sandbox doctor`)")
        })?;
    let layer = stage.dir().join("layer");
    let made = put(&layer, &parts, content, executable);
    if let Err(e) = made {
        stage.discard();
        return Err(AppError::Io {
            context: format!("cannot write {shown:?} into the workspace's layer"),
            source: e,
        });
    }
    let after = super::commit::apply_layer(at, &found, before, &layer)?;
    std::fs::write(stage.dir().join("added"), format!("{}\n", content.len()))
        .map_err(crate::app::io_err("cannot finish the workspace's layer"))?;
    drop(stage);
    let (lines_added, lines_removed) = super::commit::lines_changed(at.repo, before, after, &shown);
    found.state.tree = after.to_string();
    found.state.layers_top = found.layers_top();
    found.state.used_at = gs_util::time::now_rfc3339();
    found.save()?;
    event(
        at,
        EventKind::WorkspaceFileEdited,
        &found.state.base,
        serde_json::json!({"workspace": name, "path": shown, "by": "write", "added": lines_added, "removed": lines_removed}),
    );
    Ok(Written {
        path: shown,
        bytes: content.len() as u64,
        created,
        lines_added,
        lines_removed,
    })
}

/// As root, a layer's entries belong to root and the group every run has, writable for it (a
/// run of any slot edits them through its overlay).
fn as_root() -> Option<u32> {
    // SAFETY: a plain getter.
    (unsafe { libc::geteuid() } == 0).then_some(0)
}

/// Write `content` at `parts` under `layer/tree`, making the directories on the way.
fn put(layer: &Path, parts: &[&str], content: &[u8], executable: bool) -> std::io::Result<()> {
    let group = as_root().map(|_| gs_sandbox::sandbox::RUN_GID);
    let mut dir = layer.parent().unwrap_or(layer).to_path_buf();
    for part in ["layer", "tree"].iter().chain(&parts[..parts.len() - 1]) {
        dir = dir.join(part);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775))?;
        if let Some(g) = group {
            std::os::unix::fs::lchown(&dir, Some(0), Some(g))?;
        }
    }
    let file = dir.join(parts[parts.len() - 1]);
    std::fs::write(&file, content)?;
    let mode = if executable { 0o775 } else { 0o664 };
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
    if let Some(g) = group {
        std::os::unix::fs::lchown(&file, Some(0), Some(g))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::components;

    #[test]
    fn paths_out_of_the_workspace_are_refused() {
        assert_eq!(components("./src//a.py").unwrap(), ["src", "a.py"]);
        assert!(components("").unwrap().is_empty());
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../b",
            ".git/config",
            "a/.GIT/x",
            "a\0b",
        ] {
            assert!(components(bad).is_err(), "{bad}");
        }
    }
}
