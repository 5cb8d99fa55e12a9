//! `git sandbox bisect`: the first commit where the run (or one test) went from passing to
//! failing, between a good and a bad commit on the bad one's first-parent line. Stored results
//! (made under the config each commit has now) answer first; a binary search runs only the
//! commits it still needs. An `error` result says nothing either way: its neighbour is tried.

use crate::app::run::{run_commits, RunOptions};
use crate::app::{records::results, AppError, Repo, Result};
use gs_git::ObjectId;
use gs_model::{RunRecord, Status, Trigger};
use serde::Serialize;
use std::sync::atomic::AtomicBool;

#[derive(Debug, Clone, Serialize)]
pub struct Bisection {
    pub good: String,
    pub bad: String,
    /// The test followed (`None`: the whole run).
    pub test: Option<String>,
    /// The first bad commit and its summary line.
    pub first_bad: String,
    pub summary: String,
    /// Its failure of the test followed (or its first failure), when the record has one.
    pub failure: Option<gs_model::Failure>,
    /// The commits between good and bad (bad included).
    pub commits: usize,
    /// How many commits had to be run, and how many answers were already stored.
    pub runs: usize,
    pub known: usize,
    /// Commits whose result was an error, passed over.
    pub skipped: Vec<String>,
    /// Whether `first_bad` is exactly the first (false: errors around it left a range, and
    /// `first_bad` is its end).
    pub exact: bool,
}

/// What a result says of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Good,
    Bad,
    /// An error, or no result could be made: neither.
    Untestable,
}

/// Whether a failure's name, in its framework's notation (`test_x (mod.Class.test_x)`,
/// `tests/a.py::test_x`, `mod.Class.test_x`), names the test `name`.
fn names(failure: &str, name: &str) -> bool {
    use gs_model::test_name::canonical;
    // One form whatever reported it: a node id names the JUnit-named failure of an older record.
    let (failure, name) = (&canonical(failure), &canonical(name));
    failure == name
        || failure
            .split(|c: char| c.is_whitespace() || "()[]".contains(c))
            .any(|part| {
                part == name
                    || [".", "::", "/"]
                        .iter()
                        .any(|sep| part.ends_with(&format!("{sep}{name}")))
            })
}

fn verdict(r: &RunRecord, test: Option<&str>) -> Verdict {
    match (r.status, test) {
        (Status::Error | Status::Skipped | Status::Unknown, _) => Verdict::Untestable,
        (Status::Passed, _) => Verdict::Good,
        (_, None) => Verdict::Bad,
        (_, Some(name)) => {
            let mut failing = r.tests.iter().flat_map(|t| t.failures.iter());
            if failing.any(|f| names(&f.name, name)) {
                Verdict::Bad
            } else {
                Verdict::Good
            }
        }
    }
}

/// What to bisect.
pub struct Ask<'a> {
    /// `None`: the nearest ancestor of `bad` whose stored result is good.
    pub good: Option<ObjectId>,
    pub bad: ObjectId,
    /// The branch `bad` was named through (an experiment's adds its config).
    pub refname: Option<&'a str>,
    /// Follow one test instead of the whole run.
    pub test: Option<&'a str>,
}

