//! Dependency manifests (requirements.txt, pyproject.toml, package.json, Cargo.toml, go.mod,
//! pom.xml, build.gradle): the dependencies they declare, per ecosystem, and the frameworks those
//! dependencies reveal.

use super::walk::is_vendored;

/// An ecosystem key in `dependencies`.
pub type Ecosystem = &'static str;

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a path is a manifest the aggregator wants (vendored trees' manifests are not ours).
pub fn is_manifest(path: &str) -> bool {
    if is_vendored(path) {
        return false;
    }
    let name = file_name(path);
    matches!(
        name,
        "requirements.txt"
            | "pyproject.toml"
            | "package.json"
            | "Cargo.toml"
            | "go.mod"
            | "pom.xml"
            | "build.gradle"
            | "build.gradle.kts"
    ) || (name.starts_with("requirements") && name.ends_with(".txt"))
}

/// The dependencies a manifest declares, as (ecosystem, names). Unparseable input gives nothing.
pub fn parse(path: &str, bytes: &[u8]) -> Option<(Ecosystem, Vec<String>)> {
    let text = String::from_utf8_lossy(bytes);
    let name = file_name(path);
    let deps = match name {
        "pyproject.toml" => ("python", pyproject(&text)),
        "package.json" => ("npm", package_json(&text)),
        "Cargo.toml" => ("cargo", cargo_toml(&text)),
        "go.mod" => ("go", go_mod(&text)),
        "pom.xml" => ("maven", pom_xml(&text)),
        "build.gradle" | "build.gradle.kts" => ("maven", gradle(&text)),
        _ if name.starts_with("requirements") && name.ends_with(".txt") => {
            ("python", requirements(&text))
        }
        _ => return None,
    };
    Some(deps)
}

/// The distribution name of a PEP 508 requirement (`Django>=4; python_version>"3"` → `django`).
fn pep508_name(req: &str) -> Option<String> {
    let req = req.trim();
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    let name = &req[..end];
    if name.is_empty() {
        return None;
    }
    Some(name.to_ascii_lowercase().replace('_', "-"))
}

fn requirements(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split(" #").next().unwrap_or(""))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('-'))
        .filter(|l| !l.starts_with("git+") && !l.starts_with("http"))
        .filter_map(pep508_name)
        .collect()
}

fn toml_keys(table: Option<&toml::Value>) -> impl Iterator<Item = String> + '_ {
    table
        .and_then(|t| t.as_table())
        .into_iter()
        .flat_map(|t| t.keys().cloned())
}

fn pyproject(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let project = doc.get("project");
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().and_then(pep508_name))
            .collect()
    };
    out.extend(strings(project.and_then(|p| p.get("dependencies"))));
    if let Some(opt) = project
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|o| o.as_table())
    {
        for v in opt.values() {
            out.extend(strings(Some(v)));
        }
    }
    if let Some(groups) = doc.get("dependency-groups").and_then(|g| g.as_table()) {
        for v in groups.values() {
            out.extend(strings(Some(v)));
        }
    }
    let poetry = doc.get("tool").and_then(|t| t.get("poetry"));
    out.extend(toml_keys(poetry.and_then(|p| p.get("dependencies"))));
    out.extend(toml_keys(poetry.and_then(|p| p.get("dev-dependencies"))));
    if let Some(groups) = poetry
        .and_then(|p| p.get("group"))
        .and_then(|g| g.as_table())
    {
        for g in groups.values() {
            out.extend(toml_keys(g.get("dependencies")));
        }
    }
    out.retain(|d| d != "python");
    out.iter_mut().for_each(|d| *d = d.to_ascii_lowercase());
    out
}

fn package_json(text: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in [
        "dependencies",
        "devDependencies",
        "peerDependencies",
        "optionalDependencies",
    ] {
        if let Some(map) = doc.get(key).and_then(|d| d.as_object()) {
            out.extend(map.keys().cloned());
        }
    }
    out
}

