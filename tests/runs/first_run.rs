//! A project's first run from `git sandbox init` alone: the setup step it proposes from the
//! lockfiles and manifests, the consent its network needs, and real installs from the package
//! managers' registries (an express-like mocha project, click- and requests-like pytest projects,
//! a pnpm workspace).

use crate::common;

use common::{online_world, tools, World};
use std::path::{Path, PathBuf};

/// A plain git repository holding `files`, committed.
fn project(w: &World, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = w.work().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    w.git(&dir, &["init", "-q", "-b", "main"]);
    w.commit(&dir, files, "the project");
    dir
}

/// The settings `init` adopted the repository with (it writes nothing into the work tree).
fn written(repo: &Path) -> String {
    assert!(
        !repo.join(".sandbox.toml").exists(),
        "init wrote into the work tree"
    );
    std::fs::read_to_string(repo.join(".git/sandbox.toml")).unwrap()
}

const EXPRESS_LIKE: &str = r#"{"name":"app","version":"1.0.0","scripts":{"test":"mocha"},"devDependencies":{"mocha":"^10"}}"#;

#[test]
fn init_proposes_the_setup_its_files_call_for_and_asks_for_the_networks_consent() {
    let w = World::new();
    let repo = project(&w, "express-like", &[("package.json", EXPRESS_LIKE)]);
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    let cfg = written(&repo);
    assert!(
        cfg.contains("setup = \"npm install\"")
            && cfg.contains(
                "# Proposed from package.json names dependencies and there is no lockfile"
            ),
        "{cfg}"
    );
    let consent: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.contains("setup_network = true"))
        .collect();
    assert_eq!(consent.len(), 1, "{o:?}");
    assert!(
        consent[0].contains("consent")
            && consent[0].contains(
                &w.path("config/git-sandbox/config.toml")
                    .display()
                    .to_string()
            ),
        "{o:?}"
    );

    // Each package manager's lockfile, its own install; a user who consented is not asked.
    w.user_config("[limits]\nsetup_network = true\n");
    for (lock, want) in [
        ("pnpm-lock.yaml", "pnpm install --frozen-lockfile"),
        ("package-lock.json", "npm ci"),
        ("yarn.lock", "yarn install --frozen-lockfile"),
    ] {
        let repo = project(
            &w,
            lock,
            &[
                ("package.json", EXPRESS_LIKE),
                (lock, "lockfileVersion: 9\n"),
            ],
        );
        let o = w.sandbox(&repo, &["init", "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        assert_eq!(o.json()["setup"]["command"], want, "{o:?}");
        assert_eq!(o.json()["setup"]["network_allowed"], true, "{o:?}");
        assert!(
            written(&repo).contains(&format!("setup = \"{want}\"")),
            "{}",
            written(&repo)
        );
    }
    let repo = project(
        &w,
        "plain-init",
        &[("package.json", EXPRESS_LIKE), ("package-lock.json", "{}")],
    );
    let o = w.sandbox(&repo, &["init"]);
    assert!(!o.stdout.contains("consent"), "{o:?}");
}

#[test]
fn a_program_the_package_manager_installs_that_is_not_found_names_the_setup_step() {
    let w = World::new();
    let repo = project(
        &w,
        "no-deps",
        &[
            ("package.json", EXPRESS_LIKE),
            (".sandbox.toml", "[test]\ncommand = \"npm test\"\n"),
        ],
    );
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("mocha: not found")
            && error.contains("`mocha` is installed by the project's package manager")
            && error.contains("setup = \"npm install\"")
            && error.contains("setup_network = true"),
        "{error}"
    );
    // With a setup step configured, the hint names that one.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"npm test\"\nsetup = \"true\"\n",
        )],
        "a setup that installs nothing",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let error = o.json()[0]["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("`mocha` is installed by the setup step `true`"),
        "{error}"
    );
}

