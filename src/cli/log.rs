use super::{cwd, print_json, ui, CmdResult};
use crate::app::{repos, Context};
use crate::model::RunRecord;

/// One line per commit with its result, like `git log --oneline` with ✔/✘, counts and duration.
///
/// Examples: `git sandbox log`, `git sandbox log main~10..main`, `git sandbox log -n 5 --json`
#[derive(clap::Args)]
pub struct LogArgs {
    /// A range OLDER..NEWER or a revision whose history to show (default HEAD).
    #[arg(value_name = "RANGE")]
    pub range: Option<String>,
    /// Show at most this many commits.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub max_count: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct Entry {
    commit: String,
    summary: String,
    result: Option<RunRecord>,
}

pub fn cmd_log(args: LogArgs) -> CmdResult {
    let dir = cwd()?;
    crate::git::discover(&dir)?;
    let ctx = Context::load()?;
    let (repo, row) = repos::require_registered(&ctx, &dir)?;
    let spec = args.range.clone().unwrap_or_else(|| "HEAD".into());
    let mut commits = if spec.contains("..") {
        crate::git::resolve_commits(&repo, &spec)?
    } else {
        let tip = crate::git::resolve_commit(&repo, &spec)?;
        let mut ids = Vec::new();
        for info in repo.rev_walk([tip]).all().map_err(crate::git::gix_err)? {
            ids.push(info.map_err(crate::git::gix_err)?.id);
            if ids.len() >= args.max_count {
                break;
            }
        }
        ids.reverse();
        ids
    };
    commits.reverse(); // newest first, like git log
    commits.truncate(args.max_count);
    let mut reader = crate::app::results::NoteReader::new(&repo)?;
    let mut entries = Vec::new();
    for c in commits {
        let info = crate::git::commit_info(&repo, c)?;
        let result = crate::app::results::own_record(&ctx, &repo, &row, &mut reader, c)?;
        entries.push(Entry {
            commit: c.to_string(),
            summary: info.summary,
            result,
        });
    }
    if let Some(w) = reader.warning() {
        eprintln!("warning: {w}");
    }
    if args.json {
        print_json(&entries);
        return Ok(0);
    }
    for e in &entries {
        match &e.result {
            Some(r) => println!("{}", ui::oneline(r, &e.summary)),
            None => println!(
                "{} {} {} {}",
                ui::dim("·"),
                ui::yellow(crate::util::short(&e.commit)),
                ui::dim("not run"),
                e.summary
            ),
        }
    }
    Ok(0)
}
