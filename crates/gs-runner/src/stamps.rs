//! The seal of a kept checkout: how many files and directories it holds and a sum of a hash of
//! each one's path and stat stamp (inode, size, mtime, ctime). A kept checkout is trusted only
//! when a walk finds the same seal — nothing added, removed, written or chmodded since it was
//! last brought up to date (a write or chmod moves the ctime, which nobody can set back).
//!
//! A sum, not a list: an update adjusts it by what it touched (the stamps of those paths before
//! minus after), so keeping it costs what the diff touched whatever the size of the tree, it is
//! a few bytes in the checkout's state file rather than a line per file to read back, and a walk
//! checks it without looking anything up (in any order, on any number of threads).

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub type Stamp = (u64, u64, i64, i64);
/// Stamps by path (relative to the tree), of the few paths an update touches.
pub type Stamps = BTreeMap<Vec<u8>, Stamp>;

/// The count and the sum (two 64-bit lanes, wrapping) of the entries' hashes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seal {
    pub count: u64,
    pub sum: [u64; 2],
}

impl Seal {
    fn add(&mut self, rel: &[u8], st: &Stamp) {
        let [a, b] = hash(rel, st);
        self.count = self.count.wrapping_add(1);
        self.sum = [self.sum[0].wrapping_add(a), self.sum[1].wrapping_add(b)];
    }

    fn sub(&mut self, rel: &[u8], st: &Stamp) {
        let [a, b] = hash(rel, st);
        self.count = self.count.wrapping_sub(1);
        self.sum = [self.sum[0].wrapping_sub(a), self.sum[1].wrapping_sub(b)];
    }

    fn merge(&mut self, other: &Seal) {
        self.count = self.count.wrapping_add(other.count);
        self.sum = [
            self.sum[0].wrapping_add(other.sum[0]),
            self.sum[1].wrapping_add(other.sum[1]),
        ];
    }

    /// The seal after an update that turned the stamps `before` into `after` (see [`around`]).
    pub fn replace(&mut self, before: &Stamps, after: &Stamps) {
        for (rel, st) in before {
            if after.get(rel) != Some(st) {
                self.sub(rel, st);
            }
        }
        for (rel, st) in after {
            if before.get(rel) != Some(st) {
                self.add(rel, st);
            }
        }
    }
}

/// Two independent 64-bit hashes of a path and its stamp. Not a defence against someone who
/// can also rewrite the state file (nothing here is); it only has to make an accidental match
/// out of reach, and be the same in every process and build.
fn hash(rel: &[u8], st: &Stamp) -> [u64; 2] {
    let mut lanes = [0x243f_6a88_85a3_08d3_u64, 0x1319_8a2e_0370_7344_u64];
    let mut feed = |word: u64| {
        lanes[0] = (lanes[0] ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        lanes[0] ^= lanes[0] >> 29;
        lanes[1] = (lanes[1] ^ word).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        lanes[1] ^= lanes[1] >> 31;
    };
    let mut chunks = rel.chunks_exact(8);
    for c in &mut chunks {
        feed(u64::from_le_bytes(c.try_into().expect("eight bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    feed(u64::from_le_bytes(tail));
    feed(rel.len() as u64);
    feed(st.0);
    feed(st.1);
    feed(st.2 as u64);
    feed(st.3 as u64);
    lanes.map(|mut h| {
        // splitmix64's finaliser: every input bit reaches every output bit.
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    })
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (
        meta.ino(),
        meta.size(),
        meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    )
}

/// Walk `dir` (links not followed; each entry stat'ed relative to its directory), calling `f`
/// with each path relative to the tree (`prefix` is `dir`'s) and its stamp.
fn walk(dir: &Path, prefix: &mut Vec<u8>, f: &mut impl FnMut(&[u8], Stamp)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else {
            continue;
        };
        let len = prefix.len();
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(e.file_name().as_bytes());
        f(prefix, stamp(&meta));
        if meta.is_dir() {
            walk(&e.path(), prefix, f);
        }
        prefix.truncate(len);
    }
}

/// The seal of everything under `dir`. The walk is shared out among threads: the directories of
/// the first levels that hold enough of them go to whichever thread is free.
pub fn of(dir: &Path) -> Seal {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let mut seal = Seal::default();
    // Breadth first until there are enough directories to share out.
    let mut frontier: Vec<(PathBuf, Vec<u8>)> = vec![(dir.to_path_buf(), Vec::new())];
    while frontier.len() < threads * 4 {
        let mut deeper = Vec::new();
        for (path, rel) in &frontier {
            let mut prefix = rel.clone();
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(meta) = e.metadata() else { continue };
                let len = prefix.len();
                if len > 0 {
                    prefix.push(b'/');
                }
                prefix.extend_from_slice(e.file_name().as_bytes());
                seal.add(&prefix, &stamp(&meta));
                if meta.is_dir() {
                    deeper.push((e.path(), prefix.clone()));
                }
                prefix.truncate(len);
            }
        }
        if deeper.is_empty() {
            return seal;
        }
        frontier = deeper;
    }
    let next = AtomicUsize::new(0);
    let part = || {
        let mut mine = Seal::default();
        while let Some((path, rel)) = frontier.get(next.fetch_add(1, Ordering::Relaxed)) {
            let mut prefix = rel.clone();
            walk(path, &mut prefix, &mut |r, st| mine.add(r, &st));
        }
        mine
    };
    std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(part)).collect();
        seal.merge(&part());
        for o in others {
            seal.merge(&o.join().expect("a stamp walk does not panic"));
        }
    });
    seal
}

