//! Whether a test command is a plain `cargo test` that crate selections can be added to, and
//! the two commands of a two-phase run: the crates a change reaches (`-p`), then the rest of
//! the workspace (`--workspace --exclude`).

/// A recognised `cargo test …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CargoTest {
    /// The words before libtest's `--`, but `--workspace`/`--all`.
    before: Vec<String>,
    /// `--` and what follows it (libtest's own arguments), or nothing.
    after: Vec<String>,
    /// The command names `--workspace` (or `--all`): it tests every member.
    pub workspace: bool,
}

/// Options that pick packages or manifests themselves, so a crate list added to the command
/// would not split the same suite.
const REFUSED: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "--manifest-path",
    "-Z",
    "-C",
];

/// `command` as a `cargo test` invocation, or `None` when it is anything else (a shell line,
/// another runner, or options that pick the packages).
pub fn recognise(command: &str) -> Option<CargoTest> {
    let parsed = super::command_words(command)?;
    if parsed.program() != Some("cargo") {
        return None;
    }
    let words = &parsed.all;
    let mut i = parsed.at + 1;
    if words.get(i).is_some_and(|w| w.starts_with('+')) {
        i += 1;
    }
    if words.get(i) != Some(&"test") {
        return None;
    }
    i += 1;
    let mut before: Vec<String> = words[..i].iter().map(|w| w.to_string()).collect();
    let mut workspace = false;
    let mut rest = words[i..].iter();
    for &w in rest.by_ref() {
        if w == "--" {
            break;
        }
        let name = w.split('=').next().unwrap_or(w);
        if REFUSED.contains(&name) || (name.starts_with("-p") && !name.starts_with("--")) {
            return None;
        }
        if matches!(w, "--workspace" | "--all") {
            workspace = true;
        } else {
            before.push(w.to_string());
        }
    }
    let tail: Vec<String> = rest.map(|w| w.to_string()).collect();
    let after = if words[i..].contains(&"--") {
        std::iter::once("--".to_string()).chain(tail).collect()
    } else {
        Vec::new()
    };
    Some(CargoTest {
        before,
        after,
        workspace,
    })
}

impl CargoTest {
    fn with(&self, middle: Vec<String>) -> String {
        let mut all = self.before.clone();
        all.extend(middle);
        all.extend(self.after.iter().cloned());
        all.join(" ")
    }

    /// Phase one: the command's options for `crates` alone.
    pub fn only(&self, crates: &[String]) -> String {
        self.with(
            crates
                .iter()
                .flat_map(|c| ["-p".to_string(), c.clone()])
                .collect(),
        )
    }

    /// The command for the tests `names` (libtest's `module::test`) alone, matched exactly in
    /// the crates the command tests: a retry of the tests that failed. `None` when a name is
    /// not a plain test path (a doc-test, or anything an output may claim).
    pub fn alone(&self, names: &[String]) -> Option<String> {
        let plain = |n: &String| {
            !n.is_empty()
                && !n.starts_with(':')
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        if names.is_empty() || !names.iter().all(plain) {
            return None;
        }
        let mut all = self.before.clone();
        if self.workspace {
            all.push("--workspace".into());
        }
        all.push("--".into());
        all.extend(self.after.iter().skip(1).cloned());
        all.push("--exact".into());
        all.extend(names.iter().cloned());
        Some(all.join(" "))
    }

    /// Phase two: the whole workspace but `crates`.
    pub fn without(&self, crates: &[String]) -> String {
        let mut middle = vec!["--workspace".to_string()];
        for c in crates {
            middle.push("--exclude".into());
            middle.push(c.clone());
        }
        self.with(middle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_cargo_test_invocations_are_recognised() {
        let c = recognise("cargo test --workspace -q -- --test-threads 2").unwrap();
        assert!(c.workspace);
        let two = ["leaf".to_string(), "mid".to_string()];
        assert_eq!(
            c.only(&two),
            "cargo test -q -p leaf -p mid -- --test-threads 2"
        );
        assert_eq!(
            c.without(&two),
            "cargo test -q --workspace --exclude leaf --exclude mid -- --test-threads 2"
        );
        // A retry of two tests alone, exactly, in every crate the command tests.
        assert_eq!(
            c.alone(&["a::t1".into(), "t2".into()]).unwrap(),
            "cargo test -q --workspace -- --test-threads 2 --exact a::t1 t2"
        );
        assert_eq!(
            recognise("cargo test")
                .unwrap()
                .alone(&["t".into()])
                .unwrap(),
            "cargo test -- --exact t"
        );
        for bad in ["src/lib.rs - f (line 3)", "--ignored", "", "a;b"] {
            assert_eq!(c.alone(&[bad.into()]), None, "{bad}");
        }
        let plain = recognise("RUST_BACKTRACE=1 cargo +stable test").unwrap();
        assert!(!plain.workspace);
        assert_eq!(
            plain.without(&two[..1]),
            "RUST_BACKTRACE=1 cargo +stable test --workspace --exclude leaf"
        );
        for other in [
            "cargo nextest run",
            "cargo test -p leaf",
            "cargo test --package=leaf",
            "cargo test -pleaf",
            "cargo test --workspace --exclude slow",
            "cargo test --manifest-path a/Cargo.toml",
            "cargo build && cargo test",
            "pytest",
            "cargo test $ARGS",
        ] {
            assert_eq!(recognise(other), None, "{other}");
        }
    }
}
