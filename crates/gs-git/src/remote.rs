//! Remotes, through git itself (gix does not push): fetch, push, the line-wise merge of notes,
//! and the refspec that makes a plain `git fetch` bring results. Git's own credential system
//! authenticates; git never prompts (a daemon has nobody to answer), and a URL is shown only
//! without the credentials it may hold.

use super::cli::{git, git_status, update_refs};
use super::{GitError, Result};
use std::path::Path;

/// Where the remote's notes land on fetch: `refs/notes/remotes/<remote>/sandbox…`.
pub fn tracking_prefix(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/")
}

/// The fetch refspec that brings every `refs/notes/sandbox*` ref of `remote` beside ours.
pub fn notes_refspec(remote: &str) -> String {
    format!("+refs/notes/sandbox*:{}sandbox*", tracking_prefix(remote))
}

/// Where a remote's `refs/sandbox/*` land on fetch: beside ours, never over them (a remote's
/// promoted or rolled-back ref does not change an experiment's state here).
pub const SANDBOX_REMOTES: &str = "refs/sandbox/remotes/";

/// The fetch refspec for a remote's `refs/sandbox/*`.
pub fn sandbox_refspec(remote: &str) -> String {
    format!("+refs/sandbox/*:{SANDBOX_REMOTES}{remote}/*")
}

