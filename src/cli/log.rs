use super::ui::say;
use super::{cwd, print_json, ui, CmdResult};
use crate::app::{intake::session::Session, records::history, Repo};

/// One line per commit with its result, like `git log --oneline` with ✔/✘, counts and duration,
/// in `git log`'s order.
///
/// Revisions as git log takes them: `REV` (its history), `OLDER..NEWER`, `A...B`, `^REV`, several
/// at once, and `--all` for every watched branch.
///
/// Examples: `git sandbox log`, `git sandbox log main~10..main`, `git sandbox log --all`,
/// `git sandbox log -n 5 --json`
#[derive(clap::Args)]
pub struct LogArgs {
    /// Revisions whose history to show (default HEAD), ranges OLDER..NEWER or A...B, ^REV.
    #[arg(value_name = "REV|RANGE")]
    pub revs: Vec<String>,
    /// The history of every watched branch (`[watch] branches`).
    #[arg(long)]
    pub all: bool,
    /// Show at most this many commits.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub max_count: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_log(args: LogArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    super::notice_hooks(&repo);
    let (entries, warning) = history::history(
        Repo::new(&ctx, &repo, &row),
        &args.revs,
        args.all,
        args.max_count,
    )?;
    if entries.is_empty() {
        eprintln!("{}: no commits", ui::revisions(&args.revs, args.all));
    }
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    if args.json {
        print_json(&entries);
        return Ok(0);
    }
    let mut out = String::new();
    render(&mut out, &entries);
    print!("{out}");
    Ok(0)
}

/// One line per commit, newest first: its result (or the report nobody vouches for), or that
/// it was not run.
fn render(out: &mut String, entries: &[history::Entry]) {
    for e in entries {
        match e.result.as_ref().or(e.reported.as_ref()) {
            Some(r) => match &e.could_not_run_here {
                Some(_) => say!(
                    out,
                    "{} {}",
                    ui::oneline(r, &e.summary),
                    ui::dim("· could not run here since")
                ),
                None => say!(out, "{}", ui::oneline(r, &e.summary)),
            },
            None => say!(
                out,
                "{} {} {} {}",
                ui::dim("·"),
                ui::yellow(gs_util::short(&e.commit)),
                ui::dim(e.job.unwrap_or("not run")),
                ui::escape(&e.summary)
            ),
        }
    }
}
