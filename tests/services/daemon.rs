//! The daemon: hooks and the ref watcher feed a durable queue, workers run it, events record it,
//! and nothing is lost across kill -9.

use crate::common;

use common::World;
use std::path::Path;

fn quick_config(w: &World, repo: &Path, command: &str) -> String {
    w.commit(
        repo,
        &[(
            ".sandbox.toml",
            &format!("[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n"),
        )],
        "quick tests",
    )
}

fn has_note(w: &World, repo: &Path, id: &str) -> bool {
    w.git_out(repo, &["notes", "--ref=sandbox", "show", id], true)
        .code
        == 0
}

fn daemon_running(w: &World) -> bool {
    w.sandbox(&w.work(), &["daemon", "status"]).code == 0
}

/// Each background activity is a loop with a name, which `daemon status` shows; `daemon stop`
/// ends them all: the process exits well within its deadline, after the outbox delivered what
/// the last result owed.
#[test]
fn the_daemons_loops_are_named_and_a_stop_ends_them_all_with_the_outbox_drained() {
    let w = World::new();
    let repo = w.new_repo("loops");
    let told = w.path("told.jsonl");
    w.user_config(&format!(
        "[remote]\npoll = \"1h\"\n[notify]\ncommand = \"cat >> {}; echo >> {}\"\n",
        told.display(),
        told.display()
    ));
    quick_config(&w, &repo, "test ! -e broken");
    let mut daemon = w.spawn(
        &w.work(),
        &["daemon", "--workers", "2", "--http", "127.0.0.1:0"],
    );
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    let loops = w.sandbox(&w.work(), &["daemon", "status", "--json"]).json()["loops"].clone();
    let mut names: Vec<&str> = loops
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "deliveries",
            "http",
            "lease",
            "outbox",
            "poll",
            "worker-0",
            "worker-1"
        ],
        "{loops}"
    );
    for (name, l) in loops.as_object().unwrap() {
        assert_eq!(
            (&l["running"], &l["restarts"]),
            (&true.into(), &0.into()),
            "{name}: {l}"
        );
    }
    // A commit that breaks the tests its parent passed: its alert is the outbox's to deliver.
    let head = w.git_out(&repo, &["rev-parse", "HEAD"], false).stdout;
    assert!(w.wait_until(30, || has_note(&w, &repo, head.trim())));
    let broken = w.commit(&repo, &[("broken", "")], "breaks it");
    assert!(w.wait_until(30, || has_note(&w, &repo, &broken)));
    let asked = std::time::Instant::now();
    assert_eq!(w.sandbox(&w.work(), &["daemon", "stop"]).code, 0);
    let exit = daemon.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        asked.elapsed()
    );
    let log = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
    assert!(!log.contains("left behind"), "{log}");
    let told = std::fs::read_to_string(&told).unwrap_or_default();
    assert!(
        told.contains("run.regressed") && told.contains(&broken[..7]),
        "{told}\n{log}"
    );
}

