//! Line-coverage reports: coverage.py JSON (`coverage json`), Cobertura XML (`coverage xml`,
//! c8/istanbul, JaCoCo converters, …) and lcov tracefiles (c8/istanbul, `cargo llvm-cov --lcov`,
//! geninfo), sniffed from the content. Lines (statements) per file, and branches in total where
//! the report counts them (coverage.py `totals`, the Cobertura root's `branches-valid`/
//! `branches-covered`, lcov's `BRF:`/`BRH:`); functions are ignored. Totals are the report's own
//! where it states them (coverage.py `totals`, the Cobertura root's `lines-valid`/`lines-covered`
//! unless the file is cut short), else the sum of the files; lcov files count `LF:`/`LH:`, or
//! their `DA:` lines when those are missing. The overall figure is the one the tool itself
//! prints: coverage.py's TOTAL (statements and branches together, from its JSON or its XML),
//! else the lines' (Cobertura's `line-rate`, lcov's `lines` summary).
//!
//! Paths come back relative to the checkout: an absolute path under one of the `roots` the run saw
//! its checkout at is made relative to the (longest) matching root, a relative path stays as it is
//! minus a leading `./`, and any other path is kept as is. A Cobertura class filename is first
//! joined to a `<source>` of the report when that puts it under a root.
//!
//! Like the test-output parsers, nothing here panics on garbage and every parser is linear in the
//! size of the text. The XML is scanned by hand: no DTDs, no entities beyond the five predefined
//! ones and numeric references.

use gs_parse::{xml::decode_entities, xml::scan_tags};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCoverage {
    pub path: String,
    pub covered: u64,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// "coverage.py", "cobertura" or "lcov"
    pub format: &'static str,
    pub covered: u64,
    pub total: u64,
    /// Every file of the report, paths relative to the checkout, sorted by path.
    pub files: Vec<FileCoverage>,
    /// (covered, total) branches, when the report measured any.
    pub branches: Option<(u64, u64)>,
    /// The overall percentage the tool prints, when it is not the lines' (coverage.py's TOTAL
    /// with branches measured).
    pub percent: Option<f64>,
}

/// Parse a coverage report of any of the three formats (sniffed from its content). `roots` are
/// absolute directories the run saw its checkout at (e.g. "/tmp/git-sandbox/run/tree"): a file
/// path under one of them comes back relative to it; a relative path stays as it is (after
/// dropping a leading "./"); for Cobertura, a class filename is joined to the report's
/// <source> first when that makes it fall under a root. Paths outside every root are kept
/// as they are. None when the text is none of the three formats or holds no lines at all.
pub fn parse(text: &str, roots: &[&str]) -> Option<Report> {
    let text = text.trim_start_matches('\u{feff}').trim_start();
    let report = match text.as_bytes().first()? {
        b'{' => coverage_py(text, roots)?,
        b'<' => cobertura(text, roots)?,
        _ => lcov(text, roots)?,
    };
    (report.total > 0).then_some(report)
}

/// Line number -> hit at least once.
type Lines = HashMap<u64, bool>;

/// (covered, total) of a set of lines.
fn line_counts(lines: &Lines) -> (u64, u64) {
    let covered = lines.values().filter(|hit| **hit).count();
    (covered as u64, lines.len() as u64)
}

/// Whether a hit count (`DA:` second field, Cobertura `hits`) is positive; large counts that
/// overflow u64 still count, negative or malformed ones do not.
fn hit(count: &str) -> bool {
    let count = count.trim().as_bytes();
    count.iter().all(u8::is_ascii_digit) && count.iter().any(|b| *b != b'0')
}

/// Builds the report from (path, (covered, total)) per file, summing repeated paths and dropping
/// empty ones; `totals` are the report's own where it states them, else the sum of the files.
fn finish(
    format: &'static str,
    files: impl IntoIterator<Item = (String, (u64, u64))>,
    totals: Option<(u64, u64)>,
) -> Report {
    let mut merged: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut sum = (0u64, 0u64);
    for (path, (covered, total)) in files.into_iter().filter(|(p, _)| !p.is_empty()) {
        let covered = covered.min(total);
        for acc in [merged.entry(path).or_default(), &mut sum] {
            *acc = (acc.0.saturating_add(covered), acc.1.saturating_add(total));
        }
    }
    let (covered, total) = totals.unwrap_or(sum);
    let files = merged.into_iter();
    let files = files.map(|(path, (covered, total))| FileCoverage {
        path,
        covered,
        total,
    });
    Report {
        format,
        covered: covered.min(total),
        total,
        files: files.collect(),
        branches: None,
        percent: None,
    }
}

