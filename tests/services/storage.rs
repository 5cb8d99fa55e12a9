//! The index on both back-ends: the same store operations against the SQLite file and a real
//! PostgreSQL server (started here on 127.0.0.1), and the command line end to end with its
//! index in PostgreSQL (`GIT_SANDBOX_INDEX`).

#[path = "storage/postgresql.rs"]
mod postgresql;

use gs_model::{EventKind, RunRecord};
use gs_store::{
    DaemonRow, Delivery, EventFilter, Held, Index, Job, Reaped, RepoRow, StatusRow, MAX_ATTEMPTS,
};
use serde_json::json;
use std::collections::HashSet;

fn record(commit: &str, tree: &str, status: &str, ms: u64) -> RunRecord {
    serde_json::from_value(json!({
        "schema": "git-sandbox/run/v1", "commit": commit, "tree": tree, "parents": [],
        "ref": "refs/heads/main", "experiment": null, "trigger": "hook", "status": status,
        "started_at": "2026-11-26T08:00:00.000Z", "finished_at": "2026-11-26T08:00:01.000Z",
        "duration_ms": ms, "cached_from": null, "config_hash": "k1",
        "tests": null, "analysis": null, "changes": null,
        // Made here: evidence, as a run of this machine's is once its reader has checked it.
        "verified": {"signer": "this machine", "key": "SHA256:k", "here": true}
    }))
    .unwrap()
}

/// A failing run with a probe beside it: phase one held `one` of its failing tests, phase two
/// the other `two`; the probe found none when `one` is 0 (the selection missed).
fn probed(commit: &str, one: u64, two: u64) -> RunRecord {
    let mut r = record(commit, commit, "failed", 10);
    let phase = |command: &str, failed: u64| {
        json!({"command": command, "exit_code": 1, "passed": 1, "failed": failed,
               "errors": null, "total": failed + 1, "duration_ms": 5})
    };
    r.tests = Some(
        serde_json::from_value(json!({
            "command": "pytest", "framework": null, "exit_code": 1, "passed": 2,
            "failed": one + two, "skipped": 0, "errors": 0, "total": one + two + 2,
            "failures": (0..one + two)
                .map(|i| json!({"name": format!("tests/t.py::t{i}"), "message": "m"}))
                .collect::<Vec<_>>(),
            "duration_ms": 10, "output_tail": "", "killed_by": null,
            "resources": {"cpu_ms": 1, "max_rss_kb": 1},
            "phases": [phase("pytest tests/test_a.py", one), phase("pytest", two)],
            "first_failure_ms": 3, "selection_missed": one == 0,
        }))
        .unwrap(),
    );
    r
}

/// The figures `status`, `list` and the API read (kept as runs are written), against the same
/// figures counted from the runs themselves: a kept count that drifted from the runs is wrong.
fn totals_agree(ix: &Index) {
    let all = ix.runs_page(None, None, None, 100_000).unwrap();
    let counted = |repo: Option<&str>| {
        let runs: Vec<&RunRecord> = all
            .iter()
            .filter(|r| repo.is_none_or(|id| r.1 == id) && r.2.status.as_str() != "skipped")
            .map(|r| &r.2)
            .collect();
        let passed = runs
            .iter()
            .filter(|r| r.status.as_str() == "passed")
            .count() as u64;
        let made: Vec<u64> = runs
            .iter()
            .filter(|r| r.cached_from.is_none())
            .map(|r| r.duration_ms)
            .collect();
        let mean = (!made.is_empty()).then(|| made.iter().sum::<u64>() as f64 / made.len() as f64);
        (runs.len() as u64, passed, mean)
    };
    assert_eq!(ix.run_totals().unwrap(), counted(None));
    for s in ix.repository_stats().unwrap() {
        let (runs, passed, mean) = counted(Some(&s.repo.repository_id));
        assert_eq!(
            (s.runs, s.passed_runs, s.failed_runs, s.mean_duration_ms),
            (runs, passed, runs - passed, mean),
            "{}",
            s.repo.repository_id
        );
    }
}

