//! Results shown consistently: `log`, `show` and `compare` tell one result the same way, with
//! the tests' time apart from the setup step's, and say when it was served from an earlier run
//! of the same tree; counts and numbers read right.

use crate::common::{shown::is_duration, World};
use std::path::Path;

/// `insta::assert_snapshot!`, kept under the group's `snapshots/` with the other test files'.
macro_rules! snapshot {
    ($value:expr) => {
        insta::with_settings!({ snapshot_path => "../snapshots" }, {
            insta::assert_snapshot!($value);
        })
    };
}

const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

/// `text` with the commits of `names` named (full and short ids), durations as `<time>`, and
/// the cells of the table columns named in `vary` as `<…>`. Table rows are split into cells on
/// two spaces or more and joined with ` | `, so column widths do not matter.
fn redact(text: &str, names: &[(&str, &str)], vary: &[&str]) -> String {
    let mut text = text.to_string();
    for (id, name) in names {
        text = text.replace(id, name).replace(&id[..7], name);
    }
    let mut out = Vec::new();
    let mut columns: Vec<usize> = Vec::new();
    for line in text.lines() {
        let line: String = line
            .split(' ')
            .map(|word| {
                let bare = word
                    .trim_end_matches([',', ')', ';', ']'])
                    .trim_start_matches(['(', '[']);
                if is_duration(bare) {
                    word.replace(bare, "<time>")
                } else {
                    word.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if cells.iter().any(|c| vary.contains(c)) {
            columns = (0..cells.len())
                .filter(|&i| vary.contains(&cells[i]))
                .collect();
            out.push(cells.join(" | "));
        } else if cells.len() > 1 && !columns.is_empty() {
            let cells: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if columns.contains(&i) {
                        "<…>".to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            out.push(cells.join(" | "));
        } else {
            out.push(line);
        }
    }
    out.join("\n")
}

#[test]
fn log_says_queued_for_a_commit_the_hook_queued_and_not_run_for_one_nobody_did() {
    let w = World::new();
    let repo = w.new_repo("queued");
    // The hook queues a new commit of a watched branch (no daemon here runs it).
    w.commit(&repo, &[("a.txt", "a\n")], "Queued by the hook");
    // One made with the hooks off is in no queue.
    let none = w.path("no-hooks");
    std::fs::create_dir_all(&none).unwrap();
    let hooks = format!("core.hooksPath={}", none.display());
    w.git(
        &repo,
        &[
            "-c",
            &hooks,
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "Made quietly",
        ],
    );
    let o = w.sandbox(&repo, &["log", "-n", "2"]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].contains(" not run Made quietly"), "{o:?}");
    assert!(lines[1].contains(" queued Queued by the hook"), "{o:?}");
    let json = w.sandbox(&repo, &["log", "-n", "2", "--json"]).json();
    assert_eq!(json[1]["job"], "queued", "{json}");
    assert!(json[0].get("job").is_none(), "{json}");
}

#[test]
fn log_shows_the_result_show_serves_for_a_commit_of_a_tree_already_run() {
    let w = World::new();
    let repo = w.new_repo("same-tree");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let first = rev(&w, &repo, "HEAD");
    // Same tree, not run itself (no daemon runs the hook's job).
    w.git(
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "Same tree again"],
    );
    let second = rev(&w, &repo, "HEAD");
    let show = w.sandbox(&repo, &["show", "--json"]);
    assert_eq!(show.json()["cached_from"], first.as_str(), "{show:?}");
    // Its duration is that run's, and says where it was served from (not "to serve it").
    let text = w.sandbox(&repo, &["show"]);
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("Duration:"))
        .unwrap();
    assert!(
        line.contains(&format!("— served from the run of {}", &first[..7]))
            && !line.contains("to serve it"),
        "{line}"
    );

    let log = w.sandbox(&repo, &["log", "-n", "2", "--json"]);
    assert_eq!(log.code, 0, "{log:?}");
    assert_eq!(log.json()[0]["result"]["cached_from"], first.as_str());
    assert_eq!(
        log.json()[0]["result"]["tests"],
        show.json()["tests"],
        "the result show shows"
    );
    let log = w.sandbox(&repo, &["log", "-n", "2"]);
    snapshot!(redact(
        &log.stdout,
        &[(&first, "<first>"), (&second, "<second>")],
        &[]
    ));
}

#[test]
fn show_tells_the_setup_steps_time_apart_from_the_tests() {
    let w = World::new();
    let repo = w.new_repo("setup-time");
    let config = "[test]\nsetup = \"echo preparing && sleep 0.3\"\ncommand = \"python3 -m unittest discover -s tests\"\n[analysis]\nenabled = false\n";
    let head = w.commit(&repo, &[(".sandbox.toml", config)], "A setup step");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let setup = &o.json()[0]["tests"]["setup"];
    assert!(setup["duration_ms"].as_u64().unwrap() >= 300, "{setup}");
    let o = w.sandbox(&repo, &["show"]);
    assert_eq!(o.code, 0, "{o:?}");
    let log = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  setup log: "))
        .unwrap_or_else(|| panic!("no setup log: {o:?}"));
    assert!(log.ends_with(&format!("/{head}.setup.log")), "{o:?}");
    assert!(std::fs::read_to_string(log).unwrap().contains("preparing"));
    let shown: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| {
            ["Duration:", "Tests:", "  command:", "  setup:", "  exit:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    snapshot!(redact(&shown.join("\n"), &[], &[]));
}

#[test]
fn a_failed_setup_step_shows_its_log_and_no_tests() {
    let w = World::new();
    let repo = w.new_repo("setup-broken");
    let config = "[test]\nsetup = \"echo fetching deps && exit 3\"\ncommand = \"true\"\n[analysis]\nenabled = false\n";
    let head = w.commit(&repo, &[(".sandbox.toml", config)], "A broken setup step");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 1);
    let o = w.sandbox(&repo, &["show"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout
            .contains("\nTests: not run (the setup step before them failed)\n"),
        "{o:?}"
    );
    let log = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  setup log: "))
        .unwrap_or_else(|| panic!("no setup log: {o:?}"));
    assert!(log.ends_with(&format!("/{head}.setup.log")), "{o:?}");
    assert!(std::fs::read_to_string(log)
        .unwrap()
        .contains("fetching deps"));
}

#[test]
fn compare_weighs_test_time_says_what_was_served_and_ranks_active_experiments_first() {
    let w = World::new();
    let repo = w.new_repo("ranking");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let ran = rev(&w, &repo, "HEAD");
    // Production's head has a tree already run: its result is served from that run.
    w.git(
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "Same tree again"],
    );
    let main = rev(&w, &repo, "HEAD");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    // An experiment that earned a verdict and was killed, and an active one not evaluated.
    for name in ["early", "late"] {
        let o = w.sandbox(&repo, &["experiment", "start", name]);
        assert_eq!(o.code, 0, "{o:?}");
        // Trees of their own (an experiment's start adds no file): neither is served the other's.
        w.commit_on(
            &repo,
            &format!("experiment/{name}"),
            &[("tests/test_more.py", MORE_TESTS), ("NOTES.md", name)],
            &format!("Work on experiment/{name}"),
        );
    }
    assert_eq!(w.sandbox(&repo, &["eval", "early"]).code, 0);
    assert_eq!(w.sandbox(&repo, &["kill", "early"]).code, 0);
    assert_eq!(w.sandbox(&repo, &["run", "experiment/late"]).code, 0);

    let o = w.sandbox(&repo, &["compare", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let c = o.json();
    let tests_ms = |rev: &str| w.note(&repo, rev).unwrap()["tests"]["duration_ms"].as_i64();
    assert_eq!(c["base"]["served_from"], ran.as_str(), "{c}");
    assert_eq!(c["base"]["duration_ms"].as_i64(), tests_ms("main"), "{c}");
    let names: Vec<&str> = c["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["late", "early"], "active first: {c}");
    let late = &c["experiments"][0];
    assert_eq!(
        late["duration_delta_ms"].as_i64(),
        Some(tests_ms("experiment/late").unwrap() - tests_ms("main").unwrap()),
        "test time against test time: {c}"
    );

    let o = w.sandbox(&repo, &["compare", "--all-columns"]);
    assert_eq!(o.code, 0, "{o:?}");
    snapshot!(redact(
        &o.stdout,
        &[(&ran, "<ran>"), (&main, "<main>")],
        &["Δ test ms"]
    ));
}

/// Python functions: `plain` returning a constant (complexity 1) and one with a branch (2).
fn functions(plain: usize) -> String {
    let mut code = String::from("def branchy(x):\n    if x:\n        return 1\n    return 0\n");
    for i in 0..plain {
        code.push_str(&format!("\n\ndef f{i}():\n    return {i}\n"));
    }
    code
}

#[test]
fn eval_never_prints_minus_zero() {
    let w = World::new();
    let repo = w.new_repo("minus-zero");
    let config = "[test]\ncommand = \"python3 -m unittest discover -s tests\"\n[analysis]\nexclude = [\"tests/**\", \"logs/**\", \"results/**\"]\n";
    // 45 functions of complexity 46 in all, then 46 of 47: the mean drops by 0.00048, which
    // rounds to zero at three decimals.
    w.commit(
        &repo,
        &[(".sandbox.toml", config), ("lib.py", &functions(44))],
        "A library",
    );
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "tiny"]).code, 0);
    w.commit_on(
        &repo,
        "experiment/tiny",
        &[("lib.py", &functions(45))],
        "Work on experiment/tiny",
    );
    let o = w.sandbox(&repo, &["eval", "tiny"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains(r#""mean_delta":0.0"#), "{o:?}");
    assert!(!o.stdout.contains("-0.0"), "{o:?}");
    let o = w.sandbox(&repo, &["eval", "tiny", "--json"]);
    assert!(!o.stdout.contains("-0.0"), "{o:?}");
}

#[test]
fn propose_counts_one_experiment_that_meets_the_minimum_in_the_singular() {
    let w = World::new();
    let repo = w.new_repo("one-meets");
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "more"]).code, 0);
    w.commit_on(
        &repo,
        "experiment/more",
        &[("tests/test_more.py", MORE_TESTS)],
        "Work on experiment/more",
    );
    let o = w.sandbox(&repo, &["propose"]);
    assert_eq!(o.code, 0, "{o:?}");
    snapshot!(o.stdout);
}

#[test]
fn config_example_prints_every_key_of_the_repository_config() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["config", "--example"]);
    assert_eq!(o.code, 0, "{o:?}");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join(".sandbox.toml.example");
    assert_eq!(o.stdout, std::fs::read_to_string(example).unwrap());
    // What it prints is a valid config: a repository that commits it runs.
    let repo = w.new_repo("example");
    let example = o
        .stdout
        .replace("# command = \"python3 -m pytest -q\"", "command = \"true\"");
    assert_ne!(example, o.stdout);
    w.commit(&repo, &[(".sandbox.toml", &example)], "Every key");
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_ne!(o.json()[0]["status"], "error", "{o:?}");
    // A new repository's config points at it.
    let toml = std::fs::read_to_string(w.new_repo("fresh").join(".sandbox.toml")).unwrap();
    assert!(toml.contains("`git sandbox config --example`"), "{toml}");
}

