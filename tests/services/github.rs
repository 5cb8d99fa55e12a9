//! Commit statuses on GitHub, against a local stand-in of its REST API (GitHub cannot be reached
//! here; the code talks to it unchanged through `[github] api_url`): what is posted after a run,
//! rate limits waited out, a GitHub that is down never failing a run, and the token kept to the
//! tool.

use crate::common;

use common::fake_github::FakeGitHub;
use common::World;
use std::path::{Path, PathBuf};

const TOKEN: &str = "ghp_status_token_for_tests";
const BROKEN_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 5)\n";

/// A repository whose origin is on GitHub, and a user config pointing at `api`.
fn on_github(w: &World, api: &str, extra: &str) -> PathBuf {
    let repo = w.new_repo("gh");
    w.git(
        &repo,
        &["remote", "add", "origin", "https://github.com/octo/gh.git"],
    );
    w.user_config(&format!("[github]\napi_url = \"{api}\"\n{extra}"));
    repo
}

fn run(w: &World, repo: &Path) -> common::Out {
    w.sandbox_env(repo, &["run"], &[("GITHUB_TOKEN", TOKEN)])
}

fn statuses_for(gh: &FakeGitHub, sha: &str) -> Vec<serde_json::Value> {
    gh.seen()
        .into_iter()
        .filter(|s| s.method == "POST" && s.path == format!("/repos/octo/gh/statuses/{sha}"))
        .map(|s| s.body)
        .collect()
}

#[test]
fn a_run_posts_its_statuses_and_the_test_never_sees_the_token() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = on_github(&w, &gh.url(), "");
    let c = w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"env\"\n")],
        "print the environment",
    );
    let o = run(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    let posted = statuses_for(&gh, &c);
    let tests = posted
        .iter()
        .find(|b| b["context"] == "git-sandbox/tests")
        .unwrap_or_else(|| panic!("no tests status: {:?}", gh.seen()));
    assert_eq!(tests["state"], "success");
    assert!(
        tests["description"].as_str().unwrap().starts_with("passed"),
        "{tests}"
    );
    assert!(tests["description"].as_str().unwrap().chars().count() <= 140);
    let analysis = posted
        .iter()
        .find(|b| b["context"] == "git-sandbox/analysis")
        .expect("an analysis status");
    assert!(
        analysis["description"]
            .as_str()
            .unwrap()
            .contains("functions"),
        "{analysis}"
    );
    // Authenticated with the token, which the test's own environment never had.
    assert!(gh.seen().iter().all(|s| s.authorization.contains(TOKEN)));
    let record = w.sandbox(&repo, &["show", "--json", &c]).json();
    let output = record["tests"]["output_tail"].as_str().unwrap();
    assert!(
        output.contains("PATH="),
        "the command printed its environment: {output}"
    );
    assert!(!output.contains(TOKEN), "{output}");

    // A failing commit is a failure status.
    let bad = w.commit(
        &repo,
        &[("tests/test_more.py", BROKEN_TESTS), (".sandbox.toml", "")],
        "broken",
    );
    assert_eq!(run(&w, &repo).code, 1);
    let tests = statuses_for(&gh, &bad)
        .into_iter()
        .find(|b| b["context"] == "git-sandbox/tests")
        .unwrap();
    assert_eq!(tests["state"], "failure", "{tests}");
    assert!(
        tests["description"].as_str().unwrap().contains("1 failed"),
        "{tests}"
    );
}

#[test]
fn a_run_that_tested_nothing_posts_no_tests_never_a_pass() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = on_github(&w, &gh.url(), "");
    w.git(&repo, &["rm", "-q", "-r", "tests", ".sandbox.toml"]);
    w.git(&repo, &["commit", "-q", "-m", "No tests left"]);
    let c = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    run(&w, &repo).success();
    let posted = statuses_for(&gh, &c);
    let tests = posted
        .iter()
        .find(|b| b["context"] == "git-sandbox/tests")
        .unwrap_or_else(|| panic!("no tests status: {:?}", gh.seen()));
    let text = tests["description"].as_str().unwrap();
    assert!(text.starts_with("no tests: nothing was tested"), "{tests}");
}

