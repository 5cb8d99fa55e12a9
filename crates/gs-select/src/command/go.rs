//! Whether a test command is a plain `go test` of the module's packages (`./...`, `./pkg/...`,
//! `.`) that an explicit package list can take the place of, and the two commands of a
//! two-phase run: the packages a change reaches, then every other package the patterns match.

/// A recognised `go test …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoTest {
    /// `go test` and its flags, without the package patterns.
    base: Vec<String>,
    /// The package patterns as written (`./...`, `./pkg/...`, `.`, `./cmd/x`); `.` when none.
    pub patterns: Vec<String>,
}

/// Flags whose value is the next word when not written `-flag=value` (go's flag package: a
/// boolean flag never takes the next word).
const TAKES_VALUE: &[&str] = &[
    "p",
    "covermode",
    "coverpkg",
    "asmflags",
    "buildmode",
    "compiler",
    "gccgoflags",
    "gcflags",
    "installsuffix",
    "ldflags",
    "mod",
    "overlay",
    "pgo",
    "pkgdir",
    "tags",
    "toolexec",
    "bench",
    "benchtime",
    "count",
    "cpu",
    "parallel",
    "run",
    "shuffle",
    "skip",
    "timeout",
    "vet",
];

/// Flags that write one file for the whole run (phase two would overwrite phase one's), build
/// or list instead of testing, run elsewhere, or pass what follows to the test binaries.
const REFUSED: &[&str] = &[
    "C",
    "c",
    "o",
    "exec",
    "list",
    "fuzz",
    "modfile",
    "coverprofile",
    "cpuprofile",
    "memprofile",
    "blockprofile",
    "mutexprofile",
    "trace",
    "outputdir",
    "args",
];

/// `command` as a `go test` of package patterns under the root.
///
/// `None` for anything else: a shell line, another program, import-path patterns, files, flags
/// that refuse a split.
pub fn recognise(command: &str) -> Option<GoTest> {
    let parsed = super::command_words(command)?;
    if parsed.program() != Some("go") {
        return None;
    }
    let words = &parsed.all;
    let mut i = parsed.at + 1;
    if words.get(i) != Some(&"test") {
        return None;
    }
    i += 1;
    let mut base: Vec<String> = words[..i].iter().map(|w| w.to_string()).collect();
    let mut patterns = Vec::new();
    let mut rest = words[i..].iter();
    while let Some(&w) = rest.next() {
        if let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) {
            let name = flag.split('=').next().unwrap_or(flag);
            if REFUSED.contains(&name) || name.is_empty() {
                return None;
            }
            base.push(w.to_string());
            if TAKES_VALUE.contains(&name) && !flag.contains('=') {
                base.push(rest.next()?.to_string());
            }
        } else {
            patterns.push(pattern(w)?);
        }
    }
    if patterns.is_empty() {
        patterns.push(".".into());
    }
    Some(GoTest { base, patterns })
}

/// A relative package pattern (`.`, `./...`, `./a/b`, `./a/...`) without a trailing `/`.
fn pattern(w: &str) -> Option<String> {
    let p = w.trim_end_matches('/');
    if p == "." {
        return Some(".".into());
    }
    let rel = p.strip_prefix("./")?;
    let plain = rel.split('/').all(|c| {
        !matches!(c, "" | "." | "..") && (c == "..." || !c.contains("..")) && !c.ends_with(".go")
    });
    plain.then(|| p.to_string())
}

impl GoTest {
    /// Whether the patterns match `package` (`.` or `./dir`, as the import graph names it).
    pub fn matches(&self, package: &str) -> bool {
        let dir = package.strip_prefix("./").unwrap_or("");
        self.patterns.iter().any(|p| {
            let rel = p.strip_prefix("./").unwrap_or("");
            match rel.strip_suffix("...") {
                Some(under) => {
                    let under = under.trim_end_matches('/');
                    under.is_empty() || dir == under || dir.starts_with(&format!("{under}/"))
                }
                None => rel == dir,
            }
        })
    }

