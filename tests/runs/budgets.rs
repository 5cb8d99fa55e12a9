//! Experiment budgets: CPU time an experiment's runs may spend. Past it the queue runs no more
//! of its commits (`budget_exhausted`) until the budget is raised; a commit cannot raise it.

use crate::common;

use common::World;

/// A test that spends about 0.6 s of CPU.
const HUNGRY_TEST: &str = "import time\nimport unittest\n\n\nclass TestHungry(unittest.TestCase):\n    def test_spends_cpu(self):\n        while time.process_time() < 0.6:\n            pass\n";

#[test]
fn an_experiment_that_spent_its_budget_runs_nothing_more_until_it_is_raised() {
    let w = World::new();
    let repo = w.new_repo("budgets");
    w.commit(
        &repo,
        &[("tests/test_hungry.py", HUNGRY_TEST)],
        "a hungry test",
    );
    let o = w.sandbox(&repo, &["experiment", "start", "hungry", "--budget", "1s"]);
    assert_eq!(o.code, 0, "{o:?}");
    let meta = |w: &World| {
        w.git(
            &repo,
            &["show", "refs/sandbox/experiments/hungry:experiment.toml"],
        )
    };
    let toml = meta(&w);
    assert!(toml.contains("budget = \"1s\""), "{toml}");

    // Two runs of about 0.6 s each spend it.
    for i in 0..2 {
        w.commit_on(
            &repo,
            "experiment/hungry",
            &[("step.txt", &format!("{i}\n"))],
            "step",
        );
        let o = w.sandbox(&repo, &["run", "experiment/hungry", "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    let shown = w
        .sandbox(&repo, &["experiment", "show", "hungry", "--json"])
        .json();
    assert_eq!(shown["status"], "budget_exhausted", "{shown}");
    assert_eq!(shown["budget"]["limit_ms"], 1000);
    assert!(
        shown["budget"]["spent_ms"].as_u64().unwrap() >= 1000,
        "{shown}"
    );

    // The next commit is not run: skipped, with why and the fix.
    let third = w.commit_on(&repo, "experiment/hungry", &[("step.txt", "2\n")], "step 2");
    let o = w.sandbox(&repo, &["run", "experiment/hungry", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let r = &o.json()[0];
    assert_eq!(r["commit"], third.as_str());
    assert_eq!(r["status"], "skipped", "{r}");
    assert!(r["tests"].is_null(), "nothing ran: {r}");
    let why = r["error"].as_str().unwrap();
    assert!(
        why.contains("experiment hungry has spent its CPU budget"),
        "{why}"
    );
    assert!(
        why.contains("git sandbox experiment budget hungry"),
        "{why}"
    );
    let line = w.sandbox(&repo, &["log", "-n", "1", "experiment/hungry"]);
    assert!(line.stdout.contains("skipped"), "{line:?}");

    // `experiment show`, `experiment list` and `status` say so.
    let human = w.sandbox(&repo, &["experiment", "show", "hungry"]);
    assert!(
        human.stdout.contains("State:      budget_exhausted"),
        "{human:?}"
    );
    assert!(
        human.stdout.contains("of 1.0s CPU spent; exhausted"),
        "{human:?}"
    );
    let list = w.sandbox(&repo, &["experiment", "list"]);
    assert!(list.stdout.contains("budget_exhausted"), "{list:?}");
    let status = w.sandbox(&repo, &["status", "--json"]).json();
    let totals = &status["totals"];
    assert_eq!(
        totals["experiments_by_state"]["budget_exhausted"], 1,
        "{status}"
    );
    assert_eq!(totals["runs"], 2, "a skipped commit is no run: {status}");
    let status = w.sandbox(&repo, &["status"]);
    assert!(
        status.stdout.contains("1 of them budget_exhausted"),
        "{status:?}"
    );

    // A commit cannot raise its own budget, even one that writes metadata as old experiments
    // kept it.
    w.commit_on(
        &repo,
        "experiment/hungry",
        &[(
            "experiments/hungry/experiment.toml",
            &toml.replace("budget = \"1s\"", "budget = \"1h\""),
        )],
        "more budget, please",
    );
    let o = w.sandbox(&repo, &["run", "experiment/hungry", "--json"]);
    assert_eq!(o.json()[0]["status"], "skipped", "{o:?}");

    // The user can: every commit runs again.
    let o = w.sandbox(&repo, &["experiment", "budget", "hungry", "1h"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("may spend 60m00s of CPU"), "{o:?}");
    // Kept in the metadata too, so a rebuilt index knows it.
    assert!(meta(&w).contains("budget = \"1h\""), "{}", meta(&w));
    let o = w.sandbox(&repo, &["run", &third, "--json"]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    let shown = w
        .sandbox(&repo, &["experiment", "show", "hungry", "--json"])
        .json();
    assert_eq!(shown["status"], "active", "{shown}");

    // Bad budgets are refused with the fix, and change nothing.
    for args in [
        &["experiment", "budget", "hungry", "soon"][..],
        &["experiment", "start", "other", "--budget", "0"][..],
    ] {
        let o = w.sandbox(&repo, args);
        assert_eq!(o.code, 2, "{o:?}");
        let (problem, hints) = o.error();
        assert!(problem.contains("invalid budget"), "{problem}");
        assert!(hints[0].contains("\"30m\""), "{hints:?}");
    }
    let shown = w
        .sandbox(&repo, &["experiment", "show", "hungry", "--json"])
        .json();
    assert_eq!(shown["budget"]["limit_ms"], 3_600_000);
    // The index is a cache: rebuilt from git, the budget you set stays.
    for f in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = std::fs::remove_file(w.data().join(f));
    }
    assert_eq!(w.sandbox(&w.work(), &["reindex"]).code, 0);
    let shown = w
        .sandbox(&repo, &["experiment", "show", "hungry", "--json"])
        .json();
    assert_eq!(shown["budget"]["limit_ms"], 3_600_000, "{shown}");
    assert!(w
        .git_out(
            &repo,
            &["rev-parse", "--verify", "-q", "experiment/other"],
            false
        )
        .stdout
        .is_empty());
}
