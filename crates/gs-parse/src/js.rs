//! Jest ("Tests:       3 failed, 1 skipped, 2 passed, 6 total", `● a › b` failure headers) and
//! Vitest ("Tests  3 failed | 2 passed | 1 skipped (6)", ` FAIL  file > a > b` headers).
//!
//! todo counts as skipped. A test file that failed to load (jest "Test suite failed to run",
//! vitest "Failed Suites") counts as one error, named by the file; vitest's unhandled "Errors"
//! count as errors too. The total is the one the runner prints (suite errors are outside it).

use std::collections::HashSet;

use super::text::{add_opt, count_item, join_message, push_failure};
use gs_model::TestCounts;

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    skipped: u64,
    total: Option<u64>,
}

fn add_item(t: &mut Totals, n: u64, word: &str) {
    match word {
        "passed" | "expected fail" => t.passed += n,
        "failed" => t.failed += n,
        "skipped" | "todo" | "pending" => t.skipped += n,
        "total" => t.total = Some(t.total.unwrap_or(0) + n),
        _ => {}
    }
}

/// A code frame line (`  > 3 | code`, `    4| code`, `      |   ^`).
fn is_code_frame(t: &str) -> bool {
    let t = t.trim_start().trim_start_matches('>').trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    t[digits..].trim_start().starts_with('|')
}

/// The first lines of a failure's explanation, up to the code frame or stack.
fn message_after(lines: &[&str], start: usize, is_header: impl Fn(&str) -> bool) -> String {
    let mut picked = Vec::new();
    for line in lines.iter().skip(start).take(40) {
        let t = line.trim();
        if is_header(line) || is_code_frame(line) || t.starts_with("at ") || t.starts_with('❯') {
            break;
        }
        if t.starts_with('⎯') {
            break;
        }
        if !t.is_empty() {
            picked.push(t);
            if picked.len() == 8 {
                break;
            }
        }
    }
    join_message(picked)
}

fn jest_header(line: &str) -> Option<&str> {
    line.strip_prefix("  ● ").map(str::trim)
}

pub fn parse_jest(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut totals: Option<Totals> = None;
    let mut failures = Vec::new();
    let mut suite_errors: HashSet<String> = HashSet::new();
    let mut file = String::new();
    let is_header = |l: &str| {
        jest_header(l).is_some()
            || l.trim_start().starts_with("FAIL ")
            || l.trim_start().starts_with("PASS ")
    };

    for (i, line) in lines.iter().enumerate() {
        if let Some(list) = line.strip_prefix("Tests:") {
            let mut t = Totals::default();
            let mut ok = false;
            for item in list.split(", ") {
                if let Some((n, word)) = count_item(item) {
                    add_item(&mut t, n, word);
                    ok = true;
                }
            }
            if ok && t.total.is_some() {
                let sum = totals.get_or_insert_with(Totals::default);
                sum.passed += t.passed;
                sum.failed += t.failed;
                sum.skipped += t.skipped;
                sum.total = add_opt(sum.total, t.total);
            }
            continue;
        }
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("FAIL ") {
            file = rest.trim().to_string();
            continue;
        }
        if let Some(name) = jest_header(line) {
            let msg = message_after(&lines, i + 1, is_header);
            if name == "Test suite failed to run" {
                if !file.is_empty() {
                    suite_errors.insert(file.clone());
                    push_failure(&mut failures, &file, &msg);
                }
            } else {
                push_failure(&mut failures, name, &msg);
            }
        }
    }
    let t = totals?;
    Some(TestCounts {
        passed: Some(t.passed),
        failed: Some(t.failed),
        skipped: Some(t.skipped),
        errors: Some(suite_errors.len() as u64),
        total: t.total,
        failures,
        ..Default::default()
    })
}

/// A vitest ` FAIL ` header: its project (`|name|`), the file as printed (relative to the
/// project), the test or suite path after ` > `, and the file relative to the root that a
/// suite which failed to load carries in brackets (`[ packages/a/x.test.js ]`).
struct VitestFail<'a> {
    project: Option<&'a str>,
    file: &'a str,
    name: Option<&'a str>,
    rooted: Option<&'a str>,
}

