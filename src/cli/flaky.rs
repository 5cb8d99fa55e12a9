use super::{print_json, ui, CmdResult};
use crate::app::records::quarantine::{self, Ends};
use crate::app::records::views;
use crate::app::{intake::session::Session, Context};

/// Tests that both passed and failed on one tree under one config (`run --force`,
/// `run --retry-flaky N`, the same tree on several commits) over the last days, with their flake
/// rate (failures over the runs of those trees), and the quarantined tests. A failure only of
/// known-flaky or quarantined tests is run again on its tree (`run --retry-flaky N`,
/// `[test] retries`) and passes only when a retry does; `eval` does not count a failure of
/// known-flaky tests alone. A test whose outcome differed between a warm run (on a build cache)
/// and a cold one of the same tree is listed as cache-dependent instead: the cache decided, the
/// cold outcome stands, and it is never excused as flaky.
///
/// Examples: `git sandbox flaky`, `git sandbox flaky --repo demo --json`,
/// `git sandbox flaky quarantine tests/test_net.py::test_timeout --runs 5`,
/// `git sandbox flaky release tests/test_net.py::test_timeout`
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct FlakyArgs {
    #[command(subcommand)]
    pub action: Option<FlakyAction>,
    /// Only this repository (its id, name or path; default: the one you are in, else every one).
    #[arg(long, value_name = "REPO")]
    pub repo: Option<String>,
    /// How many days of runs the flips and rates count.
    #[arg(long, value_name = "DAYS", default_value_t = views::FLAKY_WINDOW_DAYS,
          value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub days: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Subcommand)]
pub enum FlakyAction {
    /// Quarantine a test of the repository you are in: it still runs and is reported, and a run
    /// that failed only in quarantined (or known-flaky) tests is run again on its tree, passing
    /// only when a retry passes. Kept at refs/sandbox/quarantine, signed by this machine; `push`
    /// carries it, and another machine applies it only when it trusts this one's key. It ends by
    /// itself after --runs clean runs on different trees (default 10) or at --until.
    Quarantine(QuarantineArgs),
    /// End a test's quarantine now.
    Release(ReleaseArgs),
}

#[derive(clap::Args)]
pub struct QuarantineArgs {
    /// The test's id, as `flaky` or `show` prints it (`tests/test_x.py::test_y`).
    #[arg(value_name = "TEST")]
    pub test: String,
    /// Released by itself after this many clean runs on different trees.
    #[arg(long, value_name = "K", conflicts_with = "until",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: Option<u32>,
    /// Released by itself at this date (`2026-12-31`, an RFC 3339 time, or a span from now: `7d`).
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// Why, kept with it.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ReleaseArgs {
    #[arg(value_name = "TEST")]
    pub test: String,
    #[arg(long)]
    pub json: bool,
}

/// `--until`: a date, a time, or a span from now; in the future.
fn until(text: &str) -> Result<String, crate::app::AppError> {
    let t = text.trim();
    let ms = gs_util::time::parse_rfc3339(t)
        .or_else(|| gs_util::time::parse_rfc3339(&format!("{t}T00:00:00Z")))
        .or_else(|| {
            let d = gs_config::parse_duration(t)?;
            Some(
                gs_util::time::now_millis()
                    .saturating_add(d.as_millis().min(i64::MAX as u128) as i64),
            )
        });
    match ms {
        Some(ms) if ms > gs_util::time::now_millis() => Ok(gs_util::time::rfc3339(ms)),
        Some(_) => Err(
            crate::app::AppError::usage(format!("--until {t:?} has passed"))
                .hint("give a date to come, like 2026-12-31, or a span from now, like 7d"),
        ),
        None => Err(
            crate::app::AppError::usage(format!("--until {t:?} is no date"))
                .hint("give a date like 2026-12-31, an RFC 3339 time, or a span from now, like 7d"),
        ),
    }
}

