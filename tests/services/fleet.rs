//! Many daemons, one PostgreSQL queue and index: four daemons with homes of their own, each
//! keeping its own clones of three repositories whose commits an agent pushes to bare remotes.
//! One daemon is killed with SIGKILL halfway and another is restarted; every commit still ends
//! with exactly one result, no claim of a commit overlaps another, and every clone sees every
//! result after a fetch.

use crate::common;

use common::postgres::Postgres;
use common::{Background, World};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const REPOS: [&str; 3] = ["alpha", "beta", "gamma"];
const COMMITS: usize = 300;

/// A claim of a commit as the events tell it: started at, ended at, by whom.
type Claim = (Option<i64>, Option<i64>, String);

fn on_index(url: &str) -> World {
    let mut w = World::new();
    w.extra_env.push(("GIT_SANDBOX_INDEX".into(), url.into()));
    w
}

fn daemon_world(url: &str) -> World {
    let w = on_index(url);
    w.user_config("[index]\nlease = \"3s\"\n[remote]\nauto_push = true\n");
    w
}

fn start(w: &World) -> Background {
    let d = w.spawn(&w.work(), &["daemon", "--workers", "1"]);
    assert!(
        w.wait_until(30, || w.sandbox(&w.work(), &["daemon", "status"]).code == 0),
        "a daemon did not come up: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    d
}

fn home_id(w: &World) -> String {
    std::fs::read_to_string(w.data().join("home-id"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn four_daemons_share_one_queue_through_a_kill_and_a_restart() {
    let pg = Postgres::start();
    let url = pg.database("fleet");
    let agent = on_index(&url);

    // Three repositories, adopted on the agent's machine, each with a bare remote.
    let mut repos: Vec<(PathBuf, String)> = Vec::new();
    let mut adopted_at = Vec::new();
    for name in REPOS {
        let repo = agent.new_repo(name);
        // What the repository held when it was adopted is not run (no backfill).
        adopted_at.push(agent.git(&repo, &["rev-parse", "HEAD"]).trim().to_string());
        agent.commit(
            &repo,
            &[(
                ".sandbox.toml",
                "[test]\ncommand = \"sleep 0.2\"\n[analysis]\nenabled = false\n",
            )],
            "short tests",
        );
        agent.bare_remote(&repo, &format!("remotes/{name}.git"));
        let o = agent.sandbox(&repo, &["push"]);
        assert_eq!(o.code, 0, "{o:?}");
        let id = agent.git(&repo, &["config", "sandbox.repositoryId"]);
        repos.push((repo, id.trim().to_string()));
    }

    // Four daemons, each with a home (and clones) of its own.
    let worlds: Vec<World> = (0..4).map(|_| daemon_world(&url)).collect();
    let mut daemons: Vec<Option<Background>> = worlds.iter().map(|w| Some(start(w))).collect();
    for w in &worlds {
        for (_, id) in &repos {
            let clone = w.data().join(format!("clones/{id}.git"));
            assert!(
                w.wait_until(60, || clone.exists()),
                "no clone of {id} in {}: {}",
                w.data().display(),
                std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
            );
        }
    }

    // The agent commits (the hooks queue each commit in PostgreSQL) and pushes every few
    // commits; halfway one daemon is killed and another restarted.
    let killed = home_id(&worlds[1]);
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut killed_at = None;
    let mut orphans: Vec<i64> = Vec::new();
    for i in 0..COMMITS {
        let (repo, _) = &repos[i % REPOS.len()];
        agent.commit(repo, &[("f.txt", &i.to_string())], &format!("c{i}"));
        if i % 15 == 14 {
            for (repo, _) in &repos {
                agent.git(repo, &["push", "-q", "origin", "main"]);
            }
        }
        // From halfway on, the first time it is seen to have started a job less than 100 ms ago
        // (its 200 ms test command still runs, so that job must come back after its lease), one
        // daemon is killed and another restarted.
        if i >= COMMITS / 2 && daemons[1].is_some() {
            let recent = gs_util::time::rfc3339(gs_util::time::now_millis() - 100);
            let n: i64 = db
                .query_one(
                    "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND owner LIKE $1 AND started_at > $2",
                    &[&format!("{killed}/%"), &recent],
                )
                .unwrap()
                .get(0);
            if n > 0 {
                let mut d = daemons[1].take().unwrap();
                // SAFETY: signalling the child we spawned.
                unsafe { libc::kill(d.child.id() as i32, libc::SIGKILL) };
                let _ = d.child.wait();
                killed_at = Some(gs_util::time::now_millis());
                // What it held when it died: claimed, never to be ended by it.
                orphans = db
                    .query(
                        "SELECT id FROM jobs WHERE state IN ('assigned', 'running') AND owner LIKE $1",
                        &[&format!("{killed}/%")],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let o = worlds[2].sandbox(&worlds[2].work(), &["daemon", "stop"]);
                assert_eq!(o.code, 0, "{o:?}");
                daemons[2].take();
                daemons[2] = Some(start(&worlds[2]));
            }
        }
    }
    assert!(
        daemons[1].is_none(),
        "the daemon to kill was never seen running a job"
    );
    for (repo, _) in &repos {
        agent.git(repo, &["push", "-q", "origin", "main"]);
    }

    // Every commit of every repository ends with a result.
    let mut commits: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ((repo, id), before) in repos.iter().zip(&adopted_at) {
        let all = agent.git(repo, &["rev-list", "main", "--not", before]);
        commits.insert(id.clone(), all.lines().map(str::to_string).collect());
    }
    let total: usize = commits.values().map(BTreeSet::len).sum();
    assert!(total > COMMITS);
    let done = agent.wait_until(300, || {
        let row = db
            .query_one(
                "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM jobs WHERE state <> 'completed')",
                &[],
            )
            .unwrap();
        row.get::<_, i64>(0) as usize == total && row.get::<_, i64>(1) == 0
    });
    let states: Vec<(String, i64)> = db
        .query("SELECT state, COUNT(*) FROM jobs GROUP BY state", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(
        done,
        "{total} commits; jobs by state: {states:?}\n{}",
        worlds
            .iter()
            .map(|w| std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n---\n")
    );
    // Exactly one result per commit in the index, for exactly the commits made.
    let mut indexed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in db
        .query("SELECT repository_id, commit_id, status FROM runs", &[])
        .unwrap()
    {
        let status: String = r.get(2);
        assert_eq!(status, "passed");
        assert!(indexed
            .entry(r.get(0))
            .or_default()
            .insert(r.get::<_, String>(1)));
    }
    assert_eq!(indexed, commits);

    // No claim of a commit overlapped another: each attempt after the first started only once
    // the one before it ended, or its holder was the killed daemon (whose claim ran out).
    let mut claims: BTreeMap<(String, i64), Claim> = BTreeMap::new();
    for r in db
        .query(
            "SELECT kind, commit_id, time, data FROM events WHERE kind IN ('job.started', 'job.ended')",
            &[],
        )
        .unwrap()
    {
        let kind: String = r.get(0);
        let commit: String = r.get(1);
        let at = gs_util::time::parse_rfc3339(&r.get::<_, String>(2)).unwrap();
        let data: serde_json::Value = serde_json::from_str(&r.get::<_, String>(3)).unwrap();
        let attempt = data["attempt"].as_i64().unwrap();
        let e = claims.entry((commit, attempt)).or_default();
        e.2 = data["by"].as_str().unwrap_or_default().to_string();
        if kind == "job.started" {
            e.0 = Some(at);
        } else {
            e.1 = Some(at);
        }
    }
    let mut by_commit: BTreeMap<&str, Vec<(i64, &Claim)>> = BTreeMap::new();
    for ((commit, attempt), c) in &claims {
        by_commit.entry(commit).or_default().push((*attempt, c));
    }
    let mut rerun = 0;
    for (commit, runs) in &by_commit {
        for pair in runs.windows(2) {
            let (a, first) = pair[0];
            let (b, second) = pair[1];
            rerun += 1;
            let next_start = second.0.unwrap_or(i64::MAX);
            match first.1 {
                Some(end) => assert!(
                    end <= next_start,
                    "{commit}: attempt {b} started before attempt {a} ended"
                ),
                None => {
                    assert!(
                        first.2.starts_with(&format!("{killed}/")),
                        "{commit}: attempt {a} by {} never ended",
                        first.2
                    );
                    // It ran until the kill: the next claim must start after it.
                    assert!(
                        next_start >= killed_at.unwrap(),
                        "{commit}: attempt {b} started while attempt {a} still ran"
                    );
                }
            }
        }
    }
    eprintln!("{total} commits; {rerun} claims after a first one");
    // The job it held was claimed again by another daemon and ended there.
    assert!(!orphans.is_empty(), "the killed daemon held no job");
    for id in &orphans {
        let row = db
            .query_one("SELECT state, attempts FROM jobs WHERE id = $1", &[id])
            .unwrap();
        let (state, attempts): (String, i64) = (row.get(0), row.get(1));
        assert_eq!(state, "completed");
        assert!(
            attempts >= 2,
            "job {id} was not claimed again ({attempts} attempts)"
        );
    }

    // Stopped, the daemons push what they made; every clone has every result after a fetch:
    // the agent's, and a fresh clone adopted on a fifth machine.
    for (w, d) in worlds.iter().zip(daemons.iter_mut()) {
        if d.is_some() {
            let o = w.sandbox(&w.work(), &["daemon", "stop"]);
            assert_eq!(o.code, 0, "{o:?}");
            d.take();
        }
    }
    let reader = on_index(&url);
    for (repo, id) in &repos {
        let o = agent.sandbox(repo, &["fetch", "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        let fresh = reader.path(&format!("clone-{id}"));
        let origin = agent.git(repo, &["remote", "get-url", "origin"]);
        reader.git(
            &reader.path(""),
            &["clone", "-q", origin.trim(), fresh.to_str().unwrap()],
        );
        let o = reader.sandbox(&fresh, &["init"]);
        assert_eq!(o.code, 0, "{o:?}");
        assert_eq!(
            reader
                .git(&fresh, &["config", "sandbox.repositoryId"])
                .trim(),
            id,
            "a clone of a known remote joins its repository"
        );
        let o = reader.sandbox(&fresh, &["fetch"]);
        assert_eq!(o.code, 0, "{o:?}");
        for clone in [repo.as_path(), fresh.as_path()] {
            for commit in &commits[id] {
                assert_eq!(
                    note_commit(&agent, clone, commit).as_deref(),
                    Some(commit.as_str()),
                    "{} has no result for {commit}",
                    clone.display()
                );
            }
        }
    }
}

/// The commit the newest record in `commit`'s note names.
fn note_commit(w: &World, repo: &Path, commit: &str) -> Option<String> {
    let o = w.git_out(repo, &["notes", "--ref=sandbox", "show", commit], true);
    if o.code != 0 {
        return None;
    }
    o.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["commit"].as_str().map(str::to_string))
        .next()
}

#[test]
fn a_daemon_outlives_its_database_going_away() {
    let mut pg = Postgres::start();
    let url = pg.database("away");
    let w = on_index(&url);
    w.user_config("[index]\nlease = \"3s\"\n");
    let repo = w.new_repo("away");
    let slow = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"sleep 6\"\n[analysis]\nenabled = false\n",
        )],
        "slow tests",
    );
    let _daemon = start(&w);
    // The test command runs (its run started: what comes before, checkout and sandbox, takes
    // well under the second and a half waited here).
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert!(w.wait_until(60, || {
        db.query_one(
            "SELECT COUNT(*) FROM events WHERE commit_id = $1 AND kind = 'run.started'",
            &[&slow],
        )
        .unwrap()
        .get::<_, i64>(0)
            == 1
    }));
    drop(db);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    pg.stop();
    let index_state = || {
        w.sandbox(&w.work(), &["daemon", "status", "--json"]).json()["index"]["reachable"].as_bool()
    };
    // The daemon says so; commands say so in one line.
    assert!(
        w.wait_until(20, || index_state() == Some(false)),
        "{}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    let o = w.sandbox(&w.work(), &["daemon", "status"]);
    assert!(o.stdout.contains("unreachable since"), "{o:?}");
    // It stays away (the daemon does not think it is back while it is not).
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(index_state(), Some(false));
    let o = w.sandbox(&repo, &["status"]);
    assert_eq!(o.code, 128, "{o:?}");
    assert!(o.error().0.starts_with("cannot reach the index"), "{o:?}");
    // The run it held goes on and its result reaches git meanwhile.
    assert!(
        w.wait_until(30, || w.note(&repo, &slow).is_some()),
        "{}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    assert_eq!(w.note(&repo, &slow).unwrap()["status"], "passed");
    // The database comes back: the daemon notices, and nothing was lost.
    pg.restart();
    assert!(w.wait_until(60, || index_state() == Some(true)));
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert!(
        w.wait_until(60, || {
            db.query_one(
                "SELECT (SELECT COUNT(*) FROM runs WHERE commit_id = $1 AND status = 'passed')
                      + (SELECT COUNT(*) FROM jobs WHERE commit_id = $1 AND state = 'completed')",
                &[&slow],
            )
            .unwrap()
            .get::<_, i64>(0)
                == 2
        }),
        "{}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    // Its `LISTEN` loop lost its connection: the supervisor said so, by the loop's name, and
    // started it again (with back-off while the database was away) until it listened again.
    let listen =
        || w.sandbox(&w.work(), &["daemon", "status", "--json"]).json()["loops"]["listen"].clone();
    assert!(
        w.wait_until(60, || listen()["error"].is_null()),
        "{}",
        listen()
    );
    let now = listen();
    assert!(now["restarts"].as_u64().unwrap() >= 1, "{now}");
    assert_eq!(now["running"], true, "{now}");
    let log = std::fs::read_to_string(w.path("daemon.log")).unwrap();
    assert!(log.contains("the index cannot be reached"), "{log}");
    assert!(
        log.contains("the listen loop failed: lost the connection that listens for jobs"),
        "{log}"
    );
    assert_eq!(
        log.matches("the index answers again").count(),
        1,
        "it came back once: {log}"
    );
    let o = w.sandbox(&repo, &["status"]);
    assert_eq!(o.code, 0, "{o:?}");
}

/// A turn of the scheduler held up (here its full scan waits on a `packed-refs.lock`: 100 loose
/// refs to pack, `core.packedRefsTimeout` 8 s) for longer than a lease does not let the lease of
/// the job that runs meanwhile run out: another daemon on the index, which reaps expired leases,
/// does not take it back to be run a second time beside itself.
#[test]
fn a_scheduler_held_up_past_a_lease_keeps_the_lease_of_the_job_that_runs() {
    use std::io::{Read, Write};
    let pg = Postgres::start();
    let url = pg.database("heldup");
    let w = on_index(&url);
    w.user_config("[index]\nlease = \"3s\"\n");
    let repo = w.new_repo("held-up");
    let _daemon = start(&w);
    // Another machine's daemon, which serves no repository of this one's.
    let other = on_index(&url);
    other.user_config("[index]\nlease = \"3s\"\n");
    let _other = start(&other);
    let head = quick(&w, &repo, "true");
    assert!(w.wait_until(30, || has_note(&w, &repo, &head)));
    let slow = quick(&w, &repo, "sleep 14");
    assert!(w.wait_until(30, || w
        .sandbox(&w.work(), &["events", "--kind", "test.started", "--json"])
        .stdout
        .contains(&slow)));
    let loose = repo.join(".git/refs/stall");
    std::fs::create_dir_all(&loose).unwrap();
    for i in 0..100 {
        std::fs::write(loose.join(format!("r{i}")), format!("{head}\n")).unwrap();
    }
    w.git(&repo, &["config", "core.packedRefsTimeout", "8000"]);
    let lock = repo.join(".git/packed-refs.lock");
    std::fs::write(&lock, "").unwrap();
    // A full scan, now: it waits on the lock.
    let mut s = std::os::unix::net::UnixStream::connect(w.data().join("daemon.sock")).unwrap();
    s.write_all(b"ping\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert_eq!(answer.trim(), "ok");
    assert!(w.wait_until(40, || has_note(&w, &repo, &slow)));
    let log = std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default();
    // (Our notes' writer breaks it once it is 10 s old, taking it for one a killed writer left.)
    let _ = std::fs::remove_file(&lock);
    assert!(
        log.contains("could not pack its loose refs"),
        "the scan was not held up: {log}"
    );
    let events = |kind: &str| -> Vec<serde_json::Value> {
        w.sandbox(
            &w.work(),
            &["events", "--kind", kind, "--limit", "100", "--json"],
        )
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| kind == "job.reaped" || e["commit"] == slow.as_str())
        .collect()
    };
    assert_eq!(
        events("job.reaped"),
        Vec::<serde_json::Value>::new(),
        "{log}"
    );
    let started = events("job.started");
    assert_eq!(started.len(), 1, "{started:?}\n{log}");
    let ended = events("job.ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(
        (&ended[0]["data"]["end"], &ended[0]["data"]["held"]),
        (&"done".into(), &true.into()),
        "{ended:?}"
    );
}

#[test]
fn machines_on_one_index_take_each_others_records_as_evidence_also_after_a_reindex() {
    let pg = Postgres::start();
    let url = pg.database("trust");
    let a = on_index(&url);
    let repo = a.new_repo("trusted");
    let c = a.commit(&repo, &[("b.txt", "b\n")], "another");
    assert_eq!(a.sandbox(&repo, &["run"]).code, 0);
    let remote = a.bare_remote(&repo, "trusted.git");
    assert_eq!(a.sandbox(&repo, &["push"]).code, 0);
    let by = format!("git-sandbox@{} (fleet)", home_id(&a));

    // B shares the index, trusts nobody by allowed_signers, and was never told A's key.
    let b = on_index(&url);
    let clone = b.clone_and_init(remote.to_str().unwrap(), "clone");
    assert_eq!(b.sandbox(&clone, &["fetch"]).code, 0);
    let o = b.sandbox(&clone, &["log", "-n", "1", &c]);
    assert!(o.stdout.starts_with("✔"), "{o:?}");
    let o = b.sandbox(&clone, &["show", &c]);
    assert!(o.stdout.contains(&format!("Signed:   by {by}")), "{o:?}");
    assert_eq!(b.sandbox(&clone, &["reindex"]).code, 0);
    let o = b.sandbox(&clone, &["run", "--json", &c]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        o.json()[0]["verified"]["signer"],
        by.as_str(),
        "not run again: {o:?}"
    );

    // A machine outside the index does not.
    let outside = World::new();
    let elsewhere = outside.clone_and_init(remote.to_str().unwrap(), "elsewhere");
    assert_eq!(outside.sandbox(&elsewhere, &["fetch"]).code, 0);
    let o = outside.sandbox(&elsewhere, &["log", "-n", "1", &c]);
    assert!(o.stdout.contains("not verified"), "{o:?}");
}

/// The manual's recipe on a new machine: `GIT_SANDBOX_INDEX=postgres://…; git sandbox daemon`
/// with a data dir nothing made yet.
#[test]
fn a_new_machine_with_no_data_dir_yet_starts_its_daemon_on_postgres() {
    use std::os::unix::fs::PermissionsExt;
    let pg = Postgres::start();
    let url = pg.database("newmachine");
    let mut w = on_index(&url);
    let home = w.path("fresh/git-sandbox");
    w.extra_env
        .push(("GIT_SANDBOX_HOME".into(), home.display().to_string()));
    let _daemon = start(&w);
    let mode = std::fs::metadata(&home).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the data dir is private: {mode:o}");
    assert!(home.join("daemon.lock").is_file());
}

/// An unprivileged user whose data dir is someone else's: the daemon says it cannot open its
/// lock and why, not that a daemon runs.
#[test]
fn a_data_dir_the_user_cannot_write_is_reported_as_such_on_postgres() {
    let Some(mut w) = World::unprivileged() else {
        eprintln!("not root: the unprivileged variant is skipped");
        return;
    };
    let pg = Postgres::start();
    let url = pg.database("notmine");
    w.extra_env.push(("GIT_SANDBOX_INDEX".into(), url));
    // root's, 0755: nobody may read it but not create the lock in it.
    let home = w.path("roots");
    std::fs::create_dir(&home).unwrap();
    w.extra_env
        .push(("GIT_SANDBOX_HOME".into(), home.display().to_string()));
    let o = w.sandbox(&w.work(), &["daemon"]);
    assert_eq!(o.code, 128, "{o:?}");
    let (problem, hints) = o.error();
    assert_eq!(
        problem,
        format!(
            "cannot open the daemon lock {}: Permission denied (os error 13)",
            home.join("daemon.lock").display()
        ),
        "{o:?}"
    );
    assert_eq!(
        hints,
        [format!(
            "make {} a directory you can write, or set GIT_SANDBOX_HOME to one",
            home.display()
        )]
    );
}

fn quick(w: &World, repo: &Path, command: &str) -> String {
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