    /// The build tags `-tags` sets.
    pub fn tags(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut words = self.base.iter();
        while let Some(w) = words.next() {
            let flag = w.trim_start_matches('-');
            let value = match flag.split_once('=') {
                Some(("tags", v)) => Some(v.to_string()),
                None if flag == "tags" && w.starts_with('-') => words.next().cloned(),
                _ => None,
            };
            out.extend(
                value
                    .iter()
                    .flat_map(|v| v.split([',', ' ']))
                    .filter(|t| !t.is_empty())
                    .map(str::to_string),
            );
        }
        out
    }

    /// The command for the top-level tests `names` (`TestX`) alone, matched exactly, verbose
    /// (so each pass is named), in the packages the command tests: a retry of the tests that
    /// failed. `None` when the command picks tests itself (`-run`) or a name is not a plain
    /// test function (a subtest, a package that failed to build, anything an output may claim).
    pub fn alone(&self, names: &[String]) -> Option<String> {
        let plain = |n: &String| {
            n.starts_with("Test") && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let picks = self.base.iter().any(|w| {
            let flag = w.trim_start_matches('-');
            w.starts_with('-') && (flag == "run" || flag.starts_with("run="))
        });
        if names.is_empty() || picks || !names.iter().all(plain) {
            return None;
        }
        let mut all = self.base.clone();
        if !all
            .iter()
            .any(|w| matches!(w.as_str(), "-v" | "--v" | "-v=true"))
        {
            all.push("-v".into());
        }
        all.push("-run".into());
        all.push(format!("'^({})$'", names.join("|")));
        all.extend(self.patterns.iter().cloned());
        Some(all.join(" "))
    }

    /// The command for `packages` alone, each named as a directory (`./a`, `.`).
    pub fn only(&self, packages: &[String]) -> String {
        let mut all = self.base.clone();
        all.extend(packages.iter().cloned());
        all.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_go_test_invocations_are_recognised() {
        let g = recognise("CGO_ENABLED=0 go test -v -race -count=1 -run Test ./...").unwrap();
        assert_eq!(g.patterns, ["./..."]);
        assert_eq!(
            g.only(&["./leaf".into(), ".".into()]),
            "CGO_ENABLED=0 go test -v -race -count=1 -run Test ./leaf ."
        );
        assert!(g.matches(".") && g.matches("./a/b"));
        // A retry of failing tests alone: never beside the command's own -run.
        assert_eq!(g.alone(&["TestA".into()]), None);
        let plain = recognise("go test -count=1 ./...").unwrap();
        assert_eq!(
            plain.alone(&["TestA".into(), "TestB_2".into()]).unwrap(),
            "go test -count=1 -v -run '^(TestA|TestB_2)$' ./..."
        );
        for bad in ["TestA/sub", "example.com/m/pkg", "-run", "TestA|.*", ""] {
            assert_eq!(plain.alone(&[bad.into()]), None, "{bad}");
        }
        let some = recognise("/usr/lib/go/bin/go test --timeout 60s ./pkg/... ./cmd/x/").unwrap();
        assert_eq!(some.patterns, ["./pkg/...", "./cmd/x"]);
        assert!(some.matches("./pkg") && some.matches("./pkg/a") && some.matches("./cmd/x"));
        assert!(!some.matches(".") && !some.matches("./pkgx") && !some.matches("./cmd/x/y"));
        assert_eq!(recognise("go test").unwrap().patterns, ["."]);
        let tagged = recognise("go test -tags=a,b --tags c ./...").unwrap();
        assert_eq!(tagged.tags(), ["a", "b", "c"]);
        for other in [
            "go vet ./...",
            "go test -coverprofile=c.out ./...",
            "go test ./... -args -x",
            "go test example.com/m/...",
            "go test ../other/...",
            "go test /",
            "go test ./a...b",
            "go test ./a_test.go",
            "go test -C sub ./...",
            "go test ./... && echo ok",
            "cargo test",
        ] {
            assert_eq!(recognise(other), None, "{other}");
        }
    }
}
