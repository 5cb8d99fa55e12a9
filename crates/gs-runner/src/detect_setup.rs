//! The setup step `init` proposes for a work tree: what its lockfiles and manifests say installs
//! the project's dependencies, so a newcomer's first run finds the test runner the project's
//! package manager would have installed. Files are read without following symlinks, up to a cap.

use gs_util::{beneath::exists_regular_beneath, beneath::read_beneath};
use std::path::Path;

/// The most of a manifest read.
const MANIFEST_CAP: u64 = 1024 * 1024;

/// A proposed `[test] setup`: the command, and why (the file that chose it).
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub command: String,
    pub why: String,
    /// The Python to run the tests with, when the setup makes a virtual environment.
    pub python: Option<&'static str>,
    /// Whether what the setup installs names pytest (so the tests are pytest's).
    pub pytest: bool,
}

/// Where the proposed virtual environment's Python is (inside the tree, so the setup's layer
/// keeps it).
pub const VENV_PYTHON: &str = ".venv/bin/python";

/// The setup the tree's files call for, or `None` when they call for none.
pub fn propose(dir: &Path) -> Option<Proposal> {
    propose_with(dir, &|_| true)
}

/// [`propose`] on a machine whose runs find a program named `p` when `has_tool(p)`: a Python
/// project locked by uv or poetry, neither of which is here, is installed by pip into `.venv`
/// from its `pyproject.toml` (the lock's exact versions need the tool; the why says so).
pub fn propose_with(dir: &Path, has_tool: &dyn Fn(&str) -> bool) -> Option<Proposal> {
    node(dir)
        .or_else(|| python(dir, has_tool))
        .or_else(|| rust(dir))
        .or_else(|| go(dir))
}

/// The build step (`[test] build`) the project's CI runs before its tests: a GitHub workflow
/// with a step running the package.json's `build` script (`pnpm build`, `npm run build`, …)
/// before one running its tests, as zod's does. The command is the workflow's own.
pub fn propose_build(dir: &Path) -> Option<Proposal> {
    let bytes = read_beneath(dir, "package.json", MANIFEST_CAP).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    json.pointer("/scripts/build")?.as_str()?;
    // Listed only through real directories (the file itself is read beneath, link-free).
    let real_dir =
        |p: &str| std::fs::symlink_metadata(dir.join(p)).is_ok_and(|m| m.file_type().is_dir());
    if !real_dir(".github") || !real_dir(".github/workflows") {
        return None;
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.join(".github/workflows"))
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .filter(|n| !n.chars().any(char::is_control))
        .take(50)
        .collect();
    // The test workflows first (`test.yml`, `ci.yml`), then the others by name.
    names.sort_by_key(|n| (!(n.contains("test") || n.starts_with("ci")), n.clone()));
    names.into_iter().find_map(|name| {
        let path = format!(".github/workflows/{name}");
        let text = read(dir, &path);
        let runs: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("- run:")
                    .or_else(|| l.trim().strip_prefix("run:"))
            })
            .map(str::trim)
            .collect();
        let build = runs.iter().position(|r| is_script(r, "build"))?;
        runs[build + 1..]
            .iter()
            .any(|r| is_script(r, "test"))
            .then(|| Proposal {
                command: runs[build].to_string(),
                why: format!("{path} runs `{}` before the tests", runs[build]),
                python: None,
                pytest: false,
            })
    })
}

/// Whether a workflow's `run:` line runs the package.json script `name` and nothing else.
fn is_script(run: &str, name: &str) -> bool {
    let words: Vec<&str> = run.split_whitespace().collect();
    match words.as_slice() {
        ["npm", "test"] => name == "test",
        [pm, script] => ["pnpm", "yarn", "bun"].contains(pm) && *script == name,
        [pm, "run", script] => ["pnpm", "yarn", "bun", "npm"].contains(pm) && *script == name,
        _ => false,
    }
}

