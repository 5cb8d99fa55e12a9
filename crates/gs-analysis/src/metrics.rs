//! The metrics walk: one pass over a syntax tree that finds functions (with complexity, length and
//! parameters), classes, comment and string extents, and syntax errors.

use super::lang::{Grammar, Role, Table};
use super::suites;
use super::{Function, SyntaxError};
use tree_sitter::{Node, Tree};

/// Syntax errors kept per file (all are counted).
const MAX_ERRORS_KEPT: usize = 20;
const MAX_NAME_BYTES: usize = 120;

/// What one walk over a tree found.
#[derive(Debug, Default)]
pub struct Walked {
    pub functions: Vec<Function>,
    pub classes: u64,
    /// Byte ranges of comments (and docstrings), in document order, not overlapping.
    pub comments: Vec<(usize, usize)>,
    /// Row ranges of string literals that span lines: each of their lines is code.
    pub strings: Vec<(usize, usize)>,
    pub errors: Vec<SyntaxError>,
    pub error_count: u64,
    /// The parse was abandoned (see `parse_within`): there is no tree, only one error.
    pub gave_up: bool,
}

struct Frame {
    depth: usize,
    index: usize,
    complexity: i64,
    /// Rows of test-suite callbacks inside this function (see `suites`): not its own lines.
    excluded_rows: u64,
    /// The last row of the last callback excluded (callbacks on one row count it once).
    excluded_until: Option<usize>,
}

impl Frame {
    fn exclude(&mut self, start: usize, end: usize) {
        let from = match self.excluded_until {
            Some(until) if until >= start => until + 1,
            _ => start,
        };
        if end >= from {
            self.excluded_rows += (end - from) as u64 + 1;
            self.excluded_until = Some(end);
        }
    }
}

pub fn walk(table: &Table, tree: &Tree, src: &[u8]) -> Walked {
    let mut out = Walked::default();
    let check_errors = tree.root_node().has_error();
    let mut cursor = tree.walk();
    // Ancestors of the cursor's node: the parent of a nameless function names it.
    let mut ancestors: Vec<Node> = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    // Depth of the ERROR node we are inside: nested errors are one error.
    let mut error_depth: Option<usize> = None;
    let fields = table.fields;
    let suites = matches!(
        table.grammar,
        Grammar::Javascript | Grammar::Typescript | Grammar::Tsx
    );
    loop {
        let node = cursor.node();
        let depth = ancestors.len();
        let mut descend = true;
        let mut delta = 0i64;
        match table.role(node.kind_id()) {
            Role::Other => {}
            Role::Function => {
                if has_field(node, fields.body) {
                    let start = node.start_position().row;
                    let end = node.end_position().row;
                    let parent = ancestors.last().copied();
                    let grandparent = ancestors.len().checked_sub(2).map(|i| ancestors[i]);
                    let suite_name = suites
                        .then(|| suites::callback_name(node, parent, grandparent, src))
                        .flatten();
                    if let (Some(call), Some(enclosing)) = (
                        grandparent.filter(|_| suite_name.is_some()),
                        frames.last_mut(),
                    ) {
                        // The whole call, and the blank lines that set it apart.
                        let above = suites::blank_rows_above(src, call.start_byte());
                        let first = call.start_position().row.saturating_sub(above);
                        enclosing.exclude(first, call.end_position().row);
                    }
                    out.functions.push(Function {
                        name: suite_name.unwrap_or_else(|| function_name(table, node, parent, src)),
                        line: start as u64 + 1,
                        lines: (end - start) as u64 + 1,
                        complexity: 1,
                        parameters: count_parameters(table, node, src),
                    });
                    frames.push(Frame {
                        depth,
                        index: out.functions.len() - 1,
                        complexity: 1,
                        excluded_rows: 0,
                        excluded_until: None,
                    });
                }
            }
            Role::Class => {
                if has_field(node, fields.body) {
                    out.classes += 1;
                }
            }
            Role::TypeSpec => {
                let ty = fields.type_.and_then(|f| node.child_by_field_id(f));
                if ty.is_some_and(|t| table.class_types.contains(&t.kind_id())) {
                    out.classes += 1;
                }
            }
            Role::Decision => delta = 1,
            Role::Logical => {
                if fields.operator.is_some()
                    && cursor.field_id().map(|f| f.get()) == fields.operator
                {
                    delta = 1;
                }
            }
            Role::Case => {
                let first = node.child(0).map(|c| c.kind_id());
                if !first.is_some_and(|k| table.default_kw.contains(&k)) {
                    delta = 1;
                }
            }
            Role::Match => delta = -1,
            Role::Guard => {
                if has_field(node, fields.condition) {
                    delta = 1;
                }
            }
            Role::Comment => {
                push_comment(&mut out.comments, node.start_byte(), node.end_byte());
                descend = false;
            }
            Role::Str => {
                let (start, end) = (node.start_position().row, node.end_position().row);
                if end > start {
                    out.strings.push((start, end));
                }
            }
            Role::ExprStatement => {
                if is_lone_string(table, node) {
                    push_comment(&mut out.comments, node.start_byte(), node.end_byte());
                    descend = false;
                }
            }
        }
        if delta != 0 {
            if let Some(frame) = frames.last_mut() {
                frame.complexity += delta;
            }
        }
        if check_errors {
            if node.is_error() {
                if error_depth.is_none() {
                    record_error(&mut out, node.start_position().row, "syntax error".into());
                    error_depth = Some(depth);
                }
            } else if node.is_missing() {
                let message = format!("syntax error: missing `{}`", node.kind());
                record_error(&mut out, node.start_position().row, message);
            }
        }
        if descend && cursor.goto_first_child() {
            ancestors.push(node);
            continue;
        }
        // Leave this node, and every ancestor whose last child it was.
        loop {
            let depth = ancestors.len();
            if frames.last().is_some_and(|f| f.depth == depth) {
                if let Some(frame) = frames.pop() {
                    let f = &mut out.functions[frame.index];
                    f.complexity = frame.complexity.max(1) as u64;
                    f.lines = f.lines.saturating_sub(frame.excluded_rows).max(1);
                }
            }
            if error_depth == Some(depth) {
                error_depth = None;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return out;
            }
            ancestors.pop();
        }
    }
}

