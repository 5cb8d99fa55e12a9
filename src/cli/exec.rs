use super::{cwd, CmdResult, CommandError};
use crate::app::{run::config_for, Context};
use crate::config::ConfigFile;
use crate::git::{self, checkout};
use crate::runner::{env, process};

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

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn cmd_exec(args: ExecArgs) -> CmdResult {
    let dir = cwd()?;
    let repo = git::discover(&dir)?;
    let ctx = Context::load()?;
    let commit = git::resolve_commit(&repo, &args.rev)?;
    let info = git::commit_info(&repo, commit)?;
    let mut config = config_for(&ctx, &repo, &info, None, &ConfigFile::default())?;
    if let Some(t) = &args.timeout {
        config.test.timeout = crate::config::parse_duration(t).ok_or_else(|| {
            CommandError::usage(format!("invalid --timeout {t:?}"))
                .hint("write a duration like \"90s\" or \"5m\"")
        })?;
    }
    let _ = gix::interrupt::init_handler_default(1);
    let work = checkout::checkout_tree(
        &repo,
        info.tree,
        &checkout::scratch_root(),
        &gix::interrupt::IS_INTERRUPTED,
        config.limits.checkout_bytes(),
    )?;
    let command: Vec<String> = args.command.iter().map(|a| shell_quote(a)).collect();
    let command = format!("exec {}", command.join(" "));
    let outcome = process::run(process::Spec {
        command: &command,
        cwd: &work.path(),
        root: work.root(),
        env: env::sandbox_env(work.root()),
        timeout: config.test.timeout,
        output: process::Output::Inherit,
        limits: &config.limits,
        sandbox: &ctx.sandbox(),
        interrupt: &gix::interrupt::IS_INTERRUPTED,
        artifacts: &[],
    });
    drop(work);
    if let Some(e) = outcome.spawn_error {
        return Err(CommandError::failed(e));
    }
    match (
        outcome.killed_by.as_deref(),
        outcome.exit_code,
        outcome.signal,
    ) {
        (Some("timeout"), _, _) => {
            eprintln!(
                "error: the command ran past {}s and was stopped\nhint: pass --timeout to allow longer",
                config.test.timeout.as_secs()
            );
            Ok(124)
        }
        (_, Some(code), _) => Ok(code),
        (_, None, Some(sig)) => Ok(128 + sig),
        _ => Ok(1),
    }
}
