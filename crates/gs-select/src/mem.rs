//! A commit and its parent as in-memory trees: the [`Sources`] unit tests select over.

use crate::{File, PerTest, Result, Sources};
use gs_model::{ChangeStatus, Changes, FileChange};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A commit's tree and its parent's, with what the parent's run left.
#[derive(Default)]
pub struct MemTree {
    /// The commit's files: path → content.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The parent's files; `None`: a first commit.
    pub parent: Option<BTreeMap<String, Vec<u8>>>,
    /// The tests that failed in the parent's run.
    pub failed: Vec<String>,
    /// The parent's run's log.
    pub log: Option<Vec<u8>>,
    /// The failed runs of commits that changed a file: path → (commit, failed tests).
    pub history: BTreeMap<String, Vec<(String, Vec<String>)>>,
    /// The parent's per-test coverage: test → (file → lines it ran).
    pub coverage: Option<BTreeMap<String, BTreeMap<String, BTreeSet<u32>>>>,
    /// git-sandbox's test map of the parent.
    pub map: Option<crate::testmap::TestMap>,
    cache: RefCell<HashMap<(String, String), String>>,
    /// How many analyses were parsed and kept (a test of the cache).
    pub kept: RefCell<usize>,
}

impl MemTree {
    /// A commit whose parent has `before` and which has `before` changed by `after` (a `None`
    /// content deletes the file).
    pub fn commit(before: &[(&str, &str)], after: &[(&str, Option<&str>)]) -> MemTree {
        let parent: BTreeMap<String, Vec<u8>> = before
            .iter()
            .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
            .collect();
        let mut files = parent.clone();
        for (p, c) in after {
            match c {
                Some(c) => files.insert(p.to_string(), c.as_bytes().to_vec()),
                None => files.remove(*p),
            };
        }
        MemTree {
            files,
            parent: Some(parent),
            ..MemTree::default()
        }
    }
}

/// A blob's id: a hash of its bytes.
fn id_of(bytes: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016x}", h.finish())
}

struct Coverage<'a> {
    by_test: &'a BTreeMap<String, BTreeMap<String, BTreeSet<u32>>>,
    tests: BTreeSet<String>,
}

impl PerTest for Coverage<'_> {
    fn tests(&self) -> &BTreeSet<String> {
        &self.tests
    }

    fn tests_running(&self, path: &str, lines: &[u32]) -> Option<BTreeSet<String>> {
        let mut measured = false;
        let mut out = BTreeSet::new();
        for (test, files) in self.by_test {
            if let Some(ran) = files.get(path) {
                measured = true;
                if lines.iter().any(|l| ran.contains(l)) {
                    out.insert(test.clone());
                }
            }
        }
        measured.then_some(out)
    }
}

impl Sources for MemTree {
    fn has_file(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    fn text(&self, path: &str, max: u64) -> Option<String> {
        let b = self.files.get(path).filter(|b| b.len() as u64 <= max)?;
        Some(String::from_utf8_lossy(b).into_owned())
    }

    fn dirs(&self, dir: &str) -> Vec<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let names: BTreeSet<String> = self
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix)?.split_once('/'))
            .map(|(d, _)| d.to_string())
            .collect();
        names.into_iter().collect()
    }

    fn files(&self) -> Result<Vec<File>> {
        Ok(self
            .files
            .iter()
            .map(|(p, b)| File {
                path: p.clone(),
                id: id_of(b),
            })
            .collect())
    }

    fn blob(&self, id: &str, max: u64) -> Option<Vec<u8>> {
        self.files
            .values()
            .find(|b| id_of(b) == id)
            .filter(|b| b.len() as u64 <= max)
            .cloned()
    }

    fn changes(&self) -> Result<Option<Changes>> {
        let Some(parent) = &self.parent else {
            return Ok(None);
        };
        let mut files = Vec::new();
        let paths: BTreeSet<&String> = parent.keys().chain(self.files.keys()).collect();
        for p in paths {
            let status = match (parent.get(p), self.files.get(p)) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(_), Some(_)) => ChangeStatus::Modified,
                (None, Some(_)) => ChangeStatus::Added,
                (Some(_), None) => ChangeStatus::Deleted,
                (None, None) => continue,
            };
            files.push(FileChange {
                path: p.clone(),
                status,
                insertions: 0,
                deletions: 0,
                binary: false,
            });
        }
        Ok(Some(Changes {
            files_changed: files.len() as u64,
            files,
            ..Changes::default()
        }))
    }

    fn parent_blob(&self, path: &str, max: u64) -> Option<Vec<u8>> {
        let b = self.parent.as_ref()?.get(path)?;
        (b.len() as u64 <= max).then(|| b.clone())
    }

    fn failed_before(&self) -> Result<Vec<String>> {
        Ok(self.failed.clone())
    }

    fn failed_when_changed(&self, path: &str) -> Result<Vec<(String, Vec<String>)>> {
        Ok(self.history.get(path).cloned().unwrap_or_default())
    }

    fn parent_log(&self) -> Option<Vec<u8>> {
        self.log.clone()
    }

    fn per_test(&self) -> Option<Box<dyn PerTest + '_>> {
        let by_test = self.coverage.as_ref()?;
        Some(Box::new(Coverage {
            tests: by_test.keys().cloned().collect(),
            by_test,
        }))
    }

    fn test_map(&self) -> Option<(String, Box<dyn PerTest + '_>)> {
        let map = self.map.clone()?;
        Some(("parent".into(), Box::new(map)))
    }

    fn cached(&self, blob: &str, key: &str) -> Result<Option<String>> {
        let k = (blob.to_string(), key.to_string());
        Ok(self.cache.borrow().get(&k).cloned())
    }

    fn keep(&self, fresh: &[(String, String, String)]) -> Result<()> {
        let mut cache = self.cache.borrow_mut();
        for (b, k, j) in fresh {
            cache.insert((b.clone(), k.clone()), j.clone());
            *self.kept.borrow_mut() += 1;
        }
        Ok(())
    }
}
