//! The crates of a Cargo workspace and their path dependencies, read from the members'
//! Cargo.toml: which crates a change reaches (the crates it changed, and every crate that
//! depends on one of those, directly or not). An integration test links its whole crate, so the
//! crate is the finest unit a change can be traced to.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One member of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    pub name: String,
    /// Its directory in the tree ("" for the root package).
    pub dir: String,
    /// The members it depends on through a path (normal, dev or build dependencies).
    deps: BTreeSet<String>,
}

/// A workspace as its manifests describe it.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    /// By name.
    pub crates: BTreeMap<String, Crate>,
    /// The root Cargo.toml is a package too: a plain `cargo test` tests that one only.
    pub root_package: bool,
    /// `[workspace] default-members` is set: a plain `cargo test` tests those only.
    pub default_members: bool,
}

/// `path` relative to `dir`, as the tree names it (`crates/mid` + `../leaf` = `crates/leaf`);
/// `None` when it leaves the tree.
pub fn join(dir: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Whether `name` matches the glob segment `pat` (`*` any run of characters, `?` one).
pub fn matches(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pat.chars().collect(), name.chars().collect());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Whether directory `dir` is named by the member pattern `pattern` (a path, or a glob).
fn member_of(pattern: &str, dir: &str) -> bool {
    let Some(pattern) = join("", pattern) else {
        return false;
    };
    let (p, d): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), dir.split('/').collect());
    p.len() == d.len() && p.iter().zip(&d).all(|(p, d)| matches(p, d))
}

