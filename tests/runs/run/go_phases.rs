//! The probe with go test: the packages a change reaches (the changed package and every
//! package importing it, transitively) and those that failed last run beside the command; the
//! record is the command's run of the whole module.

use crate::common::{tools, World};
use std::path::Path;

/// Offline (no proxy, no toolchain download, go.mod as committed), verbose so go counts the
/// tests that pass, uncached so each phase runs them.
const CONFIG: &str = "[test]\ncommand = \"GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly go test -v -count=1 ./...\"\ntimeout = \"300s\"\n[analysis]\nenabled = false\n";

/// A module of four packages with tests and a command at the root without: `report` imports
/// `cart`, which imports `money`; `text` imports nothing of the module. `cart`'s test is of the
/// external `cart_test` package.
fn module(w: &World, repo: &Path) {
    tools::debian("/usr/bin/go", "golang-go");
    let files = [
        (".sandbox.toml", CONFIG),
        ("go.mod", "module example.com/shop\n\ngo 1.19\n"),
        (
            "main.go",
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/shop/report\"\n)\n\nfunc main() { fmt.Println(report.Line(2, 3)) }\n",
        ),
        (
            "money/money.go",
            "package money\n\n// Cents of whole units.\nfunc Cents(units int) int { return units * 100 }\n",
        ),
        (
            "money/money_test.go",
            "package money\n\nimport \"testing\"\n\nfunc TestCents(t *testing.T) {\n\tif Cents(2) != 200 {\n\t\tt.Fatal(Cents(2))\n\t}\n}\n",
        ),
        (
            "cart/cart.go",
            "package cart\n\nimport \"example.com/shop/money\"\n\n// Total in cents.\nfunc Total(units ...int) int {\n\tsum := 0\n\tfor _, u := range units {\n\t\tsum += money.Cents(u)\n\t}\n\treturn sum\n}\n",
        ),
        (
            "cart/cart_test.go",
            "package cart_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/shop/cart\"\n)\n\nfunc TestTotal(t *testing.T) {\n\tif cart.Total(1, 2) != 300 {\n\t\tt.Fatal(cart.Total(1, 2))\n\t}\n}\n",
        ),
        (
            "report/report.go",
            "package report\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/shop/cart\"\n)\n\n// Line of a report.\nfunc Line(units ...int) string { return fmt.Sprint(cart.Total(units...)) }\n",
        ),
        (
            "report/report_test.go",
            "package report\n\nimport \"testing\"\n\nfunc TestLine(t *testing.T) {\n\tif Line(2, 3) != \"500\" {\n\t\tt.Fatal(Line(2, 3))\n\t}\n}\n",
        ),
        (
            "text/text.go",
            "package text\n\nimport \"strings\"\n\n// Shout it.\nfunc Shout(s string) string { return strings.ToUpper(s) }\n",
        ),
        (
            "text/text_test.go",
            "package text\n\nimport \"testing\"\n\nfunc TestShout(t *testing.T) {\n\tif Shout(\"a\") != \"A\" {\n\t\tt.Fatal(Shout(\"a\"))\n\t}\n}\n\nfunc TestShoutEmpty(t *testing.T) {\n\tif Shout(\"\") != \"\" {\n\t\tt.Fatal(\"not empty\")\n\t}\n}\n",
        ),
        // No change reaches it: the whole module's run takes 3 s longer than any probe.
        (
            "slow/slow_test.go",
            "package slow\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) { time.Sleep(3 * time.Second) }\n",
        ),
    ];
    w.git(repo, &["rm", "-q", "-r", "tests"]);
    w.commit(repo, &files, "a module of six packages");
}

fn run_json(w: &World, repo: &Path) -> (serde_json::Value, String) {
    let o = w.sandbox(repo, &["run", "--json"]);
    (o.json()[0].clone(), o.stderr)
}

