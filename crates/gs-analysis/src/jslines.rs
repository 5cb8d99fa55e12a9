//! Which lines of a JavaScript or TypeScript file a change touches, and whether only the bodies
//! of functions changed: then the tests that called those functions are the ones the change can
//! reach (V8 counts calls per function, which git-sandbox's test map for mocha records); a change
//! anywhere else (a function's signature, module level, a class field) runs as the module is
//! loaded, for every test that loads it.

use super::lang::Grammar;

/// What holds a body of code that runs only when called.
const FUNCTIONS: &[&str] = &[
    "function_declaration",
    "function_expression",
    "function",
    "arrow_function",
    "method_definition",
    "generator_function_declaration",
    "generator_function",
];

/// The lines (1-based) of the parent's text `old` of `path` that a change to `new` touches, when
/// each lies in a function's body below the line the function starts on. `None` when the change
/// reaches beyond the bodies of functions, `path` is no JavaScript or TypeScript, or either text
/// does not parse cleanly.
pub fn changed_body_lines(path: &str, old: &[u8], new: &[u8]) -> Option<Vec<u32>> {
    bodies(path, old, new).map(|(lines, _)| lines)
}

/// The names of the functions whose bodies hold the lines of `old` a change to `new` touches
/// ([`changed_body_lines`]), innermost first: a function's own name, else what it is assigned
/// to (`res.send = function`, `const f = () =>`), a key it is the value of, or the first string
/// passed beside it (`defineGetter(req, 'fresh', function () {…})`). Empty when the change is
/// not inside function bodies, or no function there has a name.
pub fn changed_function_names(path: &str, old: &[u8], new: &[u8]) -> Vec<String> {
    bodies(path, old, new)
        .map(|(_, names)| names)
        .unwrap_or_default()
}

/// [`changed_body_lines`] and [`changed_function_names`], from one walk.
fn bodies(path: &str, old: &[u8], new: &[u8]) -> Option<(Vec<u32>, Vec<String>)> {
    let grammar = Grammar::for_path(path)?;
    if !matches!(
        grammar,
        Grammar::Javascript | Grammar::Typescript | Grammar::Tsx
    ) {
        return None;
    }
    let text = |n: tree_sitter::Node| n.utf8_text(old).ok().map(str::to_string);
    let mut lines = Vec::new();
    let mut names = Vec::new();
    super::pylines::changed_nodes(grammar, old, new, &mut |row, node| {
        let mut n = Some(node);
        while let Some(cur) = n {
            if FUNCTIONS.contains(&cur.kind()) {
                let body = cur.child_by_field_name("body")?;
                if body.start_position().row > row || row <= cur.start_position().row {
                    return None;
                }
                lines.push(row as u32 + 1);
                names.extend(function_name(cur, &text));
                return Some(());
            }
            if matches!(cur.kind(), "class_body" | "class_declaration" | "class") {
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

fn function_name(
    f: tree_sitter::Node,
    text: &dyn Fn(tree_sitter::Node) -> Option<String>,
) -> Option<String> {
    if let Some(name) = f.child_by_field_name("name").and_then(text) {
        return Some(name);
    }
    let parent = f.parent()?;
    let name = match parent.kind() {
        "variable_declarator" => parent.child_by_field_name("name").and_then(text),
        "assignment_expression" => {
            let left = parent.child_by_field_name("left")?;
            match left.kind() {
                "member_expression" => left.child_by_field_name("property").and_then(text),
                _ => text(left),
            }
        }
        "pair" => parent.child_by_field_name("key").and_then(text),
        "arguments" => {
            let mut c = parent.walk();
            let first = parent
                .named_children(&mut c)
                .find(|a| a.kind() == "string")
                .and_then(text);
            first
        }
        _ => None,
    }?;
    let name = name.trim_matches(['\'', '"', '`']).to_string();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::changed_body_lines;

    const OLD: &str = "'use strict';\nvar x = 1;\n\nexports.f = function (a) {\n  if (a === 1) {\n    return g(a,\n      2);\n  }\n  return 0;\n};\n\nclass A {\n  y = 2;\n  m(b) {\n    return b + 1;\n  }\n}\n\nconst h = (c) =>\n  c * 2;\n";

    fn with(line: usize, text: &str) -> String {
        let mut l: Vec<&str> = OLD.split('\n').collect();
        l[line - 1] = text;
        l.join("\n")
    }

    fn lines(line: usize, text: &str) -> Option<Vec<u32>> {
        changed_body_lines("lib/a.js", OLD.as_bytes(), with(line, text).as_bytes())
    }

    #[test]
    fn a_change_inside_a_function_body_is_its_lines() {
        assert_eq!(lines(5, "  if (a !== 1) {"), Some(vec![5]));
        assert_eq!(lines(7, "      3);"), Some(vec![7]));
        assert_eq!(lines(15, "    return b - 1;"), Some(vec![15]));
        assert_eq!(lines(20, "  c * 3;"), Some(vec![20]));
        // TypeScript reads the same.
        let ts = changed_body_lines(
            "src/a.ts",
            b"export function f(a: number): number {\n  return a + 1;\n}\n",
            b"export function f(a: number): number {\n  return a + 2;\n}\n",
        );
        assert_eq!(ts, Some(vec![2]));
        let same = OLD.as_bytes();
        assert_eq!(changed_body_lines("lib/a.js", same, same), None);
    }

    #[test]
    fn a_change_outside_function_bodies_is_not_lines() {
        for (line, text) in [
            (2, "var x = 2;"),
            (4, "exports.f = function (a, b) {"),
            (13, "  y = 3;"),
            (14, "  m(b, c) {"),
            (19, "const h = (c, d) =>"),
            // A change that does not parse.
            (9, "  return (0;"),
        ] {
            assert_eq!(lines(line, text), None, "{text}");
        }
        assert_eq!(
            changed_body_lines("a.py", b"def f():\n  x\n", b"def f():\n  y\n"),
            None
        );
    }

    #[test]
    fn a_changed_function_is_named_as_it_is_declared_assigned_or_registered() {
        let names = |line: usize, text: &str| {
            super::changed_function_names("lib/a.js", OLD.as_bytes(), with(line, text).as_bytes())
        };
        assert_eq!(names(5, "  if (a !== 1) {"), ["f"]);
        assert_eq!(names(15, "    return b - 1;"), ["m"]);
        assert_eq!(names(20, "  c * 3;"), ["h"]);
        assert!(names(2, "var x = 2;").is_empty());
        let old = "function g(x) {\n  return x;\n}\ndefineGetter(req, 'fresh', function () {\n  return 1;\n});\nmodule.exports = {\n  add: function (a) {\n    return a;\n  },\n};\n";
        for (from, to, name) in [
            ("return x;", "return -x;", "g"),
            ("return 1;", "return 2;", "fresh"),
            ("return a;", "return a + 1;", "add"),
        ] {
            let new = old.replace(from, to);
            assert_eq!(
                super::changed_function_names("lib/r.js", old.as_bytes(), new.as_bytes()),
                [name]
            );
        }
    }
}
