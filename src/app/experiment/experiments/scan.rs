//! What experiments git knows of, read in one pass over the refs (a repository may hold tens of
//! thousands of experiment branches), and the index brought in line with it in one transaction.

use super::meta::{self, Meta, Origin, META_PREFIX};
use super::{ARCHIVE_PREFIX, BRANCH_PREFIX, PROMOTED_PREFIX, ROLLED_BACK_PREFIX};
use crate::app::Repo;
use crate::app::Result;
use gs_git as git;
use gs_git::remote::SANDBOX_REMOTES;
use gs_git::ObjectId;
use gs_model::{Experiment, State};
use gs_util as util;
use gs_util::time;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Where one place (this repository, or what was fetched from remotes) keeps experiments.
#[derive(Default)]
struct Place {
    branches: HashMap<String, ObjectId>,
    archived: HashMap<String, ObjectId>,
    promoted: HashMap<String, ObjectId>,
    rolled_back: HashSet<String>,
    /// Metadata commits (for remotes, one of them: see `Snapshot::copies`).
    meta: HashMap<String, ObjectId>,
}

impl Place {
    fn knows(&self, name: &str) -> bool {
        self.branches.contains_key(name)
            || self.archived.contains_key(name)
            || self.promoted.contains_key(name)
            || self.meta.contains_key(name)
    }

    fn state(&self, name: &str) -> State {
        if self.rolled_back.contains(name) {
            State::RolledBack
        } else if self.promoted.contains_key(name) {
            State::Promoted
        } else if self.branches.contains_key(name) {
            State::Active
        } else if self.archived.contains_key(name) {
            State::Killed
        } else {
            // Metadata alone: started, its branch not here (yet).
            State::Active
        }
    }

    fn head(&self, name: &str) -> Option<ObjectId> {
        [&self.branches, &self.archived, &self.promoted]
            .into_iter()
            .find_map(|m| m.get(name).copied())
    }
}

/// The experiment refs of a repository, read once.
#[derive(Default)]
pub struct Snapshot {
    local: Place,
    /// Every remote's, as fetched (`refs/sandbox/remotes/<remote>/…`, `refs/remotes/<remote>/experiment/…`).
    remotes: Place,
    /// The remotes' metadata commits of each name, in the order they are read.
    copies: HashMap<String, Vec<(String, ObjectId)>>,
}

/// The name after `prefix` in `full`, when it is a valid experiment name.
fn name_after<'a>(full: &'a str, prefix: &str) -> Option<&'a str> {
    full.strip_prefix(prefix)
        .filter(|n| util::name_problem(n).is_none())
}

impl Snapshot {
    pub fn read(repo: &gs_git::Repository) -> Result<Snapshot> {
        let _t = gs_util::trace::span("experiments: refs");
        let mut s = Snapshot::default();
        // The ids the refs hold, not peeled: reading each object would cost more than the refs.
        let each = |prefix: &str, f: &mut dyn FnMut(&str, Option<ObjectId>)| -> Result<()> {
            for (full, id) in git::objects::refs(repo, prefix)? {
                f(&full, id);
            }
            Ok(())
        };
        let local = &mut s.local;
        each(BRANCH_PREFIX, &mut |full, id| {
            if let (Some(n), Some(id)) = (name_after(full, BRANCH_PREFIX), id) {
                local.branches.insert(n.to_string(), id);
            }
        })?;
        let remotes = &mut s.remotes;
        let copies = &mut s.copies;
        each("refs/sandbox/", &mut |full, id| {
            let (place, rest, remote) = match full.strip_prefix(SANDBOX_REMOTES) {
                Some(rest) => match rest.split_once('/') {
                    Some((remote, rest)) => {
                        (&mut *remotes, format!("refs/sandbox/{rest}"), Some(remote))
                    }
                    None => return,
                },
                None => (&mut *local, full.to_string(), None),
            };
            let Some(id) = id else { return };
            if let Some(n) = name_after(&rest, ARCHIVE_PREFIX) {
                place.archived.insert(n.to_string(), id);
            } else if let Some(n) = name_after(&rest, PROMOTED_PREFIX) {
                place.promoted.insert(n.to_string(), id);
            } else if let Some(n) = name_after(&rest, ROLLED_BACK_PREFIX) {
                place.rolled_back.insert(n.to_string());
            } else if let Some(n) = name_after(&rest, META_PREFIX) {
                place.meta.insert(n.to_string(), id);
                if let Some(r) = remote {
                    copies
                        .entry(n.to_string())
                        .or_default()
                        .push((r.to_string(), id));
                }
            }
        })?;
        for c in s.copies.values_mut() {
            meta::prefer(c);
        }
        each("refs/remotes/", &mut |full, id| {
            let branch = full
                .strip_prefix("refs/remotes/")
                .and_then(|rest| rest.split_once('/'))
                .and_then(|(_, b)| name_after(b, "experiment/"));
            if let (Some(n), Some(id)) = (branch, id) {
                remotes.branches.entry(n.to_string()).or_insert(id);
            }
        })?;
        Ok(s)
    }

