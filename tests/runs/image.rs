//! Runs in an image (`[environment] image`): pulled from a real registry (Debian's
//! docker-registry on 127.0.0.1, images the tests make and push with skopeo), the image's files as
//! the run's root with none of the host's, its digest in the record and the result key.

use crate::common;

use common::registry::{busybox_root, tar_of, Registry, TestImage};
use common::World;
use serde_json::Value;
use std::path::Path;

pub(crate) fn worlds() -> Vec<(&'static str, World)> {
    let mut out = vec![("root", World::new())];
    if let Some(w) = World::unprivileged() {
        out.push(("nobody", w));
    }
    out
}

/// The busybox root with a file saying which version of the tag it is.
pub(crate) fn image(version: &str) -> TestImage {
    TestImage {
        layers: vec![
            busybox_root(),
            tar_of(&[("etc/version", format!("{version}\n").as_bytes())]),
        ],
        env: vec!["PATH=/bin".into(), "IMAGE_VAR=from-the-image".into()],
        workdir: Some("/work".into()),
    }
}

/// What the tests check inside: the host's tools are absent, the image's variables and working
/// directory apply, the commit's tree is there, and its root cannot be written.
const INSIDE: &str = "test ! -e /usr/bin/python3 && test ! -e /usr/bin/git && test ! -e /usr/bin/cargo && test \\\"$IMAGE_VAR\\\" = from-the-image && test \\\"$(pwd)\\\" = /work && test -f marker.txt && ! touch /etc/x 2>/dev/null && touch made-here && echo version $(cat /etc/version)";

pub(crate) fn config(image: &str) -> String {
    format!("[environment]\nimage = \"{image}\"\n[test]\ncommand = \"{INSIDE}\"\n[analysis]\nenabled = false\n")
}

