//! The command line as a git subcommand: closed pipes, man pages, completions.

use crate::common;
#[path = "cli/layout.rs"]
mod layout;

use common::{World, BIN};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

const SIGPIPE: i32 = 13;

/// Run the binary with stdout into a pipe whose reader is already gone: every write fails.
fn into_closed_pipe(
    w: &World,
    dir: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(dir);
    w.apply_env(&mut cmd);
    let out = cmd.stdout(writer).stderr(Stdio::piped()).output().unwrap();
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_read_command_dies_quietly_of_sigpipe_on_a_closed_pipe() {
    let w = World::new();
    let repo = w.new_repo("pipes");
    std::fs::write(repo.join(".sandbox.toml"), "[test]\ncommand = \"true\"\n").unwrap();
    w.git(&repo, &["add", ".sandbox.toml"]);
    w.commit(&repo, &[("a.py", "def f():\n    return 1\n")], "a");
    assert_eq!(w.sandbox(&repo, &["run"]).code, 0);
    let o = w.sandbox(&repo, &["experiment", "start", "idea"]);
    assert_eq!(o.code, 0, "{o:?}");
    let cases: &[&[&str]] = &[
        &["log"],
        &["log", "--json"],
        &["status"],
        &["list"],
        &["show"],
        &["show", "--json"],
        &["events"],
        &["events", "--json"],
        &["experiment", "list"],
        &["experiment", "show", "idea"],
        &["analyze"],
        &["analyze", "--json"],
        &["doctor"],
        &["daemon", "status"],
        &["--help"],
        &["help", "run"],
        &["run", "--help"],
        &["--version"],
    ];
    for args in cases {
        let (code, signal, stderr) = into_closed_pipe(&w, &repo, args);
        assert_eq!(
            (code, signal, stderr.as_str()),
            (None, Some(SIGPIPE), ""),
            "git sandbox {args:?} into a closed pipe"
        );
    }
}

#[test]
fn log_into_head_ends_like_git_log() {
    let w = World::new();
    let repo = w.new_repo("head");
    for i in 0..30 {
        w.commit(&repo, &[], &format!("commit {i}"));
    }
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "git-sandbox log -n 1000 | head -1; echo \"status ${PIPESTATUS[0]}\"",
    ])
    .current_dir(&repo);
    w.apply_env(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr, "");
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap().contains("commit 29"), "{stdout}");
    let status = lines.next().unwrap();
    assert!(status == "status 141" || status == "status 0", "{stdout}");
}

