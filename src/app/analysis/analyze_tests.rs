//! A commit's analysis made from its parent's tally and the diff against one made from scratch
//! (its own index, nothing cached), over the changes that are easy to get wrong.

use super::*;
use gs_git::testutil::git;
use std::path::PathBuf;

fn write(dir: &Path, rel: &str, body: &[u8]) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

fn rm(dir: &Path, rel: &str) {
    let p = dir.join(rel);
    if p.is_dir() && !p.is_symlink() {
        std::fs::remove_dir_all(p).unwrap();
    } else {
        std::fs::remove_file(p).unwrap();
    }
}

fn cfg(max_complexity: u64) -> AnalysisConfig {
    AnalysisConfig {
        enabled: true,
        exclude: vec!["gen/**".into()],
        max_complexity,
        max_function_lines: 4,
        max_parameters: 1,
    }
}

const COMPLEX_PY: &[u8] = b"def f(a, b):\n    if a and b:\n        return 1\n    for x in a:\n        if x:\n            return x\n    return 2\n\nclass C:\n    pass\n";

struct Repo {
    dir: tempfile::TempDir,
    /// The index of the runs, which keeps tallies and blob results from commit to commit.
    index: Index,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main", "work"]);
        let index = Index::open_file(&dir.path().join("index.db")).unwrap();
        Repo { dir, index }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Commits the work tree as it is and checks its analysis from the parent against one
    /// from scratch; returns how it was made and how many files it folded.
    fn commit(&self, what: &str, cfg: &AnalysisConfig) -> (How, usize) {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", what]);
        let repo = gs_git::open(&work).unwrap();
        let head = gs_git::resolve_commit(&repo, "HEAD").unwrap();
        let info = gs_git::commit_info(&repo, head).unwrap();
        let got = analyze_commit(
            &self.index,
            &repo,
            info.tree,
            info.parents.first().copied(),
            cfg,
        )
        .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let fresh = Index::open_file(&scratch.path().join("index.db")).unwrap();
        let want = analyze_tree(&fresh, &repo, info.tree, cfg).unwrap();
        assert_eq!(
            serde_json::to_value(&got.analysis).unwrap(),
            serde_json::to_value(&want).unwrap(),
            "after {what:?} ({:?})",
            got.how
        );
        (got.how, got.files)
    }
}

#[test]
fn analysis_from_the_parent_and_the_diff_equals_analysis_from_scratch() {
    let r = Repo::new();
    let w = r.work();
    let c = cfg(2);
    write(&w, "a.py", COMPLEX_PY);
    write(&w, "b.js", b"function g(x, y) { return x ? y : 0; }\n");
    write(
        &w,
        "lib/c.rs",
        b"fn h(x: bool) -> u8 { if x { 1 } else { 2 } }\n",
    );
    write(&w, "requirements.txt", b"flask\nnumpy\n");
    write(
        &w,
        "web/package.json",
        br#"{"dependencies":{"react":"18"}}"#,
    );
    write(&w, "gen/g.py", b"def gen(): pass\n");
    write(&w, "vendor/v.go", b"package v\n");
    write(&w, "README.md", b"# hi\n");
    write(&w, "bin.c", b"int x;\0\0\0");
    assert_eq!(r.commit("first", &c), (How::Full, 9));

    write(
        &w,
        "a.py",
        &[COMPLEX_PY, b"\ndef broken(:\n    pass\n".as_slice()].concat(),
    );
    assert_eq!(r.commit("a syntax error", &c), (How::Incremental, 2));
    git(&w, &["mv", "lib/c.rs", "lib/d.rs"]);
    assert_eq!(r.commit("rename", &c), (How::Incremental, 2));
    git(&w, &["update-index", "--chmod=+x", "b.js"]);
    assert_eq!(r.commit("mode change only", &c), (How::Incremental, 0));
    rm(&w, "requirements.txt");
    write(&w, "web/package.json", br#"{"dependencies":{"vue":"3"}}"#);
    assert_eq!(r.commit("manifests", &c).0, How::Incremental);
    rm(&w, "a.py");
    std::os::unix::fs::symlink("b.js", w.join("a.py")).unwrap();
    assert_eq!(r.commit("file to symlink", &c), (How::Incremental, 1));
    rm(&w, "lib");
    write(&w, "lib", b"now a file\n");
    write(&w, "x.py/inner.py", COMPLEX_PY);
    assert_eq!(
        r.commit("directory to file, new dir", &c).0,
        How::Incremental
    );
    rm(&w, "x.py");
    write(&w, "x.py", COMPLEX_PY);
    write(&w, "bin.c", b"int main(void) { return 0; }\n");
    assert_eq!(
        r.commit("dir to file, binary to text", &c).0,
        How::Incremental
    );
    assert_eq!(r.commit("empty", &c), (How::Incremental, 0));
    write(&w, "gen/moved.py", COMPLEX_PY);
    write(&w, "copy.py", COMPLEX_PY);
    rm(&w, "x.py");
    assert_eq!(
        r.commit("into an excluded dir; same blob", &c).0,
        How::Incremental
    );

    // Other settings: the tree is analysed whole once, then from it again.
    let other = cfg(1);
    write(&w, "b.js", b"function g(x) { return x; }\n");
    assert_eq!(r.commit("thresholds changed", &other).0, How::Full);
    write(&w, "b.js", b"function g(x) { return x ? 1 : 2; }\n");
    assert_eq!(r.commit("after the change", &other), (How::Incremental, 2));

    for entry in std::fs::read_dir(&w).unwrap().flatten() {
        if entry.file_name() != ".git" {
            rm(&w, &entry.file_name().to_string_lossy());
        }
    }
    assert_eq!(r.commit("everything deleted", &other).0, How::Incremental);
}

#[test]
fn an_old_file_missing_from_the_cache_is_parsed_again_and_taken_out_first() {
    let r = Repo::new();
    let w = r.work();
    let c = cfg(2);
    let other = b"def g(a, b, c):\n    return a or b or c\n";
    write(&w, "a.py", COMPLEX_PY);
    write(&w, "b.py", other);
    assert_eq!(r.commit("first", &c), (How::Full, 2));
    // The old blob's cached result is unreadable; the new one's is cached (b.py has it).
    let old = git(&w, &["rev-parse", "HEAD:a.py"]);
    let spoiled = (old.trim().to_string(), cache_key("a.py"), "{".to_string());
    r.index.put_analysis(&[spoiled]).unwrap();
    write(&w, "a.py", other);
    assert_eq!(r.commit("a.py as b.py", &c), (How::Incremental, 2));
}