fn cargo_toml(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let sections = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut out = Vec::new();
    for s in sections {
        out.extend(toml_keys(doc.get(s)));
    }
    out.extend(toml_keys(
        doc.get("workspace").and_then(|w| w.get("dependencies")),
    ));
    if let Some(targets) = doc.get("target").and_then(|t| t.as_table()) {
        for t in targets.values() {
            for s in sections {
                out.extend(toml_keys(t.get(s)));
            }
        }
    }
    out
}

fn go_mod(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if in_block {
            if line.starts_with(')') {
                in_block = false;
            } else if let Some(m) = line.split_whitespace().next() {
                out.push(m.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("require") {
            let rest = rest.trim();
            if rest.starts_with('(') {
                in_block = true;
            } else if let Some(m) = rest.split_whitespace().next() {
                out.push(m.to_string());
            }
        }
    }
    out
}

fn xml_tag<'a>(block: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = block.find(&open)? + open.len();
    let end = block[start..].find("</")? + start;
    Some(block[start..end].trim())
}

fn pom_xml(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<dependency>") {
        rest = &rest[i + "<dependency>".len()..];
        let end = rest.find("</dependency>").unwrap_or(rest.len());
        let block = &rest[..end];
        if let (Some(g), Some(a)) = (xml_tag(block, "groupId"), xml_tag(block, "artifactId")) {
            out.push(format!("{g}:{a}"));
        }
        rest = &rest[end..];
    }
    out
}

fn gradle(text: &str) -> Vec<String> {
    const CONFIGS: &[&str] = &[
        "implementation",
        "api",
        "compileOnly",
        "runtimeOnly",
        "testImplementation",
        "testRuntimeOnly",
        "annotationProcessor",
        "kapt",
        "compile",
        "testCompile",
    ];
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let word_end = line
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(line.len());
        if !CONFIGS.contains(&&line[..word_end]) {
            continue;
        }
        // `implementation 'g:a:v'`, `implementation("g:a:v")`
        let Some(q) = line.find(['\'', '"']) else {
            continue;
        };
        let quote = line.as_bytes()[q] as char;
        let body = &line[q + 1..];
        let coord = &body[..body.find(quote).unwrap_or(body.len())];
        let mut parts = coord.split(':');
        if let (Some(g), Some(a)) = (parts.next(), parts.next()) {
            out.push(format!("{g}:{a}"));
        }
    }
    out
}

/// Frameworks a dependency reveals, by ecosystem and name (or name prefix ending in `*`).
const FRAMEWORKS: &[(Ecosystem, &str, &str)] = &[
    ("python", "django", "django"),
    ("python", "flask", "flask"),
    ("python", "fastapi", "fastapi"),
    ("python", "starlette", "starlette"),
    ("python", "tornado", "tornado"),
    ("python", "pyramid", "pyramid"),
    ("python", "pytest", "pytest"),
    ("python", "numpy", "numpy"),
    ("python", "pandas", "pandas"),
    ("python", "torch", "pytorch"),
    ("python", "tensorflow", "tensorflow"),
    ("python", "scikit-learn", "scikit-learn"),
    ("python", "streamlit", "streamlit"),
    ("npm", "react", "react"),
    ("npm", "vue", "vue"),
    ("npm", "@angular/core", "angular"),
    ("npm", "svelte", "svelte"),
    ("npm", "next", "next.js"),
    ("npm", "nuxt", "nuxt"),
    ("npm", "express", "express"),
    ("npm", "koa", "koa"),
    ("npm", "fastify", "fastify"),
    ("npm", "@nestjs/core", "nestjs"),
    ("npm", "electron", "electron"),
    ("npm", "jest", "jest"),
    ("npm", "mocha", "mocha"),
    ("npm", "vitest", "vitest"),
    ("cargo", "tokio", "tokio"),
    ("cargo", "actix-web", "actix-web"),
    ("cargo", "axum", "axum"),
    ("cargo", "rocket", "rocket"),
    ("cargo", "warp", "warp"),
    ("cargo", "bevy", "bevy"),
    ("cargo", "tauri", "tauri"),
    ("go", "github.com/gin-gonic/gin", "gin"),
    ("go", "github.com/labstack/echo*", "echo"),
    ("go", "github.com/gofiber/fiber*", "fiber"),
    ("go", "github.com/gorilla/mux", "gorilla"),
    ("go", "google.golang.org/grpc", "grpc"),
    ("maven", "org.springframework.boot:*", "spring-boot"),
    ("maven", "org.springframework:*", "spring"),
    ("maven", "io.quarkus:*", "quarkus"),
    ("maven", "io.micronaut:*", "micronaut"),
    ("maven", "junit:junit", "junit"),
    ("maven", "org.junit.jupiter:*", "junit"),
];