/// The `[workspace] members` of a root manifest: paths or globs.
pub fn member_patterns(root: &str) -> Vec<String> {
    let root = root.parse::<toml::Table>().unwrap_or_default();
    strings(root.get("workspace").and_then(|w| w.get("members")))
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Workspace {
    /// The workspace whose root manifest is the tree's `Cargo.toml`; `manifests` are the
    /// paths of the tree's `Cargo.toml` files (at least those [`member_patterns`] name),
    /// `text_of` reads a file. Why not, when the root
    /// manifest is missing or unreadable.
    pub fn read(
        manifests: &[&str],
        text_of: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Workspace, String> {
        let parse = |path: &str| -> Result<toml::Table, String> {
            text_of(path)
                .ok_or_else(|| format!("{path} is not in the tree"))?
                .parse::<toml::Table>()
                .map_err(|e| format!("{path} is not valid TOML: {}", e.message()))
        };
        let root = parse("Cargo.toml")?;
        let ws = root.get("workspace");
        let members = strings(ws.and_then(|w| w.get("members")));
        let exclude = strings(ws.and_then(|w| w.get("exclude")));
        let shared = ws
            .and_then(|w| w.get("dependencies"))
            .and_then(|d| d.as_table())
            .cloned()
            .unwrap_or_default();
        let mut out = Workspace {
            root_package: root.contains_key("package"),
            default_members: ws.is_some_and(|w| w.get("default-members").is_some()),
            ..Workspace::default()
        };
        let mut dirs: Vec<String> = manifests
            .iter()
            .filter_map(|m| m.strip_suffix("Cargo.toml"))
            .map(|d| d.trim_end_matches('/').to_string())
            .filter(|d| {
                !d.is_empty()
                    && members.iter().any(|p| member_of(p, d))
                    && !exclude.iter().any(|p| member_of(p, d))
            })
            .collect();
        if out.root_package {
            dirs.push(String::new());
        }
        let mut tables = Vec::new();
        for dir in dirs {
            let manifest = if dir.is_empty() {
                "Cargo.toml".to_string()
            } else {
                format!("{dir}/Cargo.toml")
            };
            let t = if dir.is_empty() {
                root.clone()
            } else {
                parse(&manifest)?
            };
            // A member without [package] (a nested virtual manifest) holds no tests itself.
            let Some(name) = t
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
            else {
                continue;
            };
            tables.push((name.to_string(), dir, t));
        }
        let by_dir: BTreeMap<String, String> = tables
            .iter()
            .map(|(n, d, _)| (d.clone(), n.clone()))
            .collect();
        for (name, dir, t) in &tables {
            let mut deps = BTreeSet::new();
            let mut kinds: Vec<&toml::Value> =
                ["dependencies", "dev-dependencies", "build-dependencies"]
                    .iter()
                    .filter_map(|k| t.get(*k))
                    .collect();
            if let Some(targets) = t.get("target").and_then(|t| t.as_table()) {
                for cfg in targets.values() {
                    for k in ["dependencies", "dev-dependencies", "build-dependencies"] {
                        kinds.extend(cfg.get(k));
                    }
                }
            }
            for table in kinds.iter().filter_map(|k| k.as_table()) {
                for (key, spec) in table {
                    let path = if spec.get("workspace").and_then(|w| w.as_bool()) == Some(true) {
                        shared
                            .get(key)
                            .and_then(|s| s.get("path"))
                            .and_then(|p| p.as_str())
                            .and_then(|p| join("", p))
                    } else {
                        spec.get("path")
                            .and_then(|p| p.as_str())
                            .and_then(|p| join(dir, p))
                    };
                    if let Some(dep) = path.and_then(|p| by_dir.get(&p)) {
                        if dep != name {
                            deps.insert(dep.clone());
                        }
                    }
                }
            }
            out.crates.insert(
                name.clone(),
                Crate {
                    name: name.clone(),
                    dir: dir.clone(),
                    deps,
                },
            );
        }
        Ok(out)
    }

    /// The crate a file of the tree belongs to: the member whose directory holds it most
    /// closely (the root package holds what no other member does).
    pub fn owner(&self, path: &str) -> Option<&Crate> {
        self.crates
            .values()
            .filter(|c| c.dir.is_empty() || path.starts_with(&format!("{}/", c.dir)))
            .max_by_key(|c| c.dir.len())
    }

    /// Every crate `changed` reaches, each with the chain of crates from a changed one to it
    /// (each depending on the one before; one crate long for a changed crate). Breadth first,
    /// so each chain is a shortest one.
    pub fn reaching(&self, changed: &BTreeSet<String>) -> BTreeMap<String, Vec<String>> {
        let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for c in self.crates.values() {
            for d in &c.deps {
                dependents.entry(d.as_str()).or_default().push(&c.name);
            }
        }
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut todo = VecDeque::new();
        for c in changed.iter().filter(|c| self.crates.contains_key(*c)) {
            found.insert(c.clone(), vec![c.clone()]);
            todo.push_back(c.clone());
        }
        while let Some(c) = todo.pop_front() {
            let chain = found[&c].clone();
            for d in dependents.get(c.as_str()).into_iter().flatten() {
                if !found.contains_key(*d) {
                    let mut next = chain.clone();
                    next.push(d.to_string());
                    found.insert(d.to_string(), next);
                    todo.push_back(d.to_string());
                }
            }
        }
        found
    }
}

/// Files whose change reaches every crate: the manifests, the lockfile, build scripts, cargo's
/// and rustup's settings.
pub fn configures_every_crate(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "Cargo.toml" | "Cargo.lock" | "build.rs" | "rust-toolchain" | "rust-toolchain.toml"
    ) || path.starts_with(".cargo/")
        || path.contains("/.cargo/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[(&str, &str)]) -> Workspace {
        let manifests: Vec<&str> = files
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| p.ends_with("Cargo.toml"))
            .collect();
        let text_of = |p: &str| {
            files
                .iter()
                .find(|(q, _)| *q == p)
                .map(|(_, t)| t.to_string())
        };
        Workspace::read(&manifests, &text_of).unwrap()
    }

    #[test]
    fn a_change_reaches_its_crate_and_every_crate_that_depends_on_it() {
        let w = workspace(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"crates/*\", \"tools/gen\"]\nexclude = [\"crates/old\"]\n[workspace.dependencies]\nleaf = { path = \"crates/leaf\" }\n",
            ),
            ("crates/leaf/Cargo.toml", "[package]\nname = \"leaf\"\n"),
            (
                "crates/mid/Cargo.toml",
                "[package]\nname = \"mid\"\n[dependencies]\nleaf.workspace = true\n",
            ),
            (
                "crates/top/Cargo.toml",
                "[package]\nname = \"top-crate\"\n[dev-dependencies]\nm = { package = \"mid\", path = \"../mid\" }\n",
            ),
            ("crates/other/Cargo.toml", "[package]\nname = \"other\"\n"),
            (
                "crates/old/Cargo.toml",
                "[package]\nname = \"old\"\n[dependencies]\nleaf = { path = \"../leaf\" }\n",
            ),
            (
                "tools/gen/Cargo.toml",
                "[package]\nname = \"gen\"\n[target.'cfg(unix)'.build-dependencies]\nleaf = { path = \"../../crates/leaf\" }\n",
            ),
        ]);
        assert_eq!(
            w.crates.keys().collect::<Vec<_>>(),
            ["gen", "leaf", "mid", "other", "top-crate"]
        );
        assert!(!w.root_package && !w.default_members);
        assert_eq!(w.owner("crates/mid/src/lib.rs").unwrap().name, "mid");
        assert!(w.owner("README.md").is_none());
        let reached = w.reaching(&BTreeSet::from(["leaf".to_string()]));
        assert_eq!(
            reached.keys().collect::<Vec<_>>(),
            ["gen", "leaf", "mid", "top-crate"]
        );
        assert_eq!(reached["top-crate"], ["leaf", "mid", "top-crate"]);
        let reached = w.reaching(&BTreeSet::from(["top-crate".to_string()]));
        assert_eq!(reached.keys().collect::<Vec<_>>(), ["top-crate"]);
    }

    #[test]
    fn a_root_package_holds_what_no_member_does() {
        let w = workspace(&[
            (
                "Cargo.toml",
                "[package]\nname = \"app\"\n[workspace]\nmembers = [\"lib\"]\n[dependencies]\nlib = { path = \"lib\" }\n",
            ),
            ("lib/Cargo.toml", "[package]\nname = \"lib\"\n"),
        ]);
        assert!(w.root_package);
        assert_eq!(w.owner("src/main.rs").unwrap().name, "app");
        assert_eq!(w.owner("lib/src/lib.rs").unwrap().name, "lib");
        let reached = w.reaching(&BTreeSet::from(["lib".to_string()]));
        assert_eq!(reached.keys().collect::<Vec<_>>(), ["app", "lib"]);
        assert!(configures_every_crate("lib/build.rs"));
        assert!(configures_every_crate(".cargo/config.toml"));
        assert!(!configures_every_crate("lib/src/build_rs.rs"));
    }
}
