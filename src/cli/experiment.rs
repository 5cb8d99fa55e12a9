use super::ui::say;
use super::{cwd, print_json, ui, CmdResult};
use crate::app::{experiment::experiments, intake::session::Session, repo::repos, Repo};
use gs_model::{Evaluation, RunRecord};
use gs_util::time;

/// Experiments as branches: start one, list them, show one.
///
/// Examples: `git sandbox experiment start faster-parser --hypothesis "a table-driven lexer is faster"`,
/// `git sandbox experiment list`, `git sandbox experiment show faster-parser --json`
#[derive(clap::Args)]
pub struct ExperimentArgs {
    #[command(subcommand)]
    pub command: ExperimentCommand,
}

#[derive(clap::Subcommand)]
pub enum ExperimentCommand {
    Start(StartArgs),
    List(ListArgs),
    Show(ShowArgs),
    Budget(BudgetArgs),
}

/// Start an experiment: create the branch experiment/NAME at REV (default the production
/// branch, `[promote] target`), no commit on it, and keep its metadata outside the tree in
/// refs/sandbox/experiments/NAME (push and fetch carry it). Your work tree is not touched;
/// `git switch experiment/NAME` to work on it.
///
/// Example: `git sandbox experiment start faster-parser --hypothesis "a table-driven lexer is faster"`
#[derive(clap::Args)]
pub struct StartArgs {
    /// Letters, digits, '-', '_' and '.'; the branch is experiment/NAME.
    pub name: String,
    /// What the experiment sets out to show.
    #[arg(long, value_name = "TEXT")]
    pub hypothesis: Option<String>,
    /// Start from this revision instead of the production branch.
    #[arg(long, value_name = "REV")]
    pub from: Option<String>,
    /// CPU time the runs of its commits may spend ("30m", "2h"); past it the queue runs none of
    /// them (status budget_exhausted). Kept in its metadata and the index.
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// A TOML file with keys as in .sandbox.toml, laid over it for the runs of the experiment's
    /// own commits (limits may only be tightened).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// List the experiments of this repository: state (active, promoted, killed), commits with
/// results, the head's result and age.
///
/// Example: `git sandbox experiment list --json`
#[derive(clap::Args)]
pub struct ListArgs {
    #[arg(long)]
    pub json: bool,
}

/// Set an experiment's CPU budget, or lift it with `none`. The queue runs no commit of an
/// experiment whose runs have spent it (`budget_exhausted`); raising it lets them run again.
/// Kept in the experiment's metadata (refs/sandbox/experiments/NAME).
///
/// Example: `git sandbox experiment budget faster-parser 2h`
#[derive(clap::Args)]
pub struct BudgetArgs {
    pub name: String,
    /// CPU time ("30m", "2h", "90s"), or `none`.
    #[arg(value_name = "DURATION|none")]
    pub budget: String,
    #[arg(long)]
    pub json: bool,
}

fn cmd_budget(args: BudgetArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let value = Some(args.budget.as_str()).filter(|b| *b != "none");
    let b = experiments::set_budget(Repo::new(&ctx, &repo, &row), &args.name, value)?;
    if args.json {
        print_json(&serde_json::json!({"experiment": args.name, "budget": b}));
        return Ok(0);
    }
    match b {
        Some(b) => println!(
            "Experiment {} may spend {} of CPU; {} spent{}",
            args.name,
            ui::duration(b.limit_ms),
            ui::duration(b.spent_ms),
            if b.exhausted {
                " (exhausted: nothing more runs)"
            } else {
                ""
            }
        ),
        None => println!("Experiment {} has no budget", args.name),
    }
    Ok(0)
}

/// Show an experiment: metadata, its commits with their results, the latest result and the
/// latest evaluation.
///
/// Example: `git sandbox experiment show faster-parser`
#[derive(clap::Args)]
pub struct ShowArgs {
    pub name: String,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_experiment(args: ExperimentArgs) -> CmdResult {
    match args.command {
        ExperimentCommand::Start(a) => cmd_start(a),
        ExperimentCommand::List(a) => cmd_list(a),
        ExperimentCommand::Show(a) => cmd_show(a),
        ExperimentCommand::Budget(a) => cmd_budget(a),
    }
}

fn cmd_start(args: StartArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let config = match &args.config {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            crate::app::AppError::usage(format!("cannot read --config {}: {e}", path.display()))
                .hint("name a TOML file with keys as in .sandbox.toml")
        })?),
        None => None,
    };
    let started = experiments::start(
        Repo::new(&ctx, &repo, &row),
        &args.name,
        args.hypothesis.as_deref(),
        args.from.as_deref(),
        args.budget.as_deref(),
        config.as_deref(),
    )?;
    if args.json {
        print_json(&started);
    } else {
        println!("{}", started.branch);
        eprintln!(
            "Started experiment {} from {} ({}); work on it with `git switch {}`",
            started.experiment,
            started.base,
            gs_util::short(&started.base_commit),
            started.branch
        );
    }
    Ok(0)
}

