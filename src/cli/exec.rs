use super::{cwd, CmdResult, CommandError};
use crate::app::{run::exec, Context};
use gs_git as git;
use gs_model::KilledBy;

/// Run any command in a sandboxed, throw-away checkout of REV; prints its output and exits with
/// its exit code. Nothing is recorded.
///
/// Example: `git sandbox exec HEAD~2 -- python3 -m pytest -x tests/test_parser.py`
#[derive(clap::Args)]
pub struct ExecArgs {
    #[arg(value_name = "REV")]
    pub rev: String,
    /// Stop the command after this long ("90s", "5m"; default the repository's test timeout).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn cmd_exec(args: ExecArgs) -> CmdResult {
    let dir = cwd()?;
    let repo = git::discover(&dir)?;
    let ctx = Context::load()?;
    let commit = git::resolve_commit(&repo, &args.rev)?;
    let timeout = parse_timeout(args.timeout.as_deref())?;
    let _ = gix::interrupt::init_handler_default(1);
    let executed = exec::exec(
        &ctx,
        &repo,
        commit,
        &args.command,
        timeout,
        exec::Output::Inherit,
        &gix::interrupt::IS_INTERRUPTED,
    )?;
    exit_code(executed.outcome, executed.timeout)
}

/// `--timeout`, as a duration ("90s", "5m").
pub fn parse_timeout(text: Option<&str>) -> Result<Option<std::time::Duration>, CommandError> {
    text.map(|t| {
        gs_config::parse_duration(t).ok_or_else(|| {
            CommandError::usage(format!("invalid --timeout {t:?}"))
                .hint("write a duration like \"90s\" or \"5m\"")
        })
    })
    .transpose()
}

/// The exit code of a command that ran in the sandbox, as a shell gives it: its own, 128 + a
/// signal's, 124 past its timeout (said on stderr).
pub fn exit_code(outcome: gs_sandbox::process::Outcome, timeout: std::time::Duration) -> CmdResult {
    if let Some(e) = outcome.spawn_error {
        return Err(CommandError::failed(e));
    }
    match (
        outcome.killed_by.as_ref(),
        outcome.exit_code,
        outcome.signal,
    ) {
        (Some(KilledBy::Timeout), _, _) => {
            eprintln!(
                "error: the command ran past {}s and was stopped\nhint: pass --timeout to allow longer",
                timeout.as_secs()
            );
            Ok(124)
        }
        (_, Some(code), _) => Ok(code),
        (_, None, Some(sig)) => Ok(128 + sig),
        _ => Ok(1),
    }
}
