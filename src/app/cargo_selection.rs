//! Which crates phase one of a two-phase `cargo test` picks for a commit: those whose files it
//! changed and every crate that depends on one of them through a path dependency; or why the
//! whole workspace runs in one phase (a manifest, the lockfile, a build script, cargo's settings
//! or a file outside every crate changed).

use super::selection::{Selection, Selects, Why};
use super::Result;
use crate::analysis::cargograph::{configures_every_crate, Workspace};
use crate::config::Config;
use crate::git::{self, gix_err, CommitInfo};
use crate::runner::cargo_cmd;
use gix::bstr::ByteSlice;
use std::collections::{BTreeSet, HashMap};

/// Phase one of `info`'s run when its tests are a `cargo test` (the configured command, or the
/// one detected for a tree with a Cargo.toml at its root); `None` when they are not.
pub(super) fn select(
    repo: &gix::Repository,
    info: &CommitInfo,
    config: &Config,
) -> Result<Option<Selection>> {
    let command = match config.test.command.as_deref() {
        Some(c) => c,
        // What detection picks when the tree is checked out.
        None if git::path_in_tree(repo, info.tree, "Cargo.toml") => "cargo test",
        None => return Ok(None),
    };
    let Some(cargo) = cargo_cmd::recognise(command) else {
        return Ok(None);
    };
    let tree = repo.find_tree(info.tree).map_err(gix_err)?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(gix_err)?;
    let blobs: HashMap<String, gix::ObjectId> = recorder
        .records
        .into_iter()
        .filter(|e| e.mode.is_blob())
        .map(|e| (e.filepath.to_str_lossy().into_owned(), e.oid))
        .collect();
    let one_phase = |why: String| Ok(Some(Selection::one_phase_of(Selects::Crates, why)));
    if !blobs.contains_key("Cargo.toml") {
        return one_phase("the tree has no Cargo.toml at its root: no workspace to split".into());
    }
    let text_of = |path: &str| -> Option<String> {
        let blob = repo.find_blob(*blobs.get(path)?).ok()?;
        Some(String::from_utf8_lossy(&blob.data).into_owned())
    };
    let manifests: Vec<&str> = blobs
        .keys()
        .map(String::as_str)
        .filter(|p| *p == "Cargo.toml" || p.ends_with("/Cargo.toml"))
        .collect();
    let ws = match Workspace::read(&manifests, &text_of) {
        Ok(ws) => ws,
        Err(why) => return one_phase(why),
    };
    if !cargo.workspace && (ws.root_package || ws.default_members) {
        return one_phase(format!(
            "`{command}` tests {} only, and phase two would test the whole workspace: add --workspace to split it",
            if ws.root_package {
                "the root package"
            } else {
                "the default members"
            }
        ));
    }
    let Some(_) = info.parents.first() else {
        return one_phase("a first commit: no parent to compare with".into());
    };
    let changes = git::diff::commit_changes(repo, info)?;
    if changes.files_omitted > 0 {
        return one_phase(format!(
            "{} files changed: more than the {} whose crates are looked up",
            changes.files_changed,
            changes.files.len()
        ));
    }
    let mut changed_files = Vec::new();
    let mut changed = BTreeSet::new();
    for f in &changes.files {
        let p = f.path.as_str();
        if configures_every_crate(p) || p == ".sandbox.toml" {
            return one_phase(format!(
                "{p} changed: it configures how every crate builds or is tested"
            ));
        }
        match ws.owner(p) {
            Some(c) => {
                changed.insert(c.name.clone());
                changed_files.push(p.to_string());
            }
            None if super::selection::irrelevant(p) => {}
            None => {
                return one_phase(format!(
                    "{p} changed: it is in no crate of the workspace, so which crates read it is not known"
                ))
            }
        }
    }
    let reached = ws.reaching(&changed);
    let mut s = Selection {
        selects: Selects::Crates,
        changed: changed_files,
        test_files: ws.crates.len(),
        ..Selection::default()
    };
    s.one_phase = if reached.is_empty() {
        Some("the commit changed no crate".into())
    } else if reached.len() == ws.crates.len() {
        Some("every crate is reached: phase one would be the whole workspace".into())
    } else {
        None
    };
    s.files = reached
        .into_iter()
        .map(|(name, path)| (name, vec![Why::DependsOn { path }]))
        .collect();
    Ok(Some(s))
}
