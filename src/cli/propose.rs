use super::{cwd, print_json, ui, CmdResult};
use crate::app::{experiment::propose, intake::session::Session, Repo};

/// Evaluate every active experiment against production (running what has no result yet) and
/// list those whose verdict meets `[promote] minimum`, best first. With --promote, promote them
/// in that order, each only if it still meets the minimum against production as it is by then,
/// still merges cleanly and its merged tree passes.
///
/// Examples: `git sandbox propose`, `git sandbox propose --promote --json`
#[derive(clap::Args)]
pub struct ProposeArgs {
    /// Promote the proposals, best first.
    #[arg(long)]
    pub promote: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_propose(args: ProposeArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let _ = gix::interrupt::init_handler_default(1);
    let p = propose::propose(
        Repo::new(&ctx, &repo, &row),
        args.promote,
        &gix::interrupt::IS_INTERRUPTED,
    )?;
    super::drain_outbox(&ctx);
    if args.json {
        print_json(&p);
        return Ok(i32::from(!p.refused.is_empty()));
    }
    let evaluated = p.proposals.len() + p.not_proposed.len();
    println!(
        "{} evaluated against {}; {} meet{} {}:",
        ui::plural(evaluated, "active experiment"),
        p.target,
        p.proposals.len(),
        if p.proposals.len() == 1 { "s" } else { "" },
        p.minimum
    );
    for (i, c) in p.proposals.iter().enumerate() {
        println!(
            "  {}. {}  {} — {}",
            i + 1,
            c.experiment,
            c.recommendation,
            ui::escape(&c.reason)
        );
    }
    if !p.not_proposed.is_empty() {
        println!("not proposed:");
        for c in &p.not_proposed {
            println!(
                "  {}  {} — {}",
                c.experiment,
                c.recommendation,
                ui::escape(&c.reason)
            );
        }
    }
    for (name, e) in &p.errors {
        eprintln!(
            "warning: {name} could not be evaluated: {}",
            ui::first_line(e)
        );
    }
    for done in &p.promoted {
        println!(
            "promoted {} into {} as {}",
            done.experiment,
            done.target,
            gs_util::short(&done.commit)
        );
    }
    for (name, why) in &p.refused {
        println!("not promoted {name}: {}", ui::first_line(why));
    }
    Ok(i32::from(!p.refused.is_empty()))
}
