//! Build caches and kept checkouts: what `gc` reclaims of them, and what it leaves alone.

use super::*;

/// A test command that keeps `bytes` bytes in `out/` (a build cache dir).
fn caching(bytes: usize) -> String {
    format!(
        "[test]\ncommand = \"mkdir -p out && head -c {bytes} /dev/zero > out/f\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n"
    )
}

/// The build caches under the data dir: branch name -> its directory.
fn caches(w: &World) -> std::collections::BTreeMap<String, PathBuf> {
    let mut out = std::collections::BTreeMap::new();
    for repo in std::fs::read_dir(w.data().join("cache"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for b in std::fs::read_dir(repo.path()).unwrap().flatten() {
            let name = std::fs::read_to_string(b.path().join("branch")).unwrap();
            out.insert(name, b.path());
        }
    }
    out
}

fn run_on(w: &World, repo: &Path, branch: &str, bytes: usize) {
    if branch != "main"
        && w.git_out(repo, &["rev-parse", "--verify", "-q", branch], false)
            .code
            != 0
    {
        let name = branch.strip_prefix("experiment/").unwrap();
        assert_eq!(w.sandbox(repo, &["experiment", "start", name]).code, 0);
    }
    w.git(repo, &["switch", "-q", branch]);
    // A tree of the branch's own (an experiment's start adds no file): its run is made, not
    // served from another branch's run of the same tree.
    w.commit(
        repo,
        &[(".sandbox.toml", &caching(bytes)), ("BRANCH", branch)],
        &format!("{branch} keeps {bytes}"),
    );
    let o = w.sandbox(repo, &["run", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
}

#[test]
fn gc_reclaims_build_caches_of_gone_branches_unused_ones_and_unregistered_repositories() {
    let w = scratch_world();
    let repo = w.new_repo("cached");
    run_on(&w, &repo, "main", 1000);
    run_on(&w, &repo, "experiment/gone", 1000);
    run_on(&w, &repo, "experiment/idle", 1000);
    run_on(&w, &repo, "experiment/live", 1000);
    w.git(&repo, &["switch", "-q", "main"]);
    w.git(&repo, &["branch", "-q", "-D", "experiment/gone"]);
    let before = caches(&w);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        [
            "experiment/gone",
            "experiment/idle",
            "experiment/live",
            "main"
        ]
    );
    // When a run last used it: the branch's lock, touched by every run.
    age_file(&before["experiment/idle"].join("lock"), 30 * DAY);
    // Another repository, forgotten: its build cache and kept checkout go too.
    let other = w.new_repo("forgotten");
    run_on(&w, &other, "main", 1000);
    let kept_before = walk(&w.path("scratch")).len();
    let cache_files = walk(&w.data().join("cache")).len();
    assert_eq!(w.sandbox(&other, &["forget"]).code, 0);

    let dry = w.sandbox(&repo, &["gc", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(dry.json()["caches"]["count"], 3, "{dry:?}");
    assert_eq!(
        walk(&w.data().join("cache")).len(),
        cache_files,
        "a dry run removes nothing"
    );
    assert_eq!(walk(&w.path("scratch")).len(), kept_before);

    let o = w.sandbox(&repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let r = o.json();
    assert_eq!(r["caches"]["count"], 3, "{r}");
    assert!(r["caches"]["bytes"].as_u64().unwrap() >= 3000, "{r}");
    assert_eq!(r["kept_checkouts"]["count"], 1, "{r}");
    assert_eq!(r["caches_kept"]["count"], 2, "{r}");
    assert_eq!(
        caches(&w).keys().collect::<Vec<_>>(),
        ["experiment/live", "main"]
    );
    // What remains still works: production's next run starts from its cache.
    w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"test -s out/f\"\n[analysis]\nenabled = false\n[cache]\ndirs = [\"out\"]\n")],
        "sees its cache",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    let text = w.sandbox(&repo, &["gc"]);
    assert!(text.stdout.contains("and 2 build caches ("), "{text:?}");
}

#[test]
fn gc_keeps_a_repositorys_caches_under_its_bound_least_recently_used_first() {
    let w = scratch_world();
    let cfg = w.path("config/git-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[gc]\nmax_cache_mb = 1\n").unwrap();
    let repo = w.new_repo("bounded");
    run_on(&w, &repo, "experiment/old", 600_000);
    run_on(&w, &repo, "main", 600_000);
    age_file(&caches(&w)["experiment/old"].join("lock"), DAY);
    let o = w.sandbox(&repo, &["gc", "--json"]);
    let r = o.json();
    assert_eq!(r["caches"]["count"], 1, "{r}");
    assert_eq!(caches(&w).keys().collect::<Vec<_>>(), ["main"]);
}

/// The kept trees (`…/lower/tree`) under a scratch dir.
fn kept_trees(scratch: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walk(scratch)
        .into_iter()
        .filter(|p| p.ends_with("lower/tree"))
        .collect();
    out.sort();
    out
}

#[test]
fn gc_in_one_data_dir_leaves_the_kept_checkouts_of_another_alone() {
    // Two data dirs of one user on one machine share the scratch dir, as they share /dev/shm.
    let mine = scratch_world();
    let scratch = mine.path("scratch");
    let mut theirs = World::new();
    theirs
        .extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    let my_repo = mine.new_repo("mine");
    let their_repo = theirs.new_repo("theirs");
    for (w, repo) in [(&mine, &my_repo), (&theirs, &their_repo)] {
        with_command(w, repo);
        let o = w.sandbox(repo, &["run"]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    let both = kept_trees(&scratch);
    assert_eq!(both.len(), 2, "one kept checkout each: {both:?}");

    // My repository is registered and recent; theirs is no business of my gc.
    let o = mine.sandbox(&my_repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["kept_checkouts"]["count"], 0, "{o:?}");
    assert_eq!(
        kept_trees(&scratch),
        both,
        "my gc removed their kept checkout"
    );

    // Their gc removes their own once they forget the repository, and only that.
    assert_eq!(theirs.sandbox(&their_repo, &["forget"]).code, 0);
    let o = theirs.sandbox(&theirs.work(), &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["kept_checkouts"]["count"], 1, "{o:?}");
    assert_eq!(kept_trees(&scratch).len(), 1);
    let o = mine.sandbox(&my_repo, &["exec", "HEAD", "--", "true"]);
    assert_eq!(o.code, 0, "mine still works: {o:?}");
    // Only mine are left (the exec may take another slot of mine: as root a slot's uid lock is
    // machine-wide, and the other tests of this file hold some).
    let my_home = format!(
        "home-{}",
        std::fs::read_to_string(mine.data().join("home-id"))
            .unwrap()
            .trim()
    );
    let left = kept_trees(&scratch);
    assert!(
        !left.is_empty() && left.iter().all(|p| p.to_string_lossy().contains(&my_home)),
        "{left:?}"
    );
}

/// A data dir on `scratch` with one run of a repository done (so one kept checkout).
fn ran_once_on(scratch: &Path, name: &str) -> World {
    let mut w = World::new();
    w.extra_env
        .push(("GIT_SANDBOX_TMPDIR".into(), scratch.display().to_string()));
    let repo = w.new_repo(name);
    with_command(&w, &repo);
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 0, "{o:?}");
    w
}

#[test]
fn kept_checkouts_of_a_data_dir_that_is_gone_go_with_the_next_gc_or_new_data_dir() {
    let mine = scratch_world();
    let scratch = mine.path("scratch");
    let my_repo = mine.new_repo("mine");
    with_command(&mine, &my_repo);
    assert_eq!(mine.sandbox(&my_repo, &["run"]).code, 0);

    // A data dir removed (a test's temp dir): my gc removes what it left in the scratch dir.
    drop(ran_once_on(&scratch, "gone"));
    assert_eq!(kept_trees(&scratch).len(), 2);
    let o = mine.sandbox(&my_repo, &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["kept_checkouts"]["count"], 1, "{o:?}");
    assert_eq!(kept_trees(&scratch).len(), 1);

    // Another removed: the first run of a new data dir removes it, and leaves mine.
    drop(ran_once_on(&scratch, "gone2"));
    assert_eq!(kept_trees(&scratch).len(), 2);
    let _new = ran_once_on(&scratch, "new");
    assert_eq!(kept_trees(&scratch).len(), 2, "mine and the new one's");
    let o = mine.sandbox(&my_repo, &["exec", "HEAD", "--", "true"]);
    assert_eq!(o.code, 0, "mine still works: {o:?}");
    assert_eq!(o.stderr, "", "{o:?}");
}

#[test]
fn gc_sweeps_kept_checkouts_of_the_old_shared_layout_once_unused_for_the_retention() {
    // Before kept checkouts were per data dir, every data dir's slots sat side by side; no run
    // uses those any more, and none can say whose they are.
    let w = scratch_world();
    // SAFETY: plain getter.
    let euid = unsafe { libc::geteuid() };
    let slot = w
        .path("scratch")
        .join(format!("git-sandbox-cache-{euid}/slot-0"));
    let old = slot.join("0123456789abcdef");
    let recent = slot.join("fedcba9876543210");
    for (dir, age) in [(&old, 30 * DAY), (&recent, Duration::ZERO)] {
        std::fs::create_dir_all(dir.join("lower/tree")).unwrap();
        std::fs::write(dir.join("lower/tree/f"), "x").unwrap();
        std::fs::write(dir.join("state"), "{}").unwrap();
        age_file(&dir.join("state"), age);
    }
    let o = w.sandbox(&w.work(), &["gc", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["kept_checkouts"]["count"], 1, "{o:?}");
    assert!(!old.exists(), "unused for 30 days: swept");
    assert!(
        recent.exists(),
        "used lately (by an older git-sandbox): kept"
    );
}

#[test]
fn doctor_names_a_build_cache_by_its_repository() {
    let w = scratch_world();
    let repo = w.new_repo("named-cache");
    run_on(&w, &repo, "main", 1000);
    assert_eq!(caches(&w).len(), 1, "a cache was kept");
    let o = w.sandbox(&repo, &["doctor"]);
    let line = o
        .stdout
        .lines()
        .find(|l| l.contains(" main: "))
        .unwrap_or_else(|| panic!("no cache line: {o:?}"));
    let root = std::fs::canonicalize(&repo).unwrap();
    assert!(
        line.trim_start().starts_with(&root.display().to_string())
            || line.trim_start().starts_with(&repo.display().to_string()),
        "{line}"
    );
    let json = w.sandbox(&repo, &["doctor", "--json"]).json();
    let cache = &json["caches"][0];
    assert!(cache["repository"].as_str().is_some(), "{json}");
}