/// Cargo's downloads, into the run's home (where the branch's caches carry them): the crates
/// `Cargo.lock` locks, else what the manifest's dependency tables name.
fn rust(dir: &Path) -> Option<Proposal> {
    if exists_regular_beneath(dir, "Cargo.lock") {
        return plain(
            "cargo fetch --locked",
            "Cargo.lock: cargo downloads exactly the crates it locks",
        );
    }
    let manifest: toml::Table = read(dir, "Cargo.toml").parse().ok()?;
    let names_some = |t: Option<&toml::Value>| {
        ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .any(|k| {
                t.and_then(|t| t.get(*k))
                    .and_then(|d| d.as_table())
                    .is_some_and(|d| !d.is_empty())
            })
    };
    let workspace = manifest.get("workspace");
    let named = names_some(Some(&toml::Value::Table(manifest.clone())))
        || names_some(workspace)
        || workspace
            .and_then(|w| w.get("members"))
            .and_then(|m| m.as_array())
            .is_some_and(|m| !m.is_empty());
    named.then(|| Proposal {
        command: "cargo fetch".into(),
        why: "Cargo.toml names dependencies and there is no Cargo.lock, so cargo resolves them"
            .into(),
        python: None,
        pytest: false,
    })
}

/// Go's module downloads, into the run's home: what `go.sum` sums (a module without one
/// needs nothing).
fn go(dir: &Path) -> Option<Proposal> {
    (exists_regular_beneath(dir, "go.mod") && exists_regular_beneath(dir, "go.sum")).then(|| {
        Proposal {
            command: "go mod download".into(),
            why: "go.sum: go downloads exactly the modules it sums".into(),
            python: None,
            pytest: false,
        }
    })
}

fn plain(command: &str, why: &str) -> Option<Proposal> {
    Some(Proposal {
        command: command.into(),
        why: why.into(),
        python: None,
        pytest: false,
    })
}

fn node(dir: &Path) -> Option<Proposal> {
    let has = |f: &str| exists_regular_beneath(dir, f);
    if has("pnpm-lock.yaml") {
        return plain(
            "pnpm install --frozen-lockfile",
            "pnpm-lock.yaml: pnpm installs exactly what it locks",
        );
    }
    if has("yarn.lock") {
        // Yarn 2+ (a .yarnrc.yml) renamed --frozen-lockfile.
        return if has(".yarnrc.yml") {
            plain(
                "yarn install --immutable",
                "yarn.lock and .yarnrc.yml: yarn installs exactly what it locks",
            )
        } else {
            plain(
                "yarn install --frozen-lockfile",
                "yarn.lock: yarn installs exactly what it locks",
            )
        };
    }
    if has("bun.lockb") || has("bun.lock") {
        return plain(
            "bun install --frozen-lockfile",
            "bun's lockfile: bun installs exactly what it locks",
        );
    }
    if has("package-lock.json") || has("npm-shrinkwrap.json") {
        return plain(
            "npm ci",
            "package-lock.json: npm installs exactly what it locks",
        );
    }
    let bytes = read_beneath(dir, "package.json", MANIFEST_CAP).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let any = |k: &str| {
        json.get(k)
            .and_then(|v| v.as_object())
            .is_some_and(|m| !m.is_empty())
    };
    if any("dependencies") || any("devDependencies") {
        return plain(
            "npm install",
            "package.json names dependencies and there is no lockfile, so npm resolves them",
        );
    }
    None
}

/// The extras and dependency groups whose names say they are for the tests, best first.
const TEST_EXTRAS: &[&str] = &["test", "tests", "testing", "dev"];

/// Requirements files that hold what the tests need, best first.
const REQUIREMENTS: &[&str] = &[
    "requirements-dev.txt",
    "requirements-test.txt",
    "requirements_dev.txt",
    "requirements_test.txt",
    "test-requirements.txt",
    "dev-requirements.txt",
    "requirements/test.txt",
    "requirements/dev.txt",
    "requirements.txt",
];

