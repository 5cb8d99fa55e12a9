//! What a run of a commit is to its branch: the answer the build-cache rule
//! ([`caches::writes`]) is asked with.

use super::RunOptions;
use crate::runner::caches;
use gix::ObjectId;

/// What a run of `commit` is, for the build-cache rule ([`caches::writes`]): a commit run as its
/// branch's is one when the branch holds it (its tip, or an ancestor of the tip); a candidate
/// merge named through production (`promote`, its dry run) is not.
pub(super) fn run_of(
    opts: &RunOptions<'_>,
    repo: &gix::Repository,
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
        .and_then(|r| repo.find_reference(r).ok())
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| id.detach());
    let on_branch = tip.is_some_and(|tip| {
        tip == commit
            || repo
                .merge_base(commit, tip)
                .is_ok_and(|base| base.is_some_and(|b| b.detach() == commit))
    });
    caches::RunOf::Branch { on_branch }
}
