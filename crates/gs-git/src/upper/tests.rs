//! The layer is read against a real repository's tree, from a real directory laid out as an
//! overlay upper is.

use super::*;
use gs_util::hint::Hinted;
use std::os::unix::fs::{symlink, PermissionsExt};

/// A repository whose HEAD tree holds `a.txt`, `keep/b.txt`, `gone/c.txt`, `dir/d.txt`,
/// `link` (→ a.txt) and an executable `run.sh`.
fn repo() -> (tempfile::TempDir, gix::Repository, ObjectId) {
    let d = tempfile::tempdir().unwrap();
    let g = |args: &[&str]| crate::testutil::git(d.path(), args);
    g(&["init", "-q"]);
    for (p, body) in [
        ("a.txt", "a\n"),
        ("keep/b.txt", "b\n"),
        ("gone/c.txt", "c\n"),
        ("dir/d.txt", "d\n"),
        ("dir/e.txt", "e\n"),
        ("run.sh", "#!/bin/sh\n"),
    ] {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, body).unwrap();
    }
    std::fs::set_permissions(
        d.path().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    symlink("a.txt", d.path().join("link")).unwrap();
    g(&["add", "-A"]);
    g(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit",
        "-qm",
        "base",
    ]);
    let tree = g(&["rev-parse", "HEAD^{tree}"]);
    let repo = gix::open(d.path()).unwrap();
    (d, repo, ObjectId::from_hex(tree.trim().as_bytes()).unwrap())
}

fn whiteout(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: mknod with a valid path.
    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) == 0 }
}

#[test]
fn a_layers_files_links_and_modes_become_changes_and_only_those_directories_are_written() {
    let (d, repo, base) = repo();
    let up = tempfile::tempdir().unwrap();
    let u = up.path();
    std::fs::write(u.join("a.txt"), "A\n").unwrap(); // modified
    std::fs::write(u.join("new.txt"), "new\n").unwrap(); // added
    std::fs::create_dir(u.join("keep")).unwrap();
    std::fs::write(u.join("keep/b.txt"), "b\n").unwrap(); // copied up, unchanged
    symlink("/etc/passwd", u.join("evil")).unwrap(); // a link, kept as a link
    std::fs::write(u.join("run.sh"), "#!/bin/sh\n").unwrap(); // lost its x bit
    std::fs::set_permissions(u.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir(u.join(".git")).unwrap();
    let fifo = std::ffi::CString::new(u.join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let c = read(&repo, base, u, Layout::Upper, MAX_BYTES).unwrap();
    let got: Vec<(&str, ChangeKind)> = c
        .changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("a.txt", ChangeKind::Modified),
            ("evil", ChangeKind::Added),
            ("new.txt", ChangeKind::Added),
            ("run.sh", ChangeKind::Modified),
        ]
    );
    let skipped: Vec<&str> = c.skipped.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(skipped, [".git", "pipe"]);
    let tree = apply(&repo, base, &c.changes).unwrap();
    let ls = crate::testutil::git(d.path(), &["ls-tree", "-r", &tree.to_string()]);
    assert!(ls.contains("120000 blob") && ls.contains("\tevil"), "{ls}");
    assert!(
        ls.contains("100644 blob") && ls.contains("\trun.sh"),
        "{ls}"
    );
    let evil = crate::testutil::git(d.path(), &["cat-file", "-p", &format!("{tree}:evil")]);
    assert_eq!(evil, "/etc/passwd");
    // `keep/` and `dir/` did not change: the same tree objects.
    for sub in ["keep", "dir", "gone"] {
        let before = crate::testutil::git(d.path(), &["rev-parse", &format!("{base}:{sub}")]);
        let after = crate::testutil::git(d.path(), &["rev-parse", &format!("{tree}:{sub}")]);
        assert_eq!(before, after, "{sub}");
    }
    // Nothing changed: the base itself.
    assert_eq!(apply(&repo, base, &[]).unwrap(), base);
    // Over the bound: refused, naming the fix.
    let e = read(&repo, base, u, Layout::Upper, 4).unwrap_err();
    assert!(e.problem().contains("more than"), "{}", e.problem());
}

#[test]
fn whiteouts_and_opaque_directories_are_deletions() {
    let (d, repo, base) = repo();
    let up = tempfile::tempdir().unwrap();
    let u = up.path();
    if !whiteout(&u.join("gone")) {
        eprintln!("skipped: cannot make a whiteout here");
        return;
    }
    assert!(whiteout(&u.join("link")));
    std::fs::create_dir(u.join("dir")).unwrap();
    std::fs::write(u.join("dir/new.txt"), "n\n").unwrap();
    let c = std::ffi::CString::new(u.join("dir").to_str().unwrap()).unwrap();
    // SAFETY: setting an attribute on a directory we made.
    let set = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            c"trusted.overlay.opaque".as_ptr(),
            b"y".as_ptr().cast(),
            1,
            0,
        )
    };
    assert_eq!(set, 0, "as root, trusted.* is ours to set");
    let c = read(&repo, base, u, Layout::Upper, MAX_BYTES).unwrap();
    let got: Vec<(&str, ChangeKind)> = c
        .changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("dir/d.txt", ChangeKind::Deleted),
            ("dir/e.txt", ChangeKind::Deleted),
            ("dir/new.txt", ChangeKind::Added),
            ("gone", ChangeKind::Deleted),
            ("link", ChangeKind::Deleted),
        ]
    );
    let tree = apply(&repo, base, &c.changes).unwrap();
    let ls = crate::testutil::git(
        d.path(),
        &["ls-tree", "-r", "--name-only", &tree.to_string()],
    );
    assert_eq!(
        ls.lines().collect::<Vec<_>>(),
        ["a.txt", "dir/new.txt", "keep/b.txt", "run.sh"]
    );
}

#[test]
fn a_whole_tree_is_read_as_one_whose_missing_paths_are_gone() {
    let (_d, repo, base) = repo();
    let up = tempfile::tempdir().unwrap();
    let u = up.path();
    std::fs::write(u.join("a.txt"), "a\n").unwrap();
    std::fs::create_dir(u.join("keep")).unwrap();
    std::fs::write(u.join("keep/b.txt"), "b\n").unwrap();
    let c = read(&repo, base, u, Layout::Whole, MAX_BYTES).unwrap();
    let got: Vec<(&str, ChangeKind)> = c
        .changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("dir", ChangeKind::Deleted),
            ("gone", ChangeKind::Deleted),
            ("link", ChangeKind::Deleted),
            ("run.sh", ChangeKind::Deleted),
        ]
    );
    // An upper layer that was never made changes nothing.
    let none = read(&repo, base, &u.join("absent"), Layout::Upper, MAX_BYTES).unwrap();
    assert!(none.changes.is_empty());
}
