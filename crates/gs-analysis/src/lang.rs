//! Languages: which paths belong to which grammar, and one table of node kinds per language that
//! says what each kind means to the metrics walk (function, class, decision, comment, …).

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use tree_sitter::Language;

/// A language as it appears in the record (`languages` keys are these names, lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Python,
    Javascript,
    Typescript,
    Rust,
    Go,
    Java,
    C,
    Cpp,
}

impl Lang {
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Javascript => "javascript",
            Lang::Typescript => "typescript",
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
        }
    }

    /// Whether a tree-sitter error node in this language's files says the code is wrong. Not
    /// for C and C++: they are parsed without their preprocessor, so macros in declaration
    /// position (`FMT_CONSTEXPR void f()`, `FMT_BEGIN_NAMESPACE`) and the grammar's gaps in
    /// templates leave error nodes in code a compiler accepts; the compiler is the judge there.
    pub fn parse_errors_are_code_errors(self) -> bool {
        !matches!(self, Lang::C | Lang::Cpp)
    }
}

/// A tree-sitter grammar. TypeScript has two (`.ts` and `.tsx`); both report as `typescript`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    Python,
    Javascript,
    Typescript,
    Tsx,
    Rust,
    Go,
    Java,
    C,
    Cpp,
}

#[cfg(test)]
pub const ALL_GRAMMARS: [Grammar; 9] = [
    Grammar::Python,
    Grammar::Javascript,
    Grammar::Typescript,
    Grammar::Tsx,
    Grammar::Rust,
    Grammar::Go,
    Grammar::Java,
    Grammar::C,
    Grammar::Cpp,
];

impl Grammar {
    pub fn lang(self) -> Lang {
        match self {
            Grammar::Python => Lang::Python,
            Grammar::Javascript => Lang::Javascript,
            Grammar::Typescript | Grammar::Tsx => Lang::Typescript,
            Grammar::Rust => Lang::Rust,
            Grammar::Go => Lang::Go,
            Grammar::Java => Lang::Java,
            Grammar::C => Lang::C,
            Grammar::Cpp => Lang::Cpp,
        }
    }

    /// The grammar for a path, by extension (case-sensitive, as compilers treat them).
    pub fn for_path(path: &str) -> Option<Grammar> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.')?.1;
        Some(match ext {
            "py" => Grammar::Python,
            "js" | "mjs" | "cjs" | "jsx" => Grammar::Javascript,
            "ts" | "mts" | "cts" => Grammar::Typescript,
            "tsx" => Grammar::Tsx,
            "rs" => Grammar::Rust,
            "go" => Grammar::Go,
            "java" => Grammar::Java,
            "c" | "h" => Grammar::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Grammar::Cpp,
            _ => return None,
        })
    }

    /// This grammar (the path's), or C++ for a `.h` file that shows C++ (fmt's, Boost's
    /// headers), which the C grammar reads as thousands of errors.
    pub fn for_content(self, path: &str, src: &[u8]) -> Grammar {
        if self == Grammar::C && path.ends_with(".h") && shows_cpp(src) {
            Grammar::Cpp
        } else {
            self
        }
    }

    fn language(self) -> Language {
        Language::new(match self {
            Grammar::Python => tree_sitter_python::LANGUAGE,
            Grammar::Javascript => tree_sitter_javascript::LANGUAGE,
            Grammar::Typescript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
            Grammar::Tsx => tree_sitter_typescript::LANGUAGE_TSX,
            Grammar::Rust => tree_sitter_rust::LANGUAGE,
            Grammar::Go => tree_sitter_go::LANGUAGE,
            Grammar::Java => tree_sitter_java::LANGUAGE,
            Grammar::C => tree_sitter_c::LANGUAGE,
            Grammar::Cpp => tree_sitter_cpp::LANGUAGE,
        })
    }

    /// The kind table, built once per process.
    pub fn table(self) -> &'static Table {
        static TABLES: [OnceLock<Table>; 9] = [const { OnceLock::new() }; 9];
        TABLES[self as usize].get_or_init(|| Table::build(self, spec(self)))
    }
}

