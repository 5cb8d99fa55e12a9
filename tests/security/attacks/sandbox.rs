//! The attack table of ISOLATION.md, row by row, against the real binary: each test commits a
//! hostile test command and checks the expected outcome in the run record and on the host.
//! Safe for the machine: fork counts are bounded, network attacks only target a listener this
//! test opens on 127.0.0.1, and every planted file lives in a temp dir.

use crate::common::World;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Commit `toml` as the repository's config and run HEAD; returns the record, with the full
/// layer table of its sandbox profile (`show --isolation`) and the path of its log added.
fn attack(w: &World, repo: &Path, toml: &str) -> Value {
    w.commit(repo, &[(".sandbox.toml", toml)], "attack");
    let o = w.sandbox(repo, &["run", "--json"]);
    assert!(o.code == 0 || o.code == 1, "{o:?}");
    let mut rec = o.json()[0].clone();
    let iso = w.sandbox(repo, &["show", "--isolation", "--json"]);
    if iso.code == 0 {
        rec["tests"]["isolation"]["layers"] = iso.json()["layers"].clone();
    }
    let commit = rec["commit"].as_str().unwrap().to_string();
    for dir in std::fs::read_dir(w.data().join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let log = dir.path().join(format!("{commit}.log"));
        if log.exists() {
            rec["tests"]["log"] = log.display().to_string().into();
        }
    }
    rec
}

fn config(command: &str, extra: &str) -> String {
    let command = toml_quote(command);
    format!("[test]\ncommand = {command}\ntimeout = \"20s\"\n[analysis]\nenabled = false\n{extra}")
}

fn toml_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn layer<'a>(rec: &'a Value, name: &str) -> &'a Value {
    rec["tests"]["isolation"]["layers"]
        .as_array()
        .unwrap_or_else(|| panic!("no isolation report: {rec}"))
        .iter()
        .find(|l| l["layer"] == name)
        .unwrap_or_else(|| panic!("no layer {name}: {rec}"))
}

