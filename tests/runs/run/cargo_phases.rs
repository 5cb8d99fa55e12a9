//! The probe with cargo test: in a workspace, the crates a change reaches (those it changed and
//! every crate that depends on them through a path dependency) run beside the command; the
//! record is the command's run of the whole workspace.

use crate::common::World;
use std::path::Path;

/// `--no-fail-fast`: without it cargo stops at the first failing test binary, in one phase as in
/// two, and neither counts the whole workspace.
const CONFIG: &str = "[test]\ncommand = \"cargo test --workspace --no-fail-fast\"\ntimeout = \"300s\"\n[analysis]\nenabled = false\n";

/// A workspace of four crates, path dependencies only (no network): `mid` depends on `leaf`,
/// `top` on `mid` for its tests alone (a dev-dependency), `other` on nothing. Each has one
/// integration test of its own function; `mid` also one that sleeps 4 s.
fn workspace(w: &World, repo: &Path) {
    let manifest = |name: &str, deps: &str| {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n{deps}")
    };
    let files = [
        (".sandbox.toml".to_string(), CONFIG.to_string()),
        (
            "Cargo.toml".into(),
            "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n".into(),
        ),
        ("crates/leaf/Cargo.toml".into(), manifest("leaf", "")),
        (
            "crates/leaf/src/lib.rs".into(),
            "pub fn f() -> u32 {\n    1\n}\n".into(),
        ),
        (
            "crates/leaf/tests/leaf.rs".into(),
            "#[test]\nfn one() {\n    assert_eq!(leaf::f(), 1);\n}\n".into(),
        ),
        (
            "crates/mid/Cargo.toml".into(),
            manifest("mid", "[dependencies]\nleaf = { path = \"../leaf\" }\n"),
        ),
        (
            "crates/mid/src/lib.rs".into(),
            "pub fn f() -> u32 {\n    leaf::f() + 1\n}\n".into(),
        ),
        (
            "crates/mid/tests/mid.rs".into(),
            "#[test]\nfn two() {\n    assert_eq!(mid::f(), 2);\n}\n\n#[test]\nfn slow() {\n    std::thread::sleep(std::time::Duration::from_secs(4));\n}\n".into(),
        ),
        (
            "crates/top/Cargo.toml".into(),
            manifest("top", "[dev-dependencies]\nmid = { path = \"../mid\" }\n"),
        ),
        (
            "crates/top/src/lib.rs".into(),
            "pub fn f() -> u32 {\n    3\n}\n".into(),
        ),
        (
            "crates/top/tests/top.rs".into(),
            "#[test]\nfn three() {\n    assert_eq!(mid::f() + 1, top::f());\n}\n".into(),
        ),
        ("crates/other/Cargo.toml".into(), manifest("other", "")),
        (
            "crates/other/src/lib.rs".into(),
            "pub fn f() -> u32 {\n    4\n}\n".into(),
        ),
        (
            "crates/other/tests/other.rs".into(),
            "#[test]\nfn four() {\n    assert_eq!(other::f(), 4);\n}\n".into(),
        ),
    ];
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(repo, &["rm", "-q", "-r", "tests"]);
    w.commit(repo, &refs, "a workspace of four crates");
}

fn run_json(w: &World, repo: &Path) -> serde_json::Value {
    let o = w.sandbox(repo, &["run", "--json"]);
    o.json()[0].clone()
}