#[test]
fn hook_queued_commits_are_run_and_the_daemon_stops_gracefully() {
    let w = World::new();
    let repo = w.new_repo("d1");
    quick_config(&w, &repo, "true");
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "2"]);
    assert!(
        w.wait_until(20, || daemon_running(&w)),
        "daemon did not come up"
    );
    let ids: Vec<String> = (0..3)
        .map(|i| w.commit(&repo, &[("f.txt", &i.to_string())], &format!("c{i}")))
        .collect();
    assert!(
        w.wait_until(30, || ids.iter().all(|id| has_note(&w, &repo, id))),
        "not every commit got a note"
    );
    for id in &ids {
        let note = w.note(&repo, id).unwrap();
        assert_eq!(note["status"], "passed");
        // The hook and the ref watcher race to queue it; either is a correct trigger.
        assert!(
            note["trigger"] == "hook" || note["trigger"] == "watch",
            "{note}"
        );
        assert_eq!(note["ref"], "refs/heads/main");
    }
    let status = w.sandbox(&w.work(), &["daemon", "status", "--json"]).json();
    assert_eq!(status["running"], true);
    assert_eq!(status["workers"], 2);
    let overall = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(overall["daemon"]["running"], true);
    let me = &overall["daemons"][0];
    assert_eq!(me["state"], "running", "{overall}");
    assert_eq!(me["pid"], daemon.child.id());
    assert_eq!(me["workers"], 2);
    let stop = w.sandbox(&w.work(), &["daemon", "stop"]);
    assert_eq!(stop.code, 0, "{stop:?}");
    let exit = daemon.child.wait().unwrap();
    assert!(exit.success(), "the daemon exits 0 on stop: {exit:?}");
    assert_eq!(w.sandbox(&w.work(), &["daemon", "status"]).code, 1);
    let overall = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(overall["daemons"][0]["state"], "stopped", "{overall}");
    assert!(overall["daemons"][0]["stopped_at"].is_string());

    let kinds: Vec<String> = w
        .sandbox(&w.work(), &["events", "--limit", "1000", "--json"])
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for k in [
        "daemon.started",
        "run.queued",
        "run.started",
        "checkout.completed",
        "test.started",
        "test.completed",
        "run.completed",
        "daemon.stopped",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} event in {kinds:?}");
    }
    // Paging and filters.
    let runs = w.sandbox(
        &w.work(),
        &[
            "events",
            "--kind",
            "run.completed",
            "--repo",
            "d1",
            "--json",
        ],
    );
    let lines: Vec<serde_json::Value> = runs
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "{runs:?}");
    assert!(lines.iter().all(|e| e["kind"] == "run.completed"));
    let first = lines[0]["id"].as_i64().unwrap();
    let after = w.sandbox(
        &w.work(),
        &[
            "events",
            "--kind",
            "run.completed",
            "--since",
            &first.to_string(),
            "--json",
        ],
    );
    assert_eq!(after.stdout.lines().count(), lines.len() - 1);
    let bad = w.sandbox(&w.work(), &["events", "--repo", "nope"]);
    assert_eq!(bad.code, 2, "{bad:?}");
}

#[test]
fn the_daemon_writes_again_notes_a_concurrent_writer_dropped() {
    let w = World::new();
    let repo = w.new_repo("d4");
    quick_config(&w, &repo, "true");
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1"]).code, 0);
    let original = w.note(&repo, "HEAD~1").unwrap();
    // A plain `git notes add` racing with us replaces the notes ref: simulate the loss.
    w.git(&repo, &["notes", "--ref=sandbox", "remove", "HEAD~1"]);
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(20, || w.note(&repo, "HEAD~1").is_some()),
        "not restored"
    );
    assert_eq!(w.note(&repo, "HEAD~1").unwrap(), original);
    let events = w.sandbox(&w.work(), &["events", "--kind", "notes.restored", "--json"]);
    assert_eq!(events.stdout.lines().count(), 1, "{events:?}");
}

#[test]
fn an_idle_daemon_mends_notes_that_changed_after_its_first_look() {
    let w = World::new();
    let repo = w.new_repo("d5");
    quick_config(&w, &repo, "true");
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1", "HEAD"]).code, 0);
    let original = w.note(&repo, "HEAD~1").unwrap();
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || daemon_running(&w)));
    // Its start-up look is done, and found nothing to mend. Then, while it idles, a plain
    // `git notes` drops one result and writes over another.
    std::thread::sleep(std::time::Duration::from_secs(2));
    w.git(&repo, &["notes", "--ref=sandbox", "remove", "HEAD~1"]);
    w.git(
        &repo,
        &[
            "notes",
            "--ref=sandbox",
            "add",
            "-f",
            "-m",
            "not a record",
            "HEAD",
        ],
    );
    // The next heartbeat (every 30 s) writes the first again and runs the second's commit again.
    let mended = || {
        let rerun = w
            .git_out(&repo, &["notes", "--ref=sandbox", "show", "HEAD"], true)
            .stdout;
        w.note(&repo, "HEAD~1").as_ref() == Some(&original) && rerun.contains(&head)
    };
    assert!(w.wait_until(90, mended), "not mended while idle");
    for kind in ["notes.restored", "notes.unreadable"] {
        let events = w.sandbox(&w.work(), &["events", "--kind", kind, "--json"]);
        assert_eq!(events.stdout.lines().count(), 1, "{kind}: {events:?}");
    }
}

