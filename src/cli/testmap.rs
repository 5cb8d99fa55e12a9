use super::{print_json, CmdResult};
use crate::app::intake::session::Session;
use crate::app::run::testmap;

/// Make the test map of a commit now (git-sandbox starts this itself, at idle priority, after a
/// production run whose commit has no map among its last 20 first-parent ancestors).
#[derive(clap::Args)]
pub struct TestmapArgs {
    /// The commit whose tests are mapped.
    #[arg(value_name = "REV", default_value = "HEAD")]
    pub rev: String,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_testmap(args: TestmapArgs) -> CmdResult {
    let dir = super::cwd()?;
    let Session { ctx, repo, row } = Session::open(&dir)?;
    let commit = gs_git::resolve_commit(&repo, &args.rev)?;
    let _ = gix::interrupt::init_handler_default(1);
    let made = testmap::make(&ctx, &repo, &row, commit, &gix::interrupt::IS_INTERRUPTED)?;
    if args.json {
        print_json(&serde_json::json!({
            "commit": made.commit,
            "tests": made.tests,
            "files": made.files,
            "path": made.path,
            "ms": made.ms,
        }));
    } else {
        println!(
            "test map of {}: {} tests over {} files, in {:.1} s",
            gs_util::short(&made.commit),
            made.tests,
            made.files,
            made.ms as f64 / 1000.0
        );
    }
    Ok(0)
}
