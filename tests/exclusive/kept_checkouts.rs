//! Kept checkouts: a run's tree is an overlay over a checkout kept per slot and brought up to
//! date by the tree diff; what a test does to its tree never reaches it; a kept checkout that
//! was tampered with is rebuilt, never trusted; without an overlay, fresh checkouts as before.

use crate::common;

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

/// The tests here assert which slot a run used and how it was prepared. As root, a slot's uid is
/// machine-wide (held with a lock under /run), so parallel tests would take each other's slots:
/// they run one at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
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
    let _serial = one_at_a_time();
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
        // doctor says so too.
        let doctor = w.sandbox(&w.work(), &["doctor", "--json"]).json();
        let layer = doctor["isolation"]["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layer"] == "kept_checkout")
            .cloned();
        assert_eq!(layer.unwrap()["status"], "enforced", "{who}: {doctor}");
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
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("tamper");
    w.commit(
        &repo,
        &[("a.txt", "a\n"), (".sandbox.toml", &quick("cat a.txt"))],
        "a",
    );
    // One slot: the repository's first commit and this one (both pending) run in it one after
    // the other, so one checkout is kept, the one the next run finds tampered with.
    assert_eq!(w.sandbox(&repo, &["run", "-j", "1"]).code, 0);
    let kept = kept_trees(&scratch);
    assert_eq!(kept.len(), 1, "{kept:?}");
    for k in &kept {
        std::fs::write(k.join("a.txt"), "tampered\n").unwrap();
    }
    let before = checkouts(&w).len();
    let rec = w.sandbox(&repo, &["run", "--force", "--json"]).json()[0].clone();
    assert_eq!(rec["tests"]["output_tail"], "a", "{rec}");
    // Found by the check that starts with the process, before the run: no run in the altered
    // tree to throw away, one checkout, made afresh.
    let made: Vec<Value> = checkouts(&w)[before..]
        .iter()
        .map(|c| c["how"].clone())
        .collect();
    assert_eq!(made, ["rebuilt"]);
    for k in kept_trees(&scratch) {
        assert_eq!(std::fs::read_to_string(k.join("a.txt")).unwrap(), "a\n");
    }
    // `exec` checks too: a command that ran in an altered kept checkout fails, says why, and the
    // next one sees the commit's tree.
    for k in kept_trees(&scratch) {
        std::fs::write(k.join("a.txt"), "tampered again\n").unwrap();
    }
    let o = w.sandbox(&repo, &["exec", "HEAD", "--", "cat", "a.txt"]);
    assert_eq!(o.code, 1, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains("had been altered outside git-sandbox"),
        "{o:?}"
    );
    assert_eq!(hints, ["run the command again"]);
    let o = w.sandbox(&repo, &["exec", "HEAD", "--", "cat", "a.txt"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "a\n"), "{o:?}");
}

/// What a setup step builds is kept for later runs, so it is built only on a tree known to be
/// the commit's: a kept checkout altered outside git-sandbox is found before the step runs, and
/// checked out afresh; the step and the tests see the commit's files.
#[test]
fn a_setup_step_is_never_built_on_a_kept_checkout_that_was_tampered_with() {
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("tamper-setup");
    w.commit(
        &repo,
        &[("a.txt", "a\n"), (".sandbox.toml", &quick("cat a.txt"))],
        "a",
    );
    // One slot: the repository's first commit and this one (both pending) run in it one after
    // the other, so one checkout is kept, the one the next run finds tampered with.
    assert_eq!(w.sandbox(&repo, &["run", "-j", "1"]).code, 0);
    let kept = kept_trees(&scratch);
    assert_eq!(kept.len(), 1, "{kept:?}");
    for k in &kept {
        std::fs::write(k.join("a.txt"), "tampered\n").unwrap();
    }
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\nsetup = \"cp a.txt built.txt\"\ncommand = \"cat built.txt a.txt\"\n[analysis]\nenabled = false\n",
        )],
        "a setup step",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{o:?}");
    assert_eq!(rec["tests"]["output_tail"], "a\na", "{rec}");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    let how: Vec<Value> = checkouts(&w).iter().map(|c| c["how"].clone()).collect();
    assert_eq!(how.last().unwrap(), "rebuilt", "{how:?}");
}

