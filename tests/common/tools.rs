//! Where `./test` (the Quick start's test command) installs the tools the suite drives: a Python
//! virtual environment and npm packages under the checkout's `.test-tools/`, and Debian's
//! packages on the system. A test whose tool is missing fails with one line naming `./test`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `.test-tools/` of the checkout under test. cargo names the checkout when it runs a test too,
/// which wins over the one compiled in: a target dir shared by two checkouts keeps the binaries
/// of whichever built last.
pub fn dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join(".test-tools")
}

/// Fail the test: `what` is missing, and `./test` installs it.
#[track_caller]
pub fn missing(what: &str) -> ! {
    panic!("{what} is missing: run ./test to install it")
}

/// The virtual environment's `bin`, after checking that its python3 imports `module`.
#[track_caller]
pub fn venv_bin(module: &str) -> PathBuf {
    let bin = dir().join("venv/bin");
    let imports = Command::new(bin.join("python3"))
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        missing(&format!(
            "the Python package {} (in {})",
            module.split('.').next().unwrap_or(module),
            dir().join("venv").display()
        ));
    }
    bin
}

/// The virtual environment's python3, which imports `module`.
#[track_caller]
pub fn python(module: &str) -> PathBuf {
    venv_bin(module).join("python3")
}

/// A file of the npm packages (`@octokit/openapi/generated/api.github.com.json`, `.bin/prism`).
#[track_caller]
pub fn npm(rel: &str) -> PathBuf {
    let path = dir().join("npm/node_modules").join(rel);
    if !path.exists() {
        missing(&path.display().to_string());
    }
    path
}

/// A program of a Debian package (`/usr/bin/chromedriver` of chromium-driver).
#[track_caller]
pub fn debian(path: &str, package: &str) -> PathBuf {
    if !Path::new(path).exists() {
        missing(&format!("{path} (Debian's {package})"));
    }
    PathBuf::from(path)
}
