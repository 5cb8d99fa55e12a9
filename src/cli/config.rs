//! `git sandbox config --example`: the repository config's every key, as the binary embeds it.

use super::CmdResult;
use std::io::Write;

/// Print what a repository's `.sandbox.toml` may hold: every key, commented, with its default.
///
/// Example: `git sandbox config --example > .sandbox.toml`, then keep the keys you need.
#[derive(clap::Args)]
pub struct ConfigArgs {
    /// Print the example `.sandbox.toml` with every key explained.
    #[arg(long, required = true)]
    pub example: bool,
}

pub fn cmd_config(_args: ConfigArgs) -> CmdResult {
    let mut out = std::io::stdout().lock();
    // A reader that went away (`| head`) ends it by SIGPIPE, like git.
    let _ = out.write_all(gs_config::EXAMPLE.as_bytes());
    Ok(0)
}
