//! The dashboard in a real browser: Debian's Chromium and chromedriver (installed by ./test),
//! driven by Selenium from Python (tests/services/dashboard/browser.py) against a real daemon on
//! 127.0.0.1. Screenshots land in target/screenshots/ for a person to look at.

use crate::common;
#[path = "dashboard/branch.rs"]
mod branch;
#[path = "dashboard/pages.rs"]
mod pages;

use common::World;
use std::path::Path;
use std::process::Command;

#[test]
fn a_person_watches_a_commit_arrive_reads_it_and_promotes_from_the_browser() {
    common::tools::debian("/usr/bin/chromium", "chromium");
    common::tools::debian("/usr/bin/chromedriver", "chromium-driver");
    let python = common::tools::python("selenium");
    let w = World::new();
    let repo = w.new_repo("dash");
    let o = w.sandbox(&repo, &["experiment", "start", "ui"]);
    assert_eq!(o.code, 0, "{o:?}");
    // A result on main, so the home page has a trend to draw.
    let o = w.sandbox(&repo, &["run", "main"]);
    assert_eq!(o.code, 0, "{o:?}");
    let admin = w.token("admin");
    let (_daemon, addr) = w.serve();

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/dashboard/browser.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(&addr)
        .arg(&admin)
        .arg(&repo)
        .arg(&shots)
        .current_dir(&repo);
    w.apply_env(&mut cmd);
    // Selenium must not look for drivers on the network: both are given.
    cmd.env("SE_OFFLINE", "true");
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stdout.trim_end().ends_with("ok"),
        "the browser session failed (screenshots in {})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        shots.display()
    );
    for name in [
        "home",
        "commit",
        "experiments",
        "branch",
        "home-dark",
        "commit-phone",
    ] {
        assert!(shots.join(format!("{name}.png")).is_file(), "{name}.png");
    }
}

#[test]
fn at_a_desk_and_on_a_phone_nothing_scrolls_sideways_and_times_show_in_the_viewers_zone() {
    common::tools::debian("/usr/bin/chromium", "chromium");
    common::tools::debian("/usr/bin/chromedriver", "chromium-driver");
    let python = common::tools::python("selenium");
    let w = World::new();
    let repo = w.new_repo("phone");
    for name in ["a-rather-long-experiment-name", "short"] {
        let o = w.sandbox(&repo, &["experiment", "start", name]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    w.git(&repo, &["switch", "-q", "experiment/short"]);
    w.commit(
        &repo,
        &[(
            "tests/test_more.py",
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_more(self):\n        self.assertTrue(True)\n",
        )],
        "More tests",
    );
    // A subject and a ref longer than any table has room for.
    w.git(
        &repo,
        &["switch", "-q", "experiment/a-rather-long-experiment-name"],
    );
    w.commit(
        &repo,
        &[("notes.txt", "more\n")],
        "A subject long enough to overflow a table at any width: it says what the change does, why it does it, and names the_files/with/long-paths-that-never-break.txt",
    );
    w.git(&repo, &["switch", "-q", "main"]);
    for rev in [
        "main",
        "experiment/short",
        "experiment/a-rather-long-experiment-name",
    ] {
        let o = w.sandbox(&repo, &["run", rev]);
        assert_eq!(o.code, 0, "{o:?}");
    }
    let admin = w.token("admin");
    let (_daemon, addr) = w.serve();

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/dashboard/layout.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(&addr)
        .arg(&admin)
        .arg("phone")
        .arg(&shots);
    w.apply_env(&mut cmd);
    cmd.env("SE_OFFLINE", "true");
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stdout.trim_end().ends_with("ok"),
        "the browser session failed (screenshots in {})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        shots.display()
    );
}