/// The configured remotes, in git's order.
pub fn remotes(dir: &Path) -> Result<Vec<String>> {
    Ok(git(dir, &["remote"])?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// The remote's URL as it may be shown: without a user or password it holds.
pub fn shown_url(dir: &Path, remote: &str) -> String {
    super::cli::get_config(dir, &format!("remote.{remote}.url"))
        .map(|u| redact(&u))
        .unwrap_or_default()
}

/// `scheme://user:secret@host/x` → `scheme://host/x`, anywhere in `text` (git's own messages
/// may quote a URL).
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '/' || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Add [`notes_refspec`] to `remote`'s fetch refspecs unless it is there. Returns whether it
/// was added.
pub fn ensure_notes_refspec(dir: &Path, remote: &str) -> Result<bool> {
    let key = format!("remote.{remote}.fetch");
    let spec = notes_refspec(remote);
    if super::cli::get_all_config(dir, &key).contains(&spec) {
        return Ok(false);
    }
    git(dir, &["config", "--local", "--add", &key, &spec])?;
    Ok(true)
}

/// Remove [`notes_refspec`] from every remote (for `init --remove`). Returns (remote, refspec)
/// of each removed.
pub fn remove_notes_refspecs(dir: &Path) -> Vec<(String, String)> {
    let mut removed = Vec::new();
    for r in remotes(dir).unwrap_or_default() {
        let key = format!("remote.{r}.fetch");
        let spec = notes_refspec(&r);
        if super::cli::get_all_config(dir, &key).contains(&spec) {
            let pattern = format!("^{}$", gs_util::regex_escape(&spec));
            if git(dir, &["config", "--local", "--unset", &key, &pattern]).is_ok() {
                removed.push((r, spec));
            }
        }
    }
    removed
}

/// One ref of a fetch or push as git reports it with `--porcelain`.
#[derive(Debug, Clone, PartialEq)]
pub struct RefUpdate {
    /// git's flag: ' ' fast-forward, '+' forced, '*' new, '-' deleted, '!' rejected,
    /// '=' up to date.
    pub flag: char,
    /// The ref it names on our side (fetch: the local ref written; push: the remote ref).
    pub name: String,
    /// git's summary (`[rejected] (fetch first)`, `9c0786c..4e94683`).
    pub summary: String,
}

impl RefUpdate {
    pub fn rejected(&self) -> bool {
        self.flag == '!'
    }

    pub fn changed(&self) -> bool {
        matches!(self.flag, ' ' | '+' | '*' | '-' | 't')
    }

    /// A rejection the remote would take after a fetch and merge: it moved since we looked, or
    /// another push held the ref's lock on its side.
    pub fn retryable(&self) -> bool {
        self.rejected()
            && [
                "fetch first",
                "non-fast-forward",
                "stale info",
                "failed to update ref",
                "failed to lock",
                "cannot lock ref",
                "incorrect old value",
            ]
            .iter()
            .any(|r| self.summary.contains(r))
    }
}

/// Run git against a remote: never prompting (a daemon has nobody to answer), its messages
/// redacted.
fn network_git(dir: &Path, args: &[&str]) -> Result<(bool, String, String)> {
    let (ok, stdout, stderr) = git_status(
        dir,
        args,
        &[("GIT_TERMINAL_PROMPT", "0"), ("GCM_INTERACTIVE", "never")],
    )?;
    Ok((ok, stdout, redact(&stderr)))
}

fn network_error(what: &str, remote: &str, stderr: &str) -> GitError {
    let reason = stderr
        .split("fatal: ")
        .nth(1)
        .or_else(|| stderr.split("error: ").nth(1))
        .unwrap_or(stderr)
        .trim();
    GitError::Cli {
        cmd: format!("git {what} {remote}"),
        stderr: reason.to_string(),
    }
}

/// `git fetch --porcelain REMOTE REFSPECS…`. Rejected refs are reported in the list, not as an
/// error; an unreachable remote is one.
pub fn fetch(dir: &Path, remote: &str, refspecs: &[String]) -> Result<Vec<RefUpdate>> {
    let mut args = vec!["fetch", "--porcelain", "--no-write-fetch-head", remote];
    args.extend(refspecs.iter().map(String::as_str));
    let (ok, stdout, stderr) = network_git(dir, &args)?;
    let updates: Vec<RefUpdate> = stdout
        .lines()
        .filter_map(|l| {
            let flag = l.chars().next()?;
            let mut parts = l[1..].split_whitespace();
            let (_old, _new, name) = (parts.next()?, parts.next()?, parts.next()?);
            Some(RefUpdate {
                flag,
                name: name.to_string(),
                summary: if flag == '!' {
                    "[rejected] (it differs here)".into()
                } else {
                    String::new()
                },
            })
        })
        .collect();
    // A rejected ref (a tag or `refs/sandbox/…` that differs here) fails the fetch but is in
    // the list; anything else (no such remote, no network, bad credentials) is the error.
    if !ok && !updates.iter().any(RefUpdate::rejected) {
        return Err(network_error("fetch", remote, &stderr));
    }
    Ok(updates)
}

/// `git push --porcelain REMOTE REFSPECS…`, never forced. Rejected refs are in the list; a
/// push that reached no remote is an error.
pub fn push(dir: &Path, remote: &str, refspecs: &[String]) -> Result<Vec<RefUpdate>> {
    if refspecs.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["push", "--porcelain", remote];
    args.extend(refspecs.iter().map(String::as_str));
    let (ok, stdout, stderr) = network_git(dir, &args)?;
    // "<flag>\t<from>:<to>\t<summary>"
    let updates: Vec<RefUpdate> = stdout
        .lines()
        .filter_map(|l| {
            let mut cols = l.splitn(3, '\t');
            let flag = cols.next()?.chars().next()?;
            let (_, to) = cols.next()?.split_once(':')?;
            Some(RefUpdate {
                flag,
                name: to.to_string(),
                summary: cols.next().unwrap_or("").trim().to_string(),
            })
        })
        .collect();
    if !ok && updates.is_empty() {
        return Err(network_error("push", remote, &stderr));
    }
    Ok(updates)
}

/// `git ls-remote REMOTE PATTERNS…`: (ref, object id) of what the remote has. One round trip and
/// no objects, so a remote can be asked often (GitHub counts no REST quota for it).
pub fn ls_remote(dir: &Path, remote: &str, patterns: &[&str]) -> Result<Vec<(String, String)>> {
    let mut args = vec!["ls-remote", remote];
    args.extend(patterns);
    let (ok, stdout, stderr) = network_git(dir, &args)?;
    if !ok {
        return Err(network_error("ls-remote", remote, &stderr));
    }
    Ok(stdout
        .lines()
        .filter_map(|l| {
            let (id, name) = l.split_once('\t')?;
            Some((name.trim().to_string(), id.trim().to_string()))
        })
        .collect())
}

/// The commit `refname` points at, if it exists.
pub fn ref_tip(dir: &Path, refname: &str) -> Option<String> {
    let (ok, out, _) = git_status(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{refname}^{{commit}}"),
        ],
        &[],
    )
    .ok()?;
    ok.then(|| out.trim().to_string()).filter(|s| !s.is_empty())
}

/// Merge the notes under `theirs` into `ours` with git's notes merge `strategy`
/// (`cat_sort_uniq` for one-line records, `ours` for the rest). The merge is made on a
/// temporary ref and `ours` is then moved by compare-and-swap, so a note written meanwhile by
/// a run is never lost: the merge is made again on top of it. Returns whether `ours` moved.
pub fn merge_notes(dir: &Path, ours: &str, theirs: &str, strategy: &str) -> Result<bool> {
    let Some(their_tip) = ref_tip(dir, theirs) else {
        return Ok(false);
    };
    let tmp = format!("refs/notes/git-sandbox-merge/{}", std::process::id());
    let identity = super::cli::fallback_identity(dir);
    for attempt in 0..20u64 {
        let old = ref_tip(dir, ours);
        if old.as_deref() == Some(their_tip.as_str()) {
            return Ok(false);
        }
        match &old {
            Some(o) => git(dir, &["update-ref", &tmp, o])?,
            None => git(dir, &["update-ref", "-d", &tmp])?,
        };
        let merged = git_status(
            dir,
            &[
                "notes",
                &format!("--ref={tmp}"),
                "merge",
                "--quiet",
                "-s",
                strategy,
                &their_tip,
            ],
            &identity,
        );
        let new = ref_tip(dir, &tmp);
        let _ = git(dir, &["update-ref", "-d", &tmp]);
        let (ok, _, stderr) = merged?;
        if !ok {
            return Err(GitError::Cli {
                cmd: format!("git notes --ref={ours} merge -s {strategy} {theirs}"),
                stderr,
            });
        }
        let Some(new) = new else {
            return Ok(false);
        };
        if old.as_deref() == Some(new.as_str()) {
            return Ok(false);
        }
        let expect = old.unwrap_or_else(|| "0".repeat(new.len()));
        let tx = format!("update {ours} {new} {expect}\n");
        match update_refs(dir, &tx, &format!("git-sandbox: merge {theirs}")) {
            Ok(()) => return Ok(true),
            // A run wrote a note meanwhile: merge again on top of it.
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5 * (attempt + 1))),
        }
    }
    Err(GitError::gix(format!(
        "cannot merge {theirs} into {ours}: the notes kept moving; try again"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_drops_credentials_from_urls_only() {
        assert_eq!(
            redact(
                "fatal: unable to access 'https://x-access-token:ghp_abc@github.com/o/r.git/': 403"
            ),
            "fatal: unable to access 'https://github.com/o/r.git/': 403"
        );
        assert_eq!(
            redact("http://127.0.0.1:80/r.git"),
            "http://127.0.0.1:80/r.git"
        );
        assert_eq!(redact("no url at all"), "no url at all");
        assert_eq!(
            redact("a ssh://git@host/x and b https://u:p@h"),
            "a ssh://host/x and b https://h"
        );
    }

    #[test]
    fn push_rejections_that_a_merge_mends_are_told_apart() {
        let r = |summary: &str| RefUpdate {
            flag: '!',
            name: "refs/notes/sandbox".into(),
            summary: summary.into(),
        };
        assert!(r("[rejected] (fetch first)").retryable());
        assert!(r("[rejected] (non-fast-forward)").retryable());
        assert!(r("[remote rejected] (failed to update ref)").retryable());
        assert!(!r("[remote rejected] (pre-receive hook declined)").retryable());
    }
}
