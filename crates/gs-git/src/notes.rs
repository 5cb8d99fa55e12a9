//! Notes under a notes ref (`refs/notes/sandbox` for results, `refs/notes/sandbox-eval` for
//! evaluations): batched writes with a compare-and-swap ref update that retries on conflict, so a
//! concurrent writer (the user's own `git notes`, another worker) never loses a note. A batch's
//! objects go to git as one pack ([`super::pack`]).

use super::{gix_err, GitError, Result};
use gix::bstr::ByteSlice;
use gix::refs::transaction::PreviousValue;
use gix::ObjectId;
use std::collections::HashMap;

/// The notes commit the ref points at, and its tree (None: no notes yet).
fn notes_tip(repo: &gix::Repository, notes_ref: &str) -> Result<Option<(ObjectId, ObjectId)>> {
    let Some(mut reference) = repo.try_find_reference(notes_ref).map_err(gix_err)? else {
        return Ok(None);
    };
    let commit = reference.peel_to_commit().map_err(gix_err)?;
    let tree = commit.tree_id().map_err(gix_err)?.detach();
    Ok(Some((commit.id, tree)))
}

/// The note on `commit` under `notes_ref`, if any.
pub fn read_note(
    repo: &gix::Repository,
    notes_ref: &str,
    commit: ObjectId,
) -> Result<Option<Vec<u8>>> {
    let Some((_, tree)) = notes_tip(repo, notes_ref)? else {
        return Ok(None);
    };
    let mut state = gix::note::plumbing::State::new(tree, &repo.objects).map_err(gix_err)?;
    let Some(blob) = state.get(&commit, &repo.objects).map_err(gix_err)? else {
        return Ok(None);
    };
    Ok(Some(repo.find_blob(blob).map_err(gix_err)?.data.clone()))
}

/// Answers "has this commit a note?" one commit at a time, opening only the fan-out subtrees on
/// the way: what a hook needs, where reading every note would cost more than the rest.
pub struct Lookup {
    state: Option<gix::note::plumbing::State>,
}

impl Lookup {
    pub fn new(repo: &gix::Repository, notes_ref: &str) -> Result<Lookup> {
        let state = match notes_tip(repo, notes_ref)? {
            Some((_, tree)) => {
                Some(gix::note::plumbing::State::new(tree, &repo.objects).map_err(gix_err)?)
            }
            None => None,
        };
        Ok(Lookup { state })
    }

    pub fn has(&mut self, repo: &gix::Repository, commit: ObjectId) -> Result<bool> {
        Ok(self.blob(repo, commit)?.is_some())
    }

    /// The id of the note blob on `commit`, if any.
    pub fn blob(&mut self, repo: &gix::Repository, commit: ObjectId) -> Result<Option<ObjectId>> {
        match &mut self.state {
            Some(state) => state.get(&commit, &repo.objects).map_err(gix_err),
            None => Ok(None),
        }
    }

    /// The body of the note on `commit`, if any.
    pub fn read(&mut self, repo: &gix::Repository, commit: ObjectId) -> Result<Option<Vec<u8>>> {
        match self.blob(repo, commit)? {
            Some(blob) => Ok(Some(read_blob(repo, blob)?)),
            None => Ok(None),
        }
    }
}

/// Every note under `notes_ref`: annotated object → note blob. Handles any fan-out git writes.
pub fn all_notes(repo: &gix::Repository, notes_ref: &str) -> Result<HashMap<ObjectId, ObjectId>> {
    let mut out = HashMap::new();
    if let Some((_, tree)) = notes_tip(repo, notes_ref)? {
        collect(repo, tree, String::new(), &mut out)?;
    }
    Ok(out)
}

/// Every note in the notes commit `notes_commit` (a past tip of a notes ref): commit → blob.
pub fn all_notes_at(
    repo: &gix::Repository,
    notes_commit: ObjectId,
) -> Result<HashMap<ObjectId, ObjectId>> {
    let tree = repo
        .find_commit(notes_commit)
        .and_then(|c| c.tree_id())
        .map_err(gix_err)?
        .detach();
    let mut out = HashMap::new();
    collect(repo, tree, String::new(), &mut out)?;
    Ok(out)
}

/// The notes commit `notes_ref` points at (None: no notes yet).
pub fn tip(repo: &gix::Repository, notes_ref: &str) -> Result<Option<ObjectId>> {
    Ok(notes_tip(repo, notes_ref)?.map(|(commit, _)| commit))
}