/// One way of altering a kept checkout outside git-sandbox.
type Alteration = (&'static str, fn(&Path));

/// Each way of altering a kept checkout where the next commit's diff does not reach — a file
/// rewritten at the same size, one added, one replaced by a link, one chmodded, one rewritten
/// with its mtime set back — is seen by the next process that uses it: its run gets the commit's
/// tree, checked out afresh.
#[test]
fn a_kept_checkout_altered_outside_the_diff_is_rebuilt_whatever_the_alteration() {
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("alter");
    let look = "cat d/b.txt; stat -c %a d/b.txt; find . | sort";
    w.commit(
        &repo,
        &[
            ("a.txt", "0\n"),
            ("d/b.txt", "bbbb\n"),
            (".sandbox.toml", &quick(look)),
        ],
        "base",
    );
    let seen = |w: &World| {
        let rec = w.sandbox(&repo, &["run", "--json"]).json()[0].clone();
        let how = checkouts(w).last().unwrap()["how"].clone();
        (
            rec["tests"]["output_tail"].as_str().unwrap().to_string(),
            how,
        )
    };
    let (baseline, _) = seen(&w);
    assert!(baseline.starts_with("bbbb\n"), "{baseline}");
    // Untouched, the kept checkout is brought up to date by the diff (unless another run on
    // this machine holds the slot's uid: then the run takes a fresh slot).
    w.commit(&repo, &[("a.txt", "1\n")], "untouched");
    assert_eq!(seen(&w).0, baseline);
    let alterations: [Alteration; 5] = [
        ("rewritten", |k| {
            std::fs::write(k.join("d/b.txt"), "BBBB\n").unwrap()
        }),
        ("added", |k| {
            std::fs::write(k.join("d/new.txt"), "").unwrap()
        }),
        ("replaced by a link", |k| {
            std::fs::remove_file(k.join("d/b.txt")).unwrap();
            std::os::unix::fs::symlink("/etc/hostname", k.join("d/b.txt")).unwrap();
        }),
        ("chmodded", |k| {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(k.join("d/b.txt"), mode).unwrap();
        }),
        ("rewritten, its mtime set back", |k| {
            let p = k.join("d/b.txt");
            let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
            std::fs::write(&p, "BBBB\n").unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(mtime).unwrap();
            assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime);
        }),
    ];
    for (i, (what, alter)) in alterations.iter().enumerate() {
        // Every kept checkout still as the commit left it (another run on this machine may hold
        // a slot's uid, and then a run takes another slot).
        let pristine: Vec<PathBuf> = kept_trees(&scratch)
            .into_iter()
            .filter(|k| {
                let b = k.join("d/b.txt");
                std::fs::symlink_metadata(&b).is_ok_and(|m| m.is_file())
                    && std::fs::read_to_string(&b).unwrap() == "bbbb\n"
                    && !k.join("d/new.txt").exists()
            })
            .collect();
        assert!(!pristine.is_empty(), "{what}");
        for k in &pristine {
            alter(k);
        }
        w.commit(&repo, &[("a.txt", &format!("{}\n", i + 2))], what);
        let (out, how) = seen(&w);
        assert_eq!(out, baseline, "{what}");
        assert_eq!(how, "rebuilt", "{what}");
    }
}

#[test]
fn a_slot_keeps_the_checkouts_of_its_most_recently_used_repositories_only() {
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let most = gs_runner::rundir::KEPT_PER_SLOT;
    let repos: Vec<PathBuf> = (0..most + 2)
        .map(|i| {
            let repo = w.new_repo(&format!("many{i}"));
            w.commit(
                &repo,
                &[
                    ("n.txt", &format!("{i}\n")),
                    (".sandbox.toml", &quick("cat n.txt")),
                ],
                "n",
            );
            assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
            repo
        })
        .collect();
    // One slot (runs one after the other), the newest repositories' checkouts in it.
    assert_eq!(kept_trees(&scratch).len(), most);
    let again = |repo: &Path, n: usize| {
        let rec = w.sandbox(repo, &["run", "--force", "--json"]).json()[0].clone();
        assert_eq!(rec["tests"]["output_tail"], n.to_string(), "{rec}");
        checkouts(&w).last().unwrap()["how"].clone()
    };
    assert_eq!(again(&repos[most + 1], most + 1), "updated");
    assert_eq!(again(&repos[2], 2), "updated");
    // The least recently used went; its repository's next run checks out afresh.
    assert_eq!(again(&repos[0], 0), "rebuilt");
    assert_eq!(kept_trees(&scratch).len(), most);
}