fn python(dir: &Path, has_tool: &dyn Fn(&str) -> bool) -> Option<Proposal> {
    let has = |f: &str| exists_regular_beneath(dir, f);
    let pyproject: Option<toml::Table> = read(dir, "pyproject.toml").parse().ok();
    let mut instead = None;
    if has("uv.lock") {
        if has_tool("uv") {
            // `uv sync` installs the `dev` group alone by default: a test group is named.
            let group = pyproject
                .as_ref()
                .and_then(|t| t.get("dependency-groups")?.as_table().cloned())
                .and_then(|groups| {
                    TEST_EXTRAS
                        .iter()
                        .find(|n| **n != "dev" && groups.contains_key(**n))
                        .map(|n| n.to_string())
                });
            let (command, why) = match group {
                Some(g) => (
                    format!("uv sync --frozen --group {g}"),
                    format!("uv.lock: uv installs exactly what it locks into .venv, with the `{g}` dependency group"),
                ),
                None => (
                    "uv sync --frozen".to_string(),
                    "uv.lock: uv installs exactly what it locks into .venv".to_string(),
                ),
            };
            return Some(Proposal {
                command,
                why,
                python: Some(VENV_PYTHON),
                pytest: read(dir, "uv.lock").contains("name = \"pytest\""),
            });
        }
        instead = Some("uv.lock, but uv is not installed here (install it for the locked versions): pip installs");
    }
    if has("poetry.lock") {
        if has_tool("poetry") {
            return Some(Proposal {
                command: "poetry config virtualenvs.in-project true --local && poetry install"
                    .into(),
                why: "poetry.lock: poetry installs exactly what it locks into .venv".into(),
                python: Some(VENV_PYTHON),
                pytest: read(dir, "poetry.lock").contains("name = \"pytest\""),
            });
        }
        instead = instead.or(Some(
            "poetry.lock, but poetry is not installed here (install it for the locked versions): pip installs",
        ));
    }
    let installable = has("setup.py")
        || pyproject
            .as_ref()
            .is_some_and(|t| t.contains_key("project") || t.contains_key("build-system"));
    let mut args: Vec<String> = Vec::new();
    let mut why = String::new();
    let mut pytest = false;
    // An extra is installed with the project; a dependency group (PEP 735) is listed as it is.
    let extra = pyproject.as_ref().and_then(|t| {
        let extras = t.get("project")?.get("optional-dependencies")?.as_table()?;
        TEST_EXTRAS
            .iter()
            .find_map(|n| extras.get(*n).map(|v| (*n, v.clone())))
    });
    let group = pyproject.as_ref().and_then(|t| {
        let groups = t.get("dependency-groups")?.as_table()?;
        TEST_EXTRAS
            .iter()
            .find_map(|n| groups.get(*n).map(|v| (*n, v.clone())))
    });
    let names_pytest = |v: &toml::Value| {
        v.as_array().is_some_and(|a| {
            a.iter()
                .filter_map(|x| x.as_str())
                .any(|s| s.trim_start().starts_with("pytest"))
        })
    };
    if installable {
        match &extra {
            Some((name, v)) => {
                args.push(quote(&format!(".[{name}]")));
                why = format!("pyproject.toml's `{name}` extra");
                pytest |= names_pytest(v);
            }
            None => {
                args.push(".".into());
                why = if has("setup.py") {
                    "setup.py".into()
                } else {
                    "pyproject.toml".into()
                };
            }
        }
    }
    if let Some((name, v)) = &group {
        let reqs: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str())
            .map(quote)
            .collect();
        if !reqs.is_empty() {
            pytest |= names_pytest(v);
            args.extend(reqs);
            why = join_why(why, format!("pyproject.toml's `{name}` dependency group"));
        }
    }
    if let Some(req) = REQUIREMENTS.iter().find(|f| has(f)) {
        pytest |= read(dir, req)
            .lines()
            .any(|l| l.trim_start().starts_with("pytest"));
        args.push(format!("-r {req}"));
        why = join_why(why, req.to_string());
    }
    if args.is_empty() {
        return None;
    }
    // The project itself comes first in `args` when it is installable.
    let editable = if installable { "-e " } else { "" };
    Some(Proposal {
        command: format!(
            "python3 -m venv .venv && .venv/bin/python -m pip install {editable}{}",
            args.join(" ")
        ),
        why: match instead {
            Some(instead) => format!("{instead} {why} into a virtual environment in .venv"),
            None => format!("{why}: installed into a virtual environment in .venv"),
        },
        python: Some(VENV_PYTHON),
        pytest,
    })
}

