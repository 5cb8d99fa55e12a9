//! Reading many blobs at once (every note of a repository, for a reindex): in the order they
//! lie in their packs, through one delta-base cache that every clone of the reading handle
//! shares.
//!
//! `git gc` stores notes as deltas of one another, in chains up to 50 long (30,000 notes after
//! a gc: 16 on average), each based on a note written earlier in the pack. gix keeps 64
//! decoded objects by default, so a note read in commit order was rebuilt from its chain's
//! base: some 17 inflations for one note (35 µs here). Read in pack order, the note a delta is
//! based on was read before it and is still in the cache: one inflation (6 µs).

use gix::odb::pack::cache::{lru::MemoryCappedHashmap, DecodeEntry};
use gix::ObjectId;
use std::sync::{Arc, Mutex};

/// The decoded objects the reading handles keep between them (git keeps up to 96 MiB,
/// `core.deltaBaseCacheLimit`): a note's base lies a few thousand notes before it in the pack
/// (a few MiB of notes; after a gc of 30,000 runs, 99 in 100 within 20 MiB), and reading all
/// 30,000 took as long with 32 MiB as with 64.
const DELTA_BASES: usize = 32 << 20;

/// A handle on `repo` for reading many blobs, each once: its clones (one per thread) share
/// one delta-base cache, and it keeps no cache of whole objects (each is read once).
pub fn reader(repo: &gix::Repository) -> gix::Repository {
    let mut reader = repo.clone();
    let shared = Shared(Arc::new(Mutex::new(MemoryCappedHashmap::new(DELTA_BASES))));
    reader
        .objects
        .set_pack_cache(move || Box::new(shared.clone()));
    reader.object_cache_size(None);
    reader
}

/// Sorts `items` by where the blob `blob` names lies: by pack, then by offset in it (the
/// order git wrote them, bases before their deltas); blobs in no pack (loose, or missing)
/// last, in their order before.
pub fn in_pack_order<T>(repo: &gix::Repository, items: &mut [T], blob: impl Fn(&T) -> ObjectId) {
    let ids: Vec<ObjectId> = items.iter().map(blob).collect();
    let packed = repo.objects.packed_object_count().unwrap_or(u64::MAX);
    // Reading every pack's index costs a fortieth of asking where one object lies (which
    // inflates its entry): the cheaper of the two.
    let walk = packed / 40 <= ids.len() as u64;
    let places = places(repo, &ids, walk);
    let mut keyed: Vec<((u32, u64), usize)> = places.into_iter().zip(0..).collect();
    keyed.sort_unstable();
    // Put `items` into the sorted order in place (T need not be Clone).
    let mut order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    for start in 0..order.len() {
        let mut at = start;
        while order[at] != start {
            let next = order[at];
            items.swap(at, next);
            order[at] = at;
            at = next;
        }
        order[at] = at;
    }
}

/// Where each of `ids` lies, as a key that sorts in pack order ([`NOWHERE`] for one in no pack):
/// from a `walk` over the index of every pack of the repository, or by asking for each.
fn places(repo: &gix::Repository, ids: &[ObjectId], walk: bool) -> Vec<(u32, u64)> {
    use gix::odb::pack::Find;
    let mut places = vec![NOWHERE; ids.len()];
    if walk {
        let at: std::collections::HashMap<ObjectId, usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let dir = repo.objects.store_ref().path().join("pack");
        let mut indexes: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        indexes.sort();
        for (pack, path) in (0..).zip(&indexes) {
            let Ok(index) = gix::odb::pack::index::File::at(path, repo.object_hash()) else {
                continue;
            };
            for entry in index.iter() {
                if let Some(&i) = at.get(&entry.oid) {
                    if places[i] == NOWHERE {
                        places[i] = (pack, entry.pack_offset);
                    }
                }
            }
        }
        return places;
    }
    let mut objects = repo.objects.clone();
    // Asking where an object lies needs the packs to stay while it is asked.
    objects.prevent_pack_unload();
    let mut buf = Vec::new();
    for (place, id) in places.iter_mut().zip(ids) {
        if let Ok(Some(l)) = objects.location_by_oid(id, &mut buf) {
            *place = (l.pack_id, l.pack_offset);
        }
    }
    places
}

/// The place of an object in no pack: after all others.
const NOWHERE: (u32, u64) = (u32::MAX, u64::MAX);

