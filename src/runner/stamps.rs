//! Stat stamps of a kept checkout: (inode, size, mtime, ctime) of every file and directory, by
//! path. A kept checkout is trusted only when a walk finds exactly its stamps — nothing added,
//! removed, written or chmodded since it was last brought up to date (a write or chmod moves the
//! ctime, which nobody can set back).
//!
//! On disk: `stamps` (every entry, one line each) and `stamps.journal` (the entries each update
//! changed since, appended), so an update costs what it changed; the journal is folded into
//! `stamps` once it grows past a quarter of it.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub type Stamp = (u64, u64, i64, i64);
pub type Stamps = BTreeMap<String, Stamp>;

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (
        meta.ino(),
        meta.size(),
        meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    )
}

/// Walk `dir` (links not followed; each entry stat'ed relative to its directory), calling `f`
/// with each path relative to `dir` and its stamp; stops when `f` says so. Returns whether the
/// walk finished.
fn walk(dir: &Path, prefix: &mut String, f: &mut impl FnMut(&str, Stamp) -> bool) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else {
            continue;
        };
        let len = prefix.len();
        if len > 0 {
            prefix.push('/');
        }
        prefix.push_str(&e.file_name().to_string_lossy());
        let mut go_on = f(prefix, stamp(&meta));
        if go_on && meta.is_dir() {
            go_on = walk(&e.path(), prefix, f);
        }
        prefix.truncate(len);
        if !go_on {
            return false;
        }
    }
    true
}

/// Stamps of everything under `dir`.
pub fn of(dir: &Path) -> Stamps {
    let mut out = Stamps::new();
    walk(dir, &mut String::new(), &mut |rel, st| {
        out.insert(rel.to_string(), st);
        true
    });
    out
}

/// Whether `dir` holds exactly what `stamps` say. A process checks a kept checkout in full the
/// first time it uses it, so the walk is shared out among threads: the directories of the first
/// levels that hold enough of them go to whichever thread is free.
pub fn intact(dir: &Path, stamps: &Stamps) -> bool {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let mut seen = 0usize;
    // Breadth first until there are enough directories to share out.
    let mut frontier: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while frontier.len() < threads * 4 {
        let mut deeper = Vec::new();
        for (path, rel) in &frontier {
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(meta) = e.metadata() else { continue };
                let name = e.file_name();
                let r = if rel.is_empty() {
                    name.to_string_lossy().into_owned()
                } else {
                    format!("{rel}/{}", name.to_string_lossy())
                };
                seen += 1;
                if stamps.get(&r) != Some(&stamp(&meta)) {
                    return false;
                }
                if meta.is_dir() {
                    deeper.push((e.path(), r));
                }
            }
        }
        if deeper.is_empty() {
            return seen == stamps.len();
        }
        frontier = deeper;
    }
    let next = AtomicUsize::new(0);
    let total = AtomicUsize::new(seen);
    let bad = AtomicBool::new(false);
    let check = || {
        let mut mine = 0usize;
        while !bad.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((path, rel)) = frontier.get(i) else {
                break;
            };
            let mut prefix = rel.clone();
            let ok = walk(path, &mut prefix, &mut |r, st| {
                mine += 1;
                stamps.get(r) == Some(&st)
            });
            if !ok {
                bad.store(true, Ordering::Relaxed);
            }
        }
        total.fetch_add(mine, Ordering::Relaxed);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(check);
        }
        check();
    });
    !bad.load(Ordering::Relaxed) && total.load(Ordering::Relaxed) == stamps.len()
}

fn journal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

fn line(out: &mut Vec<u8>, rel: &str, st: Option<&Stamp>) -> std::io::Result<()> {
    match st {
        Some((ino, size, m, c)) => writeln!(out, "+ {ino} {size} {m} {c} {rel}"),
        None => writeln!(out, "- {rel}"),
    }
}

