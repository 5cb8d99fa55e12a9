use super::{ui, CmdResult};
use crate::app::repo::demo::{self, Event, EXPERIMENT, STEPS};
use crate::app::{self, Context};

/// The main job end to end on the built-in defaults: create an experiment repository, commit a
/// change, run the experiment for each commit in a sandboxed checkout, show the results, then
/// start an experiment branch, commit on it, evaluate it against main and promote it.
///
/// Example: `git sandbox demo` (or `cargo run --release -- demo` from a source checkout)
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Where to create the demo repository (default `$GIT_SANDBOX_HOME/repos/demo-<time>`).
    #[arg(long, value_name = "DIR")]
    pub path: Option<std::path::PathBuf>,
}

pub fn cmd_demo(args: DemoArgs) -> CmdResult {
    let ctx = Context::load()?;
    let done = demo::demo(
        &ctx,
        args.path.as_deref(),
        &app::intake::notify::adopt_history,
        &mut |e| match e {
            Event::Step(n) => println!(
                "{} {}",
                ui::yellow(&format!("[{n}/{}]", STEPS.len())),
                STEPS[n - 1]
            ),
            Event::Created(row) => println!("   {} at {}", row.name, row.path),
            Event::Git(line) => println!("   {line}"),
            Event::Result(r, summary) => println!("   {}", ui::oneline(r, summary)),
            Event::Started(s) => println!(
                "   {} from {} ({})",
                s.branch,
                s.base,
                gs_util::short(&s.base_commit)
            ),
            Event::Evaluated(ev) => {
                println!("   {} — {}", ev.recommendation, ev.reason);
                for c in &ev.criteria {
                    println!("   {} {}", if c.pass { "✔" } else { "✘" }, c.name);
                }
            }
        },
    )?;
    let cached = done
        .results
        .iter()
        .filter(|r| r.cached_from.is_some())
        .count();
    let failed = done
        .results
        .iter()
        .filter(|r| !r.status.is_success())
        .count();
    println!();
    println!(
        "Done: {} with a result ({} run, {} from the cache); {}.",
        ui::plural(done.results.len(), "commit"),
        done.results.len() - cached,
        cached,
        match failed {
            0 => "all passed".to_string(),
            n => format!("{n} did not pass"),
        }
    );
    println!(
        "Experiment {EXPERIMENT}: {}, promoted into main as {}.",
        done.promoted.recommendation,
        gs_util::short(&done.promoted.commit)
    );
    println!("Look around:  cd {}", done.root.display());
    println!("              git sandbox log      # one line per commit");
    println!("              git sandbox show     # the full result of HEAD");
    println!("              git sandbox status   # totals across repositories");
    println!("              git sandbox experiment show {EXPERIMENT}");
    Ok(i32::from(failed > 0))
}
