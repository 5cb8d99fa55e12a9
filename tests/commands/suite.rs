//! The test suite's own layout: a few test binaries, one per folder of `tests/` with a `main.rs`
//! (each links the whole crate and `tests/common`, so every binary costs link time and disk),
//! and every file under a group compiled into it (a file no `mod` names is never run).

use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The groups: the folders of `tests/` with a `main.rs`.
fn groups(tests: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(tests)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("main.rs").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The `.rs` files directly in `dir` (without `main.rs`), by stem.
fn rs_stems(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|s| s != "main")
        .collect();
    out.sort();
    out
}

/// Whether `source` declares `mod name;` (with or without `pub`, after a `#[path]` or not).
fn declares(source: &str, name: &str) -> bool {
    source.lines().any(|l| {
        let l = l.trim();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        l == format!("mod {name};")
    })
}

/// What is wrong with the layout under `tests`: files that would be binaries of their own, and
/// files of a group that no `mod` names.
fn problems(tests: &Path) -> Vec<String> {
    let groups = groups(tests);
    let mut out = Vec::new();
    for stem in rs_stems(tests) {
        out.push(format!(
            "tests/{stem}.rs is a test binary of its own: move it into a group with `git mv tests/{stem}.rs tests/GROUP/{stem}.rs`, \
             write `use crate::common;` for its `mod common;` and add `mod {stem};` to tests/GROUP/main.rs (groups: {})",
            groups.join(", ")
        ));
    }
    for g in &groups {
        let dir = tests.join(g);
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
        for m in rs_stems(&dir) {
            if !declares(&main, &m) {
                out.push(format!(
                    "tests/{g}/{m}.rs is never compiled: add `mod {m};` to tests/{g}/main.rs"
                ));
                continue;
            }
            let parent = std::fs::read_to_string(dir.join(format!("{m}.rs"))).unwrap();
            for sub in rs_stems(&dir.join(&m)) {
                if !declares(&parent, &sub) {
                    out.push(format!(
                        "tests/{g}/{m}/{sub}.rs is never compiled: add `mod {sub};` to tests/{g}/{m}.rs"
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_test_file_is_a_module_of_one_of_a_few_binaries() {
    let tests = tests_dir();
    assert!(groups(&tests).len() <= 6, "{:?}", groups(&tests));
    let found = problems(&tests);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The check sees a file that would be a binary of its own and files no `mod` names.
#[test]
fn a_stray_binary_and_files_no_mod_names_are_told() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path();
    std::fs::create_dir_all(t.join("g/m")).unwrap();
    std::fs::create_dir_all(t.join("common")).unwrap();
    std::fs::write(t.join("common/mod.rs"), "").unwrap();
    std::fs::write(t.join("stray.rs"), "").unwrap();
    std::fs::write(
        t.join("g/main.rs"),
        "#[path = \"../common/mod.rs\"]\nmod common;\n\nmod m;\n",
    )
    .unwrap();
    std::fs::write(t.join("g/m.rs"), "#[path = \"m/a.rs\"]\nmod a;\n").unwrap();
    std::fs::write(t.join("g/m/a.rs"), "").unwrap();
    std::fs::write(t.join("g/m/b.rs"), "").unwrap();
    std::fs::write(t.join("g/lost.rs"), "").unwrap();
    let found = problems(t);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with("tests/stray.rs is a test binary of its own: move it into a group"),
        "{found:#?}"
    );
    assert!(found[0].ends_with("(groups: g)"), "{found:#?}");
    assert_eq!(
        found[1],
        "tests/g/lost.rs is never compiled: add `mod lost;` to tests/g/main.rs"
    );
    assert_eq!(
        found[2],
        "tests/g/m/b.rs is never compiled: add `mod b;` to tests/g/m.rs"
    );
}
