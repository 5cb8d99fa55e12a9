//! Results as evidence: reading a commit's result from its note (only a record made for that
//! commit counts), from the index, or from the tree cache under the commit's own effective
//! config; and writing results as notes (the record and its `git log` summary, in one ref
//! transaction) and index rows.

use crate::app::{Context, Repo, Result};
use gs_git as git;
use gs_git::ObjectId;
use gs_git::{notes::Lookup, CommitInfo};
use gs_model::EventKind;
use gs_model::{note, NoteRecord, RunRecord, Status};
use gs_store::RepoRow;
use gs_util as util;

/// Reads the notes of one repository, remembering notes that held no readable record, so a
/// command can report them once.
pub struct NoteReader {
    lookup: Lookup,
    pub invalid: Vec<(ObjectId, String)>,
}

impl NoteReader {
    pub fn new(repo: &gs_git::Repository) -> Result<NoteReader> {
        Ok(NoteReader {
            lookup: Lookup::new(repo, git::NOTES_REF)?,
            invalid: Vec::new(),
        })
    }

    /// What the note on `commit` says about it (no note: `None`), with who vouches for it.
    pub fn read(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        commit: ObjectId,
    ) -> Result<Option<NoteRecord>> {
        let Some(body) = self.lookup.read(repo, commit)? else {
            return Ok(None);
        };
        let mut decoded = note::decode(&body, &commit.to_string(), &ctx.judge()?);
        // A copy of another commit's result is worth what its source is worth today: whoever
        // signed the copy, it is evidence only while the source is.
        self.vouch(ctx, repo, commit, &mut decoded)?;
        Ok(Some(decoded))
    }

    /// [`NoteReader::read`] for each of `commits`, in their order: the notes read, decoded and
    /// their signatures checked on every core (`log -n 50` spent half its time on them).
    pub fn read_many(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        commits: &[ObjectId],
    ) -> Result<Vec<Option<NoteRecord>>> {
        let mut found = Vec::with_capacity(commits.len());
        for &c in commits {
            if let Some(blob) = self.lookup.blob(repo, c)? {
                found.push((c, blob));
            }
        }
        let verifier = ctx.keys()?.verifier();
        let judge = |m: &[u8], s: &str| verifier.verify(m, s);
        let decoded = on_every_core(repo, &found, |repo, &(commit, blob)| {
            git::notes::read_blob(repo, blob)
                .map(|body| note::decode(&body, &commit.to_string(), &judge))
        });
        let mut by_commit: std::collections::HashMap<ObjectId, NoteRecord> =
            std::collections::HashMap::with_capacity(found.len());
        for ((commit, _), d) in found.iter().zip(decoded) {
            by_commit.insert(*commit, d?);
        }
        let mut out = Vec::with_capacity(commits.len());
        for c in commits {
            let Some(mut decoded) = by_commit.remove(c) else {
                out.push(None);
                continue;
            };
            self.vouch(ctx, repo, *c, &mut decoded)?;
            out.push(Some(decoded));
        }
        Ok(out)
    }

    /// What [`NoteReader::read`] does after decoding: an unreadable note is remembered, and a
    /// copy of another commit's result is worth what its source is worth today.
    fn vouch(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        commit: ObjectId,
        decoded: &mut NoteRecord,
    ) -> Result<()> {
        if let NoteRecord::Invalid(why) = decoded {
            self.invalid.push((commit, why.clone()));
        }
        if let NoteRecord::Found(r) = decoded {
            if r.is_evidence() && r.cached_from.is_some() && !self.backs(ctx, repo, r)? {
                r.verified = None;
            }
        }
        Ok(())
    }

    /// Whether the result `copy` was served from is evidence now: that commit's own record
    /// (not a copy itself), of the same tree and config, signed by this machine or a signer it
    /// trusts today.
    fn backs(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        copy: &RunRecord,
    ) -> Result<bool> {
        let source = copy
            .cached_from
            .as_deref()
            .and_then(|c| ObjectId::from_hex(c.as_bytes()).ok());
        let note = match source {
            Some(s) => self.lookup.read(repo, s)?,
            None => return Ok(false),
        };
        crate::app::publish::bounds::backs(ctx, copy, note)
    }

