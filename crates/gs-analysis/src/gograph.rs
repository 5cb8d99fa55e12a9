//! Go's packages as `go test ./...` sees them: a package is a directory of `.go` files (its
//! `_test.go` files, of the package or of its external `_test` package, belong to it), and a
//! file's imports name packages of the module through `go.mod`'s module path. What a file says
//! that the import graph cannot follow (cgo, `//go:embed`, build constraints) is kept beside its
//! imports. Pure, so cached by blob id.

use serde::{Deserialize, Serialize};

/// Bump whenever [`go_file`] could give something else for the same bytes.
pub const GO_IMPORTS_VERSION: u32 = 1;

/// What one `.go` file tells the package graph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoFile {
    /// The import paths, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// `import "C"`: C code beside it is compiled in.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cgo: bool,
    /// A `//go:embed` directive: files that are not Go are compiled in.
    #[serde(default, skip_serializing_if = "is_false")]
    pub embeds: bool,
    /// The expression of its `//go:build` (or `// +build`) line: the file is built only for
    /// some targets or tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a Go source says of its package; `None` when it could not be parsed.
pub fn go_file(src: &[u8]) -> Option<GoFile> {
    let tree = super::parse(super::lang::Grammar::Go, src)?;
    let text = |n: tree_sitter::Node<'_>| n.utf8_text(src).unwrap_or("");
    let mut out = GoFile::default();
    let mut before_package = true;
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "package_clause" => before_package = false,
            "import_spec" => {
                if let Some(p) = node.child_by_field_name("path") {
                    let path = text(p).trim_matches(['"', '`']).to_string();
                    out.cgo |= path == "C";
                    if !out.imports.contains(&path) {
                        out.imports.push(path);
                    }
                }
            }
            "comment" => {
                let t = text(node);
                out.embeds |= t.starts_with("//go:embed");
                // Constraints count only above the package clause (the walk is in order there).
                let expr = t
                    .strip_prefix("//go:build")
                    .or_else(|| t.strip_prefix("// +build"));
                if let Some(e) = expr.filter(|_| before_package && out.constraint.is_none()) {
                    out.constraint = Some(e.trim().to_string());
                }
            }
            _ => {}
        }
        let mut c = node.walk();
        let children: Vec<_> = node.children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
    Some(out)
}

/// `go.mod`'s module path.
pub fn module_path(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("module")?;
        let m = rest.split("//").next()?.trim().trim_matches('"');
        (!m.is_empty() && rest.starts_with(char::is_whitespace)).then(|| m.to_string())
    })
}

/// The package (`.` or `./dir`) a file of the tree belongs to, when `go test ./...` sees it:
/// a `.go` file not named `_x` or `.x`, in no directory named `testdata` or `vendor` or
/// starting with `.` or `_` (nested modules are the caller's to leave out).
pub fn package_of(path: &str) -> Option<String> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if !name.ends_with(".go") || name.starts_with(['.', '_']) {
        return None;
    }
    if dir
        .split('/')
        .filter(|d| !d.is_empty())
        .any(|d| d.starts_with(['.', '_']) || d == "testdata" || d == "vendor")
    {
        return None;
    }
    Some(package_dir(dir))
}

/// A directory of the tree as a package argument of `go test`.
pub fn package_dir(dir: &str) -> String {
    if dir.is_empty() {
        ".".into()
    } else {
        format!("./{dir}")
    }
}

/// The package an import path names in module `module`, or `None` (the standard library, or
/// another module).
pub fn resolve(module: &str, import: &str) -> Option<String> {
    if import == module {
        return Some(".".into());
    }
    let rest = import.strip_prefix(module)?.strip_prefix('/')?;
    Some(package_dir(rest))
}

const GOOS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
    "zos",
];

const GOARCH: &[&str] = &[
    "386", "amd64", "arm", "arm64", "loong64", "mips", "mipsle", "mips64", "mips64le", "ppc64",
    "ppc64le", "riscv64", "s390x", "wasm", "sparc64",
];

