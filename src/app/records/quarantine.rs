//! Quarantined tests, as git data: `refs/sandbox/quarantine` points at a commit (its parents the
//! versions it follows, so `push` fast-forwards it) whose tree holds `quarantine.toml` and its
//! signature, `quarantine.toml.sig` (SSHSIG, by the machine that wrote it). A quarantined test
//! still runs and is reported; a run that failed only in quarantined or known-flaky tests is run
//! again on its tree, and passes only when a retry does. An entry ends by itself after `runs`
//! clean runs on different trees, or at `until`.
//!
//! A remote's copy arrives with `fetch` (`refs/sandbox/remotes/<remote>/quarantine`). Anyone
//! who can push could write one, and a quarantine excuses failures: a copy applies only when a
//! key the user trusts signed it (this machine's, `allowed_signers`, the fleet's), else it is
//! shown and not applied. Per test, the newest entry of the trusted copies stands (a release is
//! an entry too).

use crate::app::{AppError, Context, Result};
use gs_git as git;
use gs_git::{cli, ObjectId};
use gs_store::RepoRow;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

pub const REF: &str = "refs/sandbox/quarantine";
const FILE: &str = "quarantine.toml";
const SIG: &str = "quarantine.toml.sig";
/// The most a quarantine file (or its signature) may hold: a remote's is read whole.
const MAX_BYTES: u64 = 1 << 20;
/// How many clean runs on different trees release a test when `--runs` is not given.
pub const DEFAULT_RUNS: u32 = 10;
/// The most entries a file may hold (tests and releases).
const MAX_ENTRIES: usize = 10_000;

/// One test's quarantine, or its release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The test's name, in its one form (`gs_model::test_name::canonical`).
    pub test: String,
    /// When the entry was written: per test, the newest stands.
    pub at: String,
    /// Who wrote it (the signing key's principal).
    pub by: String,
    /// A release: the test is no longer quarantined.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
    /// Released by itself after this many clean runs on different trees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
    /// Released by itself at this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct QuarantineFile {
    #[serde(default, rename = "test")]
    entries: Vec<Entry>,
}

/// Where an entry was read, and who vouches for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quarantined {
    #[serde(flatten)]
    pub entry: Entry,
    /// `local`, or the remote whose copy it came from.
    pub source: String,
    /// Who signed the copy, when a key the user trusts did.
    pub signer: Option<String>,
    /// `active`, `released` or `untrusted` (shown, not applied).
    pub state: &'static str,
    /// Why it is released or not applied; for an active one, its clean runs so far.
    pub detail: String,
    /// Clean runs on different trees since it was written.
    pub clean_runs: u64,
}

pub const ACTIVE: &str = "active";
pub const RELEASED: &str = "released";
pub const UNTRUSTED: &str = "untrusted";

/// One copy of the quarantine: its commit and entries, and who signed it.
struct Copy {
    source: String,
    commit: ObjectId,
    entries: Vec<Entry>,
    signer: std::result::Result<String, String>,
}

fn small_blob(repo: &gs_git::Repository, tree: ObjectId, path: &str) -> Option<Vec<u8>> {
    let (id, size) = git::blob_at(repo, tree, path).ok()??;
    (size <= MAX_BYTES)
        .then(|| git::objects::blob(repo, id).ok())
        .flatten()
}

/// The copy at `commit`: a file that does not parse, or is not signed, is a copy nobody vouches for.
fn read_copy(ctx: &Context, repo: &gs_git::Repository, source: String, commit: ObjectId) -> Copy {
    let tree = git::objects::tree_of(repo, commit);
    let text = tree.and_then(|t| small_blob(repo, t, FILE));
    let sig = tree.and_then(|t| small_blob(repo, t, SIG));
    let parsed = text
        .as_deref()
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| toml::from_str::<QuarantineFile>(t).ok());
    let signer = match (&text, &sig, &parsed) {
        (None, _, _) => Err(format!("no readable {FILE} (at most 1 MiB)")),
        (_, _, None) => Err(format!("{FILE} does not parse")),
        (_, None, _) => Err("not signed".to_string()),
        (Some(text), Some(sig), Some(_)) => match ctx.keys() {
            Ok(keys) => std::str::from_utf8(sig)
                .map_err(|_| "its signature is not text".to_string())
                .and_then(|sig| keys.verify(text, sig))
                .map(|v| v.signer),
            Err(e) => Err(e.to_string()),
        },
    };
    let mut entries = parsed.map(|f| f.entries).unwrap_or_default();
    entries.truncate(MAX_ENTRIES);
    Copy {
        source,
        commit,
        entries,
        signer,
    }
}