fn output(rec: &Value) -> String {
    match rec["tests"]["log"].as_str() {
        Some(log) => std::fs::read_to_string(log).unwrap_or_default(),
        None => rec["tests"]["output_tail"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// Pids of live (non-zombie) processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
        {
            found.push(name);
        }
    }
    found
}

fn wait_until_gone(marker: &str, within: Duration) -> Vec<String> {
    let until = Instant::now() + within;
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fork_bomb_hits_the_process_cap_and_leaves_nothing() {
    let w = World::new();
    let repo = w.new_repo("bomb");
    // Bounded: at most 2,000 sleepers are attempted; the cap is 40.
    let cmd = "i=0; while [ $i -lt 2000 ]; do sleep 71.125 & i=$((i+1)); done; wait";
    let started = Instant::now();
    let rec = attack(&w, &repo, &config(cmd, "[limits]\nprocesses = 40\n"));
    assert!(
        started.elapsed() < Duration::from_secs(21),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rec["status"], "killed", "{rec}");
    assert_eq!(rec["tests"]["killed_by"], "processes", "{rec}");
    assert_eq!(layer(&rec, "cgroup")["status"], "enforced");
    assert_eq!(layer(&rec, "unprivileged_uid")["status"], "enforced");
    assert_eq!(
        wait_until_gone("71.125", Duration::from_secs(1)),
        Vec::<String>::new()
    );
}

#[test]
fn using_4_gib_is_stopped_by_the_memory_limit_which_the_record_names() {
    let w = World::new();
    let repo = w.new_repo("alloc");
    let rec = attack(
        &w,
        &repo,
        &config(
            "python3 -c 'b = b\"x\" * (4 << 30); print(len(b))'",
            "[limits]\nmemory_mb = 256\n",
        ),
    );
    assert_eq!(rec["status"], "killed", "{rec}");
    assert_eq!(rec["tests"]["killed_by"], "memory", "{rec}");
    // Memory in use is limited by the cgroup, not the address space.
    assert_eq!(rec["tests"]["limits"]["rlimit_as_mb"], Value::Null, "{rec}");
    assert_eq!(rec["tests"]["limits"]["cgroup_memory_mb"], 256, "{rec}");
    assert_eq!(rec["tests"]["limits"]["memory_by"], "cgroup", "{rec}");
}

#[test]
fn a_busy_loop_is_stopped_at_the_cpu_limit() {
    let w = World::new();
    let repo = w.new_repo("busy");
    let started = Instant::now();
    let rec = attack(
        &w,
        &repo,
        &config("while :; do :; done", "[limits]\ncpu_seconds = 1\n"),
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rec["status"], "timeout", "{rec}");
    assert_eq!(rec["tests"]["killed_by"], "cpu", "{rec}");
}

/// `[limits] cpu_cores`: two busy loops for 3 s get half a core between them (the run cgroup's
/// quota), in the tests and in a check alike, and the record says the quota the kernel held.
#[test]
fn two_busy_loops_get_the_half_core_cpu_cores_gives_them() {
    let w = World::new();
    let repo = w.new_repo("share");
    let busy = "timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done' & wait; echo done";
    let rec = attack(
        &w,
        &repo,
        &format!(
            "{}[checks.busy]\ncommand = {}\n",
            config(busy, "[limits]\ncpu_cores = 0.5\n"),
            toml_quote(busy)
        ),
    );
    if layer(&rec, "cgroup")["status"] != "enforced" {
        eprintln!("no cgroup here: the quota is not tested: {rec}");
        return;
    }
    assert_eq!(rec["status"], "passed", "{rec}");
    for run in [&rec["tests"], &rec["checks"]["busy"]] {
        assert_eq!(run["limits"]["cpu_cores"], 0.5, "{rec}");
        let cpu = run["resources"]["cpu_ms"].as_u64().unwrap();
        // Unbounded, the two loops take 6 s of CPU on two cores; at half a core, 1.5 s.
        assert!((500..=1700).contains(&cpu), "{cpu} ms of CPU: {rec}");
    }
    // Without it, no quota is set and the record says none.
    let rec = attack(&w, &repo, &config("echo unbounded", ""));
    assert_eq!(rec["tests"]["limits"]["cpu_cores"], Value::Null, "{rec}");
    let o = w.sandbox(&repo, &["show", "HEAD~1"]);
    assert!(
        o.stdout
            .contains("cores:    0.5 (the run cgroup's CPU quota)"),
        "{o:?}"
    );
}

#[test]
fn a_setsid_grandchild_is_gone_after_the_run_and_after_a_timeout() {
    let w = World::new();
    let repo = w.new_repo("setsid");
    let rec = attack(
        &w,
        &repo,
        &config("setsid sleep 72.125 & sleep 0.2; echo left", ""),
    );
    assert_eq!(rec["status"], "passed", "{rec}");
    assert_eq!(
        wait_until_gone("72.125", Duration::from_secs(1)),
        Vec::<String>::new()
    );
    let rec = attack(
        &w,
        &repo,
        "[test]\ncommand = \"setsid sleep 73.125 & sleep 30\"\ntimeout = \"1s\"\n[analysis]\nenabled = false\n",
    );
    assert_eq!(rec["tests"]["killed_by"], "timeout", "{rec}");
    assert_eq!(
        wait_until_gone("73.125", Duration::from_secs(1)),
        Vec::<String>::new()
    );
    assert_eq!(layer(&rec, "pid_namespace")["status"], "enforced");
}

fn connect_script(port: u16) -> String {
    format!(
        "python3 -c 'import socket\ntry:\n    socket.create_connection((\"127.0.0.1\", {port}), timeout=3); print(\"CONNECTED\")\nexcept OSError as e:\n    print(\"BLOCKED\", e)'"
    )
}

#[test]
fn the_host_loopback_is_out_of_reach_and_network_needs_the_users_policy() {
    let w = World::new();
    let repo = w.new_repo("net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The repository asks for the network; the user's policy (default) says no.
    let rec = attack(
        &w,
        &repo,
        &config(&connect_script(port), "[limits]\nnetwork = true\n"),
    );
    let out = output(&rec);
    assert!(
        out.contains("BLOCKED") && !out.contains("CONNECTED"),
        "{out}"
    );
    assert!(listener.accept().is_err(), "the listener saw a connection");
    assert_eq!(layer(&rec, "network")["status"], "enforced", "{rec}");
    // With the user's policy allowing the network, the run reaches it through the proxy: the
    // host's loopback stays out of reach (see `network.rs`).
    std::fs::create_dir_all(w.path("config/git-sandbox")).unwrap();
    let user = w.path("config/git-sandbox/config.toml");
    std::fs::write(&user, "[limits]\nnetwork = true\n").unwrap();
    let rec = attack(
        &w,
        &repo,
        &config(&connect_script(port), "[limits]\nnetwork = true\n"),
    );
    assert_eq!(layer(&rec, "network")["status"], "enforced", "{rec}");
    assert!(output(&rec).contains("BLOCKED"), "{rec}");
    assert_eq!(rec["tests"]["network"]["policy"], "proxy", "{rec}");
    // Only `network = "host"` in the user's config shares the host's network, loopback and all.
    std::fs::write(&user, "[limits]\nnetwork = \"host\"\n").unwrap();
    let rec = attack(
        &w,
        &repo,
        &config(&connect_script(port), "[limits]\nnetwork = true\n"),
    );
    assert_eq!(layer(&rec, "network")["status"], "off", "{rec}");
    assert!(output(&rec).contains("CONNECTED"), "{rec}");
    assert_eq!(rec["tests"]["network"]["policy"], "host", "{rec}");
}

#[test]
fn writes_outside_the_run_directory_never_reach_the_host() {
    let w = World::new();
    let repo = w.new_repo("writes");
    let tag = format!("pwned-{}", std::process::id());
    let home = w.path("home");
    let targets: Vec<PathBuf> = vec![
        home.join(&tag),
        PathBuf::from("/root").join(&tag),
        PathBuf::from("/etc").join(&tag),
        PathBuf::from("/tmp").join(&tag),
        PathBuf::from("/var/tmp").join(&tag),
        PathBuf::from("/dev/shm").join(&tag),
    ];
    let mut cmd = String::new();
    for t in &targets {
        cmd.push_str(&format!("echo x > {} 2>/dev/null; ", t.display()));
    }
    cmd.push_str("echo inside > inside.txt && cat inside.txt");
    let rec = attack(&w, &repo, &config(&cmd, ""));
    assert_eq!(rec["status"], "passed", "{rec}");
    assert!(output(&rec).contains("inside"), "{rec}");
    for t in &targets {
        assert!(!t.exists(), "{} appeared on the host", t.display());
    }
    for name in ["read_only_root", "private_tmp", "landlock"] {
        assert_eq!(layer(&rec, name)["status"], "enforced", "{name}: {rec}");
    }
}

#[test]
fn planted_secrets_and_tokens_never_reach_the_output() {
    // A home and config dir outside /tmp, so hiding them is what protects them.
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = base.path().join("home");
    let cfg = base.path().join("config");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(cfg.join("git-sandbox")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PLANTED-SSH-KEY-4242\n").unwrap();
    std::fs::write(
        home.join(".netrc"),
        "machine x password PLANTED-NETRC-4242\n",
    )
    .unwrap();
    std::fs::write(
        cfg.join("git-sandbox/config.toml"),
        "# github token: PLANTED-CONFIG-TOKEN-4242\n",
    )
    .unwrap();
    let mut w = World::new();
    w.extra_env
        .push(("HOME".into(), home.display().to_string()));
    w.extra_env
        .push(("XDG_CONFIG_HOME".into(), cfg.display().to_string()));
    w.extra_env
        .push(("GITHUB_TOKEN".into(), "ghp_PLANTED_ENV_TOKEN_4242".into()));
    std::fs::write(home.join(".gitconfig"), "").unwrap();
    let repo = w.new_repo("secrets");
    let cmd = format!(
        "env; cat {h}/.ssh/id_ed25519 {h}/.netrc {c}/git-sandbox/config.toml; ls -la {h} {h}/.ssh; grep -rs PLANT {h} {c}; echo done",
        h = home.display(),
        c = cfg.display()
    );
    let rec = attack(&w, &repo, &config(&cmd, ""));
    let out = output(&rec);
    assert!(out.contains("done"), "{out}");
    let note = serde_json::to_string(&w.note(&repo, "HEAD").unwrap()).unwrap();
    // The secrets' own text (a bare "4242" also turns up in hex ids now and then).
    for text in [&out, &note] {
        for secret in [
            "SSH-KEY-4242",
            "NETRC-4242",
            "CONFIG-TOKEN-4242",
            "ENV_TOKEN_4242",
        ] {
            assert!(!text.contains(secret), "a secret leaked: {text}");
        }
    }
    assert_eq!(layer(&rec, "secrets_hidden")["status"], "enforced", "{rec}");
    assert_eq!(layer(&rec, "environment")["status"], "enforced");
}

#[test]
fn endless_output_is_capped_fast() {
    let w = World::new();
    let repo = w.new_repo("yes");
    let started = Instant::now();
    let rec = attack(
        &w,
        &repo,
        &config("yes", "[limits]\noutput_bytes = 100000\n"),
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rec["tests"]["killed_by"], "output", "{rec}");
    assert_eq!(rec["tests"]["output_truncated"], true);
}

#[test]
fn a_file_beyond_the_size_limit_is_cut_at_the_limit() {
    let w = World::new();
    let repo = w.new_repo("fsize");
    let rec = attack(
        &w,
        &repo,
        &config(
            "head -c 67108864 /dev/zero > big; echo size=$(stat -c %s big)",
            "[limits]\nfile_size_mb = 16\n",
        ),
    );
    let out = output(&rec);
    let size: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("size="))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(size <= 16 << 20, "{size}");
}

#[test]
fn opening_5000_files_hits_emfile_near_the_limit() {
    let w = World::new();
    let repo = w.new_repo("nofile");
    let script = "python3 -c 'import errno\nfs = []\ntry:\n    for i in range(5000): fs.append(open(\"/dev/null\"))\nexcept OSError as e:\n    print(\"opened\", len(fs), errno.errorcode[e.errno])'";
    let rec = attack(&w, &repo, &config(script, "[limits]\nopen_files = 200\n"));
    let out = output(&rec);
    let line = out
        .lines()
        .find(|l| l.starts_with("opened"))
        .unwrap_or_else(|| panic!("{out}"));
    let n: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        line.ends_with("EMFILE") && (150..=200).contains(&n),
        "{line}"
    );
}

#[test]
fn a_sibling_host_process_cannot_be_signalled() {
    let w = World::new();
    let repo = w.new_repo("signal");
    let mut sibling = std::process::Command::new("sleep")
        .arg("74.125")
        .spawn()
        .unwrap();
    let cmd = format!(
        "kill -9 {p}; kill -TERM {p}; kill -9 -1; echo tried",
        p = sibling.id()
    );
    let rec = attack(&w, &repo, &config(&cmd, ""));
    assert!(rec["tests"].is_object(), "{rec}");
    assert!(
        sibling.try_wait().unwrap().is_none(),
        "the sibling was killed"
    );
    sibling.kill().unwrap();
    let _ = sibling.wait();
}

#[test]
fn killing_the_supervisor_takes_the_sandboxed_tree_with_it() {
    let w = World::new();
    let repo = w.new_repo("supervisor");
    w.commit(
        &repo,
        &[(
            ".sandbox.toml",
            &config("setsid sleep 75.125 & sleep 76.125", ""),
        )],
        "long run",
    );
    let mut cmd = std::process::Command::new(crate::common::BIN);
    cmd.args(["run"]).current_dir(&repo);
    w.apply_env(&mut cmd);
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(15);
    while processes_with("76.125").is_empty() || processes_with("75.125").is_empty() {
        assert!(Instant::now() < until, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    assert_eq!(
        wait_until_gone("75.125", Duration::from_secs(1)),
        Vec::<String>::new()
    );
    assert_eq!(
        wait_until_gone("76.125", Duration::from_millis(100)),
        Vec::<String>::new()
    );
}

#[test]
fn nested_namespaces_are_denied() {
    let w = World::new();
    let repo = w.new_repo("nested");
    let rec = attack(&w, &repo, &config("unshare -Ur true; echo rc=$?", ""));
    let out = output(&rec);
    assert!(out.contains("rc=") && !out.contains("rc=0"), "{out}");
    assert_eq!(layer(&rec, "seccomp")["status"], "enforced");
}

#[test]
fn an_unavailable_layer_is_reported_as_degraded_never_silently_passed() {
    let w = World::new();
    let repo = w.new_repo("degraded");
    // Make this machine's cached probe say Landlock is missing, as on an older kernel.
    let doctor = w.sandbox(&w.work(), &["doctor", "--json"]);
    let mut probe = doctor.json();
    assert_eq!(probe["isolation"]["degraded"], false, "{doctor:?}");
    for l in probe["isolation"]["layers"].as_array_mut().unwrap() {
        if l["layer"] == "landlock" {
            l["status"] = "unavailable".into();
            l["detail"] = "not enforced: the kernel has no Landlock".into();
        }
    }
    std::fs::write(w.data().join("probe.json"), probe.to_string()).unwrap();
    let rec = attack(&w, &repo, &config("true", ""));
    assert_eq!(rec["status"], "passed");
    assert_eq!(rec["tests"]["isolation"]["degraded"], true, "{rec}");
    let l = layer(&rec, "landlock");
    assert_eq!(l["status"], "unavailable");
    assert!(
        l["detail"]
            .as_str()
            .unwrap()
            .contains("kernel has no Landlock"),
        "{l}"
    );
    let human = w.sandbox(&repo, &["show"]);
    assert!(
        human.stdout.contains("degraded") && human.stdout.contains("landlock"),
        "{human:?}"
    );
}

#[test]
fn doctor_prints_every_layer_and_what_a_missing_one_needs() {
    let w = World::new();
    let o = w.sandbox(&w.work(), &["doctor"]);
    assert_eq!(o.code, 0, "{o:?}");
    for name in [
        "pid_namespace",
        "landlock",
        "seccomp",
        "cgroup",
        "rlimits",
        "secrets_hidden",
        "disk_limit",
    ] {
        assert!(o.stdout.contains(name), "{name}: {o:?}");
    }
    // And which backing enforces each limit, with what the kernel held.
    for needle in [
        "limits, and what enforces each here",
        "memory_mb     memory in use, by the run's cgroup (4096 MiB; its tmpfs writes count too); no RLIMIT_AS",
        "disk_mb       an overlay over the checkout on a tmpfs of 4096 MiB",
    ] {
        assert!(o.stdout.contains(needle), "{needle}: {o:?}");
    }
    let j = w.sandbox(&w.work(), &["doctor", "--json"]).json();
    assert!(j["euid"].is_u64() && j["kernel"].is_string(), "{j}");
    assert_eq!(j["limits"]["rlimit_nofile"], 1024, "{j}");
    assert!(w.data().join("probe.json").exists());
}
