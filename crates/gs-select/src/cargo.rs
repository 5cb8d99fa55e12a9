//! cargo test's phase one: the crates whose files the commit changed and every crate that
//! depends on one of them through a path dependency; or why there is no probe (a manifest, the
//! lockfile, a build script, cargo's settings or a file outside every crate changed).

use crate::command::cargo::{recognise, CargoTest};
use crate::{ChangeWhy, CommandWhy, Discovery, OnePhase, Result, Runner};
use crate::{Selection, Selects, Sources, Why};
use gs_analysis::cargograph::{self, configures_every_crate, member_patterns, Workspace};
use std::collections::{BTreeMap, BTreeSet};

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// A recognised `cargo test`.
pub struct CargoRunner {
    pub command: String,
    pub cargo: CargoTest,
}

/// The cargo test of `command`, or with none configured the one detection picks for a tree
/// with a Cargo.toml at its root; `None` when the tests are not a cargo test.
pub fn runner(command: Option<&str>, src: &dyn Sources) -> Option<CargoRunner> {
    let command = match command {
        Some(c) => c,
        None if src.has_file("Cargo.toml") => "cargo test",
        None => return None,
    };
    Some(CargoRunner {
        cargo: recognise(command)?,
        command: command.to_string(),
    })
}

impl Runner for CargoRunner {
    fn selects(&self) -> Selects {
        Selects::Crates
    }

    fn select(&self, src: &dyn Sources) -> Result<Selection> {
        let one_phase = |why| Ok(Selection::whole_suite(Selects::Crates, why));
        let Some(root) = src.text("Cargo.toml", MAX_MANIFEST_BYTES) else {
            return one_phase(OnePhase::Discovery(Discovery::NoWorkspace));
        };
        let found = member_manifests(src, &member_patterns(&root));
        let manifests: Vec<&str> = found.keys().map(String::as_str).collect();
        let text_of = |path: &str| -> Option<String> {
            if path == "Cargo.toml" {
                return Some(root.clone());
            }
            found.get(path)?.clone()
        };
        let ws = match Workspace::read(&manifests, &text_of) {
            Ok(ws) => ws,
            Err(why) => return one_phase(OnePhase::Other(why)),
        };
        if !self.cargo.workspace && (ws.root_package || ws.default_members) {
            return one_phase(OnePhase::Command {
                command: self.command.clone(),
                why: CommandWhy::PartOfWorkspace {
                    root: ws.root_package,
                },
            });
        }
        let changes = match crate::listed_changes(src, Selects::Crates)? {
            Ok(c) => c,
            Err(why) => return one_phase(why),
        };
        let mut changed_files = Vec::new();
        let mut changed = BTreeSet::new();
        for f in &changes.files {
            let p = f.path.as_str();
            let what = if configures_every_crate(p) || p == ".sandbox.toml" {
                ChangeWhy::ConfiguresCrates
            } else {
                match ws.owner(p) {
                    Some(c) => {
                        changed.insert(c.name.clone());
                        changed_files.push(p.to_string());
                        continue;
                    }
                    None if crate::irrelevant(p) => continue,
                    None => ChangeWhy::OutsideCrates,
                }
            };
            return one_phase(OnePhase::Changed {
                path: p.to_string(),
                what,
            });
        }
        let reached = ws.reaching(&changed);
        let one_phase = if reached.is_empty() {
            Some(OnePhase::NothingReached(Selects::Crates))
        } else if reached.len() == ws.crates.len() {
            Some(OnePhase::EverythingReached(Selects::Crates))
        } else {
            None
        };
        Ok(Selection {
            selects: Selects::Crates,
            one_phase,
            changed: changed_files,
            test_files: ws.crates.len(),
            files: reached
                .into_iter()
                .map(|(name, path)| (name, vec![Why::DependsOn { path }]))
                .collect(),
            rest: Vec::new(),
            first: Vec::new(),
        })
    }
}

/// The text of the `Cargo.toml` of each directory the member patterns (`crates/*`) name: only
/// the directories on the patterns' way are read, not the whole tree.
fn member_manifests(src: &dyn Sources, patterns: &[String]) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for pattern in patterns.iter().filter_map(|p| cargograph::join("", p)) {
        let mut dirs: Vec<String> = vec![String::new()];
        let segments: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
        for (i, seg) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let mut next = Vec::new();
            for dir in &dirs {
                for name in src.dirs(dir) {
                    if !cargograph::matches(seg, &name) {
                        continue;
                    }
                    let path = cargograph::join(dir, &name).unwrap_or_default();
                    if !last {
                        next.push(path);
                        continue;
                    }
                    let manifest = format!("{path}/Cargo.toml");
                    if src.has_file(&manifest) {
                        let text = src.text(&manifest, MAX_MANIFEST_BYTES);
                        out.insert(manifest, text);
                    }
                }
            }
            dirs = next;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemTree;

    const WS: &[(&str, &str)] = &[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("Cargo.lock", ""),
        ("crates/leaf/Cargo.toml", "[package]\nname = \"leaf\"\n"),
        ("crates/leaf/src/lib.rs", "pub fn f() {}\n"),
        (
            "crates/mid/Cargo.toml",
            "[package]\nname = \"mid\"\n[dependencies]\nleaf = { path = \"../leaf\" }\n",
        ),
        ("crates/mid/src/lib.rs", "pub fn g() {}\n"),
        ("crates/other/Cargo.toml", "[package]\nname = \"other\"\n"),
        ("crates/other/src/lib.rs", "pub fn h() {}\n"),
    ];

    #[test]
    fn a_crate_and_those_that_depend_on_it() {
        let t = MemTree::commit(WS, &[("crates/leaf/src/lib.rs", Some("pub fn f() { }\n"))]);
        let r = runner(None, &t).unwrap();
        let s = r.select(&t).unwrap();
        assert_eq!(s.one_phase, None);
        assert_eq!(s.phase_one().unwrap(), ["leaf", "mid"]);
        assert_eq!(s.test_files, 3);
        let lock = MemTree::commit(WS, &[("Cargo.lock", Some("x"))]);
        assert_eq!(
            r.select(&lock).unwrap().one_phase.unwrap().to_string(),
            "Cargo.lock changed: it configures how every crate builds or is tested"
        );
        let outside = MemTree::commit(WS, &[("data/x.json", Some("{}"))]);
        assert!(matches!(
            r.select(&outside).unwrap().one_phase,
            Some(OnePhase::Changed {
                what: ChangeWhy::OutsideCrates,
                ..
            })
        ));
        assert!(runner(Some("make test"), &t).is_none());
    }
}
