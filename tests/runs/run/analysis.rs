//! A run's analysis is made from its parent's and the diff (O(diff)), and is what a full
//! analysis of the commit gives: over a history of 50 commits of real code in several languages
//! (this crate's sources and the analyser's fixtures) with additions, edits, deletions, renames,
//! mode changes, manifests, skipped files, a merge and a change of the `[analysis]` settings.

use crate::common::World;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Deterministic choices (xorshift), so the history is the same on every machine.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Real source files: the analyser's fixtures (eight languages) and this crate's Rust.
fn pool() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![
        root.join("tests/fixtures/analysis"),
        root.join("crates/gs-analysis/src"),
        root.join("crates/gs-git/src"),
    ];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Ok(text) = std::fs::read_to_string(&p) {
                out.push((e.file_name().to_string_lossy().into_owned(), text));
            }
        }
    }
    out
}

const DEPS: &[&str] = &["flask", "django", "numpy", "requests", "pytest", "fastapi"];

fn config(max_complexity: u32) -> String {
    format!("[test]\ncommand = \"true\"\n[analysis]\nexclude = [\"gen/**\"]\nmax_complexity = {max_complexity}\n")
}

#[test]
fn a_run_analyses_the_diff_and_agrees_with_a_full_analysis_over_50_commits() {
    let w = World::new();
    let repo = w.new_repo("history");
    let base = w.commit(&repo, &[(".sandbox.toml", &config(10))], "configure");
    let pool = pool();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut files: Vec<String> = Vec::new();
    let put = |rel: &str, body: &[u8]| {
        let p = repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    for i in 1..=50 {
        let ops = if i % 7 == 0 { 3 } else { 1 };
        for _ in 0..ops {
            let pick = rng.below(pool.len());
            let (name, text) = &pool[pick];
            match rng.below(10) {
                0..=2 => {
                    let rel = format!("pkg{}/{name}", rng.below(4));
                    put(&rel, text.as_bytes());
                    files.push(rel);
                }
                3 | 4 if !files.is_empty() => {
                    let rel = &files[rng.below(files.len())];
                    let more = format!(
                        "{}\n// {i}\n",
                        text.lines().take(40).collect::<Vec<_>>().join("\n")
                    );
                    let old = std::fs::read_to_string(repo.join(rel)).unwrap_or_default();
                    put(rel, format!("{old}{more}").as_bytes());
                }
                5 if !files.is_empty() => {
                    let rel = files.swap_remove(rng.below(files.len()));
                    w.git(&repo, &["rm", "-q", &rel]);
                }
                6 if !files.is_empty() => {
                    let k = rng.below(files.len());
                    let name = Path::new(&files[k])
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    let to = format!("moved{}/{name}", rng.below(3));
                    if !files.contains(&to) {
                        std::fs::create_dir_all(repo.join(&to).parent().unwrap()).unwrap();
                        w.git(&repo, &["mv", &files[k], &to]);
                        files[k] = to;
                    }
                }
                7 => {
                    let deps: Vec<&str> =
                        DEPS.iter().filter(|_| rng.below(2) == 0).copied().collect();
                    let which = [
                        "requirements.txt",
                        "web/package.json",
                        "sub/requirements.txt",
                    ][rng.below(3)];
                    let body = if which.ends_with(".json") {
                        let map: BTreeMap<&str, &str> = deps.iter().map(|d| (*d, "1")).collect();
                        serde_json::json!({"dependencies": map}).to_string()
                    } else {
                        deps.join("\n")
                    };
                    put(which, body.as_bytes());
                }
                _ => match rng.below(6) {
                    0 => put(&format!("bin{i}.c"), b"int x;\0\0binary"),
                    1 => put(&format!("gen/g{i}.py"), text.as_bytes()),
                    2 => put(&format!("vendor/v{i}.py"), text.as_bytes()),
                    3 => put(&format!("z{i}.min.js"), b"var a=1;"),
                    4 if !files.is_empty() => {
                        let rel = files[rng.below(files.len())].clone();
                        w.git(&repo, &["update-index", "--chmod=+x", &rel]);
                    }
                    _ => {
                        let link = repo.join(format!("link{i}.py"));
                        std::os::unix::fs::symlink("nowhere.py", link).unwrap();
                    }
                },
            }
        }
        if i == 20 {
            // More issues than the record lists (1,000): the list and the count of the rest.
            let many: String = (0..1100)
                .map(|k| format!("def f{k}(a, b, c, d, e, f):\n    return a\n\n"))
                .collect();
            put("many.py", many.as_bytes());
        }
        if i == 30 {
            w.git(&repo, &["rm", "-q", "many.py"]);
        }
        if i == 25 {
            // Other settings: analysed whole once, then from this commit again.
            put(".sandbox.toml", config(4).as_bytes());
        }
        w.own(&repo);
        w.git(&repo, &["add", "-A"]);
        if i == 40 {
            // A merge: its analysis comes from its first parent.
            w.git(
                &repo,
                &[
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    "before the side branch",
                ],
            );
            w.git(&repo, &["checkout", "-q", "-b", "side", "HEAD~1"]);
            put("side.py", b"def side(x):\n    return x\n");
            w.git(&repo, &["add", "side.py"]);
            w.git(&repo, &["commit", "-q", "-m", "on the side"]);
            w.git(&repo, &["checkout", "-q", "main"]);
            w.git(
                &repo,
                &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
            );
        } else {
            w.git(
                &repo,
                &[
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    &format!("change {i}"),
                ],
            );
        }
    }
    let range = format!("{base}..main");
    let commits: Vec<String> = w
        .git(&repo, &["rev-list", "--reverse", "--topo-order", &range])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(commits.len() >= 50, "{}", commits.len());
    let o = w.sandbox(&repo, &["run", "-j", "1", &range]);
    assert_eq!(o.code, 0, "{o:?}");

    for (n, c) in commits.iter().enumerate() {
        let note = w.note(&repo, c).expect("a note");
        let full = w.sandbox(&repo, &["analyze", c, "--json"]);
        assert_eq!(full.code, 0, "{full:?}");
        assert_eq!(
            note["analysis"],
            full.json(),
            "commit {n} ({c}) of the history"
        );
    }
    let last = w.note(&repo, "main").unwrap();
    assert!(
        last["analysis"]["files_analyzed"].as_u64().unwrap() > 10,
        "{last}"
    );

    // How each was made: whole for the first and at the settings change, else from the parent,
    // reading only the changed files.
    let events = w.sandbox(
        &repo,
        &[
            "events",
            "--kind",
            "analysis.completed",
            "--json",
            "--limit",
            "200",
        ],
    );
    let mut how: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for line in events.stdout.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        how.insert(e["commit"].as_str().unwrap().to_string(), e["data"].clone());
    }
    let (mut full, mut incremental) = (Vec::new(), 0);
    for (n, c) in commits.iter().enumerate() {
        let Some(data) = how.get(c) else {
            // A tree run before (an empty commit) takes that run's result, analysis included.
            let note = w.note(&repo, c).unwrap();
            assert!(
                note["cached_from"].is_string(),
                "commit {n}: no analysis event"
            );
            continue;
        };
        let changed = w
            .git(
                &repo,
                &["diff", "--name-only", "--no-renames", &format!("{c}^"), c],
            )
            .lines()
            .count() as u64;
        match data["how"].as_str() {
            Some("incremental") => {
                incremental += 1;
                assert!(
                    data["files_read"].as_u64().unwrap() <= 2 * changed,
                    "commit {n}: {data} for {changed} changed files"
                )
            }
            Some("full") => full.push(n),
            _ => panic!("commit {n}: {data}"),
        }
    }
    let message = |n: usize| w.git(&repo, &["log", "-1", "--format=%s", &commits[n]]);
    let full_messages: Vec<String> = full
        .iter()
        .map(|n| message(*n).trim().to_string())
        .collect();
    assert_eq!(full_messages, ["change 1", "change 25"], "{full:?}");
    assert!(
        incremental >= 40,
        "{incremental} of {} from the parent",
        commits.len()
    );
}