/// The part of `path` below the longest root it lies under (relative roots are ignored).
fn under_root<'a>(path: &'a str, roots: &[&str]) -> Option<&'a str> {
    roots
        .iter()
        .filter(|root| root.starts_with('/'))
        .map(|root| root.trim_end_matches('/'))
        .filter_map(|root| {
            let rest = path.strip_prefix(root)?.strip_prefix('/')?;
            Some((root.len(), rest.trim_start_matches('/')))
        })
        .filter(|(_, rest)| !rest.is_empty())
        .max_by_key(|(len, _)| *len)
        .map(|(_, rest)| rest)
}

fn strip_dot_slash(mut path: &str) -> &str {
    while let Some(rest) = path.strip_prefix("./") {
        path = rest.trim_start_matches('/');
    }
    path
}

/// `path` relative to the checkout where it lies under a root, else as it is (minus "./").
fn relativise(path: &str, roots: &[&str]) -> String {
    let path = strip_dot_slash(path.trim());
    under_root(path, roots).unwrap_or(path).to_string()
}

fn coverage_py(text: &str, roots: &[&str]) -> Option<Report> {
    let doc: serde_json::Value = serde_json::from_str(text).ok()?;
    let entries = doc.get("files")?.as_object()?;
    if !doc.get("meta").is_some_and(|m| m.is_object())
        && !doc.get("totals").is_some_and(|t| t.is_object())
    {
        return None;
    }
    let counts = |v: &serde_json::Value| -> Option<(u64, u64)> {
        let covered = v.get("covered_lines")?.as_u64()?;
        let total = v.get("num_statements")?.as_u64()?;
        Some((covered, total))
    };
    let files = entries.iter().filter_map(|(path, entry)| {
        let counts = entry.get("summary").and_then(counts)?;
        Some((relativise(path, roots), counts))
    });
    let totals = doc.get("totals");
    let mut report = finish("coverage.py", files, totals.and_then(counts));
    let number = |k: &str| totals.and_then(|t| t.get(k)).and_then(|v| v.as_u64());
    report.branches = number("covered_branches")
        .zip(number("num_branches"))
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (c.min(n), n));
    // coverage.py's TOTAL counts statements and branches together.
    report.percent = report.branches.and_then(|_| {
        totals
            .and_then(|t| t.get("percent_covered"))
            .and_then(|v| v.as_f64())
            .filter(|p| (0.0..=100.0).contains(p))
    });
    Some(report)
}

/// One record (`SF:` to `end_of_record`), or the merge of all the records of one file.
#[derive(Default)]
struct Record {
    lines: Lines,
    /// `LF:`/`LH:` (summed over the merged records that had both).
    found: Option<u64>,
    hit: Option<u64>,
    /// `BRF:`/`BRH:` of the record.
    branches: Option<(u64, u64)>,
    records: u32,
}

/// Ends the open record (if any), merging it into its file's.
fn close_record(by_file: &mut BTreeMap<String, Record>, open: Option<(String, Record)>) {
    let Some((path, record)) = open else { return };
    let file = by_file.entry(path).or_default();
    if let (Some(found), Some(hit)) = (record.found, record.hit) {
        let sum = |a: Option<u64>, b: u64| Some(a.unwrap_or(0).saturating_add(b));
        (file.found, file.hit) = (sum(file.found, found), sum(file.hit, hit));
    }
    file.records += 1;
    // Records of one file count the same branches (BRDA lines would say which): the most seen.
    if let Some((hit, found)) = record.branches {
        let b = file.branches.get_or_insert((0, 0));
        *b = (b.0.max(hit.min(found)), b.1.max(found));
    }
    for (number, hit) in record.lines {
        *file.lines.entry(number).or_default() |= hit;
    }
}