/// Whether a header shows C++, by the signs GitHub's linguist reads (its `cpp` heuristic for
/// `.h`, less `constexpr`, which C23 has too): a line starting `template <`, `class X`,
/// `namespace X`, `using namespace X`, `public:`/`private:`/`protected:`, an `#include` of a
/// C++ standard header, or `std::x`, `__has_cpp_attribute` anywhere. A C header's
/// `extern "C"` guard for C++ callers is not a sign.
fn shows_cpp(src: &[u8]) -> bool {
    const STD_HEADERS: &[&[u8]] = &[
        b"cstdint",
        b"string",
        b"vector",
        b"map",
        b"list",
        b"array",
        b"bitset",
        b"queue",
        b"stack",
        b"forward_list",
        b"unordered_map",
        b"unordered_set",
        b"iostream",
        b"istream",
        b"ostream",
    ];
    let ident = |b: &u8| b.is_ascii_alphabetic() || *b == b'_';
    // `keyword`, at least one blank, then an identifier.
    let then_name = |line: &[u8], keyword: &[u8]| {
        line.strip_prefix(keyword).is_some_and(|rest| {
            let name = rest.trim_ascii_start();
            name.len() < rest.len() && name.first().is_some_and(ident)
        })
    };
    let by_line = src.split(|&b| b == b'\n').any(|line| {
        let line = line.trim_ascii();
        let include = line
            .strip_prefix(b"#")
            .and_then(|l| l.trim_ascii_start().strip_prefix(b"include"))
            .and_then(|l| l.trim_ascii_start().strip_prefix(b"<"))
            .and_then(|l| l.strip_suffix(b">"));
        include.is_some_and(|h| STD_HEADERS.contains(&h))
            || line
                .strip_prefix(b"template")
                .is_some_and(|rest| rest.trim_ascii_start().starts_with(b"<"))
            || [&b"class"[..], b"namespace", b"using namespace"]
                .iter()
                .any(|k| then_name(line, k))
            || matches!(line, b"public:" | b"private:" | b"protected:")
    });
    let anywhere = |needle: &[u8]| {
        src.windows(needle.len()).enumerate().any(|(i, w)| {
            w == needle && (needle != b"std::" || src.get(i + needle.len()).is_some_and(ident))
        })
    };
    by_line || anywhere(b"std::") || anywhere(b"__has_cpp_attribute")
}

/// What a node kind means to the metrics walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Other,
    /// A function if it has a body.
    Function,
    /// A class-like definition if it has a body.
    Class,
    /// A Go `type_spec`: a class when its type is a struct or interface.
    TypeSpec,
    /// One decision point.
    Decision,
    /// `&&`, `||`, `??`, `and`, `or`: a decision when it is a binary operator.
    Logical,
    /// A `case` label; a `default` label (first child `default`) is not a decision.
    Case,
    /// A Rust `match`: arms − 1, so the match itself counts −1 and each arm +1.
    Match,
    /// A match arm's pattern: its `if` guard, when it has one, is a decision.
    Guard,
    /// A comment: its lines are comment lines.
    Comment,
    /// A string literal: every line it spans is code.
    Str,
    /// A Python expression statement: a lone string there is a docstring (a comment).
    ExprStatement,
}

/// The node kinds of one language, by meaning. Names must exist in the grammar (a unit test checks).
pub struct Spec {
    pub functions: &'static [&'static str],
    pub classes: &'static [&'static str],
    pub type_specs: &'static [&'static str],
    pub decisions: &'static [&'static str],
    /// Anonymous operator tokens.
    pub logical: &'static [&'static str],
    pub cases: &'static [&'static str],
    pub matches: &'static [&'static str],
    /// Patterns whose `condition` field (an `if` guard) is a decision.
    pub guards: &'static [&'static str],
    pub comments: &'static [&'static str],
    pub strings: &'static [&'static str],
    pub expr_statements: &'static [&'static str],
    /// Children of a parameter list that are not parameters.
    pub not_params: &'static [&'static str],
    /// Struct and interface types (Go `type_spec` classes).
    pub class_types: &'static [&'static str],
}

