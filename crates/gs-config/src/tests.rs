//! Unit tests of the configuration: the example parses, layers only tighten, keys and values
//! are checked.

use super::*;

/// The example says every value it writes is the default: it parses as a repository file, and
/// laid over the defaults it changes nothing.
#[test]
fn the_example_config_is_a_valid_repository_config_whose_values_are_the_defaults() {
    let f = parse_repository_file(".sandbox.toml.example", EXAMPLE).unwrap();
    let mut c = Config::default();
    f.apply(&mut c);
    assert_eq!(c, Config::default());
    // And it writes the limits out, not only mentions them.
    assert_eq!(f.limits.memory_mb, Some(Limit::At(4096)));
    assert_eq!(f.limits.disk_mb, Some(Limit::At(4096)));
}

#[test]
fn durations() {
    assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
    assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("12"), Some(Duration::from_secs(12)));
    assert_eq!(
        parse_duration("30d"),
        Some(Duration::from_secs(30 * 86_400))
    );
    assert_eq!(parse_duration("99999999999999999d"), None);
    assert_eq!(parse_duration("0s"), None);
    assert_eq!(parse_duration("5 parsecs"), None);
    assert_eq!(parse_duration("-1s"), None);
    // Spellings kept from before humantime: a bare number, a blank before the unit.
    assert_eq!(parse_duration(" 5 m "), Some(Duration::from_secs(300)));
    assert_eq!(parse_duration("0"), None);
    assert_eq!(parse_duration(""), None);
}

#[test]
fn durations_in_several_units_and_fractions_are_read() {
    // Refused as invalid before humantime.
    assert_eq!(parse_duration("1h 30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
    assert_eq!(
        parse_duration("2 days"),
        Some(Duration::from_secs(2 * 86_400))
    );
    let f = parse_repository_file(".sandbox.toml", "[test]\ntimeout = \"1m 30s\"\n").unwrap();
    assert_eq!(f.test.timeout, Some(Duration::from_secs(90)));
}

#[test]
fn globs() {
    let mut c = Config::default();
    c.watch.branches = vec!["experiment/*".into(), "main".into(), "vendor/**".into()];
    c.watch.branches.push("**/gen_*.py".into());
    let w = c.watched_branches().unwrap();
    assert!(w.is_match("experiment/fast"));
    assert!(!w.is_match("experiment/a/b"));
    assert!(w.is_match("vendor/a/b.py"));
    assert!(w.is_match("a/b/gen_x.py"));
    assert!(w.is_match("gen_x.py"));
    assert!(w.is_match("main"));
    assert!(!w.is_match("mainline"));
}

#[test]
fn a_pathological_branch_pattern_does_not_hang() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut c = Config::default();
        c.watch.branches = vec!["*a*a*a*a*a*a*a*a*b".into()];
        let _ = tx.send(c.watched_branches().unwrap().is_match(&"a".repeat(200)));
    });
    let answer = rx.recv_timeout(Duration::from_secs(5));
    assert_eq!(answer, Ok(false), "matching took over 5 s");
}

#[test]
fn repository_may_only_tighten_limits() {
    let user = parse_file("user", "[limits]\nmemory_mb = 512\nnetwork = false\n").unwrap();
    let repo = parse_file(
        "repo",
        "[limits]\nmemory_mb = 99999\nprocesses = 10\nnetwork = true\n[test]\ntimeout = \"5s\"\n",
    )
    .unwrap();
    let c = Layers {
        user,
        repo,
        ..Layers::default()
    }
    .resolve();
    assert_eq!(c.limits.memory_mb, 512);
    assert_eq!(c.limits.processes, 10);
    assert!(!c.limits.network);
    assert_eq!(c.test.timeout, Duration::from_secs(5));
    for (repo_value, effective) in [(5, 5), (99999, 1024)] {
        let text = format!("[limits]\ncheckout_mb = {repo_value}\n");
        let c = Layers {
            repo: parse_file("repo", &text).unwrap(),
            ..Layers::default()
        }
        .resolve();
        assert_eq!(c.limits.checkout_mb, effective);
    }
}

