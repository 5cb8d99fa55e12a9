//! The test HTTP git server (`common::http_git`) speaks git's smart HTTP behind Basic auth: git's
//! own credential store answers its 401s; pushes (chunked too), fetches and notes go through, a
//! wrong password does not.

use crate::common;

use common::http_git::GitHttp;
use common::{Out, World};
use std::path::Path;
use std::process::Command;

/// git with the credential store `creds`, an identity, and `env`, in the world's environment.
fn git_http(w: &World, dir: &Path, creds: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
    let helper = format!("credential.helper=store --file={}", creds.display());
    let mut cmd = Command::new("git");
    cmd.args(["-c", &helper])
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir);
    w.apply_env(&mut cmd);
    cmd.envs(env.iter().copied());
    let o = cmd.output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn ok(o: Out, what: &str) -> Out {
    assert_eq!(o.code, 0, "{what}: {o:?}");
    o
}

/// `len` bytes that compress to nothing (xorshift).
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn push_fetch_and_notes_through_basic_auth() {
    let mut w = World::new();
    w.extra_env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    let root = w.path("server");
    std::fs::create_dir_all(&root).unwrap();
    w.git(&root, &["init", "-q", "--bare", "shared.git"]);
    let server = GitHttp::start(&root, "x-access-token", "s3cret");
    let base = server.base_url();
    let url = format!("{base}/shared.git");
    let host = base.strip_prefix("http://").unwrap();
    let creds = w.path("creds");
    std::fs::write(&creds, format!("http://x-access-token:s3cret@{host}\n")).unwrap();

    let src = w.path("src");
    w.git(w.tmp.path(), &["init", "-q", "-b", "main", "src"]);
    std::fs::write(src.join("a.txt"), "a\n").unwrap();
    let g = |args: &[&str]| ok(git_http(&w, &src, &creds, args, &[]), &args.join(" "));
    g(&["add", "a.txt"]);
    g(&["commit", "-q", "-m", "first"]);
    let first = g(&["rev-parse", "HEAD"]).stdout.trim().to_string();

    // Push: a 401 first, then the stored credentials.
    g(&["push", "-q", &url, "main"]);
    let seen = server.requests();
    assert!(
        seen.contains(&"GET /shared.git/info/refs?service=git-receive-pack 401 auth=none".into()),
        "{seen:#?}"
    );
    assert!(
        seen.contains(&"POST /shared.git/git-receive-pack 200 auth=ok".into()),
        "{seen:#?}"
    );

    // ls-remote over protocol v2 (the Git-Protocol header reaches the backend).
    let o = ok(
        git_http(
            &w,
            &src,
            &creds,
            &["ls-remote", &url],
            &[("GIT_TRACE_PACKET", "1")],
        ),
        "ls-remote",
    );
    assert!(
        o.stdout.contains(&format!("{first}\trefs/heads/main")),
        "{o:?}"
    );
    assert!(o.stderr.contains("< version 2"), "not protocol v2: {o:?}");

    // Clone.
    // (The bare repository's HEAD names `master`, as no configuration says otherwise.)
    ok(
        git_http(
            &w,
            w.tmp.path(),
            &creds,
            &["clone", "-q", "-b", "main", &url, "copy"],
            &[],
        ),
        "clone",
    );
    let cloned = w.git(&w.path("copy"), &["rev-parse", "HEAD"]);
    assert_eq!(cloned.trim(), first);
    assert_eq!(
        std::fs::read_to_string(w.path("copy/a.txt")).unwrap(),
        "a\n"
    );

    // Notes.
    g(&[
        "notes",
        "--ref=refs/notes/sandbox",
        "add",
        "-m",
        "hi",
        "HEAD",
    ]);
    g(&["push", "-q", &url, "refs/notes/sandbox"]);
    let o = g(&["ls-remote", &url, "refs/notes/sandbox"]);
    assert!(o.stdout.contains("\trefs/notes/sandbox"), "{o:?}");

    // A push larger than http.postBuffer goes chunked.
    std::fs::write(src.join("big.bin"), noise(400 << 10)).unwrap();
    g(&["add", "big.bin"]);
    g(&["commit", "-q", "-m", "big"]);
    let big = g(&["rev-parse", "HEAD"]).stdout.trim().to_string();
    let o = ok(
        git_http(
            &w,
            &src,
            &creds,
            &["-c", "http.postBuffer=65520", "push", "-q", &url, "main"],
            &[("GIT_TRACE_CURL", "1"), ("GIT_TRACE_CURL_NO_DATA", "1")],
        ),
        "chunked push",
    );
    assert!(
        o.stderr.contains("Transfer-Encoding: chunked"),
        "not chunked: {}",
        o.stderr
    );
    let o = g(&["ls-remote", &url, "refs/heads/main"]);
    assert!(o.stdout.starts_with(&big), "{o:?}");

    // A wrong password: 401s only, the push fails, the branch stays.
    let bad = w.path("bad-creds");
    std::fs::write(&bad, format!("http://x-access-token:wrong@{host}\n")).unwrap();
    g(&["commit", "-q", "--allow-empty", "-m", "refused"]);
    let before = server.requests().len();
    let o = git_http(&w, &src, &bad, &["push", "-q", &url, "main"], &[]);
    assert_ne!(o.code, 0, "{o:?}");
    let after = server.requests()[before..].to_vec();
    assert!(!after.is_empty(), "no request at all");
    assert!(after.iter().all(|l| l.contains(" 401 ")), "{after:#?}");
    assert!(
        after.iter().any(|l| l.ends_with(" 401 auth=bad")),
        "{after:#?}"
    );
    assert!(
        !server
            .requests()
            .iter()
            .skip(before)
            .any(|l| l.starts_with("POST /shared.git/git-receive-pack 200")),
        "{after:#?}"
    );
    let o = g(&["ls-remote", &url, "refs/heads/main"]);
    assert!(o.stdout.starts_with(&big), "{o:?}");
}