/// The frameworks one dependency reveals.
pub fn frameworks<'a>(eco: &'a str, dep: &'a str) -> impl Iterator<Item = &'static str> + 'a {
    FRAMEWORKS
        .iter()
        .filter(move |(e, pat, _)| {
            *e == eco
                && match pat.strip_suffix('*') {
                    Some(prefix) => dep.starts_with(prefix),
                    None => dep == *pat,
                }
        })
        .map(|(_, _, fw)| *fw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(path: &str, text: &str) -> Vec<String> {
        parse(path, text.as_bytes())
            .map(|d| d.1)
            .unwrap_or_default()
    }

    #[test]
    fn manifests_are_recognised_outside_vendored_trees() {
        assert!(is_manifest("requirements.txt"));
        assert!(is_manifest("a/requirements-dev.txt"));
        assert!(is_manifest("web/package.json"));
        assert!(!is_manifest("node_modules/x/package.json"));
        assert!(!is_manifest("notes.txt"));
    }

    #[test]
    fn parses_each_manifest_kind() {
        assert_eq!(
            deps(
                "requirements.txt",
                "# c\nDjango>=4.2 # web\nrequests[socks]==2\n-r other.txt\n\nnumpy; python_version>'3'\n"
            ),
            ["django", "requests", "numpy"]
        );
        assert_eq!(
            deps(
                "pyproject.toml",
                "[project]\ndependencies = [\"fastapi>=0.1\", \"Pydantic\"]\n[project.optional-dependencies]\ntest = [\"pytest\"]\n"
            ),
            ["fastapi", "pydantic", "pytest"]
        );
        assert_eq!(
            deps(
                "pyproject.toml",
                "[tool.poetry.dependencies]\npython = \"^3.11\"\nflask = \"*\"\n"
            ),
            ["flask"]
        );
        assert_eq!(
            deps(
                "package.json",
                r#"{"dependencies":{"react":"18"},"devDependencies":{"jest":"29"}}"#
            ),
            ["react", "jest"]
        );
        assert_eq!(
            deps(
                "Cargo.toml",
                "[dependencies]\nserde = \"1\"\n[dev-dependencies]\ntempfile = \"3\"\n[target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n"
            ),
            ["serde", "tempfile", "libc"]
        );
        assert_eq!(
            deps(
                "go.mod",
                "module x\n\nrequire (\n\tgithub.com/gin-gonic/gin v1.9.0 // indirect\n)\nrequire golang.org/x/sys v0.1.0\n"
            ),
            ["github.com/gin-gonic/gin", "golang.org/x/sys"]
        );
        assert_eq!(
            deps(
                "pom.xml",
                "<project><dependencies><dependency>\n<groupId>org.springframework.boot</groupId>\n<artifactId>spring-boot-starter-web</artifactId></dependency></dependencies></project>"
            ),
            ["org.springframework.boot:spring-boot-starter-web"]
        );
        assert_eq!(
            deps(
                "build.gradle",
                "dependencies {\n  implementation 'com.google.guava:guava:32.0'\n  testImplementation(\"junit:junit:4.13\")\n}\n"
            ),
            ["com.google.guava:guava", "junit:junit"]
        );
        assert!(deps("package.json", "{not json").is_empty());
        assert!(deps("Cargo.toml", "[[[").is_empty());
    }

    #[test]
    fn frameworks_follow_dependencies() {
        assert_eq!(frameworks("npm", "react").collect::<Vec<_>>(), ["react"]);
        assert_eq!(
            frameworks("maven", "org.springframework.boot:spring-boot-starter-web")
                .collect::<Vec<_>>(),
            ["spring-boot"]
        );
        assert_eq!(frameworks("python", "reactpy").count(), 0);
    }
}