#[test]
fn each_named_check_gets_a_status_of_its_own() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = on_github(&w, &gh.url(), "");
    let c = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[checks.lint]\ncommand = \"echo 'style: 2 problems'; exit 1\"\n\n[checks.docs]\ncommand = \"true\"\nrequired = false\n",
        )],
        "lint fails",
    );
    assert_eq!(run(&w, &repo).code, 1);
    let posted = statuses_for(&gh, &c);
    let context = |name: &str| {
        posted
            .iter()
            .find(|b| b["context"] == name)
            .unwrap_or_else(|| panic!("no {name} status: {posted:?}"))
            .clone()
    };
    let lint = context("git-sandbox/check/lint");
    assert_eq!(lint["state"], "failure", "{lint}");
    assert!(
        lint["description"]
            .as_str()
            .unwrap()
            .starts_with("failed: exit 1"),
        "{lint}"
    );
    let docs = context("git-sandbox/check/docs");
    assert_eq!(docs["state"], "success", "{docs}");
    assert!(docs["description"].as_str().unwrap().contains("(optional)"));
    // The tests' own context says how the tests went, which was well.
    assert_eq!(context("git-sandbox/tests")["state"], "success");
}

#[test]
fn a_rate_limit_is_waited_out_and_a_github_that_is_down_fails_no_run() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = on_github(&w, &gh.url(), "");
    // GitHub's secondary limit answer: 403 with retry-after.
    gh.answer_next(
        403,
        &[("retry-after", "1"), ("x-ratelimit-remaining", "4999")],
        "You have exceeded a secondary rate limit",
    );
    let c = w.commit(&repo, &[("a.txt", "a\n")], "a");
    let started = std::time::Instant::now();
    let o = run(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    let posted = statuses_for(&gh, &c);
    // The refused one was sent again after the wait: three requests for two statuses.
    assert_eq!(posted.len(), 3, "{posted:?}");
    assert!(!o.stderr.contains("wait to be posted"), "{o:?}");

    // GitHub down: the run passes, says the statuses wait, and a daemon posts them later.
    w.user_config("[github]\napi_url = \"http://127.0.0.1:1\"\n");
    let d = w.commit(&repo, &[("b.txt", "b\n")], "b");
    let o = run(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("2 commit statuses wait to be posted to GitHub"),
        "{o:?}"
    );
    w.user_config(&format!("[github]\napi_url = \"{}\"\n", gh.url()));
    let mut daemon_cmd = w.spawn_env(
        &w.work(),
        &["daemon", "--workers", "1"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    let arrived = w.wait_until(40, || statuses_for(&gh, &d).len() >= 2);
    let _ = daemon_cmd.child.kill();
    assert!(
        arrived,
        "the daemon never posted them: {}",
        std::fs::read_to_string(w.path("daemon.log")).unwrap_or_default()
    );
}

#[test]
fn statuses_need_a_github_remote_and_a_token_and_a_bad_token_command_fails_no_run() {
    let gh = FakeGitHub::start();
    let w = World::new();
    // token_command instead of GITHUB_TOKEN.
    let repo = on_github(
        &w,
        &gh.url(),
        "token_command = \"printf tok-from-command\"\n",
    );
    let c = w.commit(&repo, &[("a.txt", "a\n")], "a");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let seen = gh.seen();
    assert!(!statuses_for(&gh, &c).is_empty(), "{seen:?}");
    assert!(seen
        .iter()
        .all(|s| s.authorization.contains("tok-from-command")));

    // A command that prints nothing: the run still passes, with one line that says why.
    w.user_config(&format!(
        "[github]\napi_url = \"{}\"\ntoken_command = \"false\"\n",
        gh.url()
    ));
    w.commit(&repo, &[("b.txt", "b\n")], "b");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("token_command \"false\" printed no token"),
        "{o:?}"
    );

    // A remote elsewhere: nothing is posted for its commits (what waited from before, for the
    // commit made while it was on GitHub, goes now that a token is there).
    w.git(
        &repo,
        &[
            "remote",
            "set-url",
            "origin",
            "https://gitlab.com/octo/gh.git",
        ],
    );
    let elsewhere = w.commit(&repo, &[("c.txt", "c\n")], "c");
    let o = w.sandbox_env(&repo, &["run"], &[("GITHUB_TOKEN", TOKEN)]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!gh.seen().iter().any(|s| s.path.contains(&elsewhere)));

    // [github] is the user's: a repository cannot point this machine's token elsewhere.
    w.git(
        &repo,
        &[
            "remote",
            "set-url",
            "origin",
            "https://github.com/octo/gh.git",
        ],
    );
    let evil = w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[github]\napi_url = \"http://127.0.0.1:9\"\n",
        )],
        "steal",
    );
    let o = w.sandbox_env(&repo, &["run"], &[("GITHUB_TOKEN", TOKEN)]);
    assert_eq!(o.code, 1, "{o:?}");
    let shown = w.sandbox(&repo, &["show", "--json", &evil]).json();
    assert!(
        shown["error"]
            .as_str()
            .unwrap()
            .contains("[github] is read from your user config only"),
        "{shown}"
    );
}

