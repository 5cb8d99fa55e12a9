//! One name per test whatever reported it: pytest's node id (`tests/test_a.py::TestX::test_y[p]`)
//! for a pytest test named the JUnit way (`tests.test_a.TestX.test_y[p]`), so a test's flaky and
//! bisect history does not split when `junit` is turned on, and names in older records are
//! matched through the same mapping.

/// Whether a module name is one pytest collects by default (`test_*.py`, `*_test.py`).
fn test_module(part: &str) -> bool {
    part.starts_with("test_") || part.ends_with("_test")
}

fn class_like(part: &str) -> bool {
    part.starts_with(|c: char| c.is_ascii_uppercase())
}

/// The node id of `module`'s dotted path, its classes and its function (with its parameters).
fn node_id(module: &[&str], classes: &[&str], function: Option<&str>) -> String {
    let mut id = format!("{}.py", module.join("/"));
    for part in classes.iter().copied().chain(function) {
        id.push_str("::");
        id.push_str(part);
    }
    id
}

/// `name` as its canonical form: a JUnit-style pytest name (`tests.test_a.TestX.test_y[p]`,
/// or a module's `tests.test_broken` when collecting it failed) becomes its node id; any other
/// name (already a node id, another runner's) is returned as it is. Only names that follow
/// pytest's default collection rules are recognised, so `com.example.FooTest.testBar` stays.
pub fn canonical(name: &str) -> String {
    let (head, params) = match name.find('[') {
        Some(i) => name.split_at(i),
        None => (name, ""),
    };
    let plain = head
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if !plain || !head.contains('.') {
        return name.to_string();
    }
    let parts: Vec<&str> = head.split('.').collect();
    let (last, rest) = parts.split_last().expect("a dotted name has parts");
    // module(s) . Class* . function
    let classes = rest.iter().rev().take_while(|p| class_like(p)).count();
    let module = &rest[..rest.len() - classes];
    if let Some(m) = module.last() {
        if test_module(m) && !module.iter().any(|p| class_like(p)) {
            let classes = &rest[rest.len() - classes..];
            return node_id(module, classes, Some(&format!("{last}{params}")));
        }
    }
    // A module alone (a collection error).
    if params.is_empty() && test_module(last) && !parts.iter().any(|p| class_like(p)) {
        return node_id(&parts, &[], None);
    }
    name.to_string()
}

/// A pytest JUnit `<testcase>`'s node id from its `classname`, `name` and (pytest's legacy
/// `xunit1` family) `file` attributes. Unlike [`canonical`], the report is known to be pytest's,
/// so a module outside the default naming still maps.
pub fn pytest_junit(classname: &str, name: &str, file: Option<&str>) -> String {
    if classname.is_empty() {
        // A collection error names the module.
        return match file {
            Some(f) if !f.is_empty() => f.to_string(),
            _ if name.split('.').all(|p| !p.is_empty() && !class_like(p)) => {
                node_id(&name.split('.').collect::<Vec<_>>(), &[], None)
            }
            _ => name.to_string(),
        };
    }
    let parts: Vec<&str> = classname.split('.').collect();
    if let Some(file) = file.filter(|f| f.ends_with(".py")) {
        let module_dots = file.trim_end_matches(".py").replace('/', ".");
        let classes: Vec<&str> = classname
            .strip_prefix(&module_dots)
            .map(|r| r.split('.').filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        let mut id = file.to_string();
        for part in classes.iter().chain(std::iter::once(&name)) {
            id.push_str("::");
            id.push_str(part);
        }
        return id;
    }
    let classes = parts.iter().rev().take_while(|p| class_like(p)).count();
    let (module, classes) = parts.split_at(parts.len() - classes);
    if module.is_empty() {
        return format!("{classname}.{name}");
    }
    node_id(module, classes, Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_names_map_to_node_ids_and_others_stay() {
        for (name, want) in [
            (
                "tests.test_hooks.test_x[a b]",
                "tests/test_hooks.py::test_x[a b]",
            ),
            (
                "tests.test_calc.TestCalc.test_add",
                "tests/test_calc.py::TestCalc::test_add",
            ),
            (
                "test_plain.test_param[1.5]",
                "test_plain.py::test_param[1.5]",
            ),
            ("tests.test_broken", "tests/test_broken.py"),
            ("pkg.calc_test.test_y", "pkg/calc_test.py::test_y"),
            (
                "tests/test_hooks.py::test_x[a b]",
                "tests/test_hooks.py::test_x[a b]",
            ),
            ("com.example.FooTest.testBar", "com.example.FooTest.testBar"),
            ("calc > adds wrong", "calc > adds wrong"),
            ("alpha::tests::fails", "alpha::tests::fails"),
            (
                "test_x (tests.test_a.TestA.test_x)",
                "test_x (tests.test_a.TestA.test_x)",
            ),
            ("test_one", "test_one"),
        ] {
            assert_eq!(canonical(name), want, "{name}");
        }
        assert_eq!(
            pytest_junit(
                "tests.test_hooks.TestHook",
                "test_runs",
                Some("tests/test_hooks.py")
            ),
            "tests/test_hooks.py::TestHook::test_runs"
        );
        assert_eq!(
            pytest_junit("checks.hooks", "test_runs", None),
            "checks/hooks.py::test_runs"
        );
        assert_eq!(
            pytest_junit("", "tests.test_broken", None),
            "tests/test_broken.py"
        );
    }
}
