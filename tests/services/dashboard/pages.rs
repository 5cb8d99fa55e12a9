//! The dashboard's pages over plain HTTP: the commit list, what promotion would do, redirect
//! after POST, the activity feed without heartbeats, and the icon.

use crate::common::http::{request, Reply};
use crate::common::World;

const FAILING: &str = "import unittest\n\nclass T(unittest.TestCase):\n    def test_broken(self):\n        self.assertEqual(1, 2)\n";
const PASSING: &str = "import unittest\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        self.assertTrue(True)\n";

pub(super) fn get(addr: &str, path: &str, token: &str) -> Reply {
    let cookie = format!("gsbx_session={token}");
    request(addr, "GET", path, &[("Cookie", &cookie)], b"")
}

fn post_form(addr: &str, path: &str, cookie: &str, body: &str) -> Reply {
    request(
        addr,
        "POST",
        path,
        &[
            ("Cookie", cookie),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
}

/// The links of a page that start with `prefix`, in order.
pub(super) fn links(body: &str, prefix: &str) -> Vec<String> {
    body.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|h| h.starts_with(prefix))
        .map(|h| h.replace("&amp;", "&"))
        .collect()
}

/// The rows of the page's commit table, each as its text without tags.
pub(super) fn commit_rows(body: &str) -> Vec<String> {
    let Some(table) = body.split("id=\"commits\"").nth(1) else {
        return Vec::new();
    };
    let table = table.split("</table>").next().unwrap();
    table
        .split("<tr")
        .skip(2)
        .map(|row| {
            let mut text = String::new();
            let mut tag = false;
            for c in row.chars() {
                match c {
                    '<' => tag = true,
                    '>' => {
                        tag = false;
                        text.push(' ');
                    }
                    _ if !tag => text.push(c),
                    _ => {}
                }
            }
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[test]
fn a_repository_lists_its_commits_newest_first_in_pages_each_opening_its_page() {
    let w = World::new();
    let repo = w.new_repo("hist");
    let first = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let more = w.commit(&repo, &[("tests/test_more.py", PASSING)], "More tests");
    let broken = w.commit(&repo, &[("tests/test_broken.py", FAILING)], "Broken");
    w.git(&repo, &["rm", "-q", "tests/test_broken.py"]);
    w.git(&repo, &["commit", "-q", "-m", "Unbreak"]);
    let unbroken = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    // One at a time, oldest first, so the index learns them in history's order.
    for c in [&first, &more, &broken, &unbroken] {
        let o = w.sandbox(&repo, &["run", c]);
        assert!(o.code == 0 || c == &broken, "{o:?}");
    }
    let read = w.token("read");
    let (_daemon, addr) = w.serve();

    let page = get(&addr, "/r/hist", &read);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        links(&page.body, "/r/hist/commits").len() == 1,
        "the repository's page links to its commits: {}",
        page.body
    );

    let one = get(&addr, "/r/hist/commits?limit=3", &read);
    assert_eq!(one.status, 200, "{one:?}");
    let rows = commit_rows(&one.body);
    assert_eq!(rows.len(), 3, "{rows:#?}");
    assert!(
        rows[0].contains("Unbreak") && rows[0].contains(&unbroken[..7]),
        "{rows:#?}"
    );
    // The revert's tree is the one `more` had: its result is served from that run.
    assert!(
        rows[0].contains("passed") && rows[0].contains("served from an earlier run"),
        "{rows:#?}"
    );
    assert!(
        rows[1].contains("Broken") && rows[1].contains("failed"),
        "{rows:#?}"
    );
    assert!(rows[1].contains("1 failed"), "the failed count: {rows:#?}");
    assert!(
        rows[2].contains("More tests") && !rows[2].contains("served from"),
        "{rows:#?}"
    );
    // A duration as people read it (`350ms`, `1.2s`), not a raw count of milliseconds.
    let duration = rows[2]
        .split_whitespace()
        .find(|w| {
            let number = |unit: &str| {
                w.strip_suffix(unit)
                    .is_some_and(|n| n.parse::<f64>().is_ok())
            };
            number("ms") || number("s")
        })
        .unwrap_or_else(|| panic!("a duration: {rows:#?}"));
    assert!(!rows[2].contains(" ms"), "{rows:#?}");
    assert!(
        duration.chars().next().unwrap().is_ascii_digit(),
        "{rows:#?}"
    );
    let opens = links(&one.body, "/c/hist/");
    for c in [&unbroken, &broken, &more] {
        assert!(
            opens.contains(&format!("/c/hist/{c}")),
            "{c} opens its page: {opens:?}"
        );
    }
    let next = links(&one.body, "/r/hist/commits?");
    let older = next
        .iter()
        .find(|l| l.contains("before="))
        .unwrap_or_else(|| panic!("a link to older commits: {next:?}"));

    let two = get(&addr, older, &read);
    assert_eq!(two.status, 200, "{two:?}");
    let rows = commit_rows(&two.body);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert!(rows[0].contains(&first[..7]), "{rows:#?}");
    assert!(
        !links(&two.body, "/r/hist/commits?")
            .iter()
            .any(|l| l.contains("before=")),
        "the last page links to nothing older"
    );
    let commit = get(&addr, &format!("/c/hist/{first}"), &read);
    assert_eq!(commit.status, 200, "{commit:?}");

    let bad = get(&addr, "/r/hist/commits?limit=0", &read);
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(bad.body.contains("limit"), "{bad:?}");
}

/// Two experiments: one whose head fails its tests, one that adds a passing test.
fn experiments(w: &World) -> std::path::PathBuf {
    let repo = w.new_repo("dash");
    for name in ["good", "doomed"] {
        let o = w.sandbox(&repo, &["experiment", "start", name]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    w.git(&repo, &["switch", "-q", "experiment/doomed"]);
    w.commit(&repo, &[("tests/test_broken.py", FAILING)], "Broken");
    w.git(&repo, &["switch", "-q", "experiment/good"]);
    w.commit(&repo, &[("tests/test_more.py", PASSING)], "More tests");
    w.git(&repo, &["switch", "-q", "main"]);
    for rev in ["main", "experiment/doomed", "experiment/good"] {
        w.sandbox(&repo, &["run", rev]);
    }
    repo
}

#[test]
fn a_failing_experiment_says_promotion_would_be_refused_instead_of_offering_it() {
    let w = World::new();
    experiments(&w);
    let admin = w.token("admin");
    let (_daemon, addr) = w.serve();
    let page = get(&addr, "/r/dash", &admin);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        !page.body.contains("/r/dash/experiments/doomed/promote"),
        "no promote form for the failing experiment: {}",
        page.body
    );
    assert!(
        page.body
            .contains("promotion would be refused: the experiment's tests do not pass (failed)"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("/r/dash/experiments/good/promote"),
        "the passing one can be promoted: {}",
        page.body
    );
    assert!(
        page.body.contains("/r/dash/experiments/doomed/kill"),
        "killing it stays possible"
    );
}

#[test]
fn every_form_post_answers_see_other_so_a_reload_sends_nothing_again() {
    let w = World::new();
    let repo = experiments(&w);
    let admin = w.token("admin");
    let (_daemon, addr) = w.serve();
    let session = format!("gsbx_session={admin}");

    // Signing in with a wrong token: back to the login page, which says why.
    let r = post_form(&addr, "/login", "", "token=gsbx_wrong");
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/login"), "{r:?}");
    let flash = r
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("a flash cookie: {r:?}"))
        .to_string();
    let back = request(&addr, "GET", "/login", &[("Cookie", &flash)], b"");
    assert!(back.body.contains("not one of this machine"), "{back:?}");
    let again = request(&addr, "GET", "/login", &[], b"");
    assert!(
        !again.body.contains("not one of this machine"),
        "shown once: {again:?}"
    );

    let r = post_form(&addr, "/login", "", &format!("token={admin}"));
    assert_eq!((r.status, r.header("location")), (303, Some("/")), "{r:?}");

    // An action: 303 to the experiments' page, whose message shows once.
    let page = get(&addr, "/r/dash", &admin);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("a CSRF token: {}", page.body))
        .to_string();
    let main_before = w.git(&repo, &["rev-parse", "main"]);
    let r = post_form(
        &addr,
        "/r/dash/experiments/good/promote",
        &session,
        &format!("csrf={csrf}&dry_run=true"),
    );
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/r/dash"), "{r:?}");
    let flash = r
        .headers
        .iter()
        .filter(|(k, _)| k == "set-cookie")
        .map(|(_, v)| v.split(';').next().unwrap().to_string())
        .find(|c| !c.starts_with("gsbx_session="))
        .unwrap_or_else(|| panic!("a flash cookie: {r:?}"));
    let cookies = format!("{session}; {flash}");
    let shown = request(&addr, "GET", "/r/dash", &[("Cookie", &cookies)], b"");
    assert!(shown.body.contains("Nothing was changed"), "{}", shown.body);
    assert!(
        shown
            .headers
            .iter()
            .any(|(k, v)| k == "set-cookie" && v.contains("Max-Age=0")),
        "the message is cleared once shown: {shown:?}"
    );
    assert_eq!(w.git(&repo, &["rev-parse", "main"]), main_before);

    // A refusal comes back the same way, as a message on the page.
    let r = post_form(
        &addr,
        "/r/dash/experiments/doomed/promote",
        &session,
        &format!("csrf={csrf}&dry_run=false"),
    );
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/r/dash")),
        "{r:?}"
    );
    let r = post_form(
        &addr,
        "/r/dash/experiments/doomed/kill",
        &session,
        &format!("csrf={csrf}"),
    );
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/r/dash")),
        "{r:?}"
    );

    let r = post_form(&addr, "/logout", &session, "");
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/login")),
        "{r:?}"
    );
}