/// The remote copies fetched, `origin` first.
fn remote_refs(repo: &gs_git::Repository) -> Vec<(String, ObjectId)> {
    let mut out: Vec<(String, ObjectId)> = git::objects::remote_names(repo)
        .into_iter()
        .filter_map(|r| {
            let name = format!("{}{r}/quarantine", git::remote::SANDBOX_REMOTES);
            let tip = git::objects::ref_commit(repo, &name).ok()??;
            Some((r, tip))
        })
        .collect();
    crate::app::config::experiment_meta::prefer(&mut out);
    out
}

fn copies(ctx: &Context, repo: &gs_git::Repository) -> Result<Vec<Copy>> {
    let mut out = Vec::new();
    if let Some(tip) = git::objects::ref_commit(repo, REF)? {
        out.push(read_copy(ctx, repo, "local".into(), tip));
    }
    for (remote, tip) in remote_refs(repo) {
        out.push(read_copy(ctx, repo, remote, tip));
    }
    Ok(out)
}

/// Per test, the newest entry of the trusted copies, with the copy it came from.
fn merged(copies: &[Copy]) -> BTreeMap<String, (Entry, &Copy)> {
    let mut by_test: BTreeMap<String, (Entry, &Copy)> = BTreeMap::new();
    for c in copies.iter().filter(|c| c.signer.is_ok()) {
        for e in &c.entries {
            let newer = by_test.get(&e.test).is_none_or(|(old, _)| {
                gs_util::time::parse_rfc3339(&e.at) > gs_util::time::parse_rfc3339(&old.at)
            });
            if newer {
                by_test.insert(e.test.clone(), (e.clone(), c));
            }
        }
    }
    by_test
}

/// Every quarantined test of the repository, as it stands: active ones (applied), those released
/// (by hand, by their clean runs or their date), and those of copies nobody trusted signed.
pub fn list(ctx: &Context, repo: &gs_git::Repository, row: &RepoRow) -> Result<Vec<Quarantined>> {
    let copies = copies(ctx, repo)?;
    let now = gs_util::time::now_millis();
    let mut out = Vec::new();
    let trusted = merged(&copies);
    for (test, (entry, copy)) in &trusted {
        let since = gs_util::time::parse_rfc3339(&entry.at).unwrap_or(i64::MAX);
        let clean = if entry.released {
            0
        } else {
            ctx.index
                .clean_trees_since(&row.repository_id, test, &gs_util::time::rfc3339(since))?
        };
        let until = entry
            .until
            .as_deref()
            .and_then(gs_util::time::parse_rfc3339);
        let runs = entry.runs.unwrap_or(DEFAULT_RUNS);
        let (state, detail) = if entry.released {
            (RELEASED, format!("released by {}", entry.by))
        } else if entry.until.is_some() && until.is_none() {
            // A date nobody can read never keeps a test in quarantine.
            (RELEASED, "its date is no date".to_string())
        } else if until.is_some_and(|u| u <= now) {
            (RELEASED, "its date passed".to_string())
        } else if entry.until.is_none() && clean >= u64::from(runs) {
            (RELEASED, format!("{clean} clean runs on different trees"))
        } else if let Some(u) = &entry.until {
            (ACTIVE, format!("until {u}"))
        } else {
            (ACTIVE, format!("{clean} of {runs} clean runs"))
        };
        out.push(Quarantined {
            entry: entry.clone(),
            source: copy.source.clone(),
            signer: copy.signer.clone().ok(),
            state,
            detail,
            clean_runs: clean,
        });
    }
    // A copy nobody trusted signed: its entries are shown where no trusted one names the test.
    for c in &copies {
        let Err(why) = &c.signer else { continue };
        for e in &c.entries {
            if trusted.contains_key(&e.test) || e.released {
                continue;
            }
            out.push(Quarantined {
                entry: e.clone(),
                source: c.source.clone(),
                signer: None,
                state: UNTRUSTED,
                detail: format!("not applied: {why}; trust its signer in allowed_signers"),
                clean_runs: 0,
            });
        }
    }
    Ok(out)
}

/// The tests whose quarantine applies now (their canonical names).
pub fn applied(ctx: &Context, repo: &gs_git::Repository, row: &RepoRow) -> Result<HashSet<String>> {
    // No ref, no work: most repositories never quarantine anything.
    if git::objects::ref_commit(repo, REF)?.is_none() && remote_refs(repo).is_empty() {
        return Ok(HashSet::new());
    }
    Ok(list(ctx, repo, row)?
        .into_iter()
        .filter(|q| q.state == ACTIVE)
        .map(|q| q.entry.test)
        .collect())
}

