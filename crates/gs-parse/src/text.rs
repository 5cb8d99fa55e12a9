//! Text helpers shared by the output parsers: ANSI stripping, line clean-up, counting phrases
//! ("3 passed, 1 failed") and bounded failure messages.

use gs_model::Failure;

/// Longest failure message kept, in bytes (cut on a char boundary, with "…" appended).
pub const MAX_MESSAGE: usize = 500;
/// Most failures a parser lists (a record keeps the first [`gs_model::MAX_FAILURES`] of them;
/// the rest let a probe's failures be matched with the run's); the counts stay exact past it.
pub const MAX_FAILURES: usize = 1000;
/// A multi-line assertion message (the diff of `assert.deepStrictEqual`) is kept whole up to
/// this many lines and bytes ([`join_block`]).
pub const MAX_BLOCK_LINES: usize = 20;
pub const MAX_BLOCK: usize = 2048;

/// Removes ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \\`, two-byte `ESC x`),
/// turns `\r\n` into `\n` and keeps only what follows the last `\r` of a line (progress redraws).
/// Linear in the input.
pub fn clean(input: &str) -> String {
    if !input.bytes().any(|b| b == 0x1b || b == b'\r') {
        return input.to_string();
    }
    let mut out = String::with_capacity(input.len());
    for (n, raw) in input.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let line = raw.trim_end_matches('\r');
        let line = match line.rfind('\r') {
            Some(p) => &line[p + 1..],
            None => line,
        };
        strip_ansi_into(line, &mut out);
    }
    out
}

/// Appends `line` to `out` without its escape sequences.
fn strip_ansi_into(line: &str, out: &mut String) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut plain_from = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == 0x1b) {
        let esc = i + off;
        out.push_str(&line[plain_from..esc]);
        i = esc + 1;
        match bytes.get(i) {
            Some(b'[') => {
                i += 1;
                while i < bytes.len() && (0x20..=0x3f).contains(&bytes[i]) {
                    i += 1;
                }
                if i < bytes.len() && (0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
            }
            Some(b']') => {
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            Some(&c) if (0x20..0x7f).contains(&c) => {
                // Intermediate bytes (`ESC ( B`), then the final byte.
                while i < bytes.len() && (0x20..=0x2f).contains(&bytes[i]) {
                    i += 1;
                }
                if i < bytes.len() && (0x30..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
            }
            _ => {}
        }
        // A malformed sequence may stop inside a multi-byte char: move to the next boundary.
        while i < bytes.len() && !line.is_char_boundary(i) {
            i += 1;
        }
        plain_from = i;
    }
    out.push_str(&line[plain_from..]);
}

/// Parses a leading unsigned integer: `"12 passed"` -> `(12, " passed")`.
pub fn leading_number(s: &str) -> Option<(u64, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    if end == 0 || end > 18 {
        return None;
    }
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// Parses `"N word words"` into `(N, "word words")` (the words trimmed).
pub fn count_item(item: &str) -> Option<(u64, &str)> {
    let (n, rest) = leading_number(item.trim())?;
    let word = rest.trim();
    if word.is_empty() || !rest.starts_with(' ') {
        return None;
    }
    Some((n, word))
}

/// The number after `prefix` at the start of `s` (`"# pass 3"`, prefix `"# pass "` -> 3), when
/// nothing but blanks follows it.
pub fn number_after(s: &str, prefix: &str) -> Option<u64> {
    let rest = s.strip_prefix(prefix)?;
    let (n, tail) = leading_number(rest.trim_start())?;
    tail.trim().is_empty().then_some(n)
}

/// Cuts `s` to at most `max` bytes on a char boundary, appending "…" when it was cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].trim_end().to_string();
    out.push('…');
    out
}

/// Joins message lines (each trimmed at the end, blank ones dropped) with '\n', bounded by
/// [`MAX_MESSAGE`]. Stops reading lines once the limit is reached.
pub fn join_message<'a, I: IntoIterator<Item = &'a str>>(lines: I) -> String {
    let mut out = String::new();
    for line in lines {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        if out.len() > MAX_MESSAGE {
            break;
        }
    }
    truncate(&out, MAX_MESSAGE)
}

/// The lines of a multi-line message as they were written: their common indentation removed,
/// relative indentation and inner blank lines kept (a diff needs both), leading and trailing blank
/// lines dropped; at most [`MAX_BLOCK_LINES`] lines and [`MAX_BLOCK`] bytes, "…" marking a cut.
pub fn join_block<'a, I: IntoIterator<Item = &'a str>>(lines: I) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut cut = false;
    for line in lines {
        let line = line.trim_end();
        if kept.is_empty() && line.is_empty() {
            continue;
        }
        if kept.len() == MAX_BLOCK_LINES {
            cut = !line.is_empty() || cut;
            continue;
        }
        kept.push(line);
    }
    while kept.last().is_some_and(|l| l.is_empty()) {
        kept.pop();
    }
    let common = kept
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap_or(0);
    let mut out = kept
        .iter()
        .map(|l| l.get(common..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    if cut {
        out.push_str("\n…");
    }
    truncate(&out, MAX_BLOCK)
}

/// Adds a failure unless one with the same name is listed already or the list is full.
/// Linear membership test is fine: the list is bounded by [`MAX_FAILURES`].
pub fn push_failure(list: &mut Vec<Failure>, name: &str, message: &str) {
    let name = name.trim();
    if name.is_empty() || list.len() >= MAX_FAILURES || list.iter().any(|f| f.name == name) {
        return;
    }
    list.push(Failure {
        name: truncate(name, MAX_MESSAGE),
        message: truncate(message.trim(), MAX_BLOCK),
    });
}

/// Number of leading spaces (tabs count as one).
pub fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// Sums two optional counts (None + None = None).
pub fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_csi_osc_and_carriage_returns() {
        assert_eq!(clean("\x1b[31mFAILED\x1b[0m x"), "FAILED x");
        assert_eq!(clean("a\x1b]8;;http://x\x07link\x1b]8;;\x1b\\b"), "alinkb");
        assert_eq!(clean("one\r\ntwo\r\n"), "one\ntwo\n");
        assert_eq!(clean("10%\r50%\r100% done\nnext"), "100% done\nnext");
        assert_eq!(clean("é\x1b[1mü\x1b"), "éü");
        assert_eq!(clean("\x1b[\nline"), "\nline");
        assert_eq!(clean("a\x1b[1;\u{e9}b"), "a\u{e9}b");
        assert_eq!(clean("x\x1b(By"), "xy");
    }

    #[test]
    fn numbers_and_items() {
        assert_eq!(leading_number("12 passed"), Some((12, " passed")));
        assert_eq!(leading_number("x"), None);
        assert_eq!(leading_number("99999999999999999999999"), None);
        assert_eq!(count_item(" 3 failed "), Some((3, "failed")));
        assert_eq!(count_item("3failed"), None);
        assert_eq!(number_after("# pass 3", "# pass"), Some(3));
        assert_eq!(number_after("# pass 3 x", "# pass"), None);
    }

    #[test]
    fn truncation_is_char_safe() {
        let s = "é".repeat(400);
        let t = truncate(&s, MAX_MESSAGE);
        assert!(t.len() <= MAX_MESSAGE);
        assert!(t.ends_with('…'));
        assert_eq!(truncate("short", 10), "short");
    }
}