/// Whether a constraint expression is one tag that no build sets unless asked to
/// (`ignore`, `tools`): not a system, an architecture, `unix`, a compiler, `cgo`, a Go version,
/// nor one of `tags` (the command's `-tags`).
pub fn never_built(expr: &str, tags: &[String]) -> bool {
    let tag = expr.trim();
    !tag.is_empty()
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !GOOS.contains(&tag)
        && !GOARCH.contains(&tag)
        && !matches!(tag, "unix" | "cgo" | "gc" | "gccgo")
        && !tag.starts_with("go1")
        && !tags.iter().any(|t| t == tag)
}

/// A file name that builds only for some systems or architectures (`x_linux.go`,
/// `x_windows_amd64_test.go`).
pub fn constrained_by_name(name: &str) -> bool {
    let stem = name.trim_end_matches(".go").trim_end_matches("_test");
    let parts: Vec<&str> = stem.split('_').collect();
    let n = parts.len();
    let is = |i: usize, list: &[&str]| i >= 1 && i < n && list.contains(&parts[i]);
    (n >= 2 && (is(n - 1, GOOS) || is(n - 1, GOARCH)))
        || (n >= 3 && is(n - 2, GOOS) && is(n - 1, GOARCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_go_file_says_what_it_imports_and_what_the_graph_cannot_follow() {
        let src = br#"//go:build linux

// Package a does things.
package a_test

import (
	"fmt"
	m "example.com/m/internal/b"
	_ "embed"
)
import "C"

//go:embed data.txt
var data string

func f() { fmt.Println(m.X, `//go:build not a comment`) }
"#;
        let f = go_file(src).unwrap();
        assert_eq!(f.imports, ["fmt", "example.com/m/internal/b", "embed", "C"]);
        assert!(f.cgo && f.embeds);
        assert_eq!(f.constraint.as_deref(), Some("linux"));
        let plain = go_file(b"package a\n\n// +build linux\nimport \"os\"\n").unwrap();
        assert_eq!(plain.imports, ["os"]);
        assert!(!plain.cgo && !plain.embeds && plain.constraint.is_none());
    }

    #[test]
    fn packages_are_directories_of_the_module() {
        assert_eq!(
            module_path("// c\nmodule example.com/m // x\n\ngo 1.19\n").as_deref(),
            Some("example.com/m")
        );
        assert_eq!(module_path("modules x\n"), None);
        assert_eq!(package_of("main.go").as_deref(), Some("."));
        assert_eq!(package_of("a/b/x_test.go").as_deref(), Some("./a/b"));
        for skipped in [
            "a/testdata/x.go",
            "vendor/x/y.go",
            "_tools/x.go",
            ".x/y.go",
            "a/_x.go",
            "a/x.txt",
        ] {
            assert_eq!(package_of(skipped), None, "{skipped}");
        }
        assert_eq!(
            resolve("example.com/m", "example.com/m").as_deref(),
            Some(".")
        );
        assert_eq!(
            resolve("example.com/m", "example.com/m/a/b").as_deref(),
            Some("./a/b")
        );
        assert_eq!(resolve("example.com/m", "example.com/mx"), None);
        assert_eq!(resolve("example.com/m", "fmt"), None);
        for c in ["x_linux.go", "x_amd64_test.go", "x_windows_arm64.go"] {
            assert!(constrained_by_name(c), "{c}");
        }
        for c in ["linux.go", "x_test.go", "x_y.go", "windows_x.go"] {
            assert!(!constrained_by_name(c), "{c}");
        }
        assert!(never_built("ignore", &[]) && never_built(" tools", &[]));
        for built in ["linux", "!ignore", "go1.18", "cgo", "a && b", "tools"] {
            assert!(!never_built(built, &["tools".into()]), "{built}");
        }
    }
}
