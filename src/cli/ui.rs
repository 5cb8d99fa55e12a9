//! Small helpers for human output: colour only on a terminal (and never with NO_COLOR),
//! status marks, aligned tables.

use crate::model::{RunRecord, Status};
use std::io::IsTerminal;

pub fn color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
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
                .clone()
                .map(|k| format!("killed by {k}"))
                .unwrap_or_default(),
        }
    } else {
        parts.join(", ")
    }
}

pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// One line for a record, as `log` and `run` print it.
pub fn oneline(r: &RunRecord, summary: &str) -> String {
    let cached = if r.cached_from.is_some() {
        dim(" (cached)")
    } else {
        String::new()
    };
    let extra = match (&r.status, &r.error) {
        (Status::Passed | Status::Failed, _) | (_, None) => String::new(),
        (_, Some(e)) => format!(" — {}", first_line(e)),
    };
    format!(
        "{} {} {} {} [{}, {}]{}{}",
        mark(r.status),
        yellow(crate::util::short(&r.commit)),
        r.status,
        summary,
        counts(r),
        duration(r.tests.as_ref().map_or(r.duration_ms, |t| t.duration_ms)),
        cached,
        extra
    )
}

pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Print rows as a left-aligned table with a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
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
    println!("{}", line(header.iter().map(|h| h.to_string()).collect()));
    for row in rows {
        println!("{}", line(row.clone()));
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