/// The stamps written at `path` (and its journal); `None` when missing or unreadable.
pub fn read(path: &Path) -> Option<Stamps> {
    let base = std::fs::read_to_string(path).ok()?;
    let journal = match std::fs::read_to_string(journal_of(path)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(_) => return None,
    };
    // The base is written in order and holds additions only: built in one pass (a sorted
    // vector becomes a map without a search per entry); the journal is applied on top.
    let mut entries = Vec::with_capacity(base.len() / 48);
    for l in base.lines() {
        match entry(l)? {
            (rel, Some(st)) => entries.push((rel.to_string(), st)),
            (_, None) => return None,
        }
    }
    let mut out: Stamps = entries.into_iter().collect();
    for l in journal.lines() {
        match entry(l)? {
            (rel, Some(st)) => {
                out.insert(rel.to_string(), st);
            }
            (rel, None) => {
                out.remove(rel);
            }
        }
    }
    Some(out)
}

/// One line: `+ INO SIZE MTIME CTIME PATH` (the path and its stamp) or `- PATH` (gone).
/// Read byte by byte: a one-off `exec` reads thousands of these before its run can start.
fn entry(l: &str) -> Option<(&str, Option<Stamp>)> {
    let b = l.as_bytes();
    match b.get(..2)? {
        b"- " => Some((&l[2..], None)),
        b"+ " => {
            let mut at = 2;
            let ino = number(b, &mut at)?;
            let size = number(b, &mut at)?;
            let m = number(b, &mut at)?;
            let c = number(b, &mut at)?;
            let stamp = (u64::try_from(ino).ok()?, u64::try_from(size).ok()?, m, c);
            Some((l.get(at..).filter(|r| !r.is_empty())?, Some(stamp)))
        }
        _ => None,
    }
}

/// A decimal number (a leading `-` allowed: times before 1970) and the space after it, from
/// `b[*at..]`; moves `at` past both.
fn number(b: &[u8], at: &mut usize) -> Option<i64> {
    let negative = b.get(*at) == Some(&b'-');
    *at += usize::from(negative);
    let start = *at;
    let mut v: i64 = 0;
    while let Some(d) = b.get(*at).filter(|c| c.is_ascii_digit()) {
        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
        *at += 1;
    }
    if *at == start || b.get(*at) != Some(&b' ') {
        return None;
    }
    *at += 1;
    Some(if negative { -v } else { v })
}

