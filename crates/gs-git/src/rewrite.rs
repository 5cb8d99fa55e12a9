//! Commits made again with another tree or other parents, everything else kept (author,
//! committer, their dates, the message, its encoding); and which new paths a tree's
//! `.gitignore` files ignore. For `git sandbox fix`.

use super::{cli, gix_err, GitError, Result};
use gix::ObjectId;
use std::collections::HashSet;
use std::path::Path;

/// Write `commit` again with `tree` and `parents`; its id. A signature (`gpgsig`) is dropped:
/// it signed the old commit.
pub fn with_tree(
    repo: &gix::Repository,
    commit: ObjectId,
    tree: ObjectId,
    parents: &[ObjectId],
) -> Result<ObjectId> {
    use gix::objs::Write;
    let raw = repo.find_object(commit).map_err(gix_err)?;
    if raw.kind != gix::object::Kind::Commit {
        return Err(GitError::Refused {
            problem: format!("{commit} is no commit"),
            hint: "name a commit".into(),
        });
    }
    let data = raw.data.clone();
    let (headers, message) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i..]),
        None => (&data[..], &b""[..]),
    };
    let mut out = format!("tree {tree}\n").into_bytes();
    for p in parents {
        out.extend_from_slice(format!("parent {p}\n").as_bytes());
    }
    let mut dropping = false;
    for line in headers.split(|b| *b == b'\n') {
        // A continuation line belongs to the header before it.
        if line.first() == Some(&b' ') {
            if !dropping {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            continue;
        }
        dropping = line.starts_with(b"tree ")
            || line.starts_with(b"parent ")
            || line.starts_with(b"gpgsig ")
            || line.starts_with(b"gpgsig-sha256 ");
        if !dropping {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    // The headers' last newline is the first of the blank line before the message.
    out.pop();
    out.extend_from_slice(message);
    repo.write_buf(gix::object::Kind::Commit, &out)
        .map_err(|e| GitError::gix_in("writing a commit", e))
}

/// Which of `paths` (new files, relative to the tree's root) the `.gitignore` files of `tree`
/// ignore, as git would in a checkout of it (nothing else counts: not the user's global
/// excludes, not this repository's `info/exclude`).
pub fn ignored(
    repo: &gix::Repository,
    tree: ObjectId,
    paths: &[String],
) -> Result<HashSet<String>> {
    if paths.is_empty() {
        return Ok(HashSet::new());
    }
    let scratch = tempfile::Builder::new()
        .prefix("git-sandbox-ignore-")
        .tempdir()
        .map_err(|source| GitError::Io {
            context: "cannot make a directory for the tree's .gitignore files".into(),
            source,
        })?;
    let work = scratch.path().join("tree");
    let git_dir = scratch.path().join("git");
    // The .gitignore of every directory on the way to each path.
    let mut dirs: HashSet<String> = HashSet::new();
    for p in paths {
        let mut at = String::new();
        dirs.insert(String::new());
        for part in p.split('/').collect::<Vec<_>>().iter().rev().skip(1).rev() {
            at = if at.is_empty() {
                (*part).to_string()
            } else {
                format!("{at}/{part}")
            };
            dirs.insert(at.clone());
        }
    }
    for d in &dirs {
        let file = if d.is_empty() {
            ".gitignore".to_string()
        } else {
            format!("{d}/.gitignore")
        };
        let Some(e) = super::objects::entry_at(repo, tree, &file).filter(|e| e.kind.is_file())
        else {
            continue;
        };
        let Some(bytes) = super::objects::small_blob(repo, e.id, 1 << 20) else {
            continue;
        };
        let to = work.join(&file);
        let made = std::fs::create_dir_all(to.parent().unwrap_or(&work))
            .and_then(|_| std::fs::write(&to, bytes));
        made.map_err(|source| GitError::Io {
            context: format!("cannot write {}", to.display()),
            source,
        })?;
    }
    std::fs::create_dir_all(&work).map_err(|source| GitError::Io {
        context: "cannot make a scratch work tree".into(),
        source,
    })?;
    let (gd, wt) = (git_dir.display().to_string(), work.display().to_string());
    cli::git(scratch.path(), &["init", "-q", "--bare", &gd])?;
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_bytes());
        input.push(0);
    }
    let args = [
        "-c",
        "core.excludesFile=/dev/null",
        "--git-dir",
        gd.as_str(),
        "--work-tree",
        wt.as_str(),
        "check-ignore",
        "--no-index",
        "--stdin",
        "-z",
    ];
    // check-ignore exits 1 when nothing is ignored.
    let out = match cli::git_input(Path::new(&wt), &args, &input) {
        Ok(out) => out,
        Err(GitError::Cli { stderr, .. }) if stderr.is_empty() => String::new(),
        Err(e) => return Err(e),
    };
    Ok(out
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_made_again_keeps_its_people_dates_and_message() {
        let d = tempfile::tempdir().unwrap();
        let g = |args: &[&str]| crate::testutil::git(d.path(), args);
        g(&["init", "-q"]);
        std::fs::write(d.path().join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/.gitignore"), "*.tmp\n").unwrap();
        g(&["add", "-A"]);
        crate::testutil::git_env(
            d.path(),
            &["commit", "-qm", "subject\n\nbody line"],
            &[
                ("GIT_AUTHOR_NAME", "Ada"),
                ("GIT_AUTHOR_EMAIL", "ada@example.com"),
                ("GIT_AUTHOR_DATE", "2001-02-03T04:05:06+01:00"),
                ("GIT_COMMITTER_NAME", "Bob"),
                ("GIT_COMMITTER_EMAIL", "bob@example.com"),
                ("GIT_COMMITTER_DATE", "2002-02-03T04:05:06+00:00"),
            ],
        );
        let repo = gix::open(d.path()).unwrap();
        let head = ObjectId::from_hex(g(&["rev-parse", "HEAD"]).trim().as_bytes()).unwrap();
        let empty = ObjectId::from_hex(g(&["mktree"]).trim().as_bytes()).unwrap();
        let again = with_tree(&repo, head, empty, &[]).unwrap();
        let show = |c: &str| {
            g(&[
                "log",
                "-1",
                "--format=%an %ae %ad|%cn %ce %cd|%B",
                "--date=raw",
                c,
            ])
        };
        assert_eq!(show(&again.to_string()), show("HEAD"));
        assert_eq!(
            g(&["rev-parse", &format!("{again}^{{tree}}")]).trim(),
            empty.to_string()
        );
        let parent = with_tree(&repo, head, empty, &[head]).unwrap();
        assert_eq!(
            g(&["rev-parse", &format!("{parent}^")]).trim(),
            head.to_string()
        );

        let tree = ObjectId::from_hex(g(&["rev-parse", "HEAD^{tree}"]).trim().as_bytes()).unwrap();
        let asked: Vec<String> = ["a.log", "a.txt", "build/x", "sub/y.tmp", "y.tmp", "sub/z"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut got: Vec<String> = ignored(&repo, tree, &asked).unwrap().into_iter().collect();
        got.sort();
        assert_eq!(got, ["a.log", "build/x", "sub/y.tmp"]);
        assert!(ignored(&repo, tree, &["a.txt".into()]).unwrap().is_empty());
    }
}
