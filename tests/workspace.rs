//! Kept checkouts: a run's tree is an overlay over a checkout kept per slot and brought up to
//! date by the tree diff; what a test does to its tree never reaches it; a kept checkout that
//! was tampered with is rebuilt, never trusted; without an overlay, fresh checkouts as before.

mod common;

use common::World;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn quick(command: &str) -> String {
    format!("[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n")
}

/// The `checkout.completed` events, oldest first.
fn checkouts(w: &World) -> Vec<Value> {
    w.sandbox(
        &w.work(),
        &[
            "events",
            "--kind",
            "checkout.completed",
            "--limit",
            "1000",
            "--json",
        ],
    )
    .stdout
    .lines()
    .map(|l| serde_json::from_str::<Value>(l).unwrap()["data"].clone())
    .collect()
}

fn scratch(w: &mut World) -> PathBuf {
    let dir = w.path("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    w.own(&dir);
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), dir.display().to_string()));
    dir
}

/// The kept `tree/` directories under a scratch dir.
fn kept_trees(scratch: &Path) -> Vec<PathBuf> {
    common::files_under(scratch)
        .into_iter()
        .filter_map(|p| {
            let s = p.to_string_lossy().into_owned();
            s.find("/lower/tree/")
                .map(|i| PathBuf::from(&s[..i + "/lower/tree".len()]))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    if let Some(w) = World::unprivileged() {
        out.push(("nobody", w));
    }
    out
}

#[test]
fn each_run_writes_only_what_its_commit_changed() {
    for (who, mut w) in worlds() {
        let scratch = scratch(&mut w);
        let repo = w.new_repo("kept");
        let files: Vec<(String, String)> = (0..50)
            .map(|i| (format!("src/m{i}.txt"), format!("{i}\n")))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        w.commit(&repo, &refs, "fifty files");
        let base = w.commit(
            &repo,
            &[(".sandbox.toml", &quick("cat src/m7.txt"))],
            "cat m7",
        );
        let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
        assert_eq!(rec["tests"]["output_tail"], "7", "{who}: {rec}");
        let first = checkouts(&w).last().unwrap().clone();
        assert_eq!(
            first["kept"],
            true,
            "{who}: {first}; {rec}; probe: {}",
            std::fs::read_to_string(w.data().join("probe.json")).unwrap_or_default()
        );
        w.commit(&repo, &[("src/m7.txt", "seven\n")], "change one file");
        let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
        assert_eq!(rec["tests"]["output_tail"], "seven", "{who}: {rec}");
        let second = checkouts(&w).last().unwrap().clone();
        assert_eq!(second["how"], "updated", "{who}: {second}");
        assert_eq!(second["files"], 1, "one file written: {who}: {second}");
        // Back to an older commit: the diff the other way.
        let o = w.sandbox(&repo, &["run", "--force", "--json", &base]);
        assert_eq!(o.json()[0]["tests"]["output_tail"], "7", "{who}: {o:?}");
        assert_eq!(checkouts(&w).last().unwrap()["how"], "updated");
        assert!(!kept_trees(&scratch).is_empty(), "{who}");
        let iso = &rec["tests"]["isolation"];
        assert!(
            !iso["not_enforced"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["layer"] == "kept_checkout"),
            "{who}: {iso}"
        );
    }
}

#[test]
fn what_a_test_does_to_its_tree_never_reaches_the_kept_checkout() {
    for (who, mut w) in worlds() {
        let scratch = scratch(&mut w);
        let repo = w.new_repo("vandal");
        w.commit(
            &repo,
            &[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")],
            "three files",
        );
        // An experiment's test that vandalises its tree …
        let o = w.sandbox(&repo, &["experiment", "start", "vandal"]);
        assert_eq!(o.code, 0, "{o:?}");
        w.git(&repo, &["switch", "-q", "experiment/vandal"]);
        w.commit(
            &repo,
            &[(
                ".sandbox.toml",
                &quick("rm a.txt && echo poisoned > b.txt && chmod 000 c.txt && mkdir -p x && touch x/y && ls"),
            )],
            "vandalise",
        );
        let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
        assert_eq!(rec["status"], "passed", "{who}: {rec}");
        let kept = kept_trees(&scratch);
        assert_eq!(kept.len(), 1, "{who}: {kept:?}");
        assert_eq!(
            std::fs::read_to_string(kept[0].join("b.txt")).unwrap(),
            "b\n"
        );
        assert!(kept[0].join("a.txt").exists() && !kept[0].join("x").exists());
        // … changes nothing production's next run sees.
        w.git(&repo, &["switch", "-q", "main"]);
        w.commit(
            &repo,
            &[(
                ".sandbox.toml",
                &quick("cat a.txt b.txt c.txt; ls -d x 2>&1 || true"),
            )],
            "look",
        );
        let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
        let out = rec["tests"]["output_tail"].as_str().unwrap();
        assert!(out.starts_with("a\nb\nc\n"), "{who}: {out}");
        assert!(out.contains("No such file"), "{who}: {out}");
    }
}

#[test]
fn a_kept_checkout_that_was_tampered_with_is_rebuilt() {
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("tamper");
    w.commit(
        &repo,
        &[("a.txt", "a\n"), (".sandbox.toml", &quick("cat a.txt"))],
        "a",
    );
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let kept = kept_trees(&scratch);
    std::fs::write(kept[0].join("a.txt"), "tampered\n").unwrap();
    let rec = w.sandbox(&repo, &["run", "--force", "--json"]).json()[0].clone();
    assert_eq!(rec["tests"]["output_tail"], "a", "{rec}");
    assert_eq!(checkouts(&w).last().unwrap()["how"], "rebuilt");
    assert_eq!(
        std::fs::read_to_string(kept[0].join("a.txt")).unwrap(),
        "a\n"
    );
}

#[test]
fn without_an_overlay_runs_get_fresh_checkouts_and_say_so() {
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("no-overlay");
    w.commit(
        &repo,
        &[(".sandbox.toml", &quick("echo x > f && cat f"))],
        "write",
    );
    // This machine's probe, edited to say overlayfs is missing (as on an old kernel).
    let mut probe = w.sandbox(&w.work(), &["doctor", "--json"]).json();
    for l in probe["isolation"]["layers"].as_array_mut().unwrap() {
        if l["layer"] == "disk_limit" {
            l["status"] = "unavailable".into();
            l["detail"] = "no overlay over the run's directory (ENODEV)".into();
        }
    }
    std::fs::write(w.data().join("probe.json"), probe.to_string()).unwrap();
    let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
    assert_eq!(rec["tests"]["output_tail"], "x", "{rec}");
    let not: Vec<&Value> = rec["tests"]["isolation"]["not_enforced"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert!(
        not.iter()
            .any(|l| l["layer"] == "kept_checkout" && l["status"] == "off"),
        "{rec}"
    );
    assert_eq!(checkouts(&w).last().unwrap()["kept"], false);
    assert!(kept_trees(&scratch).is_empty());
}

#[test]
fn exec_and_parallel_runs_use_their_own_slots() {
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("slots");
    w.commit(
        &repo,
        &[(".sandbox.toml", &quick("sleep 1; cat README.md | head -1"))],
        "slow",
    );
    // Two runs at once: each holds a slot of its own.
    let a = w.spawn(&repo, &["run", "--force"]);
    let b = w.spawn(&repo, &["run", "--force"]);
    for mut r in [a, b] {
        assert!(r.child.wait().unwrap().success());
    }
    let slots: std::collections::BTreeSet<String> = kept_trees(&scratch)
        .iter()
        .map(|t| {
            t.components()
                .find_map(|c| {
                    let c = c.as_os_str().to_string_lossy();
                    c.starts_with("slot-").then(|| c.to_string())
                })
                .unwrap()
        })
        .collect();
    assert_eq!(slots.len(), 2, "{slots:?}");
    // exec reuses a kept checkout: nothing to write the second time.
    let o = w.sandbox(&repo, &["exec", "HEAD", "--", "cat", ".sandbox.toml"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("sleep 1"), "{o:?}");
}
