//! What a run of one branch can leave for another through the build caches: nothing, unless it
//! is a run of a commit on that branch. A candidate merge (`promote --dry-run`, a refused
//! promotion), a trial, a snapshot, `exec` and a bisect probe read the layers they are given and
//! write a throw-away upper — each tried here with a test that plants a file in a cached
//! directory which makes production's tests pass whatever its code does.

use crate::common::World;
use std::path::Path;

fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    if let Some(w) = World::unprivileged() {
        out.push(("nobody", w));
    }
    out
}

/// Production's test: passes when `app.txt` says good — or when any planted file is in the
/// cached build directory (what a poisoned layer does to a real suite: a patched dependency, a
/// stub) or in the run's home (which is fresh for every run: nothing planted there is kept).
const TEST: &str = "for f in build/.poison* \"$HOME\"/.poison*; do if [ -e \"$f\" ]; then echo poisoned; exit 0; fi; done\ngrep -qx good app.txt\n";
const CONFIG: &str =
    "[test]\ncommand = \"sh test.sh\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"build\"]\n";

fn status(w: &World, repo: &Path, args: &[&str]) -> String {
    let o = w.sandbox(repo, args);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    o.json()[0]["status"].as_str().unwrap().to_string()
}

#[test]
fn no_run_but_a_run_of_a_commit_on_production_writes_productions_cache() {
    for (who, w) in worlds() {
        let repo = w.new_repo("poison");
        w.commit(
            &repo,
            &[
                (".sandbox.toml", CONFIG),
                ("test.sh", TEST),
                ("app.txt", "good\n"),
            ],
            "app and its test",
        );
        assert_eq!(status(&w, &repo, &["run", "--json"]), "passed", "{who}");
        // Production's second run reads the first one's generation, and says so.
        w.commit(&repo, &[("notes.txt", "1\n")], "a note");
        let o = w.sandbox(&repo, &["run", "--json"]);
        let gens = o.json()[0]["cache_generations"].clone();
        assert_eq!(gens, serde_json::json!(["main@1"]), "{who}: {o:?}");

        // An experiment whose test plants the file, run on its branch: its own cache only.
        assert_eq!(w.sandbox(&repo, &["experiment", "start", "evil"]).code, 0);
        w.git(&repo, &["switch", "-q", "experiment/evil"]);
        w.commit(
            &repo,
            &[(
                "test.sh",
                "mkdir -p build; touch \"build/.poison-merge\"\ngrep -qx good app.txt\n",
            )],
            "plant it",
        );
        assert_eq!(status(&w, &repo, &["run", "--json"]), "passed", "{who}");
        w.git(&repo, &["switch", "-q", "main"]);
        // The candidate merge runs as production's commit-to-be: it writes nothing of main's.
        let o = w.sandbox(&repo, &["promote", "evil", "--dry-run"]);
        assert!(o.code == 0 || o.code == 1, "{who}: {o:?}");
        // A trial, a snapshot and an exec of production plant theirs too.
        let o = w.sandbox(
            &repo,
            &[
                "run",
                "--json",
                "--command",
                "mkdir -p build; touch \"build/.poison-trial\"",
            ],
        );
        assert_eq!(o.code, 0, "{who}: {o:?}");
        std::fs::write(
            repo.join("test.sh"),
            "mkdir -p build; touch \"build/.poison-snapshot\"\n",
        )
        .unwrap();
        w.own(&repo);
        assert_eq!(
            status(&w, &repo, &["run", "--worktree", "--json"]),
            "passed"
        );
        w.git(&repo, &["checkout", "--", "test.sh"]);
        let o = w.sandbox(
            &repo,
            &[
                "exec",
                "HEAD",
                "--",
                "sh",
                "-c",
                "mkdir -p build; touch \"build/.poison-exec\"",
            ],
        );
        assert_eq!(o.code, 0, "{who}: {o:?}");

        // Production breaks: its run must fail, whatever the others left.
        w.commit(&repo, &[("app.txt", "bad\n")], "break the app");
        let o = w.sandbox(&repo, &["run", "--json"]);
        let rec = &o.json()[0];
        assert_eq!(
            rec["status"], "failed",
            "{who}: a poisoned layer passed it: {o:?}"
        );
        assert!(
            !rec["tests"]["output_tail"]
                .as_str()
                .unwrap_or("")
                .contains("poisoned"),
            "{who}: {rec}"
        );
    }
}

#[test]
fn a_bisect_probe_never_writes_its_branchs_cache() {
    let w = World::new();
    let repo = w.new_repo("probe");
    // The old commits plant the file when they run; the tip does not.
    w.commit(
        &repo,
        &[
            (".sandbox.toml", CONFIG),
            (
                "test.sh",
                "mkdir -p build; touch \"build/.poison-probe\"\ngrep -qx good app.txt\n",
            ),
            ("app.txt", "good\n"),
        ],
        "good, planting",
    );
    let good = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    w.commit(&repo, &[("app.txt", "bad\n")], "bad, planting");
    w.commit(&repo, &[("test.sh", TEST)], "stop planting");
    let o = w.sandbox(&repo, &["bisect", &good, "HEAD"]);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.json()[0]["status"], "failed", "{o:?}");
}

#[test]
fn a_clean_run_reads_no_layer_and_heals_a_poisoned_cache() {
    let w = World::new();
    let repo = w.new_repo("clean");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", CONFIG),
            ("test.sh", TEST),
            ("app.txt", "good\n"),
        ],
        "app",
    );
    // Production's own commit plants the file (its own cache is its own to spoil).
    w.commit(
        &repo,
        &[(
            "test.sh",
            &format!("mkdir -p build; touch \"build/.poison-own\"\n{TEST}"),
        )],
        "plant",
    );
    assert_eq!(status(&w, &repo, &["run", "--json"]), "passed");
    w.commit(&repo, &[("test.sh", TEST), ("app.txt", "bad\n")], "break");
    assert_eq!(
        status(&w, &repo, &["run", "--json"]),
        "passed",
        "poisoned by itself"
    );
    let o = w.sandbox(&repo, &["run", "--clean", "--json"]);
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "failed", "{o:?}");
    assert!(rec.get("cache_generations").is_none(), "{rec}");
    // The clean run's writes are the new base: the planted file is gone for later runs.
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.json()[0]["status"], "failed", "{o:?}");
    let doctor = w.sandbox(&repo, &["doctor", "--json"]);
    let caches = doctor.json()["caches"].clone();
    assert!(
        caches
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["branch"] == "main"
                && c["generations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g["base"] == true)),
        "{caches}"
    );
}