const C_COMMENTS: &[&str] = &["comment"];
const C_DECISIONS: &[&str] = &[
    "if_statement",
    "for_statement",
    "while_statement",
    "do_statement",
    "conditional_expression",
];
const JS_DECISIONS: &[&str] = &[
    "if_statement",
    "for_statement",
    "for_in_statement",
    "while_statement",
    "do_statement",
    "catch_clause",
    "ternary_expression",
];
const JS_FUNCTIONS: &[&str] = &[
    "function_declaration",
    "function_expression",
    "generator_function_declaration",
    "generator_function",
    "arrow_function",
    "method_definition",
];

fn spec(g: Grammar) -> Spec {
    let none: &[&str] = &[];
    match g {
        Grammar::Python => Spec {
            functions: &["function_definition"],
            classes: &["class_definition"],
            type_specs: none,
            decisions: &[
                "if_statement",
                "elif_clause",
                "for_statement",
                "while_statement",
                "except_clause",
                "finally_clause",
                "conditional_expression",
                "for_in_clause",
                "if_clause",
                "case_clause",
            ],
            logical: &["and", "or"],
            cases: none,
            matches: none,
            guards: none,
            comments: &["comment"],
            strings: &["string", "concatenated_string"],
            expr_statements: &["expression_statement"],
            not_params: &["comment", "positional_separator", "keyword_separator"],
            class_types: none,
        },
        Grammar::Javascript => Spec {
            functions: JS_FUNCTIONS,
            classes: &["class_declaration", "class"],
            type_specs: none,
            decisions: JS_DECISIONS,
            logical: &["&&", "||", "??"],
            cases: &["switch_case"],
            matches: none,
            guards: none,
            comments: &["comment", "html_comment"],
            strings: &["string", "template_string"],
            expr_statements: none,
            not_params: &["comment"],
            class_types: none,
        },
        // TypeScript is JavaScript with more kinds of class.
        Grammar::Typescript | Grammar::Tsx => Spec {
            classes: &[
                "class_declaration",
                "class",
                "abstract_class_declaration",
                "interface_declaration",
                "enum_declaration",
            ],
            ..spec(Grammar::Javascript)
        },
        Grammar::Rust => Spec {
            functions: &["function_item"],
            classes: &["struct_item", "enum_item", "union_item", "trait_item"],
            type_specs: none,
            decisions: &[
                "if_expression",
                "while_expression",
                "loop_expression",
                "for_expression",
                "try_expression",
                "match_arm",
            ],
            logical: &["&&", "||"],
            cases: none,
            matches: &["match_expression"],
            guards: &["match_pattern"],
            comments: &["line_comment", "block_comment"],
            strings: &["string_literal", "raw_string_literal"],
            expr_statements: none,
            not_params: &["line_comment", "block_comment", "attribute_item"],
            class_types: none,
        },
        Grammar::Go => Spec {
            functions: &["function_declaration", "method_declaration", "func_literal"],
            classes: none,
            type_specs: &["type_spec"],
            decisions: &["if_statement", "for_statement"],
            logical: &["&&", "||"],
            cases: &["expression_case", "type_case", "communication_case"],
            matches: none,
            guards: none,
            comments: &["comment"],
            strings: &["interpreted_string_literal", "raw_string_literal"],
            expr_statements: none,
            not_params: &["comment"],
            class_types: &["struct_type", "interface_type"],
        },
        Grammar::Java => Spec {
            functions: &[
                "method_declaration",
                "constructor_declaration",
                "compact_constructor_declaration",
            ],
            classes: &[
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
            ],
            type_specs: none,
            decisions: &[
                "if_statement",
                "for_statement",
                "enhanced_for_statement",
                "while_statement",
                "do_statement",
                "catch_clause",
                "ternary_expression",
            ],
            logical: &["&&", "||"],
            cases: &["switch_label"],
            matches: none,
            guards: none,
            comments: &["line_comment", "block_comment"],
            strings: &["string_literal"],
            expr_statements: none,
            not_params: &["line_comment", "block_comment", "receiver_parameter"],
            class_types: none,
        },
        Grammar::C => Spec {
            functions: &["function_definition"],
            classes: &["struct_specifier", "union_specifier", "enum_specifier"],
            type_specs: none,
            decisions: C_DECISIONS,
            logical: &["&&", "||"],
            cases: &["case_statement"],
            matches: none,
            guards: none,
            comments: C_COMMENTS,
            strings: &["string_literal"],
            expr_statements: none,
            not_params: &["comment"],
            class_types: none,
        },
        Grammar::Cpp => Spec {
            functions: &["function_definition"],
            classes: &[
                "class_specifier",
                "struct_specifier",
                "union_specifier",
                "enum_specifier",
            ],
            type_specs: none,
            decisions: &[
                "if_statement",
                "for_statement",
                "for_range_loop",
                "while_statement",
                "do_statement",
                "conditional_expression",
                "catch_clause",
            ],
            logical: &["&&", "||", "and", "or"],
            cases: &["case_statement"],
            matches: none,
            guards: none,
            comments: C_COMMENTS,
            strings: &["string_literal", "raw_string_literal"],
            expr_statements: none,
            not_params: &["comment"],
            class_types: none,
        },
    }
}