fn explain(w: &World, repo: &Path) -> String {
    let o = w.sandbox(repo, &["run", "--explain-selection", "HEAD"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
}

/// Total, passed, failed.
fn counts(rec: &serde_json::Value) -> [Option<u64>; 3] {
    let t = &rec["tests"];
    ["total", "passed", "failed"].map(|k| t[k].as_u64())
}

fn failures(rec: &serde_json::Value) -> Vec<String> {
    rec["tests"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn go_test_runs_the_packages_a_change_reaches_first() {
    let w = World::new();
    let repo = w.new_repo("go-phases");
    module(&w, &repo);
    let (base, _) = run_json(&w, &repo);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["total"], 6, "{base}");
    assert!(base["tests"].get("phases").is_none(), "{base}");

    // What the graph cannot see means the whole suite.
    for (path, body, why) in [
        ("go.sum", "", "go.sum changed: it configures the module"),
        (
            "text/testdata/in.txt",
            "a\n",
            "text/testdata/in.txt changed: test data",
        ),
        (
            "text/shout.c",
            "int x;\n",
            "text/shout.c changed: not Go source",
        ),
        (
            "text/embed.go",
            "package text\n\nimport _ \"embed\"\n\n//go:embed testdata/in.txt\nvar In string\n",
            "text/embed.go changed: it embeds files",
        ),
        (
            "text/x_linux.go",
            "package text\n",
            "text/x_linux.go changed: its name is a build constraint",
        ),
    ] {
        w.commit(&repo, &[(path, body)], "unseen");
        let o = explain(&w, &repo);
        assert!(
            o.contains(&format!("one phase, the whole suite: {why}")),
            "{path}: {o}"
        );
    }
    w.git(
        &repo,
        &[
            "rm",
            "-q",
            "go.sum",
            "text/testdata/in.txt",
            "text/shout.c",
            "text/embed.go",
            "text/x_linux.go",
        ],
    );
    w.commit(&repo, &[], "seen again");
    w.commit(&repo, &[("README.md", "# shop\n")], "prose");
    assert!(explain(&w, &repo).contains("no package reaches the changed files"));

    // A leaf package's test breaks: the probe runs it alone.
    w.commit(
        &repo,
        &[(
            "text/text.go",
            "package text\n\nimport \"strings\"\n\n// Shout it.\nfunc Shout(s string) string { return strings.ToLower(s) }\n",
        )],
        "break text",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 1 of 5 packages with tests")
            && o.contains("./text  changed itself"),
        "{o}"
    );
    let (rec, stderr) = run_json(&w, &repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let phases = rec["tests"]["phases"].as_array().expect("two phases");
    assert_eq!(phases[0]["files"], serde_json::json!(["./text"]), "{rec}");
    // The probe ran text alone; the record is the command as it is, every package.
    assert_eq!(
        phases[0]["command"],
        "GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly go test -v -count=1 ./text",
        "{rec}"
    );
    assert_eq!(rec["tests"]["command"], phases[1]["command"], "{rec}");
    assert_eq!(failures(&rec), ["TestShout"], "{rec}");
    assert!(
        stderr.contains("first failure after") && stderr.contains("TestShout"),
        "{stderr}"
    );
    assert_eq!(counts(&rec), [Some(6), Some(5), Some(1)], "{rec}");

    // The next commit reaches nothing, but text failed in its parent's run: text runs first.
    w.commit(&repo, &[("NOTES.md", "text is broken\n")], "notes");
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 1 of 5 packages with tests")
            && o.contains("./text  failed in the parent's run: TestShout"),
        "{o}"
    );

    w.commit(
        &repo,
        &[(
            "text/text.go",
            "package text\n\nimport \"strings\"\n\n// Shout it.\nfunc Shout(s string) string { return strings.ToUpper(s) }\n",
        )],
        "mend text",
    );

    // The shared package breaks: it and every package importing it, transitively, first.
    w.commit(
        &repo,
        &[(
            "money/money.go",
            "package money\n\n// Cents of whole units.\nfunc Cents(units int) int { return units * 10 }\n",
        )],
        "break money",
    );
    let o = explain(&w, &repo);
    assert!(
        o.contains("phase one runs 3 of 5 packages with tests")
            && o.contains("./report  imports ./cart → ./money (changed)")
            && o.contains("./cart  imports ./money (changed)")
            && o.contains("./money  changed itself"),
        "{o}"
    );
    let (two, stderr) = run_json(&w, &repo);
    let phases = two["tests"]["phases"].as_array().expect("two phases");
    assert_eq!(
        phases[0]["files"],
        serde_json::json!(["./cart", "./money", "./report"]),
        "{two}"
    );
    assert_eq!(
        (phases[0]["failed"].clone(), phases[1]["failed"].clone()),
        (3.into(), 0.into()),
        "{two}"
    );
    assert!(stderr.contains("first failure after"), "{stderr}");

    // The same code in one phase counts the same.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &CONFIG.replace("[test]\n", "[test]\nphases = false\n"),
        )],
        "one phase",
    );
    let (one, _) = run_json(&w, &repo);
    assert!(one["tests"].get("phases").is_none(), "{one}");
    assert_eq!(counts(&two), counts(&one), "{two}\n{one}");
    assert_eq!(counts(&one), [Some(6), Some(3), Some(3)], "{one}");
    let mut a = failures(&two);
    let mut b = failures(&one);
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// A module of two packages: `cart`'s first test fails at once, `slow` (`alpha` or `text`, before
/// or after `cart`) sleeps.
fn failing_and_sleeping(w: &World, repo: &Path, config: &str, slow: &str) {
    tools::debian("/usr/bin/go", "golang-go");
    let sleeping = format!(
        "package {slow}\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) {{ time.Sleep(5 * time.Second) }}\n"
    );
    let files = [
        (".sandbox.toml", config),
        ("go.mod", "module example.com/shop\n\ngo 1.19\n"),
        (
            "cart/cart_test.go",
            "package cart\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"wrong\") }\n\nfunc TestLater(t *testing.T) {}\n",
        ),
        (&format!("{slow}/{slow}_test.go"), &sleeping),
    ];
    w.git(repo, &["rm", "-q", "-r", "tests"]);
    w.commit(repo, &files, "fails, then sleeps");
}

/// One phase (a first commit) fails at `TestFails`, known (told, recorded, an event) before
/// the sleeping package ends.
fn assert_known_before_the_sleep_ended(w: &World, repo: &Path) {
    let (rec, stderr) = run_json(w, repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    assert!(t.get("phases").is_none(), "{rec}");
    assert_eq!(failures(&rec), ["TestFails"], "{rec}");
    let first = t["first_failure_ms"].as_u64().expect("first_failure_ms");
    assert!(
        first + 3000 < t["duration_ms"].as_u64().unwrap(),
        "known before the sleeping package ended: {rec}"
    );
    assert!(
        stderr.contains("first failure after") && stderr.contains("TestFails"),
        "{stderr}"
    );
    let events = w.sandbox(repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert!(
        events.stdout.contains("TestFails") && events.stdout.contains(&format!("\"ms\":{first}")),
        "{events:?}"
    );
}

#[test]
fn go_tests_first_failure_is_known_while_a_slow_package_still_runs() {
    // `-v`: go prints a package's output when it ends, in the packages' order; `cart` comes
    // before `text`.
    let w = World::new();
    let repo = w.new_repo("go-first");
    failing_and_sleeping(&w, &repo, CONFIG, "text");
    assert_known_before_the_sleep_ended(&w, &repo);
    // `-json`: each test's events as they happen, whatever the order (`alpha` comes first).
    let w = World::new();
    let repo = w.new_repo("go-first-json");
    failing_and_sleeping(&w, &repo, &CONFIG.replace(" -v ", " -json "), "alpha");
    assert_known_before_the_sleep_ended(&w, &repo);
}