fn join_why(a: String, b: String) -> String {
    if a.is_empty() {
        b
    } else {
        format!("{a} and {b}")
    }
}

fn read(dir: &Path, name: &str) -> String {
    read_beneath(dir, name, MANIFEST_CAP)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A word for `sh`, single-quoted when it holds anything but plain characters.
fn quote(s: &str) -> String {
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether a package manager installs `program` into a tree shaped like `dir`'s.
///
/// A Node script's tool comes from `node_modules/.bin`, a Python test runner from a venv: a
/// "not found" for one of them is the setup step's business.
pub fn installed_by_setup(dir: &Path, command: &str, program: &str) -> bool {
    const PYTHON_TOOLS: &[&str] = &["pytest", "py.test", "tox", "nox", "coverage", "hatch"];
    const RUNNERS: &[&str] = &["npm", "npx", "pnpm", "yarn", "bun", "node", "sh"];
    if RUNNERS.contains(&program) {
        return false;
    }
    let words = crate::toolchain::program_words(command);
    let via_script = words
        .iter()
        .any(|w| matches!(w.as_str(), "npm" | "pnpm" | "yarn" | "bun" | "npx"));
    (via_script && exists_regular_beneath(dir, "package.json"))
        || (PYTHON_TOOLS.contains(&program) && python(dir, &|_| true).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, body) in files {
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        d
    }

    /// A tree's files and the setup proposed for it.
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);

    fn command(files: &[(&str, &str)]) -> Option<String> {
        propose(tree(files).path()).map(|p| p.command)
    }

    #[test]
    fn each_lockfile_has_its_package_managers_install() {
        let pkg = ("package.json", r#"{"devDependencies":{"mocha":"*"}}"#);
        let cases: &[Case] = &[
            (&[pkg], Some("npm install")),
            (&[pkg, ("package-lock.json", "{}")], Some("npm ci")),
            (
                &[pkg, ("pnpm-lock.yaml", "")],
                Some("pnpm install --frozen-lockfile"),
            ),
            (
                &[pkg, ("yarn.lock", "")],
                Some("yarn install --frozen-lockfile"),
            ),
            (
                &[pkg, ("yarn.lock", ""), (".yarnrc.yml", "")],
                Some("yarn install --immutable"),
            ),
            (&[("package.json", r#"{"scripts":{"test":"x"}}"#)], None),
            (&[("uv.lock", "")], Some("uv sync --frozen")),
            (
                &[
                    ("uv.lock", ""),
                    (
                        "pyproject.toml",
                        "[project]\nname='c'\n[dependency-groups]\ndev=['ruff']\ntests=['pytest']\n",
                    ),
                ],
                Some("uv sync --frozen --group tests"),
            ),
            // Cargo and Go download into the run's home, which the branch's caches carry.
            (
                &[("Cargo.toml", "[package]\nname='r'\n"), ("Cargo.lock", "")],
                Some("cargo fetch --locked"),
            ),
            (
                &[("Cargo.toml", "[package]\nname='r'\n[dev-dependencies]\nitoa='1'\n")],
                Some("cargo fetch"),
            ),
            (
                &[("Cargo.toml", "[workspace]\nmembers=['a']\n")],
                Some("cargo fetch"),
            ),
            (&[("Cargo.toml", "[package]\nname='r'\n")], None),
            (
                &[("go.mod", "module x\n"), ("go.sum", "")],
                Some("go mod download"),
            ),
            (&[("go.mod", "module x\n")], None),
            (
                &[(
                    "pyproject.toml",
                    "[project]\nname='c'\n[project.optional-dependencies]\ntest=['pytest']\n",
                )],
                Some("python3 -m venv .venv && .venv/bin/python -m pip install -e '.[test]'"),
            ),
            (
                &[
                    ("setup.py", ""),
                    ("requirements-dev.txt", "-e .[socks]\npytest>=3\n"),
                ],
                Some(
                    "python3 -m venv .venv && .venv/bin/python -m pip install -e . -r requirements-dev.txt",
                ),
            ),
            (
                &[(
                    "pyproject.toml",
                    "[project]\nname='c'\n[dependency-groups]\ntests=['pytest', 'x>=1; python_version<\"4\"']\n",
                )],
                Some("python3 -m venv .venv && .venv/bin/python -m pip install -e . pytest 'x>=1; python_version<\"4\"'"),
            ),
            (&[("tests/test_a.py", "")], None),
        ];
        for (files, want) in cases {
            assert_eq!(command(files).as_deref(), *want, "{files:?}");
        }
        let p = propose(
            tree(&[(
                "pyproject.toml",
                "[project]\nname='c'\n[project.optional-dependencies]\ntest=['pytest']\n",
            )])
            .path(),
        )
        .unwrap();
        assert!(p.pytest && p.python == Some(VENV_PYTHON), "{p:?}");
    }

    /// zod's CI builds before it tests: that build is proposed; a workflow that builds after
    /// its tests, or a project without a build script, proposes none.
    #[test]
    fn the_build_the_ci_runs_before_the_tests_is_proposed() {
        let pkg = (
            "package.json",
            r#"{"scripts":{"build":"tsc","test":"vitest run"}}"#,
        );
        let zod = "jobs:\n  test:\n    steps:\n      - uses: actions/checkout@v7\n      - run: pnpm install\n      - run: pnpm build\n      - run: pnpm add typescript@5 -w\n      - run: pnpm test\n";
        let p = propose_build(tree(&[pkg, (".github/workflows/test.yml", zod)]).path()).unwrap();
        assert_eq!(p.command, "pnpm build");
        assert_eq!(
            p.why,
            ".github/workflows/test.yml runs `pnpm build` before the tests"
        );
        let after = "steps:\n  - run: npm test\n  - run: npm run build\n";
        assert_eq!(
            propose_build(tree(&[pkg, (".github/workflows/ci.yml", after)]).path()),
            None
        );
        let no_script = ("package.json", r#"{"scripts":{"test":"vitest run"}}"#);
        assert_eq!(
            propose_build(tree(&[no_script, (".github/workflows/test.yml", zod)]).path()),
            None
        );
    }

    /// A project locked by a tool this machine lacks is installed by pip from its pyproject,
    /// and the why says what the lock would need.
    #[test]
    fn a_lock_whose_tool_is_missing_is_installed_by_pip() {
        let click_like = tree(&[
            ("uv.lock", "name = \"pytest\"\n"),
            (
                "pyproject.toml",
                "[project]\nname='click'\n[dependency-groups]\ndev=['ruff']\ntests=['pytest']\n",
            ),
        ]);
        let p = propose_with(click_like.path(), &|tool| tool != "uv").unwrap();
        assert_eq!(
            p.command,
            "python3 -m venv .venv && .venv/bin/python -m pip install -e . pytest"
        );
        assert!(
            p.why.starts_with("uv.lock, but uv is not installed here"),
            "{p:?}"
        );
        assert!(p.pytest && p.python == Some(VENV_PYTHON), "{p:?}");
        let p = propose_with(click_like.path(), &|_| true).unwrap();
        assert_eq!(p.command, "uv sync --frozen --group tests");
    }
}