/// The visible commands under `path`, read from `--help` (the `help` command aside).
fn commands_in_help(w: &World, path: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let o = w.sandbox(&w.work(), &args);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
        .split("Commands:\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .take_while(|l| l.starts_with("  "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|name| *name != "help")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn man(w: &World, args: &[&str], env: &[(&str, &str)]) -> common::Out {
    let mut cmd = Command::new(common::tools::debian("/usr/bin/man", "man-db"));
    cmd.args(args).current_dir(w.work());
    w.apply_env(&mut cmd);
    cmd.envs(env.iter().copied()).env("MANWIDTH", "100");
    let o = cmd.output().unwrap();
    common::Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn man_pages_for_every_command_open_from_git_help() {
    let w = World::new();
    let dir = w.path("man");
    let o = w.sandbox(&w.work(), &["install-man-pages", dir.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{o:?}");
    let mut want = vec!["git-sandbox.1".to_string()];
    let top = commands_in_help(&w, &[]);
    assert!(top.contains(&"run".to_string()) && !top.contains(&"notify".to_string()));
    for name in &top {
        want.push(format!("git-sandbox-{name}.1"));
        for sub in commands_in_help(&w, &[name]) {
            want.push(format!("git-sandbox-{name}-{sub}.1"));
        }
    }
    want.sort();
    let mut have: Vec<String> = std::fs::read_dir(dir.join("man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    have.sort();
    assert_eq!(have, want);
    assert!(want.contains(&"git-sandbox-experiment-start.1".to_string()));
    assert_eq!(
        o.stdout,
        format!(
            "Installed {} man pages into {}\n",
            want.len(),
            dir.join("man1").display()
        )
    );
    // Not where man looks: the hint says how to add it.
    assert!(o.stderr.starts_with("hint: man does not look in"), "{o:?}");
    assert!(o.stderr.contains("export MANPATH="), "{o:?}");

    let manpath = dir.to_str().unwrap();
    let page = man(
        &w,
        &["-P", "cat", "git-sandbox-run"],
        &[("MANPATH", manpath)],
    );
    assert_eq!(page.code, 0, "{page:?}");
    for option in ["--force", "--all", "--command", "--timeout", "REV|RANGE"] {
        assert!(page.stdout.contains(option), "{option}: {page:?}");
    }
    // The synopsis names what each option takes, and the help's `code` is set in bold, not
    // shown with its backticks.
    let words = page.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let synopsis = words
        .split("SYNOPSIS ")
        .nth(1)
        .and_then(|s| s.split(" DESCRIPTION").next())
        .unwrap_or_else(|| panic!("{words}"));
    for with_value in [
        "[--command CMD]",
        "[--timeout DURATION]",
        "[-j|--jobs N]",
        "[REV|RANGE...]",
    ] {
        assert!(synopsis.contains(with_value), "{with_value}: {synopsis}");
    }
    assert!(!page.stdout.contains('`'), "{page:?}");
    // `git help sandbox`, and `git sandbox --help` (git turns it into `git help sandbox`).
    for args in [&["help", "sandbox"][..], &["sandbox", "--help"][..]] {
        let mut cmd = Command::new("git");
        cmd.args(args).current_dir(w.work());
        w.apply_env(&mut cmd);
        cmd.env("MANPATH", manpath).env("MANPAGER", "cat");
        let o = cmd.output().unwrap();
        // man justifies lines: compare words.
        let stdout = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(o.status.success(), "git {args:?}: {o:?}");
        assert!(
            stdout.contains("git-sandbox - Every commit"),
            "git {args:?}: {stdout}"
        );
        assert!(
            stdout.contains("git-sandbox-run(1)"),
            "git {args:?}: {stdout}"
        );
    }
}

#[test]
fn man_pages_go_next_to_the_binary_where_man_finds_them() {
    let w = World::new();
    let bin = w.path("prefix/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("git-sandbox");
    if std::fs::hard_link(BIN, &exe).is_err() {
        std::fs::copy(BIN, &exe).unwrap();
    }
    let mut cmd = Command::new(&exe);
    cmd.arg("install-man-pages").current_dir(w.work());
    w.apply_env(&mut cmd);
    let path = format!("{}:/usr/bin:/bin", bin.display());
    cmd.env("PATH", &path);
    let o = cmd.output().unwrap();
    let man1 = w.path("prefix/share/man/man1");
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).ends_with(&format!("into {}\n", man1.display())),
        "{o:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "",
        "man finds it: no hint"
    );
    // No MANPATH: man-db looks in ../share/man next to each PATH entry.
    let found = man(&w, &["-w", "git-sandbox-log"], &[("PATH", &path)]);
    assert_eq!(
        found.stdout.trim(),
        man1.join("git-sandbox-log.1").display().to_string(),
        "{found:?}"
    );
}

#[test]
fn the_first_command_of_an_installed_binary_installs_its_man_pages_so_help_opens_one() {
    let w = World::new();
    let bin = w.path("prefix/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("git-sandbox");
    if std::fs::hard_link(BIN, &exe).is_err() {
        std::fs::copy(BIN, &exe).unwrap();
    }
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = |args: &[&str]| {
        let mut cmd = Command::new(&exe);
        cmd.args(args).current_dir(w.work());
        w.apply_env(&mut cmd);
        cmd.env("PATH", &path);
        // A copy just written can be busy a moment: another test's fork may hold it open.
        let mut tries = 0;
        let o = loop {
            match cmd.output() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                o => break o.unwrap(),
            }
        };
        assert!(o.status.success(), "{args:?}: {o:?}");
        // What it says about man pages (`new` also says what to do next).
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter(|l| l.contains("man page"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let man1 = w.path("prefix/share/man/man1");
    // Whichever command comes first: `list` here.
    let said = run(&["list"]);
    assert!(
        said.len() == 1
            && said[0].starts_with("Installed ")
            && said[0].ends_with(&format!(
                " man pages into {} (for `git sandbox --help`)",
                man1.display()
            )),
        "{said:?}"
    );
    assert!(man1.join("git-sandbox-new.1").is_file());
    // git turns `git sandbox --help` into `man git-sandbox`, which now finds the page.
    let mut cmd = Command::new("git");
    cmd.args(["sandbox", "--help"]).current_dir(w.work());
    w.apply_env(&mut cmd);
    cmd.env("PATH", &path).env("MANPAGER", "cat");
    let o = cmd.output().unwrap();
    let page = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(page.contains("git-sandbox - Every commit"), "{o:?}");
    // Once: the next command finds them there and says nothing.
    assert!(run(&["new", "second"]).is_empty());
    // A binary cargo built (under its target dir) writes nothing beside itself.
    let o = w.sandbox(&w.work(), &["new", "third"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("man page"), "{o:?}");
    assert!(!common::World::bin_dir().join("../share/man").exists());
}

/// Complete `line` (the cursor at its end) in bash with git's completion and ours loaded.
fn complete(w: &World, line: &str) -> Vec<String> {
    complete_in(w, &w.work(), line)
}

/// [`complete`] in `dir`.
fn complete_in(w: &World, dir: &std::path::Path, line: &str) -> Vec<String> {
    let git_completion = "/usr/share/bash-completion/completions/git";
    assert!(
        std::path::Path::new(git_completion).exists(),
        "git's bash completion ships with git at {git_completion}"
    );
    let script = format!(
        r#"source {git_completion}
source <(git-sandbox completions bash)
COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
if [[ ${{COMP_WORDS[0]}} == git ]]; then __git_wrap__git_main; else _git__sandbox git-sandbox "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; fi
printf '%s\n' "${{COMPREPLY[@]}}""#
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script]).current_dir(dir);
    w.apply_env(&mut cmd);
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{line}");
    let mut got: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    got.sort();
    got
}

#[test]
fn bash_completes_git_sandbox_through_gits_own_completion() {
    let w = World::new();
    assert_eq!(complete(&w, "git sandbox ru"), ["run "]);
    assert_eq!(complete(&w, "git sandbox ex"), ["exec ", "experiment "]);
    assert_eq!(complete(&w, "git sandbox experiment st"), ["start "]);
    assert_eq!(complete(&w, "git sandbox run --fo"), ["--force "]);
    assert_eq!(complete(&w, "git sandbox install"), ["install-man-pages "]);
    assert_eq!(complete(&w, "git sandbox completions z"), ["zsh "]);
    // Hidden commands are not offered.
    assert!(complete(&w, "git sandbox no").is_empty());
    assert!(complete(&w, "git sandbox __").is_empty());
    // The binary itself completes too.
    assert_eq!(complete(&w, "git-sandbox ru"), ["run"]);
    assert_eq!(complete(&w, "git-sandbox log --a"), ["--all"]);
}

#[test]
fn bash_completes_values_strategies_revisions_experiments_remotes_and_repositories() {
    let w = World::new();
    let repo = w.new_repo("values");
    w.git(&repo, &["branch", "feature"]);
    w.git(&repo, &["remote", "add", "origin", "/nowhere"]);
    let o = w.sandbox(&repo, &["experiment", "start", "speedup"]);
    assert_eq!(o.code, 0, "{o:?}");
    let c = |line: &str| complete_in(&w, &repo, line);
    assert_eq!(
        c("git sandbox promote --strategy "),
        ["ff ", "merge ", "pull-request "]
    );
    assert_eq!(c("git sandbox promote --strategy m"), ["merge "]);
    assert_eq!(c("git-sandbox token create --role a"), ["admin"]);
    assert_eq!(c("git sandbox run fe"), ["feature "]);
    assert_eq!(c("git sandbox show ma"), ["main "]);
    assert_eq!(c("git sandbox log main..fe"), ["main..feature "]);
    assert_eq!(c("git sandbox experiment show sp"), ["speedup "]);
    assert_eq!(c("git sandbox promote sp"), ["speedup "]);
    // Experiments and revisions both: the experiment and its branch.
    assert_eq!(
        c("git sandbox compare exp"),
        ["experiment/speedup "],
        "only revisions start with exp"
    );
    assert_eq!(c("git sandbox push or"), ["origin "]);
    assert_eq!(c("git sandbox events --repo va"), ["values "]);
    assert_eq!(c("git sandbox forget va"), ["values "]);
    // Outside a repository there is nothing to offer, and nothing is said.
    assert!(complete(&w, "git sandbox run fe").is_empty());
}

#[test]
fn zsh_and_fish_scripts_name_the_visible_commands() {
    let w = World::new();
    for shell in ["zsh", "fish"] {
        let o = w.sandbox(&w.work(), &["completions", shell]);
        assert_eq!(o.code, 0, "{o:?}");
        assert!(o.stdout.contains("install-man-pages"), "{shell}");
        assert!(!o.stdout.contains("__sandbox-exec"), "{shell}");
        assert!(!o.stdout.contains("notify"), "{shell}");
    }
    let o = w.sandbox(&w.work(), &["completions", "tcsh"]);
    assert_eq!(o.code, 2, "{o:?}");
}

/// Clear the screen, retitle the window, write the clipboard, then go back to the start of the
/// line and wipe it: what a hostile subject or test output sends to whoever reads it.
const HOSTILE: &str = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\r\x1b[K";
/// The same as a Python string literal.
const PY_HOSTILE: &str = r#""\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\r\x1b[K""#;
/// How it is shown.
const SHOWN: &str = "^[[2J^[]0;owned^G^[]52;c;ZXZpbA==^G^M^[[K";

fn assert_escaped(o: &common::Out, what: &str) {
    for c in ['\x1b', '\x07', '\r', '\u{202e}'] {
        assert!(!o.stdout.contains(c), "{what} printed {c:?} raw: {o:?}");
    }
}

#[test]
fn text_a_commit_controls_reaches_the_terminal_escaped() {
    let w = World::new();
    let repo = w.new_repo("escapes");
    let test = format!(
        "import unittest\n\n\nclass TestX(unittest.TestCase):\n    def test_x(self):\n        print({PY_HOSTILE} + ' passed')\n        self.fail({PY_HOSTILE} + ' all fine')\n"
    );
    let subject = format!("fix {HOSTILE}✔ all good");
    let id = w.commit(&repo, &[("tests/test_x.py", &test)], &subject);

    let o = w.sandbox(&repo, &["run"]);
    assert_escaped(&o, "run");
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stdout.contains(&format!("fix {SHOWN}✔ all good")),
        "{o:?}"
    );

    let o = w.sandbox(&repo, &["log", "-n", "1"]);
    assert_escaped(&o, "log");
    assert!(
        o.stdout.contains(&format!("fix {SHOWN}✔ all good")),
        "{o:?}"
    );
    // --json is data: the subject as it is.
    let o = w.sandbox(&repo, &["log", "-n", "1", "--json"]);
    assert_eq!(o.json()[0]["summary"], subject.as_str(), "{o:?}");
    assert_eq!(o.json()[0]["commit"], id.as_str());

    let o = w.sandbox(&repo, &["show"]);
    assert_escaped(&o, "show");
    assert!(
        o.stdout.contains(&format!("fix {SHOWN}✔ all good")),
        "{o:?}"
    );
    assert!(
        o.stdout
            .contains(&format!("AssertionError: {SHOWN} all fine")),
        "the failure message: {o:?}"
    );
    assert!(
        o.stdout.contains(&format!("    {SHOWN} passed")),
        "the output's last lines: {o:?}"
    );

    // An experiment whose hypothesis, and a branch whose name (a right-to-left override is
    // a valid ref name), say more than they show.
    let hypothesis = format!("faster {HOSTILE}");
    let o = w.sandbox(
        &repo,
        &["experiment", "start", "idea", "--hypothesis", &hypothesis],
    );
    assert_eq!(o.code, 0, "{o:?}");
    w.git(&repo, &["branch", "experiment/ok\u{202e}gnp.exe"]);
    let o = w.sandbox(&repo, &["experiment", "list"]);
    assert_escaped(&o, "experiment list");
    assert!(o.stdout.contains("ok<U+202E>gnp.exe"), "{o:?}");
    let o = w.sandbox(&repo, &["experiment", "show", "idea"]);
    assert_escaped(&o, "experiment show");
    assert!(o.stdout.contains(&format!("faster {SHOWN}")), "{o:?}");
}

/// The manual's command reference is what the binary's own command-line definition says: a
/// flag added, renamed or documented differently shows here until the pages are written again.
#[test]
fn the_command_reference_in_the_manual_is_the_binarys_own() {
    let w = World::new();
    let out = w.path("reference");
    let o = w.sandbox(&w.work(), &["__reference", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{o:?}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = root.join("docs/src/reference");
    let names = |d: &std::path::Path| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let fix = "run `cargo run -- __reference docs/src/reference` and commit the pages";
    assert_eq!(names(&out), names(&committed), "{fix}");
    assert!(names(&out).len() > 30, "{:?}", names(&out));
    for name in names(&out) {
        let want = std::fs::read_to_string(out.join(&name)).unwrap();
        let have = std::fs::read_to_string(committed.join(&name)).unwrap();
        assert!(
            want == have,
            "docs/src/reference/{name} is out of date: {fix}"
        );
    }
    // mdBook renders only what SUMMARY.md lists.
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    for name in names(&out) {
        assert!(
            summary.contains(&format!("(reference/{name})")),
            "docs/src/SUMMARY.md does not list reference/{name}: add it under Command reference"
        );
    }
}

/// The manual builds with the pinned mdBook, and every link in it (between its pages, to their
/// headings and to the images) resolves.
#[test]
fn the_manual_builds_and_its_links_resolve() {
    let mdbook = common::tools::cargo_bin("mdbook");
    let linkcheck = common::tools::cargo_bin("mdbook-linkcheck");
    let w = World::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dest = w.path("book");
    let path = format!(
        "{}:{}",
        linkcheck.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(mdbook)
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(&dest)
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "mdbook build failed: {err}");
    assert!(!err.contains("WARN"), "{err}");
    assert!(dest.join("html/reference/run.html").is_file(), "{err}");
    assert!(dest.join("html/commands/run.html").is_file(), "{err}");
}