fn has_field(node: Node, field: Option<u16>) -> bool {
    field.is_some_and(|f| node.child_by_field_id(f).is_some())
}

fn push_comment(comments: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    // Error recovery can nest extras oddly; keep the list sorted and disjoint.
    match comments.last() {
        Some(&(_, last_end)) if start < last_end => {}
        _ => comments.push((start, end)),
    }
}

fn record_error(out: &mut Walked, row: usize, message: String) {
    out.error_count += 1;
    if out.errors.len() < MAX_ERRORS_KEPT {
        out.errors.push(SyntaxError {
            line: row as u64 + 1,
            message,
        });
    }
}

/// A Python statement that is only a string literal: a docstring, or a string used as a comment.
fn is_lone_string(table: &Table, node: Node) -> bool {
    node.named_child_count() == 1
        && node
            .named_child(0)
            .is_some_and(|c| table.role(c.kind_id()) == Role::Str)
}

pub(crate) fn text(node: Node, src: &[u8]) -> String {
    let bytes = src.get(node.start_byte()..node.end_byte()).unwrap_or(&[]);
    let mut cut = bytes.len().min(MAX_NAME_BYTES);
    // Never cut inside a UTF-8 sequence (lossy decoding would still be safe, but ugly).
    while cut > 0 && cut < bytes.len() && (bytes[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    let s = String::from_utf8_lossy(&bytes[..cut]);
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The C/C++ `function_declarator` under a definition (through pointer and reference declarators).
fn function_declarator<'t>(table: &Table, node: Node<'t>) -> Option<Node<'t>> {
    let field = table.fields.declarator?;
    let mut cur = node.child_by_field_id(field)?;
    for _ in 0..16 {
        if cur.kind_id() == table.function_declarator {
            return Some(cur);
        }
        cur = cur.child_by_field_id(field)?;
    }
    None
}

fn function_name(table: &Table, node: Node, parent: Option<Node>, src: &[u8]) -> String {
    let f = table.fields;
    if let Some(name) = f.name.and_then(|id| node.child_by_field_id(id)) {
        return text(name, src);
    }
    if let Some(decl) = function_declarator(table, node) {
        if let Some(name) = f.declarator.and_then(|id| decl.child_by_field_id(id)) {
            return text(name, src);
        }
    }
    let Some(parent) = parent else {
        return "(anonymous)".into();
    };
    let field = match parent.kind() {
        "variable_declarator" => f.name,
        "pair" => f.key,
        "assignment_expression" => f.left,
        "public_field_definition" | "field_definition" => f.property.or(f.name),
        _ => None,
    };
    match field.and_then(|id| parent.child_by_field_id(id)) {
        Some(n) => text(n, src),
        None => "(anonymous)".into(),
    }
}

fn count_parameters(table: &Table, node: Node, src: &[u8]) -> u64 {
    let f = table.fields;
    let params = match table.grammar {
        Grammar::C | Grammar::Cpp => function_declarator(table, node)
            .and_then(|d| f.parameters.and_then(|id| d.child_by_field_id(id))),
        _ => f.parameters.and_then(|id| node.child_by_field_id(id)),
    };
    let Some(params) = params else {
        // A JS arrow function with one bare parameter: `x => x + 1`.
        return u64::from(has_field(node, f.parameter));
    };
    if matches!(table.grammar, Grammar::C | Grammar::Cpp)
        && src.get(params.start_byte()..params.end_byte()) == Some(b"(void)")
    {
        return 0;
    }
    let mut count = 0;
    let mut cursor = params.walk();
    for child in params.named_children(&mut cursor) {
        let kind = child.kind_id();
        if table.not_params.contains(&kind) || child.is_extra() {
            continue;
        }
        if table.go_param_decls.contains(&kind) {
            // `a, b int` declares two parameters; `int` (a bare type) declares one.
            let names = f.name.and_then(std::num::NonZeroU16::new).map_or(0, |id| {
                let mut c = child.walk();
                child.children_by_field_id(id, &mut c).count() as u64
            });
            count += names.max(1);
        } else {
            count += 1;
        }
    }
    count
}
