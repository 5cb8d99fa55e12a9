//! What a run of a commit is to its branch: the answer the build-cache rule
//! ([`caches::writes`]) is asked with.

use super::RunOptions;
use gs_git::ObjectId;
use gs_runner::caches;
use std::collections::{BinaryHeap, HashSet};

/// What a run of `commit` is, for the build-cache rule ([`caches::writes`]): a commit run as its
/// branch's is one when the branch holds it (its tip, or an ancestor of the tip); a candidate
/// merge named through production (`promote`, its dry run) is not.
pub(super) fn run_of(
    opts: &RunOptions<'_>,
    repo: &gs_git::Repository,
    walk: &mut BranchWalk,
    commit: ObjectId,
) -> caches::RunOf {
    if opts.is_trial() {
        return caches::RunOf::Trial;
    }
    if opts.unnoted {
        return caches::RunOf::Snapshot;
    }
    if opts.probe {
        return caches::RunOf::Probe;
    }
    let tip = opts
        .refname
        .as_deref()
        .filter(|r| r.starts_with("refs/heads/"))
        .and_then(|r| gs_git::objects::ref_peeled(repo, r));
    let on_branch = tip.is_some_and(|tip| walk.holds(repo, tip, commit));
    caches::RunOf::Branch { on_branch }
}

/// How far past a commit's own time the walk goes before asking git for a merge base: commit
/// times are not ordered by ancestry (clocks are skewed), so this only bounds the walk, and
/// the merge base answers whatever the walk did not reach.
const SKEW_SECS: i64 = 86_400;

/// The ancestry of a branch's tip, walked newest first as far as a run's commits need and kept
/// for the next: a range's commits, asked about one after another, cost one walk of the range
/// together, not a merge base each from the tip (quadratic on a long range).
#[derive(Default)]
pub(super) struct BranchWalk {
    tip: Option<ObjectId>,
    /// Commits to visit, by commit time.
    heap: BinaryHeap<(i64, ObjectId)>,
    queued: HashSet<ObjectId>,
    reached: HashSet<ObjectId>,
}

fn time_of(repo: &gs_git::Repository, id: ObjectId) -> Option<(i64, Vec<ObjectId>)> {
    gs_git::objects::time_and_parents(repo, id)
}

fn is_ancestor(repo: &gs_git::Repository, commit: ObjectId, tip: ObjectId) -> bool {
    gs_git::objects::is_ancestor(repo, commit, tip)
}

impl BranchWalk {
    /// Whether `commit` is `tip` or one of its ancestors.
    pub(super) fn holds(
        &mut self,
        repo: &gs_git::Repository,
        tip: ObjectId,
        commit: ObjectId,
    ) -> bool {
        if self.tip != Some(tip) {
            // A tip that moved on keeps what was walked (its ancestry holds the old one's);
            // one that was rewound or rewritten starts afresh.
            let moved_on = self.tip.is_some_and(|old| is_ancestor(repo, old, tip));
            if !moved_on {
                *self = BranchWalk::default();
            }
            self.tip = Some(tip);
            if self.queued.insert(tip) {
                let time = time_of(repo, tip).map_or(i64::MAX, |(t, _)| t);
                self.heap.push((time, tip));
            }
        }
        if self.reached.contains(&commit) {
            return true;
        }
        let Some((time, _)) = time_of(repo, commit) else {
            return false;
        };
        while let Some(&(t, id)) = self.heap.peek() {
            if t < time.saturating_sub(SKEW_SECS) {
                break;
            }
            self.heap.pop();
            self.reached.insert(id);
            for parent in time_of(repo, id).map(|(_, p)| p).unwrap_or_default() {
                if self.queued.insert(parent) {
                    let pt = time_of(repo, parent).map_or(0, |(t, _)| t);
                    self.heap.push((pt, parent));
                }
            }
            if id == commit {
                return true;
            }
        }
        is_ancestor(repo, commit, tip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared helper's output, trimmed (`rev-parse` answers are ids).
    fn git(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
        gs_git::testutil::git_env(dir, args, env).trim().to_string()
    }

    #[test]
    fn a_long_range_asked_oldest_first_gets_the_merge_bases_answers() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"], &[]);
        let commit = |msg: &str, when: i64| {
            let date = format!("@{when} +0000");
            let env = [
                ("GIT_AUTHOR_DATE", date.as_str()),
                ("GIT_COMMITTER_DATE", date.as_str()),
            ];
            git(d, &["commit", "-q", "--allow-empty", "-m", msg], &env);
            git(d, &["rev-parse", "HEAD"], &[])
        };
        // 200 commits on main, with clocks that go back a week now and then, a side branch
        // off the middle (merged back), and one left unmerged.
        let mut all = Vec::new();
        for i in 0..200i64 {
            let skew = if i % 37 == 5 { -7 * 86_400 } else { 0 };
            all.push(commit(&format!("m{i}"), 1_700_000_000 + i * 60 + skew));
            if i == 100 {
                git(d, &["checkout", "-q", "-b", "side"], &[]);
                for j in 0..5 {
                    all.push(commit(&format!("s{j}"), 1_700_100_000 + j));
                }
                git(d, &["checkout", "-q", "-b", "lost"], &[]);
                all.push(commit("lost", 1_700_200_000));
                git(d, &["checkout", "-q", "main"], &[]);
                git(d, &["merge", "-q", "--no-ff", "-m", "merge", "side"], &[]);
                all.push(git(d, &["rev-parse", "HEAD"], &[]));
            }
        }
        let repo = gs_git::open(d).unwrap();
        let tip = ObjectId::from_hex(git(d, &["rev-parse", "main"], &[]).as_bytes()).unwrap();
        let ids: Vec<ObjectId> = all
            .iter()
            .map(|h| ObjectId::from_hex(h.as_bytes()).unwrap())
            .collect();
        let mut walk = BranchWalk::default();
        let mut held = 0;
        for id in &ids {
            let want = is_ancestor(&repo, *id, tip);
            assert_eq!(walk.holds(&repo, tip, *id), want, "{id}");
            held += usize::from(want);
        }
        assert_eq!(held, ids.len() - 1, "all but the unmerged commit");
        // Newest first as well, and for a tip rewound to the middle.
        let mut walk = BranchWalk::default();
        for id in ids.iter().rev() {
            assert_eq!(walk.holds(&repo, tip, *id), is_ancestor(&repo, *id, tip));
        }
        let middle = ids[60];
        for id in &ids {
            assert_eq!(
                walk.holds(&repo, middle, *id),
                is_ancestor(&repo, *id, middle),
                "{id}"
            );
        }
    }
}
