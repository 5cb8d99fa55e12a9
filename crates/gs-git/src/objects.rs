//! A repository's objects, refs and settings as the app reads and writes them: blobs, trees
//! (one level, or every file), commits, refs, the config and the directories. The app reaches
//! git through this crate only; these are the calls it makes, in plain types.

use crate::{gix_err, Result};
use gix::bstr::ByteSlice;
use gix::ObjectId;
use std::path::Path;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link.
    Link,
    /// A directory.
    Tree,
    /// A submodule's commit.
    Submodule,
}

impl Kind {
    /// A regular file, executable or not.
    pub fn is_file(self) -> bool {
        matches!(self, Kind::File | Kind::Executable)
    }

    fn of(mode: gix::objs::tree::EntryMode) -> Kind {
        use gix::objs::tree::EntryKind;
        match mode.kind() {
            EntryKind::Blob => Kind::File,
            EntryKind::BlobExecutable => Kind::Executable,
            EntryKind::Link => Kind::Link,
            EntryKind::Tree => Kind::Tree,
            EntryKind::Commit => Kind::Submodule,
        }
    }

    pub(crate) fn mode(self) -> gix::objs::tree::EntryMode {
        use gix::objs::tree::EntryKind;
        match self {
            Kind::File => EntryKind::Blob,
            Kind::Executable => EntryKind::BlobExecutable,
            Kind::Link => EntryKind::Link,
            Kind::Tree => EntryKind::Tree,
            Kind::Submodule => EntryKind::Commit,
        }
        .into()
    }
}

/// One entry of a tree: its name (one level) or its path from the tree's root (every file),
/// lossily UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub id: ObjectId,
    pub kind: Kind,
}

/// The id of no object (SHA-1), for placeholders.
pub fn null_id() -> ObjectId {
    ObjectId::null(gix::hash::Kind::Sha1)
}

/// Ctrl-C as gix's long operations watch for it: installs the handler (once) and returns the
/// flag it sets.
pub fn interrupt_flag() -> &'static std::sync::atomic::AtomicBool {
    // SAFETY of the handler: gix's default handler only sets the flag.
    let _ = gix::interrupt::init_handler_default(1);
    &gix::interrupt::IS_INTERRUPTED
}

/// The bytes of the blob `id`.
pub fn blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    Ok(repo.find_blob(id).map_err(gix_err)?.data.clone())
}

/// The size of the object `id` in bytes, without reading it; `None` when it is not there.
pub fn size(repo: &gix::Repository, id: ObjectId) -> Option<u64> {
    repo.find_header(id).ok().map(|h| h.size())
}

/// The blob `id` when it is at most `max` bytes (read only then: a commit's file may be huge).
pub fn small_blob(repo: &gix::Repository, id: ObjectId, max: u64) -> Option<Vec<u8>> {
    if size(repo, id)? > max {
        return None;
    }
    blob(repo, id).ok()
}

/// Whether `id` is a commit this repository holds.
pub fn is_commit(repo: &gix::Repository, id: ObjectId) -> bool {
    repo.find_commit(id).is_ok()
}

/// Whether the object `id` is a commit, read from its header only.
pub fn is_commit_object(repo: &gix::Repository, id: ObjectId) -> bool {
    repo.find_header(id)
        .is_ok_and(|h| h.kind() == gix::object::Kind::Commit)
}

/// The commit `id` names, peeling a tag; `None` when it names no commit here.
pub fn peel_to_commit(repo: &gix::Repository, id: ObjectId) -> Option<ObjectId> {
    repo.find_object(id)
        .ok()
        .and_then(|o| o.peel_to_kind(gix::object::Kind::Commit).ok())
        .map(|c| c.id)
}

/// The tree of the commit `commit`.
pub fn tree_of(repo: &gix::Repository, commit: ObjectId) -> Option<ObjectId> {
    Some(repo.find_commit(commit).ok()?.tree_id().ok()?.detach())
}

/// The first parent of the commit `commit`.
pub fn first_parent(repo: &gix::Repository, commit: ObjectId) -> Option<ObjectId> {
    repo.find_commit(commit)
        .ok()?
        .parent_ids()
        .next()
        .map(|p| p.detach())
}

/// The entry at `path` (`a/b/c`) in `tree`, if there is one.
pub fn entry_at(repo: &gix::Repository, tree: ObjectId, path: &str) -> Option<Entry> {
    let t = repo.find_tree(tree).ok()?;
    let e = t.lookup_entry_by_path(path).ok()??;
    Some(Entry {
        path: path.to_string(),
        id: e.object_id(),
        kind: Kind::of(e.mode()),
    })
}