#[test]
fn without_an_overlay_runs_get_fresh_checkouts_and_say_so() {
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("slots");
    let slow = w.commit(
        &repo,
        &[(".sandbox.toml", &quick("sleep 8; cat README.md | head -1"))],
        "slow",
    );
    w.commit(
        &repo,
        &[(".sandbox.toml", &quick("cat README.md | head -1"))],
        "quick",
    );
    // Two runs at once: each holds a slot of its own. The second starts once the first holds
    // its slot (its checkout is there) and ends while the first still sleeps.
    let mut a = w.spawn(&repo, &["run", "--force", &slow]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while kept_trees(&scratch).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run took no slot"
        );
        assert!(
            a.child.try_wait().unwrap().is_none(),
            "the first run ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let b = w.sandbox(&repo, &["run", "--force", "HEAD"]);
    assert_eq!(b.code, 0, "{b:?}");
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "the first run ended before the second: the test proves nothing"
    );
    assert!(a.child.wait().unwrap().success());
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
    assert!(o.stdout.contains("cat README.md"), "{o:?}");
}

/// A command that shows what a run starts with under `out/`, then writes there.
fn cache_probe(write: &str) -> String {
    format!(
        "[test]\ncommand = \"ls out 2>/dev/null | tr '\\\\n' ' '; echo; cat out/p.txt 2>/dev/null; mkdir -p out; {write}\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n"
    )
}

