//! Unit tests of the checks' helpers.
use super::ctest_report;

#[test]
fn ctest_reports_are_found_in_the_directory_ctest_runs_in() {
    let r = |c: &str| ctest_report(c);
    assert_eq!(
        r("cd build && ctest --output-junit junit.xml").as_deref(),
        Some("build/junit.xml")
    );
    assert_eq!(
        r("cmake -B out && cmake --build out && ctest --test-dir out --output-junit=r/j.xml")
            .as_deref(),
        Some("out/r/j.xml")
    );
    assert_eq!(r("ctest --output-junit ./j.xml").as_deref(), Some("j.xml"));
    assert_eq!(r("ctest --output-junit /tmp/j.xml"), None);
    assert_eq!(r("cd .. && ctest --output-junit j.xml"), None);
    assert_eq!(r("ctest -j4"), None);
    assert_eq!(r("make test"), None);
}