/// The entries of `tree` itself (one level), in the tree's order.
pub fn entries(repo: &gix::Repository, tree: ObjectId) -> Result<Vec<Entry>> {
    let t = repo.find_tree(tree).map_err(gix_err)?;
    let decoded = t.decode().map_err(gix_err)?;
    Ok(decoded
        .entries
        .iter()
        .map(|e| Entry {
            path: e.filename.to_str_lossy().into_owned(),
            id: e.oid.into(),
            kind: Kind::of(e.mode),
        })
        .collect())
}

/// Every entry under `tree`, directories too, breadth first, each with its path from the root.
pub fn walk(repo: &gix::Repository, tree: ObjectId) -> Result<Vec<Entry>> {
    let t = repo.find_tree(tree).map_err(gix_err)?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    t.traverse().breadthfirst(&mut recorder).map_err(gix_err)?;
    Ok(recorder
        .records
        .into_iter()
        .map(|e| Entry {
            path: e.filepath.to_str_lossy().into_owned(),
            id: e.oid,
            kind: Kind::of(e.mode),
        })
        .collect())
}

/// The id `bytes` would have as a blob of this repository, without writing it.
pub fn blob_id(repo: &gix::Repository, bytes: &[u8]) -> Option<ObjectId> {
    gix::objs::compute_hash(repo.object_hash(), gix::objs::Kind::Blob, bytes).ok()
}

/// Write `bytes` as a blob; its id.
pub fn write_blob(repo: &gix::Repository, bytes: &[u8]) -> Result<ObjectId> {
    Ok(repo.write_blob(bytes).map_err(gix_err)?.detach())
}

/// Write a tree of `entries` (names, one level; sorted as git sorts them); its id.
pub fn write_tree(repo: &gix::Repository, entries: &[(&str, Kind, ObjectId)]) -> Result<ObjectId> {
    let mut entries: Vec<gix::objs::tree::Entry> = entries
        .iter()
        .map(|(name, kind, id)| gix::objs::tree::Entry {
            mode: kind.mode(),
            filename: (*name).into(),
            oid: *id,
        })
        .collect();
    entries.sort();
    let tree = gix::objs::Tree { entries };
    Ok(repo.write_object(&tree).map_err(gix_err)?.detach())
}

/// The commit the ref `name` (a full name, `refs/heads/main`) points at, through tags;
/// `None` when there is no such ref.
pub fn ref_commit(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    let Some(mut r) = repo.try_find_reference(name).map_err(gix_err)? else {
        return Ok(None);
    };
    Ok(Some(r.peel_to_commit().map_err(gix_err)?.id().detach()))
}

/// The object id the ref `name` holds, as written, reading no object (a symbolic ref: `None`).
pub fn ref_target(repo: &gix::Repository, name: &str) -> Option<ObjectId> {
    let r = repo.try_find_reference(name).ok()??;
    r.target().try_id().map(|id| id.to_owned())
}

/// The object the ref `name` ends at, through symbolic refs and tags; `None` when there is no
/// such ref.
pub fn ref_peeled(repo: &gix::Repository, name: &str) -> Option<ObjectId> {
    let mut r = repo.find_reference(name).ok()?;
    Some(r.peel_to_id().ok()?.detach())
}

/// The committer's time of the commit `id`, in seconds since the epoch.
pub fn commit_time(repo: &gix::Repository, id: ObjectId) -> Option<i64> {
    Some(repo.find_commit(id).ok()?.time().ok()?.seconds)
}

/// The committer's time of the commit `id` (seconds; 0 when it cannot be read) and its parents.
pub fn time_and_parents(repo: &gix::Repository, id: ObjectId) -> Option<(i64, Vec<ObjectId>)> {
    let commit = repo.find_commit(id).ok()?;
    let time = commit.time().map(|t| t.seconds).unwrap_or(0);
    Some((time, commit.parent_ids().map(|p| p.detach()).collect()))
}

/// The full name a symbolic ref points at (`refs/remotes/origin/HEAD` →
/// `refs/remotes/origin/main`); `None` when it is not a symbolic ref.
pub fn symbolic_target(repo: &gix::Repository, name: &str) -> Option<String> {
    let r = repo.try_find_reference(name).ok()??;
    match r.target() {
        gix::refs::TargetRef::Symbolic(to) => Some(to.as_bstr().to_str_lossy().into_owned()),
        gix::refs::TargetRef::Object(_) => None,
    }
}