/// `init` and run, as a new user would with the setup's network consented to and nothing
/// committed; the run must pass.
fn first_run(w: &World, repo: &Path, registry: &str) -> serde_json::Value {
    let o = w.sandbox(repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    let o = w.sandbox(repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    if rec["status"] == "error"
        && rec["error"]
            .as_str()
            .is_some_and(|e| e.contains("the setup step"))
    {
        let log = std::fs::read_to_string(
            w.log_of(rec["commit"].as_str().unwrap())
                .with_extension("setup.log"),
        )
        .unwrap_or_default();
        panic!(
            "the setup could not install from {registry}: tests/runs/first_run.rs installs real packages and needs {registry} reachable (run `cargo test --test runs first_run` where it is); {}\n{log}",
            rec["error"]
        );
    }
    assert_eq!(rec["status"], "passed", "{}\n{o:?}", written(repo));
    rec
}

#[test]
fn express_click_and_requests_like_projects_pass_their_first_run_from_init_alone() {
    let w = World::new();
    w.user_config("[limits]\nsetup_network = true\n");
    let express = project(
        &w,
        "express-like",
        &[
            ("package.json", EXPRESS_LIKE),
            (
                "test/app.js",
                "const assert = require('assert');\ndescribe('app', () => { it('adds', () => assert.equal(1 + 1, 2)); });\n",
            ),
        ],
    );
    let rec = first_run(&w, &express, "the npm registry");
    assert_eq!(rec["tests"]["setup"]["command"], "npm install", "{rec}");
    assert_eq!(rec["tests"]["passed"], 1, "{rec}");

    let click = project(
        &w,
        "click-like",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"clicklike\"\nversion = \"1.0\"\n[project.optional-dependencies]\ntest = [\"pytest\"]\n[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n[tool.setuptools]\npackages = [\"clicklike\"]\n",
            ),
            ("clicklike/__init__.py", "def add(a, b):\n    return a + b\n"),
            (
                "tests/test_add.py",
                "import clicklike\n\ndef test_add():\n    assert clicklike.add(1, 2) == 3\n",
            ),
        ],
    );
    let rec = first_run(&w, &click, "PyPI");
    assert_eq!(rec["tests"]["framework"], "pytest", "{rec}");
    assert_eq!(rec["tests"]["passed"], 1, "{rec}");

    // requests' shape: setup.py and a requirements-dev.txt that names pytest.
    let requests = project(
        &w,
        "requests-like",
        &[
            (
                "setup.py",
                "from setuptools import setup\nsetup(name='reqlike', version='1.0', py_modules=['reqlike'])\n",
            ),
            ("requirements-dev.txt", "-e .\npytest\n"),
            ("reqlike.py", "def get():\n    return 200\n"),
            (
                "tests/test_get.py",
                "import reqlike\n\ndef test_get():\n    assert reqlike.get() == 200\n",
            ),
        ],
    );
    let rec = first_run(&w, &requests, "PyPI");
    assert_eq!(rec["tests"]["framework"], "pytest", "{rec}");
    assert_eq!(rec["tests"]["passed"], 1, "{rec}");
}

/// A small pnpm workspace: `a` needs `b` through `workspace:*` and is-number from the registry.
const PNPM_WORKSPACE: &[(&str, &str)] = &[
    (
        "package.json",
        r#"{"name":"ws","private":true,"packageManager":"pnpm@9.15.0","scripts":{"test":"node --test"}}"#,
    ),
    ("pnpm-workspace.yaml", "packages:\n  - 'packages/*'\n"),
    (
        "packages/a/package.json",
        r#"{"name":"a","version":"1.0.0","dependencies":{"b":"workspace:*","is-number":"7.0.0"}}"#,
    ),
    (
        "packages/a/test/a.test.js",
        "const test = require('node:test');\nconst assert = require('assert');\nconst isNumber = require('is-number');\nconst b = require('b');\ntest('a sees b', () => assert.ok(isNumber(b.n)));\n",
    ),
    (
        "packages/b/package.json",
        r#"{"name":"b","version":"1.0.0","main":"index.js"}"#,
    ),
    ("packages/b/index.js", "module.exports = { n: 42 };\n"),
];

