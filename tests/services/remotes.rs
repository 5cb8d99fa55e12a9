//! Results travel with the repository: `push` and `fetch` move branches and notes through a real
//! remote (a bare repository on disk, and git's smart HTTP with Basic auth), notes from several
//! machines merge line-wise and none is lost, `[remote] auto_push` sends results after runs, and
//! credentials stay git's business.

use crate::common;

use common::http_git::GitHttp;
use common::World;
use serde_json::Value;
use std::path::Path;

const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

fn log_json(w: &World, repo: &Path) -> Vec<Value> {
    let o = w.sandbox(repo, &["log", "--json", "--all"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.json().as_array().unwrap().clone()
}

fn status_of(log: &[Value], commit: &str) -> String {
    log.iter()
        .find(|e| e["commit"] == commit)
        .map(|e| e["result"]["status"].as_str().unwrap_or("none").to_string())
        .unwrap_or_else(|| panic!("{commit} not in the log: {log:?}"))
}

#[test]
fn a_clone_gets_the_results_after_fetch_and_plain_git_fetch_brings_them_beside_ours() {
    let a = World::new();
    let repo = a.new_repo("travel");
    let first = a.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more tests");
    assert_eq!(a.sandbox(&repo, &["run"]).code, 0);
    let shared = a.bare_remote(&repo, "shared.git");
    let o = a.sandbox(&repo, &["push", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let pushed = o.json();
    let updated: Vec<&str> = pushed["updated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for r in [
        "refs/heads/main",
        "refs/notes/sandbox",
        "refs/notes/sandbox-summary",
    ] {
        assert!(updated.contains(&r), "{r} not pushed: {pushed}");
    }
    // Pushing also set up the fetch refspec on the remote it pushed to.
    let specs = a.git(&repo, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(
        specs.contains("+refs/notes/sandbox*:refs/notes/remotes/origin/sandbox*"),
        "{specs}"
    );

    // Another machine, which trusts A: a clone has no results until it fetches them.
    let b = World::new();
    b.trust(&a);
    let clone = b.clone_and_init(shared.to_str().unwrap(), "clone");
    assert_eq!(status_of(&log_json(&b, &clone), &first), "none");
    let o = b.sandbox(&clone, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("1 result arrived"), "{o:?}");
    let log = log_json(&b, &clone);
    assert_eq!(status_of(&log, &first), "passed");
    let shown = b.sandbox(&clone, &["show", "--json", &first]).json();
    assert_eq!(shown["commit"], first.as_str());
    assert_eq!(shown["tests"]["passed"], 3, "{shown}");
    // Plain `git log` shows the summary that came with it.
    let plain = b.git(&clone, &["log", "-1", "--format=%N", &first]);
    assert!(plain.contains("passed"), "{plain}");

    // `init` added the refspec: a plain `git fetch` brings new results beside ours, and
    // `git sandbox fetch` merges them.
    let second = a.commit(&repo, &[("notes.txt", "x\n")], "second");
    assert_eq!(a.sandbox(&repo, &["run"]).code, 0);
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    b.git(&clone, &["fetch", "-q"]);
    let theirs = b.git(
        &clone,
        &[
            "notes",
            "--ref=refs/notes/remotes/origin/sandbox",
            "show",
            &second,
        ],
    );
    assert!(theirs.contains(&second), "{theirs}");
    assert_eq!(b.sandbox(&clone, &["fetch"]).code, 0);
    b.git(&clone, &["merge", "-q", "--ff-only", "origin/main"]);
    assert_eq!(status_of(&log_json(&b, &clone), &second), "passed");
    // Nothing new: a second fetch brings nothing and says so.
    let again = b.sandbox(&clone, &["fetch", "--json"]).json();
    assert_eq!(again["results"], 0, "{again}");
}

#[test]
fn notes_pushed_from_two_machines_at_once_are_all_kept() {
    let a = World::new();
    let repo = a.new_repo("race");
    let mut commits = Vec::new();
    for i in 0..6 {
        commits.push(a.commit(&repo, &[(&format!("f{i}.txt"), "x\n")], &format!("c{i}")));
    }
    let shared = a.bare_remote(&repo, "shared.git");
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    let b = World::new();
    let clone = b.clone_and_init(shared.to_str().unwrap(), "clone");
    a.trust(&b);
    b.trust(&a);
    // Each machine runs its half, and both run the last commit.
    for c in &commits[..3] {
        assert_eq!(a.sandbox(&repo, &["run", c]).code, 0);
    }
    for c in &commits[3..] {
        assert_eq!(b.sandbox(&clone, &["run", c]).code, 0);
    }
    assert_eq!(a.sandbox(&repo, &["run", &commits[5]]).code, 0);
    // Both push at the same time, twice over: one of them finds the remote moved, merges and
    // pushes again.
    for _ in 0..2 {
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| a.sandbox(&repo, &["push", "--notes-only", "--json"]));
            let hb = s.spawn(|| b.sandbox(&clone, &["push", "--notes-only", "--json"]));
            (ha.join().unwrap(), hb.join().unwrap())
        });
        assert_eq!(ra.code, 0, "{ra:?}");
        assert_eq!(rb.code, 0, "{rb:?}");
    }
    // The remote holds a note for every commit; the commit both ran holds both records.
    let listed = a.git(&shared, &["notes", "--ref=refs/notes/sandbox", "list"]);
    assert_eq!(listed.lines().count(), 6, "{listed}");
    let both = a.git(
        &shared,
        &["notes", "--ref=refs/notes/sandbox", "show", &commits[5]],
    );
    assert_eq!(both.lines().count(), 2, "one record per machine: {both}");
    // After a fetch each machine shows every result.
    for (w, dir) in [(&a, &repo), (&b, &clone)] {
        assert_eq!(w.sandbox(dir, &["fetch"]).code, 0);
        let log = log_json(w, dir);
        for c in &commits {
            assert_eq!(status_of(&log, c), "passed", "{c}");
        }
    }
    // The summary of the commit both ran is one summary, not two glued together.
    let summary = b.git(
        &clone,
        &[
            "notes",
            "--ref=refs/notes/sandbox-summary",
            "show",
            &commits[5],
        ],
    );
    assert!(summary.lines().count() <= 3, "{summary}");
}

#[test]
fn a_branch_the_remote_moved_is_refused_and_the_notes_still_go() {
    let a = World::new();
    let repo = a.new_repo("moved");
    let shared = a.bare_remote(&repo, "shared.git");
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    let b = World::new();
    let clone = b.clone_and_init(shared.to_str().unwrap(), "clone");
    b.commit(&clone, &[("theirs.txt", "b\n")], "theirs");
    b.git(&clone, &["push", "-q", "origin", "main"]);
    let ours = a.commit(&repo, &[("ours.txt", "a\n")], "ours");
    assert_eq!(a.sandbox(&repo, &["run"]).code, 0);
    let o = a.sandbox(&repo, &["push"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stderr.contains("rejected: refs/heads/main: [rejected]"),
        "{o:?}"
    );
    assert!(o.stderr.contains("git pull origin"), "{o:?}");
    // Nothing was forced: the remote's main is still theirs, and our result is there.
    assert_eq!(rev(&a, &shared, "main"), rev(&b, &clone, "main"));
    let note = a.git(
        &shared,
        &["notes", "--ref=refs/notes/sandbox", "show", &ours],
    );
    assert!(note.contains(&ours), "{note}");
}

#[test]
fn a_remote_that_is_not_there_is_a_one_line_error() {
    let w = World::new();
    let repo = w.new_repo("lonely");
    let o = w.sandbox(&repo, &["push"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert_eq!(problem, "this repository has no remote");
    assert_eq!(hints, vec!["add one: git remote add origin URL"]);
    w.git(&repo, &["remote", "add", "upstream", "/nonexistent/x.git"]);
    let o = w.sandbox(&repo, &["fetch", "nosuch"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert_eq!(problem, "no remote named \"nosuch\"");
    assert_eq!(hints, vec!["remotes here: upstream"]);
    // A remote that cannot be reached: one line that says what git said, and no ref written.
    let o = w.sandbox(&repo, &["fetch", "upstream"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, _) = o.error();
    assert!(problem.contains("git fetch upstream"), "{problem}");
    assert!(problem.contains("/nonexistent/x.git"), "{problem}");
    let refs = w.git(&repo, &["for-each-ref", "refs/notes/remotes"]);
    assert!(refs.is_empty(), "{refs}");
}

#[test]
fn auto_push_sends_results_after_a_run_and_a_repository_cannot_turn_it_on() {
    let w = World::new();
    let repo = w.new_repo("auto");
    let shared = w.bare_remote(&repo, "shared.git");
    w.user_config("[remote]\nauto_push = true\n");
    let c = w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let note = w.git(&shared, &["notes", "--ref=refs/notes/sandbox", "show", &c]);
    assert!(note.contains(&c), "{note}");
    // Branches are not auto-pushed: only results.
    let heads = w.git(&shared, &["for-each-ref", "refs/heads"]);
    assert!(heads.is_empty(), "{heads}");

    // A commit's own config cannot make this machine send anything anywhere.
    w.user_config("");
    let bad = w.commit(
        &repo,
        &[(".sandbox.toml", "[remote]\nauto_push = true\n")],
        "push please",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "{o:?}");
    let shown = w.sandbox(&repo, &["show", "--json", &bad]).json();
    assert_eq!(shown["status"], "error");
    assert!(
        shown["error"]
            .as_str()
            .unwrap()
            .contains("[remote] is read from your user config only"),
        "{shown}"
    );
    let listed = w.git(&shared, &["notes", "--ref=refs/notes/sandbox", "list"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
}

#[test]
fn the_daemon_pushes_results_when_auto_push_is_on() {
    let w = World::new();
    let repo = w.new_repo("daemon-push");
    let shared = w.bare_remote(&repo, "shared.git");
    w.user_config("[remote]\nauto_push = true\n");
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    let c = w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more");
    let arrived = w.wait_until(60, || {
        w.git_out(
            &shared,
            &["notes", "--ref=refs/notes/sandbox", "show", &c],
            true,
        )
        .code
            == 0
    });
    let log = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
    assert!(arrived, "the daemon never pushed the result: {log}");
}

#[test]
fn credentials_come_from_git_and_never_land_in_config_notes_or_events() {
    const TOKEN: &str = "ghs_t0ken_never_to_be_seen";
    let w = World::new();
    let repo = w.new_repo("auth");
    let served = w.path("served");
    std::fs::create_dir_all(&served).unwrap();
    w.git(
        &served,
        &["init", "-q", "--bare", "-b", "main", "shared.git"],
    );
    let server = GitHttp::start(&served, "x-access-token", TOKEN);
    let url = format!("{}/shared.git", server.base_url());
    w.git(&repo, &["remote", "add", "origin", &url]);
    // git's own credential system: a store helper with the token, outside the repository.
    let creds = w.path("home/creds");
    let port_url = server.base_url().replacen("http://", "", 1);
    std::fs::write(
        &creds,
        format!("http://x-access-token:{TOKEN}@{port_url}\n"),
    )
    .unwrap();
    w.git(
        &w.work(),
        &[
            "config",
            "--global",
            "credential.helper",
            &format!("store --file={}", creds.display()),
        ],
    );
    let c = w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["push"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.contains("git-receive-pack 200 auth=ok")),
        "{:?}",
        server.requests()
    );
    let remote_note = w.git(
        &served.join("shared.git"),
        &["notes", "--ref=refs/notes/sandbox", "show", &c],
    );
    assert!(remote_note.contains(&c));
    // A clone elsewhere fetches them through the same server.
    let b = World::new();
    b.git(
        &b.work(),
        &[
            "config",
            "--global",
            "credential.helper",
            &format!("store --file={}", creds.display()),
        ],
    );
    let clone = b.clone_and_init(&url, "clone");
    b.trust(&w);
    assert_eq!(b.sandbox(&clone, &["fetch"]).code, 0);
    assert_eq!(status_of(&log_json(&b, &clone), &c), "passed");

    // Bad credentials: one line, no prompt, nothing half-written, and no secret shown.
    std::fs::write(
        &creds,
        format!("http://x-access-token:wrong-{TOKEN}@{port_url}\n"),
    )
    .unwrap();
    w.commit(&repo, &[("more.txt", "x\n")], "more");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["push"]);
    assert_ne!(o.code, 0, "{o:?}");
    let (problem, _) = o.error();
    assert!(problem.contains("git push origin"), "{problem}");
    assert!(
        !o.stderr.contains(TOKEN) && !o.stdout.contains(TOKEN),
        "{o:?}"
    );

    // The token is nowhere the tool writes.
    let config = w.git(&repo, &["config", "--list", "--local"]);
    assert!(!config.contains(TOKEN), "{config}");
    let events = w.sandbox(&repo, &["events", "--json", "--limit", "1000"]);
    assert!(!events.stdout.contains(TOKEN));
    let notes = w.git(
        &repo,
        &["log", "--all", "--format=%N", "--notes=refs/notes/sandbox"],
    );
    assert!(!notes.contains(TOKEN));
    for f in common::files_under(&w.data()) {
        if let Ok(text) = std::fs::read(&f) {
            assert!(
                !String::from_utf8_lossy(&text).contains(TOKEN),
                "{} holds the token",
                f.display()
            );
        }
    }
}

#[test]
fn init_remove_takes_the_notes_refspec_away() {
    let w = World::new();
    let dir = w.work().join("plain");
    w.git(
        &w.work(),
        &["init", "-q", "-b", "main", dir.to_str().unwrap()],
    );
    w.commit(&dir, &[("a.txt", "a\n")], "a");
    w.git(&dir, &["remote", "add", "origin", "/nonexistent/x.git"]);
    assert_eq!(w.sandbox(&dir, &["init"]).code, 0);
    let spec = "+refs/notes/sandbox*:refs/notes/remotes/origin/sandbox*";
    let specs = w.git(&dir, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(specs.contains(spec), "{specs}");
    let o = w.sandbox(&dir, &["init", "--remove"]);
    assert_eq!(o.code, 0, "{o:?}");
    let specs = w.git(&dir, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(!specs.contains(spec), "{specs}");
    assert!(
        specs.contains("+refs/heads/*:refs/remotes/origin/*"),
        "{specs}"
    );
}

#[test]
fn a_polling_daemon_runs_what_was_pushed_elsewhere_and_not_what_was_run_there() {
    let a = World::new();
    let repo = a.new_repo("polled");
    let shared = a.bare_remote(&repo, "shared.git");
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    // Machine B follows the remote by polling it; no hook or webhook reaches it.
    let b = World::new();
    let clone = b.clone_and_init(shared.to_str().unwrap(), "clone");
    b.user_config("[remote]\npoll = \"5s\"\n");
    b.trust(&a);
    let _daemon = b.spawn(&b.work(), &["daemon", "--workers", "1"]);

    let show = |c: &str| {
        let o = b.sandbox(&clone, &["show", "--json", c]);
        (o.code == 0).then(|| o.json())
    };
    let log = || std::fs::read_to_string(b.path("daemon.log")).unwrap_or_default();
    // A commit pushed by A without a result: B fetches and runs it.
    let pushed = a.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more");
    a.git(&repo, &["push", "-q", "origin", "main"]);
    assert!(
        b.wait_until(60, || show(&pushed).is_some()),
        "B never ran the pushed commit: {}",
        log()
    );
    // A commit A ran itself and pushed with its result: B takes the result, runs nothing.
    let ran = a.commit(&repo, &[("other.txt", "x\n")], "other");
    assert_eq!(a.sandbox(&repo, &["run"]).code, 0);
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    assert!(
        b.wait_until(60, || show(&ran).is_some()),
        "B never got A's result: {}",
        log()
    );
    let r = show(&pushed).unwrap();
    assert_eq!(r["status"], "passed", "{r}");
    assert_eq!(r["trigger"], "poll", "{r}");
    assert_eq!(r["ref"], "refs/remotes/origin/main", "{r}");
    let theirs = show(&ran).unwrap();
    assert_eq!(
        theirs["trigger"], "manual",
        "A's own record, not a run of B's: {theirs}"
    );
    // B's result goes nowhere by itself (no auto_push), and B's main was left alone.
    assert_ne!(rev(&b, &clone, "main"), pushed);
}

#[test]
fn a_poll_interval_below_five_seconds_is_refused() {
    let w = World::new();
    w.user_config("[remote]\npoll = \"1s\"\n");
    let o = w.sandbox(&w.work(), &["list"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains(
            "config.toml:2: key `remote.poll`: polling a remote more often than every 5 s"
        ),
        "{problem}"
    );
    assert!(hints.iter().any(|h| h.contains("60s")), "{hints:?}");
}

#[test]
fn two_machines_with_daemons_each_get_the_others_results() {
    // Two clones of one remote, each with its own daemon that polls and auto-pushes.
    let a = World::new();
    let repo_a = a.new_repo("pair");
    let shared = a.bare_remote(&repo_a, "shared.git");
    assert_eq!(a.sandbox(&repo_a, &["push"]).code, 0);
    let b = World::new();
    let repo_b = b.clone_and_init(shared.to_str().unwrap(), "clone");
    for w in [&a, &b] {
        w.user_config("[remote]\npoll = \"5s\"\nauto_push = true\n");
    }
    a.trust(&b);
    b.trust(&a);
    let _da = a.spawn(&a.work(), &["daemon", "--workers", "1"]);
    let _db = b.spawn(&b.work(), &["daemon", "--workers", "1"]);

    // Each machine commits and pushes its branch; its daemon runs it and pushes the result.
    let from_a = a.commit(&repo_a, &[("tests/test_more.py", MORE_TESTS)], "from a");
    a.git(&repo_a, &["push", "-q", "origin", "main"]);
    let own = |w: &World, repo: &Path, c: &str| {
        let o = w.sandbox(repo, &["show", "--json", c]);
        (o.code == 0).then(|| o.json()["finished_at"].as_str().unwrap().to_string())
    };
    assert!(a.wait_until(60, || own(&a, &repo_a, &from_a).is_some()));
    let a_finished = own(&a, &repo_a, &from_a).unwrap();
    b.git(&repo_b, &["pull", "-q", "--ff-only", "origin", "main"]);
    let from_b = b.commit(&repo_b, &[("b.txt", "b\n")], "from b");
    b.git(&repo_b, &["push", "-q", "origin", "main"]);
    assert!(b.wait_until(60, || own(&b, &repo_b, &from_b).is_some()));
    let b_finished = own(&b, &repo_b, &from_b).unwrap();

    // A's record of its commit reaches B's notes, and B's record of its commit reaches A's.
    let note_has = |w: &World, repo: &Path, c: &str, finished: &str| {
        let o = w.git_out(
            repo,
            &["notes", "--ref=refs/notes/sandbox", "show", c],
            true,
        );
        o.code == 0 && o.stdout.contains(finished)
    };
    let logs = || {
        format!(
            "A: {}\nB: {}",
            std::fs::read_to_string(a.path("daemon.log")).unwrap_or_default(),
            std::fs::read_to_string(b.path("daemon.log")).unwrap_or_default()
        )
    };
    assert!(
        b.wait_until(60, || note_has(&b, &repo_b, &from_a, &a_finished)),
        "A's result never reached B: {}",
        logs()
    );
    assert!(
        a.wait_until(60, || note_has(&a, &repo_a, &from_b, &b_finished)),
        "B's result never reached A: {}",
        logs()
    );
}
