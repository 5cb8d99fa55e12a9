//! Agent workspaces: a live sandbox on an experiment's branch. Real overlay mounts over a real
//! checkout, real git objects: a command's files persist into the next, files are read and
//! written without a shell (never through a link, never outside), the diff and the commit are
//! git's, the commit is verified, and the user's checkout never moves.

use crate::common;

use common::World;
use std::path::Path;

/// A repository whose test passes when `greeting.txt` says hello; `build/` is ignored.
fn repo(w: &World) -> std::path::PathBuf {
    let repo = w.new_repo("ws");
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\ncommand = \"sh check.sh\"\n[analysis]\nenabled = false\n",
            ),
            ("check.sh", "test \"$(cat greeting.txt)\" = hello\n"),
            ("greeting.txt", "bye\n"),
            (".gitignore", "build/\n"),
            ("old/gone.txt", "going\n"),
        ],
        "a check that wants a greeting",
    );
    repo
}

fn events(w: &World, repo: &Path, kind: &str) -> Vec<serde_json::Value> {
    let o = w.sandbox(
        repo,
        &["events", "--kind", kind, "--json", "--limit", "200"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    // One event a line.
    o.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_workspace_is_worked_in_committed_from_and_verified_while_the_checkout_stays() {
    let w = World::new();
    let repo = repo(&w);
    let head = w.git(&repo, &["rev-parse", "HEAD"]);
    let o = w.sandbox(&repo, &["workspace", "new", "agent", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["branch"], "experiment/agent");

    // A command writes, deletes, links, makes a FIFO and a build output; it fails (exit 3),
    // and what it wrote is kept all the same.
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "agent",
            "--",
            "sh",
            "-c",
            "echo hello > greeting.txt; rm old/gone.txt; ln -s /etc/passwd pw; mkfifo pipe; \
             mkdir -p build && echo built > build/out; echo made > new.txt; exit 3",
        ],
    );
    assert_eq!(o.code, 3, "{o:?}");
    // The next command sees all of it.
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "agent",
            "--",
            "sh",
            "-c",
            "cat greeting.txt build/out new.txt; test ! -e old/gone.txt && echo gone",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "hello\nbuilt\nmade\ngone\n", "{o:?}");

    // Files without a shell.
    let o = w.sandbox(&repo, &["workspace", "read", "agent", "greeting.txt"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "hello\n"), "{o:?}");
    let o = w.sandbox_stdin(
        &repo,
        &["workspace", "write", "agent", "src/app.py", "--json"],
        b"x = 1\n",
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["created"], true);
    assert_eq!(o.json()["lines_added"], 1);
    let o = w.sandbox(&repo, &["workspace", "ls", "agent", "--json"]);
    let names: Vec<String> = o
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    for n in ["build", "check.sh", "greeting.txt", "new.txt", "pw", "src"] {
        assert!(names.contains(&n.to_string()), "{n} not in {names:?}");
    }
    // A FIFO (a socket, a device) a command made is not kept.
    assert!(!names.contains(&"pipe".to_string()), "{names:?}");
    // Out of the workspace (a usage error, exit 2) or through a link (refused, exit 1): one
    // line, the fix.
    for (args, code, problem) in [
        (vec!["read", "agent", "../outside"], 2, "climbs out"),
        (vec!["read", "agent", "/etc/passwd"], 2, "absolute"),
        (vec!["read", "agent", ".git/config"], 2, ".git"),
        (vec!["read", "agent", "pipe"], 2, "has no \"pipe\""),
        (vec!["read", "nobody", "a"], 2, "no workspace"),
        (vec!["read", "agent", "pw"], 1, "is a symlink"),
        (vec!["read", "agent", "pw/x"], 1, "through the symlink"),
    ] {
        let o = w.sandbox(&repo, &[&["workspace"][..], &args].concat());
        assert_eq!(o.code, code, "{args:?} {o:?}");
        let (said, hints) = o.error();
        assert!(said.contains(problem), "{args:?}: {said}");
        assert!(!hints.is_empty(), "{args:?}: {o:?}");
    }
    for (path, code) in [
        ("pw", 1),
        ("pw/evil", 1),
        ("../x", 2),
        ("greeting.txt/x", 1),
    ] {
        let o = w.sandbox_stdin(&repo, &["workspace", "write", "agent", path], b"no\n");
        assert_eq!(o.code, code, "{path}: {o:?}");
    }
    // Nothing of that reached the directory `../x` names from the repository.
    assert!(!repo.parent().unwrap().join("x").exists());

    // The diff is git's: the link as a link, the deletion, no FIFO, no ignored build output.
    let o = w.sandbox(&repo, &["workspace", "diff", "agent"]);
    assert_eq!(o.code, 0, "{o:?}");
    let d = &o.stdout;
    assert!(
        d.contains("+++ b/pw\n") && d.contains("new file mode 120000"),
        "{d}"
    );
    assert!(
        d.contains("deleted file mode 100644") && d.contains("--- a/old/gone.txt"),
        "{d}"
    );
    assert!(d.contains("-bye\n+hello"), "{d}");
    assert!(!d.contains("pipe") && !d.contains("build/out"), "{d}");

    // A state cut off from its layers (a command killed between publishing its layer and
    // writing the state) is read from the layers again: the same diff.
    let state = std::fs::read_dir(w.data().join("workspaces"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("agent/workspace.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    s["layers_top"] = "".into();
    // The base's own tree: a valid tree, but not what the layers make.
    s["tree"] = w
        .git(&repo, &["rev-parse", "experiment/agent^{tree}"])
        .trim()
        .into();
    std::fs::write(&state, s.to_string()).unwrap();
    let again = w.sandbox(&repo, &["workspace", "diff", "agent"]);
    assert_eq!(again.stdout, o.stdout, "{again:?}");

    // Committed and verified: the check passes on the new commit.
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "commit",
            "agent",
            "-m",
            "say hello",
            "--wait",
            "--json",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");
    let c = o.json();
    assert_eq!(c["status"], "passed", "{c}");
    let commit = c["commit"].as_str().unwrap().to_string();
    assert_eq!(
        w.git(&repo, &["rev-parse", "experiment/agent"]).trim(),
        commit
    );
    let tree = w.git(&repo, &["ls-tree", "-r", &commit]);
    assert!(
        tree.contains("120000 blob") && tree.contains("\tpw\n"),
        "{tree}"
    );
    assert_eq!(
        w.git(&repo, &["cat-file", "-p", &format!("{commit}:pw")]),
        "/etc/passwd"
    );
    assert!(
        !tree.contains("old/gone.txt") && !tree.contains("build/") && !tree.contains("pipe"),
        "{tree}"
    );
    assert_eq!(
        w.git(&repo, &["log", "-1", "--format=%s", &commit]).trim(),
        "say hello"
    );
    // The user's checkout, index and HEAD did not move.
    assert_eq!(w.git(&repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(w.git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(repo.join("greeting.txt")).unwrap(),
        "bye\n"
    );

    // It goes on from the commit: nothing to commit, the ignored output still there.
    let o = w.sandbox(&repo, &["workspace", "diff", "agent"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{o:?}");
    let o = w.sandbox(&repo, &["workspace", "commit", "agent", "-m", "again"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.error().0.contains("nothing to commit"), "{o:?}");
    let o = w.sandbox(
        &repo,
        &["workspace", "exec", "agent", "--", "cat", "build/out"],
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "built\n"), "{o:?}");

    // Every command and edit is an event.
    let execs = events(&w, &repo, "workspace.exec");
    assert_eq!(execs.len(), 3, "{execs:?}");
    let edits = events(&w, &repo, "workspace.file_edited");
    let paths: Vec<&str> = edits
        .iter()
        .filter_map(|e| e["data"]["path"].as_str())
        .collect();
    for p in [
        "greeting.txt",
        "old/gone.txt",
        "pw",
        "new.txt",
        "src/app.py",
    ] {
        assert!(paths.contains(&p), "{p} not in {paths:?}");
    }
    assert_eq!(events(&w, &repo, "workspace.committed").len(), 1);

    // Reset drops what came after the commit; rm keeps the branch.
    let o = w.sandbox_stdin(
        &repo,
        &["workspace", "write", "agent", "later.txt"],
        b"later\n",
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(w.sandbox(&repo, &["workspace", "reset", "agent"]).code, 0);
    let o = w.sandbox(&repo, &["workspace", "read", "agent", "later.txt"]);
    assert_eq!(o.code, 2, "{o:?}");
    let o = w.sandbox(&repo, &["workspace", "list", "--json"]);
    assert_eq!(o.json()[0]["base"], commit.as_str(), "{o:?}");
    assert_eq!(w.sandbox(&repo, &["workspace", "rm", "agent"]).code, 0);
    assert_eq!(
        w.git(&repo, &["rev-parse", "experiment/agent"]).trim(),
        commit
    );
    let o = w.sandbox(&repo, &["workspace", "list", "--json"]);
    assert_eq!(o.json(), serde_json::json!([]));
}

#[test]
fn a_stopped_command_leaves_the_workspace_as_it_was_and_workspaces_never_see_each_other() {
    let w = World::new();
    let repo = repo(&w);
    for name in ["one", "two"] {
        assert_eq!(w.sandbox(&repo, &["workspace", "new", name]).code, 0);
    }
    // A timeout stops the command: what it wrote is dropped.
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "one",
            "--timeout",
            "1s",
            "--",
            "sh",
            "-c",
            "echo x > a.txt; sleep 30",
        ],
    );
    assert_eq!(o.code, 124, "{o:?}");
    assert_eq!(
        w.sandbox(&repo, &["workspace", "read", "one", "a.txt"])
            .code,
        2
    );

    // kill -9 of the command line mid-command: the same, and the lock goes with it.
    let mut bg = w.spawn(
        &repo,
        &[
            "workspace",
            "exec",
            "one",
            "--",
            "sh",
            "-c",
            "echo y > b.txt; sleep 30",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // One command at a time: a second is refused while the first runs.
    let o = w.sandbox(&repo, &["workspace", "exec", "one", "--", "true"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.error().0.contains("busy"), "{o:?}");
    bg.child.kill().unwrap();
    bg.child.wait().unwrap();
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "one",
            "--",
            "sh",
            "-c",
            "test ! -e b.txt && echo clean > c.txt",
        ],
    );
    assert_eq!(o.code, 0, "{o:?}");

    // Two workspaces: neither sees the other's files.
    let o = w.sandbox_stdin(
        &repo,
        &["workspace", "write", "two", "mine.txt"],
        b"two's\n",
    );
    assert_eq!(o.code, 0, "{o:?}");
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "one",
            "--",
            "sh",
            "-c",
            "test ! -e mine.txt && cat c.txt",
        ],
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "clean\n"), "{o:?}");
    let o = w.sandbox(
        &repo,
        &[
            "workspace",
            "exec",
            "two",
            "--",
            "sh",
            "-c",
            "test ! -e c.txt && cat mine.txt",
        ],
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "two's\n"), "{o:?}");

    // rm --kill: the experiment goes too (its branch archived).
    let o = w.sandbox(&repo, &["workspace", "rm", "two", "--kill"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        w.git_out(
            &repo,
            &["rev-parse", "--verify", "-q", "experiment/two"],
            true
        )
        .code
            != 0
    );
    assert!(!w
        .git(&repo, &["rev-parse", "refs/sandbox/archive/two"])
        .is_empty());
    // A workspace whose experiment was killed (its branch archived) is gone after gc.
    assert_eq!(w.sandbox(&repo, &["kill", "one"]).code, 0);
    let o = w.sandbox(&repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["workspaces"]["count"], 1, "{o:?}");
    let o = w.sandbox(&repo, &["workspace", "list", "--json"]);
    assert_eq!(o.json(), serde_json::json!([]), "{o:?}");
    assert_eq!(w.sandbox(&repo, &["workspace", "new", "three"]).code, 0);
    // Bad names: one line, the fix.
    let o = w.sandbox(&repo, &["workspace", "new", "../evil"]);
    assert_eq!(o.code, 2, "{o:?}");
    let o = w.sandbox(&repo, &["workspace", "new", "three"]);
    assert_eq!(o.code, 2, "{o:?}");
}
