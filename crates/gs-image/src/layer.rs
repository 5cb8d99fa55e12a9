//! A layer made here rather than pulled: the files a build copies from a commit (`COPY`), written
//! as a tar with fixed owners (0:0) and times (0), so that the same files give the same layer
//! and the same `diff_id`. It is unpacked like any pulled layer ([`crate::Store::add_layer`]).

/// One member of a layer made here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    Dir(String),
    /// A path, its bytes, whether it is executable.
    File(String, Vec<u8>, bool),
    Symlink(String, String),
}

/// The tar of `members` (each path relative, `/`-separated, without `..`), its parents made
/// first; and its sha256 `diff_id`.
pub fn tar_of(members: &[Member]) -> Result<(Vec<u8>, String), String> {
    use sha2::{Digest, Sha256};
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h
    };
    let parents = |b: &mut tar::Builder<Vec<u8>>,
                   dirs: &mut std::collections::BTreeSet<String>,
                   path: &str|
     -> Result<(), String> {
        let mut at = String::new();
        for part in path
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
            at.push_str(part);
            at.push('/');
            if dirs.insert(at.clone()) {
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                b.append_data(&mut h, &at, &[][..])
                    .map_err(|e| format!("{at}: {e}"))?;
            }
        }
        Ok(())
    };
    for m in members {
        let path = match m {
            Member::Dir(p) | Member::File(p, _, _) | Member::Symlink(p, _) => p,
        };
        if path.is_empty()
            || path.starts_with('/')
            || path
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty())
        {
            return Err(format!("{path:?} is not a path inside the image"));
        }
        parents(&mut b, &mut dirs, path)?;
        match m {
            Member::Dir(p) => {
                if dirs.insert(format!("{p}/")) {
                    let mut h = header(tar::EntryType::Directory, 0o755, 0);
                    b.append_data(&mut h, format!("{p}/"), &[][..])
                        .map_err(|e| format!("{p}: {e}"))?;
                }
            }
            Member::File(p, bytes, exec) => {
                let mode = if *exec { 0o755 } else { 0o644 };
                let mut h = header(tar::EntryType::Regular, mode, bytes.len() as u64);
                b.append_data(&mut h, p, &bytes[..])
                    .map_err(|e| format!("{p}: {e}"))?;
            }
            Member::Symlink(p, target) => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                b.append_link(&mut h, p, target)
                    .map_err(|e| format!("{p}: {e}"))?;
            }
        }
    }
    let bytes = b.into_inner().map_err(|e| e.to_string())?;
    let diff_id = format!("sha256:{:x}", Sha256::digest(&bytes));
    Ok((bytes, diff_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_files_give_the_same_layer_and_no_path_leaves_it() {
        let files = vec![
            Member::File("app/src/main.py".into(), b"print(1)\n".to_vec(), false),
            Member::File("app/run.sh".into(), b"#!/bin/sh\n".to_vec(), true),
            Member::Symlink("app/current".into(), "src".into()),
        ];
        let (a, da) = tar_of(&files).unwrap();
        let (b, db) = tar_of(&files).unwrap();
        assert_eq!((a, da.clone()), (b, db));
        assert!(da.starts_with("sha256:") && da.len() == 71);
        for bad in ["/etc/x", "../x", "a/../b", "a//b", ""] {
            assert!(tar_of(&[Member::Dir(bad.into())]).is_err(), "{bad}");
        }
    }
}