pub(crate) fn run(who: &str, w: &World, repo: &Path) -> Value {
    let o = w.sandbox(repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{who}: {o:?}");
    rec
}

#[test]
fn a_commit_runs_in_its_image_pinned_by_the_digest_its_tag_resolves_to() {
    let registry = Registry::start();
    let host = registry.host();
    for (who, w) in worlds() {
        let name = format!("test/{who}/busybox");
        let first = registry.push(&name, "1", &image("one"));
        w.user_config(&format!(
            "[environment]\ninsecure_registries = [\"{host}\"]\n"
        ));
        let repo = w.new_repo("in-image");
        let tagged = format!("{host}/{name}:1");
        w.commit(
            &repo,
            &[(".sandbox.toml", &config(&tagged)), ("marker.txt", "x\n")],
            "runs in an image",
        );
        let rec = run(who, &w, &repo);
        assert_eq!(rec["environment"]["digest"], first, "{who}: {rec}");
        assert_eq!(rec["environment"]["image"], tagged.as_str());
        assert_eq!(rec["environment"]["platform"], "linux/amd64");
        assert_eq!(
            rec["toolchain"]["image"], first,
            "the digest stands for the toolchain"
        );
        assert!(
            rec["tests"]["output_tail"]
                .as_str()
                .unwrap()
                .contains("version one"),
            "{who}: {rec}"
        );
        let isolation = w
            .sandbox(&repo, &["show", "--isolation", "--json"])
            .success()
            .json()["layers"]
            .to_string();
        assert!(
            isolation.contains("the host's root is not mounted"),
            "{who}: {isolation}"
        );
        // Nothing the run wrote reached the commit's checkout or the image's layers.
        let store = w.data().join("images/layers");
        let written: Vec<_> = common::files_under(&store)
            .into_iter()
            .filter(|p| p.ends_with("made-here"))
            .collect();
        assert!(written.is_empty(), "{who}: {written:?}");

        // Unchanged, the commit's result stands.
        let again = run(who, &w, &repo);
        assert_eq!(again["started_at"], rec["started_at"], "{who}: reused");
        // A pull of the unchanged tag is one manifest request, and fetches nothing.
        let pulled = w
            .sandbox(&repo, &["image", "pull", &tagged, "--json"])
            .success()
            .json();
        assert_eq!(
            (
                &pulled["requests"],
                &pulled["blobs_fetched"],
                &pulled["layers_unpacked"]
            ),
            (&1.into(), &0.into(), &0.into()),
            "{who}: {pulled}"
        );

        // The tag pushed anew: the same commit runs again, in the new image.
        let second = registry.push(&name, "1", &image("two"));
        assert_ne!(first, second);
        let moved = run(who, &w, &repo);
        assert_eq!(moved["environment"]["digest"], second, "{who}: {moved}");
        assert!(moved["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("version two"));
        assert_ne!(moved["config_hash"], rec["config_hash"]);

        // Pinned by its digest, a commit keeps its result when the tag moves.
        let pinned = format!("{host}/{name}@{second}");
        w.commit(&repo, &[(".sandbox.toml", &config(&pinned))], "pinned");
        let at_pin = run(who, &w, &repo);
        assert_eq!(at_pin["environment"]["digest"], second);
        registry.push(&name, "1", &image("three"));
        let still = run(who, &w, &repo);
        assert_eq!(
            still["started_at"], at_pin["started_at"],
            "{who}: not run again"
        );
        assert!(still["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("version two"));

        // The store lists what was pulled.
        let list = w
            .sandbox(&repo, &["image", "list", "--json"])
            .success()
            .json();
        let digests: Vec<&str> = list["images"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["digest"].as_str())
            .collect();
        assert!(digests.contains(&second.as_str()), "{who}: {list}");
    }
}

#[test]
fn an_unlisted_registry_is_refused_naming_the_key_and_nothing_connects() {
    let w = World::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let repo = w.new_repo("unlisted");
    w.commit(
        &repo,
        &[(".sandbox.toml", &config(&format!("{host}/x/y:1")))],
        "names a registry nobody allowed",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("cannot get the image") && error.contains("[environment] registries"),
        "{error}"
    );
    assert!(rec["tests"].is_null(), "nothing ran: {rec}");
    let pulled = w.sandbox(&repo, &["image", "pull", &format!("{host}/x/y:1")]);
    assert_eq!(pulled.code, 1, "{pulled:?}");
    assert!(
        pulled.stderr.contains("[environment] registries"),
        "{pulled:?}"
    );

    // Listed, but not as insecure: a loopback address is refused after resolution.
    w.user_config(&format!("[environment]\nregistries = [\"{host}\"]\n"));
    let pulled = w.sandbox(&repo, &["image", "pull", &format!("{host}/x/y:1")]);
    assert_eq!(pulled.code, 1, "{pulled:?}");
    assert!(pulled.stderr.contains("127.0.0.1"), "{pulled:?}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "something connected to the registry the user did not allow"
    );
}

#[test]
fn a_repository_cannot_name_the_registries() {
    let w = World::new();
    let repo = w.new_repo("widens");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            "[environment]\ninsecure_registries = [\"127.0.0.1:1\"]\nimage = \"127.0.0.1:1/x\"\n",
        )],
        "widens the user's policy",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    assert!(
        rec["error"]
            .as_str()
            .unwrap()
            .contains("environment.insecure_registries"),
        "{rec}"
    );
}

#[test]
fn offline_a_tag_runs_on_the_digest_it_resolved_to_last_and_the_record_says_so() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    let pushed = registry.push("test/offline", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n[gc]\nimages = \"1s\"\n"
    ));
    let repo = w.new_repo("offline");
    let tagged = format!("{host}/test/offline:1");
    w.commit(
        &repo,
        &[(".sandbox.toml", &config(&tagged)), ("marker.txt", "1\n")],
        "first",
    );
    run("online", &w, &repo);
    drop(registry);
    w.commit(
        &repo,
        &[("marker.txt", "2\n")],
        "second, with the registry away",
    );
    let rec = run("offline", &w, &repo);
    assert_eq!(rec["environment"]["digest"], pushed, "{rec}");
    assert_eq!(rec["environment"]["offline"], true, "{rec}");
    let shown = w.sandbox(&repo, &["show"]).success().stdout;
    assert!(
        shown.contains(&format!("image:    {tagged}@{pushed}")) && shown.contains("offline"),
        "{shown}"
    );
    let doctor = w.sandbox(&repo, &["doctor", "--json"]).json();
    assert_eq!(doctor["images"]["insecure_registries"][0], host.as_str());
    assert_eq!(doctor["images"]["images"][0]["digest"], pushed.as_str());

    // Unused for longer than `[gc] images`, the image and its layers go.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let gc = w.sandbox(&repo, &["gc", "--json"]).success().json();
    assert_eq!(gc["images"]["count"], 1, "{gc}");
    let list = w
        .sandbox(&repo, &["image", "list", "--json"])
        .success()
        .json();
    assert_eq!(list["images"].as_array().unwrap().len(), 0, "{list}");
    assert!(common::files_under(&w.data().join("images/layers")).is_empty());
    let gone = w.sandbox(&repo, &["image", "rm", &tagged]);
    assert_eq!(gone.code, 2, "{gone:?}");
    assert!(gone.stderr.contains("image list"), "{gone:?}");

    // With the registry away and the image gone, a forced run cannot get it: the commit keeps
    // its result, and the run is only an attempt.
    let o = w.sandbox(&repo, &["run", "--force", "--json"]);
    let kept = o.json()[0].clone();
    assert_eq!(kept["status"], "passed", "{o:?}");
    assert_eq!(kept["started_at"], rec["started_at"], "{o:?}");
}

#[test]
fn hostile_layers_from_a_registry_are_refused_by_member_or_lose_their_device_and_setuid() {
    use common::registry::{raw_tar, Raw};
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("hostile");
    let with = |layer: Vec<u8>| TestImage {
        layers: vec![busybox_root(), layer],
        ..image("x")
    };
    for (name, layer, member) in [
        (
            "shadow",
            raw_tar(&[Raw::Hard("etc/copy", "/etc/shadow")]),
            "etc/copy",
        ),
        (
            "traversal",
            raw_tar(&[Raw::File("../../escaped", b"x", 0o644)]),
            "../../escaped",
        ),
        (
            "absolute",
            raw_tar(&[Raw::File("/tmp/escaped", b"x", 0o644)]),
            "/tmp/escaped",
        ),
        (
            "through-its-link",
            raw_tar(&[
                Raw::Symlink("etc/out", "/tmp"),
                Raw::File("etc/out/escaped", b"x", 0o644),
            ]),
            "etc/out/escaped",
        ),
    ] {
        registry.push(&format!("test/{name}"), "1", &with(layer));
        let o = w.sandbox(&repo, &["image", "pull", &format!("{host}/test/{name}:1")]);
        assert_eq!(o.code, 1, "{name}: {o:?}");
        assert!(o.stderr.contains(member), "{name}: {o:?}");
        assert!(!Path::new("/tmp/escaped").exists());
    }
    // A run that names such an image is an error, not a result.
    w.commit(
        &repo,
        &[(".sandbox.toml", &config(&format!("{host}/test/shadow:1")))],
        "names the image that links to /etc/shadow",
    );
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "error", "{o:?}");
    assert!(rec["error"].as_str().unwrap().contains("etc/copy"), "{rec}");

    // A device node is dropped and a setuid bit cleared; ownership is kept (as root, the
    // image's uid 0 is the first of its reserved host uids).
    registry.push(
        "test/bits",
        "1",
        &with(raw_tar(&[
            Raw::File("bin/su", b"#!/bin/sh\n", 0o4755),
            Raw::Char("etc/mem"),
        ])),
    );
    let command = "test -x /bin/su && test ! -u /bin/su && test ! -e /etc/mem && echo clean";
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &format!(
                "[environment]\nimage = \"{host}/test/bits:1\"\n[test]\ncommand = \"{command}\"\n"
            ),
        )],
        "setuid and a device",
    );
    let rec = run("root", &w, &repo);
    assert!(rec["tests"]["output_tail"]
        .as_str()
        .unwrap()
        .contains("clean"));
    use std::os::unix::fs::MetadataExt;
    let busybox = common::files_under(&w.data().join("images/layers"))
        .into_iter()
        .find(|p| p.ends_with("bin/busybox"))
        .unwrap();
    assert_eq!(std::fs::metadata(busybox).unwrap().uid(), 2_000_000_000);
    // Those uids cannot reach the store by path: it is the supervisor's alone.
    use std::os::unix::fs::PermissionsExt;
    let store = std::fs::metadata(w.data().join("images")).unwrap();
    assert_eq!(store.permissions().mode() & 0o777, 0o700);
}

