//! A commit's page: result, failures, the log paged and searchable, analysis against the
//! parent, the patch coloured.

use super::commits::ref_cell;
use super::*;
use crate::app::{
    analysis::metrics, records::commits, records::history, records::logs, records::results,
};
use crate::app::{AppError, Repo};
use crate::http::api::commit_of;
use axum::extract::{Path, Query};
use gs_util::time::duration_text;

#[derive(Deserialize)]
pub struct CommitQuery {
    offset: Option<usize>,
    grep: Option<String>,
}

/// How many log lines a page shows.
const LOG_PAGE: usize = 200;
/// How much of a patch the page shows.
const MAX_PATCH: usize = 512 * 1024;

pub async fn commit_page(
    State(web): St,
    headers: HeaderMap,
    Path((key, sha)): Path<(String, String)>,
    Query(q): Query<CommitQuery>,
) -> Response {
    let caller = match signed_in(&web, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let grep = q.grep.clone().filter(|g| !g.is_empty());
    let offset = q.offset.unwrap_or(0);
    let g2 = grep.clone();
    let data = blocking(move |ctx| {
        let (repo, row) = repository(ctx, &key)?;
        let c = commit_of(&repo, &sha)?;
        let info = gs_git::commit_info(&repo, c).map_err(AppError::from)?;
        let mut reader = results::NoteReader::new(&repo)?;
        let record = results::find_evidence(Repo::new(ctx, &repo, &row), &mut reader, c)?;
        let page = record.as_ref().and_then(|r| {
            logs::read(
                ctx,
                &row,
                r,
                &logs::PageRequest {
                    offset,
                    limit: LOG_PAGE,
                    grep: g2.clone(),
                    check: None,
                },
                |_| true,
            )
            .ok()
        });
        let delta = match info.parents.first() {
            Some(p) => Some(metrics::diff(
                &metrics::of(ctx, &repo, *p, None)?,
                &metrics::of(ctx, &repo, c, None)?,
            )),
            None => None,
        };
        let (patch, cut) = history::patch(&repo, c, MAX_PATCH)?;
        let branches = commits::branch_names(&repo)?;
        Ok((row, info, record, page, delta, patch, cut, branches))
    })
    .await;
    let (row, info, record, page, delta, patch, cut, branches) = match data {
        Ok(d) => d,
        Err(e) => return error_page(Some(&caller), e),
    };
    let id = info.id.to_string();
    let link = |offset: usize| {
        let mut u = format!("/c/{}/{id}?offset={offset}", row.name);
        if let Some(g) = &grep {
            u.push_str("&grep=");
            u.push_str(&urlencode(g));
        }
        u
    };
    let body = html! {
        h1 { a href=(format!("/r/{}", row.name)) { (row.name) } " · " span.mono { (short(&id)) } " " (info.summary) }
        div.card {
            p { "Status: " (status_cell(record.as_ref())) }
            @if let Some(r) = &record {
                p.muted { "ran " (when(&r.started_at, true)) " in " (duration_text(r.duration_ms)) " · started " (words::trigger(r.trigger.as_str()))
                    " · branch " (ref_cell(&row.name, r, &branches))
                    @if let Some(c) = &r.cached_from { " · same tree and config as " span.mono { (short(c)) } } }
                @if let Some(e) = &r.error { div.flash.bad { (e) } }
                @if let Some(t) = &r.tests {
                    p {
                        span.pass { (t.passed.unwrap_or(0)) " passed" } ", "
                        span.fail { (t.failed.unwrap_or(0)) " failed" } ", "
                        (t.skipped.unwrap_or(0)) " skipped, " (t.errors.unwrap_or(0)) " errors"
                        @if let Some(k) = &t.killed_by { " · stopped by " strong { (words::killed_by(k)) } }
                    }
                    @if !t.failures.is_empty() {
                        h2 { "Failures" }
                        @for f in &t.failures {
                            details open[t.failures.len() <= 5] {
                                summary.fail { (f.name) }
                                pre { (f.message) }
                            }
                        }
                    }
                }
                @if !r.checks.is_empty() {
                    h2 { "Checks" }
                    table { thead { tr { th { "check" } th { "status" } th { "exit" } th.num { "duration" } } }
                        tbody { @for (name, c) in r.checks.iter() { tr {
                            td.mono { (name) @if !c.required { " (optional)" } }
                            td class=(if c.status().is_success() { "pass" } else { "fail" }) { (words::status(c.status().as_str())) }
                            td { (c.run.exit_code.map_or("–".to_string(), |x| x.to_string())) }
                            td.num { (duration_text(c.run.duration_ms)) } } } } }
                }
            } @else {
                p.muted { "No result yet. Queue it with " code { "git sandbox run " (short(&id)) } " or POST /api/v1/runs." }
            }
        }
        @if let Some(d) = &delta {
            h2 { "Analysis against the parent" }
            div.card.scroll {
                p {
                    "functions " (format!("{:+}", d.totals.functions)) " · code lines " (format!("{:+}", d.totals.code_lines))
                    " · mean complexity " (format!("{:+.2}", d.totals.complexity_mean)) " · potential issues " (format!("{:+}", d.totals.potential_issues))
                }
                @if !d.functions_added.is_empty() || !d.complexity_up.is_empty() || !d.complexity_down.is_empty() || !d.new_issues.is_empty() {
                    table {
                        thead { tr { th { "change" } th { "where" } th.num { "complexity" } } }
                        tbody {
                            @for f in d.functions_added.iter().take(20) { tr { td.pass { "added " (f.name) } td.mono { (f.path) ":" (f.line) } td.num { (f.complexity) } } }
                            @for f in d.functions_removed.iter().take(20) { tr { td.muted { "removed " (f.name) } td.mono { (f.path) } td.num { (f.complexity) } } }
                            @for c in d.complexity_up.iter().take(20) { tr { td.fail { "more complex " (c.name) } td.mono { (c.path) ":" (c.line) } td.num { (c.from) " → " (c.to) } } }
                            @for c in d.complexity_down.iter().take(20) { tr { td.pass { "simpler " (c.name) } td.mono { (c.path) ":" (c.line) } td.num { (c.from) " → " (c.to) } } }
                            @for i in d.new_issues.iter().take(20) { tr { td.fail { "new: " (i.kind) } td.mono { (i.path) ":" (i.line) } td { (i.message) } } }
                        }
                    }
                }
            }
        }
        @if let Some(p) = &page {
            h2 #log { "Log" }
            form method="get" action=(format!("/c/{}/{id}#log", row.name)) {
                input type="text" name="grep" value=(grep.as_deref().unwrap_or("")) placeholder="only lines containing…";
                " " button type="submit" { "search" }
            }
            div.pager {
                span.muted { (p.total_lines) " lines" @if p.output_truncated { " (cut at the output limit)" } }
                @if offset > 0 { a #prev href=(format!("{}#log", link(offset.saturating_sub(LOG_PAGE)))) { "← earlier" } }
                @if let Some(n) = p.next_offset { a #next href=(format!("{}#log", link(n))) { "later →" } }
            }
            pre.log {
                @for l in &p.lines { span.n { (l.n) } (l.text) "\n" }
            }
        }
        h2 { "Changes" }
        pre.diff { (render_patch(&patch)) }
        @if cut { p.muted { "The patch is longer; see " code { "git show " (short(&id)) } "." } }
    };
    layout(&format!("{} {}", row.name, short(&id)), Some(&caller), body).into_response()
}

/// A patch as HTML: file headers, hunk headers, added and removed lines marked, and the code in
/// them coloured (keywords, strings, comments).
fn render_patch(patch: &str) -> Markup {
    html! {
        @for line in patch.lines() {
            @if line.starts_with("diff --git") || line.starts_with("+++ ") || line.starts_with("--- ") || line.starts_with("index ") {
                span.file { (line) } "\n"
            } @else if line.starts_with("@@") {
                span.hunk { (line) } "\n"
            } @else if let Some(code) = line.strip_prefix('+') {
                span.add { "+" (highlight(code)) } "\n"
            } @else if let Some(code) = line.strip_prefix('-') {
                span.del { "-" (highlight(code)) } "\n"
            } @else {
                (highlight(line)) "\n"
            }
        }
    }
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "do",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "static",
    "struct",
    "switch",
    "this",
    "throw",
    "trait",
    "True",
    "False",
    "true",
    "try",
    "type",
    "use",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// Colour one line of code: comments (`#`, `//`), strings ("…", '…') and keywords. Escaping is
/// maud's: every piece is text.
fn highlight(code: &str) -> Markup {
    let mut parts: Vec<(&'static str, String)> = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, parts: &mut Vec<(&'static str, String)>| {
        if !plain.is_empty() {
            parts.push(("", std::mem::take(plain)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '#' || (c == '/' && chars.get(i + 1) == Some(&'/')) {
            flush(&mut plain, &mut parts);
            parts.push(("com", chars[i..].iter().collect()));
            break;
        }
        if c == '"' || c == '\'' {
            flush(&mut plain, &mut parts);
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            parts.push(("str", chars[i..end].iter().collect()));
            i = end;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if KEYWORDS.contains(&word.as_str()) {
                flush(&mut plain, &mut parts);
                parts.push(("kw", word));
            } else {
                plain.push_str(&word);
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut parts);
    html! {
        @for (class, text) in &parts {
            @if class.is_empty() { (text) } @else { span class=(class) { (text) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_coloured_and_escaped() {
        let html = highlight(r#"if x < 1: return "<b>" # done"#).into_string();
        assert!(html.contains(r#"<span class="kw">if</span>"#), "{html}");
        assert!(html.contains("x &lt; 1"), "{html}");
        assert!(
            html.contains(r#"<span class="str">&quot;&lt;b&gt;&quot;</span>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="com"># done</span>"#),
            "{html}"
        );
    }
}
