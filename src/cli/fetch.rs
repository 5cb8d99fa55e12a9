use super::{cwd, print_json, ui, CmdResult};
use crate::app::{intake::fetch, intake::session::Session, Repo};

/// Bring a remote's branches and results here, merging its notes into ours and indexing them.
///
/// The remote's notes land in `refs/notes/remotes/REMOTE/sandbox*` and are merged line-wise into
/// ours (every machine's record is kept; the newest made for a commit is shown). Its branches
/// become remote-tracking refs, as with `git fetch`. REMOTE defaults to the current branch's
/// remote, else `origin`.
///
/// Example: `git clone URL && cd REPO && git sandbox init && git sandbox fetch && git sandbox log`
#[derive(clap::Args)]
pub struct FetchArgs {
    #[arg(value_name = "REMOTE")]
    pub remote: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_fetch(args: FetchArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let f = fetch::fetch(Repo::new(&ctx, &repo, &row), args.remote.as_deref())?;
    if args.json {
        print_json(&f);
    } else {
        println!(
            "Fetched {} ({}): {} arrived, {} updated",
            f.remote,
            f.url,
            ui::plural(f.results, "result"),
            ui::plural(f.updated.len(), "ref"),
        );
        for r in &f.merged {
            println!("  merged into {r}");
        }
        if let Some(line) = f.not_indexed.line() {
            eprintln!("warning: {line} (shown nowhere, never used as a result)");
        }
        for r in &f.rejected {
            eprintln!(
                "warning: not taken: {}: {} (yours is kept)",
                ui::escape(&r.name),
                ui::escape(&r.reason)
            );
        }
    }
    Ok(0)
}