fn result_cell(r: Option<&RunRecord>) -> String {
    match r {
        Some(r) => format!("{} {}", ui::mark(r.status), r.status),
        None => ui::dim("· not run"),
    }
}

fn age(at: &str) -> String {
    time::parse_rfc3339(at)
        .map(|t| time::age(t, time::now_millis()))
        .unwrap_or_else(|| "-".into())
}

fn cmd_list(args: ListArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let all = experiments::list(Repo::new(&ctx, &repo, &row))?;
    if args.json {
        print_json(&serde_json::json!({ "experiments": all, "total": all.len() }));
        return Ok(0);
    }
    if all.is_empty() {
        println!("No experiments yet; start one with `git sandbox experiment start NAME`.");
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|o| {
            vec![
                ui::escape(&o.experiment.name).into_owned(),
                ui::escape(&o.status).into_owned(),
                o.runs.to_string(),
                result_cell(o.latest_result.as_deref()),
                o.latest_evaluation
                    .as_ref()
                    .map_or("-".into(), |e| e.recommendation.to_string()),
                age(&o.experiment.created_at),
            ]
        })
        .collect();
    ui::table(
        &["NAME", "STATE", "RUNS", "LAST RESULT", "EVALUATION", "AGE"],
        &rows,
    );
    Ok(0)
}

fn cmd_show(args: ShowArgs) -> CmdResult {
    repos::check_name(&args.name)?;
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let d = experiments::show(Repo::new(&ctx, &repo, &row), &args.name)?;
    if args.json {
        print_json(&d);
        return Ok(0);
    }
    let e = &d.overview.experiment;
    let name = ui::escape(&e.name);
    println!("{}", ui::yellow(&format!("experiment {name}")));
    println!("State:      {}", ui::escape(&d.overview.status));
    if let Some(b) = &d.overview.budget {
        println!(
            "Budget:     {} of {} CPU spent{}",
            ui::duration(b.spent_ms),
            ui::duration(b.limit_ms),
            if b.exhausted {
                format!(
                    "; exhausted, nothing more runs (raise it: git sandbox experiment budget {name} 2h)"
                )
            } else {
                String::new()
            }
        );
    }
    let branch = ui::escape(&e.branch);
    println!("Branch:     {branch}");
    if let Some(rb) = &d.rollback {
        println!(
            "Rolled back: {} (reverted by {})",
            ui::escape(&rb.reason),
            ui::escape(gs_util::short(&rb.revert))
        );
    }
    if let Some(h) = &d.overview.head {
        println!("Head:       {}", ui::escape(h));
    }
    if let Some(m) = &d.metadata {
        println!(
            "Base:       {} ({})",
            ui::escape(&m.base),
            ui::escape(&m.base_commit)
        );
        println!("Author:     {}", ui::escape(&m.author));
    }
    println!(
        "Created:    {} ({})",
        ui::escape(&e.created_at),
        age(&e.created_at)
    );
    if let Some(h) = &e.hypothesis {
        println!("\n    {}\n", ui::escape(h));
    }
    println!(
        "Runs: {} of {}",
        d.overview.runs,
        ui::plural(d.commits.len(), "commit")
    );
    for c in &d.commits {
        match &c.result {
            Some(r) => println!("  {}", ui::oneline(r, &c.summary)),
            None => println!(
                "  {} {} {} {}",
                ui::dim("·"),
                ui::yellow(gs_util::short(&c.commit)),
                ui::dim("not run"),
                ui::escape(&c.summary)
            ),
        }
    }
    match &d.overview.latest_result {
        Some(r) => println!(
            "\nLatest result: {} {} [{}]",
            ui::mark(r.status),
            r.status,
            ui::counts(r)
        ),
        None => println!("\nLatest result: none; run it with `git sandbox run {branch}`"),
    }
    match &d.overview.latest_evaluation {
        Some(ev) => print_evaluation(ev),
        None => println!("Latest evaluation: none; evaluate with `git sandbox eval {name}`"),
    }
    Ok(0)
}

/// The verdict and each criterion, as `eval` and `experiment show` print them.
pub fn print_evaluation(ev: &Evaluation) {
    let mut out = String::new();
    evaluation_lines(&mut out, ev);
    print!("{out}");
}

/// [`print_evaluation`], into the text being rendered.
pub fn evaluation_lines(out: &mut String, ev: &Evaluation) {
    say!(
        out,
        "Evaluation: {} — {} ({} against {} {})",
        ev.recommendation,
        ui::escape(&ev.reason),
        ui::escape(gs_util::short(&ev.head.commit)),
        ui::escape(ev.base.refname.trim_start_matches("refs/heads/")),
        ui::escape(gs_util::short(&ev.base.commit)),
    );
    for c in &ev.criteria {
        say!(
            out,
            "  {} {:<14} value {}, threshold {}",
            if c.pass { "✔" } else { "✘" },
            ui::escape(&c.name),
            c.value,
            c.threshold
        );
    }
}
