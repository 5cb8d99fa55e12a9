//! Objects written in one go. A batch of results (up to 128 notes on each of two notes refs,
//! their fan-out trees and two notes commits: a few hundred objects) used to cost a loose file
//! each — a new file, a rename and a directory lookup apiece: half of the time of a result served
//! from its tree's earlier run. Written through [`Batch`], the
//! objects are kept in memory and land as one pack with its index (the format git's own
//! `index-pack` writes, version 2), or as loose objects when there are only a few. Readers see
//! nothing until the index is in place, and the index is moved there after the pack.
//!
//! Packs add up: when a repository holds more than [`PACK_LIMIT`] of them, the small ones are
//! rolled up with `git repack -d --geometric=2` (git's own tool, cheap when the big packs are
//! left alone), so lookups stay fast and nothing but git deletes a pack.

use super::{gix_err, GitError, Result};
use gix::objs::Kind;
use gix::ObjectId;
use std::io::Write;
use std::path::Path;

/// From this many objects on, a batch is written as a pack (two files); below, as loose objects
/// (a file each).
pub const PACK_FROM: usize = 4;

/// Packs a repository may hold before the small ones are rolled into one. Below git's
/// `gc.autoPackLimit` (50): every object lookup may search each pack's index, and at 34 packs
/// `log -n 50` spent 1.2 ms more than at 3 (30,000 runs); a roll-up of small packs is cheap.
pub const PACK_LIMIT: usize = 16;

/// A repository whose new objects are kept in memory until [`Batch::persist`].
pub struct Batch {
    /// Reads see the objects in memory; writes go there.
    pub repo: gix::Repository,
    /// The same repository, writing straight to disk.
    disk: gix::Repository,
}

impl Batch {
    /// A view of `repo` whose object writes stay in memory.
    pub fn new(repo: &gix::Repository) -> Batch {
        let disk = repo.clone();
        let mut repo = repo.clone();
        repo.objects.enable_object_memory();
        Batch { repo, disk }
    }

    /// Write every object made so far to the object database: a pack when `pack` and there are
    /// many, else loose objects; later writes go to memory again. Returns how many objects were
    /// written.
    pub fn persist(&mut self, pack: bool) -> Result<usize> {
        let mut memory = self.repo.objects.reset_object_memory().unwrap_or_default();
        let mut objects: Vec<(ObjectId, Kind, Vec<u8>)> = std::mem::take(&mut *memory)
            .into_iter()
            .map(|(id, (kind, data))| (id, kind, data))
            .collect();
        let n = objects.len();
        if !pack || n < PACK_FROM {
            use gix::objs::Write as _;
            for (_, kind, data) in &objects {
                self.disk.objects.write_buf(*kind, data).map_err(gix_err)?;
            }
            return Ok(n);
        }
        objects.sort_by_key(|o| o.0);
        let dir = self.disk.objects.store_ref().path().join("pack");
        write_pack(&dir, &objects)?;
        roll_up(&self.disk, &dir);
        Ok(n)
    }
}

/// Write `objects` (sorted by id, no duplicates) as one pack and its index into `dir`.
pub fn write_pack(dir: &Path, objects: &[(ObjectId, Kind, Vec<u8>)]) -> Result<()> {
    let io =
        |what: &str, e: std::io::Error| GitError::gix_in(format!("{what} in {}", dir.display()), e);
    let count =
        u32::try_from(objects.len()).map_err(|_| GitError::gix("too many objects for one pack"))?;
    let mut pack =
        Vec::with_capacity(12 + objects.iter().map(|o| o.2.len() / 2 + 32).sum::<usize>());
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    let mut entries = Vec::with_capacity(objects.len());
    let mut deflate = gix::zlib::stream::deflate::Compress::new(gix::zlib::Compression::BEST_SPEED);
    for (id, kind, data) in objects {
        let offset = u32::try_from(pack.len())
            .ok()
            .filter(|o| *o < 1 << 31)
            .ok_or_else(|| GitError::gix("a batch of objects over 2 GiB"))?;
        entry_header(&mut pack, *kind, data.len());
        compress(&mut deflate, data, &mut pack)?;
        let crc = crc32fast::hash(&pack[offset as usize..]);
        entries.push((*id, crc, offset));
    }
    let pack_sum = sha1(&[&pack])?;
    pack.extend_from_slice(pack_sum.as_bytes());

    let mut idx = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    idx.extend_from_slice(&[0xff, b't', b'O', b'c', 0, 0, 0, 2]);
    let mut fanout = [0u32; 256];
    for (id, _, _) in &entries {
        fanout[id.as_bytes()[0] as usize] += 1;
    }
    let mut total = 0;
    for n in fanout {
        total += n;
        idx.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _, _) in &entries {
        idx.extend_from_slice(id.as_bytes());
    }
    for (_, crc, _) in &entries {
        idx.extend_from_slice(&crc.to_be_bytes());
    }
    for (_, _, offset) in &entries {
        idx.extend_from_slice(&offset.to_be_bytes());
    }
    idx.extend_from_slice(pack_sum.as_bytes());
    let idx_sum = sha1(&[&idx])?;
    idx.extend_from_slice(idx_sum.as_bytes());

    std::fs::create_dir_all(dir).map_err(|e| io("cannot make the pack directory", e))?;
    // The pack first, then its index: git and gix find a pack by its index, so the pack is
    // written under its own name at once (a file nobody reads until the index names it; its
    // name is its checksum, so one already there holds the same bytes), and the index is
    // written aside and moved into place whole. Each file made costs an inode: two, not three.
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let name = format!("pack-{pack_sum}");
    let pack_path = dir.join(format!("{name}.pack"));
    let complete = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() == pack.len() as u64);
    if !complete(&pack_path) {
        // A pack cut short by a crash is no pack: it is replaced.
        let _ = std::fs::remove_file(&pack_path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&pack_path)
            .and_then(|mut file| file.write_all(&pack))
            .map_err(|e| io("cannot write a pack file", e))?;
    }
    let mut file = tempfile::Builder::new()
        .prefix("tmp_idx_")
        .permissions(std::fs::Permissions::from_mode(0o444))
        .tempfile_in(dir)
        .map_err(|e| io("cannot make a temporary pack index", e))?;
    file.write_all(&idx)
        .map_err(|e| io("cannot write a pack index", e))?;
    file.persist(dir.join(format!("{name}.idx")))
        .map_err(|e| io("cannot put a pack index in place", e.error))?;
    Ok(())
}