#[test]
fn a_change_in_a_leaf_crate_runs_it_and_its_dependents_first() {
    let w = World::new();
    let repo = w.new_repo("cargo-phases");
    workspace(&w, &repo);
    let base = run_json(&w, &repo);
    assert_eq!(base["status"], "passed", "{base}");
    assert_eq!(base["tests"]["total"], 5, "{base}");
    assert!(base["tests"].get("phases").is_none(), "{base}");

    // Which crates a change reaches, without running anything.
    w.commit(
        &repo,
        &[(
            "crates/top/src/lib.rs",
            "pub fn f() -> u32 {\n    1 + 2\n}\n",
        )],
        "touch top",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(
        o.stdout.contains("phase one runs 1 of 4 crates")
            && o.stdout.contains("top  changed itself"),
        "{o:?}"
    );
    w.commit(&repo, &[("Cargo.lock", "# a lockfile\n")], "a lockfile");
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(
        o.stdout
            .contains("one phase, the whole suite: Cargo.lock changed"),
        "{o:?}"
    );
    w.commit(&repo, &[("fixtures/data.json", "{}\n")], "data");
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(
        o.stdout
            .contains("fixtures/data.json changed: it is in no crate of the workspace"),
        "{o:?}"
    );
    w.git(&repo, &["rm", "-q", "Cargo.lock"]);
    w.commit(&repo, &[], "no lockfile");
    assert_eq!(run_json(&w, &repo)["status"], "passed");

    // Break the leaf crate: leaf, mid (its dependency) and top (mid's, for its tests) first.
    w.commit(
        &repo,
        &[("crates/leaf/src/lib.rs", "pub fn f() -> u32 {\n    0\n}\n")],
        "break leaf",
    );
    let o = w.sandbox(&repo, &["run", "--explain-selection"]);
    assert!(
        o.stdout.contains("phase one runs 3 of 4 crates")
            && o.stdout.contains("top  depends on mid → leaf (changed)"),
        "{o:?}"
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "failed", "{rec}");
    let t = &rec["tests"];
    let phases = t["phases"].as_array().expect("two phases");
    assert_eq!(
        phases[0]["files"],
        serde_json::json!(["leaf", "mid", "top"]),
        "{rec}"
    );
    assert_eq!(
        phases[0]["command"], "cargo test --no-fail-fast -p leaf -p mid -p top",
        "{rec}"
    );
    assert_eq!(
        (phases[0]["failed"].clone(), phases[0]["passed"].clone()),
        (3.into(), 1.into()),
        "{rec}"
    );
    // The record is the command as it is; phase two, the rest of its run.
    assert_eq!(phases[1]["command"], t["command"], "{rec}");
    assert_eq!(
        (phases[1]["failed"].clone(), phases[1]["passed"].clone()),
        (0.into(), 1.into()),
        "{rec}"
    );
    // One record of the whole workspace: what a one-phase run counts.
    assert_eq!(
        (t["total"].clone(), t["failed"].clone(), t["passed"].clone()),
        (5.into(), 3.into(), 2.into()),
        "{rec}"
    );
    let names: Vec<&str> = t["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one", "two", "three"], "{rec}");
    // Known at libtest's `test one ... FAILED`, while mid's sleeping test still ran.
    assert!(
        t["first_failure_ms"].as_u64().unwrap() + 3000 < phases[0]["duration_ms"].as_u64().unwrap(),
        "{rec}"
    );
    let events = w.sandbox(&repo, &["events", "--kind", "run.first_failure", "--json"]);
    assert!(events.stdout.contains("\"test\":\"one\""), "{events:?}");
}

#[test]
fn a_plain_cargo_test_in_a_workspace_with_a_root_package_runs_in_one_phase() {
    let w = World::new();
    let repo = w.new_repo("cargo-root");
    let explain = |w: &World| w.sandbox(&repo, &["run", "--explain-selection"]).stdout;
    let files = [
        (".sandbox.toml", "[test]\ncommand = \"cargo test\"\n"),
        (
            "Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[workspace]\nmembers = [\"libs/core\", \"tools/*\"]\n[dependencies]\ncore = { path = \"libs/core\" }\n",
        ),
        ("src/main.rs", "fn main() {}\n"),
        (
            "libs/core/Cargo.toml",
            "[package]\nname = \"core\"\nversion = \"0.1.0\"\n",
        ),
        ("libs/core/src/lib.rs", "\n"),
        (
            "tools/gen/Cargo.toml",
            "[package]\nname = \"gen\"\nversion = \"0.1.0\"\n",
        ),
        ("tools/gen/src/main.rs", "fn main() {}\n"),
    ];
    w.commit(&repo, &files, "a root package and two members");
    w.commit(
        &repo,
        &[("libs/core/src/lib.rs", "pub fn f() {}\n")],
        "core",
    );
    let one = explain(&w);
    assert!(
        one.contains("one phase, the whole suite: `cargo test` tests the root package only"),
        "{one}"
    );
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"cargo test --workspace\"\n",
        )],
        "every member",
    );
    w.commit(
        &repo,
        &[("libs/core/src/lib.rs", "pub fn g() {}\n")],
        "core again",
    );
    let two = explain(&w);
    assert!(
        two.contains("phase one runs 2 of 3 crates")
            && two.contains("app  depends on core (changed)")
            && two.contains("core  changed itself"),
        "{two}"
    );
    // The root package holds what no other member does.
    w.commit(&repo, &[("fixtures/data.json", "{}\n")], "data");
    let data = explain(&w);
    assert!(
        data.contains("phase one runs 1 of 3 crates") && data.contains("app  changed itself"),
        "{data}"
    );
    // With no command configured, the one detected tests every member.
    w.git(&repo, &["rm", "-q", ".sandbox.toml"]);
    w.commit(
        &repo,
        &[("libs/core/src/lib.rs", "#[test]\nfn in_core() {}\n")],
        "a test in core, no config",
    );
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["tests"]["command"], "cargo test --workspace", "{rec}");
    let log = std::fs::read_to_string(w.log_of(rec["commit"].as_str().unwrap())).unwrap();
    assert!(log.contains("test in_core ... ok"), "{log}");
}
