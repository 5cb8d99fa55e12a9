use super::{print_json, ui, CmdResult};
use crate::app::{repo::reindex, Context};

/// Rebuild the index (runs, experiments, evaluations) from the notes and refs of every registered repository (and every repository under
/// `$GIT_SANDBOX_HOME/repos`). Deleting index.db loses nothing: run this.
///
/// Example: `rm ~/.local/share/git-sandbox/index.db && git sandbox reindex`
#[derive(clap::Args)]
pub struct ReindexArgs {
    /// Also adopt these repositories' results (paths of repositories set up with `init`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_reindex(args: ReindexArgs) -> CmdResult {
    let ctx = Context::load()?;
    let report = reindex::reindex(&ctx, &args.paths)?;
    if args.json {
        print_json(&report);
    } else {
        for r in &report.repositories {
            match &r.error {
                None => {
                    println!(
                        "{}: {} from notes, {} from refs",
                        r.path,
                        ui::plural(r.runs, "run"),
                        ui::plural(r.experiments, "experiment")
                    );
                    if let Some(first) = r.skipped.first() {
                        eprintln!(
                            "warning: {}: skipped {} note{} that hold no run record for their commit (e.g. {}: {}); those commits count as not run",
                            r.path,
                            r.skipped.len(),
                            if r.skipped.len() == 1 { "" } else { "s" },
                            gs_util::short(&first.commit),
                            first.reason
                        );
                    }
                }
                Some(e) => eprintln!("warning: {}: skipped: {e}", r.path),
            }
            if r.future_dated > 0 {
                eprintln!(
                    "warning: {}: not read: {} dated more than a minute past this machine's clock",
                    r.path,
                    ui::plural(r.future_dated, "record")
                );
            }
        }
        println!(
            "Indexed {} and {} in {}",
            ui::plural(report.runs, "run"),
            ui::plural(report.experiments, "experiment"),
            ui::plural(
                report
                    .repositories
                    .iter()
                    .filter(|r| r.error.is_none())
                    .count(),
                "repository"
            )
        );
    }
    Ok(i32::from(
        report.repositories.iter().any(|r| r.error.is_some()),
    ))
}