fn output_of(who: &str, w: &World, repo: &Path) -> String {
    let o = w.sandbox(repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{who}: {o:?}");
    o.json()[0]["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn build_caches_persist_per_branch_and_never_flow_upward() {
    let _serial = one_at_a_time();
    for (who, w) in worlds() {
        let repo = w.new_repo("caches");
        // Production leaves out/p.txt.
        w.commit(
            &repo,
            &[(".sandbox.toml", &cache_probe("echo prod-1 > out/p.txt"))],
            "production writes its cache",
        );
        let first = output_of(who, &w, &repo);
        assert!(first.trim().is_empty(), "{who}: starts cold: {first:?}");
        w.commit(&repo, &[("x.txt", "1")], "production again");
        assert!(
            output_of(who, &w, &repo).contains("prod-1"),
            "{who}: production's cache kept"
        );
        // An experiment starts from production's cache, then poisons what it sees and deletes.
        assert_eq!(w.sandbox(&repo, &["experiment", "start", "poison"]).code, 0);
        w.git(&repo, &["switch", "-q", "experiment/poison"]);
        w.commit(
            &repo,
            &[(
                ".sandbox.toml",
                &cache_probe("echo poison > out/p.txt; echo e > out/e.txt"),
            )],
            "poison",
        );
        let seen = output_of(who, &w, &repo);
        assert!(
            seen.contains("prod-1"),
            "{who}: from production's cache: {seen:?}"
        );
        w.commit(
            &repo,
            &[(".sandbox.toml", &cache_probe("rm out/p.txt"))],
            "delete",
        );
        let seen = output_of(who, &w, &repo);
        assert!(
            seen.contains("poison") && seen.contains("e.txt"),
            "{who}: its own cache: {seen:?}"
        );
        w.commit(
            &repo,
            &[(".sandbox.toml", &cache_probe("true"))],
            "after the delete",
        );
        let seen = output_of(who, &w, &repo);
        assert!(
            !seen.contains("p.txt"),
            "{who}: the deletion is kept: {seen:?}"
        );
        // Production never sees any of it.
        w.git(&repo, &["switch", "-q", "main"]);
        w.commit(&repo, &[("z.txt", "1")], "production once more");
        let seen = output_of(who, &w, &repo);
        assert!(
            seen.contains("prod-1") && !seen.contains("poison") && !seen.contains("e.txt"),
            "{who}: production's cache is production's: {seen:?}"
        );
    }
}

#[test]
fn runs_of_a_range_that_write_nothing_lose_no_later_runs_writes_and_leave_no_stage() {
    let _serial = one_at_a_time();
    for (who, w) in worlds() {
        let repo = w.new_repo("spare");
        // A run keeps what W holds in out/log, and writes nothing when W is empty.
        let cfg = "[test]\ncommand = \"if [ -s W ]; then mkdir -p out && cat W >> out/log; fi; cat out/log 2>/dev/null; true\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n";
        let base = w.commit(&repo, &[(".sandbox.toml", cfg), ("W", "")], "config");
        w.commit(&repo, &[("W", "one\n")], "writes one");
        w.commit(&repo, &[("W", "")], "writes nothing");
        w.commit(&repo, &[("X", "1")], "writes nothing again");
        w.commit(&repo, &[("W", "two\n")], "writes two");
        // A tree of its own (a run of a tree already run is that run's result again).
        w.commit(&repo, &[("W", ""), ("Y", "1")], "reads both");
        let range = format!("{base}..main");
        let o = w.sandbox(&repo, &["run", "-j", "1", "--json", &range]);
        assert_eq!(o.code, 0, "{who}: {o:?}");
        let tails: Vec<String> = o
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["tests"]["output_tail"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(tails.len(), 5, "{who}: {tails:?}");
        assert_eq!(tails[2].trim(), "one", "{who}: {tails:?}");
        assert_eq!(
            tails[4].trim(),
            "one\ntwo",
            "{who}: the write after the empty runs is kept: {tails:?}"
        );
        // The stage the empty runs shared went with the process: no half-made generation.
        let cache = w.data().join("cache");
        let stages: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .flat_map(|r| std::fs::read_dir(r.path()).unwrap().flatten())
            .flat_map(|b| std::fs::read_dir(b.path()).unwrap().flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("new-"))
            .collect();
        assert!(stages.is_empty(), "{who}: {stages:?}");
    }
}

#[test]
fn a_cache_never_hides_or_replaces_a_file_of_the_commit() {
    let _serial = one_at_a_time();
    for (who, w) in worlds() {
        let repo = w.new_repo("evidence");
        // out/ is a cache dir, and the commit tracks a file in it; the run rewrites that file,
        // deletes another tracked one, and leaves an untracked one.
        let cfg = "[test]\ncommand = \"cat out/t.txt out/u.txt; echo rewritten > out/t.txt; rm out/u.txt; echo kept > out/k.txt\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n";
        w.commit(
            &repo,
            &[
                (".sandbox.toml", cfg),
                ("out/t.txt", "t1\n"),
                ("out/u.txt", "u1\n"),
            ],
            "tracked files in a cache dir",
        );
        assert_eq!(output_of(who, &w, &repo), "t1\nu1");
        // The next commit changes the rewritten file and keeps the deleted one: the run sees the
        // commit's files, not the cache's.
        w.commit(&repo, &[("out/t.txt", "t2\n")], "t2");
        assert_eq!(output_of(who, &w, &repo), "t2\nu1", "{who}");
        // A commit that adds a file where the cache has one gets its own.
        let cfg2 = "[test]\ncommand = \"cat out/k.txt\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n";
        w.commit(
            &repo,
            &[(".sandbox.toml", cfg2), ("out/k.txt", "from the commit\n")],
            "k tracked",
        );
        assert_eq!(output_of(who, &w, &repo), "from the commit", "{who}");
    }
}

#[test]
fn every_run_sees_its_tree_at_one_path_so_absolute_paths_in_caches_stay_valid() {
    let _serial = one_at_a_time();
    for (who, w) in worlds() {
        let repo = w.new_repo("one-path");
        w.commit(
            &repo,
            &[(".sandbox.toml", &quick("pwd; echo $HOME $TMPDIR"))],
            "where",
        );
        let first = output_of(who, &w, &repo);
        w.commit(&repo, &[("a.txt", "1")], "again");
        let second = output_of(who, &w, &repo);
        assert_eq!(first, second, "{who}");
        assert_eq!(
            first, "/tmp/git-sandbox/run/tree\n/tmp/git-sandbox/run/home /tmp/git-sandbox/run/tmp",
            "{who}"
        );
        let o = w.sandbox(&repo, &["exec", "HEAD", "--", "pwd"]);
        assert_eq!(o.stdout, "/tmp/git-sandbox/run/tree\n", "{who}: {o:?}");
    }
}

/// Whether a process holds a slot of the kept checkouts under `scratch`.
fn a_slot_held(scratch: &Path) -> bool {
    common::files_under(scratch)
        .iter()
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("slot-") && n.ends_with(".lock")
        })
        .any(|p| std::fs::File::open(p).is_ok_and(|f| f.try_lock().is_err()))
}

/// Build tools trust an output newer than its sources (make, cargo's fingerprints): a kept
/// checkout that already holds the commit's tree has files older than what a run in another
/// slot built from another tree, and that output must not pass for this tree's.
#[test]
fn an_output_built_from_another_tree_in_another_slot_is_rebuilt() {
    let _serial = one_at_a_time();
    let mut w = World::new();
    let scratch = scratch(&mut w);
    let repo = w.new_repo("stale");
    // out/r is rebuilt from src.txt when older than it, as make would.
    let cfg = "[test]\ncommand = \"mkdir -p out; [ out/r -nt src.txt ] || cp src.txt out/r; cmp src.txt out/r\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n";
    w.commit(&repo, &[(".sandbox.toml", cfg), ("src.txt", "a\n")], "a");
    let status = |rev: &str| {
        let o = w.sandbox(&repo, &["run", "--json", "--force", rev]);
        o.json()[0]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(status("main"), "passed");
    w.commit(&repo, &[("src.txt", "b\n")], "b");
    // The slot that ran a keeps a's tree while an exec of a holds it, so b runs in another
    // slot, and its out/r (b's) becomes the branch's newest cache.
    let mut hold = w.spawn(&repo, &["exec", "main~1", "--", "sleep", "8"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !a_slot_held(&scratch) {
        assert!(
            std::time::Instant::now() < deadline,
            "the exec took no slot"
        );
        assert!(
            hold.child.try_wait().unwrap().is_none(),
            "the exec ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(status("main"), "passed");
    assert!(
        hold.child.try_wait().unwrap().is_none(),
        "the exec ended before b's run: the test proves nothing"
    );
    assert!(hold.child.wait().unwrap().success());
    assert_eq!(
        kept_trees(&scratch).len(),
        2,
        "a and b in slots of their own"
    );
    // a again, in the slot that still holds a's tree: its src.txt is older than b's out/r.
    assert_eq!(status("main~1"), "passed", "b's output taken for a's");
    let last = checkouts(&w).last().unwrap().clone();
    assert_eq!(last["files"], 0, "a's tree was kept: {last}");
}

/// `checkout.completed`'s `ms` is the checkout's own time: the stages before it (reading the
/// commit's config, the earlier-result lookup), which end before `run.started` is logged, are
/// not in it.
#[test]
fn checkout_time_is_the_checkouts_own() {
    let _serial = one_at_a_time();
    let w = World::new();
    let repo = w.new_repo("timed");
    // A config near the 1 MiB a config may hold: reading it takes the config stage many milliseconds.
    let padding =
        "# padding padding padding padding padding padding padding padding\n".repeat(14_000);
    w.commit(
        &repo,
        &[(".sandbox.toml", &format!("{}{padding}", quick("true")))],
        "big config",
    );
    let o = w.sandbox(&repo, &["run", "--force"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let events: Vec<Value> = w
        .sandbox(&w.work(), &["events", "--limit", "1000", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    let at = |kind: &str| {
        let e = events
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}: {events:?}"));
        let t = e["time"].as_str().unwrap();
        (chrono_ms(t), e["data"].clone())
    };
    let (started, _) = at("run.started");
    let (done, data) = at("checkout.completed");
    let ms = data["ms"].as_i64().unwrap();
    assert!(
        ms <= done - started,
        "checkout took {ms} ms by its event, but only {} ms passed between run.started and checkout.completed: {data}",
        done - started
    );
}

/// Milliseconds of an RFC 3339 time `YYYY-MM-DDTHH:MM:SS.mmmZ` (within one day is enough here).
fn chrono_ms(t: &str) -> i64 {
    let clock = t.split('T').nth(1).unwrap().trim_end_matches('Z');
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let p: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: i64 = format!("{frac:0<3}")[..3].parse().unwrap();
    ((p[0] * 60 + p[1]) * 60 + p[2]) * 1000 + ms
}
