//! The commit's small text files (pytest's config files, `package.json`) as the checks read
//! them to understand a command: each read beneath the tree (never through a link out of it) at
//! most once per check, however many questions are asked of it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;

/// The largest file read: config files are small.
const CAP: u64 = 1 << 20;

pub(super) struct TreeText {
    tree: PathBuf,
    read: RefCell<HashMap<String, Option<String>>>,
}

impl TreeText {
    pub(super) fn of(work: &gs_runner::rundir::RunDir) -> Self {
        TreeText {
            tree: work.host_tree(),
            read: RefCell::default(),
        }
    }

    /// The text of `path` (relative to the tree), `None` when it is missing, unreadable or
    /// leaves the tree.
    pub(super) fn get(&self, path: &str) -> Option<String> {
        if let Some(text) = self.read.borrow().get(path) {
            return text.clone();
        }
        let text = gs_util::beneath::read_beneath(&self.tree, path, CAP)
            .ok()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        self.read
            .borrow_mut()
            .insert(path.to_string(), text.clone());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_once_and_a_link_out_of_the_tree_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("pytest.ini"), "[pytest]\naddopts = -s\n").unwrap();
        std::fs::write(dir.path().join("secret"), "token").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), tree.join("tox.ini")).unwrap();
        let texts = TreeText {
            tree: tree.clone(),
            read: RefCell::default(),
        };
        assert_eq!(
            texts.get("pytest.ini").as_deref(),
            Some("[pytest]\naddopts = -s\n")
        );
        // Asked again after the file changed: the first answer stands (one read per check).
        std::fs::write(tree.join("pytest.ini"), "changed").unwrap();
        assert_eq!(
            texts.get("pytest.ini").as_deref(),
            Some("[pytest]\naddopts = -s\n")
        );
        assert_eq!(texts.get("tox.ini"), None);
        assert_eq!(texts.get("setup.cfg"), None);
    }
}
