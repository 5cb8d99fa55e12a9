//! A Dockerfile's `RUN` with the network (issue 57): `apt-get install` in a Debian image from a
//! package directory the test builds (`dpkg-deb`) and serves on 127.0.0.1, reached only through
//! the proxy's setup policy; what such a step downloads is kept by the build caches' rule
//! (written by its own branch, other branches read production's). Against a real registry, as
//! `tests/runs/image.rs`.

use crate::common;

use common::http::Files;
use common::registry::{cached, Registry, TestImage};
use common::World;
use serde_json::Value;
use sha2::Digest;
use std::collections::BTreeMap;

const DEB: &str = "gs-hello_1.0_all.deb";

/// A flat Debian package directory with one package, `gs-hello`, whose `/usr/bin/gs-hello`
/// prints a line: its `.deb` (made by `dpkg-deb`), `Packages` and `Release`.
fn package_directory(w: &World) -> BTreeMap<String, Vec<u8>> {
    let root = w.path("deb-root");
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    let control = "Package: gs-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: git-sandbox tests <tests@example.invalid>\nDescription: a line from a package\n";
    std::fs::write(root.join("DEBIAN/control"), control).unwrap();
    let bin = root.join("usr/bin/gs-hello");
    std::fs::write(&bin, "#!/bin/sh\necho hello from a package\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let deb = w.path(DEB);
    let o = std::process::Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "--build"])
        .arg(&root)
        .arg(&deb)
        .output()
        .unwrap_or_else(|e| common::tools::missing(&format!("dpkg-deb (Debian's dpkg): {e}")));
    assert!(o.status.success(), "{o:?}");
    let deb = std::fs::read(&deb).unwrap();
    let sha = |b: &[u8]| format!("{:x}", sha2::Sha256::digest(b));
    let packages = format!(
        "{control}Filename: ./{DEB}\nSize: {}\nSHA256: {}\n\n",
        deb.len(),
        sha(&deb)
    );
    let release = format!(
        "Origin: tests\nLabel: tests\nSuite: local\nCodename: local\nDate: Sat, 05 Dec 2026 00:00:00 UTC\nArchitectures: all amd64 arm64\nSHA256:\n {} {} Packages\n",
        sha(packages.as_bytes()),
        packages.len()
    );
    BTreeMap::from([
        (format!("/{DEB}"), deb),
        ("/Packages".to_string(), packages.into_bytes()),
        ("/Release".to_string(), release.into_bytes()),
    ])
}

/// The Debian root with python3 and apt (`./test` makes it), pushed as `test/debian:bookworm`.
fn debian(registry: &Registry) {
    let root = std::fs::read(cached("debian-python.tar")).unwrap();
    registry.push(
        "test/debian",
        "bookworm",
        &TestImage {
            layers: vec![root],
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
            workdir: None,
        },
    );
}

/// The Dockerfile: the package directory as apt's only source, then the package; `extra` after.
fn dockerfile(host: &str, port: u16, extra: &str) -> String {
    format!(
        "FROM {host}/test/debian:bookworm\n\
         RUN rm -f /etc/apt/sources.list.d/* \\\n \
         && echo 'deb [trusted=yes] http://debs.test:{port}/ ./' > /etc/apt/sources.list \\\n \
         && apt-get update -q && apt-get install -y -q gs-hello{extra}\n"
    )
}

/// A world with the Debian image on a registry, the package directory served, and a repository
/// whose Dockerfile installs the package and whose tests run `command`.
struct Setup {
    w: World,
    _registry: Registry,
    host: String,
    files: Files,
    repo: std::path::PathBuf,
}

impl Setup {
    fn new(name: &str, command: &str) -> Setup {
        let w = World::new();
        let registry = Registry::start();
        let host = registry.host();
        debian(&registry);
        let files = Files::serve(package_directory(&w));
        let repo = w.new_repo(name);
        let toml = format!("[environment]\ndockerfile = \"Dockerfile\"\n[test]\ncommand = \"{command}\"\n[analysis]\nenabled = false\n");
        w.commit(
            &repo,
            &[
                ("Dockerfile", &dockerfile(&host, files.port, "")),
                (".sandbox.toml", &toml),
            ],
            "a Debian package from a local directory",
        );
        Setup {
            w,
            _registry: registry,
            host,
            files,
            repo,
        }
    }
}

fn user_config(w: &World, host: &str, network: &str) {
    w.user_config(&format!(
        "[environment]\ninsecure_registries = [\"{host}\"]\n{network}"
    ));
}

fn run_json(w: &World, repo: &std::path::Path) -> Value {
    w.sandbox(repo, &["run", "--json"]).json()[0].clone()
}