#[test]
fn the_activity_feed_leaves_heartbeats_out_unless_asked_and_marks_its_times() {
    let w = World::new();
    let repo = w.new_repo("beats");
    w.sandbox(&repo, &["run", "main"]);
    let read = w.token("read");
    let (_daemon, addr) = w.serve();
    // The daemon beats every 30 s.
    let beat = w.wait_until(45, || {
        let r = request(
            &addr,
            "GET",
            "/api/v1/events?kind=daemon.heartbeat",
            &[("Authorization", &format!("Bearer {read}"))],
            b"",
        );
        r.json()["events"].as_array().is_some_and(|e| !e.is_empty())
    });
    assert!(beat, "no heartbeat within 45 s");
    let home = get(&addr, "/", &read);
    assert_eq!(home.status, 200, "{home:?}");
    let feed = home.body.split("id=\"feed\"").nth(1).unwrap().to_string();
    assert!(!feed.contains("daemon.heartbeat"), "{feed}");
    assert!(feed.contains("run.completed"), "{feed}");
    assert!(
        links(&home.body, "/?heartbeats=1").len() == 1,
        "a link shows them: {}",
        home.body
    );
    // Times as UTC for the script to put in the viewer's zone.
    let datetime = feed
        .split("<time datetime=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("a <time>: {feed}"));
    assert!(
        datetime.len() >= 20 && datetime.ends_with('Z') && datetime.as_bytes()[10] == b'T',
        "{datetime}"
    );

    let all = get(&addr, "/?heartbeats=1", &read);
    let feed = all.body.split("id=\"feed\"").nth(1).unwrap();
    assert!(feed.contains("daemon.heartbeat"), "{feed}");
}

#[test]
fn the_icon_is_served_to_anyone() {
    let w = World::new();
    let read = w.token("read");
    let (_daemon, addr) = w.serve();
    let ico = request(&addr, "GET", "/favicon.ico", &[], b"");
    assert_eq!(ico.status, 200, "{ico:?}");
    assert_eq!(ico.header("content-type"), Some("image/x-icon"), "{ico:?}");
    assert!(ico.body.starts_with("\0\0\u{1}\0"), "an ICO file");
    let home = get(&addr, "/", &read);
    let icons = home
        .body
        .split("<link rel=\"icon\"")
        .skip(1)
        .filter_map(|s| s.split("href=\"").nth(1)?.split('"').next())
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(!icons.is_empty(), "{}", home.body);
    for href in icons {
        let r = request(&addr, "GET", &href, &[], b"");
        assert_eq!(r.status, 200, "{href}: {r:?}");
        assert!(
            r.header("content-type").unwrap_or("").starts_with("image/"),
            "{r:?}"
        );
    }
}
