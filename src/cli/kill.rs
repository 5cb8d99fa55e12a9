use super::{cwd, print_json, CmdResult};
use crate::app::{experiment::experiments, intake::session::Session, repo::repos, Repo};

/// Kill an experiment: archive its branch and mark it killed.
///
/// Moves its branch experiment/NAME to refs/sandbox/archive/NAME (kept, so
/// its commits and results stay reachable) and mark it killed. --delete drops the branch (or an
/// existing archive) instead; its commits are then left to git's garbage collection.
///
/// Example: `git sandbox kill faster-parser`, `git sandbox kill faster-parser --delete`
#[derive(clap::Args)]
pub struct KillArgs {
    #[arg(value_name = "EXPERIMENT")]
    pub name: String,
    /// Remove the branch and the archive instead of keeping an archive.
    #[arg(long)]
    pub delete: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_kill(args: KillArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let k = experiments::kill(Repo::new(&ctx, &repo, &row), &args.name, args.delete)?;
    if args.json {
        print_json(&k);
    } else {
        match &k.archive {
            Some(a) => println!(
                "Killed experiment {}; its branch is archived at {a}",
                k.experiment
            ),
            None => println!("Killed experiment {} and deleted its branch", k.experiment),
        }
    }
    Ok(0)
}
