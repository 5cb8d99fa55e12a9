//! `new`, `init`, hooks, `list`/`status`, config and index errors, driven through the real binary.

use crate::common;

use common::World;
use std::os::unix::fs::PermissionsExt;

#[test]
fn new_creates_the_layout_commits_installs_hooks_and_registers() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["new", "exp-one", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let j = o.json();
    assert_eq!(j["name"], "exp-one");
    assert_eq!(j["repository_type"], "local");
    assert!(j["repository_id"].as_str().unwrap().starts_with("repo_"));
    let path = std::path::PathBuf::from(j["path"].as_str().unwrap());
    assert_eq!(
        path,
        std::fs::canonicalize(w.data().join("repos/exp-one")).unwrap()
    );
    assert_eq!(j["url"], format!("file://{}", path.display()));
    assert!(j["created_at"].as_str().unwrap().ends_with('Z'));
    for f in [
        "README.md",
        ".sandbox.toml",
        ".gitignore",
        "tests/test_example.py",
        "results/.gitkeep",
        "logs/.gitkeep",
    ] {
        assert!(path.join(f).is_file(), "{f} missing");
    }
    // Experiments' bookkeeping lives outside the tree: no folder invites it in.
    assert!(!path.join("experiments").exists());
    assert!(std::fs::read_to_string(path.join("README.md"))
        .unwrap()
        .starts_with("# exp-one"));
    // One clean initial commit on main, everything tracked.
    assert_eq!(w.git(&path, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(w.git(&path, &["branch", "--show-current"]).trim(), "main");
    assert_eq!(w.git(&path, &["status", "--porcelain"]), "");
    for hook in [
        "reference-transaction",
        "post-commit",
        "post-merge",
        "post-rewrite",
        "pre-push",
    ] {
        let meta = std::fs::metadata(path.join(".git/hooks").join(hook)).unwrap();
        assert!(
            meta.permissions().mode() & 0o111 != 0,
            "{hook} not executable"
        );
    }
    assert_eq!(
        w.git(&path, &["config", "notes.displayRef"]).trim(),
        "refs/notes/sandbox-summary"
    );
    assert_eq!(
        w.git_out(&path, &["config", "notes.rewriteRef"], true).code,
        1,
        "our notes are never copied by amend or rebase"
    );
    let list = w.sandbox(&w.work(), &["list", "--json"]).json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["repositories"][0]["name"], "exp-one");
    assert_eq!(list["repositories"][0]["path"], path.display().to_string());
    // The human table names it too.
    let human = w.sandbox(&w.work(), &["list"]);
    assert!(
        human.stdout.lines().nth(1).unwrap().starts_with("exp-one "),
        "{human:?}"
    );
}

#[test]
fn new_without_a_name_uses_a_timestamped_name() {
    let w = World::new();
    let j = w.sandbox(&w.work(), &["new", "--json"]).json();
    let name = j["name"].as_str().unwrap();
    let stamp = name.strip_prefix("ai-sandbox-experiments-").expect(name);
    assert_eq!(stamp.len(), 15, "{name}");
    assert!(
        stamp[..8].bytes().all(|b| b.is_ascii_digit())
            && &stamp[8..9] == "_"
            && stamp[9..].bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
}

#[test]
fn new_at_a_path() {
    let w = World::new();
    let target = w.work().join("here/nested");
    let o = w.sandbox(
        &w.work(),
        &["new", "x1", "--path", target.to_str().unwrap()],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(target.join(".git").is_dir());
    assert!(
        o.stdout.contains("Created experiment repository x1"),
        "{o:?}"
    );
}

fn assert_nothing_created(w: &World) {
    let repos = w.data().join("repos");
    let leftovers: Vec<_> = std::fs::read_dir(&repos)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    let list = w.sandbox(&w.work(), &["list", "--json"]).json();
    assert_eq!(list["total"], 0);
}

#[test]
fn bad_names_are_refused_with_one_line_and_nothing_created() {
    let w = World::new();
    let long = "x".repeat(101);
    for bad in [
        "a/b",
        "..",
        "a..b",
        "has space",
        "tab\there",
        "-leading",
        "bell\u{7}",
        "",
        long.as_str(),
    ] {
        let o = w.sandbox(&w.work(), &["new", "--", bad]);
        assert_eq!(o.code, 2, "{bad:?}: {o:?}");
        let (problem, hints) = o.error();
        assert!(problem.starts_with("invalid name"), "{bad:?}: {o:?}");
        assert_eq!(
            hints,
            ["use letters, digits, '-', '_' and '.' (at most 100 characters)"],
            "the error says how to fix it: {o:?}"
        );
        assert_nothing_created(&w);
    }
}

#[test]
fn an_existing_path_is_refused() {
    let w = World::new();
    w.new_repo("taken");
    let o = w.sandbox(&w.work(), &["new", "taken"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("already exists"), "{o:?}");
    let dir = w.work().join("occupied");
    std::fs::create_dir(&dir).unwrap();
    let o = w.sandbox(&w.work(), &["new", "y", "--path", dir.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written into it"
    );
}

#[test]
fn unwritable_home_is_a_clear_error() {
    let w = World::new();
    let file = w.path("a-file");
    std::fs::write(&file, "x").unwrap();
    let home = file.join("sub");
    let o = w.sandbox_env(
        &w.work(),
        &["new", "z"],
        &[("GIT_SANDBOX_HOME", home.to_str().unwrap())],
    );
    assert_eq!(o.code, 128, "the machine failed, not the usage: {o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.starts_with("cannot create the data directory"),
        "{o:?}"
    );
    assert_eq!(hints, ["set GIT_SANDBOX_HOME to a writable directory"]);
}

#[test]
fn malformed_user_config_names_file_line_and_key() {
    let w = World::new();
    let cfg = w.path("config/git-sandbox/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "[limits]\nmemory_mb = 512\ncolour = \"blue\"\n").unwrap();
    let o = w.sandbox(&w.work(), &["new", "cfg-test"]);
    assert_eq!(o.code, 2, "{o:?}");
    let (problem, hints) = o.error();
    assert!(
        problem.starts_with(&format!("{}:3: key `limits.colour`", cfg.display())),
        "{o:?}"
    );
    assert_eq!(
        hints,
        ["remove it or fix its spelling (`git sandbox config --example` prints every key)"]
    );
    std::fs::write(&cfg, "[limits]\nmemory_mb = \"lots\"\n").unwrap();
    let o = w.sandbox(&w.work(), &["new", "cfg-test"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains(":2: key `limits.memory_mb`"), "{o:?}");
    assert!(!w.data().join("repos/cfg-test").exists());
    assert!(
        !w.data().join("index.db").exists(),
        "no index created on bad config"
    );
}

#[test]
fn init_outside_a_repository_is_refused() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["init"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("not inside a git repository"), "{o:?}");
    assert!(!w.data().join("index.db").exists());
}

fn plain_repo(w: &World, name: &str) -> std::path::PathBuf {
    let dir = w.work().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    w.git(&dir, &["init", "-q", "-b", "main"]);
    w.commit(&dir, &[("a.txt", "a\n")], "first");
    dir
}

fn pending(w: &World) -> u64 {
    w.sandbox(&w.work(), &["status", "--json"]).json()["totals"]["pending_jobs"]
        .as_u64()
        .unwrap()
}

#[test]
fn init_keeps_an_existing_hook_running_and_chains_to_it() {
    let w = World::new();
    let repo = plain_repo(&w, "has-hook");
    let marker = w.path("hook-ran");
    let hook = repo.join(".git/hooks/post-commit");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho ran >> {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("runs the existing"), "{o:?}");
    // What it detected is kept in the git directory: the work tree is the user's.
    assert!(repo.join(".git/sandbox.toml").is_file());
    assert!(!repo.join(".sandbox.toml").exists());
    w.commit(&repo, &[("b.txt", "b\n")], "second");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "ran\n",
        "the old hook still runs"
    );
    // Only the new commit is queued: the history the repository had at adoption is not run.
    assert_eq!(pending(&w), 1);
}

#[test]
fn init_respects_core_hooks_path() {
    let w = World::new();
    let repo = plain_repo(&w, "hooks-path");
    w.git(&repo, &["config", "core.hooksPath", ".githooks"]);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(repo.join(".githooks/post-commit").is_file());
    assert!(!repo.join(".git/hooks/post-commit").exists());
    w.commit(&repo, &[("c.txt", "c\n")], "third");
    assert_eq!(pending(&w), 1);
}

#[test]
fn init_twice_changes_nothing_and_keeps_the_config() {
    let w = World::new();
    let repo = plain_repo(&w, "twice");
    std::fs::write(repo.join(".sandbox.toml"), "[test]\ncommand = \"true\"\n").unwrap();
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let snapshot = |p: &std::path::Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(p.join(".git/hooks"))
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        (v, std::fs::read(p.join(".git/config")).unwrap())
    };
    let before = snapshot(&repo);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("nothing changed"), "{o:?}");
    assert_eq!(snapshot(&repo), before);
    assert_eq!(
        std::fs::read_to_string(repo.join(".sandbox.toml")).unwrap(),
        "[test]\ncommand = \"true\"\n"
    );
    assert_eq!(w.sandbox(&w.work(), &["list", "--json"]).json()["total"], 1);
}

#[test]
fn init_refuses_a_broken_repository_config_and_installs_nothing() {
    let w = World::new();
    let repo = plain_repo(&w, "broken-cfg");
    std::fs::write(
        repo.join(".sandbox.toml"),
        "[test]\ncommand = \"x\"\ntimeout = \"soon\"\n",
    )
    .unwrap();
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.stderr.contains(".sandbox.toml:3: key `test.timeout`"),
        "{o:?}"
    );
    assert!(!repo.join(".git/hooks/post-commit").exists());
}

#[test]
fn the_hook_exits_zero_when_the_binary_is_gone() {
    let w = World::new();
    let repo = plain_repo(&w, "no-binary");
    // Install with a copy of the binary, then delete the copy: neither PATH nor the recorded
    // fallback finds git-sandbox any more.
    let copy_dir = w.path("bin-copy");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join("git-sandbox");
    std::fs::copy(common::BIN, &copy).unwrap();
    let mut cmd = std::process::Command::new(&copy);
    cmd.arg("init").current_dir(&repo);
    cmd.env("GIT_SANDBOX_HOME", w.data())
        .env("XDG_CONFIG_HOME", w.path("config"))
        .env("HOME", w.path("home"));
    // A test beside this one that forks while the copy is open for writing holds it open in
    // its child until that child execs: the copy is "busy" for that moment.
    let out = (0..100)
        .find_map(|_| match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            r => Some(r),
        })
        .expect("the copy stays busy")
        .unwrap();
    assert!(out.status.success());
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(repo.join("d.txt"), "d").unwrap();
    w.git(&repo, &["add", "d.txt"]);
    let o = w.git_out(&repo, &["commit", "-q", "-m", "without the tool"], false);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stderr, "", "{o:?}");
    // And the same with a broken binary on PATH.
    std::fs::write(&copy, "#!/bin/sh\necho broken >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = std::process::Command::new("git");
    cmd.args(["commit", "-q", "--allow-empty", "-m", "broken tool"])
        .current_dir(&repo);
    cmd.env(
        "PATH",
        format!("{}:{}", copy_dir.display(), std::env::var("PATH").unwrap()),
    );
    cmd.env("GIT_AUTHOR_NAME", "a")
        .env("GIT_AUTHOR_EMAIL", "a@b")
        .env("GIT_COMMITTER_NAME", "a")
        .env("GIT_COMMITTER_EMAIL", "a@b");
    assert!(cmd.output().unwrap().status.success());
}

