//! Real toolchains under the default limits (issue 33): a setup's layer is complete or the
//! setup failed, the setup key covers every manifest of a workspace, memory is limited where it
//! is used, and a run stopped by a limit says which one and how to raise it.

use crate::common;

use common::{online_world, tools, World, BIN};
use serde_json::Value;
use std::process::Command;

/// `git sandbox ARGS` in `repo`, under a soft and hard open-file limit of `nofile` for the
/// whole process tree (the supervisor, its fork server and helpers).
fn sandbox_with_nofile(
    w: &World,
    repo: &std::path::Path,
    nofile: u32,
    args: &[&str],
) -> (i32, String, String) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .current_dir(repo);
    w.apply_env(&mut cmd);
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_hard_linked_install_past_the_open_file_limit_is_kept_whole_or_the_setup_fails() {
    // As pnpm and uv install: every file in a store, and a second name for it in the tree.
    const FILES: usize = 20_000;
    let w = World::new();
    let repo = w.new_repo("links");
    let setup = format!(
        "mkdir -p store deps && i=0 && while [ $i -lt {FILES} ]; do echo $i > store/f$i; i=$((i+1)); done && cp -al store/. deps/"
    );
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                &format!(
                    "[test]\nsetup = \"{setup}\"\ncommand = \"ls deps | wc -l; ls store | wc -l\"\ntimeout = \"300s\"\n[limits]\nopen_files = 256\n[analysis]\nenabled = false\n"
                ),
            ),
            ("pnpm-lock.yaml", "lock\n"),
        ],
        "a setup that links tens of thousands of files",
    );
    let (code, stdout, stderr) = sandbox_with_nofile(&w, &repo, 512, &["run", "--json"]);
    let rec: Value = serde_json::from_str::<Value>(&stdout)
        .unwrap_or_else(|e| panic!("{e}: exit {code}\n{stdout}\n{stderr}"))[0]
        .clone();
    if rec["status"] == "error" {
        // Allowed: a setup error naming the entry that did not arrive and why, never kept.
        let error = rec["error"].as_str().unwrap();
        assert!(error.contains("could not be kept: tree/"), "{error}");
        return;
    }
    eprintln!(
        "setup took {} ms, run {} ms",
        rec["tests"]["setup"]["duration_ms"], rec["duration_ms"]
    );
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    let counts: Vec<String> = rec["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(
        counts,
        [FILES.to_string(), FILES.to_string()],
        "every file of the install is in the layer: {rec}"
    );
}

#[test]
fn a_setup_whose_writes_cannot_all_be_kept_is_an_error_naming_the_entry() {
    let w = World::new();
    let repo = w.new_repo("nospace");
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\nsetup = \"mkdir -p deps && head -c 2000000 /dev/zero > deps/big\"\ncommand = \"ls -l deps\"\n[analysis]\nenabled = false\n",
            ),
            ("package-lock.json", "lock\n"),
        ],
        "a setup larger than the cache's disk",
    );
    // The caches live on a file system with no room for what the setup wrote.
    let cache = w.data().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mount = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(&cache)
        .status()
        .unwrap();
    assert!(
        mount.success(),
        "./test runs as root, which may mount a tmpfs"
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let _ = Command::new("umount").arg("-l").arg(&cache).status();
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{rec}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("could not be kept: tree/deps/big: cannot copy: ")
            && error.contains("ENOSPC"),
        "{error}"
    );
}

#[test]
fn a_change_to_a_workspace_packages_manifest_builds_the_setup_again() {
    let w = World::new();
    let repo = w.new_repo("workspace");
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\nsetup = \"mkdir -p deps && cat packages/a/package.json > deps/a\"\ncommand = \"cat deps/a\"\n[analysis]\nenabled = false\n",
            ),
            ("package.json", "{\"workspaces\": [\"packages/*\"]}\n"),
            ("pnpm-workspace.yaml", "packages: ['packages/*']\n"),
            ("packages/a/package.json", "{\"dependencies\": {\"left-pad\": \"1\"}}\n"),
        ],
        "a workspace",
    );
    let run = |what: &str| {
        let o = w.sandbox(&repo, &["run", "--json"]);
        let rec = o.json()[0].clone();
        assert_eq!(rec["status"], "passed", "{what}: {o:?}");
        rec
    };
    assert_eq!(run("first")["tests"]["setup"]["how"], "built");
    w.commit(&repo, &[("packages/a/index.js", "1")], "code only");
    assert_eq!(run("code only")["tests"]["setup"]["how"], "reused");
    w.commit(
        &repo,
        &[(
            "packages/a/package.json",
            "{\"dependencies\": {\"left-pad\": \"2\"}}\n",
        )],
        "a package's new dependency",
    );
    let rec = run("new dependency");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    assert!(
        rec["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("\"2\""),
        "{rec}"
    );
}

