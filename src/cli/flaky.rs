use super::{print_json, ui, CmdResult};
use crate::app::records::views;
use crate::app::Context;

/// Tests that both passed and failed on one tree under one config (`run --force`,
/// `run --retry-flaky N`, the same tree on several commits): how often their outcome flipped,
/// how often they failed and when they last flipped. `eval` does not count a failure of these
/// alone, and `run --retry-flaky N` runs a commit again when only these failed. A test whose
/// outcome differed between a warm run (on a build cache) and a cold one of the same tree is
/// listed as cache-dependent instead: the cache decided, the cold outcome stands, and it is
/// never excused as flaky.
///
/// Examples: `git sandbox flaky`, `git sandbox flaky --repo demo --json`
#[derive(clap::Args)]
pub struct FlakyArgs {
    /// Only this repository (its id, name or path; default: the one you are in, else every one).
    #[arg(long, value_name = "REPO")]
    pub repo: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_flaky(args: FlakyArgs) -> CmdResult {
    let ctx = Context::load()?;
    let repos = match &args.repo {
        Some(r) => {
            super::events::resolve_repo(&ctx, r)?;
            views::repository_at(&ctx, r)?.into_iter().collect()
        }
        None => {
            let here = super::cwd()
                .ok()
                .and_then(|dir| gs_git::discover(&dir).ok())
                .and_then(|repo| {
                    crate::app::repo::repos::registration(&ctx, &repo)
                        .ok()
                        .flatten()
                });
            match here {
                Some(row) => vec![row],
                None => views::registered(&ctx)?,
            }
        }
    };
    let mut found = Vec::new();
    for row in &repos {
        for t in views::flaky_tests(&ctx, row)? {
            found.push((row.name.clone(), t));
        }
    }
    if args.json {
        let list: Vec<serde_json::Value> = found
            .iter()
            .map(|(repo, t)| {
                let mut v = serde_json::to_value(t).expect("flaky tests serialize");
                v["repository"] = repo.clone().into();
                v
            })
            .collect();
        print_json(&list);
        return Ok(0);
    }
    if found.is_empty() {
        println!("No flaky tests: no test both passed and failed on the same tree.");
        return Ok(0);
    }
    let dependent = found
        .iter()
        .filter(|(_, t)| t.kind == gs_store::CACHE_DEPENDENT)
        .count();
    let many = repos.len() > 1;
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|(repo, t)| {
            let mut row = if many { vec![repo.clone()] } else { vec![] };
            row.extend([
                ui::escape(&t.name).into_owned(),
                t.flips.to_string(),
                format!("{}/{}", t.failures, t.runs),
                format!("{} {}", t.last_flip_at, gs_util::short(&t.last_flip_commit)),
                if t.kind == gs_store::CACHE_DEPENDENT {
                    format!("{} cold; cache-dependent", t.last_outcome)
                } else {
                    t.last_outcome.clone()
                },
            ]);
            row
        })
        .collect();
    let mut header = if many { vec!["REPOSITORY"] } else { vec![] };
    header.extend(["TEST", "FLIPS", "FAILED/RUNS", "LAST FLIP", "LAST"]);
    ui::table(&header, &rows);
    let flaky = found.len() - dependent;
    if dependent == 0 {
        println!("{}", ui::plural(flaky, "flaky test"));
    } else {
        println!(
            "{}, {} (a warm and a cold run of one tree disagreed: the cold outcome stands)",
            ui::plural(flaky, "flaky test"),
            ui::plural(dependent, "cache-dependent test")
        );
    }
    Ok(0)
}
