//! Which crates phase one (the probe beside a `cargo test` run) picks for a commit: those whose
//! files it changed and every crate that depends on one of them through a path dependency; or
//! why there is no probe (a manifest, the lockfile, a build script, cargo's settings
//! or a file outside every crate changed).

use super::{Selection, Selects, Why};
use crate::app::Result;
use gs_analysis::{
    cargograph, cargograph::configures_every_crate, cargograph::member_patterns,
    cargograph::Workspace,
};
use gs_config::Config;
use gs_git as git;
use gs_git::ObjectId;
use gs_git::{objects, CommitInfo};
use gs_runner::cargo_cmd;
use std::collections::{BTreeSet, HashMap};

/// Phase one of `info`'s run when its tests are a `cargo test` (the configured command, or the
/// one detected for a tree with a Cargo.toml at its root); `None` when they are not.
pub(super) fn select(
    repo: &gs_git::Repository,
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
    let one_phase = |why: String| Ok(Some(Selection::one_phase_of(Selects::Crates, why)));
    let read = |id: ObjectId| -> Option<String> {
        let blob = objects::blob(repo, id).ok()?;
        Some(String::from_utf8_lossy(&blob).into_owned())
    };
    let Some(root) = git::blob_at(repo, info.tree, "Cargo.toml")
        .ok()
        .flatten()
        .and_then(|(id, _)| read(id))
    else {
        return one_phase("the tree has no Cargo.toml at its root: no workspace to split".into());
    };
    let found = member_manifests(repo, info.tree, &member_patterns(&root));
    let manifests: Vec<&str> = found.keys().map(String::as_str).collect();
    let text_of = |path: &str| -> Option<String> {
        if path == "Cargo.toml" {
            return Some(root.clone());
        }
        read(*found.get(path)?)
    };
    let ws = match Workspace::read(&manifests, &text_of) {
        Ok(ws) => ws,
        Err(why) => return one_phase(why),
    };
    if !cargo.workspace && (ws.root_package || ws.default_members) {
        return one_phase(format!(
            "`{command}` tests {} only, and the probe would test crates it does not: add --workspace to have one",
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
            None if crate::app::run::selection::irrelevant(p) => {}
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

/// The `Cargo.toml` (path and blob) of each directory the member patterns (`crates/*`) name:
/// only the trees on the patterns' way are read, not the whole tree.
fn member_manifests(
    repo: &gs_git::Repository,
    tree: ObjectId,
    patterns: &[String],
) -> HashMap<String, ObjectId> {
    let mut out = HashMap::new();
    for pattern in patterns.iter().filter_map(|p| cargograph::join("", p)) {
        let mut dirs: Vec<(String, ObjectId)> = vec![(String::new(), tree)];
        let segments: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
        for (i, seg) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let mut next = Vec::new();
            for (dir, id) in &dirs {
                let Ok(entries) = objects::entries(repo, *id) else {
                    continue;
                };
                for e in entries
                    .into_iter()
                    .filter(|e| e.kind == objects::Kind::Tree)
                {
                    let name = e.path;
                    if !cargograph::matches(seg, &name) {
                        continue;
                    }
                    let path = cargograph::join(dir, &name).unwrap_or_default();
                    let sub = e.id;
                    if !last {
                        next.push((path, sub));
                        continue;
                    }
                    let manifest = objects::entry_at(repo, sub, "Cargo.toml");
                    if let Some(m) = manifest.filter(|m| m.kind.is_file()) {
                        out.insert(format!("{path}/Cargo.toml"), m.id);
                    }
                }
            }
            dirs = next;
        }
    }
    out
}