#[test]
fn watched_branches_follow_config_and_environment() {
    let mut w = World::new();
    let repo = w.new_repo("watch");
    w.git(&repo, &["checkout", "-q", "-b", "scratch"]);
    w.commit(&repo, &[("s.txt", "s")], "on an unwatched branch");
    assert_eq!(pending(&w), 0, "scratch is not watched");
    w.git(&repo, &["checkout", "-q", "-b", "experiment/fast"]);
    w.commit(&repo, &[("f.txt", "f")], "on an experiment branch");
    // experiment/fast holds the scratch commit and its own.
    assert_eq!(pending(&w), 2);
    w.extra_env
        .push(("SANDBOX_WATCH_BRANCHES".into(), "nothing-matches".into()));
    w.git(&repo, &["checkout", "-q", "main"]);
    w.commit(&repo, &[("m.txt", "m")], "main, but unwatched by env");
    assert_eq!(pending(&w), 2);
}

#[test]
fn a_corrupt_or_newer_index_is_a_clear_error() {
    let w = World::new();
    std::fs::create_dir_all(w.data()).unwrap();
    std::fs::write(w.data().join("index.db"), "garbage ".repeat(500)).unwrap();
    let o = w.sandbox(&w.work(), &["list"]);
    assert_eq!(o.code, 128, "the data failed, not the usage: {o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("is corrupt"), "{o:?}");
    assert_eq!(
        hints,
        ["move it away and run `git sandbox reindex` to rebuild it from git notes"]
    );
    let j = w.sandbox(&w.work(), &["list", "--json"]);
    assert_eq!(j.code, 128, "{j:?}");
    assert_eq!(j.stderr, "", "{j:?}");
    let e = j.json();
    assert_eq!(e["kind"], "environment", "{e}");
    assert!(e["hints"][0]
        .as_str()
        .unwrap()
        .contains("git sandbox reindex"));

    let newer = w.data().join("index.db");
    std::fs::remove_file(&newer).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 9999")
        .unwrap();
    let o = w.sandbox(&w.work(), &["status"]);
    assert_eq!(o.code, 128, "{o:?}");
    let (problem, hints) = o.error();
    assert!(problem.contains("written by a newer git-sandbox"), "{o:?}");
    assert!(hints[0].contains("git sandbox reindex"), "{o:?}");
}

#[test]
fn status_reports_totals() {
    let w = World::new();
    w.new_repo("s1");
    w.new_repo("s2");
    let j = w.sandbox(&w.work(), &["status", "--json"]).json();
    assert_eq!(j["totals"]["repositories"], 2);
    assert_eq!(j["totals"]["runs"], 0);
    assert_eq!(j["totals"]["success_rate"], serde_json::Value::Null);
    let human = w.sandbox(&w.work(), &["status"]);
    assert!(human.stdout.contains("repositories:  2"), "{human:?}");
}

#[test]
fn a_hooks_path_set_after_init_that_skips_our_hooks_is_said_once() {
    let w = World::new();
    let repo = plain_repo(&w, "husky-after");
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    // What `husky` does on the next `npm install`: its own hooks directory, without ours.
    std::fs::create_dir_all(repo.join(".husky/_")).unwrap();
    std::fs::write(
        repo.join(".husky/_/post-commit"),
        "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n",
    )
    .unwrap();
    w.git(&repo, &["config", "core.hooksPath", ".husky/_"]);
    let first = w.sandbox(&repo, &["log"]);
    assert_eq!(first.code, 0, "{first:?}");
    let said: Vec<&str> = first
        .stderr
        .lines()
        .filter(|l| l.contains("core.hooksPath is .husky/_"))
        .collect();
    assert_eq!(said.len(), 1, "{first:?}");
    assert!(
        said[0].starts_with("warning: ") && said[0].contains(".husky/post-commit"),
        "{first:?}"
    );
    let again = w.sandbox(&repo, &["log"]);
    assert!(!again.stderr.contains("core.hooksPath"), "once: {again:?}");
    // A hooks path that runs ours is nothing to say.
    let other = plain_repo(&w, "hooks-path-ours");
    w.git(&other, &["config", "core.hooksPath", ".githooks"]);
    assert_eq!(w.sandbox(&other, &["init"]).code, 0);
    assert!(!w
        .sandbox(&other, &["log"])
        .stderr
        .contains("core.hooksPath"));
}

#[test]
fn init_chains_into_husky_9s_hooks_and_the_projects_hook_still_runs() {
    let w = World::new();
    let repo = plain_repo(&w, "husky9");
    let marker = w.path("project-hook-ran");
    // The project's hook (tracked), and what husky 9.1.7 writes into .husky/_ (untracked).
    w.commit(
        &repo,
        &[(
            ".husky/post-commit",
            &format!("echo \"ran as $0\" >> {}\n", marker.display()),
        )],
        "a husky hook",
    );
    let generated = "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"";
    std::fs::create_dir_all(repo.join(".husky/_")).unwrap();
    std::fs::write(repo.join(".husky/_/.gitignore"), "*").unwrap();
    std::fs::write(repo.join(".husky/_/h"), include_str!("../fixtures/husky/h")).unwrap();
    for name in ["post-commit", "post-merge", "post-rewrite", "pre-push"] {
        let p = repo.join(".husky/_").join(name);
        std::fs::write(&p, generated).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    w.git(&repo, &["config", "core.hooksPath", ".husky/_"]);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout.contains("post-commit") && o.stdout.contains("runs the existing"),
        "{o:?}"
    );
    w.commit(&repo, &[("b.txt", "b\n")], "second");
    assert_eq!(pending(&w), 1, "our hook queued the commit");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("ran as .husky/post-commit\n"),
        "the project's hook ran through husky's, found by its own name"
    );
    // husky installs again (the next `npm install`): our hooks are gone, and that is said once.
    for name in ["post-commit", "post-merge", "post-rewrite", "pre-push"] {
        std::fs::write(repo.join(".husky/_").join(name), generated).unwrap();
    }
    let _ = std::fs::remove_file(repo.join(".husky/_/reference-transaction"));
    let o = w.sandbox(&repo, &["log"]);
    assert!(
        o.stderr.contains("warning: core.hooksPath is .husky/_"),
        "{o:?}"
    );
}