/// Find the first bad commit between good and bad.
pub fn bisect(at: Repo<'_>, ask: &Ask<'_>, interrupt: &AtomicBool) -> Result<Bisection> {
    let Repo { repo, .. } = at;
    let Ask {
        good,
        bad,
        refname,
        test,
    } = *ask;
    let dir = gs_git::repo_root(repo);
    let mut runs = 0;
    let mut known = 0;
    let judge = |c: ObjectId,
                 runs: &mut usize,
                 known: &mut usize|
     -> Result<(Verdict, Option<RunRecord>)> {
        if let Some(r) = results::current_record(at, c, refname)? {
            *known += 1;
            return Ok((verdict(&r, test), Some(r)));
        }
        let opts = RunOptions {
            probe: true,
            ..RunOptions::new(Trigger::Manual, refname.map(str::to_string), interrupt)
        };
        let outcome = run_commits(at, &[c], &opts, &mut |_| {})?;
        if outcome.interrupted {
            return Err(AppError::usage("bisect interrupted")
                .hint("run it again: the results made so far are kept"));
        }
        *runs += outcome.ran;
        let r = outcome.records.into_iter().next();
        Ok((
            r.as_ref().map_or(Verdict::Untestable, |r| verdict(r, test)),
            r,
        ))
    };
    let (bad_verdict, _) = judge(bad, &mut runs, &mut known)?;
    let short = |c: &ObjectId| gs_util::short(&c.to_string()).to_string();
    if bad_verdict != Verdict::Bad {
        return Err(AppError::usage(format!(
            "{} is not bad: {}",
            short(&bad),
            match (bad_verdict, test) {
                (Verdict::Good, Some(t)) => format!("the test {t} does not fail there"),
                (Verdict::Good, None) => "its run passes".into(),
                _ => "its run gives no result (an error)".into(),
            }
        ))
        .hint("name a commit whose run fails as BAD (default HEAD)"));
    }
    // The first-parent line from good (excluded) to bad (included), oldest first.
    let line_from = |good: Option<ObjectId>| -> Result<Vec<ObjectId>> {
        let mut args = vec![
            "rev-list".to_string(),
            "--first-parent".into(),
            "--reverse".into(),
            bad.to_string(),
        ];
        if let Some(g) = good {
            args.push(format!("^{g}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Ok(gs_git::cli::git(&dir, &args)?
            .lines()
            .filter_map(|l| ObjectId::from_hex(l.trim().as_bytes()).ok())
            .collect())
    };
    let (good, line) = match good {
        Some(g) => {
            let line = line_from(Some(g))?;
            if line.is_empty() {
                return Err(AppError::usage(format!(
                    "{} is not an ancestor of {} on its first-parent line",
                    short(&g),
                    short(&bad)
                ))
                .hint("name GOOD older than BAD, as `git sandbox bisect GOOD BAD`"));
            }
            (g, line)
        }
        None => {
            // The nearest ancestor whose stored result is good.
            let all = line_from(None)?;
            let found = all.iter().rev().skip(1).find_map(|&c| {
                let r = results::current_record(at, c, refname).ok()??;
                (verdict(&r, test) == Verdict::Good).then_some(c)
            });
            let Some(g) = found else {
                return Err(AppError::usage(format!(
                    "no commit before {} has a good result",
                    short(&bad)
                ))
                .hint("name a good commit: `git sandbox bisect GOOD BAD`"));
            };
            let line = line_from(Some(g))?;
            (g, line)
        }
    };
    // Indices into `line`: lo is good (-1: GOOD itself), hi is bad.
    let mut lo: isize = -1;
    let mut hi: isize = line.len() as isize - 1;
    let mut seen: std::collections::HashMap<usize, (Verdict, Option<RunRecord>)> =
        Default::default();
    // Stored answers narrow the range before anything runs.
    for (i, &c) in line.iter().enumerate().take(line.len() - 1) {
        if let Some(r) = results::current_record(at, c, refname)? {
            known += 1;
            seen.insert(i, (verdict(&r, test), Some(r)));
        }
    }
    if let Some(first_bad) =
        (0..hi as usize).find(|i| seen.get(i).is_some_and(|(v, _)| *v == Verdict::Bad))
    {
        hi = first_bad as isize;
    }
    if let Some(last_good) = (0..hi as usize)
        .rev()
        .find(|i| seen.get(i).is_some_and(|(v, _)| *v == Verdict::Good))
    {
        lo = last_good as isize;
    }
    let mut skipped = Vec::new();
    let mut untestable: std::collections::HashSet<usize> = seen
        .iter()
        .filter(|(_, (v, _))| *v == Verdict::Untestable)
        .map(|(i, _)| *i)
        .collect();
    while hi - lo > 1 {
        // The middle, or the nearest testable commit to it.
        let mid = (lo + hi) / 2;
        let pick = (0..(hi - lo))
            .flat_map(|d| [mid - d, mid + d])
            .find(|&i| i > lo && i < hi && !untestable.contains(&(i as usize)));
        let Some(i) = pick else {
            break;
        };
        let i = i as usize;
        let v = match seen.get(&i) {
            Some((v, _)) => *v,
            None => {
                let (v, r) = judge(line[i], &mut runs, &mut known)?;
                seen.insert(i, (v, r));
                v
            }
        };
        match v {
            Verdict::Good => lo = i as isize,
            Verdict::Bad => hi = i as isize,
            Verdict::Untestable => {
                untestable.insert(i);
                skipped.push(line[i].to_string());
            }
        }
    }
    let first = line[hi as usize];
    let record = match seen.remove(&(hi as usize)) {
        Some((_, r)) => r,
        None => results::current_record(at, first, refname)?,
    };
    let failure = record.as_ref().and_then(|r| {
        let failures = r.tests.as_ref()?.failures.clone();
        match test {
            Some(t) => failures.into_iter().find(|f| names(&f.name, t)),
            None => failures.into_iter().next(),
        }
    });
    Ok(Bisection {
        good: good.to_string(),
        bad: bad.to_string(),
        test: test.map(str::to_string),
        first_bad: first.to_string(),
        summary: gs_git::commit_info(repo, first)?.summary,
        failure,
        commits: line.len(),
        runs,
        known,
        skipped,
        exact: hi - lo == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_test_is_named_as_its_framework_names_it() {
        assert!(names(
            "test_value (test_value.TestValue.test_value)",
            "test_value"
        ));
        assert!(names(
            "test_value (test_value.TestValue.test_value)",
            "TestValue.test_value"
        ));
        assert!(names("tests/test_a.py::test_b", "test_b"));
        assert!(names("calc::tests::adds", "adds"));
        assert!(!names("test_values (m.T.test_values)", "test_value"));
        assert!(!names("tests/test_a.py::test_b", "test"));
    }
}
