//! The MCP tools' arguments: one type each, whose JSON Schema (schemars) is the tool's input
//! schema and whose `Deserialize` (unknown fields refused) is its check, so the two cannot drift.

use super::tools::CallError;
use crate::app::AppError;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// Parse a tool's arguments; a mismatch is a clear error naming the tool and the field.
pub(super) fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, CallError> {
    serde_json::from_value(args).map_err(|e| {
        CallError::Arguments(
            AppError::usage(format!("bad arguments for {tool}: {e}"))
                .hint("see the tool's input schema in tools/list"),
        )
    })
}

pub(super) fn positive(
    tool: &str,
    field: &str,
    n: Option<usize>,
    default: usize,
) -> Result<usize, CallError> {
    match n {
        None => Ok(default),
        Some(0) => Err(CallError::Arguments(
            AppError::usage(format!(
                "bad arguments for {tool}: {field} must be at least 1"
            ))
            .hint(format!("leave {field} out for {default}")),
        )),
        Some(n) => Ok(n),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The experiment's name, a slug: letters, digits, '-', '_' and '.' (the branch is experiment/<name>).
    pub(super) name: String,
    /// What the experiment sets out to show.
    pub(super) hypothesis: Option<String>,
    /// Start from this revision instead of the production branch.
    pub(super) base: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameArgs {
    /// The experiment's name.
    pub(super) name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// A longer answer (up to 32 KB instead of 2 KB).
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// How long to wait at most (default 60, at most 600).
    pub(super) timeout_seconds: Option<u64>,
    /// `result` (default): the whole result. `first_failure`: return as soon as the running
    /// run's first failing test is known (`provisional: true`); the whole result comes later.
    #[serde(default)]
    pub(super) until: crate::app::intake::queue::Until,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// How many failures to list (default 5).
    pub(super) failures: Option<usize>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailuresArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// Skip this many failures (from next_offset of the previous page).
    pub(super) offset: Option<usize>,
    /// At most this many (default 10).
    pub(super) limit: Option<usize>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// The 0-based line to start at (next_offset of the previous page).
    pub(super) offset: Option<usize>,
    /// At most this many lines (default 100; the answer's size budget may stop earlier).
    pub(super) limit: Option<usize>,
    /// Only lines containing this text.
    pub(super) grep: Option<String>,
    /// The output of this named check (lint, types, …) instead of the tests', or `setup` for
    /// the setup step's (read by default when the setup step failed and the tests never ran).
    pub(super) check: Option<String>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalysisArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// Only files under this path (a directory or a file).
    pub(super) path: Option<String>,
    /// How many files and functions to list (default 10).
    pub(super) limit: Option<usize>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalysisDiffArgs {
    /// The revision to compare from (default the production branch).
    pub(super) base: Option<String>,
    /// The revision to compare to.
    pub(super) head: String,
    /// Only files under this path.
    pub(super) path: Option<String>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareArgs {
    /// Experiments' names or revisions, one row each.
    pub(super) targets: Vec<String>,
    /// The base (default the production branch).
    pub(super) base: Option<String>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteArgs {
    /// The experiment's name.
    pub(super) name: String,
    /// Check and test only, move nothing (default true).
    pub(super) dry_run: Option<bool>,
    /// merge or ff (default [promote] strategy).
    pub(super) strategy: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillArgs {
    /// The experiment's name.
    pub(super) name: String,
    /// Delete the branch instead of archiving it.
    #[serde(default)]
    pub(super) delete: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// A revision (branch, tag, commit id, HEAD~1) or an experiment's name.
    pub(super) revision: String,
    /// The command and its arguments, e.g. ["python3", "-m", "pytest", "-x"].
    pub(super) command: Vec<String>,
    /// Stop it after this many seconds (default the repository's test timeout).
    pub(super) timeout_seconds: Option<u64>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// Only events after this one (the cursor of the previous answer); without it, the newest.
    pub(super) cursor: Option<i64>,
    /// At most this many (default 20).
    pub(super) limit: Option<usize>,
    /// Only this kind (run.completed) or a prefix ending in a dot (run.).
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigArgs {
    /// The revision whose config (default the production branch's head).
    pub(super) revision: Option<String>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceNewArgs {
    /// The workspace's name, which is its experiment's (branch experiment/<name>).
    pub(super) name: String,
    /// Where its branch starts: a revision (default: the production branch).
    pub(super) from: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceArgs {
    /// The workspace's name.
    pub(super) name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceExecArgs {
    /// The workspace's name.
    pub(super) name: String,
    /// The command and its arguments, e.g. ["python3", "-m", "pytest", "-x"].
    pub(super) command: Vec<String>,
    /// Stop it after this many seconds (default the repository's test timeout).
    pub(super) timeout_seconds: Option<u64>,
    #[serde(default)]
    pub(super) detail: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFileArgs {
    /// The workspace's name.
    pub(super) name: String,
    /// A path relative to the workspace's root, e.g. src/main.py.
    pub(super) path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceWriteArgs {
    /// The workspace's name.
    pub(super) name: String,
    /// A path relative to the workspace's root, e.g. src/main.py.
    pub(super) path: String,
    /// The file's whole new content (UTF-8 text).
    pub(super) content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCommitArgs {
    /// The workspace's name.
    pub(super) name: String,
    /// The commit message.
    pub(super) message: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRmArgs {
    /// The workspace's name.
    pub(super) name: String,
    /// Kill its experiment too (its branch archived); default: the branch stays.
    #[serde(default)]
    pub(super) kill: bool,
}