/// Whether the ref `name` (a full name) exists.
pub fn has_ref(repo: &gix::Repository, name: &str) -> bool {
    repo.try_find_reference(name).ok().flatten().is_some()
}

/// Every ref under `prefix` (`refs/heads/`; `""`: all), its full name and the object it
/// points at (not peeled; `None` for a symbolic ref). Refs that cannot be read are left out.
pub fn refs(repo: &gix::Repository, prefix: &str) -> Result<Vec<(String, Option<ObjectId>)>> {
    let platform = repo.references().map_err(gix_err)?;
    let iter = if prefix.is_empty() {
        platform.all().map_err(gix_err)?
    } else {
        platform.prefixed(prefix).map_err(gix_err)?
    };
    Ok(iter
        .flatten()
        .map(|r| {
            let name = r.name().as_bstr().to_str_lossy().into_owned();
            (name, r.target().try_id().map(|id| id.to_owned()))
        })
        .collect())
}

/// The names of the repository's remotes.
pub fn remote_names(repo: &gix::Repository) -> Vec<String> {
    repo.remote_names()
        .into_iter()
        .map(|n| n.to_str_lossy().into_owned())
        .collect()
}

/// The commits reachable from `tip` and not from `hidden`, newest first as git's default walk
/// orders them, read as the caller iterates; the walk does not go past a commit `keep` refuses
/// (and does not yield it).
pub fn walk_commits<'a>(
    repo: &'a gix::Repository,
    tip: ObjectId,
    hidden: &[ObjectId],
    mut keep: impl FnMut(ObjectId) -> bool + 'a,
) -> Result<Box<dyn Iterator<Item = Result<ObjectId>> + 'a>> {
    let walk = repo
        .rev_walk([tip])
        .with_hidden(hidden.iter().copied())
        .selected(move |id| keep(id.to_owned()))
        .map_err(gix_err)?;
    Ok(Box::new(
        walk.map(|info| info.map(|i| i.id).map_err(gix_err)),
    ))
}

/// The newest ancestors of a commit (itself included), read once to answer "is this commit in
/// that history?" for many commits: `experiment list` asks it of every branch that has no base
/// of its own, against production. Read newest first by commit time, up to a bound: past it,
/// [`Ancestors::knows`] says which commits it cannot judge.
pub struct Ancestors {
    set: std::collections::HashSet<ObjectId>,
    /// Whether every ancestor was read (the history is within the bound).
    complete: bool,
    /// The commit time of the last one read: older commits may be ancestors not read.
    horizon: i64,
}

impl Ancestors {
    /// Up to `limit` commits of `tip`'s history, newest first.
    pub fn of(repo: &gix::Repository, tip: ObjectId, limit: usize) -> Result<Ancestors> {
        use gix::revision::walk::Sorting;
        let walk = repo
            .rev_walk([tip])
            .sorting(Sorting::ByCommitTime(Default::default()))
            .all()
            .map_err(gix_err)?;
        let mut set = std::collections::HashSet::new();
        let mut horizon = i64::MAX;
        let mut complete = true;
        for info in walk {
            if set.len() >= limit {
                complete = false;
                break;
            }
            let info = info.map_err(gix_err)?;
            horizon = horizon.min(info.commit_time.unwrap_or(i64::MIN));
            set.insert(info.id);
        }
        Ok(Ancestors {
            set,
            complete,
            horizon,
        })
    }

    pub fn contains(&self, id: ObjectId) -> bool {
        self.set.contains(&id)
    }

    /// Whether a commit made at `time` (seconds) that is not in the set is surely no ancestor:
    /// every ancestor was read, or it is newer than the oldest one read.
    pub fn knows(&self, time: i64) -> bool {
        self.complete || time > self.horizon
    }
}

/// Whether `commit` is `tip` or one of its ancestors (through their merge base).
pub fn is_ancestor(repo: &gix::Repository, commit: ObjectId, tip: ObjectId) -> bool {
    tip == commit
        || repo
            .merge_base(commit, tip)
            .is_ok_and(|base| base.is_some_and(|b| b.detach() == commit))
}