#[test]
fn a_pnpm_workspace_passes_its_first_run_from_init_alone() {
    let pnpm = tools::pnpm();
    let w = online_world(&pnpm);
    let repo = project(&w, "pnpm-workspace", PNPM_WORKSPACE);
    // The lockfile a pnpm user commits, made by the real pnpm.
    let o = std::process::Command::new(pnpm.join("pnpm"))
        .args(["install", "--lockfile-only"])
        .current_dir(&repo)
        .env("HOME", w.path("home"))
        .output()
        .unwrap();
    assert!(
        o.status.success() && repo.join("pnpm-lock.yaml").exists(),
        "pnpm could not resolve the workspace from the npm registry: tests/runs/first_run.rs needs it reachable; {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let lock = std::fs::read_to_string(repo.join("pnpm-lock.yaml")).unwrap();
    assert!(
        lock.contains("is-number") && lock.contains("link:../b"),
        "{lock}"
    );
    w.commit(&repo, &[("pnpm-lock.yaml", &lock)], "pnpm's lockfile");

    let rec = first_run(&w, &repo, "the npm registry");
    assert_eq!(
        rec["tests"]["setup"]["command"], "pnpm install --frozen-lockfile",
        "{rec}"
    );
    assert_eq!(rec["tests"]["passed"], 1, "{rec}");
}

#[test]
fn history_runs_from_init_alone_on_the_branch_that_holds_it() {
    let w = World::new();
    w.user_config("[limits]\nsetup_network = true\n");
    let repo = project(
        &w,
        "click-history",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"clicklike\"\nversion = \"1.0\"\n[project.optional-dependencies]\ntest = [\"pytest\"]\n[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n[tool.setuptools]\npackages = [\"clicklike\"]\n",
            ),
            ("clicklike/__init__.py", "def add(a, b):\n    return a + b\n"),
            (
                "tests/test_add.py",
                "import clicklike\n\ndef test_add():\n    assert clicklike.add(1, 2) == 3\n",
            ),
        ],
    );
    for n in 1..=3 {
        w.commit(
            &repo,
            &[(
                "clicklike/__init__.py",
                &format!("def add(a, b):\n    return a + b  # {n}\n"),
            )],
            &format!("change {n}"),
        );
    }
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    // Old commits have no .sandbox.toml: the adopted settings are theirs. A range that ends at
    // no branch name runs as main's, whose setup layer the second commit reuses.
    let o = w.sandbox(&repo, &["run", "-j", "1", "--json", "main~3..main~1"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("no watched branch"), "{o:?}");
    let recs = o.json();
    let recs = recs.as_array().unwrap();
    assert_eq!(recs.len(), 2, "{o:?}");
    for r in recs {
        assert_eq!(r["status"], "passed", "{r}");
        assert_eq!(r["tests"]["passed"], 1, "{r}");
    }
    assert_eq!(recs[0]["tests"]["setup"]["how"], "built", "{o:?}");
    assert_eq!(recs[1]["tests"]["setup"]["how"], "reused", "{o:?}");

    // A commit no watched branch holds runs cold, and says so.
    w.git(&repo, &["checkout", "-q", "-b", "side", "main~2"]);
    let side = w.commit(&repo, &[("notes.txt", "x\n")], "on the side");
    w.git(&repo, &["checkout", "-q", "main"]);
    let o = w.sandbox(&repo, &["run", "--json", &side]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    let said: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("no watched branch"))
        .collect();
    assert_eq!(said.len(), 1, "{o:?}");
    assert!(
        said[0].contains("build cache") && said[0].contains("[watch] branches"),
        "{o:?}"
    );
}