/// Write every stamp at `path` (and drop the journal).
pub fn write(path: &Path, stamps: &Stamps) -> std::io::Result<()> {
    let mut body = Vec::with_capacity(stamps.len() * 64);
    for (rel, st) in stamps {
        if !rel.contains('\n') {
            line(&mut body, rel, Some(st))?;
        }
    }
    crate::util::replace_file(path, &body, false)?;
    match std::fs::remove_file(journal_of(path)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Record `changes` (a path and its new stamp, or `None` when it is gone) after `stamps` took
/// them: appended to the journal, or everything written afresh once the journal is long.
pub fn append(
    path: &Path,
    stamps: &Stamps,
    changes: &[(String, Option<Stamp>)],
) -> std::io::Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let journal = journal_of(path);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    if size(&journal) > (size(path) / 4).max(64 << 10) {
        return write(path, stamps);
    }
    let mut body = Vec::with_capacity(changes.len() * 64);
    for (rel, st) in changes {
        if !rel.contains('\n') {
            line(&mut body, rel, st.as_ref())?;
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&journal)?;
    f.write_all(&body)
}

/// Bring `stamps` up to date after an update touched `touched` (written or removed paths): what
/// is gone is dropped, what is there (and every directory on the way, whose entries changed) is
/// stamped again. Returns what changed, for [`append`].
pub fn restamp(
    tree: &Path,
    stamps: &mut Stamps,
    touched: &[String],
) -> Vec<(String, Option<Stamp>)> {
    let mut changes = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    for rel in touched {
        // What was at or under the path (a directory replaced by a file, or the reverse).
        let prefix = format!("{rel}/");
        let under: Vec<String> = stamps
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in under {
            stamps.remove(&k);
            changes.push((k, None));
        }
        if stamps.remove(rel).is_some() {
            changes.push((rel.clone(), None));
        }
        let p = tree.join(rel);
        if let Ok(meta) = std::fs::symlink_metadata(&p) {
            if meta.is_dir() {
                for (k, v) in of(&p) {
                    let k = format!("{rel}/{k}");
                    stamps.insert(k.clone(), v);
                    changes.push((k, Some(v)));
                }
            }
            let st = stamp(&meta);
            stamps.insert(rel.clone(), st);
            changes.push((rel.clone(), Some(st)));
        }
        let mut parent = rel.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            dirs.insert(up.to_string());
            parent = up;
        }
    }
    for d in dirs {
        match std::fs::symlink_metadata(tree.join(&d)) {
            Ok(meta) => {
                let st = stamp(&meta);
                stamps.insert(d.clone(), st);
                changes.push((d, Some(st)));
            }
            Err(_) => {
                if stamps.remove(&d).is_some() {
                    changes.push((d, None));
                }
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_exactly_and_anything_else_is_unreadable() {
        assert_eq!(
            entry("+ 12 3 -5 1700000000000000000 dir/a file"),
            Some(("dir/a file", Some((12, 3, -5, 1_700_000_000_000_000_000))))
        );
        assert_eq!(entry("- dir/gone one"), Some(("dir/gone one", None)));
        for bad in [
            "",
            "+",
            "+ 1 2 3 4",
            "+ 1 2 3 4 ",
            "+ 1 2 x 4 p",
            "+ -1 2 3 4 p",
            "+ 1  2 3 4 p",
            "+ 99999999999999999999 2 3 4 p",
            "* 1 2 3 4 p",
        ] {
            assert_eq!(entry(bad).and_then(|(_, s)| s), None, "{bad:?}");
        }
    }

    #[test]
    fn a_change_of_any_kind_is_seen_and_the_journal_replays_to_the_same_stamps() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/f"), "1").unwrap();
        std::fs::write(tree.join("g"), "2").unwrap();
        let mut st = of(&tree);
        assert_eq!(st.len(), 4);
        assert!(intact(&tree, &st));
        let file = tmp.path().join("stamps");
        write(&file, &st).unwrap();
        assert_eq!(read(&file).unwrap(), st);

        // An update: one file rewritten, one removed, one added in a new directory.
        std::fs::write(tree.join("a/b/f"), "changed").unwrap();
        std::fs::remove_file(tree.join("g")).unwrap();
        std::fs::create_dir(tree.join("n")).unwrap();
        std::fs::write(tree.join("n/h"), "3").unwrap();
        assert!(!intact(&tree, &st), "changes are seen before restamping");
        let changes = restamp(&tree, &mut st, &["a/b/f".into(), "g".into(), "n/h".into()]);
        assert!(intact(&tree, &st));
        assert_eq!(st, of(&tree));
        append(&file, &st, &changes).unwrap();
        assert!(journal_of(&file).exists());
        assert_eq!(read(&file).unwrap(), st, "base + journal = the stamps");

        // A chmod, a same-size rewrite, a new file: each is seen.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tree.join("n/h"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!intact(&tree, &st), "chmod");
        let mut st = of(&tree);
        std::fs::write(tree.join("n/extra"), "").unwrap();
        assert!(!intact(&tree, &st), "added");
        std::fs::remove_file(tree.join("n/extra")).unwrap();
        st = of(&tree);
        std::fs::write(tree.join("a/b/f"), "CHANGED").unwrap();
        assert!(!intact(&tree, &st), "same size");

        // A torn journal line is not trusted.
        std::fs::write(journal_of(&file), "+ 1 2").unwrap();
        assert!(read(&file).is_none());
        write(&file, &st).unwrap();
        assert!(!journal_of(&file).exists());
    }
}
