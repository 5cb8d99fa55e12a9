//! Watermarks: the tip of each watched branch the tool last knew, so that a hook or the daemon
//! queues only the commits that arrived since, never the history a repository had when it was
//! adopted. Kept in the repository's own git dir (`<git common dir>/sandbox-watermarks`, lines of
//! `<commit> <refname>`): local to this clone, never pushed, and it survives a lost index.

use super::{GitError, Result};
use gix::ObjectId;
use std::collections::BTreeMap;
use std::path::PathBuf;

const FILE: &str = "sandbox-watermarks";

pub type Marks = BTreeMap<String, ObjectId>;

fn path(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join(FILE)
}

/// The watermarks, or `None` when this repository has none yet (adopted before they existed,
/// or the file was removed).
pub fn read(repo: &gix::Repository) -> Option<Marks> {
    let text = std::fs::read_to_string(path(repo)).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let (id, name) = l.split_once(' ')?;
                Some((name.to_string(), ObjectId::from_hex(id.as_bytes()).ok()?))
            })
            .collect(),
    )
}

/// Replace the watermarks (atomically: a reader sees the old set or the new one).
pub fn write(repo: &gix::Repository, marks: &Marks) -> Result<()> {
    let mut body = String::new();
    for (name, id) in marks {
        if name.contains(['\n', ' ']) {
            continue;
        }
        body.push_str(&format!("{id} {name}\n"));
    }
    let p = path(repo);
    // No fsync: this runs in every hook, and a crash that loses the newest watermarks only
    // makes the next scan look at a few commits again (those with a job or a note stop it).
    crate::util::replace_file(&p, body.as_bytes(), false).map_err(|source| GitError::Io {
        context: format!("cannot write {}", p.display()),
        source,
    })
}

/// Remove the watermarks, so that adopting the repository again starts afresh (instead of
/// queueing everything that arrived since). Returns whether there were any.
pub fn remove(repo: &gix::Repository) -> Result<bool> {
    let p = path(repo);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(GitError::Io {
            context: format!("cannot remove {}", p.display()),
            source,
        }),
    }
}