/// One delta-base cache behind a lock, shared by the clones of a [`reader`].
#[derive(Clone)]
struct Shared(Arc<Mutex<MemoryCappedHashmap>>);

impl Shared {
    fn cache(&self) -> std::sync::MutexGuard<'_, MemoryCappedHashmap> {
        // A reader that panicked left nothing half-written a cache could not survive.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DecodeEntry for Shared {
    fn put(
        &mut self,
        pack_id: u32,
        offset: u64,
        data: &[u8],
        kind: gix::object::Kind,
        compressed_size: usize,
    ) {
        self.cache()
            .put(pack_id, offset, data, kind, compressed_size);
    }

    fn get(
        &mut self,
        pack_id: u32,
        offset: u64,
        out: &mut Vec<u8>,
    ) -> Option<(gix::object::Kind, usize)> {
        self.cache().get(pack_id, offset, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::git;

    #[test]
    fn blobs_are_put_in_pack_order_and_read_alike_through_the_shared_cache() {
        let d = tempfile::tempdir().unwrap();
        git(d.path(), &["init", "-q"]);
        // Similar bodies, so a gc stores most as deltas of others.
        let mut ids = Vec::new();
        for i in 0..40 {
            let body = format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(2000 + i));
            let path = d.path().join(format!("b{i}"));
            std::fs::write(&path, &body).unwrap();
            let id = git(d.path(), &["hash-object", "-w", path.to_str().unwrap()]);
            ids.push((ObjectId::from_hex(id.trim().as_bytes()).unwrap(), body));
        }
        git(d.path(), &["add", "-A"]);
        git(d.path(), &["commit", "-qm", "blobs"]);
        let repo = crate::open(d.path()).unwrap();
        // All loose: in no pack, whichever way they are looked for.
        for walk in [true, false] {
            let mut found = places(
                &repo,
                &ids.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                walk,
            );
            found.sort();
            found.dedup();
            assert_eq!(found, [NOWHERE], "walked: {walk}");
        }
        // Packed as a gc packs them: most as deltas of others.
        git(d.path(), &["repack", "-adq", "--depth=50", "--window=50"]);
        let repo = crate::open(d.path()).unwrap();
        let mut sorted = ids.clone();
        sorted.reverse();
        in_pack_order(&repo, &mut sorted, |(id, _)| *id);
        // The order of their offsets, as git's index of the one pack gives them.
        let pack = d.path().join(".git/objects/pack");
        let idx = std::fs::read_dir(&pack)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "idx"))
            .unwrap();
        let out = std::process::Command::new("git")
            .arg("show-index")
            .stdin(std::fs::File::open(idx).unwrap())
            .output()
            .unwrap();
        let mut offsets: Vec<(u64, String)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let mut f = l.split_whitespace();
                (
                    f.next().unwrap().parse().unwrap(),
                    f.next().unwrap().to_string(),
                )
            })
            .collect();
        offsets.sort();
        let expected: Vec<String> = offsets
            .into_iter()
            .map(|(_, id)| id)
            .filter(|id| {
                let id = ObjectId::from_hex(id.as_bytes()).unwrap();
                ids.iter().any(|(b, _)| *b == id)
            })
            .collect();
        let got: Vec<String> = sorted.iter().map(|(id, _)| id.to_string()).collect();
        assert_eq!(got, expected);
        // Asked one by one rather than walked: the same order.
        let blobs: Vec<ObjectId> = ids.iter().map(|(id, _)| *id).collect();
        let mut asked: Vec<((u32, u64), String)> = places(&repo, &blobs, false)
            .into_iter()
            .zip(blobs.iter().map(ObjectId::to_string))
            .collect();
        asked.sort();
        let asked: Vec<String> = asked.into_iter().map(|(_, id)| id).collect();
        assert_eq!(asked, expected);
        let deltas = git(
            d.path(),
            &[
                "cat-file",
                "--batch-check=%(deltabase)",
                "--batch-all-objects",
            ],
        );
        assert!(
            deltas.lines().filter(|l| !l.starts_with("0000")).count() > 20,
            "{deltas}"
        );
        let reader = reader(&repo);
        std::thread::scope(|s| {
            for part in sorted.chunks(15) {
                let r = reader.clone();
                s.spawn(move || {
                    for (id, body) in part {
                        assert_eq!(crate::notes::read_blob(&r, *id).unwrap(), body.as_bytes());
                    }
                });
            }
        });
    }
}