/// How a test leaves quarantine by itself.
pub enum Ends {
    Runs(u32),
    Until(String),
}

/// Quarantine `test` (`Some(ends)`) or release it (`None`): a new signed version of the ref on
/// top of this repository's and the trusted remote copies it has not taken in yet.
pub fn set(
    ctx: &Context,
    repo: &gs_git::Repository,
    test: &str,
    ends: Option<Ends>,
    reason: Option<&str>,
) -> Result<Entry> {
    let test = gs_model::test_name::canonical(test.trim());
    if test.is_empty() || test.len() > 4096 || test.contains(['\n', '\0']) {
        return Err(
            AppError::usage("a test name must be one line of at most 4096 bytes")
                .hint("give the test's id as `git sandbox flaky` or `show` prints it"),
        );
    }
    let copies = copies(ctx, repo)?;
    let keys = ctx.keys()?;
    let entry = Entry {
        test: test.clone(),
        at: gs_util::time::now_rfc3339(),
        by: keys.principal(),
        released: ends.is_none(),
        runs: match &ends {
            Some(Ends::Runs(n)) => Some(*n),
            _ => None,
        },
        until: match &ends {
            Some(Ends::Until(u)) => Some(u.clone()),
            _ => None,
        },
        reason: reason.map(str::to_string),
    };
    let mut entries: Vec<Entry> = merged(&copies)
        .into_values()
        .map(|(e, _)| e)
        .filter(|e| e.test != test)
        .collect();
    if ends.is_none()
        && !copies
            .iter()
            .any(|c| c.entries.iter().any(|e| e.test == test))
    {
        return Err(AppError::not_found(format!("{test} is not quarantined"))
            .hint("`git sandbox flaky` lists the tests that are"));
    }
    entries.push(entry.clone());
    entries.sort_by(|a, b| a.test.cmp(&b.test));
    if entries.len() > MAX_ENTRIES {
        return Err(
            AppError::refused(format!("the quarantine holds {MAX_ENTRIES} tests at most"))
                .hint("release some first: `git sandbox flaky release TEST`"),
        );
    }
    let body = format!(
        "# Tests quarantined by git-sandbox ({REF}); signed in {SIG}. Change it with\n\
         # `git sandbox flaky quarantine` and `git sandbox flaky release`.\n{}",
        toml::to_string(&QuarantineFile { entries }).expect("entries serialize")
    );
    let sig = keys.sign(body.as_bytes());
    let blob = git::objects::write_blob(repo, body.as_bytes())?;
    let sig_blob = git::objects::write_blob(repo, sig.as_bytes())?;
    let tree = git::objects::write_tree(
        repo,
        &[
            (FILE, git::objects::Kind::File, blob),
            (SIG, git::objects::Kind::File, sig_blob),
        ],
    )?;
    let local = copies
        .iter()
        .find(|c| c.source == "local")
        .map(|c| c.commit);
    // Parents: ours, and each trusted remote copy ours does not hold yet (push then
    // fast-forwards the remote's).
    let mut parents: Vec<ObjectId> = local.into_iter().collect();
    for c in copies
        .iter()
        .filter(|c| c.source != "local" && c.signer.is_ok())
    {
        let held = parents
            .iter()
            .any(|p| *p == c.commit || git::objects::is_ancestor(repo, c.commit, *p));
        if !held {
            parents.push(c.commit);
        }
    }
    let dir = git::repo_root(repo);
    let what = if entry.released {
        "release"
    } else {
        "quarantine"
    };
    let message = format!("{what} {test}");
    let new = commit(&dir, tree, &parents, &message)?;
    let line = match local {
        Some(old) => format!("update {REF} {new} {old}\n"),
        None => format!("create {REF} {new}\n"),
    };
    cli::update_refs(&dir, &line, &format!("git-sandbox: {message}"))?;
    Ok(entry)
}

fn commit(dir: &Path, tree: ObjectId, parents: &[ObjectId], message: &str) -> Result<ObjectId> {
    let tree = tree.to_string();
    let parents: Vec<String> = parents.iter().map(ToString::to_string).collect();
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
    for p in &parents {
        args.extend(["-p", p.as_str()]);
    }
    let out = cli::git_with_env(dir, &args, &cli::fallback_identity(dir))?;
    ObjectId::from_hex(out.trim().as_bytes())
        .map_err(|e| AppError::Git(git::GitError::gix_in("git commit-tree", e)))
}