/// Every kind of store operation, with what a user of it would check.
fn exercise(ix: &Index) {
    let repo = RepoRow {
        repository_id: "repo_a".into(),
        name: "alpha".into(),
        path: "/srv/alpha".into(),
        url: "file:///srv/alpha".into(),
        repository_type: "local".into(),
        created_at: "2026-11-26T07:00:00.000Z".into(),
        last_activity: None,
        remote_url: Some("https://git.example/alpha.git".into()),
    };
    ix.upsert_repository(&repo).unwrap();
    ix.upsert_repository(&repo).unwrap();
    assert_eq!(ix.repositories().unwrap().len(), 1);
    assert_eq!(
        ix.repository_by_id("repo_a").unwrap().unwrap().name,
        "alpha"
    );
    assert_eq!(
        ix.repository_by_remote("https://git.example/alpha.git")
            .unwrap()
            .map(|r| r.repository_id),
        Some("repo_a".into())
    );

    // Runs: one per commit (a second put replaces it), found by commit and by tree and config.
    // Each write moves the repository's generation; reading does not.
    let before = ix.run_generation("repo_a").unwrap();
    let id1 = ix
        .put_run("repo_a", &record("c1", "t1", "passed", 100))
        .unwrap();
    let id1b = ix
        .put_run("repo_a", &record("c1", "t1", "passed", 120))
        .unwrap();
    assert_eq!(id1, id1b);
    let generation = ix.run_generation("repo_a").unwrap();
    assert!(generation > before);
    assert_eq!(ix.run_generation("repo_a").unwrap(), generation);
    ix.put_run("repo_a", &record("c2", "t2", "failed", 300))
        .unwrap();
    assert!(ix.run_generation("repo_a").unwrap() > generation);
    assert_eq!(
        ix.run_for_commit("repo_a", "c1")
            .unwrap()
            .unwrap()
            .record
            .duration_ms,
        120
    );
    assert!(ix
        .run_for_tree("repo_a", "t1", Some("k1"), "c9")
        .unwrap()
        .is_some());
    assert!(ix
        .run_for_tree("repo_a", "t1", Some("k2"), "c9")
        .unwrap()
        .is_none());
    let page = ix.runs_page(Some("repo_a"), None, None, 10).unwrap();
    assert_eq!(
        page.iter().map(|r| r.2.commit.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    assert_eq!(
        ix.runs_page(None, Some("failed"), None, 10).unwrap().len(),
        1
    );
    assert_eq!(ix.runs_page(None, None, Some(id1), 10).unwrap().len(), 1);
    assert_eq!(ix.run_by_id(id1).unwrap().unwrap().1.commit, "c1");
    let (runs, passed, mean) = ix.run_totals().unwrap();
    assert_eq!((runs, passed), (2, 1));
    assert_eq!(mean, Some(210.0));
    let stats = ix.repository_stats().unwrap();
    assert_eq!(
        (stats[0].runs, stats[0].passed_runs, stats[0].failed_runs),
        (2, 1, 1)
    );
    totals_agree(ix);
    // A run replaced by another of another status, a skipped commit (no run), one served from
    // another commit's result (not in the mean), and a run removed.
    ix.put_run("repo_a", &record("c2", "t2", "passed", 50))
        .unwrap();
    ix.put_run("repo_a", &record("c3", "t3", "skipped", 0))
        .unwrap();
    let mut served = record("c4", "t2", "passed", 3);
    served.cached_from = Some("c2".into());
    ix.put_run("repo_a", &served).unwrap();
    totals_agree(ix);
    assert_eq!(ix.run_totals().unwrap(), (3, 3, Some(85.0)));
    ix.put_run("repo_a", &record("c3", "t3", "failed", 40))
        .unwrap();
    totals_agree(ix);
    ix.delete_run("repo_a", "c3").unwrap();
    ix.delete_run("repo_a", "c4").unwrap();
    ix.put_run("repo_a", &record("c2", "t2", "failed", 300))
        .unwrap();
    totals_agree(ix);
    assert_eq!(ix.run_totals().unwrap(), (2, 1, Some(210.0)));

    // Attempts: beside a commit's run, never in its place; ended by a run that ran its tests.
    let tried = record("c1", "t1", "error", 5);
    ix.add_attempt("repo_a", &tried, "`mytest` was not found")
        .unwrap();
    ix.add_attempt("repo_a", &tried, "`mytest` was not found again")
        .unwrap();
    ix.add_attempt("repo_a", &record("c2", "t2", "error", 5), "no module")
        .unwrap();
    let kept = ix.attempts_of("repo_a", &["c1", "c9"]).unwrap();
    assert_eq!(
        kept.iter().map(|a| a.reason.as_str()).collect::<Vec<_>>(),
        ["`mytest` was not found", "`mytest` was not found again"]
    );
    assert_eq!(
        (kept[0].tree.as_str(), kept[0].trigger.as_str()),
        ("t1", "hook")
    );
    assert_eq!(
        ix.run_for_commit("repo_a", "c1")
            .unwrap()
            .unwrap()
            .record
            .status
            .as_str(),
        "passed"
    );
    assert_eq!(ix.run_totals().unwrap().0, 2, "an attempt is no run");
    ix.end_attempts("repo_a", &["c1"]).unwrap();
    assert!(ix.attempts_of("repo_a", &["c1"]).unwrap().is_empty());
    assert_eq!(ix.attempts_of("repo_a", &["c2"]).unwrap().len(), 1);

    // The queue: queued once, claimed by one, retried with back-off, completed.
    let jobs = [
        ("c3".to_string(), Some("refs/heads/main".to_string())),
        ("c4".to_string(), None),
    ];
    assert_eq!(ix.enqueue("repo_a", &jobs, "hook").unwrap(), 2);
    assert_eq!(ix.enqueue("repo_a", &jobs, "hook").unwrap(), 0);
    assert_eq!(ix.queue_depth().unwrap(), (2, 0));
    assert_eq!(ix.pending_by_trigger().unwrap()["hook"], 2);
    assert_eq!(ix.ready_jobs(10).unwrap().len(), 2);
    let later = "2999-01-01T00:00:00.000Z";
    let past = "2000-01-01T00:00:00.000Z";
    // Claims: oldest first, only among the repositories named, never the same job twice.
    assert!(ix
        .claim_jobs("h1/daemon/1/0", 5, later, &["repo_b"])
        .unwrap()
        .is_empty());
    let a = ix
        .claim_jobs("h1/daemon/1/0", 1, later, &["repo_a"])
        .unwrap();
    assert_eq!(
        (a.len(), a[0].commit_id.as_str(), a[0].attempts),
        (1, "c3", 1)
    );
    let b = ix
        .claim_jobs("h2/daemon/7/0", 5, later, &["repo_a"])
        .unwrap();
    assert_eq!(b.len(), 1, "only the job nobody holds");
    assert_eq!(b[0].commit_id, "c4");
    assert!(ix
        .claim_jobs("h2/daemon/7/0", 5, later, &["repo_a"])
        .unwrap()
        .is_empty());
    assert!(ix.start_job(&a[0]).unwrap());
    assert!(!ix.start_job(&a[0]).unwrap(), "started twice");
    assert_eq!(ix.running_jobs().unwrap().len(), 1);
    assert_eq!(
        ix.queued_by_ref("repo_a").unwrap()["refs/heads/main"],
        (0, 1)
    );
    assert_eq!(
        ix.renew_leases("h1/daemon/1/0", later, &[a[0].id, b[0].id])
            .unwrap(),
        1
    );
    // An infrastructure failure: pending again after a back-off.
    assert!(ix.retry_job(&a[0], "a flaky disk").unwrap());
    assert_eq!(
        ix.job_state("repo_a", "c3").unwrap().as_deref(),
        Some("pending")
    );
    assert!(
        ix.claim_jobs("h1/daemon/1/0", 5, later, &["repo_a"])
            .unwrap()
            .is_empty(),
        "backed off"
    );
    // h2's lease runs out (its daemon stopped renewing it): the reaper queues c4 again; h2's
    // late completion, fenced by its attempt, changes nothing.
    assert_eq!(
        ix.renew_leases("h2/daemon/7/0", past, &[b[0].id]).unwrap(),
        1
    );
    assert_eq!(
        ix.reap(Held::Expired).unwrap(),
        Reaped {
            requeued: 1,
            dead: 0
        }
    );
    assert!(
        !ix.finish_job(&b[0], true).unwrap(),
        "a late completion counted"
    );
    let again = ix
        .claim_jobs("h3/daemon/9/0", 5, later, &["repo_a"])
        .unwrap();
    assert_eq!((again[0].commit_id.as_str(), again[0].attempts), ("c4", 2));
    assert!(!ix.start_job(&b[0]).unwrap());
    assert!(ix.finish_job(&again[0], true).unwrap());
    assert_eq!(
        ix.job_state("repo_a", "c4").unwrap().as_deref(),
        Some("completed")
    );
    // Asked for again (a lost result): pending with a fresh count.
    assert_eq!(
        ix.requeue("repo_a", &[("c4".into(), None)], "manual")
            .unwrap(),
        1
    );
    assert!(ix.has_job("repo_a", "c4").unwrap());
    // A home whose daemon died: what it held goes back; a stop gives back what never started,
    // without counting the claim.
    let held = ix
        .claim_jobs("h4/daemon/2/0", 5, later, &["repo_a"])
        .unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(ix.reap(Held::OwnerPrefix("h4/")).unwrap().requeued, 1);
    let held = ix
        .claim_jobs("h4/daemon/3/0", 5, later, &["repo_a"])
        .unwrap();
    assert_eq!(ix.release_unstarted("h4/daemon/3/0").unwrap(), 1);
    assert_eq!(
        ix.claim_jobs("x/mcp/1/0", 1, later, &["repo_a"]).unwrap()[0].attempts,
        held[0].attempts
    );
    assert_eq!(
        ix.reap(Held::OwnerPrefixIn("x/", "repo_b"))
            .unwrap()
            .requeued,
        0
    );
    assert_eq!(
        ix.reap(Held::OwnerPrefixIn("x/", "repo_a"))
            .unwrap()
            .requeued,
        1
    );
    // A job that kills whoever runs it is given up after MAX_ATTEMPTS claims (dead letter).
    for n in 0.. {
        let got = ix
            .claim_jobs(&format!("k{n}/daemon/1/0"), 1, past, &["repo_a"])
            .unwrap();
        if got.is_empty() {
            break;
        }
        assert!(got[0].attempts <= MAX_ATTEMPTS, "{got:?}");
        ix.reap(Held::Expired).unwrap();
    }
    assert_eq!(
        ix.job_state("repo_a", "c4").unwrap().as_deref(),
        Some("dead")
    );
    assert_eq!(
        ix.requeue("repo_a", &[("c4".into(), None)], "manual")
            .unwrap(),
        1,
        "a dead job can be asked for again"
    );

    // A batch: one statement starts, ends or gives back many jobs, each fenced by its own
    // claim. A claim taken back meanwhile (its lease ran out) is left alone.
    let batch: Vec<(String, Option<String>)> = (5..9).map(|n| (format!("c{n}"), None)).collect();
    ix.upsert_repository(&RepoRow {
        repository_id: "repo_b".into(),
        name: "beta".into(),
        path: "/srv/beta".into(),
        url: "file:///srv/beta".into(),
        remote_url: None,
        ..repo.clone()
    })
    .unwrap();
    assert_eq!(ix.enqueue("repo_b", &batch, "hook").unwrap(), 4);
    let mine = ix
        .claim_jobs("h5/daemon/1/0", 4, later, &["repo_b"])
        .unwrap();
    assert_eq!(mine.len(), 4);
    ix.renew_leases("h5/daemon/1/0", past, &[mine[3].id])
        .unwrap();
    assert_eq!(ix.reap(Held::Expired).unwrap().requeued, 1);
    let theirs = ix
        .claim_jobs("h6/daemon/1/0", 4, later, &["repo_b"])
        .unwrap();
    assert_eq!(theirs.len(), 1);
    let all: Vec<&Job> = mine.iter().collect();
    let started = ix.start_jobs(&all).unwrap();
    let ids = |js: &[&Job]| js.iter().map(|j| j.id).collect::<HashSet<i64>>();
    assert_eq!(started, ids(&all[..3]), "the job taken back was started");
    assert_eq!(ix.running_jobs().unwrap().len(), 3);
    // A run indexes its result (the job done) before it ends its claim: the claim still held.
    ix.complete_jobs("repo_b", &["c5"], true).unwrap();
    assert_eq!(ix.finish_jobs(&all[..1], true).unwrap(), ids(&all[..1]));
    assert_eq!(ix.finish_jobs(&all[1..2], false).unwrap(), ids(&all[1..2]));
    // Handed back (the rest of a batch): pending, the claim not counted; the stale one unmoved.
    assert_eq!(ix.release_jobs(&all[2..]).unwrap(), ids(&all[2..3]));
    assert_eq!(
        ix.job_state("repo_b", "c8").unwrap().as_deref(),
        Some("assigned")
    );
    assert_eq!(
        ix.job_state("repo_b", "c6").unwrap().as_deref(),
        Some("failed")
    );
    let back = ix
        .claim_jobs("h6/daemon/1/0", 4, later, &["repo_b"])
        .unwrap();
    assert_eq!(
        (back.len(), back[0].commit_id.as_str(), back[0].attempts),
        (1, "c7", 1)
    );
    assert!(ix.finish_jobs(&all, true).unwrap().is_empty(), "late ends");
    assert_eq!(
        ix.job_state("repo_b", "c5").unwrap().as_deref(),
        Some("completed")
    );

    // Events: ids grow, filters by kind prefix and repository, paging, pruning.
    let e1 = ix
        .add_event(
            EventKind::RunCompleted,
            Some("repo_a"),
            None,
            Some("c1"),
            &json!({"status": "passed"}),
        )
        .unwrap();
    let e2 = ix
        .add_event(EventKind::DaemonHeartbeat, None, None, None, &json!({}))
        .unwrap();
    assert!(e2 > e1);
    let f = EventFilter {
        kind: Some("run.".into()),
        repository_id: Some("repo_a".into()),
        ..Default::default()
    };
    let got = ix.events(&f).unwrap();
    assert!(got.iter().all(|e| e.kind.starts_with("run.")) && got.iter().any(|e| e.id == e1));
    assert_eq!(got.last().unwrap().repository.as_deref(), Some("alpha"));
    assert_eq!(got.last().unwrap().data["status"], "passed");
    let after = ix
        .events(&EventFilter {
            since: Some(e1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(after.first().map(|e| e.id), Some(e2));
    let kept = vec!["repo_a".to_string()];
    assert!(
        ix.prune_events("2999-01-01T00:00:00.000Z", &kept, true)
            .unwrap()
            >= 1
    );
    ix.prune_events("2999-01-01T00:00:00.000Z", &kept, false)
        .unwrap();
    assert!(ix
        .events(&EventFilter::default())
        .unwrap()
        .iter()
        .all(|e| e.repository_id.is_some()));

    // Caches: analysis by blob and key, sandbox profiles.
    ix.put_analysis(&[("b1".into(), "v1:py".into(), "{}".into())])
        .unwrap();
    ix.put_analysis(&[("b1".into(), "v1:py".into(), "{\"x\":1}".into())])
        .unwrap();
    assert_eq!(
        ix.cached_analysis("b1", "v1:py").unwrap().as_deref(),
        Some("{\"x\":1}")
    );
    assert_eq!(ix.cached_analysis("b2", "v1:py").unwrap(), None);
    ix.put_profile("p1", &[]).unwrap();
    ix.put_profile("p1", &[]).unwrap();
    assert_eq!(ix.profile("p1").unwrap(), Some(vec![]));

    // Webhook deliveries: once per id; pending until finished.
    let d = Delivery {
        id: "d1".into(),
        source: "github".into(),
        event: "push".into(),
        repository_id: "repo_a".into(),
        remote: "origin".into(),
        refspec: "+refs/heads/main:refs/remotes/origin/main".into(),
        local_ref: "refs/remotes/origin/main".into(),
        body_sha256: Some("ab".repeat(32)),
    };
    assert!(ix.record_delivery(std::slice::from_ref(&d)).unwrap());
    assert!(
        !ix.record_delivery(std::slice::from_ref(&d)).unwrap(),
        "a redelivery"
    );
    // The same body under a new delivery id is a replay too.
    let replay = Delivery {
        id: "d2".into(),
        ..d.clone()
    };
    assert!(!ix.record_delivery(std::slice::from_ref(&replay)).unwrap());
    assert_eq!(ix.pending_deliveries().unwrap().len(), 1);
    ix.finish_delivery(&d, None).unwrap();
    assert!(
        ix.pending_deliveries().unwrap().is_empty()
            && ix.has_delivery("d1", "").unwrap()
            && ix.has_delivery("d3", &"ab".repeat(32)).unwrap()
            && !ix.has_delivery("d3", &"cd".repeat(32)).unwrap()
    );

    // Commit statuses waiting for GitHub.
    let s = StatusRow {
        repository_id: "repo_a".into(),
        commit_id: "c1".into(),
        context: "git-sandbox".into(),
        owner: "me".into(),
        repo: "alpha".into(),
        state: "success".into(),
        description: "3 passed".into(),
        attempts: 0,
    };
    ix.queue_status(&s).unwrap();
    assert_eq!(ix.pending_statuses().unwrap(), 1);
    assert_eq!(ix.due_statuses(i64::MAX, 10).unwrap().len(), 1);
    ix.status_later(&s, i64::MAX - 1, "rate limited").unwrap();
    assert!(ix.due_statuses(1, 10).unwrap().is_empty());
    ix.status_done(&s, None).unwrap();
    assert_eq!(ix.pending_statuses().unwrap(), 0);

    // Daemons.
    let daemon = DaemonRow {
        id: "h:1:0".into(),
        host: "h".into(),
        pid: 1,
        workers: 4,
        http: Some("127.0.0.1:8787".into()),
        started_at: "2026-11-26T08:00:00.000Z".into(),
        heartbeat_at: "2026-11-26T08:00:00.000Z".into(),
        busy_workers: 0,
        stopped_at: None,
    };
    ix.daemon_started(&daemon).unwrap();
    ix.daemon_heartbeat("h:1:0", 3).unwrap();
    assert_eq!(ix.daemons(5).unwrap()[0].busy_workers, 3);
    ix.daemon_stopped("h:1:0").unwrap();
    assert!(ix.daemons(5).unwrap()[0].stopped_at.is_some());

    // Executions: every run kept (a run again of a commit too), its CPU counted for its
    // experiment, and a test that failed on one run of a tree and not on another is flaky.
    let put_tested = |r: &RunRecord| {
        ix.put_run("repo_a", r).unwrap();
        ix.add_execution("repo_a", r).unwrap();
    };
    let tested = |commit: &str, at: &str, failing: &[&str], cpu: u64| {
        let status = if failing.is_empty() {
            "passed"
        } else {
            "failed"
        };
        let mut r = record(commit, "t7", status, 10);
        r.finished_at = at.into();
        r.experiment = Some("exp".into());
        r.tests = Some(serde_json::from_value(json!({
            "command": "t", "framework": "pytest", "exit_code": i32::from(!failing.is_empty()),
            "passed": 3 - failing.len(), "failed": failing.len(), "skipped": 0, "errors": 0,
            "total": 3, "duration_ms": 5, "output_tail": "", "killed_by": null,
            "resources": {"cpu_ms": cpu, "max_rss_kb": 1},
            "failures": failing.iter().map(|n| json!({"name": n, "message": "m"})).collect::<Vec<_>>()
        })).unwrap());
        r
    };
    put_tested(&tested("c7", "2026-11-26T09:00:00.000Z", &[], 1000));
    let second = tested(
        "c7",
        "2026-11-26T09:01:00.000Z",
        &["a::flaky", "a::broken"],
        2000,
    );
    put_tested(&second);
    // The same record indexed again (its note read back) is not a run of its own.
    put_tested(&second);
    put_tested(&tested(
        "c8",
        "2026-11-26T09:02:00.000Z",
        &["a::broken"],
        500,
    ));
    // A record served from another commit's result ran nothing.
    let mut served = tested("c9", "2026-11-26T09:03:00.000Z", &["a::broken"], 700);
    served.cached_from = Some("c8".into());
    put_tested(&served);
    assert_eq!(ix.experiment_cpu_ms("repo_a", "exp").unwrap(), 3500);
    assert_eq!(ix.experiment_cpu_ms("repo_a", "other").unwrap(), 0);
    let flaky = ix.flaky_tests("repo_a").unwrap();
    let names: Vec<(&str, u64, u64)> = flaky
        .iter()
        .map(|t| (t.name.as_str(), t.flips, t.runs))
        .collect();
    assert_eq!(
        names,
        vec![("a::flaky", 2, 3), ("a::broken", 1, 3)],
        "{flaky:?}"
    );
    assert_eq!(flaky[0].last_flip_commit, "c8");
    assert_eq!(flaky[0].last_outcome, "passed");
    assert_eq!(flaky[1].failures, 2);

    // Batches: many runs written by one statement (of two of one commit the later stands), read
    // back by commit in one; many commits queued at once, each once.
    let zed = RepoRow {
        repository_id: "repo_z".into(),
        name: "zed".into(),
        path: "/srv/zed".into(),
        remote_url: None,
        ..repo.clone()
    };
    ix.upsert_repository(&zed).unwrap();
    let mut many: Vec<RunRecord> = (0..250)
        .map(|i| record(&format!("z{i}"), "tz", "passed", i))
        .collect();
    many.push(record("z7", "tz", "failed", 7000));
    let ids = ix.put_runs("repo_z", &many).unwrap();
    assert_eq!(ids.len(), 251);
    assert_eq!(ids[7], ids[250], "one row per commit");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 250);
    let asked: Vec<String> = (0..260).map(|i| format!("z{i}")).collect();
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let found = ix.runs_for_commits("repo_z", &asked).unwrap();
    assert_eq!(found.len(), 250, "z250..z259 have no run");
    assert_eq!(found["z7"].record.duration_ms, 7000);
    assert_eq!(found["z7"].id, ids[7]);
    assert_eq!(found["z249"].record.duration_ms, 249);
    assert_eq!(found["z249"].id, ids[249]);
    assert!(ix.runs_for_commits("repo_a", &asked).unwrap().is_empty());
    // Queued again in a later statement (z0..z19) and in the same one (z205).
    let mut queued: Vec<(String, Option<String>)> =
        (0..230).map(|i| (format!("z{}", i % 210), None)).collect();
    queued.push(("z205".into(), None));
    assert_eq!(ix.enqueue("repo_z", &queued, "hook").unwrap(), 210);
    assert_eq!(ix.enqueue("repo_z", &queued, "hook").unwrap(), 0);
    let among = ix.queued_among("repo_z", &asked).unwrap();
    assert_eq!(among.len(), 210);
    assert!(among.contains("z209") && !among.contains("z210"));
    assert!(ix.queued_among("repo_a", &asked[..5]).unwrap().is_empty());
    totals_agree(ix);

    // A refill (reindex): a row that holds the same record is left as it is (its id kept, the
    // generation unmoved), a changed one replaced, a new one inserted; the commits no record was
    // put for are left to delete.
    let mut held = ix.run_commits("repo_z").unwrap();
    assert_eq!(held.len(), 250);
    let mut again: Vec<RunRecord> = (0..200)
        .map(|i| many[if i == 7 { 250 } else { i }].clone())
        .collect();
    again[3].duration_ms = 3333;
    again.push(record("z300", "tz", "passed", 300));
    let before = ix.runs_for_commits("repo_z", &asked).unwrap();
    let generation = ix.run_generation("repo_z").unwrap();
    ix.refilling(|| ix.refill_runs("repo_z", &again)).unwrap();
    // The generation moves once or twice a row written (PostgreSQL's trigger moves it twice
    // for an update): for two rows, not for 201.
    let moved = ix.run_generation("repo_z").unwrap() - generation;
    assert!(
        (2..=4).contains(&moved),
        "z3 and z300 written, nothing else: moved {moved}"
    );
    for r in &again {
        held.remove(&r.commit);
    }
    let stale: Vec<&str> = held.iter().map(String::as_str).collect();
    assert_eq!(stale.len(), 50, "z200..z249");
    assert_eq!(ix.delete_runs_of("repo_z", &stale).unwrap(), 50);
    let mut now_asked = asked.clone();
    now_asked.push("z300");
    let after = ix.runs_for_commits("repo_z", &now_asked).unwrap();
    assert_eq!(after.len(), 201);
    assert_eq!(after["z0"].id, before["z0"].id);
    assert_eq!(after["z7"].id, before["z7"].id);
    assert_eq!(after["z7"].record.duration_ms, 7000);
    assert_eq!(after["z3"].record.duration_ms, 3333);
    assert!(after.contains_key("z300") && !after.contains_key("z200"));
    totals_agree(ix);
    let generation = ix.run_generation("repo_z").unwrap();
    ix.refill_runs("repo_z", &again).unwrap();
    assert_eq!(
        ix.run_generation("repo_z").unwrap(),
        generation,
        "nothing changed"
    );
    ix.delete_runs("repo_z").unwrap();
    totals_agree(ix);
    ix.put_runs("repo_z", &many).unwrap();
    ix.delete_repository("repo_z").unwrap();
    totals_agree(ix);

    // Phase one's recall, read from the records' JSON (each back-end its own functions): by
    // faulty commit with a probe, and by failing test.
    ix.upsert_repository(&RepoRow {
        repository_id: "repo_p".into(),
        name: "probed".into(),
        path: "/srv/probed".into(),
        remote_url: None,
        ..repo.clone()
    })
    .unwrap();
    let probed = [
        probed("p1", 2, 1),
        probed("p2", 0, 1),
        probed("p3", 1, 0),
        record("p4", "p4", "failed", 10),
    ];
    ix.put_runs("repo_p", &probed).unwrap();
    let s = ix.repository_stats_of("repo_p").unwrap().unwrap();
    assert_eq!(
        (
            s.selection_caught,
            s.selection_missed,
            s.selection_tests_caught,
            s.selection_tests_failed
        ),
        (2, 1, 3, 5),
        "{s:?}"
    );
    assert_eq!((s.runs, s.failed_runs), (4, 4));
    assert!(ix.repository_stats_of("repo_nobody").unwrap().is_none());
    ix.delete_repository("repo_p").unwrap();

    // Forgetting a repository removes what is its; its generation never goes back (a reader
    // that saw it before must see the change).
    let generation = ix.run_generation("repo_a").unwrap();
    let rows = ix.delete_repository("repo_a").unwrap();
    assert_eq!(rows.runs, 5);
    totals_agree(ix);
    assert!(ix.run_generation("repo_a").unwrap() > generation);
    assert_eq!(ix.run_totals().unwrap(), (0, 0, None));
    assert!(ix.flaky_tests("repo_a").unwrap().is_empty());
    assert_eq!(ix.experiment_cpu_ms("repo_a", "exp").unwrap(), 0);
    ix.delete_repository("repo_b").unwrap();
    assert!(ix.repositories().unwrap().is_empty());
}

#[test]
fn the_store_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&Index::open(dir.path()).unwrap());
}

#[test]
fn an_index_of_the_schema_before_attempts_gains_them_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let repo = RepoRow {
        repository_id: "repo_a".into(),
        name: "alpha".into(),
        path: "/srv/alpha".into(),
        url: "file:///srv/alpha".into(),
        repository_type: "local".into(),
        created_at: "2026-11-26T07:00:00.000Z".into(),
        last_activity: None,
        remote_url: None,
    };
    {
        let ix = Index::open(dir.path()).unwrap();
        ix.upsert_repository(&repo).unwrap();
        ix.put_run("repo_a", &record("c1", "t1", "passed", 100))
            .unwrap();
    }
    // The file as schema 11 left it: no attempts table, no delivery body hashes, no signers, no
    // index of runs newest first, no kept run figures, no warm flag on executions, no notes tip,
    // no retry flag on executions.
    let file = dir.path().join("index.db");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "DROP INDEX runs_newest; DROP TRIGGER run_totals_insert; DROP TRIGGER run_totals_update;
             DROP TRIGGER run_totals_delete; DROP TABLE run_totals;
             DROP TABLE attempts; DROP INDEX deliveries_by_body;
             ALTER TABLE deliveries DROP COLUMN body_sha256; DROP TABLE signing_keys;
             ALTER TABLE runs DROP COLUMN verified; ALTER TABLE executions DROP COLUMN warm;
             ALTER TABLE executions DROP COLUMN retry; ALTER TABLE repositories DROP COLUMN notes_tip;
             PRAGMA user_version = 11",
        )
        .unwrap();
    let ix = Index::open(dir.path()).unwrap();
    assert_eq!(
        ix.run_for_commit("repo_a", "c1")
            .unwrap()
            .unwrap()
            .record
            .status
            .as_str(),
        "passed"
    );
    // Its figures are counted once, from the runs it had, then kept.
    assert_eq!(ix.run_totals().unwrap(), (1, 1, Some(100.0)));
    ix.put_run("repo_a", &record("c2", "t2", "failed", 300))
        .unwrap();
    totals_agree(&ix);
    ix.add_attempt("repo_a", &record("c1", "t1", "error", 5), "not found")
        .unwrap();
    assert_eq!(ix.attempts_of("repo_a", &["c1"]).unwrap().len(), 1);
}