#[test]
fn a_repository_may_only_tighten_the_gate_and_the_watch_mode() {
    let text = |gate: &str, mode: &str| {
        format!("[hooks]\npre_push = \"{gate}\"\n[watch]\nmode = \"{mode}\"\n")
    };
    // (user's gate and mode, the repository's, the effective ones)
    for (user, repo, effective) in [
        (("block", "every"), ("off", "latest"), ("block", "every")),
        (("block", "every"), ("warn", "every"), ("block", "every")),
        (("warn", "latest"), ("block", "every"), ("block", "every")),
        (("off", "latest"), ("wait", "latest"), ("wait", "latest")),
        (("wait", "every"), ("block", "every"), ("wait", "every")),
    ] {
        let c = Layers {
            user: parse_file("user", &text(user.0, user.1)).unwrap(),
            ..Layers::default()
        }
        .with_repo_text("repo", Some(&text(repo.0, repo.1)))
        .unwrap()
        .resolve();
        let got = (c.hooks.pre_push.as_str(), c.watch.mode.as_str());
        assert_eq!(got, effective, "user {user:?}, repo {repo:?}");
    }
}

#[test]
fn a_repository_may_turn_phases_off_never_on() {
    let resolve = |user: &str, repo: &str| {
        Layers {
            user: parse_file("user", user).unwrap(),
            ..Layers::default()
        }
        .with_repo_text("repo", Some(repo))
        .unwrap()
        .resolve()
        .test
        .phases
    };
    assert!(resolve("", ""));
    assert!(!resolve("", "[test]\nphases = false\n"));
    assert!(!resolve(
        "[test]\nphases = false\n",
        "[test]\nphases = true\n"
    ));
    assert!(resolve("[test]\nphases = true\n", ""));
}

#[test]
fn a_repository_may_lower_retries_and_new_test_runs_never_raise_them() {
    let resolve = |user: &str, repo: &str| {
        let t = Layers {
            user: parse_file("user", user).unwrap(),
            ..Layers::default()
        }
        .with_repo_text("repo", Some(repo))
        .unwrap()
        .resolve()
        .test;
        (t.retries, t.new_test_runs)
    };
    assert_eq!(resolve("", ""), (None, NEW_TEST_RUNS));
    // Unset by the user: a repository cannot switch retries on.
    assert_eq!(resolve("", "[test]\nretries = 5\n"), (None, NEW_TEST_RUNS));
    assert_eq!(
        resolve("[test]\nretries = 2\n", "[test]\nretries = 5\n").0,
        Some(2)
    );
    assert_eq!(
        resolve("[test]\nretries = 2\n", "[test]\nretries = 0\n").0,
        Some(0)
    );
    assert_eq!(resolve("", "[test]\nnew_test_runs = 9\n").1, NEW_TEST_RUNS);
    assert_eq!(resolve("", "[test]\nnew_test_runs = 1\n").1, 1);
    assert_eq!(resolve("[test]\nnew_test_runs = 5\n", "").1, 5);
    // Set, retries are part of the result key; unset, the key is what it was.
    let key = |user: &str| {
        Layers {
            user: parse_file("user", user).unwrap(),
            ..Layers::default()
        }
        .resolve()
        .result_key()
    };
    assert_eq!(key(""), key("[test]\nnew_test_runs = 5\n"));
    assert_ne!(key(""), key("[test]\nretries = 1\n"));
    let err = parse_repository_file("repo", "[test]\nretries = 11\n").unwrap_err();
    assert!(err.to_string().contains("11 runs is out of range"), "{err}");
    assert!(parse_repository_file("repo", "[test]\nnew_test_runs = -1\n").is_err());
}