#[test]
fn a_run_that_tested_nothing_is_shown_as_no_tests_and_is_no_pass_for_eval() {
    let w = World::new();
    let repo = w.new_repo("nothing");
    w.git(&repo, &["rm", "-q", "-r", "tests", ".sandbox.toml"]);
    w.git(&repo, &["commit", "-q", "-m", "No tests left"]);
    let o = w.sandbox(&repo, &["run", "--json"]).success();
    assert_eq!(
        o.json()[0]["status"],
        "passed",
        "the record keeps its status: {o}"
    );
    assert_eq!(o.json()[0]["tests"], serde_json::Value::Null, "{o}");

    let log = w.sandbox(&repo, &["log", "-n", "1"]).success();
    assert!(
        log.stdout.starts_with("○ ") && log.stdout.contains(" no tests "),
        "{log}"
    );
    assert!(!log.stdout.contains('✔'), "{log}");
    let show = w.sandbox(&repo, &["show"]).success();
    assert!(show.stdout.contains("Status:   ○ no tests"), "{show}");
    let summary = w.git(&repo, &["notes", "--ref=sandbox-summary", "show", "HEAD"]);
    assert!(summary.starts_with("Sandbox: no tests"), "{summary}");

    // An experiment that tests nothing never meets the tests criterion.
    w.sandbox(&repo, &["experiment", "start", "empty"])
        .success();
    w.commit_on(
        &repo,
        "experiment/empty",
        &[("README.md", "x")],
        "Still nothing",
    );
    let o = w.sandbox(&repo, &["eval", "empty", "--json"]);
    assert_eq!(o.code, 1, "{o}");
    let ev = o.json();
    assert_eq!(ev["recommendation"], "NOT_READY", "{ev}");
    let tests_pass = ev["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "tests_pass")
        .unwrap();
    assert_eq!(tests_pass["pass"], false, "{ev}");
}
