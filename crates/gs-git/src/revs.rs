//! Revision arguments as git takes them — `REV`, `A..B`, `A...B`, `^A`, and `--all` as tips the
//! caller chooses — resolved to commit ids here (with errors in plain words) and walked by
//! `git rev-list`, so the commits come in git's own order.

use super::{cli, gix_err, GitError, Result};
use gix::ObjectId;

/// One revision argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevArg {
    /// `REV`: this commit (and, in a walk, its history).
    Include(String),
    /// `^REV`: leave out this commit and its history.
    Exclude(String),
    /// `A..B`: the commits of B that are not in A (an empty side means `HEAD`).
    Range(String, String),
    /// `A...B`: the commits of either that are not in both (an empty side means `HEAD`).
    Symmetric(String, String),
}

impl RevArg {
    /// Parse one argument the way `git rev-list` reads it.
    pub fn parse(arg: &str) -> Result<RevArg> {
        let bad = |why: &str| GitError::BadRevision {
            rev: arg.to_string(),
            detail: why.to_string(),
        };
        let side = |s: &str| if s.is_empty() { "HEAD" } else { s }.to_string();
        if arg.is_empty() {
            return Err(bad("an empty argument names no commit"));
        }
        if let Some((a, b)) = arg.split_once("...") {
            if b.starts_with('.') || b.contains("..") || a.starts_with('^') || b.starts_with('^') {
                return Err(bad("write a symmetric range as A...B"));
            }
            return Ok(RevArg::Symmetric(side(a), side(b)));
        }
        if let Some((a, b)) = arg.split_once("..") {
            if b.contains("..") || a.starts_with('^') || b.starts_with('^') {
                return Err(bad("write a range as OLDER..NEWER"));
            }
            return Ok(RevArg::Range(side(a), side(b)));
        }
        if let Some(rest) = arg.strip_prefix('^') {
            if rest.is_empty() || rest.starts_with('^') {
                return Err(bad("write an exclusion as ^REV"));
            }
            return Ok(RevArg::Exclude(rest.to_string()));
        }
        Ok(RevArg::Include(arg.to_string()))
    }

    /// The revisions this argument takes commits from (`B` of `A..B`, both sides of `A...B`).
    pub fn tips(&self) -> Vec<&str> {
        match self {
            RevArg::Include(r) | RevArg::Range(_, r) => vec![r],
            RevArg::Symmetric(a, b) => vec![a, b],
            RevArg::Exclude(_) => vec![],
        }
    }
}

/// How [`commits`] walks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Walk {
    /// Oldest first (`git rev-list --reverse`), as a run wants; otherwise `git log`'s order.
    pub oldest_first: bool,
    /// At most this many commits: the first ones in `git log`'s order (the newest).
    pub max_count: Option<usize>,
    /// Plain revisions only (no range, no `^REV`, no `--all`) name just those commits, in the
    /// order given, like `git cherry-pick A B`; otherwise they are walked, like `git log A B`.
    pub plain_means_listed: bool,
}

/// The commits that `args` name (no arguments and no `all`: `HEAD`), in git's order. `all` holds
/// the tips `--all` stands for, when it was given. An empty result is not an error: `A..A` holds no
/// commits, as in git. An excluded revision before the first commit (`ROOT^` in `ROOT^..B`)
/// excludes nothing, so `ROOT^..B` is B's whole history, root included.
pub fn commits(
    repo: &gix::Repository,
    args: &[String],
    all: Option<&[ObjectId]>,
    walk: Walk,
) -> Result<Vec<ObjectId>> {
    let parsed = args
        .iter()
        .map(|a| RevArg::parse(a))
        .collect::<Result<Vec<_>>>()?;
    let mut positive: Vec<ObjectId> = all.unwrap_or_default().to_vec();
    let mut negative: Vec<ObjectId> = Vec::new();
    let mut symmetric: Vec<(ObjectId, ObjectId)> = Vec::new();
    for arg in &parsed {
        match arg {
            RevArg::Include(r) => positive.push(resolve(repo, r)?),
            RevArg::Exclude(r) => negative.extend(resolve_excluded(repo, r)?),
            RevArg::Range(a, b) => {
                negative.extend(resolve_excluded(repo, a)?);
                positive.push(resolve(repo, b)?);
            }
            RevArg::Symmetric(a, b) => symmetric.push((resolve(repo, a)?, resolve(repo, b)?)),
        }
    }
    if parsed.is_empty() && all.is_none() {
        positive.push(resolve(repo, "HEAD")?);
    }
    let listed = parsed.iter().all(|a| matches!(a, RevArg::Include(_)));
    if walk.plain_means_listed && listed && all.is_none() {
        let mut seen = std::collections::HashSet::new();
        positive.retain(|id| seen.insert(*id));
        if let Some(n) = walk.max_count {
            positive.truncate(n);
        }
        return Ok(positive);
    }
    if positive.is_empty() && symmetric.is_empty() {
        return Ok(Vec::new());
    }
    if let (Some(n), [tip], true, true, false) = (
        walk.max_count,
        positive.as_slice(),
        negative.is_empty(),
        symmetric.is_empty(),
        walk.oldest_first,
    ) {
        if let Some(line) = first_parent_line(repo, *tip, n) {
            return Ok(line);
        }
    }
    let mut cmd: Vec<String> = vec!["rev-list".into()];
    if walk.oldest_first {
        cmd.push("--reverse".into());
    }
    if let Some(n) = walk.max_count {
        cmd.push(format!("--max-count={n}"));
    }
    // Only ids from here on: nothing the user typed reaches git, as an option or otherwise.
    cmd.push("--end-of-options".into());
    cmd.extend(positive.iter().map(ObjectId::to_string));
    cmd.extend(negative.iter().map(|id| format!("^{id}")));
    cmd.extend(symmetric.iter().map(|(a, b)| format!("{a}...{b}")));
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = cli::git(repo.git_dir(), &args)?;
    out.lines()
        .map(|l| ObjectId::from_hex(l.trim().as_bytes()).map_err(gix_err))
        .collect()
}

