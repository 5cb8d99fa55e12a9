//! A branch's page over plain HTTP: its last commits charted (test time, tests, coverage) as
//! inline SVG with a column per commit; the ref column of the commits table for runs of a
//! range; and the records' words as people say them on every page.

use super::pages::{commit_rows, get, links};
use crate::common::World;

const CALC: &str =
    "def add(a, b):\n    return a + b\n\n\ndef unused(x):\n    y = x * 2\n    return y\n";
const HALF: &str = "import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n";
const REST: &str = "import unittest\n\nfrom calc import unused\n\n\nclass TestRest(unittest.TestCase):\n    def test_unused(self):\n        self.assertEqual(unused(2), 4)\n";
const FAILING: &str = "import unittest\n\nclass T(unittest.TestCase):\n    def test_broken(self):\n        self.assertEqual(1, 2)\n";
/// coverage.py measures the tests; a failing run writes no report (`&&`).
const COVERED: &str = "[test]\ncommand = \"python3 -m coverage run --include=calc.py -m unittest discover -s tests && python3 -m coverage json --include=calc.py -o coverage.json\"\n";

/// The page's text without its tags (tooltips included: `<title>` holds text).
fn text(html: &str) -> String {
    let mut out = String::new();
    let mut tag = false;
    for c in html.chars() {
        match c {
            '<' => tag = true,
            '>' => {
                tag = false;
                out.push(' ');
            }
            _ if !tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// The markup of the `<figure>` with id `id`.
fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure class=\"chart\" id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}: {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</figure>").unwrap()]
}