#[test]
fn a_second_daemon_refuses_to_start() {
    let w = World::new();
    let _first = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || daemon_running(&w)));
    let second = w.sandbox(&w.work(), &["daemon"]);
    assert_eq!(second.code, 1, "a refusal, not bad usage: {second:?}");
    let (problem, hints) = second.error();
    assert!(problem.contains("already running"), "{second:?}");
    assert_eq!(hints, ["stop it with `git sandbox daemon stop`"]);
}

#[test]
fn a_lock_file_that_cannot_be_opened_is_named_with_its_reason_not_taken_for_a_running_daemon() {
    let w = World::new();
    // Something made daemon.lock a directory: no daemon holds it, and none can take it.
    std::fs::create_dir_all(w.data().join("daemon.lock")).unwrap();
    let o = w.sandbox(&w.work(), &["daemon"]);
    assert_eq!(o.code, 128, "the machine's fault, not a refusal: {o:?}");
    let (problem, hints) = o.error();
    let lock = w.data().join("daemon.lock");
    assert_eq!(
        problem,
        format!(
            "cannot open the daemon lock {}: Is a directory (os error 21)",
            lock.display()
        ),
        "{o:?}"
    );
    assert!(!problem.contains("already running"), "{o:?}");
    assert_eq!(
        hints,
        [format!(
            "remove the directory {} (no daemon uses it), or set GIT_SANDBOX_HOME",
            lock.display()
        )]
    );
}

#[test]
fn the_daemon_packs_the_loose_refs_of_branches_made_with_no_hook_and_every_ref_reads_the_same() {
    use std::io::Write;
    let w = World::new();
    let repo = w.new_repo("d6");
    quick_config(&w, &repo, "true");
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // 150 branches made where no hook runs (a tool that runs none): a loose ref each, which
    // the next `git gc` would prune, starting the reference-transaction hook twice apiece.
    let batch: String = (0..150)
        .map(|i| format!("create refs/heads/experiment/b{i} {head}\n"))
        .collect();
    let mut cmd = std::process::Command::new("git");
    cmd.args(["-c", "core.hooksPath=/dev/null", "update-ref", "--stdin"])
        .current_dir(&repo);
    w.apply_env(&mut cmd);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(batch.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    // The branches (the daemon's own notes may come meanwhile: it runs main's commit).
    let refs = || {
        w.git(
            &repo,
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "refs/heads",
            ],
        )
    };
    let before = refs();
    let loose = repo.join(".git/refs/heads/experiment/b0");
    assert!(loose.exists());
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(30, || !loose.exists()),
        "the start-up scan left the loose refs"
    );
    assert!(repo.join(".git/packed-refs").exists());
    assert_eq!(refs(), before);
    assert!(!repo.join(".git/refs/heads/main").exists());
}

#[test]
fn commits_made_without_hooks_are_found_by_watching_refs() {
    let w = World::new();
    let repo = w.new_repo("d2");
    quick_config(&w, &repo, "true");
    // No hooks at all: only the watcher (or the heartbeat rescan) can see new commits.
    w.git(&repo, &["config", "core.hooksPath", "/dev/null"]);
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || daemon_running(&w)));
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    assert!(
        w.wait_until(20, || has_note(&w, &repo, &head)),
        "start-up scan runs existing commits"
    );
    let on_main = w.commit(&repo, &[("x.txt", "x")], "no hook");
    // A branch in a new folder: inotify reports no event for it; the rescan must catch it.
    w.git(&repo, &["checkout", "-q", "-b", "experiment/deep"]);
    let on_exp = w.commit(&repo, &[("y.txt", "y")], "experiment without hook");
    assert!(
        w.wait_until(45, || has_note(&w, &repo, &on_main)
            && has_note(&w, &repo, &on_exp)),
        "the watcher missed a commit"
    );
    assert_eq!(w.note(&repo, &on_exp).unwrap()["trigger"], "watch");
}

