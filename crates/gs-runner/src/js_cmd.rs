//! jest, vitest and mocha commands, as `gs_select::command::js` recognises them, and the files
//! of a checked-out tree mocha's discovery reads.

pub use gs_select::command::js::*;

/// Every file of the checkout at `root` (relative paths), for mocha's discovery: not under
/// `node_modules` or a hidden directory, and at most `max` of them (`None` past that).
pub fn tree_files(root: &std::path::Path, max: usize) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            // Not followed through links: what the tree holds, as git has it.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if name != "node_modules" && !name.starts_with('.') {
                    stack.push((entry.path(), path));
                }
            } else {
                out.push(path);
                if out.len() > max {
                    return None;
                }
            }
        }
    }
    out.sort();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_listed_without_installed_and_hidden_directories() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["test/a.js", "node_modules/m/x.js", ".git/HEAD", "b.js"] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        assert_eq!(
            tree_files(dir.path(), 10),
            Some(vec!["b.js".to_string(), "test/a.js".to_string()])
        );
        assert_eq!(tree_files(dir.path(), 1), None);
    }
}
