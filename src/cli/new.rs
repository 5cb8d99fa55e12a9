use super::{print_json, CmdResult};
use crate::app::{repos, Context};
use std::path::PathBuf;

/// Create an experiment repository: template files, initial commit, hooks, registration.
///
/// Example: `git sandbox new faster-parser` creates `$GIT_SANDBOX_HOME/repos/faster-parser`.
#[derive(clap::Args)]
pub struct NewArgs {
    /// Name of the repository (default `ai-sandbox-experiments-YYYYMMDD_HHMMSS`, UTC).
    pub name: Option<String>,
    /// Create it at this directory (which must not exist) instead of `$GIT_SANDBOX_HOME/repos/NAME`.
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Print the new repository as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_new(args: NewArgs) -> CmdResult {
    // Check the name before anything else is opened or created.
    if let Some(name) = &args.name {
        repos::check_name(name)?;
    }
    let ctx = Context::load()?;
    let created = repos::create(&ctx, args.name.as_deref(), args.path.as_deref())?;
    if args.json {
        print_json(&created);
    } else {
        println!(
            "Created experiment repository {} at {}",
            created.repo.name, created.repo.path
        );
        println!("  id:    {}", created.repo.repository_id);
        println!(
            "  hooks: {}",
            created
                .hooks
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        eprintln!("Next: cd {} && git sandbox run", created.repo.path);
    }
    Ok(0)
}
