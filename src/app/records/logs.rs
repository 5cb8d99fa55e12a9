//! A run's output as the runner captured it (capped by `[limits] output`), read a page at a
//! time: from a line, at most so many lines, optionally only the lines holding a text.

use crate::app::{io_err, AppError, Context, Result};
use gs_model::RunRecord;
use gs_store::RepoRow;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where the tests' output of the run behind `record` is kept (the run a cached result came
/// from).
pub fn path(ctx: &Context, row: &RepoRow, record: &RunRecord) -> PathBuf {
    check_path(ctx, row, record, None)
}

/// Where the output of one check (`None` or `test`: the tests) of the run behind `record` is
/// kept.
pub fn check_path(
    ctx: &Context,
    row: &RepoRow,
    record: &RunRecord,
    check: Option<&str>,
) -> PathBuf {
    log_path(
        &ctx.paths.logs().join(&row.repository_id),
        record.cached_from.as_deref().unwrap_or(&record.commit),
        check,
        false,
    )
}

/// Where a trial run's (`run --command`/`--timeout`) test output is kept: beside the
/// commit's own, never in its place.
pub fn trial_path(ctx: &Context, row: &RepoRow, record: &RunRecord) -> PathBuf {
    log_path(
        &ctx.paths.logs().join(&row.repository_id),
        &record.commit,
        None,
        true,
    )
}

/// Where the setup step's output (`[test] setup`) of the run behind `record` is kept: the
/// output of a run whose setup step failed, when its tests never ran.
pub fn setup_path(ctx: &Context, row: &RepoRow, record: &RunRecord) -> PathBuf {
    let commit = record.cached_from.as_deref().unwrap_or(&record.commit);
    let plain: String = commit.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    ctx.paths
        .logs()
        .join(&row.repository_id)
        .join(format!("{plain}.setup.log"))
}

/// The check name that reads the setup step's output (when no check has that name).
pub const SETUP: &str = "setup";

/// A longer line is cut (marked `…`), so that one line always fits a page.
const MAX_LINE: usize = 400;

fn cut(line: &str) -> String {
    if line.len() <= MAX_LINE {
        return line.to_string();
    }
    let mut end = MAX_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// Which lines to read.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    /// The 0-based line to start at.
    pub offset: usize,
    /// At most this many lines.
    pub limit: usize,
    /// Only lines that contain this text.
    pub grep: Option<String>,
    /// The output of this named check (`None`: the tests').
    pub check: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// 1-based, as editors count.
    pub n: usize,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub total_lines: usize,
    pub lines: Vec<Line>,
    /// Where the next page starts; `None` at the end.
    pub next_offset: Option<usize>,
    /// The runner stopped keeping output at `[limits] output`.
    pub output_truncated: bool,
    /// The lines are the setup step's output: asked for (check `setup`), or the tests never ran
    /// because the setup step failed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub setup_step: bool,
}

/// A page of the output of the run behind `record`. `take` decides whether a line still fits
/// (the caller's size budget); the page ends before the first line it refuses, but
/// always holds one line when one is left.
pub fn read(
    ctx: &Context,
    row: &RepoRow,
    record: &RunRecord,
    req: &PageRequest,
    mut take: impl FnMut(&Line) -> bool,
) -> Result<Page> {
    let check = req.check.as_deref().filter(|c| *c != gs_config::TEST_CHECK);
    let setup = setup_path(ctx, row, record);
    // A named check `setup` wins; else `setup` is the setup step, and so is a run's only
    // output when its setup step failed before the tests could run.
    let setup_step = match check {
        Some(SETUP) => record.checks.get(SETUP).is_none(),
        None => record.tests.is_none() && setup.is_file(),
        Some(_) => false,
    };
    let check = check.filter(|_| !setup_step);
    let truncated = match check {
        _ if setup_step => false,
        None => record.tests.as_ref().is_some_and(|t| t.output_truncated),
        Some(name) => match record.checks.get(name) {
            Some(c) => c.run.output_truncated,
            None => {
                let names: Vec<&str> = record.checks.iter().map(|(n, _)| n).collect();
                return Err(AppError::not_found(format!(
                    "the run of {} has no check `{name}`",
                    gs_util::short(&record.commit)
                ))
                .hint(if names.is_empty() {
                    "it ran only the tests; leave the check out".to_string()
                } else {
                    format!("its checks are: test, {}", names.join(", "))
                }));
            }
        },
    };
    let file = if setup_step {
        setup
    } else {
        check_path(ctx, row, record, check)
    };
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AppError::not_found(format!(
                "the output of the run of {} is not kept on this machine (it ran elsewhere, ran no test command, or `git sandbox gc` removed it)",
                gs_util::short(&record.commit)
            ))
            .hint("the record's output_tail has its last lines; run it here with `git sandbox run --force REV`"));
        }
        Err(e) => return Err(io_err(format!("cannot read {}", file.display()))(e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let mut lines = Vec::new();
    let mut next_offset = None;
    for (i, l) in all.iter().enumerate().skip(req.offset) {
        if req.grep.as_deref().is_some_and(|g| !l.contains(g)) {
            continue;
        }
        let line = Line {
            n: i + 1,
            text: cut(l),
        };
        if lines.len() >= req.limit || (!take(&line) && !lines.is_empty()) {
            next_offset = Some(i);
            break;
        }
        lines.push(line);
    }
    Ok(Page {
        total_lines: all.len(),
        lines,
        next_offset,
        output_truncated: truncated,
        setup_step,
    })
}

/// Where a run's logs go: the tests' to `<commit>.log`, a check's to `<commit>.check-NAME.log`
/// (`.trial.` before `log` for a trial). The names may come from a note someone else wrote:
/// only the characters a commit id and a check name may hold are kept, so the path stays in
/// `dir`.
pub fn log_path(dir: &Path, commit: &str, check: Option<&str>, trial: bool) -> PathBuf {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_')
            .collect()
    };
    let commit = plain(commit);
    let check = check
        .filter(|c| *c != gs_config::TEST_CHECK)
        .map(|c| format!(".check-{}", plain(c)))
        .unwrap_or_default();
    let trial = if trial { ".trial" } else { "" };
    dir.join(format!("{commit}{check}{trial}.log"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_path_never_leaves_the_logs_directory() {
        let dir = std::path::Path::new("/logs/repo");
        let p = super::log_path(dir, "../../etc/passwd", Some("../x"), false);
        assert_eq!(p.parent(), Some(dir));
        assert_eq!(
            super::log_path(dir, "ab12", Some("type-check"), true),
            dir.join("ab12.check-type-check.trial.log")
        );
    }
}