#[test]
fn a_work_tree_config_that_is_a_symlink_is_refused_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let layers = Layers::default();
    assert!(layers.with_repo_dir(d.path()).is_ok());
    let host = tempfile::tempdir().unwrap();
    let planted = host.path().join("config.toml");
    std::fs::write(&planted, "[test]\ncommand = \"host\"\n").unwrap();
    std::os::unix::fs::symlink(&planted, d.path().join(".sandbox.toml")).unwrap();
    let err = layers.with_repo_dir(d.path()).unwrap_err().to_string();
    assert!(err.contains(".sandbox.toml is a symlink"), "{err}");
    std::fs::remove_file(d.path().join(".sandbox.toml")).unwrap();
    std::fs::write(d.path().join(".sandbox.toml"), "[test]\ncommand = \"x\"\n").unwrap();
    let c = layers.with_repo_dir(d.path()).unwrap().resolve();
    assert_eq!(c.test.command.as_deref(), Some("x"));
}

#[test]
fn the_checkout_ceiling_does_not_change_the_result_key() {
    let mut c = Config::default();
    let key = c.result_key();
    c.limits.checkout_mb = 1;
    assert_eq!(c.result_key(), key);
}

#[test]
fn a_repository_can_loosen_no_limit_nor_the_timeout() {
    let user = parse_file(
        "user",
        "[limits]\nmemory_mb = 512\ncpu_seconds = 20\nopen_files = 256\n[test]\ntimeout = \"30s\"\n",
    )
    .unwrap();
    for zero in [
        "memory_mb = 0",
        "cpu_seconds = 0",
        "open_files = 0",
        "file_size_mb = 0",
    ] {
        let err = Layers::default()
            .with_repo_text("repo", Some(&format!("[limits]\n{zero}\n")))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("repo:2: key `limits."), "{err}");
        assert!(err.contains("0 is not a limit"), "{err}");
    }
    for bad in [
        "memory_mb = -1",
        "processes = 99999999999",
        "output_bytes = \"lots\"",
    ] {
        assert!(
            Layers::default()
                .with_repo_text("repo", Some(&format!("[limits]\n{bad}\n")))
                .is_err(),
            "{bad}"
        );
    }
    let err = Layers::default()
        .with_repo_text("repo", Some("[limits]\nmemory_mb = \"unlimited\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("repo:2: key `limits.memory_mb`: a repository cannot lift a limit"),
        "{err}"
    );
    let layers = Layers {
        user,
        ..Layers::default()
    }
    .with_repo_text(
        "repo",
        Some("[test]\ntimeout = \"1h\"\n[limits]\nmemory_mb = 99999\n"),
    )
    .unwrap();
    let c = layers.resolve();
    assert_eq!(c.test.timeout, Duration::from_secs(30));
    assert_eq!(c.limits.memory_mb, 512);
    assert_eq!(c.limits.cpu_seconds, 20);
    assert_eq!(c.limits.open_files, 256);
}

#[test]
fn only_the_user_says_unlimited_and_then_the_repository_limits_apply() {
    let user = parse_file("user", "[limits]\nmemory_mb = \"unlimited\"\n").unwrap();
    let open = Layers {
        user: user.clone(),
        ..Layers::default()
    }
    .resolve();
    assert_eq!(open.limits.memory_mb, 0, "no limit");
    let tight = Layers {
        user,
        ..Layers::default()
    }
    .with_repo_text("repo", Some("[limits]\nmemory_mb = 300\n"))
    .unwrap()
    .resolve();
    assert_eq!(tight.limits.memory_mb, 300);
    let env = env::from_env(
        vec![(
            "SANDBOX_LIMITS_CPU_SECONDS".to_string(),
            "unlimited".to_string(),
        )]
        .into_iter(),
    )
    .unwrap();
    assert_eq!(env.limits.cpu_seconds, Some(Limit::Unlimited));
}

