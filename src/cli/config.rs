//! `git sandbox config`: the repository config's every key as the binary embeds it
//! (`--example`), or the settings `init` adopted the current repository with (`--adopted`).

use super::{cwd, CmdResult};
use crate::app::AppError;
use std::io::Write;

/// Print what a repository's `.sandbox.toml` may hold (every key, commented, with its default),
/// or the settings `git sandbox init` adopted this repository with (`.git/sandbox.toml`: they
/// stand for the `.sandbox.toml` of every commit without one).
///
/// Example: `git sandbox config --example > .sandbox.toml`, then keep the keys you need;
/// `git sandbox config --adopted > .sandbox.toml && git add .sandbox.toml`
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true))]
pub struct ConfigArgs {
    /// Print the example `.sandbox.toml` with every key explained.
    #[arg(long, group = "what")]
    pub example: bool,
    /// Print the settings `git sandbox init` adopted this repository with.
    #[arg(long, group = "what")]
    pub adopted: bool,
}

pub fn cmd_config(args: ConfigArgs) -> CmdResult {
    let text = if args.adopted {
        let repo = gs_git::discover(&cwd()?)?;
        crate::app::config::adopted::read(&repo)?.ok_or_else(|| {
            AppError::not_found(format!(
                "{} has no adopted settings",
                gs_git::repo_root(&repo).display()
            ))
            .hint("run `git sandbox init` in it first")
        })?
    } else {
        gs_config::EXAMPLE.to_string()
    };
    let mut out = std::io::stdout().lock();
    // A reader that went away (`| head`) ends it by SIGPIPE, like git.
    let _ = out.write_all(text.as_bytes());
    Ok(0)
}
