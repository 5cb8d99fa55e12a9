use super::{cwd, print_json, ui, CmdResult, CommandError};
use crate::app::{experiment::bisect, intake::session::Session, select, Repo};

/// Find the first commit where the run (or one test) went from passing to failing, on BAD's
/// first-parent line, from the stored results first, running only what a binary search still
/// needs.
///
/// Examples: `git sandbox bisect` (HEAD, from its nearest good ancestor),
/// `git sandbox bisect v1.2 HEAD`, `git sandbox bisect --test tests.test_calc.TestCalc.test_add main~64 main`
#[derive(clap::Args)]
pub struct BisectArgs {
    /// `BAD`, or `GOOD BAD` (BAD defaults to HEAD; GOOD to BAD's nearest ancestor with a good
    /// result).
    #[arg(value_name = "REV", num_args = 0..=2)]
    pub revs: Vec<String>,
    /// Follow one test (as its failure is named in the record) instead of the whole run.
    #[arg(long, value_name = "NAME")]
    pub test: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_bisect(args: BisectArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let (good, bad) = match args.revs.as_slice() {
        [] => (None, "HEAD".to_string()),
        [bad] => (None, bad.clone()),
        [good, bad] => (Some(good.clone()), bad.clone()),
        _ => return Err(CommandError::usage("too many revisions").hint("give `BAD` or `GOOD BAD`")),
    };
    let bad_id = gs_git::resolve_commit(&repo, &bad)?;
    let good_id = good
        .as_deref()
        .map(|g| gs_git::resolve_commit(&repo, g))
        .transpose()?;
    let refname = select::branch_named(&repo, std::slice::from_ref(&bad), false);
    let _ = gix::interrupt::init_handler_default(1);
    let ask = bisect::Ask {
        good: good_id,
        bad: bad_id,
        refname: refname.as_deref(),
        test: args.test.as_deref(),
    };
    let b = bisect::bisect(
        Repo::new(&ctx, &repo, &row),
        &ask,
        &gix::interrupt::IS_INTERRUPTED,
    )?;
    if args.json {
        print_json(&b);
        return Ok(0);
    }
    let what = b.test.as_deref().map_or("the run".to_string(), |t| {
        format!("the test {}", ui::escape(t))
    });
    println!(
        "{} {} is the first commit where {what} fails{}",
        ui::yellow(gs_util::short(&b.first_bad)),
        ui::escape(&b.summary),
        if b.exact {
            String::new()
        } else {
            " (or one just before it: the commits between gave errors)".into()
        }
    );
    if let Some(f) = &b.failure {
        println!(
            "  ✘ {}: {}",
            ui::escape(&f.name),
            ui::escape(ui::first_line(&f.message))
        );
    }
    println!(
        "  {} between {} and {}: {} run, {} answered by stored results{}",
        ui::plural(b.commits, "commit"),
        gs_util::short(&b.good),
        gs_util::short(&b.bad),
        ui::plural(b.runs, "commit"),
        b.known,
        if b.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} passed over (error)", b.skipped.len())
        }
    );
    Ok(0)
}