/// The parents of the commit `id` (none when it cannot be read).
pub fn parents(repo: &gix::Repository, id: ObjectId) -> Vec<ObjectId> {
    repo.find_commit(id)
        .map(|c| c.parent_ids().map(|p| p.detach()).collect())
        .unwrap_or_default()
}

/// The whole message of the commit `id`, lossily UTF-8.
pub fn message(repo: &gix::Repository, id: ObjectId) -> Option<String> {
    Some(
        repo.find_commit(id)
            .ok()?
            .message_raw()
            .ok()?
            .to_str_lossy()
            .into_owned(),
    )
}

/// The value of the config key `key` (`sandbox.repositoryId`) as the repository sees it.
pub fn config_string(repo: &gix::Repository, key: &str) -> Option<String> {
    repo.config_snapshot().string(key).map(|v| v.to_string())
}

/// The repository's work tree, unless it is bare.
pub fn workdir(repo: &gix::Repository) -> Option<&Path> {
    repo.workdir()
}

/// The repository's common git directory (shared by its worktrees).
pub fn common_dir(repo: &gix::Repository) -> &Path {
    repo.common_dir()
}

/// A handle on a repository that other threads can each open their own from.
pub struct Shared(gix::ThreadSafeRepository);

impl Shared {
    pub fn of(repo: &gix::Repository) -> Shared {
        Shared(repo.clone().into_sync())
    }

    /// This thread's own handle.
    pub fn local(&self) -> gix::Repository {
        self.0.to_thread_local()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_written_reads_back_entry_by_entry_and_file_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        let a = write_blob(&repo, b"a\n").unwrap();
        let big = write_blob(&repo, &[b'x'; 100]).unwrap();
        let sub = write_tree(&repo, &[("big", Kind::File, big)]).unwrap();
        let root = write_tree(
            &repo,
            &[
                ("run", Kind::Executable, a),
                ("d", Kind::Tree, sub),
                ("a", Kind::File, a),
            ],
        )
        .unwrap();
        let names: Vec<(String, Kind)> = entries(&repo, root)
            .unwrap()
            .into_iter()
            .map(|e| (e.path, e.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("a".to_string(), Kind::File),
                ("d".to_string(), Kind::Tree),
                ("run".to_string(), Kind::Executable)
            ]
        );
        let files: Vec<String> = walk(&repo, root)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind.is_file())
            .map(|e| e.path)
            .collect();
        assert_eq!(files, ["a", "run", "d/big"]);
        assert_eq!(entry_at(&repo, root, "d/big").map(|e| e.id), Some(big));
        assert_eq!(blob(&repo, a).unwrap(), b"a\n");
        assert_eq!(blob_id(&repo, b"a\n"), Some(a));
        assert_eq!(size(&repo, big), Some(100));
        assert_eq!(small_blob(&repo, big, 99), None);
        assert_eq!(small_blob(&repo, big, 100).map(|b| b.len()), Some(100));
        assert!(!is_commit(&repo, a));
    }

    /// Production's newest ancestors, read up to a bound, judge what they hold and say which
    /// older commits they cannot judge.
    #[test]
    fn ancestors_up_to_a_bound_know_what_they_cannot_judge() {
        use crate::testutil::git_env;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        git_env(dir, &["init", "-q", "-b", "main"], &[]);
        let mut ids = Vec::new();
        for t in 1..=4 {
            let date = format!("@{} +0000", 1_700_000_000 + t * 60);
            let env = [
                ("GIT_COMMITTER_DATE", date.as_str()),
                ("GIT_AUTHOR_DATE", date.as_str()),
            ];
            git_env(dir, &["commit", "-q", "--allow-empty", "-m", "c"], &env);
            ids.push(git_env(dir, &["rev-parse", "HEAD"], &[]).trim().to_string());
        }
        let repo = crate::open(dir).unwrap();
        let id = |i: usize| ObjectId::from_hex(ids[i].as_bytes()).unwrap();
        let all = Ancestors::of(&repo, id(3), 100).unwrap();
        assert!((0..4).all(|i| all.contains(id(i))));
        assert!(all.knows(0), "every ancestor was read");
        let newest = Ancestors::of(&repo, id(3), 2).unwrap();
        assert!(newest.contains(id(3)) && newest.contains(id(2)) && !newest.contains(id(1)));
        let time = |i: usize| commit_time(&repo, id(i)).unwrap();
        assert!(newest.knows(time(3) + 1));
        assert!(!newest.knows(time(1)), "older than the last one read");
    }
}
