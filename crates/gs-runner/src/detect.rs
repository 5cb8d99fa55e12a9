//! Choosing a test command for a tree that does not name one in `.sandbox.toml`. The tree is
//! the commit's: its files are read without following symlinks, and only up to a cap.

use gs_model::Framework;
use gs_util::{beneath::exists_regular_beneath, beneath::read_beneath};
use std::path::Path;
use std::process::{Command, Stdio};

/// The most of a manifest read (`package.json`, `pyproject.toml`).
const MANIFEST_CAP: u64 = 1024 * 1024;

/// The command and the framework it runs, or `None` when the tree has no tests we recognise.
pub fn detect(dir: &Path) -> Option<(String, Framework)> {
    if exists_regular_beneath(dir, "Cargo.toml") {
        return Some((cargo_command(dir), Framework::Cargo));
    }
    if exists_regular_beneath(dir, "go.mod") {
        return Some(("go test ./...".into(), Framework::Go));
    }
    if let Some(found) = from_package_json(dir) {
        return Some(found);
    }
    if let Some(found) = python(dir) {
        return Some(found);
    }
    if let Some(command) = cmake_command(dir) {
        return Some((command, Framework::Ctest));
    }
    if has_file(
        dir,
        &|n| n.ends_with(".test.js") || n.ends_with(".test.mjs"),
        2,
    ) {
        return Some(("node --test".into(), Framework::Node));
    }
    None
}

/// `cargo test`, with `--workspace` where the root manifest is a workspace with members whose
/// plain `cargo test` would test only some of them: the root package (ripgrep: 2 of its 25 test
/// binaries), or the `default-members`.
fn cargo_command(dir: &Path) -> String {
    let manifest = read_beneath(dir, "Cargo.toml", MANIFEST_CAP)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse::<toml::Table>().ok());
    let partial = manifest.is_some_and(|m| {
        let ws = m.get("workspace").and_then(|w| w.as_table());
        let members = ws
            .and_then(|w| w.get("members"))
            .and_then(|v| v.as_array())
            .is_some_and(|a| !a.is_empty());
        let defaults = ws.is_some_and(|w| w.contains_key("default-members"));
        members && (m.contains_key("package") || defaults)
    });
    if partial {
        "cargo test --workspace".into()
    } else {
        "cargo test".into()
    }
}

/// A CMake project whose root `CMakeLists.txt` declares tests (`enable_testing()`,
/// `include(CTest)` or `add_test(`, in any case): configured, built and tested by ctest in a
/// build directory (`build`, or `cmake-build` where the tree has a `build` of its own).
fn cmake_command(dir: &Path) -> Option<String> {
    let text = read_beneath(dir, "CMakeLists.txt", MANIFEST_CAP).ok()?;
    let text = String::from_utf8_lossy(&text).to_ascii_lowercase();
    let code: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let tests = ["enable_testing(", "include(ctest)", "add_test("]
        .iter()
        .any(|w| squeezed.contains(w));
    if !tests {
        return None;
    }
    let build = if dir.join("build").symlink_metadata().is_ok() {
        "cmake-build"
    } else {
        "build"
    };
    Some(format!(
        "cmake -B {build} && cmake --build {build} && ctest --test-dir {build} --output-on-failure"
    ))
}

fn from_package_json(dir: &Path) -> Option<(String, Framework)> {
    let bytes = read_beneath(dir, "package.json", MANIFEST_CAP).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let script = json.pointer("/scripts/test")?.as_str()?;
    if script.contains("no test specified") {
        return None;
    }
    let framework = if script.contains("vitest") {
        Framework::Vitest
    } else if script.contains("jest") {
        Framework::Jest
    } else if script.contains("mocha") {
        Framework::Mocha
    } else if script.contains("node --test") {
        Framework::Node
    } else {
        Framework::Npm
    };
    Some(("npm test".into(), framework))
}

fn python(dir: &Path) -> Option<(String, Framework)> {
    let has_tests_dir = std::fs::symlink_metadata(dir.join("tests")).is_ok_and(|m| m.is_dir());
    let is_test =
        |n: &str| (n.starts_with("test_") || n.ends_with("_test.py")) && n.ends_with(".py");
    if !has_tests_dir && !has_file(dir, &is_test, 1) {
        return None;
    }
    let configured_for_pytest = exists_regular_beneath(dir, "pytest.ini")
        || exists_regular_beneath(dir, "conftest.py")
        || read_beneath(dir, "pyproject.toml", MANIFEST_CAP)
            .is_ok_and(|t| String::from_utf8_lossy(&t).contains("[tool.pytest"));
    if configured_for_pytest || pytest_importable() {
        return Some(("python3 -m pytest -q -rfE".into(), Framework::Pytest));
    }
    // unittest's discovery does not enter folders without __init__.py, so start in tests/.
    if has_tests_dir && !exists_regular_beneath(dir, "tests/__init__.py") {
        return Some((
            "python3 -m unittest discover -s tests -v".into(),
            Framework::Unittest,
        ));
    }
    Some((
        "python3 -m unittest discover -v".into(),
        Framework::Unittest,
    ))
}

