use super::{cwd, experiment::print_evaluation, print_json, CmdResult};
use crate::app::{experiment::eval, intake::session::Session, repo::repos, Repo};
use gs_model::Recommendation;

/// Evaluate an experiment against production (criteria and a recommendation).
///
/// Compares the result of the experiment's head with the
/// result of the production branch's head (`[promote] target`), running either when missing.
/// Criteria: tests pass, no fewer passing tests, complexity not worse, has data. The verdict is
/// STRONGLY_RECOMMEND, RECOMMEND, CONSIDER or NOT_READY (exit 1), kept as a note under
/// refs/notes/sandbox-eval on the experiment's head.
///
/// Example: `git sandbox eval faster-parser --json`
#[derive(clap::Args)]
pub struct EvalArgs {
    #[arg(value_name = "EXPERIMENT")]
    pub name: String,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_eval(args: EvalArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let _ = gix::interrupt::init_handler_default(1);
    let ev = eval::evaluate(
        Repo::new(&ctx, &repo, &row),
        &args.name,
        gs_model::Trigger::Manual,
        &gix::interrupt::IS_INTERRUPTED,
    )?;
    if args.json {
        print_json(&ev);
    } else {
        print_evaluation(&ev);
    }
    super::drain_outbox(&ctx);
    Ok(i32::from(ev.recommendation == Recommendation::NotReady))
}