/// click's own suite, from its source distribution, in a Debian root with python3 and pytest
/// (mmdebstrap's, once per machine): the image's interpreter, none of the host's toolchain.
#[test]
fn a_real_project_runs_its_suite_in_a_debian_image_without_the_hosts_toolchain() {
    use common::registry::cached;
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    let root = std::fs::read(cached("debian-python.tar")).unwrap();
    let digest = registry.push(
        "test/debian-python",
        "bookworm",
        &TestImage {
            layers: vec![root],
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
            workdir: None,
        },
    );
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("click");
    // The source distribution, as committed.
    let sdist = std::fs::read(cached("click-8.1.7.tar.gz")).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&sdist[..]));
    let mut files: Vec<(String, String)> = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut e = entry.unwrap();
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = e.path().unwrap().to_string_lossy().into_owned();
        let rel = path.split_once('/').unwrap().1.to_string();
        let mut body = String::new();
        if std::io::Read::read_to_string(&mut e, &mut body).is_ok() {
            files.push((rel, body));
        }
    }
    assert!(files.iter().any(|(p, _)| p == "tests/test_basic.py"));
    let command = "test ! -e /usr/bin/git && test ! -e /usr/bin/cargo && test \\\"$(command -v python3)\\\" = /usr/bin/python3 && test \\\"$PWD\\\" = /src && PYTHONPATH=src python3 -m pytest tests -q -p no:cacheprovider";
    files.push((
        ".sandbox.toml".into(),
        format!("[environment]\nimage = \"{host}/test/debian-python:bookworm\"\n[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n"),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    w.git(&repo, &["rm", "-q", "tests/test_example.py"]);
    w.commit(&repo, &refs, "click 8.1.7 from its source distribution");
    let o = w.sandbox(&repo, &["run", "--json"]);
    let rec = o.json()[0].clone();
    assert_eq!(rec["status"], "passed", "{o:?}");
    assert_eq!(rec["environment"]["digest"], digest.as_str());
    assert_eq!(rec["tests"]["framework"], "pytest", "{rec}");
    let passed = rec["tests"]["passed"].as_u64().unwrap_or(0);
    assert!(passed > 500, "click's suite ran in the image: {rec}");
    assert!(
        rec["toolchain"].get("python3").is_none(),
        "the host's python is no part of the key: {rec}"
    );
}

/// The setup step and `exec` in an image: the setup's layer is kept and reused as on the host,
/// keyed by the image's digest (the host's root does not take it), and `exec` runs in the image.
#[test]
fn a_setup_step_in_an_image_is_kept_by_its_digest_and_exec_runs_there() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    let digest = registry.push("test/setup", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("setup-in-image");
    let setup = "mkdir -p deps && cat /proc/sys/kernel/random/uuid > deps/stamp && cp package-lock.json deps/lock";
    let toml = |image: &str| {
        format!("{image}[test]\nsetup = \"{setup}\"\ncommand = \"cat deps/lock deps/stamp /etc/version\"\n[analysis]\nenabled = false\n")
    };
    let in_image = format!("[environment]\nimage = \"{host}/test/setup:1\"\n");
    w.commit(
        &repo,
        &[
            (".sandbox.toml", &toml(&in_image)),
            ("package-lock.json", "lock-1\n"),
        ],
        "a setup step in an image",
    );
    let first = run("first", &w, &repo);
    assert_eq!(first["tests"]["setup"]["how"], "built", "{first}");
    assert_eq!(first["environment"]["digest"], digest.as_str());
    let out = first["tests"]["output_tail"].as_str().unwrap().to_string();
    assert!(
        out.starts_with("lock-1\n") && out.trim_end().ends_with("\none"),
        "{out:?}"
    );
    w.commit(&repo, &[("src.txt", "x")], "no new dependencies");
    let second = run("second", &w, &repo);
    assert_eq!(second["tests"]["setup"]["how"], "reused", "{second}");
    assert_eq!(second["tests"]["output_tail"].as_str().unwrap(), out);
    let o = w.sandbox(
        &repo,
        &["exec", "HEAD", "--", "cat", "/etc/version", "deps/lock"],
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "one\nlock-1\n"), "{o:?}");
    // On the host's root the same lockfile is set up anew: the image's layer is not its.
    w.commit(
        &repo,
        &[(".sandbox.toml", &toml("").replace(" /etc/version", ""))],
        "on the host",
    );
    let host_run = run("host", &w, &repo);
    assert_eq!(host_run["tests"]["setup"]["how"], "built", "{host_run}");
    assert_ne!(
        host_run["tests"]["setup"]["key"],
        second["tests"]["setup"]["key"]
    );
    assert!(host_run["environment"].is_null());
}