    /// The evidence the note holds for `commit`, if it holds some (a report is none).
    pub fn record(
        &mut self,
        ctx: &Context,
        repo: &gs_git::Repository,
        commit: ObjectId,
    ) -> Result<Option<RunRecord>> {
        Ok(self
            .read(ctx, repo, commit)?
            .and_then(NoteRecord::found)
            .filter(RunRecord::is_evidence))
    }

    /// One line for stderr about the notes that held no readable record, if any.
    pub fn warning(&self) -> Option<String> {
        invalid_warning(&self.invalid)
    }
}

/// "2 notes hold no readable run record (abc1234: …); those commits count as not run and are
/// run again".
pub fn invalid_warning(invalid: &[(ObjectId, String)]) -> Option<String> {
    let (first, why) = invalid.first()?;
    let n = invalid.len();
    Some(format!(
        "{n} note{} under {} hold{} no readable run record ({}: {why}); {} as not run, and a run replaces the note",
        if n == 1 { "" } else { "s" },
        git::NOTES_REF,
        if n == 1 { "s" } else { "" },
        util::short(&first.to_string()),
        if n == 1 { "that commit counts" } else { "those commits count" },
    ))
}

/// What may be judged of a commit: [`find_record`]'s answer when it is evidence (signed by this
/// machine or a signer it trusts), never somebody's report.
pub fn find_evidence(
    at: Repo<'_>,
    reader: &mut NoteReader,
    commit: ObjectId,
) -> Result<Option<RunRecord>> {
    if let Some(r) = own_record(at, reader, commit)?.filter(RunRecord::is_evidence) {
        return Ok(Some(r));
    }
    tree_result(at, commit)
}

/// The result to show for a commit: the record made for it (its note, else the index; a report
/// that is not evidence too, marked so), else a result of the same tree made under the config
/// the commit has now (marked `cached_from`).
pub fn find_record(
    at: Repo<'_>,
    reader: &mut NoteReader,
    commit: ObjectId,
) -> Result<Option<RunRecord>> {
    if let Some(r) = own_record(at, reader, commit)? {
        return Ok(Some(r));
    }
    tree_result(at, commit)
}

/// A result of the commit's tree made under the config the commit has now.
pub(super) fn tree_result(at: Repo<'_>, commit: ObjectId) -> Result<Option<RunRecord>> {
    let Repo { ctx, repo, .. } = at;
    let info = git::commit_info(repo, commit)?;
    let Ok(config) = crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        None,
        &gs_config::ConfigFile::default(),
    ) else {
        return Ok(None);
    };
    Ok(tree_hit(at, &info, &config.result_key()))
}

/// `f` of each of `items`, in their order, on as many threads as there are cores (up to 4),
/// each with its own handle on the repository: reading and checking notes (a signature check
/// is tens of microseconds, a note's inflating and parsing as many).
pub fn on_every_core<T: Sync, R: Send>(
    repo: &gs_git::Repository,
    items: &[T],
    f: impl Fn(&gs_git::Repository, &T) -> R + Sync,
) -> Vec<R> {
    in_parts(
        items,
        || repo.clone(),
        |repo, part| part.iter().map(|i| f(&repo, i)).collect(),
    )
}

