use super::{cwd, print_json, ui, CmdResult, CommandError};
use crate::app::experiment::promote::{promote, PromoteOptions};
use crate::app::experiment::pull_request;
use crate::app::{intake::session::Session, repo::repos, Repo};

/// Promote an experiment: merge it into the production branch and mark it promoted.
///
/// The production branch is `[promote] target`. Refused (exit 1, nothing
/// changed) when its evaluation is below `[promote] minimum` unless --force. Otherwise the
/// --no-ff merge commit naming the experiment and its recommendation (or the fast-forward) is
/// built without moving any ref and run; production moves (compare-and-swap) only when that run
/// passes, else the promotion is refused with the tests the merge broke, unless --force. A clean
/// checkout of production is updated; a dirty one or a conflict refuses and changes nothing.
///
/// With --strategy pull-request, the experiment's branch is pushed to GitHub and a pull request
/// into production is opened instead, its body the evaluation; the experiment is marked promoted
/// when the pull request is merged (seen by `fetch`, `[remote] poll` or a webhook).
///
/// With --dry-run, everything but moving production is done (the commit it would get is built
/// and tested) and reported.
///
/// Example: `git sandbox promote faster-parser`, `git sandbox promote faster-parser --dry-run`,
/// `git sandbox promote faster-parser --strategy ff`,
/// `git sandbox promote faster-parser --strategy pull-request --dry-run`
#[derive(clap::Args)]
pub struct PromoteArgs {
    #[arg(value_name = "EXPERIMENT")]
    pub name: String,
    /// merge (a merge commit, the default from [promote] strategy), ff (fast-forward only) or
    /// pull-request (a pull request on GitHub).
    #[arg(long, value_name = "merge|ff|pull-request")]
    pub strategy: Option<String>,
    /// Check and test what production would get, and say so; move nothing. With pull-request:
    /// print the pull request that would be opened; push and open nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Promote even when the evaluation is below [promote] minimum or the merge fails its tests.
    #[arg(long)]
    pub force: bool,
    /// Watch production's run of the promoted commit; when it fails, put a commit reverting the
    /// promotion on production (never a force push) and mark the experiment rolled_back
    /// (default: [promote] rollback). Not with --strategy pull-request.
    #[arg(long, conflicts_with = "no_watch")]
    pub watch: bool,
    /// Do not watch, whatever [promote] rollback says.
    #[arg(long)]
    pub no_watch: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_promote(args: PromoteArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    if let Some(s) = args
        .strategy
        .as_deref()
        .filter(|s| !["merge", "ff", "pull-request"].contains(s))
    {
        return Err(CommandError::usage(format!("invalid --strategy {s:?}"))
            .hint("use merge, ff or pull-request"));
    }
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let _ = gix::interrupt::init_handler_default(1);
    let opts = PromoteOptions {
        strategy: args.strategy.clone(),
        force: args.force,
        dry_run: args.dry_run,
        watch: if args.watch {
            Some(true)
        } else if args.no_watch {
            Some(false)
        } else {
            None
        },
        trigger: gs_model::Trigger::Manual,
    };
    if crate::app::experiment::promote::strategy(&ctx, &repo, &opts)? == "pull-request" {
        if args.watch {
            return Err(CommandError::usage(
                "--watch cannot watch a pull request: GitHub merges it, and its checks guard production",
            )
            .hint("promote with --strategy merge or ff to watch, or leave out --watch"));
        }
        let pr = pull_request::open(
            Repo::new(&ctx, &repo, &row),
            &args.name,
            &opts,
            args.dry_run,
            &gix::interrupt::IS_INTERRUPTED,
        )?;
        if args.json {
            print_json(&pr);
        } else if pr.dry_run {
            println!(
                "Would push {} and open a pull request into {}:\n\n# {}\n\n{}",
                pr.head, pr.base, pr.title, pr.body
            );
        } else if pr.existing {
            println!(
                "Pushed {}; its pull request into {} was already open on GitHub",
                pr.head, pr.base
            );
        } else {
            println!(
                "Opened pull request #{} ({}) to promote {} into {}; it is marked promoted when merged",
                pr.number.unwrap_or(0),
                pr.html_url.as_deref().unwrap_or(""),
                pr.head,
                pr.base
            );
        }
        return Ok(0);
    }
    let p = promote(
        Repo::new(&ctx, &repo, &row),
        &args.name,
        &opts,
        &gix::interrupt::IS_INTERRUPTED,
    )?;
    super::drain_outbox(&ctx);
    if args.json {
        print_json(&p);
    } else if p.dry_run {
        println!(
            "Would promote experiment {} into {} ({}, {}): {} → {}",
            p.experiment,
            p.target,
            p.recommendation,
            p.strategy,
            gs_util::short(&p.previous),
            gs_util::short(&p.commit)
        );
        if let Some(r) = &p.result {
            println!(
                "{}",
                ui::oneline(r, &format!("{} as it would be", p.target))
            );
        }
        println!(
            "Nothing was changed; promote without --dry-run to move {}",
            p.target
        );
    } else {
        println!(
            "Promoted experiment {} into {} ({}, {}{}): {} → {}",
            p.experiment,
            p.target,
            p.recommendation,
            p.strategy,
            if p.forced && p.recommendation < p.minimum {
                ", forced"
            } else {
                ""
            },
            gs_util::short(&p.previous),
            gs_util::short(&p.commit)
        );
        if let Some(wt) = &p.worktree_updated {
            println!("Updated the checkout of {} in {wt}", p.target);
        }
        if let Some(r) = &p.result {
            println!(
                "{}",
                ui::oneline(r, &format!("{} after the promotion", p.target))
            );
        }
    }
    if let Some(rb) = p.rolled_back.as_ref().filter(|_| !args.json) {
        eprintln!(
            "Rolled back: {}; {} reverts it on {} (experiment {} is rolled_back)",
            ui::escape(&rb.reason),
            gs_util::short(&rb.revert),
            rb.target,
            rb.experiment
        );
        if let Some(r) = &rb.result {
            eprintln!(
                "{}",
                ui::oneline(r, &format!("{} after the rollback", rb.target))
            );
        }
    }
    if p.rolled_back.is_some() {
        // Production was taken back: the promotion did not hold.
        return Ok(1);
    }
    if p.watched && !p.dry_run && !args.json {
        println!(
            "Watched: production's run of {} passed; nothing to roll back",
            gs_util::short(&p.commit)
        );
    }
    if let Some(r) = p.result.as_ref().filter(|r| !r.status.is_success()) {
        eprintln!(
            "warning: promoted with --force although the merged commit {} is {}{}; see `git sandbox show {}`",
            gs_util::short(&r.commit),
            r.status,
            if p.broken.is_empty() {
                String::new()
            } else {
                format!(" (the merge broke {})", p.broken.join(", "))
            },
            p.target
        );
    }
    Ok(0)
}