fn pytest_importable() -> bool {
    Command::new("python3")
        .args(["-c", "import pytest"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a regular file whose name passes `pred` is at most `depth` levels down. The entry's
/// own type is used (never the target's), so symlinks are neither counted nor entered.
fn has_file(dir: &Path, pred: &dyn Fn(&str) -> bool, depth: usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_file() && pred(&name) {
            return true;
        }
        if ft.is_dir() && depth > 1 && has_file(&e.path(), pred, depth - 1) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_manifest() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(detect(d.path()), None);
        std::fs::write(
            d.path().join("package.json"),
            r#"{"scripts":{"test":"vitest run"}}"#,
        )
        .unwrap();
        assert_eq!(
            detect(d.path()),
            Some(("npm test".into(), Framework::Vitest))
        );
        std::fs::write(
            d.path().join("package.json"),
            r#"{"scripts":{"test":"mocha --recursive"}}"#,
        )
        .unwrap();
        assert_eq!(
            detect(d.path()),
            Some(("npm test".into(), Framework::Mocha))
        );
        std::fs::write(d.path().join("Cargo.toml"), "[package]").unwrap();
        assert_eq!(detect(d.path()).unwrap().1, "cargo");
    }

    /// A CMake project that declares tests is built and tested by ctest; one that declares
    /// none (or only in a comment) is not a test suite.
    #[test]
    fn a_cmake_project_with_tests_is_built_and_run_by_ctest() {
        let d = tempfile::tempdir().unwrap();
        let command = |text: &str| {
            std::fs::write(d.path().join("CMakeLists.txt"), text).unwrap();
            detect(d.path())
        };
        let fmt_like = "cmake_minimum_required(VERSION 3.8)\nproject(FMT CXX)\nif (FMT_TEST)\n  enable_testing ()\n  add_subdirectory(test)\nendif ()\n";
        assert_eq!(
            command(fmt_like),
            Some((
                "cmake -B build && cmake --build build && ctest --test-dir build --output-on-failure"
                    .into(),
                Framework::Ctest
            ))
        );
        assert!(command("project(x)\ninclude(CTest)\n").is_some());
        assert!(command("project(x)\nADD_TEST(NAME t COMMAND t)\n").is_some());
        assert_eq!(
            command("project(x)\n# enable_testing()\nadd_library(x x.c)\n"),
            None
        );
        // The tree's own `build` is left alone.
        std::fs::create_dir(d.path().join("build")).unwrap();
        assert!(command("enable_testing()\n")
            .unwrap()
            .0
            .contains("-B cmake-build"));
    }

    /// A workspace whose plain `cargo test` tests only its root package (or its default
    /// members) is tested whole; a virtual workspace and a lone package as they are.
    #[test]
    fn a_workspace_with_a_root_package_is_tested_whole() {
        let d = tempfile::tempdir().unwrap();
        let command = |manifest: &str| {
            std::fs::write(d.path().join("Cargo.toml"), manifest).unwrap();
            detect(d.path()).unwrap().0
        };
        let root = "[package]\nname = \"rg\"\n\n[workspace]\nmembers = [\"crates/*\"]\n";
        assert_eq!(command(root), "cargo test --workspace");
        let defaults = "[workspace]\nmembers = [\"a\", \"b\"]\ndefault-members = [\"a\"]\n";
        assert_eq!(command(defaults), "cargo test --workspace");
        assert_eq!(
            command("[workspace]\nmembers = [\"a\", \"b\"]\n"),
            "cargo test"
        );
        assert_eq!(command("[package]\nname = \"one\"\n"), "cargo test");
        assert_eq!(
            command("[package]\nname = \"one\"\n[workspace]\n"),
            "cargo test"
        );
        assert_eq!(command("not toml ["), "cargo test");
    }

    #[test]
    fn symlinked_manifests_and_dirs_are_not_followed() {
        let host = tempfile::tempdir().unwrap();
        std::fs::write(
            host.path().join("package.json"),
            r#"{"scripts":{"test":"jest"}}"#,
        )
        .unwrap();
        std::fs::write(host.path().join("a.test.js"), "").unwrap();
        std::fs::write(host.path().join("Cargo.toml"), "[package]").unwrap();
        let d = tempfile::tempdir().unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, d.path().join(name)).unwrap();
        };
        // A FIFO (a read would block) rather than /dev/zero, so a regression hangs instead of
        // eating the machine's memory; the integration test covers /dev/zero under a limit.
        let fifo = host.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        link(&fifo, "package.json");
        link(&host.path().join("Cargo.toml"), "Cargo.toml");
        link(&host.path().join("Cargo.toml"), "go.mod");
        link(&host.path().join("Cargo.toml"), "pyproject.toml");
        link(host.path(), "tests");
        link(&host.path().join("a.test.js"), "b.test.js");
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = d.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(detect(&dir));
        });
        let found = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("detection did not finish");
        assert_eq!(found, None);
        std::fs::remove_file(d.path().join("package.json")).unwrap();
        link(&host.path().join("package.json"), "package.json");
        assert_eq!(detect(d.path()), None);
    }

    #[test]
    fn python_tests_dir_without_init_uses_start_dir() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("tests")).unwrap();
        std::fs::write(d.path().join("tests/test_a.py"), "").unwrap();
        let (cmd, fw) = detect(d.path()).unwrap();
        if fw == "unittest" {
            assert_eq!(cmd, "python3 -m unittest discover -s tests -v");
        } else {
            assert_eq!(fw, "pytest");
        }
    }
}