fn run_json(w: &World, repo: &std::path::Path) -> Value {
    let o = w.sandbox(repo, &["run", "--json"]);
    o.json()[0].clone()
}

fn with_command(command: &str, limits: &str) -> String {
    format!("[test]\ncommand = \"{command}\"\n[limits]\n{limits}\n[analysis]\nenabled = false\n")
}

#[test]
fn webassembly_and_v8_reservations_run_under_the_default_limits() {
    let w = World::new();
    let repo = w.new_repo("wasm");
    // 4 GiB reserved up front, 1 MiB used: what vitest and pnpm do.
    let js = "const m = new WebAssembly.Memory({initial: 16, maximum: 65536}); console.log(m.buffer.byteLength)";
    w.commit(
        &repo,
        &[
            (".sandbox.toml", &with_command("node script.js", "")),
            ("script.js", js),
        ],
        "wasm",
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(rec["tests"]["output_tail"], "1048576", "{rec}");
    let limits = &rec["tests"]["limits"];
    assert_eq!(limits["memory_by"], "cgroup", "{limits}");
    assert_eq!(limits["rlimit_as_mb"], Value::Null, "{limits}");
}

#[test]
fn a_run_stopped_by_a_limit_names_it_and_how_to_raise_it() {
    let w = World::new();
    let repo = w.new_repo("hit");
    // Memory: a heap that grows until something gives (the cgroup's OOM kill or V8's abort).
    let js = "const a = []; for (;;) a.push(new Array(1e6).fill(1.5))";
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                &with_command("node grow.js", "memory_mb = 200"),
            ),
            ("grow.js", js),
        ],
        "memory",
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "killed", "{rec}");
    assert_eq!(rec["tests"]["killed_by"], "memory", "{rec}");
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("memory_mb = 200")
            && error.contains("raise it under [limits] in your user config"),
        "{error}"
    );
    // Disk: a write that finds the run's tmpfs full.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &with_command("head -c 40000000 /dev/zero > big", "disk_mb = 16"),
        )],
        "disk",
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "killed", "{rec}");
    assert_eq!(rec["tests"]["killed_by"], "disk", "{rec}");
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("filled the 16 MiB") && error.contains("(disk_mb)"),
        "{error}"
    );
}

#[test]
fn an_offline_npm_install_fails_fast_with_npms_own_message() {
    let w = World::new();
    let repo = w.new_repo("offline");
    let head = w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\nsetup = \"npm install\"\ncommand = \"true\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n",
            ),
            (
                "package.json",
                "{\"name\": \"offline\", \"version\": \"1.0.0\", \"dependencies\": {\"left-pad\": \"1.3.0\"}}\n",
            ),
        ],
        "a dependency and no network",
    );
    let started = std::time::Instant::now();
    let rec = run_json(&w, &repo);
    let took = started.elapsed();
    assert_eq!(rec["status"], "error", "{rec}");
    assert!(
        took < std::time::Duration::from_secs(60),
        "an offline install gives up at once, not after retries: {took:?}"
    );
    let log = common::files_under(&w.data().join("logs"))
        .into_iter()
        .find(|p| p.ends_with(format!("{head}.setup.log")))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    assert!(
        log.contains("npm error") || log.contains("npm ERR!"),
        "the setup log: {log:?}"
    );
}

