//! The store and the command line on a real PostgreSQL server: the same operations as on
//! SQLite, a connection the server ends, and the command line end to end with its index there.

use super::exercise;
use crate::common::postgres::Postgres;
use crate::common::World;
use gs_model::EventKind;
use gs_store::Index;
use serde_json::json;

#[test]
fn the_store_and_the_command_line_on_postgresql() {
    let pg = Postgres::start();
    let url = pg.database("store");
    exercise(&Index::connect(&url).unwrap());
    // Connecting again finds the schema in place.
    let ix = Index::connect(&url).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // The server ends the connection (a restart, an administrator): at most the statement that
    // meets it fails; the index connects again for the next.
    let before: i64 = c
        .query_one(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'git-sandbox'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(before, 1);
    c.batch_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'git-sandbox'")
        .unwrap();
    // pg_terminate_backend only signals the backend: wait until it is gone, so that the next
    // statement is the one that meets the cut.
    for _ in 0..500 {
        let left: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'git-sandbox'",
                &[],
            )
            .unwrap()
            .get(0);
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = ix.repositories();
    assert!(ix.repositories().unwrap().is_empty());
    ix.add_event(EventKind::DaemonStarted, None, None, None, &json!({}))
        .unwrap();
    // A newer schema is refused, naming it.
    c.batch_execute("UPDATE sandbox_schema SET version = 99")
        .unwrap();
    let e = Index::connect(&url).err().unwrap().to_string();
    assert!(e.contains("newer git-sandbox (schema 99"), "{e}");

    // The command line, unchanged, with its index in PostgreSQL.
    let mut w = World::new();
    let url = pg.database("cli");
    w.extra_env.push(("GIT_SANDBOX_INDEX".into(), url.clone()));
    let repo = w.new_repo("onpg");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let o = w.sandbox(&repo, &["experiment", "start", "quick"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.git(&repo, &["switch", "-q", "experiment/quick"]);
    w.commit(&repo, &[("tests/test_more.py", "import unittest\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        self.assertTrue(True)\n")], "More");
    w.git(&repo, &["switch", "-q", "main"]);
    let o = w.sandbox(&repo, &["eval", "quick", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["recommendation"], "STRONGLY_RECOMMEND");
    let o = w.sandbox(&repo, &["promote", "quick", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let status = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(status["totals"]["runs"], 3, "{status}");
    assert_eq!(status["totals"]["experiments_by_state"]["promoted"], 1);
    assert!(
        status["index"].as_str().unwrap().starts_with("postgres://"),
        "{status}"
    );
    // Nothing went to a SQLite file in the data dir.
    assert!(!w.data().join("index.db").exists());
    // And the rows are in PostgreSQL.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let n: i64 = c
        .query_one("SELECT COUNT(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 3);

    // The daemon and the HTTP API, unchanged: a commit is run by the daemon, served by the API.
    let token = w.token("read");
    let (_daemon, addr) = w.serve();
    w.git(&repo, &["switch", "-q", "experiment/quick"]);
    let late = w.commit(&repo, &[("late.txt", "late")], "Late");
    w.git(&repo, &["switch", "-q", "main"]);
    assert!(
        w.wait_until(120, || w.note(&repo, &late).is_some()),
        "the daemon did not run it: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
    let r = crate::common::http::request(
        &addr,
        "GET",
        &format!("/api/v1/commits/onpg/{late}"),
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["commit"], late.as_str());
    let daemons = crate::common::http::request(
        &addr,
        "GET",
        "/api/v1/daemons",
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    )
    .json();
    assert_eq!(daemons["daemons"][0]["state"], "running", "{daemons}");

    // A URL that is no PostgreSQL URL, and a server that is not there: one line and a fix.
    let o = w.sandbox_env(&repo, &["status"], &[("GIT_SANDBOX_INDEX", "mysql://x/y")]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.error().0.contains("is not a PostgreSQL URL"), "{o:?}");
    // A lease too short to be renewed in time, named with its variable and the fix.
    let o = w.sandbox_env(&repo, &["status"], &[("SANDBOX_INDEX_LEASE", "1s")]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.contains("SANDBOX_INDEX_LEASE") && problem.contains("a lease shorter than 3 s"),
        "{problem}"
    );
    assert!(hints.iter().any(|h| h.contains("60s")), "{hints:?}");
    let o = w.sandbox_env(
        &repo,
        &["status"],
        &[(
            "GIT_SANDBOX_INDEX",
            "postgres://sandbox@127.0.0.1:1/nothing",
        )],
    );
    assert_eq!(o.code, 128, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.starts_with("cannot reach the index at postgres://sandbox@127.0.0.1:1/nothing"),
        "{problem}"
    );
    assert!(hints[0].contains("GIT_SANDBOX_INDEX"), "{hints:?}");
}