/// A `git-sandbox` first on PATH that logs each call (its arguments) and runs the real one.
fn logging_bin(w: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = w.path("logging-bin");
    let log = w.path("calls.log");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> {}\nexec {} \"$@\"\n",
        log.display(),
        common::BIN
    );
    std::fs::write(dir.join("git-sandbox"), script).unwrap();
    std::fs::set_permissions(
        dir.join("git-sandbox"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(&log, "").unwrap();
    (dir, log)
}

#[test]
fn pack_refs_and_updates_of_unwatched_branches_start_nothing_and_queue_nothing() {
    use std::io::Write;
    let w = World::new();
    let repo = w.new_repo("many-refs");
    let (bin, log) = logging_bin(&w);
    let git = |args: &[&str], input: &str| {
        let mut cmd = std::process::Command::new("git");
        cmd.args(args).current_dir(&repo);
        w.apply_env(&mut cmd);
        cmd.env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        );
        cmd.stdin(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "git {args:?}");
    };
    let calls = || std::fs::read_to_string(&log).unwrap().lines().count();
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let before = pending(&w);
    let batch = |verb: &str, prefix: &str, values: &str| -> String {
        (0..300)
            .map(|i| {
                format!("{verb} refs/heads/{prefix}{i} {values}")
                    .trim_end()
                    .to_string()
                    + "\n"
            })
            .collect()
    };

    git(
        &["update-ref", "--stdin"],
        &batch("create", "scratch/b", &head),
    );
    // One call for the whole transaction (only the binary knows which branches are watched),
    // which queues nothing, and packs the 300 loose refs the transaction left (with no hook
    // run: git would start it twice for each loose ref in the next `git gc`).
    assert_eq!(calls(), 1);
    assert_eq!(pending(&w), before);
    assert!(
        !repo.join(".git/refs/heads/scratch/b0").exists(),
        "not packed"
    );
    assert_eq!(
        w.git(&repo, &["rev-parse", "scratch/b299"]).trim(),
        head,
        "a packed branch moved"
    );
    // Watched, at a commit that is already known: one call, nothing to run.
    git(
        &["update-ref", "--stdin"],
        &batch("create", "experiment/b", &head),
    );
    assert_eq!(calls(), 2);
    assert_eq!(pending(&w), before);
    // git runs the hook for the packed-refs transaction (every ref as created) and twice for
    // each loose ref it prunes: none of it is news.
    git(&["pack-refs", "--all"], "");
    assert_eq!(
        calls(),
        2,
        "pack-refs started git-sandbox: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_eq!(pending(&w), before);
    assert!(
        !repo.join(".git/refs/heads/experiment/b0").exists(),
        "packed"
    );
    git(
        &["update-ref", "--stdin"],
        &batch("delete", "scratch/b", ""),
    );
    assert_eq!(calls(), 2, "deletions are no news");

    // Every watched branch moves to a new commit in one transaction: one call, one job.
    let tree = format!("{head}^{{tree}}");
    let moved = w.git(&repo, &["commit-tree", &tree, "-p", &head, "-m", "moved"]);
    let moved = moved.trim();
    let update = batch("update", "experiment/b", &format!("{moved} {head}"));
    git(&["update-ref", "--stdin"], &update);
    assert_eq!(calls(), 3);
    assert_eq!(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
        "notify --hook reference-transaction --stdin"
    );
    assert_eq!(pending(&w), before + 1);
    // And a commit on main is still queued: its hook writes the home's spool, starting no
    // process, and the next command takes it in.
    std::fs::write(repo.join("m.txt"), "m").unwrap();
    git(&["add", "m.txt"], "");
    git(&["commit", "-q", "-m", "on main"], "");
    assert_eq!(calls(), 3);
    assert_eq!(pending(&w), before + 2);
}

#[test]
fn a_branch_made_on_old_history_queues_none_of_it_and_its_next_commit_is_queued() {
    let w = World::new();
    let repo = plain_repo(&w, "old-history");
    w.commit(&repo, &[("b.txt", "b\n")], "second");
    w.commit(&repo, &[("c.txt", "c\n")], "third");
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    // The history the repository had when it was adopted is not run, whichever branch shows it.
    w.git(&repo, &["branch", "experiment/old", "HEAD~1"]);
    w.git(&repo, &["branch", "experiment/root", "HEAD~2"]);
    w.git(&repo, &["branch", "experiment/tip"]);
    assert_eq!(pending(&w), 0);
    w.git(&repo, &["checkout", "-q", "experiment/old"]);
    let c = w.commit(&repo, &[("d.txt", "d\n")], "on old history");
    assert_eq!(pending(&w), 1);
    // A branch made at a queued commit adds nothing; its own commits are queued.
    w.git(&repo, &["checkout", "-q", "-b", "experiment/next"]);
    assert_eq!(pending(&w), 1);
    w.commit(&repo, &[("e.txt", "e\n")], "next");
    w.git(&repo, &["checkout", "-q", "--orphan", "experiment/orphan"]);
    w.commit(&repo, &[("o.txt", "o\n")], "orphan");
    assert_eq!(pending(&w), 3, "{c}");
}

#[test]
fn a_commit_among_many_watched_branches_leaves_the_others_watermarks_alone() {
    use std::os::unix::fs::MetadataExt;
    let w = World::new();
    let repo = w.new_repo("many-marks");
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let batch: String = (0..500)
        .map(|i| format!("create refs/heads/experiment/b{i} {head}\n"))
        .collect();
    let mut cmd = std::process::Command::new("git");
    cmd.args(["update-ref", "--stdin"]).current_dir(&repo);
    w.apply_env(&mut cmd);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), batch.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let before = pending(&w);
    let marks = repo.join(".git/sandbox-watermarks");
    let stamp = |p: &std::path::Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.mtime_nsec(), std::fs::read(p).unwrap())
    };
    let packed = stamp(&marks);
    // A hook run for one branch's commit writes that branch's watermark alone: the other
    // branches' list is neither read whole nor rewritten, so its cost stays the same at 20,000.
    w.commit(&repo, &[("a.txt", "a\n")], "on main");
    assert_eq!(pending(&w), before + 1);
    assert!(
        stamp(&marks) == packed,
        "the shared watermark list was rewritten"
    );
    w.git(&repo, &["checkout", "-q", "experiment/b7"]);
    w.commit(&repo, &[("b.txt", "b\n")], "on b7");
    w.commit(&repo, &[("c.txt", "c\n")], "on b7 again");
    assert_eq!(pending(&w), before + 3);
    assert!(
        stamp(&marks) == packed,
        "the shared watermark list was rewritten"
    );
    // A full look at every branch (what the daemon does) finds these watermarks: nothing is new.
    assert_eq!(w.sandbox(&repo, &["notify"]).code, 0);
    assert_eq!(pending(&w), before + 3);
    w.commit(&repo, &[("d.txt", "d\n")], "on b7 once more");
    assert_eq!(pending(&w), before + 4);
}