#[test]
fn a_cargo_workspace_fetches_its_crates_in_the_proposed_setup_and_passes_from_init_alone() {
    let mut w = World::new();
    w.user_config("[limits]\nsetup_network = true\n");
    // As in a user's shell: no CARGO_HOME, so cargo's home would be the caller's ~/.cargo,
    // which runs see read-only. Runs download into their own home instead.
    w.extra_env.push(("CARGO_HOME".into(), String::new()));
    let repo = project(
        &w,
        "cargo-workspace",
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"top\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\nmembers = [\"fmt\"]\n",
            ),
            ("src/lib.rs", "#[test]\nfn top() {}\n"),
            (
                "fmt/Cargo.toml",
                "[package]\nname = \"fmt\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
            ),
            (
                "fmt/src/lib.rs",
                "#[test]\nfn formats() {\n    assert_eq!(itoa::Buffer::new().format(42), \"42\");\n}\n",
            ),
        ],
    );
    // The lockfile a cargo user commits, made by the real cargo.
    let o = std::process::Command::new("cargo")
        .args(["generate-lockfile"])
        .current_dir(&repo)
        .env("CARGO_HOME", w.path("lockfile-cargo-home"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cargo could not resolve itoa from crates.io: tests/runs/first_run.rs needs it reachable; {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lock = std::fs::read_to_string(repo.join("Cargo.lock")).unwrap();
    w.commit(&repo, &[("Cargo.lock", &lock)], "cargo's lockfile");

    let rec = first_run(&w, &repo, "crates.io");
    assert_eq!(
        rec["tests"]["setup"]["command"], "cargo fetch --locked",
        "{rec}"
    );
    assert_eq!(rec["tests"]["command"], "cargo test --workspace", "{rec}");
    // Both crates' tests, the member's with the crate the setup fetched.
    assert_eq!(rec["tests"]["passed"], 2, "{rec}");
}

#[test]
fn init_says_which_package_manager_runs_cannot_find_and_proposes_what_exists() {
    let mut w = World::new();
    // A PATH with git and python3 alone: no package manager of any kind.
    let bin = w.path("git-and-python-only");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "python3"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let at = String::from_utf8_lossy(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(&at, bin.join(tool)).unwrap();
    }
    w.extra_env.push(("PATH".into(), bin.display().to_string()));
    // pnpm's lockfile needs pnpm: init says how to get it.
    let repo = project(
        &w,
        "pnpm-project",
        &[
            ("package.json", EXPRESS_LIKE),
            ("pnpm-lock.yaml", "lockfileVersion: 9\n"),
        ],
    );
    let o = w.sandbox(&repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    let said: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.contains("not on the PATH"))
        .collect();
    assert_eq!(said.len(), 1, "{o:?}");
    assert!(
        said[0].contains("pnpm is not") && said[0].contains("corepack enable pnpm"),
        "{o:?}"
    );
    // uv's lockfile without uv: pip installs the project and its test group instead, and why
    // says what the lock would need.
    let repo = project(
        &w,
        "uv-project",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"u\"\nversion = \"1\"\n[dependency-groups]\ntests = [\"pytest\"]\n",
            ),
            ("uv.lock", "version = 1\n[[package]]\nname = \"pytest\"\n"),
        ],
    );
    let o = w.sandbox(&repo, &["init", "--json"]);
    let setup = &o.json()["setup"];
    assert_eq!(
        setup["command"], "python3 -m venv .venv && .venv/bin/python -m pip install -e . pytest",
        "{o:?}"
    );
    assert!(
        setup["why"]
            .as_str()
            .unwrap()
            .starts_with("uv.lock, but uv is not installed here"),
        "{o:?}"
    );
    assert!(setup["missing"].is_null(), "{o:?}");
}

#[test]
fn run_says_when_the_work_trees_config_is_not_the_commits() {
    let w = World::new();
    let repo = project(&w, "edited", &[("a.txt", "a\n")]);
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let notes = |o: &common::Out| -> Vec<String> {
        o.stderr
            .lines()
            .filter(|l| l.contains(".sandbox.toml"))
            .map(str::to_string)
            .collect()
    };
    // Nothing to say while the work tree and the commit agree.
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(notes(&o), Vec::<String>::new(), "{o:?}");
    // Written and not committed: the run is the commit's, with the adopted settings.
    std::fs::write(repo.join(".sandbox.toml"), "[test]\ncommand = \"false\"\n").unwrap();
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    let said = notes(&o);
    assert_eq!(said.len(), 1, "{o:?}");
    assert!(
        said[0].contains("is not in") && said[0].contains("adopted"),
        "{o:?}"
    );
    // Committed, then changed.
    w.commit(
        &repo,
        &[(".sandbox.toml", "[test]\ncommand = \"true\"\n")],
        "config",
    );
    std::fs::write(repo.join(".sandbox.toml"), "[test]\ncommand = \"false\"\n").unwrap();
    let said = notes(&w.sandbox(&repo, &["run"]));
    assert_eq!(said.len(), 1);
    assert!(said[0].contains("differs from"), "{said:?}");
    // A work tree's config mid-edit does not stop an older commit from running: its run is
    // cold, and says why.
    std::fs::write(repo.join(".sandbox.toml"), "[test\n").unwrap();
    let o = w.sandbox(&repo, &["run", "--json", "HEAD~1"]);
    assert_eq!(o.json()[0]["status"], "passed", "{o:?}");
    assert!(o.stderr.contains("no watched branch is known"), "{o:?}");
}