/// `f` of `items` cut in as many parts as there are cores (up to 4), each on its own thread
/// with its own `state` (made on the calling thread); their results in order.
pub fn in_parts<T: Sync, S: Send, R: Send>(
    items: &[T],
    state: impl Fn() -> S,
    f: impl Fn(S, &[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    // A thread costs about what reading four notes does.
    if threads < 2 || items.len() < 8 {
        return f(state(), items);
    }
    let size = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(size)
            .map(|part| {
                let state = state();
                scope.spawn(move || f(state, part))
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().expect("reading a note does not panic"))
            .collect()
    })
}

/// The record made for this very commit: its note, else the index (a crash between writing the
/// note and indexing it, or a note a non-CAS writer dropped). It may be a report that is not
/// evidence ([`RunRecord::is_evidence`]): shown as such, judged by nothing.
pub fn own_record(
    at: Repo<'_>,
    reader: &mut NoteReader,
    commit: ObjectId,
) -> Result<Option<RunRecord>> {
    let note = reader.read(at.ctx, at.repo, commit)?;
    own_from(at, note, commit)
}

/// [`own_record`] from the note already read.
pub(super) fn own_from(
    at: Repo<'_>,
    note: Option<NoteRecord>,
    commit: ObjectId,
) -> Result<Option<RunRecord>> {
    match note {
        Some(NoteRecord::Found(r)) => Ok(Some(*r)),
        // A note that holds no record for this commit says it was not run.
        Some(_) => Ok(None),
        None => indexed(at.ctx, at.row, commit),
    }
}

/// The index's record of this very commit.
fn indexed(ctx: &Context, row: &RepoRow, commit: ObjectId) -> Result<Option<RunRecord>> {
    let hex = commit.to_string();
    Ok(ctx
        .index
        .run_for_commit(&row.repository_id, &hex)?
        .map(|run| run.record)
        .filter(|r| r.commit == hex))
}

/// The result of a commit made with the config it has now (its own `.sandbox.toml`, the user's
/// config, and the experiment's `[config]` when `refname` is an experiment's branch): what
/// `eval` and `promote` may trust. An `error` record is no result.
pub fn current_record(
    at: Repo<'_>,
    commit: ObjectId,
    refname: Option<&str>,
) -> Result<Option<RunRecord>> {
    let Repo { ctx, repo, .. } = at;
    let info = git::commit_info(repo, commit)?;
    let experiment = crate::app::config::commit_config::experiment_of(refname);
    let config = match crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        experiment.as_deref(),
        &gs_config::ConfigFile::default(),
    ) {
        Ok(c) => c,
        Err(_) => return Ok(None),
    };
    let key = config.result_key();
    let mut reader = NoteReader::new(repo)?;
    let own = own_record(at, &mut reader, commit)?.filter(|r| usable(r, &info, &key));
    Ok(own.or_else(|| tree_hit(at, &info, &key)))
}

/// [`current_record`] when it is a cold witness ([`RunRecord::is_cold`]): a run that read no
/// build cache, so nothing an earlier run left decided it. What `eval`, `promote` and `propose`
/// judge; a warm record never answers here.
pub fn cold_record(
    at: Repo<'_>,
    commit: ObjectId,
    refname: Option<&str>,
) -> Result<Option<RunRecord>> {
    Ok(current_record(at, commit, refname)?.filter(RunRecord::is_cold))
}

/// Whether a record made for its own commit may serve other commits of its tree (as
/// [`tree_hit`] finds them in the index): it says whether the tests passed or failed.
pub fn first_hand(r: &RunRecord) -> bool {
    r.cached_from.is_none() && r.status.is_result()
}

/// A record that answers for `info` under config `key`: evidence, of this commit, its tree and
/// that config, with a result.
pub fn usable(r: &RunRecord, info: &CommitInfo, key: &str) -> bool {
    r.is_evidence()
        && r.commit == info.id
        && r.tree == info.tree
        && r.config_hash.as_deref() == Some(key)
        && r.status.is_result()
}

/// A first-hand result of the same tree under config `key`, made for another commit, as a
/// record for `info` (marked `cached_from`). A commit's own indexed record is never its cache:
/// when its note says it was not run, it was not.
pub fn tree_hit(at: Repo<'_>, info: &CommitInfo, key: &str) -> Option<RunRecord> {
    let Repo { ctx, repo, row } = at;
    let hit = ctx
        .index
        .run_for_tree(
            &row.repository_id,
            &info.tree.to_string(),
            Some(key),
            &info.id.to_string(),
        )
        .ok()??;
    // The index says who vouched for it when it was indexed; for another machine's record its
    // note says who does today (this machine's own need no signer's trust).
    if hit.record.verified.as_ref().is_some_and(|v| v.here) {
        return Some(served(hit.record, info));
    }
    let source = ObjectId::from_hex(hit.record.commit.as_bytes()).ok()?;
    let mut reader = NoteReader::new(repo).ok()?;
    let r = reader.record(ctx, repo, source).ok()??;
    if r.cached_from.is_some()
        || r.tree != hit.record.tree
        || r.config_hash != hit.record.config_hash
        || !r.status.is_result()
    {
        return None;
    }
    Some(served(r, info))
}

