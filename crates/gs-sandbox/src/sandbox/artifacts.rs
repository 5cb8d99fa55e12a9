//! The files a run hands back to the supervisor (its `Plan::artifacts`: a JUnit report, a
//! coverage file): hidden before the command starts, so that what is there once it ended was
//! written by this run, and read afterwards inside the sandbox, with its rights, never through a
//! link — by the namespace's init, on [`ARTIFACT_FD`].

use super::helper::write_all;
use super::{Artifact, Plan, ARTIFACT_FD};

/// How many files of a report directory (`DIR/*.xml`) are hidden before the command at most: a
/// directory holding more is not read afterwards.
const HIDE_MAX: usize = 1 << 16;

/// Before the command: remove the reports the supervisor will ask for (`Plan::artifacts`) from
/// the run's view — with its uid, never through a link — so that what is there once it ended
/// was written by this run. Over a build cache's copy the removal is a whiteout in the run's
/// upper layer; the cache itself is untouched. The reports that could not be hidden, with why:
/// they are not read afterwards.
pub(super) fn hide_artifacts(plan: &Plan) -> Vec<(String, String)> {
    use gs_util::beneath::{list_beneath, remove_beneath, Skip};
    let mut unhidden = Vec::new();
    let hide = |rel: String, unhidden: &mut Vec<(String, String)>| {
        if let Err(why) = remove_beneath(&plan.cwd, &rel) {
            unhidden.push((rel, why.to_string()));
        }
    };
    for rel in &plan.artifacts {
        match super::artifact_pattern(rel) {
            Some((dir, suffix)) => match list_beneath(&plan.cwd, dir, HIDE_MAX) {
                Ok(names) if names.len() >= HIDE_MAX => unhidden.push((
                    rel.clone(),
                    format!("{dir} holds more than {HIDE_MAX} files"),
                )),
                Ok(names) => {
                    for n in names.iter().filter(|n| n.ends_with(suffix)) {
                        hide(format!("{dir}/{n}"), &mut unhidden);
                    }
                }
                Err(Skip::Missing(_)) => {}
                Err(why) => unhidden.push((rel.clone(), why.to_string())),
            },
            None => hide(rel.clone(), &mut unhidden),
        }
    }
    unhidden
}

/// Read the files the supervisor asked for, inside the sandbox and with its rights (its view,
/// its uid, Landlock), never following a link, never blocking, never more than the cap; write
/// each as one JSON line on [`ARTIFACT_FD`]. A report [`hide_artifacts`] could not hide is not
/// read: what is there may be an earlier run's.
pub(super) fn hand_back(plan: &Plan, unhidden: &[(String, String)]) {
    let stale = |path: &str| {
        unhidden.iter().find(|(p, _)| p == path).map(|(p, why)| {
            Artifact::skipped(
                p.clone(),
                format!("{why}; a copy from before the run could not be hidden, so it is not read"),
            )
        })
    };
    for rel in &plan.artifacts {
        if let Some((dir, suffix)) = super::artifact_pattern(rel) {
            let found = match stale(rel) {
                Some(skipped) => vec![skipped],
                None => super::read_pattern(&plan.cwd, rel, dir, suffix),
            };
            for artifact in found {
                let artifact = stale(&artifact.path).unwrap_or(artifact);
                let mut line = serde_json::to_vec(&artifact).unwrap_or_default();
                line.push(b'\n');
                write_all(ARTIFACT_FD, &line);
            }
            continue;
        }
        let cap = super::artifact_cap(rel);
        let artifact = match stale(rel) {
            Some(skipped) => skipped,
            None => match gs_util::beneath::read_beneath(&plan.cwd, rel, cap) {
                Ok(bytes) => Artifact::read(rel.clone(), bytes),
                Err(why) => Artifact::skipped(rel.clone(), why.to_string()),
            },
        };
        let mut line = serde_json::to_vec(&artifact).unwrap_or_default();
        line.push(b'\n');
        write_all(ARTIFACT_FD, &line);
    }
    // SAFETY: closing our descriptor: the supervisor reads to its end.
    unsafe { libc::close(ARTIFACT_FD) };
}
