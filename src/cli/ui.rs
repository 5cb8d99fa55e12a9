//! Small helpers for human output: colour only on a terminal (and never with NO_COLOR),
//! status marks, aligned tables, counted nouns, paths quoted as git quotes them.

/// A line into the text a renderer builds (`say!(out)` for an empty one); a `String` always
/// takes it. Renderers write into a `String` the command prints, so tests can read it whole.
macro_rules! say {
    ($out:expr) => {
        $out.push('\n')
    };
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        writeln!($out, $($arg)*).expect("a String takes any text")
    }};
}
pub(crate) use say;

use gs_model::{RunRecord, Status};
use std::io::IsTerminal;

/// Whether output is painted: stdout is a terminal and `NO_COLOR` is unset (asked once: every
/// painted word would ask the terminal again).
pub fn color() -> bool {
    static COLOR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOR.get_or_init(|| std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none())
}

fn paint(code: &str, s: &str) -> String {
    if color() {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

pub fn yellow(s: &str) -> String {
    paint("33", s)
}

pub fn dim(s: &str) -> String {
    paint("2", s)
}

pub fn mark(status: Status) -> String {
    match status {
        Status::Passed => paint("32", "✔"),
        Status::Skipped => dim("·"),
        _ => paint("31", "✘"),
    }
}

/// `12 passed, 1 failed, 2 skipped` from a record's test counts.
pub fn counts(r: &RunRecord) -> String {
    let Some(t) = &r.tests else {
        return "no tests".into();
    };
    let mut parts = Vec::new();
    for (n, label) in [
        (t.passed, "passed"),
        (t.failed, "failed"),
        (t.skipped, "skipped"),
        (t.errors, "errors"),
    ] {
        if let Some(n) = n {
            if n > 0 || label == "passed" {
                parts.push(format!("{n} {label}"));
            }
        }
    }
    if parts.is_empty() {
        match t.exit_code {
            Some(c) => format!("exit {c}"),
            None => t
                .killed_by
                .as_ref()
                .map(|k| format!("killed by {}", escape(k.as_str())))
                .unwrap_or_default(),
        }
    } else {
        parts.join(", ")
    }
}

pub fn duration(ms: u64) -> String {
    gs_util::time::duration_text(ms)
}

/// One line for a record, as `log` and `run` print it (the commit's subject and the record's
/// text escaped).
pub fn oneline(r: &RunRecord, summary: &str) -> String {
    let summary = escape(summary);
    // Somebody's report, which nobody this machine trusts signed: never shown as a result.
    if !r.is_evidence() {
        return format!(
            "{} {} {} {summary} — reported by {} as {}, not verified",
            dim("?"),
            yellow(gs_util::short(&r.commit)),
            dim("unverified"),
            escape(r.reporter()),
            r.status
        );
    }
    let cached = if r.cached_from.is_some() {
        dim(" (cached)")
    } else {
        String::new()
    };
    let extra = match (&r.status, &r.error) {
        (Status::Passed | Status::Failed, _) | (_, None) => String::new(),
        (_, Some(e)) => format!(" — {}", escape(first_line(e))),
    };
    if let (Status::Skipped, Some(by)) = (r.status, &r.superseded_by) {
        return format!(
            "{} {} skipped {summary} [superseded by {}]",
            mark(r.status),
            yellow(gs_util::short(&r.commit)),
            escape(gs_util::short(by))
        );
    }
    if let (Status::Skipped, Some(why)) = (r.status, &r.error) {
        return format!(
            "{} {} skipped {summary} — {}",
            mark(r.status),
            yellow(gs_util::short(&r.commit)),
            escape(first_line(why))
        );
    }
    let mut facts = vec![counts(r)];
    facts.extend(unpassed_checks(r));
    let (mark, word) = if r.no_tests() {
        (dim("○"), "no tests".to_string())
    } else {
        (mark(r.status), r.status.to_string())
    };
    // With named checks the tests are one part of the run: its duration is the whole.
    let ms = match &r.tests {
        Some(t) if r.checks.is_empty() => t.duration_ms,
        _ => r.duration_ms,
    };
    facts.push(duration(ms));
    if let Some(rt) = &r.retried {
        let alone = if rt.alone { " alone" } else { "" };
        facts.push(format!("retried {}×{alone} (flaky)", rt.attempts));
    }
    format!(
        "{} {} {} {} [{}]{}{}",
        mark,
        yellow(gs_util::short(&r.commit)),
        word,
        summary,
        facts.join(", "),
        cached,
        extra
    )
}

/// The named checks that did not pass, one phrase each: `lint failed`, `docs timeout (optional)`.
pub fn unpassed_checks(r: &RunRecord) -> Vec<String> {
    r.checks
        .iter()
        .filter(|(_, c)| c.status() != Status::Passed)
        .map(|(name, c)| {
            format!(
                "{} {}{}",
                escape(name),
                c.status(),
                if c.required { "" } else { " (optional)" }
            )
        })
        .collect()
}

pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Print rows as a left-aligned table with a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut out = String::new();
    table_into(&mut out, header, rows);
    print!("{out}");
}

/// [`table`], into the text being rendered.
pub fn table_into(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    say!(
        out,
        "{}",
        line(header.iter().map(|h| h.to_string()).collect())
    );
    for row in rows {
        say!(out, "{}", line(row.clone()));
    }
}

/// The arguments as the user wrote them, for a message.
pub fn revisions(revs: &[String], all: bool) -> String {
    let mut words: Vec<&str> = revs.iter().map(String::as_str).collect();
    if all {
        words.push("--all");
    }
    if words.is_empty() {
        "HEAD".into()
    } else {
        words.join(" ")
    }
}

/// `1 file`, `2 files`, `0 files`: a count with its noun, plural unless the count is one.
pub fn plural(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix("ss") {
        format!("{n} {stem}sses")
    } else if noun.ends_with('y') && !noun.ends_with("ey") {
        format!("{n} {}ies", &noun[..noun.len() - 1])
    } else {
        format!("{n} {noun}s")
    }
}

/// A size for people: `512 B`, `3.4 KiB`, `12.0 MiB`, `1.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Text a commit controls (subjects, test names and messages, output, experiment names and
/// hypotheses, anything read from a note), made safe to print: a control character would let it
/// clear the screen, retitle the window, write the clipboard or redraw a ✘ line as ✔. Newlines
/// and tabs stay (blocks of output keep their lines); every other control character is shown as
/// `cat -v` shows it: C0 in caret notation (ESC `^[`, CR `^M`), DEL `^?`, C1 as `M-` and the
/// caret form of the byte less 0x80 (CSI U+009B `M-^[`); the bidirectional overrides and
/// isolates, which reorder what is shown, as `<U+202E>`.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    let bidi = |c: char| matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let plain = |c: char| c == '\n' || c == '\t' || !(c.is_control() || bidi(c));
    if s.chars().all(plain) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if plain(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            c if (c as u32) < 0xa0 => {
                out.push_str(if c as u32 == 0x9f { "M-^?" } else { "M-^" });
                if c as u32 != 0x9f {
                    out.push(char::from(c as u8 - 0x80 + 0x40));
                }
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    out.into()
}

/// A path as git prints it with `core.quotePath` (its default): one with control characters, `"`,
/// `\\` or bytes outside ASCII is put in double quotes with C escapes (`\\t`, `\\n`, `\\"`,
/// `\\\\`) and octal bytes (`é` is `\\303\\251`); any other path is printed as it is.
pub fn quote_path(path: &str) -> std::borrow::Cow<'_, str> {
    let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f;
    if !path.bytes().any(needs) {
        return path.into();
    }
    let mut out = String::with_capacity(path.len() + 2);
    out.push('"');
    for b in path.bytes() {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b if needs(b) => out.push_str(&format!("\\{b:03o}")),
            b => out.push(char::from(b)),
        }
    }
    out.push('"');
    out.into()
}