/// The record `r` (another commit's) as the result served to the commit `info`.
fn served(mut r: RunRecord, info: &CommitInfo) -> RunRecord {
    r.cached_from = Some(r.commit.clone());
    r.commit = info.id.to_string();
    // A commit named by a ref is no snapshot, whatever tree it shares with one.
    r.snapshot = false;
    r.parents = info.parents.iter().map(|p| p.to_string()).collect();
    r
}

/// Write records as notes, then index them.
///
/// The record goes under `refs/notes/sandbox` and its summary under `refs/notes/sandbox-summary`
/// in one ref transaction; the index rows, their events and what the outbox is to send about them
/// ([`crate::app::publish`]) in one database transaction.
pub fn write(at: Repo<'_>, records: &[RunRecord]) -> Result<()> {
    let Repo { ctx, repo, row } = at;
    if records.is_empty() {
        return Ok(());
    }
    let records = &stamped(ctx, records)?;
    let moved = write_notes(ctx, repo, records)?;
    // Asked of git before the transaction, which holds the index's write lock.
    let to = crate::app::publish::Destinations::of(ctx, repo);
    ctx.index.atomically(|| {
        // Before indexing: a record the index already holds (a note written again) is no news.
        crate::app::publish::emit(
            ctx,
            crate::app::publish::Event::Recorded {
                to: &to,
                row,
                records,
            },
        );
        index_records(ctx, row, records)?;
        advance_notes_tip(ctx, row, &moved)
    })
}

/// The index holds the notes `moved` wrote: its notes tip follows, when it was where they were
/// written on (see [`gs_store::Index::advance_notes_tip`]).
fn advance_notes_tip(ctx: &Context, row: &RepoRow, moved: &[git::notes::TipMove]) -> Result<()> {
    for m in moved.iter().filter(|m| m.notes_ref == git::NOTES_REF) {
        let old = m.old.map(|o| o.to_string());
        ctx.index
            .advance_notes_tip(&row.repository_id, old.as_deref(), &m.new.to_string())?;
    }
    Ok(())
}

/// Keep results in the index alone: those of snapshots of uncommitted work, which have no note.
pub fn index_only(ctx: &Context, row: &RepoRow, records: &[RunRecord]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let records = &stamped(ctx, records)?;
    ctx.index.atomically(|| index_records(ctx, row, records))
}

/// Mark a record made by this machine as its own: `by` this data dir, vouched for by its key
/// (the signature itself is made when the note is written). Only for records made here: a
/// record from elsewhere keeps its own line and signature.
pub fn stamp(ctx: &Context, r: &mut RunRecord) -> Result<()> {
    let keys = ctx.keys()?;
    r.by = Some(keys.home_id.clone());
    r.verified = Some(gs_model::Verified {
        signer: "this machine".into(),
        key: keys.fingerprint(),
        here: true,
    });
    Ok(())
}

fn stamped(ctx: &Context, records: &[RunRecord]) -> Result<Vec<RunRecord>> {
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            stamp(ctx, &mut r)?;
            Ok(r)
        })
        .collect()
}

/// Index written results in one transaction: each run, its `run.completed`/`run.failed` event,
/// its job done.
fn index_records(ctx: &Context, row: &RepoRow, records: &[RunRecord]) -> Result<()> {
    let mut events = Vec::with_capacity(records.len());
    let ids = ctx.index.put_runs(&row.repository_id, records)?;
    for (r, run_id) in records.iter().zip(ids) {
        ctx.index.add_execution(&row.repository_id, r)?;
        events.push(gs_store::NewEvent {
            kind: if r.status == Status::Error {
                EventKind::RunFailed
            } else {
                EventKind::RunCompleted
            },
            repository_id: Some(&row.repository_id),
            run_id: Some(run_id),
            commit: Some(&r.commit),
            data: serde_json::json!({"status": r.status, "duration_ms": r.duration_ms, "cached_from": r.cached_from, "error": r.error}),
        });
    }
    ctx.index.add_events(&events)?;
    for ok in [true, false] {
        let commits: Vec<&str> = records
            .iter()
            .filter(|r| (r.status != Status::Error) == ok)
            .map(|r| r.commit.as_str())
            .collect();
        if !commits.is_empty() {
            ctx.index.complete_jobs(&row.repository_id, &commits, ok)?;
        }
    }
    ctx.index.touch_repository(&row.repository_id)?;
    Ok(())
}

