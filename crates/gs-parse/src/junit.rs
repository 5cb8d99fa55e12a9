//! JUnit XML (pytest `--junitxml`, nextest, node's junit reporter, Surefire, …): a minimal
//! hand-written scanner for `<testsuites>`, `<testsuite>`, `<testcase>` and its `<failure>`,
//! `<error>` and `<skipped>` children, with entity decoding. No XML crate, no DTDs.
//!
//! Counts come from the `<testcase>` elements when there are any (a case with `<error>` is an
//! error, else with `<failure>` a failure, else with `<skipped>` skipped); otherwise from the
//! `tests`/`failures`/`errors`/`skipped` attributes of the outermost suites. Failure names are
//! `classname.name` (or `name` without a classname); pytest's are its node ids
//! (`tests/test_a.py::TestX::test_y`), the names its console gives.

use super::text::{join_message, push_failure, MAX_MESSAGE};
use super::xml::{decode_entities, tag_end, Tag};
use gs_model::TestCounts;

#[derive(Default)]
struct Case {
    name: String,
    failure: bool,
    error: bool,
    skipped: bool,
    message: String,
    /// Text of the current `<failure>`/`<error>` when it has no message attribute.
    text: String,
    in_problem: bool,
}

pub fn parse(xml: &str) -> Option<TestCounts> {
    let mut seen_junit = false;
    let (mut passed, mut failed, mut errors, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut cases = 0u64;
    let mut failures = Vec::new();
    // Attribute counts of the outermost <testsuite>s (or <testsuites>), for files without cases.
    let mut suite_depth = 0usize;
    let mut attr_counts = [0u64; 4];
    let mut root_counts: Option<[u64; 4]> = None;
    let mut case: Option<Case> = None;
    // pytest's report: its cases are named by node id, as pytest's console names them.
    let mut pytest = false;

    let mut pos = 0;
    while let Some(off) = xml[pos..].find('<') {
        let lt = pos + off;
        if let Some(c) = case.as_mut().filter(|c| c.in_problem) {
            if c.text.len() < MAX_MESSAGE * 2 {
                c.text.push_str(&decode_entities(&xml[pos..lt]));
            }
        }
        let rest = &xml[lt..];
        if rest.starts_with("<!--") {
            pos = rest.find("-->").map_or(xml.len(), |e| lt + e + 3);
            continue;
        }
        if let Some(body) = rest.strip_prefix("<![CDATA[") {
            let end = body.find("]]>").unwrap_or(body.len());
            if let Some(c) = case.as_mut().filter(|c| c.in_problem) {
                if c.text.len() < MAX_MESSAGE * 2 {
                    c.text.push_str(&body[..end.min(MAX_MESSAGE * 2)]);
                }
            }
            pos = (lt + 9 + end + 3).min(xml.len());
            continue;
        }
        if rest.starts_with("<?") || rest.starts_with("<!") {
            pos = rest.find('>').map_or(xml.len(), |e| lt + e + 1);
            continue;
        }
        let Some(gt) = tag_end(xml, lt) else {
            break;
        };
        pos = gt + 1;
        let tag = Tag::of(&xml[lt + 1..gt]);
        match (tag.name, tag.closing) {
            ("testsuites", false) => {
                seen_junit = true;
                pytest |= tag.attr("name").is_some_and(|n| n == "pytest tests");
                if tag.attr("tests").is_some() {
                    root_counts = Some(suite_counts(&tag));
                }
            }
            ("testsuite", false) => {
                seen_junit = true;
                pytest |= tag.attr("name").is_some_and(|n| n == "pytest");
                if suite_depth == 0 {
                    let c = suite_counts(&tag);
                    for (a, b) in attr_counts.iter_mut().zip(c) {
                        *a += b;
                    }
                }
                if !tag.self_closing {
                    suite_depth += 1;
                }
            }
            ("testsuite", true) => suite_depth = suite_depth.saturating_sub(1),
            ("testcase", false) => {
                seen_junit = true;
                let name = tag.attr("name").unwrap_or_default();
                let class = tag.attr("classname").unwrap_or_default();
                let full = if pytest {
                    gs_model::test_name::pytest_junit(&class, &name, tag.attr("file").as_deref())
                } else if class.is_empty() {
                    name.into_owned()
                } else {
                    format!("{class}.{name}")
                };
                let c = Case {
                    name: full,
                    ..Case::default()
                };
                if tag.self_closing {
                    cases += 1;
                    passed += 1;
                } else {
                    case = Some(c);
                }
            }
            ("testcase", true) => {
                if let Some(c) = case.take() {
                    cases += 1;
                    let message = if c.message.is_empty() {
                        join_message(c.text.lines().take(5))
                    } else {
                        c.message
                    };
                    if c.error {
                        errors += 1;
                        push_failure(&mut failures, &c.name, &message);
                    } else if c.failure {
                        failed += 1;
                        push_failure(&mut failures, &c.name, &message);
                    } else if c.skipped {
                        skipped += 1;
                    } else {
                        passed += 1;
                    }
                }
            }
            ("failure" | "error", false) => {
                if let Some(c) = case.as_mut() {
                    if tag.name == "error" {
                        c.error = true;
                    } else {
                        c.failure = true;
                    }
                    if c.message.is_empty() {
                        let m = tag.attr("message").unwrap_or_default();
                        c.message = join_message(m.lines());
                        c.in_problem = c.message.is_empty() && !tag.self_closing;
                    }
                }
            }
            ("failure" | "error", true) => {
                if let Some(c) = case.as_mut() {
                    c.in_problem = false;
                }
            }
            ("skipped", false) => {
                if let Some(c) = case.as_mut() {
                    c.skipped = true;
                }
            }
            _ => {}
        }
    }
    if !seen_junit {
        return None;
    }
    if cases == 0 {
        let [tests, f, e, s] = if attr_counts[0] > 0 {
            attr_counts
        } else {
            root_counts.unwrap_or(attr_counts)
        };
        let (f, e, s) = (f.min(tests), e.min(tests), s.min(tests));
        return Some(TestCounts {
            passed: Some(tests.saturating_sub(f + e + s)),
            failed: Some(f),
            skipped: Some(s),
            errors: Some(e),
            total: Some(tests),
            failures,
            ..Default::default()
        });
    }
    Some(TestCounts {
        passed: Some(passed),
        failed: Some(failed),
        skipped: Some(skipped),
        errors: Some(errors),
        total: Some(cases),
        failures,
        ..Default::default()
    })
}

/// [tests, failures, errors, skipped] of a suite tag (`disabled` counts as skipped).
fn suite_counts(tag: &Tag) -> [u64; 4] {
    let count = |key| tag.number(key).unwrap_or(0);
    [
        count("tests"),
        count("failures"),
        count("errors"),
        count("skipped") + count("disabled"),
    ]
}

/// A JUnit report printed into the test output itself.
pub fn parse_embedded(text: &str) -> Option<TestCounts> {
    let start = text.find("<testsuite")?;
    let start = text[..start].rfind("<?xml").unwrap_or(start);
    parse(&text[start..])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{counts, pairs};
    use super::*;

    #[test]
    fn attributes_only_cdata_and_entities() {
        let xml = r#"<testsuites><testsuite name="a" tests="5" failures="1" errors="1" skipped="1"/></testsuites>"#;
        let c = parse(xml).unwrap();
        assert_eq!(counts(&c), [Some(2), Some(1), Some(1), Some(1), Some(5)]);
        let xml = "<testsuite><testcase classname='c' name='x &amp; y'><failure><![CDATA[boom <here>\nmore]]></failure></testcase>\
                   <testcase name=\"z\"><skipped/></testcase><!-- <testcase name='ghost'/> --></testsuite>";
        let c = parse(xml).unwrap();
        assert_eq!(counts(&c), [Some(0), Some(1), Some(1), Some(0), Some(2)]);
        assert_eq!(pairs(&c), [("c.x & y", "boom <here>\nmore")]);
        assert_eq!(decode_entities("&lt;&#65;&#x42;&bogus;&"), "<AB&bogus;&");
        assert!(parse("<html><body>no</body></html>").is_none());
    }
}
