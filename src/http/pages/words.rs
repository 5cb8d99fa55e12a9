//! The words a page shows for the records' enums: `timed out` for `timeout`, `not run` for
//! `not_run`, `strongly recommend` for `STRONGLY_RECOMMEND`. Only the pages: the API, the
//! notes and `--json` keep the records' words, which scripts match on.

use gs_model::{KilledBy, Recommendation};

/// A run's or a check's status (`passed`, `timeout`, …, and `not_run` where a comparison has
/// no result).
pub fn status(word: &str) -> String {
    match word {
        "timeout" => "timed out".into(),
        "not_run" => "not run".into(),
        "unknown" => "status unknown".into(),
        other => plain(other),
    }
}

/// What started a run (`hook`, `api`, `mcp`, …), to follow "started".
pub fn trigger(word: &str) -> String {
    match word {
        "manual" => "by hand".into(),
        "hook" => "by a git hook".into(),
        "watch" => "by the daemon's watch".into(),
        "webhook" => "by a webhook".into(),
        "backfill" => "by the backfill of an adopted repository".into(),
        "poll" => "by a poll of the remote".into(),
        "mcp" => "by an agent (MCP)".into(),
        "api" => "through the HTTP API".into(),
        other => format!("by {}", plain(other)),
    }
}

/// Where an experiment stands (`active`, `rolled_back`, `budget_exhausted`, …).
pub fn experiment_state(word: &str) -> String {
    match word {
        "budget_exhausted" => "out of budget".into(),
        other => plain(other),
    }
}

/// An evaluation's verdict.
pub fn verdict(v: Recommendation) -> String {
    plain(&v.as_str().to_ascii_lowercase())
}

/// What stopped a command early, after "stopped by".
pub fn killed_by(k: &KilledBy) -> String {
    match k {
        KilledBy::Timeout => "its timeout".into(),
        KilledBy::Cpu => "the CPU limit".into(),
        KilledBy::Output => "the output limit".into(),
        KilledBy::Memory => "the memory limit".into(),
        KilledBy::Processes => "the process limit".into(),
        KilledBy::FileSize => "the file size limit".into(),
        KilledBy::Disk => "the disk limit".into(),
        KilledBy::Interrupt => "an interrupt".into(),
        KilledBy::Signal => "a signal".into(),
        KilledBy::Other(w) => plain(w),
    }
}

/// An event's kind (`run.first_failure` → `run first failure`); the kind itself stays in the
/// markup's `title`, as `events --kind` takes it.
pub fn event(kind: &str) -> String {
    plain(kind)
}

/// A word of a record as text: `_` and `.` between words become spaces.
fn plain(word: &str) -> String {
    word.replace(['_', '.'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_word_keeps_its_underscores_or_capitals() {
        assert_eq!(status("timeout"), "timed out");
        assert_eq!(status("not_run"), "not run");
        assert_eq!(status("passed"), "passed");
        assert_eq!(experiment_state("rolled_back"), "rolled back");
        assert_eq!(experiment_state("budget_exhausted"), "out of budget");
        assert_eq!(
            verdict(Recommendation::StronglyRecommend),
            "strongly recommend"
        );
        assert_eq!(verdict(Recommendation::NotReady), "not ready");
        assert_eq!(killed_by(&KilledBy::FileSize), "the file size limit");
        assert_eq!(killed_by(&KilledBy::parse("new_limit")), "new limit");
        assert_eq!(event("run.first_failure"), "run first failure");
        assert_eq!(trigger("api"), "through the HTTP API");
        assert_eq!(trigger("cron_job"), "by cron job");
    }
}
