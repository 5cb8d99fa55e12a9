//! `gc`, `forget` and `init --remove`, driven through the real binary against real repositories
//! and the real index.

#[path = "housekeeping/caches.rs"]
mod caches;
use crate::common;

use common::World;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const DAY: Duration = Duration::from_secs(86_400);

fn repo_id(w: &World, repo: &Path) -> String {
    w.git(repo, &["config", "sandbox.repositoryId"])
        .trim()
        .to_string()
}

fn index(w: &World) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(w.data().join("index.db")).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c
}

fn count(w: &World, sql: &str, id: &str) -> i64 {
    index(w).query_row(sql, [id], |r| r.get(0)).unwrap()
}

fn rows_of(w: &World, id: &str) -> i64 {
    ["runs", "experiments", "evaluations", "jobs", "events"]
        .iter()
        .map(|t| {
            count(
                w,
                &format!("SELECT COUNT(*) FROM {t} WHERE repository_id = ?1"),
                id,
            )
        })
        .sum::<i64>()
        + count(w, "SELECT COUNT(*) FROM repositories WHERE id = ?1", id)
}

/// Write a run log of `size` bytes last written `age` ago.
fn log(w: &World, id: &str, name: &str, size: usize, age: Duration) -> PathBuf {
    let dir = w.data().join("logs").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, vec![b'x'; size]).unwrap();
    age_file(&path, age);
    path
}