    /// Every name: this repository's, and the ones only a remote's metadata names.
    fn names(&self) -> Vec<String> {
        let local = &self.local;
        let mut names: std::collections::BTreeSet<&String> = local.branches.keys().collect();
        names.extend(local.archived.keys());
        names.extend(local.promoted.keys());
        names.extend(local.meta.keys());
        names.extend(self.remotes.meta.keys());
        names.into_iter().cloned().collect()
    }

    /// The place that decides `name`'s state: here when anything of it is here, else remotes.
    fn place(&self, name: &str) -> &Place {
        if self.local.knows(name) {
            &self.local
        } else {
            &self.remotes
        }
    }

    /// The commit an experiment's results hang off: its branch, else its archive, else what was
    /// promoted (here, else as fetched from a remote).
    pub fn head(&self, name: &str) -> Option<ObjectId> {
        self.place(name).head(name)
    }

    /// The metadata of `name` (see [`meta::metadata`]), from the refs read.
    pub fn metadata(
        &self,
        repo: &gs_git::Repository,
        name: &str,
        folders: &mut meta::Folders,
    ) -> Option<Meta> {
        let copies = self.copies.get(name).map_or(&[][..], Vec::as_slice);
        let local = self.local.meta.get(name).copied();
        meta::metadata_in(repo, name, local, copies, self.head(name), folders)
    }
}

/// One experiment as git says it is, with its metadata.
pub struct Scanned {
    pub experiment: Experiment,
    pub meta: Option<Meta>,
    pub head: Option<ObjectId>,
}

/// Every experiment git knows of, with its state read from the refs: a rolled-back ref means
/// rolled back, else a promoted ref means promoted, else a branch (or metadata alone: no
/// commits yet) means active, else an archive means killed. An experiment only a remote knows
/// is read from what was fetched from it.
pub fn scan(repo: &gs_git::Repository) -> Result<(Snapshot, Vec<Scanned>)> {
    let snap = Snapshot::read(repo)?;
    let _t = gs_util::trace::span("experiments: metadata");
    let mut times: HashMap<ObjectId, String> = HashMap::new();
    let mut folders = meta::Folders::default();
    let mut out = Vec::new();
    for name in snap.names() {
        let place = snap.place(&name);
        let head = place.head(&name);
        let meta = snap.metadata(repo, &name, &mut folders);
        let created_at = match &meta {
            Some(m) => m.file.created_at.clone(),
            None => match head {
                Some(h) => times
                    .entry(h)
                    .or_insert_with(|| {
                        git::objects::commit_time(repo, h)
                            .map(|t| time::rfc3339(t * 1000))
                            .unwrap_or_else(time::now_rfc3339)
                    })
                    .clone(),
                None => time::now_rfc3339(),
            },
        };
        let file = meta.as_ref().map(|m| &m.file);
        out.push(Scanned {
            experiment: Experiment {
                branch: format!("experiment/{name}"),
                state: place.state(&name),
                hypothesis: file.and_then(|m| m.hypothesis.clone()),
                base_commit: file.map(|m| m.base_commit.clone()),
                budget_ms: file
                    .and_then(|m| m.budget.as_deref())
                    .and_then(super::parse_budget),
                updated_at: created_at.clone(),
                created_at,
                name,
            },
            meta,
            head,
        });
    }
    Ok((snap, out))
}

/// Bring the index in line with git: experiments found in refs are added or get their state
/// and metadata from the refs (the budget from this repository's metadata only); an old
/// experiment's committed metadata is moved into its ref. Rows git no longer knows (killed
/// with `--delete`) are kept as history. Returns the scan.
pub fn sync(at: Repo<'_>) -> Result<(Snapshot, Vec<Scanned>)> {
    let Repo { ctx, repo, row } = at;
    let (snap, mut found) = scan(repo)?;
    let _t = gs_util::trace::span("experiments: index");
    let indexed: BTreeMap<String, Experiment> = ctx
        .index
        .experiments(&row.repository_id)?
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    let mut changed = Vec::new();
    for s in &mut found {
        let old = indexed.get(&s.experiment.name);
        if let Some(m) = s.meta.as_mut().filter(|m| m.origin == Origin::Committed) {
            // Once: the file stays in the old branch's history, the ref holds it from now.
            if meta::migrate(repo, &m.file, old.map(|o| o.budget_ms)).is_ok() {
                m.origin = Origin::Local;
                if let Some(o) = old {
                    s.experiment.budget_ms = o.budget_ms;
                }
            }
        }
        let e = &mut s.experiment;
        let local = s.meta.as_ref().is_some_and(|m| m.origin == Origin::Local);
        match old {
            Some(old) => {
                if !local {
                    e.budget_ms = old.budget_ms;
                }
                if old.state == e.state
                    && old.hypothesis == e.hypothesis
                    && old.base_commit == e.base_commit
                    && old.budget_ms == e.budget_ms
                {
                    *e = old.clone();
                    continue;
                }
                e.created_at = old.created_at.clone();
                e.updated_at = time::now_rfc3339();
                changed.push((e.clone(), old.budget_ms != e.budget_ms));
            }
            None => changed.push((e.clone(), false)),
        }
    }
    if !changed.is_empty() {
        ctx.index.put_experiments(&row.repository_id, &changed)?;
    }
    Ok((snap, found))
}