/// A world whose git sends `https://github.com/…` to bare repositories under `root`.
fn github_on_disk(w: &World) -> PathBuf {
    let root = w.path("github");
    std::fs::create_dir_all(&root).unwrap();
    w.git(
        &w.work(),
        &[
            "config",
            "--global",
            &format!("url.{}/.insteadOf", root.display()),
            "https://github.com/",
        ],
    );
    root
}

#[test]
fn new_with_github_creates_pushes_and_sets_origin() {
    let w = World::new();
    let root = github_on_disk(&w);
    let gh = FakeGitHub::with_repos(&root);
    w.user_config(&format!("[github]\napi_url = \"{}\"\n", gh.url()));
    let o = w.sandbox_env(
        &w.work(),
        &["new", "exp1", "--github", "--json"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let v = o.json();
    assert_eq!(v["github"]["created"], true, "{v}");
    assert_eq!(v["github"]["pushed"], true, "{v}");
    assert_eq!(v["github"]["html_url"], "https://github.com/octo/exp1");
    let create = gh
        .seen()
        .into_iter()
        .find(|s| s.path == "/user/repos")
        .expect("POST /user/repos");
    assert_eq!(create.body["name"], "exp1");
    assert_eq!(create.body["private"], true, "private unless --public");
    let local = PathBuf::from(v["path"].as_str().unwrap());
    assert_eq!(
        w.git(&local, &["config", "remote.origin.url"]).trim(),
        "https://github.com/octo/exp1.git"
    );
    // The initial commit and its result are there.
    let bare = root.join("octo/exp1.git");
    assert_eq!(
        w.git(&bare, &["rev-parse", "main"]),
        w.git(&local, &["rev-parse", "main"])
    );
    // Results follow with `push` (and a plain `git fetch` brings them back).
    let specs = w.git(&local, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(specs.contains("refs/notes/sandbox*"), "{specs}");
    assert_eq!(w.sandbox(&local, &["run"]).code, 0);
    assert_eq!(w.sandbox(&local, &["push"]).code, 0);
    let notes = w.git(&bare, &["for-each-ref", "refs/notes"]);
    assert!(notes.contains("refs/notes/sandbox"), "{notes}");

    // The same name again: GitHub refuses; the repository is made here only, with the way on.
    let o = w.sandbox_env(
        &w.work(),
        &["new", "exp1-again", "--github", "--org", "team"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(gh.seen().iter().any(|s| s.path == "/orgs/team/repos"));
    let o = w.sandbox_env(
        &w.work(),
        &[
            "new",
            "exp1",
            "--path",
            w.path("work/other").to_str().unwrap(),
            "--github",
        ],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("GitHub refused to create exp1 (422: Repository creation failed. (name already exists on this account))"),
        "{o:?}"
    );
    assert!(o.stderr.contains("git sandbox remote add-github"), "{o:?}");
}

#[test]
fn without_a_token_new_github_works_locally_and_remote_add_github_connects_later() {
    let w = World::new();
    let root = github_on_disk(&w);
    let gh = FakeGitHub::with_repos(&root);
    w.user_config(&format!("[github]\napi_url = \"{}\"\n", gh.url()));
    let o = w.sandbox(&w.work(), &["new", "later", "--github", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["github"]["created"], false);
    assert!(o.stderr.contains("no GitHub token"), "{o:?}");
    assert!(gh.seen().is_empty());
    let local = PathBuf::from(o.json()["path"].as_str().unwrap());
    assert!(w.git(&local, &["remote"]).trim().is_empty());
    // Later, with a token.
    let o = w.sandbox_env(
        &local,
        &["remote", "add-github", "--public"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout
            .contains("Created https://github.com/octo/later on GitHub and pushed to it"),
        "{o:?}"
    );
    assert_eq!(gh.seen()[0].body["private"], false);
    // Twice: refused, nothing changed.
    let o = w.sandbox_env(
        &local,
        &["remote", "add-github"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(
        o.error().0,
        "this repository already has a remote named origin"
    );
}

const MORE_TESTS: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

#[test]
fn promote_by_pull_request_opens_one_and_a_merge_on_github_marks_it_promoted() {
    let w = World::new();
    let root = github_on_disk(&w);
    let gh = FakeGitHub::with_repos(&root);
    w.user_config(&format!("[github]\napi_url = \"{}\"\n", gh.url()));
    let o = w.sandbox_env(
        &w.work(),
        &["new", "prs", "--github", "--json"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let repo = PathBuf::from(o.json()["path"].as_str().unwrap());
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "faster"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/faster"]);
    w.commit(&repo, &[("tests/test_more.py", MORE_TESTS)], "more tests");
    w.git(&repo, &["switch", "-q", "main"]);
    let bare = root.join("octo/prs.git");

    // A dry run shows the pull request and changes nothing anywhere.
    let o = w.sandbox(
        &repo,
        &[
            "promote",
            "faster",
            "--strategy",
            "pull-request",
            "--dry-run",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("# Promote experiment faster"), "{o:?}");
    assert!(
        o.stdout
            .contains("| criterion | result | value | threshold |"),
        "{o:?}"
    );
    assert!(!gh.seen().iter().any(|s| s.path.ends_with("/pulls")));
    assert!(w
        .git_out(
            &bare,
            &["rev-parse", "--verify", "-q", "experiment/faster"],
            true
        )
        .stdout
        .is_empty());

    let o = w.sandbox_env(
        &repo,
        &["promote", "faster", "--strategy", "pull-request", "--json"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let pr = o.json();
    assert_eq!(pr["number"], 7, "{pr}");
    let opened = gh
        .seen()
        .into_iter()
        .find(|s| s.path == "/repos/octo/prs/pulls")
        .expect("a pull request was opened");
    assert_eq!(opened.body["head"], "experiment/faster");
    assert_eq!(opened.body["base"], "main");
    assert!(
        opened.body["body"]
            .as_str()
            .unwrap()
            .contains("STRONGLY_RECOMMEND"),
        "{}",
        opened.body
    );
    // The branch is on GitHub; production did not move; the experiment waits for the merge.
    assert_eq!(
        w.git(&bare, &["rev-parse", "experiment/faster"]),
        w.git(&repo, &["rev-parse", "experiment/faster"])
    );
    assert_ne!(
        w.git(&bare, &["rev-parse", "main"]),
        w.git(&repo, &["rev-parse", "experiment/faster"])
    );
    let show = w
        .sandbox(&repo, &["experiment", "show", "faster", "--json"])
        .json();
    assert_eq!(show["state"], "active");

    // Somebody merges it on GitHub; the next fetch sees production contain it.
    let merger = w.work().join("merger");
    w.git(
        &w.work(),
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            merger.to_str().unwrap(),
        ],
    );
    w.git(
        &merger,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "Merge pull request #7",
            "origin/experiment/faster",
        ],
    );
    w.git(&merger, &["push", "-q", "origin", "main"]);
    let o = w.sandbox(&repo, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");
    let show = w
        .sandbox(&repo, &["experiment", "show", "faster", "--json"])
        .json();
    assert_eq!(show["state"], "promoted", "{show}");
    let files = w.git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!files.contains("experiments/"), "{files}");

    // An experiment started before its metadata left the tree: the branch the pull request
    // proposes gets a commit that drops the committed file, so production never receives it.
    let main = w.git(&repo, &["rev-parse", "main"]).trim().to_string();
    w.git(&repo, &["switch", "-q", "-c", "experiment/legacy"]);
    w.commit(
        &repo,
        &[(
            "experiments/legacy/experiment.toml",
            &format!("name = \"legacy\"\ncreated_at = \"2026-11-01T00:00:00.000Z\"\nauthor = \"A <a@example.com>\"\nbase_commit = \"{main}\"\nbase = \"main\"\n\n[config]\n"),
        )],
        "Start experiment legacy",
    );
    let head = w.commit(&repo, &[("tests/test_legacy.py", MORE_TESTS)], "more tests");
    w.git(&repo, &["switch", "-q", "main"]);
    let o = w.sandbox_env(
        &repo,
        &["promote", "legacy", "--strategy", "pull-request", "--json"],
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        w.git(&repo, &["rev-parse", "experiment/legacy^"]).trim(),
        head
    );
    let proposed = w.git(
        &bare,
        &["ls-tree", "-r", "--name-only", "experiment/legacy"],
    );
    assert!(proposed.contains("tests/test_legacy.py"), "{proposed}");
    assert!(!proposed.contains("experiments/"), "{proposed}");
}

#[test]
fn the_contract_check_refuses_what_github_would() {
    // The checker every fake's request goes through is not a no-op.
    let sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    let path = format!("/repos/octo/gh/statuses/{sha}");
    assert_eq!(
        common::prism::violation("POST", &path, br#"{"state":"success","context":"c"}"#),
        None
    );
    let bad = common::prism::violation("POST", &path, br#"{"state":"passed"}"#)
        .expect("an unknown state is refused");
    assert!(bad.contains("state"), "{bad}");
    assert!(common::prism::violation("POST", "/repos/octo/gh/no-such-thing", b"{}").is_some());
}

#[test]
fn with_a_github_app_check_runs_carry_the_summary_and_annotations() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let key = w.path("home/app.pem");
    let made = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let repo = on_github(
        &w,
        &gh.url(),
        &format!(
            "app_id = 42\ninstallation_id = 7\napp_key_file = \"{}\"\n",
            key.display()
        ),
    );
    // Six parameters: a potential issue the analysis flags on its line.
    let c = w.commit(
        &repo,
        &[("src/wide.py", "def wide(a, b, c, d, e, g):\n    return a\n")],
        "wide",
    );
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    let seen = gh.seen();
    // The app's JWT bought an installation token, which posted the check runs.
    let exchange = seen
        .iter()
        .find(|s| s.path == "/app/installations/7/access_tokens")
        .unwrap_or_else(|| panic!("no token exchange: {seen:?}"));
    let jwt = exchange
        .authorization
        .trim_start_matches("Bearer ")
        .to_string();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(claims["iss"], "42");
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        600
    );
    // Signed with the app's key: openssl verifies it with the public half.
    let public = w.path("home/app.pub");
    let ok = std::process::Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&key)
        .arg("-out")
        .arg(&public)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
    std::fs::write(
        w.path("home/jwt.data"),
        format!("{}.{}", parts[0], parts[1]),
    )
    .unwrap();
    std::fs::write(w.path("home/jwt.sig"), b64.decode(parts[2]).unwrap()).unwrap();
    let verify = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-verify"])
        .arg(&public)
        .arg("-signature")
        .arg(w.path("home/jwt.sig"))
        .arg(w.path("home/jwt.data"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("Verified OK"),
        "{verify:?}"
    );

    let runs: Vec<_> = seen
        .iter()
        .filter(|s| s.path == "/repos/octo/gh/check-runs")
        .collect();
    assert_eq!(runs.len(), 2, "{seen:?}");
    assert!(runs
        .iter()
        .all(|r| r.authorization == "Bearer ghs_installation_token"));
    assert!(!seen.iter().any(|s| s.path.contains("/statuses/")));
    let tests = runs
        .iter()
        .find(|r| r.body["name"] == "git-sandbox/tests")
        .unwrap();
    assert_eq!(tests.body["head_sha"], c.as_str());
    assert_eq!(tests.body["conclusion"], "success");
    assert!(tests.body["output"]["summary"]
        .as_str()
        .unwrap()
        .contains("| status | passed | failed |"));
    let analysis = runs
        .iter()
        .find(|r| r.body["name"] == "git-sandbox/analysis")
        .unwrap();
    let notes = analysis.body["output"]["annotations"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|a| a["path"] == "src/wide.py" && a["start_line"] == 1),
        "{}",
        analysis.body
    );
}

#[test]
fn a_primary_rate_limit_waits_for_its_reset_and_a_refusal_is_reported_once() {
    let gh = FakeGitHub::start();
    let w = World::new();
    let repo = on_github(&w, &gh.url(), "");
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    // GitHub's primary limit: 429 (or 403) with x-ratelimit-remaining 0 and the reset time.
    gh.answer_next(
        429,
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset.to_string()),
        ],
        "API rate limit exceeded for user ID 1.",
    );
    let c = w.commit(&repo, &[("a.txt", "a\n")], "a");
    let o = run(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now >= reset, "posted again before the reset");
    assert_eq!(statuses_for(&gh, &c).len(), 3);

    // A token GitHub does not accept: the run passes, the refusal is one line and an event, and
    // the status is not tried forever.
    gh.answer_next(401, &[], "Bad credentials");
    gh.answer_next(401, &[], "Bad credentials");
    let d = w.commit(&repo, &[("b.txt", "b\n")], "b");
    let o = run(&w, &repo);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stderr.contains("(401: Bad credentials)"), "{o:?}");
    let events = w.sandbox(
        &repo,
        &["events", "--json", "--kind", "github.status_failed"],
    );
    assert_eq!(events.stdout.lines().count(), 2, "{events:?}");
    let before = statuses_for(&gh, &d).len();
    w.commit(&repo, &[("c.txt", "c\n")], "c");
    assert_eq!(run(&w, &repo).code, 0);
    assert_eq!(
        statuses_for(&gh, &d).len(),
        before,
        "a refused status is not sent again"
    );
}