#[test]
fn branches_made_one_at_a_time_are_packed_by_the_hook_so_git_gc_prunes_few() {
    let w = World::new();
    let repo = w.new_repo("one-at-a-time");
    let refs = || {
        w.git(
            &repo,
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        )
    };
    for i in 0..120 {
        w.git(&repo, &["branch", &format!("experiment/b{i}")]);
    }
    let loose = walkdir_files(&repo.join(".git/refs/heads"));
    assert!(
        loose < 100,
        "{loose} loose branch refs: the next git gc starts the hook twice for each"
    );
    let packed = std::fs::read_to_string(repo.join(".git/packed-refs")).unwrap_or_default();
    assert!(packed.contains("refs/heads/experiment/b0\n"), "{packed}");
    // Packing moved no branch.
    let head = w.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let listed = refs();
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("refs/heads/experiment/"))
            .filter(|l| l.ends_with(&head))
            .count(),
        120,
        "{listed}"
    );
}

/// How many files are under `dir`, at any depth.
fn walkdir_files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            n += walkdir_files(&e.path());
        } else {
            n += 1;
        }
    }
    n
}

#[test]
fn a_repository_on_master_is_watched_and_promotes_to_master() {
    let w = World::new();
    let upstream = w.work().join("upstream");
    std::fs::create_dir_all(&upstream).unwrap();
    w.git(&upstream, &["init", "-q", "-b", "master"]);
    w.commit(
        &upstream,
        &[(
            "tests/test_a.py",
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n",
        )],
        "first",
    );
    let repo = w.work().join("clone");
    w.git(
        &w.work(),
        &["clone", "-q", upstream.to_str().unwrap(), "clone"],
    );
    w.git(&repo, &["checkout", "-q", "-b", "topic"]);
    let o = w.sandbox(&repo, &["init", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let adopted = &o.json()["adopted"];
    assert_eq!(adopted["production"], "master", "{o:?}");
    assert_eq!(
        adopted["watch"],
        serde_json::json!(["topic", "master", "experiment/*"]),
        "{o:?}"
    );
    let cfg = std::fs::read_to_string(repo.join(".git/sandbox.toml")).unwrap();
    assert!(cfg.contains("target = \"master\""), "{cfg}");
    // `config --adopted` prints it, to commit as the repository's.
    let o = w.sandbox(&repo, &["config", "--adopted"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, cfg.as_str()), "{o:?}");

    // Commits on master are run.
    w.git(&repo, &["checkout", "-q", "master"]);
    let before = pending(&w);
    w.commit(&repo, &[("b.txt", "b\n")], "second");
    assert_eq!(pending(&w), before + 1);

    // An experiment starts from master and is promoted into it.
    let o = w.sandbox(&repo, &["experiment", "start", "faster"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.commit_on(&repo, "experiment/faster", &[("c.txt", "c\n")], "faster");
    let o = w.sandbox(&repo, &["promote", "faster", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(w.git(&repo, &["show", "master:c.txt"]), "c\n");

    // A repository with no adopted settings says how to get them.
    let plain = plain_repo(&w, "never-adopted");
    let o = w.sandbox(&plain, &["config", "--adopted"]);
    assert_ne!(o.code, 0, "{o:?}");
    assert!(o.stderr.contains("git sandbox init"), "{o:?}");
}

#[test]
fn a_fresh_clone_where_an_adopted_repository_was_is_adopted_anew() {
    let w = World::new();
    let repo = plain_repo(&w, "recloned");
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let old = w.git(&repo, &["config", "sandbox.repositoryId"]);
    std::fs::remove_dir_all(&repo).unwrap();
    let repo = plain_repo(&w, "recloned");
    let o = w.sandbox(&repo, &["init", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let new = w.git(&repo, &["config", "sandbox.repositoryId"]);
    assert_ne!(new, old);
    let list = w.sandbox(&w.work(), &["list", "--json"]).json();
    assert_eq!(list["total"], 1, "the old registration is gone: {list}");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
}
