use super::{print_json, ui, CmdResult};
use crate::app::{intake::spool, records::views, Context};
use gs_util::time;

/// List registered experiment repositories with their runs, pending jobs and last activity.
///
/// Example: `git sandbox list --json`
#[derive(clap::Args)]
pub struct ListArgs {
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_list(args: ListArgs) -> CmdResult {
    let ctx = Context::load()?;
    // The commits the hooks spooled count as pending.
    spool::take_in(&ctx, true);
    let stats = views::repositories(&ctx)?;
    if args.json {
        print_json(&serde_json::json!({
            "repositories": stats,
            "total": stats.len(),
        }));
        return Ok(0);
    }
    if stats.is_empty() {
        println!("No experiment repositories yet; create one with `git sandbox new` or adopt one with `git sandbox init`.");
        return Ok(0);
    }
    let now = time::now_millis();
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                s.repo.name.clone(),
                s.repo.repository_type.clone(),
                s.runs.to_string(),
                s.pending_jobs.to_string(),
                s.repo
                    .last_activity
                    .as_deref()
                    .and_then(time::parse_rfc3339)
                    .map(|t| time::age(t, now))
                    .unwrap_or_else(|| "-".into()),
                s.repo.path.clone(),
            ]
        })
        .collect();
    ui::table(
        &["NAME", "TYPE", "RUNS", "PENDING", "ACTIVITY", "PATH"],
        &rows,
    );
    println!(
        "{} repositor{}",
        stats.len(),
        if stats.len() == 1 { "y" } else { "ies" }
    );
    Ok(0)
}