/// A registry the user allows over plain HTTP that sends the client elsewhere on 127.0.0.1, over
/// HTTPS: to a token realm, or by a redirect. Neither is followed to an address the user did
/// not list: nothing connects there, and the pull says why.
#[test]
fn a_registry_cannot_send_the_client_to_a_loopback_address_by_its_realm_or_a_redirect() {
    use std::io::{BufRead, BufReader, Write};
    let w = World::new();
    let victim = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    victim.set_nonblocking(true).unwrap();
    let target = format!("127.0.0.1:{}", victim.local_addr().unwrap().port());
    for (case, answer) in [
        (
            "realm",
            format!("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"https://{target}/token\",service=\"registry\"\r\nContent-Length: 0\r\n\r\n"),
        ),
        (
            "redirect",
            format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: https://{target}/v2/x/manifests/1\r\nContent-Length: 0\r\n\r\n"),
        ),
    ] {
        // The hostile registry: every request gets the same answer.
        let hostile = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = format!("127.0.0.1:{}", hostile.local_addr().unwrap().port());
        std::thread::spawn(move || {
            for conn in hostile.incoming().flatten() {
                let mut reader = BufReader::new(&conn);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = (&conn).write_all(answer.as_bytes());
            }
        });
        w.user_config(&format!("[environment]\ninsecure_registries = [\"{host}\"]\n"));
        let o = w.sandbox(&w.work(), &["image", "pull", &format!("{host}/x:1")]);
        assert_eq!(o.code, 1, "{case}: {o:?}");
        assert!(
            o.stderr.contains(&format!("{} resolves to 127.0.0.1 (loopback", "127.0.0.1"))
                && o.stderr.contains("insecure_registries"),
            "{case}: {o:?}"
        );
        assert!(
            matches!(victim.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{case}: the client connected to {target}"
        );
    }
}

/// A branch's build cache made in an image is read by its next run in the image, never by a
/// run on the host's root (whose toolchain did not make it).
#[test]
fn a_build_cache_made_in_an_image_is_that_images_own() {
    let w = World::new();
    let registry = Registry::start();
    let host = registry.host();
    registry.push("test/cache", "1", &image("one"));
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n"
    ));
    let repo = w.new_repo("cache-in-image");
    let command = "cat out/seen 2>/dev/null; mkdir -p out && echo cached > out/seen && echo done";
    let toml = |env: &str| {
        format!("{env}[test]\ncommand = \"{command}\"\n[cache]\ndirs = [\"out\"]\n[analysis]\nenabled = false\n")
    };
    let tail = |rec: &Value| rec["tests"]["output_tail"].as_str().unwrap().to_string();
    let in_image = format!("[environment]\nimage = \"{host}/test/cache:1\"\n");
    w.commit(&repo, &[(".sandbox.toml", &toml(&in_image))], "in an image");
    let first = run("first", &w, &repo);
    assert!(!tail(&first).contains("cached"), "{first}");
    w.commit(&repo, &[("src.txt", "x")], "again in the image");
    let second = run("second", &w, &repo);
    assert!(
        tail(&second).contains("cached"),
        "the image's cache is read: {second}"
    );
    w.commit(&repo, &[(".sandbox.toml", &toml(""))], "on the host");
    let on_host = run("host", &w, &repo);
    assert!(
        !tail(&on_host).contains("cached"),
        "the host's run does not read the image's cache: {on_host}"
    );
}
