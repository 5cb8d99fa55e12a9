//! Which new paths a tree's `.gitignore` files ignore, as git would judge untracked files in a
//! checkout of it, matched in-process: each directory's `.gitignore` (read from the tree once,
//! when a path below it is first asked about) over its parent's, the deepest deciding, a `!`
//! pattern re-including. Nothing else counts (not the user's global excludes, not
//! `info/exclude`): the tree alone decides, on every machine alike. A caller asks about a
//! directory before what is below it, and skips what is below an ignored one, as git does.

use gix::bstr::ByteSlice;
use gix::ObjectId;
use std::collections::HashMap;

/// The most bytes of one `.gitignore` read.
const MAX_IGNORE_FILE: u64 = 1 << 20;

pub struct TreeIgnores<'r> {
    repo: &'r gix::Repository,
    tree: ObjectId,
    /// The patterns of each directory's `.gitignore` (`""`: the root), `None` where it has none.
    lists: HashMap<String, Option<gix::ignore::Search>>,
}

impl<'r> TreeIgnores<'r> {
    pub fn new(repo: &'r gix::Repository, tree: ObjectId) -> Self {
        TreeIgnores {
            repo,
            tree,
            lists: HashMap::new(),
        }
    }

    /// Whether `path` (relative to the root, `/`-separated; `is_dir` for a directory) is
    /// ignored.
    pub fn is_ignored(&mut self, path: &str, is_dir: bool) -> bool {
        // The directories holding it, deepest last.
        let mut dirs = vec![String::new()];
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..parts.len() {
            dirs.push(parts[..i].join("/"));
        }
        for d in dirs.iter().rev() {
            let list = self.list(d);
            let Some(search) = list else { continue };
            let rel = if d.is_empty() {
                path
            } else {
                &path[d.len() + 1..]
            };
            if let Some(m) = search.pattern_matching_relative_path(
                rel.as_bytes().as_bstr(),
                Some(is_dir),
                gix::glob::pattern::Case::Sensitive,
            ) {
                return !m.pattern.is_negative();
            }
        }
        false
    }

    fn list(&mut self, dir: &str) -> Option<&gix::ignore::Search> {
        if !self.lists.contains_key(dir) {
            let file = if dir.is_empty() {
                ".gitignore".to_string()
            } else {
                format!("{dir}/.gitignore")
            };
            let bytes = super::objects::entry_at(self.repo, self.tree, &file)
                .filter(|e| e.kind.is_file())
                .and_then(|e| super::objects::small_blob(self.repo, e.id, MAX_IGNORE_FILE));
            let search = bytes.and_then(|b| {
                let mut s = gix::ignore::Search::default();
                s.add_patterns_buffer(&b, file, None, gix::ignore::search::Ignore::default())
                    .ok()?;
                Some(s)
            });
            self.lists.insert(dir.to_string(), search);
        }
        self.lists.get(dir).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_gitignore_decides_and_a_bang_re_includes() {
        let (_dir, repo) = crate::testutil::repo_with(&[
            (".gitignore", "target/\n*.log\n!keep.log\n"),
            ("sub/.gitignore", "local.txt\n!debug.log\n"),
            ("sub/a.txt", "a\n"),
        ]);
        let tree = crate::testutil::head_tree(&repo);
        let mut ig = TreeIgnores::new(&repo, tree);
        assert!(ig.is_ignored("target", true));
        assert!(
            !ig.is_ignored("target", false),
            "target/ names directories only"
        );
        assert!(ig.is_ignored("x.log", false));
        assert!(!ig.is_ignored("keep.log", false));
        assert!(ig.is_ignored("sub/local.txt", false));
        assert!(ig.is_ignored("sub/deep/y.log", false));
        assert!(!ig.is_ignored("sub/debug.log", false));
        assert!(!ig.is_ignored("sub/new.txt", false));
        assert!(
            !ig.is_ignored("local.txt", false),
            "sub's file rules only below sub"
        );
    }
}
