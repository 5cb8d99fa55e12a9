//! Layers as an attacker writes them, unpacked into a real directory: each rule refuses the
//! member by name and writes nothing outside the layer's directory.

use gs_image::unpack::{unpack, Bounds, Unpacked};
use sha2::{Digest, Sha256};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

enum M<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hard(&'a str, &'a str),
    Char(&'a str),
    Fifo(&'a str),
}

/// A tar with raw names (the tar crate's builder refuses `..`; an attacker's does not).
fn tar(members: &[M]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        let mut h = tar::Header::new_gnu();
        let (name, kind, data, mode, link): (&str, tar::EntryType, &[u8], u32, Option<&str>) =
            match m {
                M::File(n, d, mode) => (n, tar::EntryType::Regular, d, *mode, None),
                M::Dir(n) => (n, tar::EntryType::Directory, b"", 0o755, None),
                M::Symlink(n, t) => (n, tar::EntryType::Symlink, b"", 0o777, Some(t)),
                M::Hard(n, t) => (n, tar::EntryType::Link, b"", 0o644, Some(t)),
                M::Char(n) => (n, tar::EntryType::Char, b"", 0o644, None),
                M::Fifo(n) => (n, tar::EntryType::Fifo, b"", 0o644, None),
            };
        let g = h.as_gnu_mut().unwrap();
        g.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            g.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

fn diff_id(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

fn into(dir: &Path, bytes: &[u8], bounds: Bounds) -> Result<Unpacked, String> {
    let fd = OwnedFd::from(std::fs::File::open(dir).unwrap());
    unpack(bytes, &fd, &diff_id(bytes), bounds, false)
}

const ROOMY: Bounds = Bounds {
    bytes: 1 << 20,
    members: 1000,
};

/// A layer directory inside a sandbox directory: `outside` is the layer's neighbour, where an
/// escape would land.
fn place() -> (tempfile::TempDir, std::path::PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let layer = top.path().join("layer");
    std::fs::create_dir(&layer).unwrap();
    std::fs::create_dir(top.path().join("outside")).unwrap();
    (top, layer)
}

#[test]
fn a_plain_layer_unpacks_with_links_whiteouts_and_no_privilege_bits() {
    let (_top, layer) = place();
    let bytes = tar(&[
        M::Dir("./usr/"),
        M::Dir("./usr/bin/"),
        M::File("./usr/bin/busybox", b"#!binary", 0o4755),
        M::Symlink("./bin", "usr/bin"),
        M::Hard("./usr/bin/sh", "./usr/bin/busybox"),
        M::Char("./dev/null"),
        M::Fifo("./run/fifo"),
        M::File("./etc/.wh.motd", b"", 0o644),
        M::File("./var/.wh..wh..opq", b"", 0o644),
    ]);
    let done = into(&layer, &bytes, ROOMY).unwrap();
    assert_eq!((done.dropped, done.cleared, done.whiteouts), (2, 1, 2));
    let bb = std::fs::metadata(layer.join("usr/bin/busybox")).unwrap();
    assert_eq!(bb.permissions().mode() & 0o7777, 0o755, "setuid cleared");
    assert_eq!(bb.nlink(), 2, "the hard link is to the layer's own file");
    assert_eq!(
        std::fs::read_link(layer.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    assert!(!layer.join("dev/null").exists() && !layer.join("run/fifo").exists());
    let wh = std::fs::symlink_metadata(layer.join("etc/motd")).unwrap();
    assert!(
        wh.file_type().is_char_device() && wh.rdev() == 0,
        "an overlay whiteout"
    );
    let mut v = [0u8; 1];
    let c = std::ffi::CString::new(layer.join("var").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path and buffer.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.overlay.opaque".as_ptr(),
            v.as_mut_ptr().cast(),
            1,
        )
    };
    assert_eq!((n, v[0]), (1, b'y'), "an opaque directory");
}

#[test]
fn each_hostile_member_is_refused_by_name_and_nothing_lands_outside() {
    for (members, said) in [
        (
            vec![M::File("../outside/evil", b"x", 0o644)],
            "../outside/evil",
        ),
        (vec![M::File("/etc/evil", b"x", 0o644)], "absolute"),
        (
            vec![
                M::Symlink("link", "../outside"),
                M::File("link/evil", b"x", 0o644),
            ],
            "symlink",
        ),
        (
            vec![
                M::Symlink("link", "/tmp"),
                M::File("link/evil", b"x", 0o644),
            ],
            "link/evil",
        ),
        (vec![M::Hard("shadow", "/etc/shadow")], "absolute"),
        (vec![M::Hard("shadow", "../outside/secret")], "climbs"),
        (vec![M::Hard("x", "missing")], "does not hold"),
        (
            vec![M::Symlink("sl", "/etc"), M::Hard("x", "sl/shadow")],
            "does not hold",
        ),
    ] {
        let (top, layer) = place();
        std::fs::write(top.path().join("outside/secret"), "s").unwrap();
        let e = into(&layer, &tar(&members), ROOMY).unwrap_err();
        assert!(e.contains(said), "{said}: {e}");
        assert!(e.contains("the layer's member"), "{e}");
        let outside: Vec<_> = std::fs::read_dir(top.path().join("outside"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(outside, ["secret"], "{said}: nothing written outside");
        assert!(!Path::new("/tmp/evil").exists());
    }
}

#[test]
fn sizes_members_and_the_digest_are_bounded() {
    let (_t, layer) = place();
    let big = vec![7u8; 4096];
    let e = into(
        &layer,
        &tar(&[M::File("a", &big, 0o644)]),
        Bounds {
            bytes: 1000,
            members: 10,
        },
    )
    .unwrap_err();
    assert!(e.contains("image_mb"), "{e}");
    let (_t, layer) = place();
    let many: Vec<M> = (0..5).map(|_| M::Dir("d")).collect();
    let e = into(
        &layer,
        &tar(&many),
        Bounds {
            bytes: 1000,
            members: 3,
        },
    )
    .unwrap_err();
    assert!(e.contains("more than 3 members"), "{e}");
    let (_t, layer) = place();
    let bytes = tar(&[M::File("a", b"x", 0o644)]);
    let fd = OwnedFd::from(std::fs::File::open(&layer).unwrap());
    let e = unpack(
        &bytes[..],
        &fd,
        &format!("sha256:{}", "0".repeat(64)),
        ROOMY,
        false,
    )
    .unwrap_err();
    assert!(e.contains("not the sha256:000"), "{e}");
}