/// Field ids the walk asks for (absent fields are `None`).
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub body: Option<u16>,
    pub name: Option<u16>,
    pub parameters: Option<u16>,
    pub parameter: Option<u16>,
    pub declarator: Option<u16>,
    pub operator: Option<u16>,
    pub type_: Option<u16>,
    pub key: Option<u16>,
    pub left: Option<u16>,
    pub property: Option<u16>,
    pub condition: Option<u16>,
}

/// A grammar's compiled table: a role per node kind id, plus the ids the walk compares against.
pub struct Table {
    pub grammar: Grammar,
    pub language: Language,
    pub roles: Vec<Role>,
    pub fields: Fields,
    /// `default` keyword ids (a `case` node starting with one is a default label).
    pub default_kw: Vec<u16>,
    pub not_params: Vec<u16>,
    pub class_types: Vec<u16>,
    pub function_declarator: u16,
    pub go_param_decls: Vec<u16>,
    /// Kind names the spec lists but the grammar lacks (a unit test asserts this is empty).
    #[cfg_attr(not(test), allow(dead_code))]
    pub missing: Vec<&'static str>,
}

impl Table {
    fn build(grammar: Grammar, spec: Spec) -> Table {
        let language = grammar.language();
        let count = language.node_kind_count();
        let mut roles = vec![Role::Other; count];
        let mut missing = Vec::new();
        let ids = |names: &[&'static str], named: bool, missing: &mut Vec<&'static str>| {
            let mut out = Vec::new();
            for &name in names {
                // A name may map to several ids (aliases); scan them all.
                let mut found = false;
                for id in 0..count as u16 {
                    if language.node_kind_for_id(id) == Some(name)
                        && language.node_kind_is_named(id) == named
                    {
                        out.push(id);
                        found = true;
                    }
                }
                if !found {
                    missing.push(name);
                }
            }
            out
        };
        let groups: [(&[&'static str], bool, Role); 11] = [
            (spec.functions, true, Role::Function),
            (spec.classes, true, Role::Class),
            (spec.type_specs, true, Role::TypeSpec),
            (spec.decisions, true, Role::Decision),
            (spec.logical, false, Role::Logical),
            (spec.cases, true, Role::Case),
            (spec.matches, true, Role::Match),
            (spec.guards, true, Role::Guard),
            (spec.comments, true, Role::Comment),
            (spec.strings, true, Role::Str),
            (spec.expr_statements, true, Role::ExprStatement),
        ];
        for (names, named, role) in groups {
            for id in ids(names, named, &mut missing) {
                roles[id as usize] = role;
            }
        }
        let not_params = ids(spec.not_params, true, &mut missing);
        let class_types = ids(spec.class_types, true, &mut missing);
        let mut scratch = Vec::new();
        let default_kw = ids(&["default"], false, &mut scratch);
        let go_param_decls = if grammar == Grammar::Go {
            ids(
                &["parameter_declaration", "variadic_parameter_declaration"],
                true,
                &mut missing,
            )
        } else {
            Vec::new()
        };
        let field = |name: &str| language.field_id_for_name(name).map(|f| f.get());
        let fields = Fields {
            body: field("body"),
            name: field("name"),
            parameters: field("parameters"),
            parameter: field("parameter"),
            declarator: field("declarator"),
            operator: field("operator"),
            type_: field("type"),
            key: field("key"),
            left: field("left"),
            property: field("property"),
            condition: field("condition"),
        };
        let function_declarator = language.id_for_node_kind("function_declarator", true);
        Table {
            grammar,
            language,
            roles,
            fields,
            default_kw,
            not_params,
            class_types,
            function_declarator,
            go_param_decls,
            missing,
        }
    }

    #[inline]
    pub fn role(&self, kind: u16) -> Role {
        self.roles
            .get(kind as usize)
            .copied()
            .unwrap_or(Role::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_in_every_table_exists_in_its_grammar() {
        for g in ALL_GRAMMARS {
            let t = g.table();
            assert!(t.missing.is_empty(), "{g:?} lacks {:?}", t.missing);
            assert!(t.fields.body.is_some(), "{g:?} has no body field");
        }
    }

    #[test]
    fn a_header_that_shows_cpp_is_parsed_as_cpp() {
        let cpp: [&[u8]; 7] = [
            b"template <typename T> T max(T a, T b);\n",
            b"namespace fmt {\n}\n",
            b"  class Buffer;\n",
            b"struct S {\npublic:\n  int x;\n};\n",
            b"#include <vector>\n",
            b"inline std::size_t n();\n",
            b"#if __has_cpp_attribute(nodiscard)\n#endif\n",
        ];
        for src in cpp {
            let text = String::from_utf8_lossy(src);
            assert_eq!(Grammar::C.for_content("a.h", src), Grammar::Cpp, "{text}");
            assert_eq!(Grammar::C.for_content("a.c", src), Grammar::C, "{text}");
        }
        let c: [&[u8]; 4] = [
            b"#ifdef __cplusplus\nextern \"C\" {\n#endif\nint f(void);\n",
            b"/* the class of errors */\nint classify(int class_);\n",
            b"#include <stdio.h>\n#include <string.h>\n",
            b"constexpr int limit = 4; /* C23 */\n",
        ];
        for src in c {
            let text = String::from_utf8_lossy(src);
            assert_eq!(Grammar::C.for_content("a.h", src), Grammar::C, "{text}");
        }
    }

    #[test]
    fn extensions_map_to_languages() {
        let cases = [
            ("a/b.py", Some(Lang::Python)),
            ("x.mjs", Some(Lang::Javascript)),
            ("x.cjs", Some(Lang::Javascript)),
            ("x.jsx", Some(Lang::Javascript)),
            ("x.tsx", Some(Lang::Typescript)),
            ("x.h", Some(Lang::C)),
            ("x.hh", Some(Lang::Cpp)),
            ("x.hxx", Some(Lang::Cpp)),
            ("Makefile", None),
            ("x.txt", None),
            (".py", Some(Lang::Python)),
        ];
        for (path, want) in cases {
            assert_eq!(Grammar::for_path(path).map(Grammar::lang), want, "{path}");
        }
    }
}
