//! A Python file's import statements as written (module, dots, names), read from its syntax
//! tree: what [`crate::pygraph`] resolves to files. Pure, so cached by blob id.

use serde::{Deserialize, Serialize};

/// Bump whenever [`python_imports`] could give something else for the same bytes.
pub const IMPORTS_VERSION: u32 = 3;

/// One `import a.b` or `from ..a import x, y`, wherever it stands (a function, a `try`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// The dots of a relative import: 0 for an absolute one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub level: u32,
    /// The dotted module (`a.b`); empty for `from . import x`.
    pub module: String,
    /// The names of a `from` import (each may be a submodule); empty for `import a.b` and `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// For `import a` / `import a.b as c`: the attributes the file reads of the name it binds
    /// (`a.x`, `c.y`), when it uses that name for nothing else; `None`: used otherwise too
    /// (passed on, assigned), so any of its attributes may be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<Vec<String>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The imports of a Python source, in the order written; `None` when it could not be parsed.
pub fn python_imports(src: &[u8]) -> Option<Vec<Import>> {
    let src = src.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(src);
    let tree = super::parse(super::lang::Grammar::Python, src)?;
    let text = |n: tree_sitter::Node<'_>| n.utf8_text(src).unwrap_or("").to_string();
    // The name an `aliased_import` (`a.b as c`) imports: its `name` field.
    let dotted = |n: tree_sitter::Node<'_>| match n.kind() {
        "aliased_import" => n.child_by_field_name("name").map(text),
        "dotted_name" => Some(text(n)),
        _ => None,
    };
    let mut out = Vec::new();
    // The name each plain import binds, by its index in `out`.
    let mut bound: Vec<(usize, String)> = Vec::new();
    // `name.attr` reads, and names used bare (anything but the object of such a read).
    let mut reads: std::collections::BTreeSet<(String, String)> = Default::default();
    let mut bare: std::collections::HashSet<String> = Default::default();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_statement" => {
                let mut c = node.walk();
                for name in node.children_by_field_name("name", &mut c) {
                    if let Some(module) = dotted(name) {
                        let binds = match name.child_by_field_name("alias") {
                            Some(alias) => text(alias),
                            None => module.split('.').next().unwrap_or("").to_string(),
                        };
                        bound.push((out.len(), binds));
                        out.push(Import {
                            level: 0,
                            module,
                            names: Vec::new(),
                            uses: None,
                        });
                    }
                }
            }
            "import_from_statement" => {
                let Some(from) = node.child_by_field_name("module_name") else {
                    continue;
                };
                let (level, module) = if from.kind() == "relative_import" {
                    let mut level = 0;
                    let mut module = String::new();
                    let mut c = from.walk();
                    for part in from.children(&mut c) {
                        match part.kind() {
                            "import_prefix" => level = text(part).matches('.').count() as u32,
                            "dotted_name" => module = text(part),
                            _ => {}
                        }
                    }
                    (level, module)
                } else {
                    (0, text(from))
                };
                let mut c = node.walk();
                let names = node
                    .children_by_field_name("name", &mut c)
                    .filter_map(dotted)
                    .collect();
                out.push(Import {
                    level,
                    module,
                    names,
                    uses: None,
                });
            }
            "attribute" => {
                let object = node.child_by_field_name("object");
                match object.filter(|o| o.kind() == "identifier") {
                    Some(o) => {
                        if let Some(attr) = node.child_by_field_name("attribute") {
                            reads.insert((text(o), text(attr)));
                        }
                    }
                    None => stack.extend(object),
                }
            }
            "identifier" => {
                bare.insert(text(node));
            }
            // `if TYPE_CHECKING:` never runs: its imports are for the type checker alone (its
            // `else` and `elif` branches do run).
            "if_statement"
                if node
                    .child_by_field_name("condition")
                    .is_some_and(|c| text(c).ends_with("TYPE_CHECKING")) =>
            {
                let mut c = node.walk();
                let branches: Vec<_> = node.children_by_field_name("alternative", &mut c).collect();
                stack.extend(branches.into_iter().rev());
            }
            _ => {
                let mut c = node.walk();
                // Children pushed in reverse, so the statements come out in the order written.
                let children: Vec<_> = node.named_children(&mut c).collect();
                stack.extend(children.into_iter().rev());
            }
        }
    }
    for (i, name) in bound {
        if !bare.contains(&name) {
            out[i].uses = Some(
                reads
                    .iter()
                    .filter(|(o, _)| *o == name)
                    .map(|(_, a)| a.clone())
                    .collect(),
            );
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(level: u32, module: &str, names: &[&str]) -> Import {
        Import {
            level,
            module: module.into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            uses: None,
        }
    }

    #[test]
    fn every_form_of_import_is_read_where_it_stands() {
        let src = b"import os, a.b as c\nfrom . import x\nfrom ..pkg.mod import y as z, w\nfrom m import *\n\ndef f():\n    try:\n        import late\n    except ImportError:\n        pass\n";
        let uses = |mut i: Import, u: &[&str]| {
            i.uses = Some(u.iter().map(|s| s.to_string()).collect());
            i
        };
        assert_eq!(
            python_imports(src).unwrap(),
            vec![
                uses(imp(0, "os", &[]), &[]),
                uses(imp(0, "a.b", &[]), &[]),
                imp(1, "", &["x"]),
                imp(2, "pkg.mod", &["y", "w"]),
                imp(0, "m", &[]),
                uses(imp(0, "late", &[]), &[]),
            ]
        );
        let src = b"import typing as t\nif t.TYPE_CHECKING:\n    from .core import Context\nelse:\n    from .rt import Context\n";
        let modules: Vec<String> = python_imports(src)
            .unwrap()
            .into_iter()
            .map(|i| i.module)
            .collect();
        assert_eq!(modules, vec!["typing", "rt"]);
    }

    #[test]
    fn the_attributes_read_of_an_imported_name_are_kept_unless_it_is_used_otherwise() {
        let src = b"import click
import json as j
import os.path

def test():
    click.echo(click.style('x'))
    f(j)
    os.path.join()
";
        let got = python_imports(src).unwrap();
        let uses: Vec<Option<Vec<String>>> = got.into_iter().map(|i| i.uses).collect();
        assert_eq!(
            uses,
            vec![
                Some(vec!["echo".into(), "style".into()]),
                None,
                Some(vec!["path".into()]),
            ]
        );
    }
}