/// Whether a record was made by this machine or its fleet (the data dirs sharing its index):
/// only those are written again by this machine, signed with its key. Another machine's
/// record keeps its own signature, in its own note.
pub fn ours(ctx: &Context, r: &RunRecord) -> Result<bool> {
    let Some(v) = &r.verified else {
        return Ok(false);
    };
    Ok(ctx.keys()?.is_ours(&v.key))
}

/// Whether this machine's own key vouches for a record.
pub fn signed_here(ctx: &Context, r: &RunRecord) -> Result<bool> {
    let Some(v) = &r.verified else {
        return Ok(false);
    };
    Ok(v.key == ctx.keys()?.fingerprint())
}

/// The note body of a record this machine made: signed with its key.
fn signed_note(ctx: &Context, r: &RunRecord) -> Result<Vec<u8>> {
    let keys = ctx.keys()?;
    Ok(note::encode(r, &|m| keys.sign(m)))
}

/// The notes of `records` (made here: signed with this machine's key), both refs in one
/// transaction. Returns how the refs moved.
fn write_notes(
    ctx: &Context,
    repo: &gs_git::Repository,
    records: &[RunRecord],
) -> Result<Vec<git::notes::TipMove>> {
    let id = |r: &RunRecord| {
        ObjectId::from_hex(r.commit.as_bytes()).expect("records hold full commit ids")
    };
    let message = if records.len() == 1 {
        format!(
            "git-sandbox: {} {}",
            util::short(&records[0].commit),
            records[0].status
        )
    } else {
        format!("git-sandbox: results for {} commits", records.len())
    };
    Ok(git::notes::write_batch(
        repo,
        &[
            git::notes::NotesEdit {
                notes_ref: git::NOTES_REF,
                notes: records
                    .iter()
                    .map(|r| Ok((id(r), signed_note(ctx, r)?)))
                    .collect::<Result<_>>()?,
            },
            git::notes::NotesEdit {
                notes_ref: git::SUMMARY_NOTES_REF,
                notes: records.iter().map(|r| (id(r), note::summary(r))).collect(),
            },
        ],
        &message,
    )?)
}

/// Write again the notes of `records` that are not in place: gone, or older than the record (a
/// writer that does not compare-and-swap, like plain `git notes add`, can replace the notes ref
/// and drop ours). A note that holds something else is left alone (see [`unreadable`]), and so
/// is a record this machine did not sign; with `fleet`, one its fleet signed is written again
/// too, signed by this machine (a fetch on a shared index: its maker may have died before
/// pushing it). Only then: another signature makes another line, which git's line-wise merge
/// keeps beside the first. Returns how many were written again.
pub fn rewrite_missing(at: Repo<'_>, records: &[RunRecord], fleet: bool) -> Result<usize> {
    let Repo { ctx, repo, .. } = at;
    let mut reader = NoteReader::new(repo)?;
    let mut lost = Vec::new();
    // A snapshot's result never had a note to lose.
    for r in records.iter().filter(|r| !r.snapshot) {
        let Ok(id) = ObjectId::from_hex(r.commit.as_bytes()) else {
            continue;
        };
        if !(if fleet {
            ours(ctx, r)?
        } else {
            signed_here(ctx, r)?
        }) {
            continue;
        }
        // The very note written (the common case) is told by its blob id, without reading it
        // (ed25519 signatures are deterministic: the same record makes the same note).
        let ours = git::objects::blob_id(repo, &signed_note(ctx, r)?);
        if ours.is_some() && reader.lookup.blob(repo, id)? == ours {
            continue;
        }
        let in_place = match reader.read(ctx, repo, id)? {
            None => false,
            Some(NoteRecord::Found(n)) => n.is_evidence() && n.finished_at >= r.finished_at,
            Some(_) => true,
        };
        if !in_place && git::objects::is_commit(repo, id) {
            lost.push(r.clone());
        }
    }
    restore(at, &lost)
}

