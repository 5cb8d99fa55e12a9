//! Toolchains found from the run's `PATH`, not from the caller's variables: a version manager's
//! shims on `PATH` keep the manager's root readable in the sandbox (and named to it), so a caller
//! without `PYENV_ROOT` (a daemon, cron, an MCP client) runs what the user's shell runs.

use crate::common;

use common::{World, BIN};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_pyenv_shim_on_path_runs_without_pyenv_root_in_the_callers_environment() {
    let w = World::new();
    // A pyenv-shaped manager under the (hidden) home, not at ~/.pyenv where a guess would look.
    let root = w.path("home/tools/pyenv");
    script(
        &root.join("libexec/pyenv"),
        "#!/bin/sh\n[ \"$1\" = exec ] || exit 3\necho \"pyenv ran $2 with PYENV_ROOT=$PYENV_ROOT\"\n",
    );
    script(
        &root.join("shims/mytool"),
        &format!(
            "#!/bin/sh\nexec \"{}\" exec mytool \"$@\"\n",
            root.join("libexec/pyenv").display()
        ),
    );
    let repo = w.new_repo("shims");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[test]\ncommand = \"mytool\"\n[analysis]\nenabled = false\n",
        )],
        "a tool behind a shim",
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--json"]).current_dir(&repo);
    w.apply_env(&mut cmd);
    let path = format!(
        "{}:{}",
        root.join("shims").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", &path).env_remove("PYENV_ROOT");
    let o = cmd.output().unwrap();
    let out: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    let rec = &out[0];
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(
        rec["tests"]["output_tail"],
        format!("pyenv ran mytool with PYENV_ROOT={}", root.display()),
        "{rec}"
    );
}

#[test]
fn doctor_lists_the_toolchains_runs_bind_read_only() {
    let w = World::new();
    let root = w.path("home/tools/pyenv");
    script(&root.join("libexec/pyenv"), "#!/bin/sh\n");
    std::fs::create_dir_all(root.join("shims")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("doctor").current_dir(w.work());
    w.apply_env(&mut cmd);
    let path = format!(
        "{}:{}",
        root.join("shims").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", &path).env_remove("PYENV_ROOT");
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("secrets_hidden"))
        .unwrap_or_else(|| panic!("{out}"));
    let bound = line.split("bound back read-only: ").nth(1).unwrap_or("");
    assert!(
        bound.split(", ").any(|b| b == root.display().to_string()),
        "{line}"
    );
}

#[test]
fn a_program_the_users_own_config_names_by_absolute_path_is_bound_read_only() {
    let w = World::new();
    // A virtual environment in the (hidden) home: the program and the files beside it.
    let venv = w.path("home/venv");
    std::fs::create_dir_all(venv.join("lib")).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::write(venv.join("lib/msg"), "from the venv\n").unwrap();
    script(
        &venv.join("bin/tool"),
        "#!/bin/sh\ncat \"$(dirname \"$0\")/../lib/msg\" && touch \"$(dirname \"$0\")/written\" 2>/dev/null || echo read-only\n",
    );
    let tool = venv.join("bin/tool").display().to_string();
    let repo = w.new_repo("abs");
    w.commit(
        &repo,
        &[(".sandbox.toml", "[analysis]\nenabled = false\n")],
        "no command of its own",
    );
    w.user_config(&format!("[test]\ncommand = \"{tool}\"\n"));
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(
        rec["tests"]["output_tail"], "from the venv\nread-only",
        "{rec}"
    );
    assert!(!venv.join("bin/written").exists());

    // The same path named by a committed file is not the user's word: nothing is bound.
    w.user_config("");
    w.commit(
        &repo,
        &[(".sandbox.toml", &format!("[test]\ncommand = \"{tool}\"\n"))],
        "the commit names it",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    assert_eq!(o.json()[0]["status"], "error", "{o:?}");
    let error = o.json()[0]["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!(
            "is under {}, which runs do not see",
            w.path("home").display()
        )) && error.contains("programs your own config names by absolute path"),
        "{error}"
    );
}

/// A program the caller's PATH finds but a run does not see is an error that says why: a link
/// under the home into a file of no package, a directory under /tmp that others could write.
#[test]
fn a_program_on_the_callers_path_that_runs_do_not_see_is_explained() {
    let w = World::new();
    let home = w.path("home");
    script(&home.join("notes/tool.sh"), "#!/bin/sh\necho tool\n");
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink("../../notes/tool.sh", home.join(".local/bin/tool")).unwrap();
    let tmp = tempfile::tempdir_in("/tmp").unwrap();
    let shared = tmp.path().canonicalize().unwrap().join("shared");
    script(&shared.join("bin/planted"), "#!/bin/sh\necho planted\n");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let repo = w.new_repo("unseen");
    let path = format!(
        "{}:{}:{}",
        home.join(".local/bin").display(),
        shared.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (program, why) in [
        ("tool", "belongs to no package".to_string()),
        (
            "planted",
            format!("{} is writable by everyone", shared.display()),
        ),
    ] {
        w.commit(
            &repo,
            &[(
                ".sandbox.toml",
                &format!("[test]\ncommand = \"{program}\"\n[analysis]\nenabled = false\n"),
            )],
            program,
        );
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--json"]).current_dir(&repo);
        w.apply_env(&mut cmd);
        cmd.env("PATH", &path);
        let o = cmd.output().unwrap();
        let out: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
        let rec = &out[0];
        assert_eq!(rec["status"], "error", "{rec}");
        let error = rec["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("`{program}`")) && error.contains(&why),
            "{program}: {error}"
        );
    }
}
