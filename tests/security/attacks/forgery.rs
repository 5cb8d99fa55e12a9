//! Forged results: whoever can push to a repository's remote can put any record in its notes.
//! A record is evidence only when this machine signed it or a signer its user trusts did
//! (`[trust] allowed_signers`): a hand-written record, a valid signature copied onto a changed
//! record, and a record that copies this machine's home id are shown as reports, never counted.

use super::common::World;
use serde_json::Value;
use std::path::{Path, PathBuf};

const PASSING: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";
const BROKEN: &str = "import unittest\n\n\nclass TestBroken(unittest.TestCase):\n    def test_math(self):\n        self.assertEqual(1 + 1, 3)\n";

fn rev(w: &World, repo: &Path, r: &str) -> String {
    w.git(repo, &["rev-parse", r]).trim().to_string()
}

/// A bare repository `shared.git` in `w`'s temp dir, `repo`'s `origin`, with everything pushed.
fn shared_remote(w: &World, repo: &Path) -> PathBuf {
    let shared = w.bare_remote(repo, "shared.git");
    let o = w.sandbox(repo, &["push"]);
    assert_eq!(o.code, 0, "{o:?}");
    shared
}

/// `git sandbox key --json` of a machine.
fn key(w: &World) -> Value {
    let o = w.sandbox(&w.work(), &["key", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    o.json()
}

fn home_id(w: &World) -> String {
    key(w)["principal"]
        .as_str()
        .unwrap()
        .trim_start_matches("git-sandbox@")
        .to_string()
}

/// `w` trusts the machines whose `allowed_signers` lines are given.
fn trust(w: &World, lines: &[String]) {
    let file = w.path("config/git-sandbox/allowed_signers");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    w.user_config(&format!(
        "[trust]\nallowed_signers = \"{}\"\n",
        file.display()
    ));
}

/// The one line of a record's note (as stored, signature and all).
fn note_line(w: &World, repo: &Path, commit: &str) -> String {
    let o = w.git_out(repo, &["notes", "--ref=sandbox", "show", commit], true);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout.trim().to_string()
}

/// Push `lines` as the note of `commit` to the remote's `refs/notes/sandbox-by/<writer>`, which
/// every `fetch` folds into its notes: what anyone with push access can do.
fn push_note(w: &World, clone: &Path, commit: &str, lines: &[String], writer: &str) {
    w.git(
        clone,
        &[
            "notes",
            "--ref=forged",
            "add",
            "-f",
            "-m",
            &lines.join("\n"),
            commit,
        ],
    );
    w.git(
        clone,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("refs/notes/forged:refs/notes/sandbox-by/{writer}"),
        ],
    );
}

/// Someone with push access: a clone of `shared` with every notes ref.
fn attacker_clone(shared: &Path) -> (World, PathBuf) {
    let attacker = World::new();
    let clone = attacker.work().join("attacker");
    let url = shared.to_str().unwrap();
    attacker.git(
        &attacker.work(),
        &["clone", "-q", url, clone.to_str().unwrap()],
    );
    attacker.git(
        &clone,
        &["fetch", "-q", "origin", "refs/notes/*:refs/notes/*"],
    );
    (attacker, clone)
}

/// The record of `of`, its signature taken off, made to name `onto` and its tree.
fn unsigned_copy(w: &World, clone: &Path, of: &str, onto: &str) -> Value {
    let mut forged: Value = serde_json::from_str(&note_line(w, clone, of)).unwrap();
    let obj = forged.as_object_mut().unwrap();
    obj.remove("signature");
    obj.insert("commit".into(), onto.into());
    obj.insert(
        "tree".into(),
        rev(w, clone, &format!("{onto}^{{tree}}")).into(),
    );
    forged
}

fn log_line(w: &World, repo: &Path, r: &str) -> String {
    let o = w.sandbox(repo, &["log", "-n", "1", r]);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
}

#[test]
fn a_hand_written_passing_record_from_the_remote_is_no_evidence() {
    let victim = World::new();
    let repo = victim.new_repo("victim");
    let o = victim.sandbox(&repo, &["experiment", "start", "broken"]);
    assert_eq!(o.code, 0, "{o:?}");
    let broken = victim.commit_on(
        &repo,
        "experiment/broken",
        &[("tests/test_broken.py", BROKEN)],
        "Break it",
    );
    assert_eq!(victim.sandbox(&repo, &["run", "main"]).code, 0);
    let shared = shared_remote(&victim, &repo);
    let main = rev(&victim, &repo, "main");
    let main_before = main.clone();

    // The attacker copies the victim's own record of main (its config hash, its home id) onto
    // the failing head: passed, finished later than anything here (within the minute of clock
    // drift a record may be ahead: one dated further is not read at all), unsigned.
    let (attacker, clone) = attacker_clone(&shared);
    let mut forged = unsigned_copy(&attacker, &clone, &main, &broken);
    let obj = forged.as_object_mut().unwrap();
    obj.insert(
        "parents".into(),
        serde_json::json!([rev(&attacker, &clone, &format!("{broken}~1"))]),
    );
    obj.insert("ref".into(), "refs/heads/experiment/broken".into());
    obj.insert("experiment".into(), "broken".into());
    let soon = std::process::Command::new("date")
        .args(["-u", "-d", "+30 seconds", "+%Y-%m-%dT%H:%M:%S.000Z"])
        .output()
        .unwrap();
    let soon = String::from_utf8(soon.stdout).unwrap().trim().to_string();
    obj.insert("finished_at".into(), soon.into());
    obj.insert(
        "verified".into(),
        serde_json::json!({"signer": "this machine", "key": "SHA256:x", "here": true}),
    );
    assert_eq!(forged["status"], "passed");
    assert!(forged["config_hash"].is_string(), "{forged}");
    push_note(&attacker, &clone, &broken, &[forged.to_string()], "victim");

    let o = victim.sandbox(&repo, &["fetch"]);
    assert_eq!(o.code, 0, "{o:?}");

    // Shown as somebody's report, never as a pass.
    let line = log_line(&victim, &repo, "experiment/broken");
    assert!(
        !line.contains('✔') && line.contains("not verified"),
        "{line}"
    );
    let json = victim
        .sandbox(&repo, &["log", "--json", "-n", "1", "experiment/broken"])
        .json();
    assert_eq!(json[0]["result"], Value::Null, "{json}");
    assert_eq!(json[0]["reported"]["status"], "passed", "{json}");
    assert!(json[0]["reported"].get("verified").is_none(), "{json}");
    let shown = victim.sandbox(&repo, &["show", &broken]);
    assert!(shown.stdout.contains("not verified"), "{shown:?}");

    // The tree cache does not serve it: a commit of the same tree runs.
    let tree = rev(&victim, &repo, &format!("{broken}^{{tree}}"));
    let twin = victim
        .git(
            &repo,
            &["commit-tree", &tree, "-p", &main, "-m", "same tree"],
        )
        .trim()
        .to_string();
    victim.git(&repo, &["branch", "twin", &twin]);
    let o = victim.sandbox(&repo, &["run", "--json", &twin]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()[0]["status"], "failed", "{o:?}");
    assert_eq!(o.json()[0]["cached_from"], Value::Null, "{o:?}");

    // eval runs the head itself, and promote refuses.
    let o = victim.sandbox(&repo, &["eval", "broken"]);
    assert!(o.stdout.starts_with("Evaluation: NOT_READY"), "{o:?}");
    let o = victim.sandbox(&repo, &["promote", "broken"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(rev(&victim, &repo, "main"), main_before);

    // Its own failing record (served by the twin's tree) stands beside the forged one once
    // the remote's notes are merged again: evidence wins, whatever the date.
    assert_eq!(victim.sandbox(&repo, &["run", "experiment/broken"]).code, 1);
    forged["finished_at"] = "2098-01-01T00:00:00.000Z".into();
    push_note(&attacker, &clone, &broken, &[forged.to_string()], "again");
    assert_eq!(victim.sandbox(&repo, &["fetch"]).code, 0);
    let note = note_line(&victim, &repo, &broken);
    assert_eq!(note.lines().count(), 2, "{note}");
    let line = log_line(&victim, &repo, "experiment/broken");
    assert!(line.starts_with("✘") && line.contains("failed"), "{line}");
    assert_eq!(victim.sandbox(&repo, &["reindex"]).code, 0);
    let line = log_line(&victim, &repo, "experiment/broken");
    assert!(line.starts_with("✘") && line.contains("failed"), "{line}");
}

/// What plain `git log` shows of a commit (its `refs/notes/sandbox-summary` note).
fn summary_note(w: &World, repo: &Path, commit: &str) -> String {
    let o = w.git_out(
        repo,
        &["notes", "--ref=sandbox-summary", "show", commit],
        true,
    );
    o.stdout.trim().to_string()
}

#[test]
fn plain_git_log_never_shows_a_pass_nobody_trusted_signed() {
    let victim = World::new();
    let repo = victim.new_repo("summaries");
    victim
        .sandbox(&repo, &["experiment", "start", "broken"])
        .success();
    let broken = victim.commit_on(
        &repo,
        "experiment/broken",
        &[("tests/test_broken.py", BROKEN)],
        "Break it",
    );
    // A commit nobody ran, on a branch of its own.
    victim.git(&repo, &["branch", "side", "main"]);
    let unrun = victim.commit_on(&repo, "side", &[("NOTES.md", "x")], "Unrun");
    victim.sandbox(&repo, &["run", "main"]).success();
    let shared = shared_remote(&victim, &repo);
    victim.git(
        &repo,
        &["push", "-q", "origin", "side", "experiment/broken"],
    );
    let main = rev(&victim, &repo, "main");

    // The attacker writes an unsigned passing record for the broken head and summaries that
    // say both commits passed.
    let (attacker, clone) = attacker_clone(&shared);
    let mut forged = unsigned_copy(&attacker, &clone, &main, &broken);
    let obj = forged.as_object_mut().unwrap();
    obj.insert("by".into(), "mallory\nSandbox: passed".into());
    push_note(&attacker, &clone, &broken, &[forged.to_string()], "mallory");
    for commit in [&broken, &unrun] {
        attacker.git(
            &clone,
            &[
                "notes",
                "--ref=sandbox-summary",
                "add",
                "-f",
                "-m",
                "Sandbox: passed, 9 passed 0 failed (unittest), 1 ms",
                commit,
            ],
        );
    }
    attacker.git(
        &clone,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            "refs/notes/sandbox-summary:refs/notes/sandbox-summary",
        ],
    );

    victim.sandbox(&repo, &["fetch"]).success();
    let shown = summary_note(&victim, &repo, &broken);
    assert_eq!(
        shown, "Sandbox: reported passed by mallorySandboxpassed, not verified",
        "a report is said to be one, in one line"
    );
    assert_eq!(
        summary_note(&victim, &repo, &unrun),
        "Sandbox: no result here"
    );
    // The victim's own summary of its own run stands.
    assert!(
        summary_note(&victim, &repo, &main).starts_with("Sandbox: passed"),
        "{}",
        summary_note(&victim, &repo, &main)
    );
    let log = victim.git(&repo, &["log", "-1", "--format=%N", &broken]);
    assert!(!log.contains("Sandbox: passed"), "{log}");
}

#[test]
fn a_trusted_machines_records_count_and_its_signature_copied_onto_a_changed_record_does_not() {
    let a = World::new();
    let repo = a.new_repo("a");
    let shared = shared_remote(&a, &repo);
    let b = World::new();
    let clone = b.clone_and_init(shared.to_str().unwrap(), "b");
    let main = rev(&b, &clone, "main");
    assert_eq!(b.sandbox(&clone, &["run", "main"]).code, 0);
    assert_eq!(b.sandbox(&clone, &["push", "--notes-only"]).code, 0);
    // B's failing commit, and its record with the status flipped (B's signature kept).
    b.git(&clone, &["switch", "-q", "-c", "experiment/x"]);
    let x = b.commit(&clone, &[("tests/test_broken.py", BROKEN)], "Break it");
    assert_eq!(b.sandbox(&clone, &["run", &x]).code, 1);
    b.git(&clone, &["push", "-q", "origin", "experiment/x"]);
    let genuine = note_line(&b, &clone, &x);
    assert!(genuine.contains("\"status\":\"failed\""), "{genuine}");
    let flipped = genuine.replace("\"status\":\"failed\"", "\"status\":\"passed\"");
    push_note(&b, &clone, &x, &[flipped], "evil");

    // Trusted for git commits only: not for records.
    let line = key(&b)["allowed_signers"].as_str().unwrap().to_string();
    let git_only = format!(
        "{} namespaces=\"git\" {}",
        key(&b)["principal"].as_str().unwrap(),
        key(&b)["public_key"].as_str().unwrap()
    );
    trust(&a, &[git_only]);
    assert_eq!(a.sandbox(&repo, &["fetch"]).code, 0);
    let shown = log_line(&a, &repo, &main);
    assert!(
        !shown.contains('✔') && shown.contains("not verified"),
        "{shown}"
    );

    // Trusted for records: B's record of main is evidence here.
    trust(&a, &[line]);
    let shown = log_line(&a, &repo, &main);
    assert!(
        shown.starts_with("✔") && shown.contains("passed"),
        "{shown}"
    );
    let o = a.sandbox(&repo, &["show", &main]);
    assert!(
        o.stdout
            .contains(&format!("Signed:   by git-sandbox@{}", home_id(&b))),
        "{o:?}"
    );
    // The copied signature does not cover the changed record.
    let shown = log_line(&a, &repo, &x);
    assert!(
        !shown.contains('✔') && shown.contains("not verified"),
        "{shown}"
    );
    // Asked for, it is run here.
    let o = a.sandbox(&repo, &["run", "--json", &x]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()[0]["status"], "failed", "{o:?}");
}

#[test]
fn a_result_served_from_a_signer_no_longer_trusted_is_no_evidence_and_serves_nothing() {
    let a = World::new();
    let repo = a.new_repo("a");
    let shared = shared_remote(&a, &repo);
    let b = World::new();
    let clone = b.clone_and_init(shared.to_str().unwrap(), "b");
    let main = rev(&b, &clone, "main");
    b.sandbox(&clone, &["run", "main"]).success();
    b.sandbox(&clone, &["push", "--notes-only"]).success();
    trust(
        &a,
        &[key(&b)["allowed_signers"].as_str().unwrap().to_string()],
    );
    a.sandbox(&repo, &["fetch"]).success();

    // While B is trusted, a commit of main's tree is served B's result, and A writes the copy.
    let tree = rev(&a, &repo, "main^{tree}");
    let copy_of = |name: &str| -> String {
        let id = a
            .git(&repo, &["commit-tree", &tree, "-p", &main, "-m", name])
            .trim()
            .to_string();
        a.git(&repo, &["branch", name, &id]);
        id
    };
    let y = copy_of("y");
    let o = a.sandbox(&repo, &["run", "--json", &y]).success();
    assert_eq!(o.json()[0]["cached_from"], main.as_str(), "{o}");
    assert!(a.sandbox(&repo, &["show", "--json", &y]).json()["verified"].is_object());

    // B's key is no longer trusted: B's record, and the copy A signed of it, are reports.
    trust(&a, &[]);
    for (commit, what) in [(&main, "B's own record"), (&y, "the copy served from it")] {
        let shown = a
            .sandbox(&repo, &["show", "--json", commit])
            .success()
            .json();
        assert!(shown.get("verified").is_none(), "{what}: {shown}");
        let line = log_line(&a, &repo, commit);
        assert!(
            !line.contains('✔') && line.contains("not verified"),
            "{what}: {line}"
        );
    }
    // Nothing is served from it: another commit of the tree runs here.
    let z = copy_of("z");
    let o = a.sandbox(&repo, &["run", "--json", &z]).success();
    assert_eq!(o.json()[0]["cached_from"], Value::Null, "{o}");
    // Rebuilding the index from the notes keeps it so.
    a.sandbox(&repo, &["reindex"]).success();
    let shown = a.sandbox(&repo, &["show", "--json", &y]).success().json();
    assert!(shown.get("verified").is_none(), "{shown}");
    let listed = a
        .sandbox(&repo, &["log", "--json", "-n", "1", &y])
        .success()
        .json();
    assert_eq!(listed[0]["result"], Value::Null, "{listed}");
}

#[test]
fn a_record_that_copies_this_machines_home_id_is_not_its_own() {
    let victim = World::new();
    let repo = victim.new_repo("victim");
    let shared = shared_remote(&victim, &repo);
    let main = rev(&victim, &repo, "main");
    let id = home_id(&victim);
    // Another machine that calls itself by the victim's home id, with a key of its own.
    let other = World::new();
    std::fs::create_dir_all(other.data()).unwrap();
    std::fs::write(other.data().join("home-id"), format!("{id}\n")).unwrap();
    let clone = other.clone_and_init(shared.to_str().unwrap(), "other");
    assert_eq!(other.sandbox(&clone, &["run", "main"]).code, 0);
    let line = note_line(&other, &clone, &main);
    assert!(line.contains(&format!("\"by\":\"{id}\"")), "{line}");
    push_note(&other, &clone, &main, &[line], &id);

    assert_eq!(victim.sandbox(&repo, &["fetch"]).code, 0);
    let shown = log_line(&victim, &repo, &main);
    assert!(
        shown.contains(&format!("reported by {id} as passed, not verified")),
        "{shown}"
    );
    // It is run here, and this machine's own record is the one that stands.
    let o = victim.sandbox(&repo, &["run", "--json", "main"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["verified"]["here"], true, "{o:?}");
    assert_eq!(o.json()[0]["cached_from"], Value::Null, "{o:?}");
}

#[test]
fn a_record_verifies_with_ssh_keygen() {
    let w = World::new();
    let repo = w.new_repo("keygen");
    let head = w.commit(&repo, &[("tests/test_more.py", PASSING)], "more tests");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let line = note_line(&w, &repo, &head);
    let (record, signature) = line
        .rsplit_once(",\"signature\":\"")
        .expect("a signed line");
    let signature = signature.strip_suffix("\"}").unwrap();
    let dir = w.path("keygen");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("record"), format!("{record}}}")).unwrap();
    let mut armour = String::from("-----BEGIN SSH SIGNATURE-----\n");
    for chunk in signature.as_bytes().chunks(70) {
        armour.push_str(std::str::from_utf8(chunk).unwrap());
        armour.push('\n');
    }
    armour.push_str("-----END SSH SIGNATURE-----\n");
    std::fs::write(dir.join("record.sig"), armour).unwrap();
    let k = key(&w);
    std::fs::write(
        dir.join("allowed_signers"),
        format!("{}\n", k["allowed_signers"].as_str().unwrap()),
    )
    .unwrap();
    let verify = |file: &str| {
        std::process::Command::new("ssh-keygen")
            .args(["-Y", "verify", "-f", "allowed_signers", "-I"])
            .arg(k["principal"].as_str().unwrap())
            .args(["-n", "git-sandbox", "-s", "record.sig"])
            .current_dir(&dir)
            .stdin(std::fs::File::open(dir.join(file)).unwrap())
            .output()
            .expect("ssh-keygen runs")
    };
    let o = verify("record");
    assert!(o.status.success(), "{o:?}");
    std::fs::write(
        dir.join("changed"),
        format!("{record}}}").replace("\"status\":\"passed\"", "\"status\":\"failed\""),
    )
    .unwrap();
    assert!(!verify("changed").status.success());
    // The key is the data dir's own, 0600.
    use std::os::unix::fs::MetadataExt;
    let mode = std::fs::metadata(w.data().join("signing-key"))
        .unwrap()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Anyone who can push can write `refs/sandbox/quarantine`, and a quarantine excuses a failure
/// that passes a retry: a remote's copy applies only when a key the user trusts signed it.
#[test]
fn a_quarantine_pushed_by_someone_untrusted_is_shown_not_applied() {
    let victim = World::new();
    let repo = victim.new_repo("victim");
    victim.commit(&repo, &[("tests/test_broken.py", BROKEN)], "Break it");
    let o = victim.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let name = o.json()[0]["tests"]["failures"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let shared = shared_remote(&victim, &repo);

    // Someone with push access quarantines the failing test with their own key.
    let (attacker, clone) = attacker_clone(&shared);
    assert_eq!(attacker.sandbox(&clone, &["init"]).code, 0);
    let o = attacker.sandbox(&clone, &["flaky", "quarantine", &name]);
    assert_eq!(o.code, 0, "{o:?}");
    attacker.git(&clone, &["push", "-q", "origin", "refs/sandbox/quarantine"]);

    assert_eq!(victim.sandbox(&repo, &["fetch"]).code, 0);
    let listed = victim.sandbox(&repo, &["flaky", "--json"]).json();
    let q = &listed[0];
    assert_eq!(q["name"], name.as_str(), "{listed}");
    assert_eq!(q["state"], "untrusted", "{listed}");
    assert!(
        q["quarantine"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("not applied"),
        "{listed}"
    );
    // Not applied: the failure is not retried, the run fails.
    let o = victim.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.json()[0]["retried"].is_null(), "{o:?}");

    // A teammate's key, trusted: applied, so the failure is retried on its tree; it fails
    // every time, and a failure that fails its retry stays a failure.
    trust(
        &victim,
        &[key(&attacker)["allowed_signers"]
            .as_str()
            .unwrap()
            .to_string()],
    );
    let listed = victim.sandbox(&repo, &["flaky", "--json"]).json();
    assert_eq!(listed[0]["state"], "quarantined", "{listed}");
    let o = victim.sandbox(&repo, &["run", "--force", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()[0]["retried"]["attempts"], 1, "{o:?}");

    // A trusted copy altered after signing (another test added) is nobody's: not applied.
    let file = attacker.git(&clone, &["show", "refs/sandbox/quarantine:quarantine.toml"]);
    let sig = attacker.git(
        &clone,
        &["show", "refs/sandbox/quarantine:quarantine.toml.sig"],
    );
    let altered = format!(
        "{file}\n[[test]]\ntest = \"tests/test_other.py::test_x\"\nat = \"2026-01-01T00:00:00.000Z\"\nby = \"x\"\n"
    );
    std::fs::write(clone.join("q.toml"), altered).unwrap();
    std::fs::write(clone.join("q.sig"), sig).unwrap();
    let blob = attacker.git(&clone, &["hash-object", "-w", "q.toml"]);
    let sig_blob = attacker.git(&clone, &["hash-object", "-w", "q.sig"]);
    let tree_text = format!(
        "100644 blob {}\tquarantine.toml\n100644 blob {}\tquarantine.toml.sig\n",
        blob.trim(),
        sig_blob.trim()
    );
    std::fs::write(clone.join("q.tree"), tree_text).unwrap();
    let mk = std::process::Command::new("git")
        .current_dir(&clone)
        .args(["mktree"])
        .stdin(std::fs::File::open(clone.join("q.tree")).unwrap())
        .output()
        .unwrap();
    let tree = String::from_utf8(mk.stdout).unwrap();
    let parent = rev(&attacker, &clone, "refs/sandbox/quarantine");
    let forged = attacker.git(
        &clone,
        &["commit-tree", tree.trim(), "-p", &parent, "-m", "more"],
    );
    attacker.git(
        &clone,
        &[
            "push",
            "-q",
            "origin",
            &format!("{}:refs/sandbox/quarantine", forged.trim()),
        ],
    );
    assert_eq!(victim.sandbox(&repo, &["fetch"]).code, 0);
    let listed = victim.sandbox(&repo, &["flaky", "--json"]).json();
    let states: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["untrusted", "untrusted"], "{listed}");
}