/// Write the notes of `lost` again, with a `notes.restored` event. Returns how many.
fn restore(at: Repo<'_>, lost: &[RunRecord]) -> Result<usize> {
    let Repo { ctx, repo, row } = at;
    if !lost.is_empty() {
        write_notes(ctx, repo, lost)?;
        let commits: Vec<&str> = lost.iter().map(|r| r.commit.as_str()).collect();
        ctx.index.add_event(
            EventKind::NotesRestored,
            Some(&row.repository_id),
            None,
            None,
            &serde_json::json!({ "commits": commits }),
        )?;
    }
    Ok(lost.len())
}

/// Indexed results whose note now holds no record for their commit (garbage, half a record, or
/// another commit's record): the commit counts as not run, so its index row goes (the index
/// follows the notes) and it is queued again; its next result replaces the bad note. Returns
/// the commits queued again.
pub fn unreadable(at: Repo<'_>, records: &[RunRecord]) -> Result<Vec<String>> {
    let Repo { ctx, repo, row } = at;
    let mut reader = NoteReader::new(repo)?;
    let mut bad = Vec::new();
    for r in records {
        let Ok(id) = ObjectId::from_hex(r.commit.as_bytes()) else {
            continue;
        };
        if matches!(
            reader.read(ctx, repo, id)?,
            Some(NoteRecord::Invalid(_) | NoteRecord::NotForThisCommit)
        ) {
            bad.push((r.commit.clone(), r.refname.clone()));
        }
    }
    forget_unreadable(ctx, row, bad, &reader)
}

/// Forget the index rows of `bad` (commit, branch) and queue their commits again, with a
/// `notes.unreadable` event naming why their notes could not be read. Returns the commits.
fn forget_unreadable(
    ctx: &Context,
    row: &RepoRow,
    bad: Vec<(String, Option<String>)>,
    reader: &NoteReader,
) -> Result<Vec<String>> {
    for (commit, _) in &bad {
        ctx.index.delete_run(&row.repository_id, commit)?;
    }
    if !bad.is_empty() {
        ctx.index.requeue(&row.repository_id, &bad, "watch")?;
        let commits: Vec<&str> = bad.iter().map(|(c, _)| c.as_str()).collect();
        ctx.index.add_event(
            EventKind::NotesUnreadable,
            Some(&row.repository_id),
            None,
            None,
            &serde_json::json!({ "commits": commits, "reasons": reader.invalid.iter().map(|(c, w)| format!("{}: {w}", util::short(&c.to_string()))).collect::<Vec<_>>() }),
        )?;
    }
    Ok(bad.into_iter().map(|(c, _)| c).collect())
}

/// [`rewrite_missing`] (records this machine signed) and [`unreadable`] in one pass over
/// `records`, each note read once, and not at all when its blob is the very note this machine
/// writes for the record (the common case). What the daemon does for every indexed result it
/// has not looked at yet. Returns (notes written again, commits queued again).
pub fn check_notes(at: Repo<'_>, records: &[RunRecord]) -> Result<(usize, usize)> {
    let Repo { ctx, repo, row } = at;
    let mut reader = NoteReader::new(repo)?;
    let mut lost = Vec::new();
    let mut bad = Vec::new();
    // A snapshot's result never had a note to lose.
    for r in records.iter().filter(|r| !r.snapshot) {
        let Ok(id) = ObjectId::from_hex(r.commit.as_bytes()) else {
            continue;
        };
        let here = signed_here(ctx, r)?;
        if here {
            let ours = git::objects::blob_id(repo, &signed_note(ctx, r)?);
            if ours.is_some() && reader.lookup.blob(repo, id)? == ours {
                continue;
            }
        }
        match reader.read(ctx, repo, id)? {
            Some(NoteRecord::Invalid(_) | NoteRecord::NotForThisCommit) => {
                bad.push((r.commit.clone(), r.refname.clone()))
            }
            Some(NoteRecord::Found(n)) if n.is_evidence() && n.finished_at >= r.finished_at => {}
            _ if here && git::objects::is_commit(repo, id) => lost.push(r.clone()),
            _ => {}
        }
    }
    let restored = restore(at, &lost)?;
    let requeued = forget_unreadable(ctx, row, bad, &reader)?.len();
    Ok((restored, requeued))
}
