//! Choosing a test command for a tree that does not name one in `.sandbox.toml`.

use std::path::Path;
use std::process::{Command, Stdio};

/// The command and the framework it runs, or `None` when the tree has no tests we recognise.
pub fn detect(dir: &Path) -> Option<(String, &'static str)> {
    if dir.join("Cargo.toml").is_file() {
        return Some(("cargo test".into(), "cargo"));
    }
    if dir.join("go.mod").is_file() {
        return Some(("go test ./...".into(), "go"));
    }
    if let Some(found) = from_package_json(dir) {
        return Some(found);
    }
    if let Some(found) = python(dir) {
        return Some(found);
    }
    if has_file(
        dir,
        &|n| n.ends_with(".test.js") || n.ends_with(".test.mjs"),
        2,
    ) {
        return Some(("node --test".into(), "node"));
    }
    None
}

fn from_package_json(dir: &Path) -> Option<(String, &'static str)> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let script = json.pointer("/scripts/test")?.as_str()?;
    if script.contains("no test specified") {
        return None;
    }
    let framework = if script.contains("vitest") {
        "vitest"
    } else if script.contains("jest") {
        "jest"
    } else if script.contains("node --test") {
        "node"
    } else {
        "npm"
    };
    Some(("npm test".into(), framework))
}

fn python(dir: &Path) -> Option<(String, &'static str)> {
    let tests = dir.join("tests");
    let has_tests_dir = tests.is_dir();
    let is_test =
        |n: &str| (n.starts_with("test_") || n.ends_with("_test.py")) && n.ends_with(".py");
    if !has_tests_dir && !has_file(dir, &is_test, 1) {
        return None;
    }
    let configured_for_pytest = dir.join("pytest.ini").is_file()
        || dir.join("conftest.py").is_file()
        || std::fs::read_to_string(dir.join("pyproject.toml"))
            .is_ok_and(|t| t.contains("[tool.pytest"));
    if configured_for_pytest || pytest_importable() {
        return Some(("python3 -m pytest -q -rfE".into(), "pytest"));
    }
    // unittest's discovery does not enter folders without __init__.py, so start in tests/.
    if has_tests_dir && !tests.join("__init__.py").is_file() {
        return Some((
            "python3 -m unittest discover -s tests -v".into(),
            "unittest",
        ));
    }
    Some(("python3 -m unittest discover -v".into(), "unittest"))
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
        assert_eq!(detect(d.path()), Some(("npm test".into(), "vitest")));
        std::fs::write(d.path().join("Cargo.toml"), "[package]").unwrap();
        assert_eq!(detect(d.path()).unwrap().1, "cargo");
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
