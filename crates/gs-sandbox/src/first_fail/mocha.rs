//! mocha's first failure, as its reporters print it: the spec reporter's (the default) numbered
//! line as a test fails (`    1) adds wrong`, indented beneath its suites' titles), the dot
//! reporter's `!`, TAP's `not ok 4 calc adds wrong`; and the list of failures after the counts
//! (`  1) calc` then `       adds wrong:`), which names each as the output parser does: the
//! suites' titles and the test's, joined by spaces.

use super::{Found, Partial, Seen, State};

/// What the watcher remembers of mocha's output.
#[derive(Default)]
pub(super) struct Mocha {
    /// The titles of the suites the spec reporter is in, outermost first.
    suites: Vec<String>,
    /// The counts were printed: the tests have run.
    counted: bool,
    /// The list of failures began (`N failing`).
    listing: bool,
    /// The parts read so far of the title of the failure being listed.
    title: Vec<String>,
}

pub(super) fn line(line: &str, state: &mut State) -> Seen {
    let m = &mut state.mocha;
    let t = line.trim_end();
    let body = t.trim_start();
    let indent = t.len() - body.len();
    if body.is_empty() {
        return Seen::Nothing;
    }
    if let Some(name) = tap_failure(t) {
        return Seen::Found(Found::Failing(Some(name)));
    }
    if let Some(word) = count(body) {
        m.counted = true;
        m.listing |= word == "failing";
        return Seen::Nothing;
    }
    if m.listing {
        return listed(m, indent, body);
    }
    if m.counted {
        return Seen::Nothing;
    }
    if let Some(Partial::Found(f)) = partial(t) {
        return Seen::Found(f);
    }
    if indent < 2 || !indent.is_multiple_of(2) {
        return Seen::Nothing;
    }
    // A test at depth d (in d suites) is indented 2d + 2; a suite's title, 2d.
    if let Some(title) = numbered(body) {
        let depth = (indent / 2 - 1).min(m.suites.len());
        let mut parts = m.suites[..depth].to_vec();
        parts.push(title.to_string());
        return Seen::Found(Found::Failing(Some(parts.join(" "))));
    }
    if !body.starts_with(['✔', '✓', '-']) {
        m.suites.truncate(indent / 2 - 1);
        m.suites.push(body.to_string());
    }
    Seen::Nothing
}

/// The dot reporter's line so far: a failure is a `!` among its marks.
pub(super) fn partial(line: &str) -> Option<Partial> {
    let marks = line.trim();
    let all_marks = !marks.is_empty() && marks.chars().all(|c| ".,!․".contains(c));
    (all_marks && marks.contains('!')).then_some(Partial::Found(Found::Failing(None)))
}

/// A failure of the list after the counts: `  1) suite` (indent 2), each further part of its
/// title indented two more from 7, the last ending in `:`.
fn listed(m: &mut Mocha, indent: usize, body: &str) -> Seen {
    let part = match numbered(body) {
        Some(first) if indent == 2 => {
            m.title.clear();
            first
        }
        _ if !m.title.is_empty() && indent == 5 + 2 * m.title.len() => body,
        _ => {
            m.title.clear();
            return Seen::Nothing;
        }
    };
    match part.strip_suffix(':') {
        Some(last) => {
            m.title.push(last.to_string());
            let name = m.title.join(" ");
            m.title.clear();
            Seen::Found(Found::Failing(Some(name)))
        }
        None => {
            m.title.push(part.to_string());
            Seen::Nothing
        }
    }
}

/// `3) title` → `title`.
fn numbered(body: &str) -> Option<&str> {
    let digits = body.chars().take_while(char::is_ascii_digit).count();
    let title = body[digits..].strip_prefix(") ")?.trim();
    (digits > 0 && !title.is_empty()).then_some(title)
}

/// `2 passing (14ms)`, `2 pending`, `8 failing` → the word.
fn count(body: &str) -> Option<&str> {
    let (n, rest) = body.split_once(' ')?;
    n.parse::<u64>().ok()?;
    let word = rest.split(' ').next()?;
    let ok = match word {
        "passing" => rest.ends_with(')') && rest.contains(" ("),
        "pending" | "failing" => rest == word,
        _ => false,
    };
    ok.then_some(word)
}

/// TAP's `not ok 4 calc adds wrong` (mocha's titles, less a `# SKIP` directive).
fn tap_failure(line: &str) -> Option<String> {
    let rest = line.strip_prefix("not ok ")?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let title = rest[digits..].strip_prefix(' ')?;
    let title = title.split(" # ").next().unwrap_or(title).trim();
    (digits > 0 && !title.is_empty()).then(|| title.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure `text` names, line by line.
    fn names(text: &str) -> Vec<String> {
        let mut state = State::default();
        text.lines()
            .filter_map(
                |l| match line(&super::super::plain(l.as_bytes()), &mut state) {
                    Seen::Found(Found::Failing(Some(n))) => Some(n),
                    _ => None,
                },
            )
            .collect()
    }

    #[test]
    fn live_lines_name_each_failure_as_the_list_after_the_counts_does() {
        // Real mocha 12 output (tests/fixtures/output/README.md): nested suites, a hook.
        let text = include_str!("../../../../tests/fixtures/output/mocha/some_fail.txt");
        let all = names(text);
        let (live, listed) = all.split_at(all.len() / 2);
        assert_eq!(live, listed);
        assert_eq!(
            live,
            [
                "calc adds wrong",
                "calc async rejects",
                "calc nested throws",
                "calc nested deep equal",
                "with hook \"before each\" hook for \"never runs\"",
                "chai equal",
                "chai deep",
                "chai string thrown",
            ]
        );
        // express's suite: suites four deep, titles with colons.
        let express = include_str!("../../../../tests/fixtures/output/mocha/express_some_fail.txt");
        let all = names(express);
        let (live, listed) = all.split_at(all.len() / 2);
        assert_eq!((live.len(), live), (14, listed));
        // A test's own output after the counts is not a failure.
        assert_eq!(
            names("  1 passing (3ms)\n\n    2) printed\n"),
            Vec::<String>::new()
        );
        assert_eq!(names("  2) top level\n"), ["top level"]);
    }
}