/// The summary line of `git diff --stat`: ` 2 files changed, 3 insertions(+), 1 deletion(-)`,
/// leaving out a zero count of insertions or deletions as git does.
pub fn diffstat_summary(files: u64, insertions: u64, deletions: u64) -> String {
    let mut out = format!(" {} changed", plural(files, "file"));
    if insertions > 0 || deletions == 0 {
        out.push_str(&format!(", {}(+)", plural(insertions, "insertion")));
    }
    if deletions > 0 || insertions == 0 {
        out.push_str(&format!(", {}(-)", plural(deletions, "deletion")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(12 * 1024 * 1024), "12.0 MiB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }

    #[test]
    fn counts_with_their_noun() {
        assert_eq!(plural(1u64, "file"), "1 file");
        assert_eq!(plural(0usize, "file"), "0 files");
        assert_eq!(plural(2u32, "class"), "2 classes");
        assert_eq!(plural(3u64, "dependency"), "3 dependencies");
        assert_eq!(plural(1u64, "potential issue"), "1 potential issue");
    }

    #[test]
    fn paths_are_quoted_like_git() {
        assert_eq!(quote_path("src/a.py"), "src/a.py");
        assert_eq!(quote_path("a b/c.py"), "a b/c.py");
        assert_eq!(quote_path("tab\there"), "\"tab\\there\"");
        assert_eq!(quote_path("new\nline"), "\"new\\nline\"");
        assert_eq!(quote_path("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(quote_path("back\\slash"), "\"back\\\\slash\"");
        assert_eq!(quote_path("café.py"), "\"caf\\303\\251.py\"");
        assert_eq!(quote_path("bell\u{7}\u{7f}"), "\"bell\\a\\177\"");
        assert_eq!(quote_path("esc\u{1b}"), "\"esc\\033\"");
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(
            escape("fix: parser (#12) — ünïcode ✔"),
            "fix: parser (#12) — ünïcode ✔"
        );
        assert_eq!(escape("a\n\tb"), "a\n\tb");
        assert_eq!(escape("\x1b[2J\x1b]0;title\x07"), "^[[2J^[]0;title^G");
        assert_eq!(escape("✘ bad\r\x1b[K✔ good"), "✘ bad^M^[[K✔ good");
        assert_eq!(escape("nul\0 del\x7f"), "nul^@ del^?");
        assert_eq!(escape("csi\u{9b}2J \u{80}\u{9f}"), "csiM-^[2J M-^@M-^?");
        assert_eq!(escape("a\u{202e}b"), "a<U+202E>b");
        assert!(!escape("\x1b\u{9b}\u{7}\r").chars().any(|c| c.is_control()));
    }

    #[test]
    fn diffstat_summary_like_git() {
        assert_eq!(diffstat_summary(1, 1, 0), " 1 file changed, 1 insertion(+)");
        assert_eq!(
            diffstat_summary(2, 0, 3),
            " 2 files changed, 3 deletions(-)"
        );
        assert_eq!(
            diffstat_summary(3, 2, 1),
            " 3 files changed, 2 insertions(+), 1 deletion(-)"
        );
        assert_eq!(
            diffstat_summary(1, 0, 0),
            " 1 file changed, 0 insertions(+), 0 deletions(-)"
        );
    }
}