fn age_file(path: &Path, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

fn registry(w: &World) -> String {
    std::fs::read_to_string(w.data().join("registry")).unwrap_or_default()
}

fn listed(w: &World) -> Vec<String> {
    w.sandbox(&w.work(), &["list", "--json"]).json()["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// A snapshot of everything gc may touch, to show a dry run touched none of it.
fn state(w: &World) -> (Vec<PathBuf>, i64, String, Vec<String>) {
    let mut files = Vec::new();
    for d in [w.data().join("logs"), w.path("scratch")] {
        for e in walk(&d) {
            files.push(e);
        }
    }
    files.sort();
    let events: i64 = index(w)
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    (files, events, registry(w), listed(w))
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// Commit a test command (so that runs are recorded, with a log) and return the commit.
fn with_command(w: &World, repo: &Path) -> String {
    w.commit(
        repo,
        &[(".sandbox.toml", "[test]\ncommand = \"echo hello\"\n")],
        "echo as the test command",
    )
}

fn scratch_world() -> World {
    let mut w = World::new();
    let scratch = w.path("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    w
}

#[test]
fn gc_prunes_old_logs_events_and_dead_checkouts_and_keeps_the_rest() {
    let w = scratch_world();
    let repo = w.new_repo("keep");
    let id = repo_id(&w, &repo);
    let head = with_command(&w, &repo);
    let run = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let fresh = w.log_of(&head);
    let old = log(&w, &id, &format!("{}.log", "a".repeat(40)), 1000, 40 * DAY);
    let old_trial = log(
        &w,
        &id,
        &format!("{}.trial.log", "b".repeat(40)),
        24,
        31 * DAY,
    );
    let recent = log(&w, &id, &format!("{}.log", "c".repeat(40)), 10, 29 * DAY);
    // An old log whose run the daemon is running now, and one a process is writing.
    let running = log(&w, &id, &format!("{}.log", "d".repeat(40)), 10, 50 * DAY);
    index(&w)
        .execute(
            "INSERT INTO jobs (repository_id, commit_id, trigger, state, created_at, updated_at)
             VALUES (?1, ?2, 'hook', 'running', 'x', 'x')",
            [&id, &"d".repeat(40)],
        )
        .unwrap();
    let writing = log(&w, &id, &format!("{}.log", "e".repeat(40)), 10, 50 * DAY);
    let mut writer = std::process::Command::new("sleep")
        .arg("60")
        .stdout(
            std::fs::File::options()
                .append(true)
                .open(&writing)
                .unwrap(),
        )
        .spawn()
        .unwrap();

    // Events: two made old, the rest (the runs' own) stay.
    let events_before: i64 = index(&w)
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(events_before >= 3, "{events_before}");
    index(&w)
        .execute(
            "UPDATE events SET time = '2020-01-01T00:00:00.000Z' WHERE id IN (SELECT id FROM events ORDER BY id LIMIT 2)",
            [],
        )
        .unwrap();

    // Checkouts: one of a process that is gone, one of this live process, one not ours.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let stale = w.path(&format!("scratch/git-sandbox-{dead_pid}-abc"));
    let live = w.path(&format!("scratch/git-sandbox-{}-def", std::process::id()));
    let other = w.path("scratch/someone-else");
    for d in [&stale, &live, &other] {
        std::fs::create_dir_all(d.join("tree")).unwrap();
        std::fs::write(d.join("tree/f.py"), "x = 1\n").unwrap();
    }

    let before = state(&w);
    let dry = w.sandbox(&repo, &["gc", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(state(&w), before, "a dry run changes nothing");
    let human = w.sandbox(&repo, &["gc", "--dry-run"]);
    assert!(
        human
            .stdout
            .contains("Would remove 2 logs (1.0 KiB) older than 30d"),
        "{human:?}"
    );
    assert!(human.stdout.contains("nothing was changed"), "{human:?}");

    let real = w.sandbox(&repo, &["gc", "--json"]);
    assert_eq!(real.code, 0, "{real:?}");
    let (d, r) = (dry.json(), real.json());
    for key in [
        "logs_expired",
        "logs_over_bound",
        "logs_in_progress",
        "checkouts",
        "events",
    ] {
        assert_eq!(d[key], r[key], "dry run and real run agree on {key}");
    }
    assert_eq!(r["dry_run"], false);
    assert_eq!(r["logs_expired"]["count"], 2, "{r}");
    assert_eq!(r["logs_expired"]["bytes"], 1024, "{r}");
    assert_eq!(r["logs_in_progress"], 2, "{r}");
    assert_eq!(r["checkouts"]["count"], 1, "{r}");
    assert_eq!(r["checkouts"]["bytes"], 6, "{r}");
    assert_eq!(r["events"], 2, "{r}");
    assert!(!old.exists() && !old_trial.exists());
    assert!(recent.exists() && fresh.exists());
    assert!(running.exists(), "the log of a running job is kept");
    assert!(writing.exists(), "a log held open by a process is kept");
    assert!(!stale.exists());
    assert!(live.exists() && other.exists());
    let events_after: i64 = index(&w)
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(events_after, events_before - 2);
    assert_eq!(listed(&w), vec!["keep"], "a repository on disk stays");
    // Results are in git: gc never touches notes.
    assert!(w.note(&repo, &head).is_some());

    // Once the run is over, its old log goes.
    writer.kill().unwrap();
    writer.wait().unwrap();
    let again = w.sandbox(&repo, &["gc", "--json"]).json();
    assert_eq!(again["logs_expired"]["count"], 1, "{again}");
    assert!(!writing.exists() && running.exists());
}

#[test]
fn gc_bounds_total_log_size_oldest_first() {
    let w = scratch_world();
    let repo = w.new_repo("big");
    let id = repo_id(&w, &repo);
    let kib = 1024;
    let oldest = log(
        &w,
        &id,
        &format!("{}.log", "1".repeat(40)),
        600 * kib,
        3 * DAY,
    );
    let middle = log(
        &w,
        &id,
        &format!("{}.log", "2".repeat(40)),
        600 * kib,
        2 * DAY,
    );
    let newest = log(&w, &id, &format!("{}.log", "3".repeat(40)), 600 * kib, DAY);
    let o = w.sandbox_env(&repo, &["gc", "--json"], &[("SANDBOX_GC_MAX_LOG_MB", "1")]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = o.json();
    assert_eq!(r["logs_expired"]["count"], 0, "{r}");
    assert_eq!(r["logs_over_bound"]["count"], 2, "{r}");
    assert_eq!(r["logs_over_bound"]["bytes"], 1200 * kib, "{r}");
    assert_eq!(r["logs_kept"]["count"], 1, "{r}");
    assert!(!oldest.exists() && !middle.exists() && newest.exists());

    let bad = w.sandbox_env(&repo, &["gc"], &[("SANDBOX_GC_MAX_LOG_MB", "0")]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("SANDBOX_GC_MAX_LOG_MB") && bad.stderr.contains("at least 1"),
        "{bad:?}"
    );
    let (_, hints) = bad.error();
    assert_eq!(hints.len(), 1, "{bad:?}");
    assert!(newest.exists());
}

#[test]
fn gc_unregisters_a_repository_that_is_gone_and_leaves_the_others() {
    let w = scratch_world();
    let stay = w.new_repo("stay");
    let gone = w.new_repo("gone");
    let gone_id = repo_id(&w, &gone);
    let head = with_command(&w, &gone);
    assert_eq!(
        w.sandbox(&gone, &["run"]).code,
        0,
        "a run gives it rows and a log"
    );
    assert!(w.log_of(&head).exists());
    std::fs::remove_dir_all(&gone).unwrap();
    assert!(rows_of(&w, &gone_id) > 0);

    let before = state(&w);
    let dry = w.sandbox(&w.work(), &["gc", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains(&format!(
            "Would unregister gone ({gone_id}), gone from {}: 1 run",
            gone.display()
        )),
        "{dry:?}"
    );
    assert_eq!(state(&w), before, "a dry run changes nothing");

    let r = w.sandbox(&w.work(), &["gc", "--json"]).json();
    let repos = r["repositories"].as_array().unwrap();
    assert_eq!(repos.len(), 1, "{r}");
    assert_eq!(repos[0]["repository_id"], gone_id.as_str());
    assert_eq!(repos[0]["runs"], 1);
    assert_eq!(repos[0]["logs"]["count"], 1);
    assert_eq!(repos[0]["registry"], true);
    assert_eq!(rows_of(&w, &gone_id), 0);
    assert!(!registry(&w).contains(&gone_id));
    assert!(!w.data().join("logs").join(&gone_id).exists());
    assert_eq!(listed(&w), vec!["stay"]);
    assert!(registry(&w).contains(&repo_id(&w, &stay)));
}

#[test]
fn gc_retention_comes_from_the_user_config_and_never_from_a_repository() {
    let w = scratch_world();
    let repo = w.new_repo("cfg");
    let id = repo_id(&w, &repo);
    let head = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"true\"\n\n[gc]\nlogs = \"1d\"\n",
        )],
        "try to set gc from the repository",
    );
    let two_days = log(&w, &id, &format!("{}.log", "f".repeat(40)), 10, 2 * DAY);

    let o = w.sandbox(&repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "gc does not read the repository's config: {o:?}");
    assert_eq!(o.json()["retention"]["logs"], "30d");
    assert!(
        two_days.exists(),
        "the repository's [gc] did not take effect"
    );

    // A run of that commit is an error record naming the key and the fix.
    let run = w.sandbox(&repo, &["run", "--json"]);
    let rec = run.json()[0].clone();
    assert_eq!(rec["status"], "error", "{run:?}");
    let msg = rec["error"].as_str().unwrap();
    assert!(
        msg.contains(".sandbox.toml:4: key `gc`: [gc] is read from your user config only"),
        "{msg}"
    );
    assert_eq!(rec["commit"], head.as_str());

    // The user's config does take effect.
    let cfg = w.path("config/git-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[gc]\nlogs = \"1d\"\n").unwrap();
    let o = w.sandbox(&repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["retention"]["logs"], "1d");
    assert!(!two_days.exists());
}

#[test]
fn init_refuses_a_repository_config_with_gc() {
    let w = World::new();
    let dir = w.work().join("p");
    std::fs::create_dir_all(&dir).unwrap();
    w.git(&dir, &["init", "-q", "-b", "main"]);
    w.commit(
        &dir,
        &[(".sandbox.toml", "[gc]\nevents = \"1d\"\n")],
        "first",
    );
    let o = w.sandbox(&dir, &["init"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.stderr
            .contains(".sandbox.toml:1: key `gc`: [gc] is read from your user config only"),
        "{o:?}"
    );
    assert!(!dir.join(".git/hooks/post-commit").exists());
}

#[test]
fn forget_by_name_path_id_and_current_directory() {
    let w = scratch_world();
    let a = w.new_repo("alpha");
    let b = w.new_repo("beta");
    let c = w.new_repo("gamma");
    let d = w.new_repo("delta");
    let a_id = repo_id(&w, &a);
    let head = with_command(&w, &a);
    assert_eq!(w.sandbox(&a, &["run"]).code, 0);
    assert!(rows_of(&w, &a_id) > 0);

    let o = w.sandbox(&w.work(), &["forget", "alpha", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let f = o.json();
    assert_eq!(f["repository_id"], a_id.as_str());
    assert_eq!(f["runs"], 1);
    assert_eq!(f["logs"]["count"], 1);
    assert_eq!(rows_of(&w, &a_id), 0);
    assert!(!registry(&w).contains(&a_id));
    assert!(!w.data().join("logs").join(&a_id).exists());
    assert!(w.note(&a, &head).is_some(), "its notes stay in git");
    assert_eq!(listed(&w), vec!["beta", "gamma", "delta"]);

    let by_path = w.sandbox(&w.work(), &["forget", &b.display().to_string()]);
    assert_eq!(by_path.code, 0, "{by_path:?}");
    assert!(by_path.stdout.starts_with("Forgot beta ("), "{by_path:?}");
    assert!(
        by_path.stderr.contains("hooks are still installed")
            && by_path.stderr.contains("git sandbox init --remove"),
        "{by_path:?}"
    );
    let by_id = w.sandbox(&w.work(), &["forget", &repo_id(&w, &c)]);
    assert_eq!(by_id.code, 0, "{by_id:?}");
    let here = w.sandbox(&d.join("tests"), &["forget"]);
    assert_eq!(here.code, 0, "{here:?}");
    assert!(here.stdout.starts_with("Forgot delta ("), "{here:?}");
    assert!(listed(&w).is_empty());

    // As the hint says, the hooks stay: the next commit registers it again.
    w.commit(&b, &[], "after forget");
    assert_eq!(listed(&w), vec!["beta"]);

    for args in [vec!["forget", "no-such-repo"], vec!["forget"]] {
        let before = state(&w);
        let o = w.sandbox(&w.work(), &args);
        assert_eq!(o.code, 2, "{o:?}");
        assert!(o.stderr.contains("see `git sandbox list`"), "{o:?}");
        let (_, hints) = o.error();
        assert_eq!(hints.len(), 1, "{o:?}");
        assert_eq!(state(&w), before);
    }
}

#[test]
fn init_remove_restores_a_chained_hook_and_a_second_remove_is_a_no_op() {
    let w = World::new();
    let repo = w.work().join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    w.commit(&repo, &[("a.txt", "a\n")], "first");
    let hooks = repo.join(".git/hooks");
    let theirs: &[u8] = b"#!/bin/sh\n# theirs, with a byte that is not UTF-8: \xfe\necho theirs\n";
    std::fs::write(hooks.join("post-commit"), theirs).unwrap();
    std::fs::set_permissions(
        hooks.join("post-commit"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let pre_push = b"#!/bin/sh\nexit 0\n";
    std::fs::write(hooks.join("pre-push"), pre_push).unwrap();
    let config_before = std::fs::read_to_string(repo.join(".git/config")).unwrap();

    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let id = repo_id(&w, &repo);
    let head = with_command(&w, &repo);
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    assert!(hooks.join("post-commit.pre-sandbox").exists());

    let o = w.sandbox(&repo, &["init", "--remove", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = o.json();
    assert_eq!(r["changed"], true);
    assert_eq!(r["forgotten"]["repository_id"], id.as_str());
    let actions: Vec<(String, String)> = r["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_string(),
                h["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(actions.contains(&("post-commit".into(), "restored".into())));
    assert!(actions.contains(&("reference-transaction".into(), "removed".into())));
    assert_eq!(std::fs::read(hooks.join("post-commit")).unwrap(), theirs);
    let mode = std::fs::metadata(hooks.join("post-commit"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    assert!(!hooks.join("post-commit.pre-sandbox").exists());
    for name in ["reference-transaction", "post-merge", "post-rewrite"] {
        assert!(!hooks.join(name).exists(), "{name}");
    }
    assert_eq!(std::fs::read(hooks.join("pre-push")).unwrap(), pre_push);
    assert!(w
        .git_out(&repo, &["config", "sandbox.repositoryId"], true)
        .stdout
        .is_empty());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config_before,
        "the git config is as it was before init"
    );
    assert!(!repo.join(".git/sandbox-watermarks").exists());
    assert_eq!(rows_of(&w, &id), 0);
    assert!(!registry(&w).contains(&id));
    assert!(w.note(&repo, &head).is_some(), "notes stay");
    assert!(
        repo.join(".sandbox.toml").exists(),
        "files in the work tree stay"
    );

    // The hooks are gone: a commit no longer registers it.
    w.commit(&repo, &[], "third");
    assert!(listed(&w).is_empty());

    let hooks_before = walk(&hooks);
    let again = w.sandbox(&repo, &["init", "--remove"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("nothing changed"), "{again:?}");
    assert_eq!(walk(&hooks), hooks_before);
    assert_eq!(std::fs::read(hooks.join("post-commit")).unwrap(), theirs);
    assert_eq!(
        w.sandbox(&repo, &["init", "--remove", "--json"]).json()["changed"],
        false
    );

    let outside = w.sandbox(&w.work(), &["init", "--remove"]);
    assert_eq!(outside.code, 2, "{outside:?}");
}

/// `status --json`'s run figures (kept in the index as runs are written) against the runs the
/// index holds, counted here.
fn status_agrees(w: &World) -> i64 {
    let s = w.sandbox(&w.work(), &["status", "--json"]).json();
    let (runs, passed): (i64, i64) = index(w)
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(status = 'passed'), 0) FROM runs WHERE status != 'skipped'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(s["totals"]["runs"], runs, "{s}");
    assert_eq!(s["totals"]["passed_runs"], passed, "{s}");
    for r in s["repositories"].as_array().unwrap() {
        let id = r["repository_id"].as_str().unwrap();
        let of = |status: &str| {
            count(
                w,
                &format!("SELECT COUNT(*) FROM runs WHERE repository_id = ?1 AND {status}"),
                id,
            )
        };
        assert_eq!(r["runs"], of("status != 'skipped'"), "{s}");
        assert_eq!(r["passed_runs"], of("status = 'passed'"), "{s}");
        assert_eq!(
            r["failed_runs"],
            of("status NOT IN ('passed', 'skipped')"),
            "{s}"
        );
    }
    runs
}

#[test]
fn status_counts_stay_right_through_runs_reindex_forget_and_gc() {
    let w = scratch_world();
    let a = w.new_repo("alpha");
    let b = w.new_repo("beta");
    let c = w.new_repo("gamma");
    with_command(&w, &a);
    w.commit(&a, &[("x.txt", "x")], "second");
    w.commit(
        &b,
        &[(".sandbox.toml", "[test]\ncommand = \"false\"\n")],
        "failing",
    );
    with_command(&w, &c);
    assert_eq!(w.sandbox(&a, &["run", "HEAD~1", "HEAD"]).code, 0);
    assert_eq!(w.sandbox(&b, &["run"]).code, 1);
    assert_eq!(w.sandbox(&c, &["run"]).code, 0);
    assert_eq!(status_agrees(&w), 4);
    // Run again by hand: the commit's row is replaced, not added.
    assert_eq!(w.sandbox(&a, &["run", "--force", "HEAD"]).code, 0);
    assert_eq!(status_agrees(&w), 4);
    assert_eq!(w.sandbox(&w.work(), &["reindex"]).code, 0);
    assert_eq!(status_agrees(&w), 4);
    // A result dropped from the notes on purpose goes with the next reindex.
    w.git(&a, &["notes", "--ref=sandbox", "remove", "HEAD~1"]);
    assert_eq!(w.sandbox(&w.work(), &["reindex"]).code, 0);
    assert_eq!(status_agrees(&w), 3);
    assert_eq!(w.sandbox(&w.work(), &["forget", "beta"]).code, 0);
    assert_eq!(status_agrees(&w), 2);
    std::fs::remove_dir_all(&c).unwrap();
    assert_eq!(w.sandbox(&w.work(), &["gc"]).code, 0);
    assert_eq!(status_agrees(&w), 1);
}

#[test]
fn gc_drops_old_completed_jobs_and_tallies_no_recent_run_needs_and_keeps_the_rest() {
    let w = World::new();
    let repo = w.new_repo("tallies");
    let id = repo_id(&w, &repo);
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"true\"\n[analysis]\nenabled = true\n",
        )],
        "analysed",
    );
    w.commit(&repo, &[("a.py", "def f():\n    return 1\n")], "a");
    assert_eq!(w.sandbox(&repo, &["run", "HEAD~1..HEAD"]).code, 0);
    let db = index(&w);
    let ran_trees: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'tree:%'
             AND blob_id IN (SELECT tree_id FROM runs)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(ran_trees >= 1, "the runs stored their trees' tallies");
    let (key, files): (String, i64) = db
        .query_row(
            "SELECT key, (SELECT COUNT(*) FROM analysis_cache WHERE key NOT LIKE 'tree:%')
             FROM analysis_cache WHERE key LIKE 'tree:%' LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // A tally of a tree no run has (an old commit's), and jobs: completed long ago, completed
    // now, pending long ago.
    db.execute(
        "INSERT INTO analysis_cache (blob_id, key, result) VALUES (?1, ?2, '{}')",
        [&"f".repeat(40), &key],
    )
    .unwrap();
    let old = "2020-01-01T00:00:00.000Z";
    let now = "2099-01-01T00:00:00.000Z";
    for (c, state, at) in [
        ("1", "completed", old),
        ("2", "completed", now),
        ("3", "pending", old),
    ] {
        db.execute(
            "INSERT INTO jobs (repository_id, commit_id, trigger, state, created_at, updated_at)
             VALUES (?1, ?2, 'hook', ?3, ?4, ?4)",
            [&id, &c.repeat(40), state, at],
        )
        .unwrap();
    }
    let jobs = || -> Vec<String> {
        let db = index(&w);
        let mut s = db
            .prepare("SELECT commit_id FROM jobs WHERE repository_id = ?1")
            .unwrap();
        s.query_map([&id], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let o = w.sandbox(&repo, &["gc", "--dry-run"]);
    assert!(
        o.stdout.contains("Would remove 1 job completed over"),
        "{o:?}"
    );
    assert!(o.stdout.contains("1 stored analysis tally"), "{o:?}");
    assert!(
        jobs().contains(&"1".repeat(40)),
        "a dry run removes nothing"
    );
    let o = w.sandbox(&repo, &["gc"]);
    assert_eq!(o.code, 0, "{o:?}");
    let left = jobs();
    assert!(!left.contains(&"1".repeat(40)), "{left:?}");
    assert!(
        left.contains(&"2".repeat(40)) && left.contains(&"3".repeat(40)),
        "{left:?}"
    );
    let db = index(&w);
    let gone: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM analysis_cache WHERE blob_id = ?1",
            [&"f".repeat(40)],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(gone, 0);
    let (kept, files_kept): (i64, i64) = db
        .query_row(
            "SELECT (SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'tree:%'
                     AND blob_id IN (SELECT tree_id FROM runs)),
                    (SELECT COUNT(*) FROM analysis_cache WHERE key NOT LIKE 'tree:%')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((kept, files_kept), (ran_trees, files));
    // What the newest runs need is there: the next commit's analysis starts from its parent's.
    w.commit(&repo, &[("b.py", "def g():\n    return 2\n")], "b");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let how: String = index(&w)
        .query_row(
            "SELECT json_extract(data, '$.how') FROM events WHERE kind = 'analysis.completed'
             ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(how, "incremental");
}
