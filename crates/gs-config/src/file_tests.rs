//! The config file parser: file, line and key for each mistake a user makes, and the environment
//! laid over a file.

use super::*;
use crate::env::from_env;

#[test]
fn unknown_key_names_file_line_and_key() {
    let err = parse_file(
        ".sandbox.toml",
        "[test]\ncommand = \"x\"\n\n[limits]\nmemroy_mb = 5\n",
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(".sandbox.toml:5: key `limits.memroy_mb`: unknown field `memroy_mb`"),
        "{msg}"
    );
}

#[test]
fn wrong_type_names_file_line_and_key() {
    let err = parse_file("cfg.toml", "[limits]\nmemory_mb = \"lots\"\n").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("cfg.toml:2: key `limits.memory_mb`:"),
        "{msg}"
    );
    let err = parse_file("cfg.toml", "[test]\ntimeout = \"soon\"\n").unwrap_err();
    assert!(
        err.to_string().contains("invalid duration \"soon\""),
        "{err}"
    );
    let err = parse_file("cfg.toml", "[promote]\nstrategy = \"yolo\"\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("use one of merge, ff, pull-request"),
        "{err}"
    );
}

#[test]
fn the_fix_is_a_hint_apart_from_the_message() {
    let err = parse_file("cfg.toml", "[test]\ntimeout = \"soon\"\n").unwrap_err();
    assert_eq!(err.message, "invalid duration \"soon\"");
    assert_eq!(
        err.hints,
        ["write a positive number with a unit, like \"90s\", \"5m\", \"1h\" or \"30d\""]
    );
    assert_eq!(
        err.to_string(),
        "cfg.toml:2: key `test.timeout`: invalid duration \"soon\"; write a positive number with a unit, like \"90s\", \"5m\", \"1h\" or \"30d\""
    );
    let err = parse_file("cfg.toml", "[analysis]\nexclude = [\"a**\"]\n").unwrap_err();
    assert_eq!(err.hints, ["use `*` within a segment"], "{err}");
    let err = parse_file("cfg.toml", "[test]\nreruns = 3\n").unwrap_err();
    assert!(err.message.starts_with("unknown field `reruns`"), "{err}");
    assert_eq!(err.hints.len(), 1, "{err}");
    assert!(!err.message.contains('\u{1f}') && !err.to_string().contains('\u{1f}'));
}

#[test]
fn an_invalid_glob_names_file_line_and_key() {
    let err = parse_file(
        ".sandbox.toml",
        "[test]\ncommand = \"x\"\n[analysis]\nexclude = [\"ok/**\", \"bad**\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(".sandbox.toml:4: key `analysis.exclude`: invalid glob \"bad**\""),
        "{err}"
    );
    let err = parse_file("u.toml", "[watch]\nbranches = [\"exp**\"]\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("u.toml:2: key `watch.branches`:"),
        "{err}"
    );
    let vars = [("SANDBOX_WATCH_BRANCHES".to_string(), "a**".to_string())];
    let err = from_env(vars.into_iter()).unwrap_err().to_string();
    assert!(err.contains("whole path segment"), "{err}");
}

#[test]
fn malformed_toml_names_the_line() {
    let err = parse_file("c.toml", "[test]\ncommand = \n").unwrap_err();
    assert_eq!(err.location.line, Some(2), "{err}");
}

#[test]
fn environment_overrides_and_names_the_variable() {
    let vars = vec![
        ("SANDBOX_TEST_TIMEOUT".to_string(), "90s".to_string()),
        (
            "SANDBOX_WATCH_BRANCHES".to_string(),
            "main, exp/*".to_string(),
        ),
        ("SANDBOX_LIMITS_NETWORK".to_string(), "true".to_string()),
        ("SANDBOX_LIMITS_CHECKOUT_MB".to_string(), "64".to_string()),
        ("SANDBOX_SOMETHING_ELSE".to_string(), "ignored".to_string()),
    ];
    let f = from_env(vars.into_iter()).unwrap();
    assert_eq!(f.test.timeout, Some(Duration::from_secs(90)));
    assert_eq!(f.watch.branches, Some(vec!["main".into(), "exp/*".into()]));
    assert_eq!(f.limits.network, Some(NetworkMode::Proxy));
    let host =
        from_env([("SANDBOX_LIMITS_NETWORK".to_string(), "host".to_string())].into_iter()).unwrap();
    assert_eq!(host.limits.network, Some(NetworkMode::Host));
    assert_eq!(f.limits.checkout_mb, Some(Limit::At(64)));
    let gc = vec![
        ("SANDBOX_GC_LOGS".to_string(), "2d".to_string()),
        ("SANDBOX_GC_MAX_LOG_MB".to_string(), "5".to_string()),
    ];
    let f = from_env(gc.into_iter()).unwrap();
    assert_eq!(f.gc.logs, Some(Duration::from_secs(2 * 86_400)));
    assert_eq!(f.gc.max_log_mb, Some(5));
    let bad = vec![("SANDBOX_LIMITS_MEMORY_MB".to_string(), "lots".to_string())];
    let err = from_env(bad.into_iter()).unwrap_err().to_string();
    assert!(
        err.starts_with("environment variable SANDBOX_LIMITS_MEMORY_MB:"),
        "{err}"
    );
}
