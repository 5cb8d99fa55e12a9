//! Which lines of a Python file a change touches, as coverage.py counts them, and whether only
//! the bodies of functions changed: then the tests that ran those lines are the ones the change
//! can reach; a change anywhere else (a `def` line, a decorator, module or class level) runs
//! when the module is imported, for every test that imports it.

/// The statement lines (1-based, as coverage.py numbers them) of the parent's text `old` that a
/// change to `new` touches: the changed lines and the first line of each statement they lie in
/// (coverage.py records a statement of several lines at its first). `None` when the change
/// reaches beyond the bodies of functions, or either text does not parse cleanly.
pub fn changed_body_lines(old: &[u8], new: &[u8]) -> Option<Vec<u32>> {
    bodies(old, new).map(|(lines, _)| lines)
}

/// The names of the functions whose bodies hold the lines a change touches
/// ([`changed_body_lines`]), innermost first; empty when the change is not inside function
/// bodies.
pub fn changed_function_names(old: &[u8], new: &[u8]) -> Vec<String> {
    bodies(old, new).map(|(_, names)| names).unwrap_or_default()
}

/// [`changed_body_lines`] and [`changed_function_names`], from one walk.
fn bodies(old: &[u8], new: &[u8]) -> Option<(Vec<u32>, Vec<String>)> {
    let mut lines = Vec::new();
    let mut names = Vec::new();
    changed_nodes(super::lang::Grammar::Python, old, new, &mut |row, node| {
        let mut statement = None;
        let mut n = Some(node);
        while let Some(cur) = n {
            if statement.is_none() && cur.kind().ends_with("statement") {
                statement = Some(cur.start_position().row);
            }
            if matches!(cur.kind(), "function_definition") {
                let body = cur.child_by_field_name("body")?;
                if body.start_position().row > row || row <= cur.start_position().row {
                    return None;
                }
                lines.push(row as u32 + 1);
                if let Some(s) = statement {
                    lines.push(s as u32 + 1);
                }
                if let Some(name) = cur
                    .child_by_field_name("name")
                    .and_then(|n| n.utf8_text(old).ok())
                {
                    names.push(name.to_string());
                }
                return Some(());
            }
            if matches!(cur.kind(), "class_definition" | "decorated_definition") {
                return None;
            }
            n = cur.parent();
        }
        None
    })?;
    lines.sort_unstable();
    lines.dedup();
    names.dedup();
    Some((lines, names))
}

/// Walks the rows of the parent's text `old` that a change to `new` touches ([`changed_rows`]),
/// when both parse cleanly with `grammar`: `each` gets a row and the node its first word starts,
/// and answers `None` to stop (the change reaches beyond what the caller follows).
pub(crate) fn changed_nodes(
    grammar: super::lang::Grammar,
    old: &[u8],
    new: &[u8],
    each: &mut dyn FnMut(usize, tree_sitter::Node<'_>) -> Option<()>,
) -> Option<()> {
    let rows = changed_rows(old, new)?;
    let old_lines: Vec<&[u8]> = old.split(|&b| b == b'\n').collect();
    let tree = super::parse(grammar, old)?;
    let new_tree = super::parse(grammar, new)?;
    if tree.root_node().has_error() || new_tree.root_node().has_error() {
        return None;
    }
    for row in rows {
        let col = old_lines[row]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
        let at = tree_sitter::Point::new(row, col);
        each(row, tree.root_node().descendant_for_point_range(at, at)?)?;
    }
    Some(())
}

/// The 0-based rows of the parent's text `old` that a change to `new` touches: those between
/// the common start and end (an insertion touches the rows on either side of it). `None` for no
/// change, or a change of more than 200 rows.
pub(crate) fn changed_rows(old: &[u8], new: &[u8]) -> Option<Vec<usize>> {
    let old_lines: Vec<&[u8]> = old.split(|&b| b == b'\n').collect();
    let new_lines: Vec<&[u8]> = new.split(|&b| b == b'\n').collect();
    let prefix = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let room = old_lines.len().min(new_lines.len()) - prefix;
    let suffix = old_lines
        .iter()
        .rev()
        .zip(new_lines.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let (from, to) = (prefix, old_lines.len() - suffix);
    let rows: Vec<usize> = if from < to {
        (from..to).collect()
    } else {
        (from.saturating_sub(1)..=from.min(old_lines.len() - 1)).collect()
    };
    (!rows.is_empty() && rows.len() <= 200 && old != new).then_some(rows)
}

#[cfg(test)]
mod tests {
    use super::changed_body_lines as lines;

    const OLD: &str = "import os\n\n\nclass A:\n    x = 1\n\n    def f(self, a):\n        if a == 1:\n            return g(\n                a,\n                2,\n            )\n        return 0\n\n\n@deco\ndef g(a, b=1):\n    return a + b\n";

    fn with(line: usize, text: &str) -> String {
        let mut l: Vec<&str> = OLD.split('\n').collect();
        l[line - 1] = text;
        l.join("\n")
    }

    #[test]
    fn a_change_inside_a_function_body_is_its_lines() {
        let o = OLD.as_bytes();
        assert_eq!(
            lines(o, with(8, "        if a != 1:").as_bytes()),
            Some(vec![8])
        );
        // Inside a statement of several lines: its first line too.
        assert_eq!(
            lines(o, with(11, "                3,").as_bytes()),
            Some(vec![9, 11])
        );
        assert_eq!(
            lines(o, with(18, "    return a - b").as_bytes()),
            Some(vec![18])
        );
        assert_eq!(lines(o, o), None, "no change, no lines");
        let names =
            |line: usize, text: &str| super::changed_function_names(o, with(line, text).as_bytes());
        assert_eq!(names(8, "        if a != 1:"), ["f"]);
        assert_eq!(names(18, "    return a - b"), ["g"]);
        assert!(names(5, "    x = 2").is_empty());
    }

    #[test]
    fn a_change_outside_function_bodies_is_not_lines() {
        let o = OLD.as_bytes();
        for (line, text) in [
            (1, "import sys"),
            (5, "    x = 2"),
            (7, "    def f(self, a, b=2):"),
            (16, "@other"),
            (17, "def g(a, b=2):"),
            // A change that does not parse.
            (13, "        return (0"),
        ] {
            assert_eq!(lines(o, with(line, text).as_bytes()), None, "{text}");
        }
    }
}