pub fn cmd_flaky(args: FlakyArgs) -> CmdResult {
    match args.action {
        Some(FlakyAction::Quarantine(a)) => return cmd_quarantine(a),
        Some(FlakyAction::Release(a)) => return cmd_release(a),
        None => {}
    }
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
        let entries = match gs_git::open(std::path::Path::new(&row.path)) {
            Ok(repo) => views::flaky_report(&ctx, &repo, row, args.days)?,
            // A repository moved away still has its runs in the index.
            Err(_) => views::flaky_tests(&ctx, row)?
                .into_iter()
                .map(views::FlakyEntry::from)
                .collect(),
        };
        for t in entries {
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
    let count = |state: &str| found.iter().filter(|(_, t)| t.state == state).count();
    let many = repos.len() > 1;
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|(repo, e)| {
            let t = &e.test;
            let mut row = if many { vec![repo.clone()] } else { vec![] };
            let note = match &e.quarantine {
                Some(q) => format!("quarantine: {}", q.detail),
                None if t.kind == gs_store::CACHE_DEPENDENT => {
                    format!("last {} cold; cache-dependent", t.last_outcome)
                }
                None => format!("last {}", t.last_outcome),
            };
            row.extend([
                ui::escape(&t.name).into_owned(),
                e.state.replace('_', "-"),
                e.rate.map_or("-".into(), |r| {
                    format!("{:.0}% ({}/{})", r * 100.0, t.failures, t.runs)
                }),
                if t.last_flip_at.is_empty() {
                    "-".into()
                } else {
                    format!("{} {}", t.last_flip_at, gs_util::short(&t.last_flip_commit))
                },
                ui::escape(&note).into_owned(),
            ]);
            row
        })
        .collect();
    let mut header = if many { vec!["REPOSITORY"] } else { vec![] };
    header.extend(["TEST", "STATE", "FAILED/RUNS", "LAST FLIP", "NOTE"]);
    ui::table(&header, &rows);
    let flaky = count(gs_store::FLAKY);
    let dependent = count(gs_store::CACHE_DEPENDENT);
    let mut line = vec![format!(
        "{} over {} days",
        ui::plural(flaky, "flaky test"),
        args.days
    )];
    if dependent > 0 {
        line.push(format!(
            "{} (a warm and a cold run of one tree disagreed: the cold outcome stands)",
            ui::plural(dependent, "cache-dependent test")
        ));
    }
    for (state, what) in [
        ("quarantined", "quarantined"),
        (
            quarantine::UNTRUSTED,
            "quarantined by a copy nobody you trust signed (not applied)",
        ),
    ] {
        let n = count(state);
        if n > 0 {
            line.push(format!("{n} {what}"));
        }
    }
    println!("{}", line.join(", "));
    Ok(0)
}

fn cmd_quarantine(a: QuarantineArgs) -> CmdResult {
    let ends = match &a.until {
        Some(u) => Ends::Until(until(u)?),
        None => Ends::Runs(a.runs.unwrap_or(quarantine::DEFAULT_RUNS)),
    };
    let Session { ctx, repo, .. } = Session::open(&super::cwd()?)?;
    let e = quarantine::set(&ctx, &repo, &a.test, Some(ends), a.reason.as_deref())?;
    if a.json {
        print_json(&e);
        return Ok(0);
    }
    let ends = match (&e.until, e.runs) {
        (Some(u), _) => format!("until {u}"),
        (None, runs) => format!(
            "until {} clean runs on different trees",
            runs.unwrap_or(quarantine::DEFAULT_RUNS)
        ),
    };
    println!(
        "Quarantined {} ({ends}): it still runs; a failure only of it is run again, and passes only when a retry does. `git sandbox push` shares it.",
        ui::escape(&e.test)
    );
    Ok(0)
}

fn cmd_release(a: ReleaseArgs) -> CmdResult {
    let Session { ctx, repo, .. } = Session::open(&super::cwd()?)?;
    let e = quarantine::set(&ctx, &repo, &a.test, None, None)?;
    if a.json {
        print_json(&e);
    } else {
        println!("Released {} from quarantine.", ui::escape(&e.test));
    }
    Ok(0)
}