#[test]
fn sigterm_lets_a_running_job_finish_and_a_short_grace_queues_it_again() {
    let w = World::new();
    let repo = w.new_repo("d3");
    let slow = quick_config(&w, &repo, "sleep 2");
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(w.wait_until(20, || w
        .sandbox(&w.work(), &["events", "--kind", "test.started", "--json"])
        .stdout
        .contains(&slow)));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
    assert!(daemon.child.wait().unwrap().success());
    assert!(
        has_note(&w, &repo, &slow),
        "the running job finished within the grace period"
    );

    let very_slow = quick_config(&w, &repo, "sleep 30");
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "1", "--grace", "1s"]);
    assert!(w.wait_until(20, || w
        .sandbox(&w.work(), &["events", "--kind", "test.started", "--json"])
        .stdout
        .contains(&very_slow)));
    let t = std::time::Instant::now();
    unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
    assert!(daemon.child.wait().unwrap().success());
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
    assert!(
        !has_note(&w, &repo, &very_slow),
        "a cut-off run is no result"
    );
    let pending = w.sandbox(&w.work(), &["status", "--json"]).json()["daemon"]["queued_jobs"]
        .as_u64()
        .unwrap();
    assert_eq!(pending, 1, "the cut-off job is queued again");
}

#[test]
fn nothing_is_lost_across_kill_9_and_concurrent_user_notes() {
    let w = World::new();
    let repos = [w.new_repo("k1"), w.new_repo("k2")];
    let mut expected: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    // The commit `new` made is the history the repository was created with: not run by itself.
    for (i, r) in repos.iter().enumerate() {
        expected[i].push(quick_config(&w, r, "sleep 0.05"));
    }
    let commit_round = |expected: &mut Vec<Vec<String>>, n: usize, tag: &str| {
        for k in 0..n {
            for (i, r) in repos.iter().enumerate() {
                expected[i].push(w.commit(
                    r,
                    &[("n.txt", &format!("{tag}{k}"))],
                    &format!("{tag} {k}"),
                ));
            }
        }
    };
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "2"]);
    assert!(w.wait_until(20, || daemon_running(&w)));
    commit_round(&mut expected, 15, "before");
    // Halfway: kill -9, mid-run most likely.
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    commit_round(&mut expected, 15, "while down");
    // The user annotates commits of an unwatched branch by hand, in the same notes ref, while
    // the daemon writes notes; and keeps committing.
    w.git(&repos[0], &["branch", "scratch", "HEAD~3"]);
    let mut side = Vec::new();
    for k in 0..5 {
        let o = w.git_out(
            &repos[0],
            &[
                "commit-tree",
                "-p",
                "scratch",
                "-m",
                &format!("side {k}"),
                "HEAD^{tree}",
            ],
            true,
        );
        side.push(o.stdout.trim().to_string());
    }
    let _daemon = w.spawn(&w.work(), &["daemon", "--workers", "2"]);
    for k in 0..10 {
        if let Some(id) = side.get(k) {
            // A daemon killed by -9 in the middle of a notes write leaves the ref's lock behind;
            // the next one removes it once it is 10 s old. git waits for a ref lock only 100 ms
            // by default: the user's command waits as long as that may take.
            let o = w.git_out(
                &repos[0],
                &[
                    "-c",
                    "core.filesRefLockTimeout=15000",
                    "notes",
                    "--ref=sandbox",
                    "add",
                    "-m",
                    &format!("user {k}"),
                    id,
                ],
                true,
            );
            assert_eq!(
                o.code, 0,
                "the user's git notes failed while the daemon ran: {o:?}"
            );
        }
        let o = w.git_out(
            &repos[1],
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("racing {k}"),
            ],
            true,
        );
        assert_eq!(
            o.code, 0,
            "a git command failed while the daemon ran: {o:?}"
        );
        expected[1].push(w.git(&repos[1], &["rev-parse", "HEAD"]).trim().to_string());
    }
    let all_done = || {
        repos
            .iter()
            .zip(&expected)
            .all(|(r, ids)| ids.iter().all(|id| has_note(&w, r, id)))
    };
    if !w.wait_until(90, all_done) {
        let missing: Vec<&String> = repos
            .iter()
            .zip(&expected)
            .flat_map(|(r, ids)| ids.iter().filter(|id| !has_note(&w, r, id)))
            .collect();
        let events = w.sandbox(&w.work(), &["events", "--limit", "40"]).stdout;
        let log = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
        panic!("not every commit got its note: missing {missing:?}\n{events}\n{log}");
    }
    for (i, (r, ids)) in repos.iter().zip(&expected).enumerate() {
        let listed = w.git(r, &["notes", "--ref=sandbox", "list"]);
        let by_hand = if i == 0 { side.len() } else { 0 };
        assert_eq!(
            listed.lines().count(),
            ids.len() + by_hand,
            "exactly one note per commit, none extra"
        );
        for id in ids {
            assert_eq!(w.note(r, id).unwrap()["commit"], id.as_str());
        }
    }
    for (k, id) in side.iter().enumerate() {
        let o = w.git_out(&repos[0], &["notes", "--ref=sandbox", "show", id], true);
        assert_eq!(o.stdout, format!("user {k}\n"), "the user's note survives");
    }
}