/// The newest `n` commits of `tip`'s history when it is a line there (no merge among them): then
/// git's order is the line's, and reading them here saves starting `git rev-list` (the most
/// of a `log -n 50`). `None` at a merge, which git orders by date: ask it.
fn first_parent_line(repo: &gix::Repository, tip: ObjectId, n: usize) -> Option<Vec<ObjectId>> {
    let mut out = Vec::with_capacity(n.min(1024));
    let mut at = Some(tip);
    while let Some(id) = at.filter(|_| out.len() < n) {
        let commit = repo.find_commit(id).ok()?;
        let mut parents = commit.parent_ids();
        at = parents.next().map(|p| p.detach());
        if parents.next().is_some() {
            return None;
        }
        out.push(id);
    }
    Some(out)
}

/// An excluded revision: `None` when it lies before the first commit (nothing to exclude).
fn resolve_excluded(repo: &gix::Repository, rev: &str) -> Result<Option<ObjectId>> {
    match resolve(repo, rev) {
        Ok(id) => Ok(Some(id)),
        Err(GitError::PastRoot { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One revision to a commit id. Errors say what is wrong in plain words: an unknown name, a
/// `~N` or `^` past the first commit, a parent a commit does not have, an object that is no commit.
pub fn resolve(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    if rev.is_empty() || rev.starts_with('-') {
        return Err(GitError::BadRevision {
            rev: rev.to_string(),
            detail: "a revision cannot start with '-' (options go before the revisions)".into(),
        });
    }
    if let Ok(id) = repo.rev_parse_single(rev) {
        return peel_to_commit(repo, rev, id.detach());
    }
    // Say why: the name is unknown, or navigation (`~N`, `^N`) went where there is no commit.
    let Some((base, steps)) = split_navigation(rev) else {
        return Err(GitError::UnknownRevision {
            name: rev.to_string(),
            within: None,
        });
    };
    let Ok(id) = repo.rev_parse_single(base) else {
        return Err(GitError::UnknownRevision {
            name: base.to_string(),
            within: Some(rev.to_string()),
        });
    };
    let mut at = peel_to_commit(repo, base, id.detach())?;
    let mut consumed = base.len();
    for (step, len) in steps {
        let here = &rev[..consumed];
        match step {
            Step::Ancestor(n) => {
                for i in 0..n {
                    match parents(repo, at)?.first() {
                        Some(p) => at = *p,
                        None => {
                            return Err(GitError::PastRoot {
                                rev: rev.to_string(),
                                of: (consumed != base.len()).then(|| here.to_string()),
                                commits: i + 1,
                                first: ancestor(here, i),
                            })
                        }
                    }
                }
            }
            Step::Parent(0) => {}
            Step::Parent(n) => {
                let ps = parents(repo, at)?;
                match ps.get(n - 1) {
                    Some(p) => at = *p,
                    None if ps.is_empty() => {
                        return Err(GitError::PastRoot {
                            rev: rev.to_string(),
                            of: (consumed != base.len()).then(|| here.to_string()),
                            commits: 1,
                            first: here.to_string(),
                        })
                    }
                    None => {
                        return Err(GitError::NoSuchParent {
                            rev: rev.to_string(),
                            of: here.to_string(),
                            parents: ps.len(),
                        })
                    }
                }
            }
        }
        consumed += len;
    }
    Ok(at)
}

/// `HEAD` and 3 → `HEAD~3`; 0 → `HEAD`.
fn ancestor(rev: &str, n: usize) -> String {
    match n {
        0 => rev.to_string(),
        n => format!("{rev}~{n}"),
    }
}

fn peel_to_commit(repo: &gix::Repository, rev: &str, id: ObjectId) -> Result<ObjectId> {
    let object = repo.find_object(id).map_err(gix_err)?;
    let kind = object.kind;
    object
        .peel_to_commit()
        .map(|c| c.id)
        .map_err(|_| GitError::NotACommit {
            rev: rev.to_string(),
            kind: kind.to_string(),
        })
}

fn parents(repo: &gix::Repository, id: ObjectId) -> Result<Vec<ObjectId>> {
    let commit = repo.find_commit(id).map_err(gix_err)?;
    Ok(commit.parent_ids().map(|p| p.detach()).collect())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `~N`: N first parents back.
    Ancestor(usize),
    /// `^N`: the Nth parent (`^0` the commit itself).
    Parent(usize),
}

/// `main~2^2` → (`main`, [~2, ^2]), each step with its length in the text. `None` when the
/// argument does not end in navigation only (or has none).
fn split_navigation(rev: &str) -> Option<(&str, Vec<(Step, usize)>)> {
    // Ref names cannot hold `~` or `^`, so the first one starts the navigation.
    let start = rev.find(['~', '^'])?;
    if start == 0 {
        return None;
    }
    let bytes = rev.as_bytes();
    let mut steps = Vec::new();
    let mut i = start;
    while i < bytes.len() {
        let op = bytes[i];
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let n = match digits {
            0 => 1,
            _ => rev[i + 1..i + 1 + digits].parse().ok()?,
        };
        let step = match op {
            b'~' => Step::Ancestor(n),
            b'^' => Step::Parent(n),
            _ => return None,
        };
        steps.push((step, 1 + digits));
        i += 1 + digits;
    }
    Some((&rev[..start], steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_as_git_reads_them() {
        let p = |s: &str| RevArg::parse(s).unwrap();
        assert_eq!(p("main"), RevArg::Include("main".into()));
        assert_eq!(p("^main"), RevArg::Exclude("main".into()));
        assert_eq!(p("a..b"), RevArg::Range("a".into(), "b".into()));
        assert_eq!(p("a.."), RevArg::Range("a".into(), "HEAD".into()));
        assert_eq!(p("..b"), RevArg::Range("HEAD".into(), "b".into()));
        assert_eq!(p("a...b"), RevArg::Symmetric("a".into(), "b".into()));
        assert_eq!(p("a..."), RevArg::Symmetric("a".into(), "HEAD".into()));
        assert_eq!(
            p("HEAD~2^2..x"),
            RevArg::Range("HEAD~2^2".into(), "x".into())
        );
        for bad in ["", "^", "^^a", "a..b..c", "a....b", "^a..b"] {
            assert!(RevArg::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn navigation_splits_from_the_first_marker() {
        use Step::*;
        assert_eq!(
            split_navigation("main~2^2^"),
            Some((
                "main",
                vec![(Ancestor(2), 2), (Parent(2), 2), (Parent(1), 1)]
            ))
        );
        assert_eq!(
            split_navigation("HEAD~"),
            Some(("HEAD", vec![(Ancestor(1), 1)]))
        );
        assert_eq!(split_navigation("main"), None);
        assert_eq!(split_navigation("main^{tree}"), None);
        assert_eq!(split_navigation("~3"), None);
    }

    /// `log -n N` reads a line of history itself and asks git at a merge: either way the
    /// commits and their order are git's (commits made in one second included).
    #[test]
    fn the_newest_commits_are_gits_with_or_without_a_merge() {
        use crate::testutil::git;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let commit = |msg: &str| git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
        for i in 0..4 {
            commit(&format!("line {i}"));
        }
        git(dir, &["checkout", "-q", "-b", "side", "HEAD~2"]);
        commit("side");
        git(dir, &["checkout", "-q", "main"]);
        git(dir, &["merge", "-q", "--no-ff", "-m", "merge", "side"]);
        commit("after");
        let repo = crate::open(dir).unwrap();
        for tip in ["main", "main~2", "side"] {
            for n in [1, 2, 3, 5, 20] {
                let walk = Walk {
                    max_count: Some(n),
                    ..Walk::default()
                };
                let ours: Vec<String> = commits(&repo, &[tip.to_string()], None, walk)
                    .unwrap()
                    .iter()
                    .map(ObjectId::to_string)
                    .collect();
                let theirs = git(dir, &["rev-list", &format!("--max-count={n}"), tip]);
                let theirs: Vec<&str> = theirs.lines().collect();
                assert_eq!(ours, theirs, "{tip} -n {n}");
            }
        }
        let head = repo.head_id().unwrap().detach();
        assert_eq!(first_parent_line(&repo, head, 1), Some(vec![head]));
        assert_eq!(
            first_parent_line(&repo, head, 2),
            None,
            "a merge: git orders it"
        );
    }
}