#[test]
fn commands_and_report_paths_are_checked() {
    let err = parse_file("c", "[test]\ncommand = \"true\\u0000; rm -rf /\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("NUL byte"), "{err}");
    for bad in ["/etc/shadow", "../../../../etc/passwd", "a/../../b", ""] {
        let err = parse_file("c", &format!("[test]\njunit = {bad:?}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c:2: key `test.junit`"), "{bad}: {err}");
    }
    assert!(parse_file("c", "[test]\njunit = \"reports/junit.xml\"\n").is_ok());
    assert!(parse_file("c", "[test]\ntimeout = \"30d\"\n").is_err());
}

#[test]
fn gc_comes_from_the_user_config_only() {
    let user = parse_file("user", "[gc]\nlogs = \"7d\"\nmax_log_mb = 10\n").unwrap();
    let mut experiment = ConfigFile::default();
    // Even a layer built without the repository parser cannot change it.
    experiment.gc.logs = Some(Duration::from_secs(1));
    let c = Layers {
        user,
        experiment,
        ..Layers::default()
    }
    .resolve();
    assert_eq!(c.gc.logs, Duration::from_secs(7 * 86_400));
    assert_eq!(c.gc.events, Duration::from_secs(90 * 86_400));
    assert_eq!(c.gc.max_log_mb, 10);
    let err = parse_repository_file(
        ".sandbox.toml",
        "[test]\ncommand = \"x\"\n\n[gc]\nlogs = \"1d\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(".sandbox.toml:4: key `gc`: [gc] is read from your user config only"),
        "{err}"
    );
    let err = parse_repository_file("r", "gc.events = \"1d\"\n").unwrap_err();
    assert_eq!(err.location.line, Some(1), "{err}");
}

#[test]
fn audits_are_the_users_to_set_never_a_repositorys() {
    let user = parse_file("user", "[audit]\ngenerations = 3\nevery = \"10m\"\n").unwrap();
    let c = Layers {
        user,
        ..Layers::default()
    }
    .resolve();
    assert_eq!(c.audit.generations, 3);
    assert_eq!(c.audit.every, Duration::from_secs(600));
    assert_eq!(Config::default().audit.generations, 10);
    let err = parse_repository_file(".sandbox.toml", "[audit]\ngenerations = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(".sandbox.toml:1: key `audit`: [audit] is read from your user config only"),
        "{err}"
    );
    let err = parse_file("user", "[audit]\nevery = \"0s\"\n").unwrap_err();
    assert!(err.to_string().contains("every"), "{err}");
}

#[test]
fn result_key_follows_the_command() {
    let a = Config::default();
    let mut b = Config::default();
    b.test.command = Some("true".into());
    assert_ne!(a.result_key(), b.result_key());
    assert_eq!(a.result_key(), Config::default().result_key());
}

#[test]
fn cpu_cores_is_read_in_cores_and_kept_in_thousandths() {
    let read = |v: &str| {
        parse_file("user", &format!("[limits]\ncpu_cores = {v}\n")).map(|f| f.limits.cpu_cores)
    };
    assert_eq!(read("1.5"), Ok(Some(Limit::At(1500))));
    assert_eq!(read("2"), Ok(Some(Limit::At(2000))));
    assert_eq!(read("0.25"), Ok(Some(Limit::At(250))));
    assert_eq!(read("\"unlimited\""), Ok(Some(Limit::Unlimited)));
    for (bad, says) in [
        ("0", "0 is not a number of cores"),
        ("-1", "-1 is not a number of cores"),
        ("0.001", "less than a cgroup can give"),
        ("100000", "beyond any real machine"),
        ("\"lots\"", "invalid number of cores \"lots\""),
        ("nan", "NaN is not a number of cores"),
    ] {
        let e = read(bad).unwrap_err().to_string();
        assert!(
            e.starts_with("user:2: key `limits.cpu_cores`"),
            "{bad}: {e}"
        );
        assert!(e.contains(says), "{bad}: {e}");
    }
    let env =
        env::from_env([("SANDBOX_LIMITS_CPU_CORES".to_string(), "0.5".to_string())].into_iter())
            .unwrap();
    assert_eq!(env.limits.cpu_cores, Some(Limit::At(500)));
}

#[test]
fn a_repository_may_lower_cpu_cores_never_raise_or_lift_it() {
    let user = parse_file("user", "[limits]\ncpu_cores = 1\n").unwrap();
    for (asked, effective) in [("0.5", 500), ("4", 1000)] {
        let c = Layers {
            user: user.clone(),
            repo: parse_file("repo", &format!("[limits]\ncpu_cores = {asked}\n")).unwrap(),
            ..Layers::default()
        }
        .resolve();
        assert_eq!(c.limits.cpu_millicores, effective, "{asked}");
    }
    // With no quota from the user, a repository sets one.
    let c = Layers::default()
        .with_repo_text("repo", Some("[limits]\ncpu_cores = 1.5\n"))
        .unwrap()
        .resolve();
    assert_eq!(c.limits.cpu_millicores, 1500);
    let e = Layers::default()
        .with_repo_text("repo", Some("[limits]\ncpu_cores = \"unlimited\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("repo:2: key `limits.cpu_cores`: a repository cannot lift a limit"),
        "{e}"
    );
}

#[test]
fn cpu_cores_unset_keeps_the_result_keys_made_before_it_existed() {
    // The keys of the default config (and with a setup step) since selection version 2, which
    // an unset `cpu_cores` leaves as they are.
    let mut c = Config::default();
    assert_eq!(c.result_key(), "d4ea93c9129cfd37");
    c.test.setup = Some("make".into());
    assert_eq!(c.result_key(), "b7e4801251c0c8ad");
    c.limits.cpu_millicores = 500;
    let half = c.result_key();
    assert_ne!(half, "b7e4801251c0c8ad", "a quota changes the result");
    c.limits.cpu_millicores = 1000;
    assert_ne!(c.result_key(), half);
}

#[test]
fn a_repository_narrows_the_users_hosts_and_never_sets_resolve_or_the_host_network() {
    let user = parse_file(
        "user",
        "[limits]\nnetwork = true\n[network]\nallow = [\"pypi.org\", \"*.pythonhosted.org\"]\n\
         resolve = { \"pypi.internal\" = \"10.0.0.5\" }\n",
    )
    .unwrap();
    let layers = |repo: &str| Layers {
        user: user.clone(),
        repo: parse_repository_file("repo", repo).unwrap(),
        ..Layers::default()
    };
    let c = layers("[network]\nallow = [\"pypi.org\", \"files.pythonhosted.org\", \"evil.example\", \"*.org\"]\n")
        .resolve();
    assert_eq!(
        c.network.allow,
        Some(vec!["pypi.org".into(), "files.pythonhosted.org".into()]),
        "only what one of the user's patterns covers"
    );
    assert_eq!(
        c.network.resolve.get("pypi.internal"),
        Some(&"10.0.0.5".parse().unwrap())
    );
    assert!(c.limits.network && !c.limits.network_host);
    // With no list of the user's (any public host), the repository's list is the list.
    let open = Layers::default()
        .with_repo_text("repo", Some("[network]\nallow = [\"example.org:8443\"]\n"))
        .unwrap()
        .resolve();
    assert_eq!(open.network.allow, Some(vec!["example.org:8443".into()]));
    for (text, key) in [
        (
            "[network]\nresolve = { \"a.test\" = \"127.0.0.1\" }\n",
            "network.resolve",
        ),
        ("[limits]\nnetwork = \"host\"\n", "limits.network"),
    ] {
        let e = parse_repository_file("repo", text).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "repo:2: key `{key}`: a repository cannot set this"
            )),
            "{e}"
        );
    }
    let host = parse_file("user", "[limits]\nnetwork = \"host\"\n").unwrap();
    let c = Layers {
        user: host,
        repo: parse_repository_file("repo", "[limits]\nnetwork = false\n").unwrap(),
        ..Layers::default()
    }
    .resolve();
    assert!(
        !c.limits.network,
        "a repository may still turn the network off"
    );
    for (bad, says) in [
        ("allow = [\"pypi.org.\"]", "pypi.org."),
        ("allow = [\"bücher.example\"]", "bücher.example"),
        (
            "resolve = { \"a.test\" = \"not-an-ip\" }",
            "is not an IP address",
        ),
        ("allow = [\"*\"]", "*"),
    ] {
        let e = parse_file("user", &format!("[network]\n{bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("user:2: key `network."), "{bad}: {e}");
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = parse_file("user", "[limits]\nnetwork = \"everywhere\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid network setting \"everywhere\""), "{e}");
}

#[test]
fn the_network_enters_the_result_key_only_when_it_is_used_or_set() {
    let base = Config::default().result_key();
    let mut c = Config::default();
    c.limits.network = true;
    let proxied = c.result_key();
    assert_ne!(proxied, base, "a run with the network is keyed apart");
    c.limits.network_host = true;
    assert_ne!(
        c.result_key(),
        proxied,
        "the host's network is not the proxy's"
    );
    let mut c = Config::default();
    c.network.allow = Some(vec!["pypi.org".into()]);
    assert_ne!(c.result_key(), base, "a list set is part of the key");
    // The setup's network counts only with a setup step.
    let mut c = Config::default();
    c.limits.setup_network = true;
    assert_eq!(c.result_key(), base);
    c.test.setup = Some("pip install .".into());
    let with_setup = c.result_key();
    c.limits.setup_network = false;
    assert_ne!(c.result_key(), with_setup);
}

#[test]
fn the_adopted_settings_stand_for_a_commit_without_its_own_file_and_only_tighten() {
    let dir = std::env::temp_dir().join(format!("gs-adopted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(ADOPTED_FILE),
        "[test]\ncommand = \"npm test\"\nsetup = \"npm ci\"\n[limits]\nmemory_mb = 64000\n\
         [watch]\nbranches = [\"master\", \"experiment/*\"]\n[promote]\ntarget = \"master\"\n",
    )
    .unwrap();
    let user = parse_file("user.toml", "[limits]\nmemory_mb = 1024\n").unwrap();
    let layers = Layers {
        user,
        ..Layers::default()
    }
    .with_adopted(&dir)
    .unwrap();
    // A commit without .sandbox.toml: the adopted file is its config, under the user's limits.
    let bare = layers
        .with_repo_text("c:.sandbox.toml", None)
        .unwrap()
        .resolve();
    assert_eq!(bare.test.command.as_deref(), Some("npm test"));
    assert_eq!(bare.test.setup.as_deref(), Some("npm ci"));
    assert_eq!(
        bare.limits.memory_mb, 1024,
        "the adopted file only tightens"
    );
    assert_eq!(bare.promote.target, "master");
    // A commit with its own file, even an empty one: its settings, with the adopted branches.
    let own = layers
        .with_repo_text(
            "c:.sandbox.toml",
            Some("[test]\ncommand = \"make check\"\n"),
        )
        .unwrap()
        .resolve();
    assert_eq!(own.test.command.as_deref(), Some("make check"));
    assert_eq!(own.test.setup, None);
    assert_eq!(own.watch.branches, ["master", "experiment/*"]);
    assert_eq!(own.promote.target, "master");
    let empty = layers
        .with_repo_text("c:.sandbox.toml", Some(""))
        .unwrap()
        .resolve();
    assert_eq!(empty.test.command, None);
    assert_ne!(bare.result_key(), empty.result_key());

    // It is a repository file: what only the user may say is refused, naming the way out.
    std::fs::write(
        dir.join(ADOPTED_FILE),
        "[limits]\nmemory_mb = \"unlimited\"\n",
    )
    .unwrap();
    let e = Layers::default()
        .with_adopted(&dir)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sandbox.toml:2") && e.contains("git sandbox init"),
        "{e}"
    );
    // A symlink is not followed.
    std::fs::remove_file(dir.join(ADOPTED_FILE)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join(ADOPTED_FILE)).unwrap();
    assert!(Layers::default().with_adopted(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_build_step_enters_the_result_key_only_when_set() {
    let plain = Layers::default().resolve();
    let same = Layers::default()
        .with_repo_text("r.toml", Some("[test]\nbuild = \"\"\n"))
        .unwrap()
        .resolve();
    assert_eq!(same.test.build, None);
    assert_eq!(plain.result_key(), same.result_key());
    let built = Layers::default()
        .with_repo_text("r.toml", Some("[test]\nbuild = \"pnpm build\"\n"))
        .unwrap()
        .resolve();
    assert_eq!(built.test.build.as_deref(), Some("pnpm build"));
    assert_ne!(plain.result_key(), built.result_key());
}

#[test]
fn a_repository_names_the_image_but_never_the_registries_and_only_lowers_image_mb() {
    let repo = |text: &str| parse_repository_file(".sandbox.toml", text);
    for key in ["registries", "insecure_registries"] {
        let e = repo(&format!("[environment]\n{key} = [\"evil.example\"]\n")).unwrap_err();
        assert_eq!(
            e.location.key.as_deref(),
            Some(&*format!("environment.{key}"))
        );
        assert!(e.message.contains("cannot set this"), "{}", e.message);
    }
    let user = parse_file(
        "user",
        "[environment]\nimage_mb = 1000\nregistries = [\"127.0.0.1:5000\"]\n",
    )
    .unwrap();
    let layers = |text: &str| {
        Layers {
            user: user.clone(),
            repo: repo(text).unwrap(),
            repo_found: true,
            ..Layers::default()
        }
        .resolve()
    };
    let c = layers("[environment]\nimage = \"127.0.0.1:5000/x:1\"\nimage_mb = 5000\n");
    assert_eq!(c.environment.image.as_deref(), Some("127.0.0.1:5000/x:1"));
    assert_eq!(
        c.environment.image_mb, 1000,
        "a repository cannot raise image_mb"
    );
    assert_eq!(c.environment.registries, vec!["127.0.0.1:5000".to_string()]);
    assert_eq!(
        layers("[environment]\nimage_mb = 10\n")
            .environment
            .image_mb,
        10
    );
    assert_eq!(
        layers("[environment]\nimage = \"\"\n").environment.image,
        None
    );
    // Without a user list, the default registries.
    assert_eq!(
        Config::default().environment.registries,
        ["docker.io", "ghcr.io", "quay.io"]
    );
}

#[test]
fn a_bad_image_reference_or_registry_is_one_line_with_the_fix() {
    let e = parse_file("f", "[environment]\nimage = \"Python:3\"\n").unwrap_err();
    assert_eq!(e.location.line, Some(2));
    assert!(
        e.message.contains("\"Python:3\" is not an image reference"),
        "{}",
        e.message
    );
    assert!(
        e.hints.iter().any(|h| h.contains("python:3.12-slim")),
        "{:?}",
        e.hints
    );
    let e = parse_file("f", "[environment]\nregistries = [\"not a host\"]\n").unwrap_err();
    assert!(e.message.contains("not a registry host"), "{}", e.message);
    let e = parse_file("f", "[environment]\nimage_mb = 0\n").unwrap_err();
    assert!(e.message.contains("at least 1"), "{}", e.message);
    let e = from_env_for_test("SANDBOX_ENVIRONMENT_IMAGE", "a b").unwrap_err();
    assert!(e.to_string().contains("SANDBOX_ENVIRONMENT_IMAGE"), "{e}");
}

fn from_env_for_test(k: &str, v: &str) -> Result<ConfigFile, ConfigError> {
    env::from_env(std::iter::once((k.to_string(), v.to_string())))
}