/// Seconds since the epoch of an event's `time`.
fn event_time(e: &serde_json::Value) -> i64 {
    gs_util::time::parse_rfc3339(e["time"].as_str().unwrap()).unwrap()
}

#[test]
fn a_burst_of_commits_is_served_in_batches_and_work_is_shared_by_idle_workers() {
    let w = World::new();
    let repo = w.new_repo("burst");
    let config = quick_config(&w, &repo, "true");
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "2"]);
    assert!(w.wait_until(20, || daemon_running(&w)), "no daemon");
    assert!(w.wait_until(30, || has_note(&w, &repo, &config)));
    // 120 empty commits on the config commit's tree, queued at once by one ref update.
    let tree = w
        .git(&repo, &["rev-parse", "HEAD^{tree}"])
        .trim()
        .to_string();
    let mut tip = config.clone();
    let mut burst = Vec::new();
    for i in 0..120 {
        tip = w
            .git(
                &repo,
                &["commit-tree", &tree, "-p", &tip, "-m", &format!("e{i}")],
            )
            .trim()
            .to_string();
        burst.push(tip.clone());
    }
    let notes_before: u32 = w
        .git(&repo, &["rev-list", "--count", "refs/notes/sandbox"])
        .trim()
        .parse()
        .unwrap();
    w.git(&repo, &["update-ref", "refs/heads/main", &tip]);
    assert!(
        w.wait_until(60, || burst.iter().all(|c| has_note(&w, &repo, c))),
        "not every commit of the burst got its result"
    );
    // Each is served from its tree's result (made for the config commit), and the results
    // went to git in a few notes commits, not one per commit.
    for c in &burst {
        let note = w.note(&repo, c).unwrap();
        assert_eq!(note["status"], "passed", "{note}");
        assert_eq!(note["cached_from"], config.as_str(), "{note}");
    }
    let notes_after: u32 = w
        .git(&repo, &["rev-list", "--count", "refs/notes/sandbox"])
        .trim()
        .parse()
        .unwrap();
    assert!(
        notes_after - notes_before <= 30,
        "{} notes commits for 120 results",
        notes_after - notes_before
    );

    // Then commits whose tests must run (a 1 s test, each a tree of its own), made detached
    // without hooks and queued at once: the worker handed a batch of them runs one and hands
    // the rest back, so both workers run tests at once.
    w.git(&repo, &["checkout", "-q", "--detach"]);
    let mut slow = Vec::new();
    for i in 0..6 {
        let (path, text) = if i == 0 {
            (
                ".sandbox.toml",
                "[test]\ncommand = \"sleep 1\"\n[analysis]\nenabled = false\n".to_string(),
            )
        } else {
            ("n.txt", i.to_string())
        };
        std::fs::write(repo.join(path), text).unwrap();
        w.git(&repo, &["add", path]);
        w.git(
            &repo,
            &[
                "-c",
                "core.hooksPath=/dev/null",
                "commit",
                "-qm",
                &format!("s{i}"),
            ],
        );
        slow.push(w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string());
    }
    w.git(
        &repo,
        &["update-ref", "refs/heads/main", slow.last().unwrap()],
    );
    assert!(
        w.wait_until(60, || slow.iter().all(|c| has_note(&w, &repo, c))),
        "not every slow commit got its result"
    );
    let events: Vec<serde_json::Value> = w
        .sandbox(
            &w.work(),
            &["events", "--kind", "run.", "--limit", "1000", "--json"],
        )
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut spans = Vec::new();
    for c in &slow {
        let of = |kind: &str| {
            events
                .iter()
                .filter(|e| e["kind"] == kind && e["commit"] == c.as_str())
                .map(event_time)
                .collect::<Vec<_>>()
        };
        let (started, ended) = (of("run.started"), of("run.completed"));
        assert_eq!(started.len(), 1, "{c} ran {} times", started.len());
        spans.push((started[0], ended[0]));
    }
    let overlapping = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(
        overlapping,
        "the slow commits ran one after another: {spans:?}"
    );
    let handed_back = w
        .sandbox(
            &w.work(),
            &["events", "--kind", "job.ended", "--limit", "1000", "--json"],
        )
        .stdout
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["data"]["end"] == "released"
        })
        .count();
    assert!(handed_back > 0, "no batch handed its rest back");
    assert_eq!(w.sandbox(&w.work(), &["daemon", "stop"]).code, 0);
    daemon.child.wait().unwrap();
}