/// Whether `dir` holds exactly what `seal` says.
pub fn intact(dir: &Path, seal: &Seal) -> bool {
    of(dir) == *seal
}

/// The stamps of what an update of `tree` touches: each path and everything under it, and the
/// directories on the way (whose entries it adds or removes). Taken before and after the update,
/// they are what [`Seal::replace`] needs.
pub fn around(tree: &Path, touched: &[String]) -> Stamps {
    let mut out = Stamps::new();
    for rel in touched {
        let p = tree.join(rel);
        if let Ok(meta) = std::fs::symlink_metadata(&p) {
            out.insert(rel.as_bytes().to_vec(), stamp(&meta));
            if meta.is_dir() {
                walk(&p, &mut rel.as_bytes().to_vec(), &mut |r, st| {
                    out.insert(r.to_vec(), st);
                });
            }
        }
    }
    for rel in touched {
        let mut at = rel.as_str();
        while let Some((up, _)) = at.rsplit_once('/') {
            if !out.contains_key(up.as_bytes()) {
                if let Ok(meta) = std::fs::symlink_metadata(tree.join(up)) {
                    out.insert(up.as_bytes().to_vec(), stamp(&meta));
                }
            }
            at = up;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_any_kind_is_seen_and_an_update_keeps_the_seal_true() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/f"), "1").unwrap();
        std::fs::write(tree.join("g"), "2").unwrap();
        let mut seal = of(&tree);
        assert_eq!(seal.count, 4);
        assert!(intact(&tree, &seal));

        // An update: one file rewritten, one removed, one added in a new directory.
        let touched = ["a/b/f".to_string(), "g".into(), "n/h".into()];
        let before = around(&tree, &touched);
        std::fs::write(tree.join("a/b/f"), "changed").unwrap();
        std::fs::remove_file(tree.join("g")).unwrap();
        std::fs::create_dir(tree.join("n")).unwrap();
        std::fs::write(tree.join("n/h"), "3").unwrap();
        assert!(
            !intact(&tree, &seal),
            "changes are seen before the seal is updated"
        );
        seal.replace(&before, &around(&tree, &touched));
        assert_eq!(seal, of(&tree));

        // A directory replaced by a file.
        let touched = ["a".to_string()];
        let before = around(&tree, &touched);
        std::fs::remove_dir_all(tree.join("a")).unwrap();
        std::fs::write(tree.join("a"), "now a file").unwrap();
        seal.replace(&before, &around(&tree, &touched));
        assert_eq!(seal, of(&tree));

        // A chmod, a same-size rewrite, a new file, a file moved: each is seen.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tree.join("n/h"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!intact(&tree, &seal), "chmod");
        let seal = of(&tree);
        std::fs::write(tree.join("n/extra"), "").unwrap();
        assert!(!intact(&tree, &seal), "added");
        std::fs::remove_file(tree.join("n/extra")).unwrap();
        let seal = of(&tree);
        std::fs::write(tree.join("a"), "NOW A FILE").unwrap();
        assert!(!intact(&tree, &seal), "same size");
        let seal = of(&tree);
        std::fs::rename(tree.join("n/h"), tree.join("n/i")).unwrap();
        assert!(!intact(&tree, &seal), "moved");
    }

    #[test]
    fn a_wide_tree_walked_on_threads_has_the_seal_of_a_walk_on_one() {
        let tmp = tempfile::tempdir().unwrap();
        for d in 0..40 {
            for f in 0..5 {
                let p = tmp.path().join(format!("d{d}/e/f{f}"));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "x").unwrap();
            }
        }
        let mut one = Seal::default();
        walk(tmp.path(), &mut Vec::new(), &mut |r, st| one.add(r, &st));
        assert_eq!(one.count, 40 * 7);
        assert_eq!(of(tmp.path()), one);
    }
}
