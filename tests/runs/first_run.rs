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

fn written(repo: &Path) -> String {
    std::fs::read_to_string(repo.join(".sandbox.toml")).unwrap()
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
            && cfg.contains("# Proposed by `git sandbox init` from package.json names dependencies and there is no lockfile"),
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

/// Accept `init`'s proposal as a user would (commit the `.sandbox.toml` it wrote, consent to
/// the setup's network) and run; the run must pass.
fn first_run(w: &World, repo: &Path, registry: &str) -> serde_json::Value {
    let o = w.sandbox(repo, &["init"]);
    assert_eq!(o.code, 0, "{o:?}");
    w.commit(repo, &[(".sandbox.toml", &written(repo))], "init's config");
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