/// The commits whose note differs between two notes commits (added, changed or removed; None:
/// no notes). Only the fan-out subtrees whose ids differ are opened, so a few new notes cost a
/// few tree reads however many notes there are.
pub fn changed(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
) -> Result<Vec<ObjectId>> {
    let tree = |commit: Option<ObjectId>| -> Result<Option<ObjectId>> {
        commit
            .map(|c| {
                repo.find_commit(c)
                    .and_then(|c| c.tree_id())
                    .map(|t| t.detach())
                    .map_err(gix_err)
            })
            .transpose()
    };
    let mut out = std::collections::HashSet::new();
    diff_trees(repo, tree(old)?, tree(new)?, "", &mut out)?;
    Ok(out.into_iter().collect())
}

/// An entry of a notes tree: whether it is a subtree, and its id.
type Entry = (bool, ObjectId);

fn entries(repo: &gix::Repository, tree: Option<ObjectId>) -> Result<HashMap<String, Entry>> {
    let mut out = HashMap::new();
    if let Some(tree) = tree {
        let tree = repo.find_tree(tree).map_err(gix_err)?;
        for entry in tree.iter() {
            let entry = entry.map_err(gix_err)?;
            out.insert(
                entry.filename().to_str_lossy().into_owned(),
                (entry.mode().is_tree(), entry.oid().to_owned()),
            );
        }
    }
    Ok(out)
}

fn diff_trees(
    repo: &gix::Repository,
    a: Option<ObjectId>,
    b: Option<ObjectId>,
    prefix: &str,
    out: &mut std::collections::HashSet<ObjectId>,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let (ea, eb) = (entries(repo, a)?, entries(repo, b)?);
    let names: std::collections::BTreeSet<&String> = ea.keys().chain(eb.keys()).collect();
    for name in names {
        let (x, y) = (ea.get(name), eb.get(name));
        let full = format!("{prefix}{name}");
        if x == y || !full.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        // A note moved between fan-out levels shows as gone here and new there: both are
        // counted, which only looks at it twice.
        let subtree = |e: Option<&Entry>| e.filter(|e| e.0).map(|e| e.1);
        let blob = |e: Option<&Entry>| e.filter(|e| !e.0).map(|e| e.1);
        if full.len() < 40 && (subtree(x).is_some() || subtree(y).is_some()) {
            diff_trees(repo, subtree(x), subtree(y), &full, out)?;
        } else if full.len() == 40 && blob(x) != blob(y) {
            if let Ok(id) = ObjectId::from_hex(full.as_bytes()) {
                out.insert(id);
            }
        }
    }
    Ok(())
}

/// The size of a blob, from its header (the blob is not read).
pub fn blob_size(repo: &gix::Repository, id: ObjectId) -> Result<u64> {
    Ok(repo.find_header(id).map_err(gix_err)?.size())
}

fn collect(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: String,
    out: &mut HashMap<ObjectId, ObjectId>,
) -> Result<()> {
    let tree = repo.find_tree(tree).map_err(gix_err)?;
    for entry in tree.iter() {
        let entry = entry.map_err(gix_err)?;
        let name = format!("{prefix}{}", entry.filename().to_str_lossy());
        if !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if entry.mode().is_tree() && name.len() < 40 {
            collect(repo, entry.oid().to_owned(), name, out)?;
        } else if entry.mode().is_blob() && name.len() == 40 {
            if let Ok(id) = ObjectId::from_hex(name.as_bytes()) {
                out.insert(id, entry.oid().to_owned());
            }
        }
    }
    Ok(())
}

pub fn read_blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    Ok(repo.find_blob(id).map_err(gix_err)?.data.clone())
}

/// Notes to write under one notes ref: (annotated commit, note body).
pub struct NotesEdit<'a> {
    pub notes_ref: &'a str,
    pub notes: Vec<(ObjectId, Vec<u8>)>,
}

/// How a notes ref moved: from the tip the notes commit was written on (`None`: the ref was
/// not there) to that commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TipMove {
    pub notes_ref: String,
    pub old: Option<ObjectId>,
    pub new: ObjectId,
}

/// Write `notes` (commit → body) under `notes_ref` in one notes commit.
pub fn write_notes(
    repo: &gix::Repository,
    notes_ref: &str,
    notes: &[(ObjectId, Vec<u8>)],
    message: &str,
) -> Result<()> {
    write_batch(
        repo,
        &[NotesEdit {
            notes_ref,
            notes: notes.to_vec(),
        }],
        message,
    )
    .map(drop)
}

