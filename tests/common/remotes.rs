//! A repository's remote (a bare repository in the world's temp dir) and its clones on other
//! machines.

use super::World;
use std::path::{Path, PathBuf};

impl World {
    /// A bare repository at `name` (relative to the temp dir, e.g. `shared.git`), made `repo`'s
    /// `origin`. Nothing is pushed.
    pub fn bare_remote(&self, repo: &Path, name: &str) -> PathBuf {
        let remote = self.path(name);
        let url = remote.to_str().unwrap();
        self.git(&self.work(), &["init", "-q", "--bare", "-b", "main", url]);
        self.git(repo, &["remote", "add", "origin", url]);
        remote
    }

    /// A clone of `url` in this world's work dir, adopted with `git sandbox init`.
    pub fn clone_and_init(&self, url: &str, name: &str) -> PathBuf {
        let dir = self.work().join(name);
        self.git(&self.work(), &["clone", "-q", url, dir.to_str().unwrap()]);
        let o = self.sandbox(&dir, &["init"]);
        assert_eq!(o.code, 0, "{o:?}");
        dir
    }
}