#[test]
fn a_real_pnpm_workspace_install_is_kept_whole() {
    let w = online_world(&tools::pnpm());
    let repo = w.new_repo("pnpm");
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\nsetup = \"pnpm install --config.confirmModulesPurge=false\"\ncommand = \"node packages/a/index.js\"\ntimeout = \"240s\"\n[analysis]\nenabled = false\n",
            ),
            ("package.json", "{\"name\": \"root\", \"private\": true}\n"),
            ("pnpm-workspace.yaml", "packages:\n  - 'packages/*'\n"),
            (
                "packages/a/package.json",
                "{\"name\": \"a\", \"version\": \"1.0.0\", \"dependencies\": {\"b\": \"workspace:*\", \"is-number\": \"7.0.0\"}}\n",
            ),
            (
                "packages/a/index.js",
                "const b = require('b'); const isNumber = require('is-number'); console.log(isNumber(b.n) ? 'a sees b ' + b.n : 'no')\n",
            ),
            (
                "packages/b/package.json",
                "{\"name\": \"b\", \"version\": \"1.0.0\", \"main\": \"index.js\", \"dependencies\": {\"kind-of\": \"6.0.3\"}}\n",
            ),
            ("packages/b/index.js", "require('kind-of'); module.exports = { n: 42 }\n"),
        ],
        "a pnpm workspace of two packages",
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    assert_eq!(rec["tests"]["output_tail"], "a sees b 42", "{rec}");
    // And the next run reads it all from the kept layer, offline.
    w.commit(&repo, &[("packages/a/README", "x")], "no new dependencies");
    let rec = run_json(&w, &repo);
    assert_eq!(rec["tests"]["setup"]["how"], "reused", "{rec}");
    assert_eq!(rec["tests"]["output_tail"], "a sees b 42", "{rec}");
}

#[test]
fn a_real_uv_workspace_install_is_kept_whole() {
    let bin = tools::installed(
        "uv-0.5.11",
        "bin/uv",
        "python3 -m venv \"$DIR/venv\" && \"$DIR/venv/bin/pip\" install -q uv==0.5.11 && mkdir -p \"$DIR/bin\" && cp \"$DIR/venv/bin/uv\" \"$DIR/bin/uv\"",
    );
    let w = online_world(&bin);
    let repo = w.new_repo("uv");
    let member = |name: &str, deps: &str| {
        format!(
            "[project]\nname = \"{name}\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [{deps}]\n\n[build-system]\nrequires = [\"hatchling\"]\nbuild-backend = \"hatchling.build\"\n"
        )
    };
    let (a, b) = (
        member("a", "\"b\", \"iniconfig==2.0.0\""),
        member("b", "\"six==1.16.0\""),
    );
    // UV_NATIVE_TLS: uv trusts the system's certificates, as pip and npm do (a machine may
    // reach PyPI through its own certificate authority).
    w.commit(
        &repo,
        &[
            (
                ".sandbox.toml",
                "[test]\nsetup = \"UV_NATIVE_TLS=1 uv sync --all-packages\"\ncommand = \"uv run --offline --frozen python -c 'import a, iniconfig, six; print(a.hello())'\"\ntimeout = \"240s\"\n[analysis]\nenabled = false\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"root\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"a\"]\n\n[tool.uv.sources]\na = { workspace = true }\nb = { workspace = true }\n\n[tool.uv.workspace]\nmembers = [\"packages/*\"]\n",
            ),
            ("packages/a/pyproject.toml", &a),
            ("packages/a/src/a/__init__.py", "import b\n\ndef hello():\n    return 'a sees b ' + str(b.N)\n"),
            ("packages/b/pyproject.toml", &b),
            ("packages/b/src/b/__init__.py", "N = 42\n"),
        ],
        "a uv workspace of two packages",
    );
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    assert_eq!(rec["tests"]["output_tail"], "a sees b 42", "{rec}");
    w.commit(&repo, &[("packages/a/README", "x")], "no new dependencies");
    let rec = run_json(&w, &repo);
    assert_eq!(rec["tests"]["setup"]["how"], "reused", "{rec}");
    // Offline, uv may reinstall the workspace's own editable members (a new file in one): the
    // dependencies came from the reused layer.
    let tail = rec["tests"]["output_tail"].as_str().unwrap_or_default();
    assert!(tail.ends_with("a sees b 42"), "{rec}");
}
