//! Which test files a JavaScript runner's log says failed, for phase one's "failed in the
//! parent's run" (jest and mocha name a failure without its file in their summaries): jest's
//! `FAIL file` lines with the `●` failures under each, and mocha's failure list after its
//! counts, each failure with the paths its stack names. The selection matches them to the
//! tree's test files.

use crate::text::clean;

/// Each file jest's log says failed (`FAIL file`), with the tests it lists under it (`● name`;
/// not "Test suite failed to run", which is the file's).
pub fn jest_failed_files(log: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in clean(log).lines() {
        if let Some(f) = line.trim_start().strip_prefix("FAIL ") {
            let f = f.split_whitespace().next().unwrap_or_default().to_string();
            current = Some(match out.iter().position(|(p, _)| *p == f) {
                Some(i) => i,
                None => {
                    out.push((f, Vec::new()));
                    out.len() - 1
                }
            });
        } else if line.trim_start().starts_with("PASS ") {
            current = None;
        } else if let (Some(i), Some(name)) = (current, line.strip_prefix("  ● ")) {
            let name = name.trim().to_string();
            let names = &mut out[i].1;
            if name != "Test suite failed to run" && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    out
}

/// The failures mocha's log lists after its counts, each by its full title (the suites' and
/// the test's, as the output parser names it: `  1) suite` then each further part on a line of
/// its own, the last ending in `:`), with the paths its stack frames name, in order
/// (`at f (test/a.js:3:9)`, `at test/a.js:3:9`, `file://` dropped).
pub fn mocha_failures(log: &str) -> Vec<(String, Vec<String>)> {
    let cleaned = clean(log);
    let lines: Vec<&str> = cleaned.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let header = |l: &str| -> Option<String> {
        let rest = l.strip_prefix("  ")?;
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let title = rest[digits..].strip_prefix(") ")?;
        (digits > 0 && !rest.starts_with(' ')).then(|| title.trim().to_string())
    };
    let path_in = |l: &str| -> Option<String> {
        let at = l.trim().strip_prefix("at ")?;
        let place = match at.rsplit_once(" (") {
            Some((_, p)) => p.trim_end_matches(')'),
            None => at,
        };
        let place = place.strip_prefix("file://").unwrap_or(place);
        let mut parts = place.rsplitn(3, ':');
        let (_, _, path) = (parts.next()?, parts.next()?, parts.next()?);
        Some(path.to_string())
    };
    let mut out = Vec::new();
    let mut listing = false;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        i += 1;
        let t = l.trim();
        if t.ends_with(" failing")
            && t.split(' ')
                .next()
                .is_some_and(|n| n.parse::<u64>().is_ok())
        {
            listing = true;
            continue;
        }
        let Some(first) = header(l).filter(|_| listing) else {
            continue;
        };
        let mut parts = vec![first];
        while let Some(next) = lines.get(i) {
            if indent(next) != 5 + 2 * parts.len() || next.trim().is_empty() {
                break;
            }
            parts.push(next.trim().to_string());
            i += 1;
        }
        let last = parts.pop().unwrap_or_default();
        let Some(last) = last.strip_suffix(':') else {
            continue;
        };
        parts.push(last.to_string());
        let paths = lines[i..]
            .iter()
            .take_while(|l| header(l).is_none())
            .filter_map(|l| path_in(l))
            .collect();
        out.push((parts.join(" "), paths));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jests_failed_files_and_their_tests() {
        let log = "\u{1b}[1mFAIL\u{1b}[22m src/a.test.js\n  ● adds › wrong\n\n    expect(1)\n  ● Test suite failed to run\nPASS src/b.test.js\n  ● not a failure of a\nFAIL src/c.test.js (5 s)\n";
        assert_eq!(
            jest_failed_files(log),
            [
                (
                    "src/a.test.js".to_string(),
                    vec!["adds › wrong".to_string()]
                ),
                ("src/c.test.js".to_string(), vec![]),
            ]
        );
    }

    #[test]
    fn mochas_failures_name_the_paths_of_their_stacks() {
        // Real mocha 12 output (tests/fixtures/output/README.md).
        let log = include_str!("../../../tests/fixtures/output/mocha/some_fail.txt");
        let found = mocha_failures(log);
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
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
        assert!(
            found[0].1.iter().any(|p| p.ends_with("mfail/calc.test.js")),
            "{found:?}"
        );
        // `string thrown`'s stack names no test file, only node's own.
        assert!(
            found[7].1.iter().all(|p| p.starts_with("node:")),
            "{found:?}"
        );
        // express's suite, one line of lib/response.js changed: 14 failures.
        let log = include_str!("../../../tests/fixtures/output/mocha/express_some_fail.txt");
        assert_eq!(mocha_failures(log).len(), 14);
    }
}
