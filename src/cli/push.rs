use super::{cwd, print_json, ui, CmdResult};
use crate::app::{intake::session::Session, publish::remote, Repo};

/// Send the watched branches and the results (`refs/notes/sandbox*`, `refs/sandbox/*`) to a remote.
///
/// Never forced. When the remote's notes moved meanwhile (another machine pushed results), they
/// are fetched, merged line-wise into ours and pushed again, with back-off. A branch the remote
/// moved is left for you to merge. Authentication is git's own (credential helpers, SSH keys).
/// REMOTE defaults to the current branch's remote, else `origin`.
///
/// Example: `git sandbox push`, `git sandbox push upstream --notes-only`
#[derive(clap::Args)]
pub struct PushArgs {
    #[arg(value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Push only the notes (results, summaries, evaluations), no branch.
    #[arg(long)]
    pub notes_only: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_push(args: PushArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let p = remote::push(
        Repo::new(&ctx, &repo, &row),
        args.remote.as_deref(),
        args.notes_only,
    )?;
    if args.json {
        print_json(&p);
    } else {
        let merged = if p.merges > 0 {
            format!(
                " (merged the remote's newer notes {})",
                ui::plural(p.merges, "time")
            )
        } else {
            String::new()
        };
        println!(
            "Pushed to {} ({}): {} updated, {} up to date{merged}",
            p.remote,
            p.url,
            ui::plural(p.updated.len(), "ref"),
            p.up_to_date
        );
        for r in &p.updated {
            println!("  {r}");
        }
        for r in &p.rejected {
            eprintln!(
                "rejected: {}: {}",
                ui::escape(&r.name),
                ui::escape(&r.reason)
            );
        }
        if !p.rejected.is_empty() {
            eprintln!(
                "hint: a branch the remote moved is yours to merge: git pull {} BRANCH, then git sandbox push",
                p.remote
            );
        }
    }
    Ok(i32::from(!p.rejected.is_empty()))
}
