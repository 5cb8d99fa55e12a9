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

/// A tool installed once into the test target's temp dir (outside /tmp, which a run sees as its
/// own empty tmpfs), by `install` when its `bin` is not there yet; its `bin`'s dir. Panics
/// naming `./test` when it cannot be installed, rather than skipping.
#[track_caller]
pub fn installed(name: &str, bin: &str, install: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let path = dir.join(bin);
    if !path.exists() {
        let o = Command::new("sh")
            .arg("-c")
            .arg(install)
            .env("DIR", &dir)
            .output()
            .unwrap();
        assert!(
            o.status.success() && path.exists(),
            "./test needs {name} (installed by the test itself from the npm registry or PyPI with `{install}`, DIR={}): {}{}",
            dir.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    path.parent().unwrap().to_path_buf()
}

/// The `bin` dir of the npm packages `./test` installs (tests/tools/package.json), after
/// checking it holds `program`: pnpm 9.15.0, yarn 1.22.22, jest 29.7.0, vitest 3.2.4, mocha
/// 12.0.3.
#[track_caller]
fn npm_bin(program: &str) -> PathBuf {
    npm(&format!(".bin/{program}"))
        .parent()
        .expect("a .bin directory")
        .to_path_buf()
}

/// The dir of a real pnpm 9.15.0 (`pnpm`), installed by `./test`.
#[track_caller]
pub fn pnpm() -> PathBuf {
    npm_bin("pnpm")
}

/// The dir of a real jest 29.7.0 (`jest`), installed by `./test`.
#[track_caller]
pub fn jest() -> PathBuf {
    npm_bin("jest")
}

/// The dir of a real vitest 3.2.4 (`vitest`), installed by `./test`.
#[track_caller]
pub fn vitest() -> PathBuf {
    npm_bin("vitest")
}

/// The dir of a real mocha 12.0.3 (`mocha`), installed by `./test`.
#[track_caller]
pub fn mocha() -> PathBuf {
    npm_bin("mocha")
}

/// The dir of a real yarn 1.22.22 (`yarn`), installed by `./test`.
#[track_caller]
pub fn yarn() -> PathBuf {
    npm_bin("yarn")
}

/// A program `./test` installed with `cargo install` (mdBook and its link check), under
/// `.test-tools/cargo/bin`.
#[track_caller]
pub fn cargo_bin(name: &str) -> PathBuf {
    let path = dir().join("cargo/bin").join(name);
    if !path.exists() {
        missing(&path.display().to_string());
    }
    path
}
