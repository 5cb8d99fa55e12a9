use super::{cwd, print_json, ui, CmdResult};
use crate::app::{repo::forget, Context};

/// Unregister a repository: its index rows, registry entry and run logs (its notes stay in git).
///
/// Removes its rows from the index (runs, experiments, evaluations, jobs, events), its registry
/// entry and its run logs. Its git notes stay in git, and its hooks stay installed: the next commit or `git sandbox` command in it registers it again
/// (and imports its notes). To take the hooks out as well, run `git sandbox init --remove` in it.
///
/// Without an argument, the repository around the current directory.
///
/// Example: `git sandbox forget faster-parser`, `git sandbox forget ~/src/old-exp`
#[derive(clap::Args)]
pub struct ForgetArgs {
    /// The repository: its id, its path, or its name as `git sandbox list` shows it.
    #[arg(value_name = "PATH|NAME|ID")]
    pub repository: Option<String>,
    /// Print what was removed as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_forget(args: ForgetArgs) -> CmdResult {
    let dir = cwd()?;
    let ctx = Context::load()?;
    let f = forget::forget(&ctx, args.repository.as_deref(), &dir)?;
    if args.json {
        print_json(&f);
        return Ok(0);
    }
    println!(
        "Forgot {} ({}) at {}: {}, {}, {}, {}, {}, {} ({})",
        f.name,
        f.repository_id,
        f.path,
        ui::plural(f.rows.runs, "run"),
        ui::plural(f.rows.experiments, "experiment"),
        ui::plural(f.rows.evaluations, "evaluation"),
        ui::plural(f.rows.jobs, "job"),
        ui::plural(f.rows.events, "event"),
        ui::plural(f.logs.count, "log"),
        ui::bytes(f.logs.bytes)
    );
    if std::path::Path::new(&f.path).exists() {
        eprintln!("hint: its notes stay in git, and its hooks are still installed: its next commit registers it again; run `git sandbox init --remove` in {} to take them out", f.path);
    }
    Ok(0)
}
