//! `git sandbox bisect`: the first failing commit of 64, found with a binary search that runs only
//! what stored results do not answer.

use crate::common;

use common::World;

const VALUE_TEST: &str = "import pathlib\nimport unittest\n\n\nclass TestValue(unittest.TestCase):\n    def test_value(self):\n        self.assertEqual(pathlib.Path('value.txt').read_text().strip(), 'ok')\n";

#[test]
fn bisect_finds_the_breaking_commit_of_64_in_at_most_7_runs_and_in_none_when_all_are_known() {
    let w = World::new();
    let repo = w.new_repo("bisect");
    let good = w.commit(
        &repo,
        &[("value.txt", "ok\n"), ("tests/test_value.py", VALUE_TEST)],
        "a value and its test",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let mut ids = Vec::new();
    for i in 0..64 {
        let mut files = vec![("step.txt".to_string(), format!("{i}\n"))];
        if i == 40 {
            files.push(("value.txt".into(), "broken\n".into()));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        ids.push(w.commit(&repo, &refs, &format!("step {i}")));
    }
    let breaking = &ids[40];

    // GOOD found by itself: the nearest ancestor with a good result.
    let o = w.sandbox(&repo, &["bisect", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let b = o.json();
    assert_eq!(b["first_bad"], breaking.as_str(), "{b}");
    assert_eq!(b["good"], good.as_str());
    assert_eq!(b["commits"], 64);
    assert_eq!(b["exact"], true);
    let runs = b["runs"].as_u64().unwrap();
    assert!(
        runs <= 7,
        "a binary search over 64 commits, BAD included: {runs} runs"
    );
    assert!(
        b["failure"]["name"]
            .as_str()
            .unwrap()
            .contains("test_value"),
        "{b}"
    );
    let human = w.sandbox(&repo, &["bisect", &good, "HEAD"]);
    assert!(
        human.stdout.starts_with(&format!(
            "{} step 40 is the first commit where the run fails",
            &breaking[..7]
        )),
        "{human:?}"
    );
    assert!(
        human.stdout.contains("0 commits run"),
        "all answered by now: {human:?}"
    );

    // With every result stored, nothing runs; following the one test gives the same answer.
    assert_eq!(w.sandbox(&repo, &["run", &format!("{good}..HEAD")]).code, 1);
    let o = w.sandbox(
        &repo,
        &["bisect", "--json", "--test", "test_value", &good, "HEAD"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let b = o.json();
    assert_eq!(b["first_bad"], breaking.as_str());
    assert_eq!(b["runs"], 0, "{b}");
    assert_eq!(b["known"].as_u64(), Some(64), "{b}");

    // A BAD that passes, or a test that does not fail there, is said with the fix.
    let o = w.sandbox(&repo, &["bisect", &good, &ids[10]]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("is not bad"), "{o:?}");
    assert!(hints[0].contains("BAD"), "{o:?}");
    let o = w.sandbox(&repo, &["bisect", "--test", "test_nothing", &good, "HEAD"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.stderr
            .contains("the test test_nothing does not fail there"),
        "{o:?}"
    );
}