#[test]
fn with_watch_mode_latest_a_commit_its_branch_moved_past_is_skipped_and_run_later_by_name() {
    let w = World::new();
    let repo = w.new_repo("latest");
    w.user_config("[watch]\nmode = \"latest\"\n");
    quick_config(&w, &repo, "true");
    // Queued by the hooks while no daemon runs: by the time it starts, main has moved on.
    let ids: Vec<String> = (0..4)
        .map(|i| w.commit(&repo, &[("f.txt", &i.to_string())], &format!("c{i}")))
        .collect();
    let tip = ids.last().unwrap().clone();
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(30, || ids.iter().all(|id| has_note(&w, &repo, id))),
        "every queued commit got a note"
    );
    let note = w.note(&repo, &tip).unwrap();
    assert_eq!(note["status"], "passed", "the tip runs: {note}");
    for id in &ids[..3] {
        let note = w.note(&repo, id).unwrap();
        assert_eq!(note["status"], "skipped", "{note}");
        assert_eq!(note["superseded_by"], tip.as_str(), "{note}");
        assert!(note["tests"].is_null(), "nothing ran: {note}");
    }
    let log = w.sandbox(&repo, &["log", "-n", "2"]);
    assert!(
        log.stdout
            .contains(&format!("skipped c2 [superseded by {}]", &tip[..7])),
        "{log:?}"
    );
    // A skipped commit is no result: run by name, it runs.
    let o = w.sandbox(&repo, &["run", &ids[1]]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(w.note(&repo, &ids[1]).unwrap()["status"], "passed");
    assert_eq!(w.sandbox(&w.work(), &["daemon", "stop"]).code, 0);
    daemon.child.wait().unwrap();
}

#[test]
fn a_commit_cannot_opt_itself_into_watch_mode_latest() {
    let w = World::new();
    let repo = w.new_repo("every");
    // The user did not choose `latest`: a commit's config saying so is ignored.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"true\"\n[analysis]\nenabled = false\n[watch]\nmode = \"latest\"\n",
        )],
        "skip me when superseded",
    );
    let ids: Vec<String> = (0..3)
        .map(|i| w.commit(&repo, &[("f.txt", &i.to_string())], &format!("c{i}")))
        .collect();
    let mut daemon = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(30, || ids.iter().all(|id| has_note(&w, &repo, id))),
        "every queued commit got a note"
    );
    for id in &ids {
        let note = w.note(&repo, id).unwrap();
        assert_eq!(note["status"], "passed", "run, not skipped: {note}");
    }
    assert_eq!(w.sandbox(&w.work(), &["daemon", "stop"]).code, 0);
    daemon.child.wait().unwrap();
}