/// Append `data` to `out` as one zlib stream.
fn compress(
    deflate: &mut gix::zlib::stream::deflate::Compress,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    use gix::zlib::{stream::deflate::FlushCompress, Status};
    deflate.reset();
    let start = out.len();
    // zlib's bound for one stream: the data, 5 bytes per 16 KiB block, header and trailer.
    out.resize(start + data.len() + data.len() / 16384 * 5 + 64, 0);
    loop {
        let (read, written) = (deflate.total_in() as usize, deflate.total_out() as usize);
        let status = deflate
            .compress(
                &data[read..],
                &mut out[start + written..],
                FlushCompress::Finish,
            )
            .map_err(gix_err)?;
        match status {
            Status::StreamEnd => {
                out.truncate(start + deflate.total_out() as usize);
                return Ok(());
            }
            _ if deflate.total_out() as usize == out.len() - start => {
                out.resize(out.len() + 4096, 0);
            }
            _ if (deflate.total_in() as usize, deflate.total_out() as usize) == (read, written) => {
                return Err(GitError::gix("zlib made no progress compressing an object"));
            }
            _ => {}
        }
    }
}

/// A pack entry's header: the type and the inflated size, 4 bits then 7 at a time.
fn entry_header(out: &mut Vec<u8>, kind: Kind, size: usize) {
    let kind: u8 = match kind {
        Kind::Commit => 1,
        Kind::Tree => 2,
        Kind::Blob => 3,
        Kind::Tag => 4,
    };
    let mut byte = (kind << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest > 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

fn sha1(parts: &[&[u8]]) -> Result<ObjectId> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    for p in parts {
        hasher.update(p);
    }
    hasher.try_finalize().map_err(gix_err)
}

/// Roll the small packs of `dir` into one when there are more than [`PACK_LIMIT`]. Best effort
/// and one at a time (a lock file in the pack directory): a failure leaves the packs as they are.
fn roll_up(repo: &gix::Repository, dir: &Path) {
    let packs = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".idx"))
                .count()
        })
        .unwrap_or(0);
    if packs <= PACK_LIMIT {
        return;
    }
    let lock = dir.join("git-sandbox-repack.lock");
    let stale = std::fs::metadata(&lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(600));
    if stale {
        let _ = std::fs::remove_file(&lock);
    }
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_err()
    {
        return;
    }
    let dir_of_repo = repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf();
    let outcome = super::cli::git(&dir_of_repo, &["repack", "-d", "-q", "--geometric=2"]);
    if let Err(e) = outcome {
        tracing::warn!(
            "could not roll up the packs of {}: {e}",
            dir_of_repo.display()
        );
    }
    let _ = std::fs::remove_file(&lock);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
    }

    fn repo() -> (tempfile::TempDir, gix::Repository) {
        let d = tempfile::tempdir().unwrap();
        assert!(git(d.path(), &["init", "-q"]).status.success());
        let repo = crate::open(d.path()).unwrap();
        (d, repo)
    }

    fn packs(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(".git/objects/pack"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.retain(|n| n.ends_with(".idx"));
        names.sort();
        names
    }

    /// Blobs `prefix-0` … written through a batch; their ids.
    fn write_blobs(batch: &mut Batch, prefix: &str, n: usize) -> Vec<ObjectId> {
        (0..n)
            .map(|i| {
                let body = format!("{prefix}-{i}\n").repeat(i + 1);
                batch.repo.write_blob(body.as_bytes()).unwrap().detach()
            })
            .collect()
    }

    fn cat(dir: &Path, id: ObjectId) -> String {
        let o = git(dir, &["cat-file", "-p", &id.to_string()]);
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap()
    }

    #[test]
    fn many_objects_land_in_one_pack_that_git_reads_and_few_as_loose_objects() {
        let (d, repo) = repo();
        let mut batch = Batch::new(&repo);
        let ids = write_blobs(&mut batch, "many", 40);
        // Nothing on disk until persisted: git does not know them yet.
        assert!(!git(d.path(), &["cat-file", "-e", &ids[0].to_string()])
            .status
            .success());
        assert_eq!(batch.persist(true).unwrap(), 40);
        let names = packs(d.path());
        assert_eq!(names.len(), 1, "{names:?}");
        let o = git(
            d.path(),
            &["verify-pack", &format!(".git/objects/pack/{}", names[0])],
        );
        assert!(o.status.success(), "{o:?}");
        let o = git(d.path(), &["fsck", "--strict", "--no-dangling"]);
        assert!(o.status.success(), "{o:?}");
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(cat(d.path(), *id), format!("many-{i}\n").repeat(i + 1));
        }
        // Read back through gix too (a handle opened before the pack was there).
        assert_eq!(repo.find_blob(ids[3]).unwrap().data, b"many-3\n".repeat(4));

        let ids = write_blobs(&mut batch, "few", PACK_FROM - 1);
        batch.persist(true).unwrap();
        assert_eq!(packs(d.path()).len(), 1, "a few objects are written loose");
        for id in &ids {
            let hex = id.to_string();
            assert!(d
                .path()
                .join(".git/objects")
                .join(&hex[..2])
                .join(&hex[2..])
                .is_file());
        }
    }

    #[test]
    fn a_pack_cut_short_is_replaced_not_trusted() {
        let (d, repo) = repo();
        let mut batch = Batch::new(&repo);
        let ids = write_blobs(&mut batch, "cut", 20);
        batch.persist(true).unwrap();
        let idx = packs(d.path()).pop().unwrap();
        let dir = d.path().join(".git/objects/pack");
        let pack = dir.join(idx.replace(".idx", ".pack"));
        // A crash while the pack was written: no index yet, the pack half there.
        std::fs::remove_file(dir.join(&idx)).unwrap();
        let len = std::fs::metadata(&pack).unwrap().len();
        let mut perms = std::fs::metadata(&pack).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&pack, perms).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&pack)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        // The same objects again make the same pack, written whole.
        let mut batch = Batch::new(&repo);
        assert_eq!(write_blobs(&mut batch, "cut", 20), ids);
        batch.persist(true).unwrap();
        assert_eq!(std::fs::metadata(&pack).unwrap().len(), len);
        let o = git(d.path(), &["fsck", "--strict", "--no-dangling"]);
        assert!(o.status.success(), "{o:?}");
        assert_eq!(cat(d.path(), ids[19]), "cut-19\n".repeat(20));
    }

    #[test]
    fn a_handle_held_while_dozens_of_packs_come_reads_every_one() {
        // gix fixes a handle's index slots when it opens (32 by default for a small repository):
        // the daemon and a long `run` add packs while they hold theirs.
        let (d, repo) = repo();
        for round in 0..PACK_LIMIT {
            let mut batch = Batch::new(&repo);
            let ids = write_blobs(&mut batch, &format!("held{round}"), PACK_FROM);
            batch.persist(true).unwrap();
            let blob = repo.find_blob(ids[0]);
            assert!(blob.is_ok(), "round {round}: {:?}", blob.err());
        }
        assert_eq!(packs(d.path()).len(), PACK_LIMIT);
    }

    #[test]
    fn past_the_limit_the_small_packs_are_rolled_into_one_and_nothing_is_lost() {
        let (d, repo) = repo();
        let mut all = Vec::new();
        for round in 0..=PACK_LIMIT {
            let mut batch = Batch::new(&repo);
            all.extend(write_blobs(&mut batch, &format!("round{round}"), PACK_FROM));
            batch.persist(true).unwrap();
        }
        let left = packs(d.path()).len();
        assert!(
            left < PACK_LIMIT / 2,
            "{left} packs left of {}",
            PACK_LIMIT + 1
        );
        assert!(!d
            .path()
            .join(".git/objects/pack/git-sandbox-repack.lock")
            .exists());
        // git knows every one (asked once, not a process per object).
        let mut check = Command::new("git")
            .args(["cat-file", "--batch-check=%(objectname) %(objecttype)"])
            .current_dir(d.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let ids: String = all.iter().map(|id| format!("{id}\n")).collect();
        check
            .stdin
            .take()
            .unwrap()
            .write_all(ids.as_bytes())
            .unwrap();
        let out = String::from_utf8(check.wait_with_output().unwrap().stdout).unwrap();
        assert_eq!(
            out.lines().filter(|l| l.ends_with(" blob")).count(),
            all.len(),
            "{out}"
        );
        for id in &all {
            assert!(repo.find_blob(*id).is_ok(), "gix still reads {id}");
        }
    }
}