#[test]
fn a_branch_page_charts_each_commit_and_a_range_run_says_which_branch_it_was_for() {
    let mut w = World::new();
    w.with_test_python("coverage");
    let repo = w.new_repo("graph");
    let root = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let half = w.commit(
        &repo,
        &[
            (".sandbox.toml", COVERED),
            ("calc.py", CALC),
            ("tests/test_calc.py", HALF),
        ],
        "Calc, half tested",
    );
    let whole = w.commit(&repo, &[("tests/test_rest.py", REST)], "Test the rest");
    let broken = w.commit(&repo, &[("tests/test_broken.py", FAILING)], "Broken");
    w.git(&repo, &["rm", "-q", "tests/test_broken.py"]);
    w.git(&repo, &["commit", "-q", "-m", "Unbreak"]);
    let unbroken = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // A range ending at the production branch: its runs are that branch's.
    let o = w.sandbox(&repo, &["run", "main~4..main"]);
    assert_ne!(o.code, 0, "Broken fails: {o:?}");
    // A range of commit ids on a branch nobody watches: runs of no branch. Its test outlasts
    // its timeout.
    w.git(&repo, &["switch", "-q", "-c", "scratch"]);
    let slow = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"sleep 30\"\ntimeout = \"1s\"\n",
        )],
        "Slow",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    let o = w.sandbox(&repo, &["run", &format!("{unbroken}..{slow}")]);
    assert_ne!(o.code, 0, "{o:?}");
    assert_eq!(w.note(&repo, &slow).unwrap()["status"], "timeout");
    assert!(w.note(&repo, &slow).unwrap()["ref"].is_null());
    assert_eq!(w.note(&repo, &broken).unwrap()["ref"], "refs/heads/main");
    let read = w.token("read");
    let (_daemon, addr) = w.serve();

    // The commits table: the range's runs name main, linked to its page; the run of ids says
    // it names no branch, and why, rather than showing nothing.
    let commits = get(&addr, "/r/graph/commits", &read);
    assert_eq!(commits.status, 200, "{commits:?}");
    let rows = commit_rows(&commits.body);
    assert_eq!(rows.len(), 5, "{rows:#?}");
    assert!(
        rows[0].contains(&slow[..7]) && rows[0].contains("timed out") && rows[0].contains('—'),
        "{rows:#?}"
    );
    assert!(
        commits
            .body
            .contains("title=\"run of a range or of commit ids"),
        "{}",
        commits.body
    );
    for row in &rows[1..] {
        assert!(row.contains(" main "), "{rows:#?}");
    }
    let to_main = links(&commits.body, "/r/graph/branches/");
    assert!(
        to_main.len() == 4 && to_main.iter().all(|l| l == "/r/graph/branches/main"),
        "{to_main:?}"
    );

    // The branch's page: a chart of test time, one of tests, one of coverage, each a column per
    // commit of main (the first not run), the numbers in each column's tooltip.
    let page = get(&addr, "/r/graph/branches/main", &read);
    assert_eq!(page.status, 200, "{page:?}");
    let main = [&root, &half, &whole, &broken, &unbroken];
    for id in ["time", "tests", "coverage"] {
        let chart = figure(&page.body, id);
        assert!(chart.contains("<svg"), "{chart}");
        assert!(chart.contains("data-commits=\"5\""), "{chart}");
        assert!(
            chart.contains("<title id=") && chart.contains("<desc id="),
            "an accessible name and description: {chart}"
        );
        // Oldest on the left.
        let order: Vec<usize> = main
            .iter()
            .map(|c| {
                chart
                    .find(&format!("data-commit=\"{c}\""))
                    .unwrap_or_else(|| panic!("{c} in {id}: {chart}"))
            })
            .collect();
        assert!(order.windows(2).all(|p| p[0] < p[1]), "{id}: {order:?}");
        assert!(
            chart.contains(&format!("href=\"/c/graph/{broken}\"")),
            "{chart}"
        );
    }
    let time = figure(&page.body, "time");
    assert_eq!(time.matches("class=\"bar ").count(), 5, "{time}");
    assert_eq!(time.matches("class=\"bar passed\"").count(), 3, "{time}");
    assert_eq!(time.matches("class=\"bar failed\"").count(), 1, "{time}");
    assert!(
        time.contains(&format!("<title>{} Broken\nfailed in ", &broken[..7])),
        "the numbers in the tooltip: {time}"
    );
    let tests = figure(&page.body, "tests");
    assert!(tests.contains("3 passed, 0 failed"), "{tests}");
    assert!(tests.contains("4 passed, 1 failed"), "{tests}");
    assert!(tests.contains("class=\"bar failed\""), "{tests}");
    // Half of calc's lines and all of them; the failing run wrote no report (a gap).
    let coverage = figure(&page.body, "coverage");
    assert_eq!(coverage.matches("class=\"point\"").count(), 3, "{coverage}");
    assert!(
        coverage.contains("coverage 60.0%") && coverage.contains("coverage 100.0%"),
        "{coverage}"
    );
    assert!(coverage.contains("<polyline"), "{coverage}");
    // The same numbers as a table, newest first, the first commit not run.
    let rows = commit_rows(&page.body.replace("id=\"branch-commits\"", "id=\"commits\""));
    assert_eq!(rows.len(), 5, "{rows:#?}");
    assert!(
        rows[0].contains("Unbreak") && rows[0].contains("100.0%"),
        "{rows:#?}"
    );
    assert!(rows[4].contains("not run"), "{rows:#?}");

    // No page shows a record's word as the record writes it.
    let experiments = get(&addr, "/r/graph", &read);
    let commit = get(&addr, &format!("/c/graph/{slow}"), &read);
    assert!(text(&commit.body).contains("timed out"), "{}", commit.body);
    assert!(
        text(&commit.body).contains("started by hand"),
        "{}",
        commit.body
    );
    for (what, body) in [
        ("branch", page.body.as_str()),
        ("commits", &commits.body),
        ("experiments", &experiments.body),
        // The patch is the commit's text, whatever words it has.
        (
            "commit",
            &commit.body[..commit.body.find("<pre").unwrap_or(commit.body.len())],
        ),
    ] {
        let text = text(body);
        let raw: Vec<&str> = text
            .split_whitespace()
            .filter(|w| {
                let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
                // `not_run`, `rolled_back`, `NOT_READY`; `timeout` is a config key's name too.
                w.contains('_')
            })
            .collect();
        assert!(raw.is_empty(), "{what} shows {raw:?}");
    }

    // A branch the repository does not have, and a limit out of range.
    let none = get(&addr, "/r/graph/branches/nope", &read);
    assert_eq!(none.status, 404, "{none:?}");
    assert!(none.body.contains("no branch"), "{}", none.body);
    let bad = get(&addr, "/r/graph/branches/main?limit=0", &read);
    assert_eq!(bad.status, 400, "{bad:?}");
    let two = get(&addr, "/r/graph/branches/main?limit=2", &read);
    assert!(
        figure(&two.body, "time").contains("data-commits=\"2\""),
        "{}",
        two.body
    );
}