fn vitest_fail(line: &str) -> Option<VitestFail<'_>> {
    if !line.starts_with(" FAIL ") {
        return None;
    }
    let mut rest = line[6..].trim();
    let mut project = None;
    if let Some(r) = rest.strip_prefix('|') {
        if let Some((p, r)) = r.split_once("| ") {
            project = Some(p);
            rest = r.trim();
        } else {
            rest = r.trim();
        }
    }
    if let Some((file, name)) = rest.split_once(" > ") {
        return Some(VitestFail {
            project,
            file,
            name: Some(name.trim()),
            rooted: None,
        });
    }
    let (file, rooted) = rest.split_once(" [ ")?;
    Some(VitestFail {
        project,
        file: file.trim(),
        name: None,
        rooted: rooted.strip_suffix(']').map(str::trim),
    })
}

impl VitestFail<'_> {
    /// One name per test whatever the workspace: vitest's own `|project| file > describe >
    /// test`, so the same test failing in two projects (or two files) is two entries; a file
    /// that failed to load by its path from the root.
    fn full_name(&self) -> String {
        let project = self.project.map(|p| format!("|{p}| ")).unwrap_or_default();
        let file = self.rooted.unwrap_or(self.file);
        match self.name {
            Some(name) => format!("{project}{file} > {name}"),
            None => format!("{project}{file}"),
        }
    }
}

pub fn parse_vitest(text: &str) -> Option<TestCounts> {
    let lines: Vec<&str> = text.lines().collect();
    let mut totals: Option<Totals> = None;
    let mut failures = Vec::new();
    let mut suite_errors: HashSet<String> = HashSet::new();
    let mut unhandled = 0u64;
    // Under "Failed Suites", a header is a suite that failed as a whole: a file that did not
    // load, or a `describe` whose `beforeAll` threw (its tests are reported skipped).
    let mut in_suites = false;
    let is_header = |l: &str| vitest_fail(l).is_some();

    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with('⎯') && t.contains(" Failed ") {
            in_suites = t.contains(" Failed Suites ");
            continue;
        }
        if let Some(list) = t.strip_prefix("Tests  ") {
            let Some((items, total)) = list.rsplit_once('(') else {
                continue;
            };
            let Some(total) = total
                .strip_suffix(')')
                .and_then(|n| n.trim().parse::<u64>().ok())
            else {
                continue;
            };
            let mut tt = Totals::default();
            for item in items.split('|') {
                if let Some((n, word)) = count_item(item) {
                    add_item(&mut tt, n, word);
                }
            }
            let sum = totals.get_or_insert_with(Totals::default);
            sum.passed += tt.passed;
            sum.failed += tt.failed;
            sum.skipped += tt.skipped;
            sum.total = Some(sum.total.unwrap_or(0) + total);
            continue;
        }
        if let Some(rest) = t.strip_prefix("Errors  ") {
            if let Some((n, word)) = count_item(rest) {
                if word.starts_with("error") {
                    unhandled += n;
                }
            }
            continue;
        }
        if let Some(fail) = vitest_fail(line) {
            let msg = message_after(&lines, i + 1, is_header);
            let name = fail.full_name();
            if fail.name.is_none() || in_suites {
                suite_errors.insert(name.clone());
            }
            push_failure(&mut failures, &name, &msg);
        }
    }
    let t = totals?;
    Some(TestCounts {
        passed: Some(t.passed),
        failed: Some(t.failed),
        skipped: Some(t.skipped),
        errors: Some(suite_errors.len() as u64 + unhandled),
        total: t.total,
        failures,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::text::clean;
    use super::*;

    #[test]
    fn each_rejects_the_other() {
        let j = clean(include_str!(
            "../../../tests/fixtures/output/jest/some_fail.txt"
        ));
        let v = clean(include_str!(
            "../../../tests/fixtures/output/vitest/some_fail.txt"
        ));
        assert!(parse_vitest(&j).is_none());
        assert!(parse_jest(&v).is_none());
    }
}
