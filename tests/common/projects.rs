//! Projects several test files build: a pytest package whose suite is slow but for one file.

use super::World;
use std::path::Path;

/// The `calc` package's `[tool.pytest.ini_options]` (src layout, tests under tests/).
pub const CALC_PYPROJECT: &str =
    "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\npythonpath = [\"src\"]\n";

impl World {
    /// A pytest package `calc` (src layout) with five modules `a` … `e` and a test file for
    /// each (`tests/test_<m>.py`, one test, or two with `again`); but for test_c.py, each sleeps
    /// `sleep` seconds, so the whole suite is slow next to one file. `config` is the
    /// `.sandbox.toml`; `extra` files join the same commit.
    pub fn calc_package(
        &self,
        repo: &Path,
        config: &str,
        sleep: f32,
        again: bool,
        extra: &[(&str, &str)],
    ) -> String {
        let mut files: Vec<(String, String)> = vec![
            (".sandbox.toml".into(), config.into()),
            ("pyproject.toml".into(), CALC_PYPROJECT.into()),
            ("src/calc/__init__.py".into(), String::new()),
        ];
        files.extend(extra.iter().map(|(p, b)| (p.to_string(), b.to_string())));
        for m in ["a", "b", "c", "d", "e"] {
            files.push((
                format!("src/calc/{m}.py"),
                format!("def f{m}(x):\n    return x + 1\n"),
            ));
            let slow = if m == "c" {
                String::new()
            } else {
                format!("    time.sleep({sleep})\n")
            };
            let again = if again {
                format!("\n\ndef test_f{m}_again():\n    assert f{m}(2) == 3\n")
            } else {
                String::new()
            };
            files.push((
                format!("tests/test_{m}.py"),
                format!("import time\n\nfrom calc.{m} import f{m}\n\n\ndef test_f{m}():\n{slow}    assert f{m}(1) == 2\n{again}"),
            ));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        self.git(repo, &["rm", "-q", "tests/test_example.py"]);
        self.commit(repo, &refs, "a package and its tests")
    }

    /// A [`World::calc_package`] (pytest from [`World::with_test_python`]) whose last commit
    /// breaks `calc/c.py`: phase one (tests/test_c.py, the one file that imports it) fails at
    /// its first test, `test_fc`, then its second, `test_fc_slow`, sleeps `sleep` seconds and
    /// passes; phase two (four files of `sleep` seconds each) runs on. Nothing is watched, so only
    /// what is asked for runs. Returns the breaking commit's id.
    pub fn fails_fast_then_slow(&self, repo: &Path, sleep: f32) -> String {
        let config = "[test]\ncommand = \"python3 -m pytest\"\ntimeout = \"120s\"\n[analysis]\nenabled = false\n[watch]\nbranches = [\"nothing\"]\n";
        self.calc_package(repo, config, sleep, false, &[]);
        // test_c.py's second test sleeps: phase one goes on after its first failure.
        let slow_c = format!("import time\n\nfrom calc.c import fc\n\n\ndef test_fc():\n    assert fc(1) == 2\n\n\ndef test_fc_slow():\n    time.sleep({sleep})\n");
        self.commit(
            repo,
            &[("tests/test_c.py", slow_c.as_str())],
            "a slow test beside test_fc",
        );
        self.commit(
            repo,
            &[("src/calc/c.py", "def fc(x):\n    return x + 2\n")],
            "break c",
        )
    }
}