fn lcov(text: &str, roots: &[&str]) -> Option<Report> {
    let mut by_file: BTreeMap<String, Record> = BTreeMap::new();
    let mut open: Option<(String, Record)> = None;
    for line in text.lines().map(str::trim) {
        if line == "end_of_record" {
            close_record(&mut by_file, open.take());
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key == "SF" {
            close_record(&mut by_file, open.take());
            open = Some((relativise(value, roots), Record::default()));
            continue;
        }
        let Some((_, record)) = open.as_mut() else {
            continue;
        };
        let number = |v: &str| v.trim().parse::<u64>().ok();
        match key {
            "DA" => {
                let mut fields = value.split(',');
                if let (Some(line), Some(hits)) = (fields.next().and_then(number), fields.next()) {
                    *record.lines.entry(line).or_default() |= hit(hits);
                }
            }
            "LF" => record.found = number(value),
            "LH" => record.hit = number(value),
            "BRF" => {
                let hit = record.branches.map_or(0, |b| b.0);
                record.branches = number(value).map(|n| (hit, n));
            }
            "BRH" => {
                let found = record.branches.map_or(0, |b| b.1);
                record.branches = number(value).map(|n| (n, found));
            }
            _ => {}
        }
    }
    // A truncated last record still counts for the lines it had.
    close_record(&mut by_file, open.take());
    let branches = by_file.values().filter_map(|f| f.branches).fold(
        None,
        |acc: Option<(u64, u64)>, (h, n)| {
            let (a, b) = acc.unwrap_or((0, 0));
            Some((a.saturating_add(h), b.saturating_add(n)))
        },
    );
    // LF/LH when present; a file in several records is merged through its `DA:` lines.
    let files = by_file
        .into_iter()
        .map(|(path, file)| match (file.found, file.hit) {
            (Some(found), Some(hit)) if file.records == 1 || file.lines.is_empty() => {
                (path, (hit, found))
            }
            _ => (path, line_counts(&file.lines)),
        });
    let mut report = finish("lcov", files, None);
    report.branches = branches.filter(|(_, n)| *n > 0);
    Some(report)
}

fn cobertura(xml: &str, roots: &[&str]) -> Option<Report> {
    // Whether the root element was <coverage>; whether reading is over (at </coverage>, or at
    // once when the root is something else).
    let (mut root_seen, mut done) = (false, false);
    let mut root_totals: Option<(u64, u64)> = None;
    let mut root_branches: Option<(u64, u64)> = None;
    let mut sources: Vec<String> = Vec::new();
    let mut in_source = false;
    // Raw class filename -> line number -> hit; the class being read; depth inside <method>s.
    let mut classes: BTreeMap<String, Lines> = BTreeMap::new();
    let mut class: Option<String> = None;
    let mut method_depth = 0usize;
    scan_tags(xml, |tag, text| {
        if done {
            return;
        }
        if !root_seen {
            root_seen = tag.name == "coverage" && !tag.closing;
            done = !root_seen;
            let valid = tag.number("lines-valid");
            root_totals = tag.number("lines-covered").zip(valid);
            root_branches = tag
                .number("branches-covered")
                .zip(tag.number("branches-valid"))
                .filter(|(_, n)| *n > 0)
                .map(|(c, n)| (c.min(n), n));
            return;
        }
        match (tag.name, tag.closing) {
            ("source", false) => in_source = !tag.self_closing,
            ("source", true) if in_source => {
                sources.push(decode_entities(text.trim()).into_owned());
                in_source = false;
            }
            ("class", false) => {
                let name = tag.attr("filename").unwrap_or_default().into_owned();
                classes.entry(name.clone()).or_default();
                class = (!tag.self_closing).then_some(name);
                method_depth = 0;
            }
            ("class", true) => class = None,
            ("method", false) if !tag.self_closing => method_depth += 1,
            ("method", true) => method_depth = method_depth.saturating_sub(1),
            ("line", false) if method_depth == 0 => {
                let lines = class.as_ref().and_then(|c| classes.get_mut(c));
                if let (Some(lines), Some(number)) = (lines, tag.number("number")) {
                    let hits = tag.attr("hits").is_some_and(|h| hit(&h));
                    *lines.entry(number).or_default() |= hits;
                }
            }
            ("coverage", true) => done = true,
            _ => {}
        }
    });
    if !root_seen {
        return None;
    }
    // Classes of one file (e.g. Java inner classes) may share lines: merge them by path first.
    let mut files: BTreeMap<String, Lines> = BTreeMap::new();
    for (name, lines) in classes {
        let merged = files
            .entry(resolve_class_path(&name, &sources, roots))
            .or_default();
        for (number, hit) in lines {
            *merged.entry(number).or_default() |= hit;
        }
    }
    let files = files
        .into_iter()
        .map(|(path, lines)| (path, line_counts(&lines)));
    // The root's totals, unless the report was cut short (then the lines actually read).
    let totals = root_totals.filter(|_| done);
    let mut report = finish("cobertura", files, totals);
    report.branches = root_branches;
    // coverage.py writes statements in `line-rate`, but its TOTAL counts branches too.
    let by_coverage_py = xml[..xml.len().min(1024)].contains("Generated by coverage.py");
    if let (true, Some((lc, lv)), Some((bc, bv))) = (by_coverage_py, totals, root_branches) {
        report.percent = Some(100.0 * (lc.min(lv) + bc) as f64 / (lv + bv) as f64);
    }
    Some(report)
}

/// A class filename joined to the first `<source>` that puts it under a root, else as it is.
fn resolve_class_path(name: &str, sources: &[String], roots: &[&str]) -> String {
    let name = strip_dot_slash(name.trim());
    if !name.is_empty() && !name.starts_with('/') {
        for source in sources.iter().filter(|s| s.starts_with('/')) {
            let joined = format!("{}/{}", source.trim_end_matches('/'), name);
            if let Some(rest) = under_root(&joined, roots) {
                return rest.to_string();
            }
        }
    }
    relativise(name, roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY_JSON: &str = include_str!("../../../tests/fixtures/coverage/coveragepy.json");
    const PY_XML: &str = include_str!("../../../tests/fixtures/coverage/coveragepy.xml");
    const C8_LCOV: &str = include_str!("../../../tests/fixtures/coverage/c8.lcov");
    const C8_XML: &str = include_str!("../../../tests/fixtures/coverage/c8-cobertura.xml");
    const GCC_LCOV: &str = include_str!("../../../tests/fixtures/coverage/geninfo-gcc.lcov");
    const JUNIT: &str = include_str!("../../../tests/fixtures/output/junit/pytest_some_fail.xml");
    const PY_ROOT: &str = "/tmp/covcap/run/tree";
    const C8_ROOT: &str = "/tmp/covcap/node";
    const GCC_ROOT: &str = "/tmp/covcap/c/run/tree";
    /// Every file of the Python project: path, covered, total.
    const PY_FILES: [(&str, u64, u64); 5] = [
        ("calc/__init__.py", 1, 1),
        ("calc/ops.py", 9, 17),
        ("calc/strings.py", 3, 4),
        ("tests/__init__.py", 0, 0),
        ("tests/test_ops.py", 13, 13),
    ];

    fn files(r: &Report) -> Vec<(&str, u64, u64)> {
        r.files
            .iter()
            .map(|f| (f.path.as_str(), f.covered, f.total))
            .collect()
    }

    #[test]
    fn coverage_py_json() {
        let r = parse(PY_JSON, &[PY_ROOT]).unwrap();
        assert_eq!((r.format, r.covered, r.total), ("coverage.py", 26, 35));
        assert_eq!(files(&r), PY_FILES);
        assert_eq!(
            parse(PY_JSON, &[]).unwrap(),
            r,
            "relative paths need no root"
        );
    }

    #[test]
    fn coverage_py_cobertura_joins_source() {
        let r = parse(PY_XML, &[PY_ROOT]).unwrap();
        assert_eq!((r.format, r.covered, r.total), ("cobertura", 26, 35));
        assert_eq!(files(&r), PY_FILES);
        // Joined to <source> when that lands under a root, then relative to that root.
        let r = parse(PY_XML, &["/tmp/covcap/"]).unwrap();
        assert_eq!(r.files[1].path, "run/tree/calc/ops.py");
        assert_eq!(
            parse(PY_XML, &["/elsewhere"]).unwrap().files[1].path,
            "calc/ops.py"
        );
    }

    #[test]
    fn coverage_py_json_and_cobertura_agree() {
        let json = parse(PY_JSON, &[PY_ROOT]).unwrap();
        let xml = parse(PY_XML, &[PY_ROOT]).unwrap();
        assert_eq!((json.covered, json.total), (xml.covered, xml.total));
        assert_eq!(json.files, xml.files);
    }

    #[test]
    fn c8_lcov_prefers_lf_lh_over_da() {
        let r = parse(C8_LCOV, &[C8_ROOT]).unwrap();
        assert_eq!((r.format, r.covered, r.total), ("lcov", 22, 36));
        assert_eq!(files(&r), [("lib/math.js", 14, 25), ("lib/text.js", 8, 11)]);
        let edited = parse(&C8_LCOV.replace("LH:14", "LH:13"), &[]).unwrap();
        assert_eq!(files(&edited)[0], ("lib/math.js", 13, 25));
        // Without LF/LH the DA lines are counted.
        let no_totals: Vec<&str> = C8_LCOV.lines().filter(|l| !l.starts_with("L")).collect();
        assert_eq!(parse(&no_totals.join("\n"), &[]).unwrap(), r);
    }

    #[test]
    fn c8_cobertura_skips_method_lines_and_agrees_with_lcov() {
        let r = parse(C8_XML, &[C8_ROOT]).unwrap();
        assert_eq!((r.format, r.covered, r.total), ("cobertura", 22, 36));
        assert_eq!(r.files, parse(C8_LCOV, &[]).unwrap().files);
        // Outside every root the class filename stays as the report wrote it.
        let r = parse(C8_XML, &["/nope"]).unwrap();
        assert_eq!(files(&r), [("lib/math.js", 14, 25), ("lib/text.js", 8, 11)]);
    }

    #[test]
    fn geninfo_lcov_absolute_paths_made_relative() {
        let r = parse(GCC_LCOV, &["/somewhere/else", GCC_ROOT]).unwrap();
        assert_eq!((r.format, r.covered, r.total), ("lcov", 17, 23));
        assert_eq!(
            files(&r),
            [("src/mathx.c", 11, 17), ("src/test_main.c", 6, 6)]
        );
        // Trailing slashes are fine and the longest matching root wins.
        let roots = ["/tmp/covcap/", "/tmp/covcap/c/run/tree/"];
        assert_eq!(parse(GCC_LCOV, &roots).unwrap(), r);
        // Outside every root (a prefix is not a parent): kept absolute.
        let r = parse(GCC_LCOV, &["/tmp/covcap/c/run/tre"]).unwrap();
        assert_eq!(r.files[0].path, "/tmp/covcap/c/run/tree/src/mathx.c");
    }

    #[test]
    fn lcov_records_of_one_file_are_merged() {
        let once = parse(C8_LCOV, &[]).unwrap();
        assert_eq!(parse(&format!("{C8_LCOV}\n{C8_LCOV}"), &[]).unwrap(), once);
        let dotted = C8_LCOV.replace("SF:lib/", "SF:./lib/");
        assert_eq!(parse(&dotted, &[]).unwrap(), once);
    }

    #[test]
    fn branches_and_the_tools_own_total() {
        // `coverage report` on this run printed `TOTAL  17  6  12  3  55.17%` (statements alone
        // are 64.71%); c8's summary printed `Branches : 71.42% ( 5/7 )`, `Lines : 64.7% ( 11/17 )`.
        let roots = ["/tmp/covb/tree", "/tmp/covb/node"];
        for (fixture, format) in [
            (
                include_str!("../../../tests/fixtures/coverage/coveragepy-branch.json"),
                "coverage.py",
            ),
            (
                include_str!("../../../tests/fixtures/coverage/coveragepy-branch.xml"),
                "cobertura",
            ),
        ] {
            let r = parse(fixture, &roots).unwrap();
            assert_eq!((r.format, r.covered, r.total), (format, 11, 17));
            assert_eq!(r.branches, Some((5, 12)), "{format}");
            let p = r.percent.unwrap();
            assert_eq!(gs_model::percent_of(p), 55.17, "{format}: {p}");
        }
        for fixture in [
            include_str!("../../../tests/fixtures/coverage/c8-branch.lcov"),
            include_str!("../../../tests/fixtures/coverage/c8-branch-cobertura.xml"),
        ] {
            let r = parse(fixture, &roots).unwrap();
            assert_eq!((r.covered, r.total, r.branches), (11, 17, Some((5, 7))));
            assert_eq!(r.percent, None, "the lines' figure is the tool's");
        }
        // Without branches measured, coverage.py's TOTAL is the statements'.
        let r = parse(
            include_str!("../../../tests/fixtures/coverage/coveragepy.json"),
            &roots,
        )
        .unwrap();
        assert_eq!((r.branches, r.percent), (None, None));
    }

    #[test]
    fn not_a_coverage_report() {
        for text in [
            "",
            "  \n\n",
            "hello world\nnot coverage",
            "{}",
            "[1, 2]",
            "{\"files\": {}}",
            "{\"meta\": {}, \"files\": {}}",
            "<html><body>hi</body></html>",
            "<coverage lines-valid=\"0\" lines-covered=\"0\"></coverage>",
            "SF:a.js\nend_of_record\n",
            "DA:1,1\nLF:1\nLH:1\n",
            "\u{feff}\0\u{1}<<<>>>&&&;;;",
            JUNIT,
        ] {
            assert_eq!(parse(text, &[]), None, "{text:?}");
        }
    }

    #[test]
    fn truncated_reports_are_partial_and_consistent() {
        for (text, root) in [
            (PY_JSON, PY_ROOT),
            (PY_XML, PY_ROOT),
            (C8_LCOV, C8_ROOT),
            (C8_XML, C8_ROOT),
            (GCC_LCOV, GCC_ROOT),
        ] {
            let full = parse(text, &[root]).unwrap();
            // serde_json is slow in debug builds: every 11th cut of the JSON, every cut of the rest.
            let step = if text.starts_with('{') { 11 } else { 1 };
            for cut in (0..text.len()).step_by(step) {
                let Some(r) = parse(&text[..cut], &[root]) else {
                    continue;
                };
                assert_eq!(r.format, full.format);
                assert!(0 < r.total && r.total <= full.total && r.covered <= r.total);
                assert!(r.files.windows(2).all(|w| w[0].path < w[1].path));
                assert!(r.files.iter().all(|f| f.covered <= f.total));
                assert_eq!(r.total, r.files.iter().map(|f| f.total).sum::<u64>());
                assert_eq!(r.covered, r.files.iter().map(|f| f.covered).sum::<u64>());
            }
        }
        // Cut mid-record, an lcov file still counts the lines it has.
        let half = &GCC_LCOV[..GCC_LCOV.find("DA:9,1").unwrap()];
        let r = parse(half, &[GCC_ROOT]).unwrap();
        assert_eq!(files(&r), [("src/mathx.c", 4, 5)]);
    }

    #[test]
    fn odd_xml_and_pathological_input() {
        // The real report with a DTD subset, a comment, entities, odd attributes, a hit count of
        // -1, a line without a number, a repeated line and a class without a filename.
        let xml = PY_XML
            .replacen(
                "<coverage ",
                "<!DOCTYPE c [<!ENTITY x \"<a>\">]><!--<coverage>-->\n<coverage ",
                1,
            )
            .replace(
                "<source>/tmp/covcap/run/tree",
                "<source>/tmp/covcap/run&#47;tree/",
            )
            .replace("\"calc/ops.py\"", "\"./calc/op&amp;s&#x2E;py\" odd x = 'y'")
            .replace(
                "\"7\" hits=\"0\"/>",
                "\"7\" hits=\"-1\"/><line hits=\"1\"/><line number=\"8\" hits=\"1\"/>",
            )
            .replace("filename=\"tests/__init__.py\"", "");
        let r = parse(&xml, &[PY_ROOT]).unwrap();
        assert_eq!((r.covered, r.total), (26, 35));
        assert_eq!(r.files.len(), 4, "no file for the class without a filename");
        assert_eq!(files(&r)[1], ("calc/op&s.py", 9, 17));
        let decoded = decode_entities("&lt;&#x41;&#66;&bogus;&;&");
        assert_eq!(decoded, "<AB&bogus;&;&");
        // Unterminated constructs, repeated: quick and quiet.
        for junk in "<|<!--|<![CDATA[|<!DOCTYPE [|<a b=\"|<coverage |SF:".split('|') {
            assert_eq!(parse(&junk.repeat(50_000), &[]), None);
        }
        let lines = "DA:1,1\n".repeat(50_000);
        assert_eq!(parse(&format!("SF:x\n{lines}"), &[]).unwrap().total, 1);
    }
}