/// How long a batch keeps retrying while other writers hold or move the notes refs.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// Write several notes refs in one ref transaction (one notes commit each): every ref moves or
/// none does, each compared-and-swapped against the tip its notes commit was built on. When
/// another writer moves a ref or holds its lock, the edits are replayed on the new tips and
/// tried again with back-off, so nobody's note is lost and ours are never half-written.
/// Returns how each ref moved (the last attempt's tips).
pub fn write_batch(
    repo: &gix::Repository,
    edits: &[NotesEdit<'_>],
    message: &str,
) -> Result<Vec<TipMove>> {
    use gix::refs::transaction::RefEdit;
    // Every object of the batch is kept in memory and written at once (one pack for many).
    let mut batch = super::pack::Batch::new(&super::with_identity(repo));
    let mut blobs: Vec<(&str, Vec<(ObjectId, ObjectId)>)> = Vec::new();
    for e in edits.iter().filter(|e| !e.notes.is_empty()) {
        let ids = e
            .notes
            .iter()
            .map(|(commit, body)| {
                let blob = batch.repo.write_blob(body).map_err(gix_err)?;
                Ok((*commit, blob.detach()))
            })
            .collect::<Result<_>>()?;
        blobs.push((e.notes_ref, ids));
    }
    if blobs.is_empty() {
        return Ok(Vec::new());
    }
    let signature = gix::actor::Signature {
        name: "git-sandbox".into(),
        email: "git-sandbox@localhost".into(),
        time: gix::date::Time::now_utc(),
    };
    let started = std::time::Instant::now();
    let mut attempt: u64 = 0;
    loop {
        attempt += 1;
        let repo = &batch.repo;
        let mut ref_edits = Vec::with_capacity(blobs.len());
        let mut moves = Vec::with_capacity(blobs.len());
        for (notes_ref, ids) in &blobs {
            let tip = notes_tip(repo, notes_ref)?;
            let root = tip.map_or_else(|| ObjectId::empty_tree(repo.object_hash()), |(_, t)| t);
            let mut state =
                gix::note::plumbing::State::new(root, &repo.objects).map_err(gix_err)?;
            for (commit, blob) in ids {
                state
                    .edit(*commit, Some(*blob), &repo.objects)
                    .map_err(gix_err)?;
            }
            let tree = state.write(&repo.objects).map_err(gix_err)?;
            let parents: Vec<ObjectId> = tip.map(|(c, _)| c).into_iter().collect();
            let commit = repo
                .new_commit_as(
                    signature.to_ref(&mut Default::default()),
                    signature.to_ref(&mut Default::default()),
                    message,
                    tree,
                    parents,
                )
                .map_err(gix_err)?
                .id;
            moves.push(TipMove {
                notes_ref: notes_ref.to_string(),
                old: tip.map(|(c, _)| c),
                new: commit,
            });
            let expected = match tip {
                Some((c, _)) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(c)),
                None => PreviousValue::MustNotExist,
            };
            let name: gix::refs::FullName = (*notes_ref)
                .try_into()
                .map_err(|e| GitError::gix_in(format!("bad notes ref {notes_ref}"), e))?;
            ref_edits.push(RefEdit::update(
                name,
                commit,
                expected,
                format!("notes: {message}"),
            ));
        }
        // One pack per write, whatever the retries: the notes themselves go with the first
        // attempt, and a retry after another writer moved a ref adds only a few trees and
        // commits.
        batch.persist(attempt == 1)?;
        match batch.repo.edit_references(ref_edits) {
            Ok(_) => return Ok(moves),
            // A value that moved, or a lock held (or just released) by another writer: both
            // pass. Anything that persists past the deadline is reported.
            Err(e) if started.elapsed() < RETRY_FOR => {
                if attempt.is_multiple_of(10) {
                    for (notes_ref, _) in &blobs {
                        remove_stale_locks(&batch.repo, notes_ref);
                    }
                }
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis((2 * attempt).min(100)));
            }
            Err(e) => {
                let refs: Vec<&str> = blobs.iter().map(|(r, _)| *r).collect();
                return Err(GitError::gix(format!(
                    "cannot update {} for {}s: {e}",
                    refs.join(" and "),
                    RETRY_FOR.as_secs()
                )));
            }
        }
    }
}

/// A writer killed mid-update (kill -9) leaves its lock file behind and every later update of the
/// ref fails. Nobody holds a ref lock for long, so a lock older than this is stale.
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(10);

/// Remove the lock file of `notes_ref` (one of our own notes refs) when it is older than
/// [`STALE_LOCK`], and `packed-refs.lock` when it is that old: our ref transactions take it too
/// (when refs are packed, or a lock file exists), so a writer of ours killed at the wrong moment
/// leaves it, and then every ref update in the repository fails, git's own included (git waits
/// `core.packedRefsTimeout`, 1 s by default, for it). Locks of other refs are never ours to break.
pub fn remove_stale_locks(repo: &gix::Repository, notes_ref: &str) {
    if !notes_ref.starts_with("refs/notes/sandbox") {
        return;
    }
    for lock in [
        repo.common_dir().join(format!("{notes_ref}.lock")),
        repo.common_dir().join("packed-refs.lock"),
    ] {
        let age = std::fs::metadata(&lock)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        if age.is_some_and(|a| a > STALE_LOCK) {
            let _ = std::fs::remove_file(&lock);
        }
    }
}
