//! JavaScript and TypeScript test-suite calls (mocha, jest, vitest, jasmine, node:test): which
//! functions are callbacks of `describe`, `it`, `beforeEach`, … and what to call them.
//!
//! Such a callback is a block of tests, or one test, handed to the runner; a `describe` callback
//! holding fifty `it`s is as long as its tests together, which says nothing of how long any of
//! them is. So a function does not count the lines of the test-suite callbacks inside it (the
//! metrics walk subtracts them); each callback is measured on its own lines.

use super::metrics::text;
use tree_sitter::Node;

/// Functions whose callbacks are suites, tests or hooks.
const SUITE_CALLS: &[&str] = &[
    "describe",
    "context",
    "suite",
    "it",
    "test",
    "specify",
    "beforeEach",
    "afterEach",
    "before",
    "after",
    "beforeAll",
    "afterAll",
    "suiteSetup",
    "suiteTeardown",
    // Jasmine's and mocha's skipped (x) and focused (f) forms.
    "xdescribe",
    "xcontext",
    "xit",
    "xtest",
    "xspecify",
    "fdescribe",
    "fit",
];

/// What may follow them: `it.only`, `describe.each(table)`, `test.skipIf(ci)`, `it.concurrent`.
const MODIFIERS: &[&str] = &[
    "only",
    "skip",
    "each",
    "todo",
    "concurrent",
    "sequential",
    "shuffle",
    "fails",
    "failing",
    "skipIf",
    "runIf",
];

/// Bytes of a callee read to recognise it (`describe.each` needs 13).
const CALLEE_BYTES: usize = 64;

/// The name of `function` when it is an argument of a test-suite call: the callee and the
/// call's first argument, as `describe("parser")` or `it.each(…)`. `parent` and `grandparent`
/// are the function's ancestors (`arguments`, `call_expression`).
pub fn callback_name(
    function: Node,
    parent: Option<Node>,
    grandparent: Option<Node>,
    src: &[u8],
) -> Option<String> {
    let (args, call) = (parent?, grandparent?);
    if args.kind() != "arguments" || call.kind() != "call_expression" {
        return None;
    }
    let callee = call.child_by_field_name("function")?;
    let head = suite_callee(src.get(callee.start_byte()..callee.end_byte())?)?;
    let title = args
        .named_child(0)
        .filter(|first| first.id() != function.id())
        .map(|first| text(first, src))
        .unwrap_or_else(|| "…".into());
    Some(format!("{head}({title})"))
}

/// How many blank lines lie right above the line holding `byte`.
pub fn blank_rows_above(src: &[u8], byte: usize) -> usize {
    let before = &src[..byte.min(src.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    if before[line_start..]
        .iter()
        .any(|b| !b.is_ascii_whitespace())
    {
        // Something else of the enclosing function starts this line.
        return 0;
    }
    before[..line_start]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_whitespace())
        .filter(|&&b| b == b'\n')
        .count()
        .saturating_sub(1)
}

/// `describe`, `it.only`, `describe.each` from a callee's source (`describe.each([...])`,
/// ``it.each`a | b` ``, `test.skipIf(ci)` are callees too); `None` for any other callee.
fn suite_callee(text: &[u8]) -> Option<String> {
    let text = &text[..text.len().min(CALLEE_BYTES)];
    let end = text
        .iter()
        .position(|b| matches!(b, b'(' | b'`' | b'<'))
        .unwrap_or(text.len());
    let head: String = std::str::from_utf8(&text[..end])
        .ok()?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut parts = head.split('.');
    let first = parts.next()?;
    (SUITE_CALLS.contains(&first) && parts.all(|p| MODIFIERS.contains(&p))).then_some(head)
}

#[cfg(test)]
mod tests {
    use super::suite_callee;

    #[test]
    fn suite_callees_are_the_runner_calls_and_their_modifiers() {
        for yes in [
            "describe",
            "it",
            "it.only",
            "describe.skip",
            "describe.each([\n[1, 2]])",
            "test.each`a | b`",
            "test.skipIf(process.env.CI)",
            "it . concurrent",
            "beforeEach",
            "xit",
        ] {
            assert!(suite_callee(yes.as_bytes()).is_some(), "{yes}");
        }
        for no in [
            "app.get",
            "describeThing",
            "it.then",
            "router.before",
            "items.each",
            "foo",
            "",
        ] {
            assert_eq!(suite_callee(no.as_bytes()), None, "{no}");
        }
    }
}