fn passed(rec: &Value) -> &Value {
    assert_eq!(rec["status"], "passed", "{rec}");
    assert!(
        rec["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("hello from a package"),
        "{rec}"
    );
    &rec["environment"]["digest"]
}

/// The package is fetched only through the proxy, to the host the user's setup policy allows;
/// without the user's consent the step has no network, and a host the policy leaves out is
/// named. Built once: later runs of production fetch nothing.
#[test]
fn a_run_step_installs_a_package_through_the_proxy_and_production_keeps_it() {
    let Setup {
        w,
        host,
        files,
        repo,
        _registry,
    } = Setup::new("apt", "gs-hello");
    let port = files.port;
    // No consent: the step has no network, and the error says what would give it one.
    user_config(&w, &host, "");
    let rec = run_json(&w, &repo);
    assert_eq!(rec["status"], "error", "{rec}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains("line 2: RUN") && error.contains("setup_network = true"),
        "{error}"
    );
    assert!(files.asked().is_empty(), "{:?}", files.asked());
    // Consent, but the policy names other hosts: the proxy refuses this one, and says so.
    let resolve = "resolve = { \"debs.test\" = \"127.0.0.1\" }\n";
    user_config(
        &w,
        &host,
        &format!(
            "[limits]\nsetup_network = true\n[network]\nsetup_allow = [\"pypi.org\"]\n{resolve}"
        ),
    );
    let rec = w.sandbox(&repo, &["run", "--force", "--json"]).json()[0].clone();
    assert_eq!(rec["status"], "error", "{rec}");
    let error = rec["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("the proxy refused debs.test:{port}"))
            && error.contains("setup_allow"),
        "{error}"
    );
    assert!(files.asked().is_empty(), "{:?}", files.asked());
    // Allowed: apt-get reaches the directory through the proxy and installs the package.
    user_config(
        &w,
        &host,
        &format!(
            "[limits]\nsetup_network = true\n[network]\nsetup_allow = [\"debs.test:{port}\"]\n{resolve}"
        ),
    );
    let rec = w.sandbox(&repo, &["run", "--force", "--json"]).json()[0].clone();
    let digest = passed(&rec).clone();
    let asked = files.asked();
    assert!(
        asked.contains(&"/Packages".to_string()) && asked.iter().any(|p| p.ends_with(DEB)),
        "{asked:?}"
    );
    assert_eq!(
        rec["environment"]["layers"].as_array().unwrap().len(),
        1,
        "{rec}"
    );
    // Kept: a later commit of production builds nothing and fetches nothing.
    w.commit(&repo, &[("notes.txt", "x\n")], "unrelated");
    let again = run_json(&w, &repo);
    assert_eq!(passed(&again), &digest);
    assert_eq!(files.asked(), asked, "the rebuild fetched nothing");
}

/// The build caches' rule for steps with the network: an experiment reads production's layer;
/// a step it changes is built and kept for it alone; production never reads the experiment's
/// layer, even for the same step, and builds its own.
#[test]
fn a_run_step_with_the_network_is_kept_per_branch_and_never_flows_to_production() {
    let Setup {
        w,
        host,
        files,
        repo,
        _registry,
    } = Setup::new(
        "apt-branches",
        "gs-hello; cat /etc/marker 2>/dev/null; true",
    );
    let port = files.port;
    user_config(
        &w,
        &host,
        &format!(
            "[limits]\nsetup_network = true\n[network]\nsetup_allow = [\"debs.test:{port}\"]\n\
             resolve = {{ \"debs.test\" = \"127.0.0.1\" }}\n"
        ),
    );
    let production = passed(&run_json(&w, &repo)).clone();
    let fetched = |files: &Files| files.asked().iter().filter(|p| p.ends_with(DEB)).count();
    assert_eq!(fetched(&files), 1);
    // An experiment reads production's layer: nothing is fetched.
    assert_eq!(w.sandbox(&repo, &["experiment", "start", "net"]).code, 0);
    w.git(&repo, &["switch", "-q", "experiment/net"]);
    w.commit(&repo, &[("notes.txt", "x\n")], "an unrelated change");
    assert_eq!(passed(&run_json(&w, &repo)), &production);
    assert_eq!(fetched(&files), 1, "{:?}", files.asked());
    // It changes the step: built for the experiment (fetched again), and kept for it.
    let changed = dockerfile(&host, port, " && echo experiment > /etc/marker");
    w.commit(&repo, &[("Dockerfile", &changed)], "the experiment's step");
    let rec = run_json(&w, &repo);
    let experiment = passed(&rec).clone();
    assert_ne!(experiment, production);
    assert!(
        rec["tests"]["output_tail"]
            .as_str()
            .unwrap()
            .contains("experiment"),
        "{rec}"
    );
    assert_eq!(fetched(&files), 2);
    w.commit(&repo, &[("notes.txt", "y\n")], "again");
    assert_eq!(passed(&run_json(&w, &repo)), &experiment);
    assert_eq!(fetched(&files), 2, "kept for the experiment");
    // Production takes the same step: it builds its own, never the experiment's layer.
    w.git(&repo, &["switch", "-q", "main"]);
    w.commit(
        &repo,
        &[("Dockerfile", &changed)],
        "production takes the step",
    );
    let rec = run_json(&w, &repo);
    let own = passed(&rec).clone();
    assert_ne!(own, experiment, "production read the experiment's layer");
    assert_eq!(fetched(&files), 3);
    // The result key is the plan's: the same step on both branches is one environment to it.
    assert_eq!(
        rec["toolchain"]["image"],
        w.sandbox(&repo, &["show", "experiment/net", "--json"])
            .json()["toolchain"]["image"]
    );
}