/// A CMake project like fmt's: `enable_testing()` at the root, tests built from C sources.
const CMAKE_PROJECT: &[(&str, &str)] = &[
    (
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.13)\nproject(calc C)\nenable_testing()\nadd_subdirectory(test)\n",
    ),
    (
        "test/CMakeLists.txt",
        "foreach(t add mul div)\n  add_executable(t_${t} ${t}.c)\n  add_test(NAME ${t} COMMAND t_${t})\nendforeach()\n",
    ),
    ("test/add.c", "int main(void) { return 1 + 1 == 2 ? 0 : 1; }\n"),
    ("test/mul.c", "int main(void) { return 2 * 3 == 6 ? 0 : 1; }\n"),
    ("test/div.c", "int main(void) { return 6 / 3 == 2 ? 0 : 1; }\n"),
];

#[test]
fn a_cmake_project_is_built_and_tested_by_ctest_from_init_alone() {
    let w = World::new();
    let repo = project(&w, "cmake-project", CMAKE_PROJECT);
    let rec = first_run(&w, &repo, "nothing (CMake needs no network)");
    assert_eq!(
        rec["tests"]["command"],
        "cmake -B build && cmake --build build && ctest --test-dir build --output-on-failure",
        "{rec}"
    );
    assert_eq!(rec["tests"]["framework"], "ctest", "{rec}");
    assert_eq!(
        (&rec["tests"]["passed"], &rec["tests"]["total"]),
        (&serde_json::json!(3), &serde_json::json!(3)),
        "{rec}"
    );
    // A test that fails is named, with what it printed.
    w.commit(
        &repo,
        &[(
            "test/mul.c",
            "#include <stdio.h>\nint main(void) { printf(\"2 * 3 is %d\\n\", 2 + 3); return 1; }\n",
        )],
        "break mul",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = &o.json()[0];
    assert_eq!(rec["status"], "failed", "{o:?}");
    assert_eq!(
        (&rec["tests"]["passed"], &rec["tests"]["failed"]),
        (&serde_json::json!(2), &serde_json::json!(1)),
        "{rec}"
    );
    assert_eq!(rec["tests"]["failures"][0]["name"], "mul", "{rec}");
    assert_eq!(
        rec["tests"]["failures"][0]["message"], "2 * 3 is 5",
        "{rec}"
    );
}

#[test]
fn init_proposes_the_build_the_projects_ci_runs_before_its_tests() {
    let w = World::new();
    let repo = project(
        &w,
        "zod-like",
        &[
            (
                "package.json",
                r#"{"private":true,"scripts":{"build":"tsc -b","test":"vitest run"},"devDependencies":{"vitest":"^3"}}"#,
            ),
            (
                ".github/workflows/release.yml",
                "jobs:\n  r:\n    steps:\n      - run: npm run build\n      - run: npm test\n",
            ),
            (
                ".github/workflows/test.yml",
                "jobs:\n  t:\n    steps:\n      - run: pnpm install\n      - run: pnpm build\n      - run: pnpm test\n",
            ),
        ],
    );
    let o = w.sandbox(&repo, &["init", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.json()["adopted"]["build"], "pnpm build", "{o:?}");
    let cfg = written(&repo);
    assert!(
        cfg.contains("build = \"pnpm build\"")
            && cfg.contains(".github/workflows/test.yml runs `pnpm build` before the tests"),
        "{cfg}"
    );
}
