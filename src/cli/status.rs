use super::ui::say;
use super::{print_json, ui, CmdResult};
use crate::app::{intake::spool, records::views, Context};

/// Summary: repositories, experiments by state, runs, success rate, mean duration, the queue.
///
/// Example: `git sandbox status`
#[derive(clap::Args)]
pub struct StatusArgs {
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_status(args: StatusArgs) -> CmdResult {
    let ctx = Context::load()?;
    // The commits the hooks spooled count as pending.
    spool::take_in(&ctx, true);
    let stats = views::repositories(&ctx)?;
    let views::Totals {
        runs,
        passed,
        mean_duration_ms: mean,
        experiments_by_state: by_state,
        queued,
        running,
        pending_by_trigger: why,
        dead,
        unindexed,
    } = views::totals(&ctx, &stats)?;
    let pending: u64 = stats.iter().map(|s| s.pending_jobs).sum();
    let experiments: u64 = stats.iter().map(|s| s.experiments).sum();
    let success_rate = (runs > 0).then(|| passed as f64 / runs as f64);
    let daemon = gs_ipc::running(&ctx.paths.home);
    let daemons = crate::app::repo::daemons::list(&ctx)?;
    if args.json {
        print_json(&serde_json::json!({
            "home": ctx.paths.home,
            "index": views::index_path(&ctx),
            "repositories": stats,
            "totals": {
                "repositories": stats.len(),
                "experiments": experiments,
                "experiments_by_state": by_state,
                "runs": runs,
                "passed_runs": passed,
                "success_rate": success_rate,
                "mean_duration_ms": mean,
                "pending_jobs": pending,
            },
            "daemon": {"running": daemon.is_some(), "pid": daemon, "queued_jobs": queued, "running_jobs": running},
            "queue": {"pending": queued, "running": running, "dead": dead, "pending_by_trigger": why},
            "daemons": daemons,
            "unindexed_repositories": unindexed,
        }));
        return Ok(0);
    }
    let mut out = String::new();
    say!(out, "home:          {}", ctx.paths.home.display());
    say!(out, "repositories:  {}", stats.len());
    let mut states = vec![format!("{} active", by_state.active)];
    if by_state.budget_exhausted > 0 {
        states.push(format!(
            "{} of them budget_exhausted",
            by_state.budget_exhausted
        ));
    }
    states.push(format!("{} promoted", by_state.promoted));
    if by_state.rolled_back > 0 {
        states.push(format!("{} rolled_back", by_state.rolled_back));
    }
    states.push(format!("{} killed", by_state.killed));
    say!(out, "experiments:   {experiments} ({})", states.join(", "));
    say!(
        out,
        "runs:          {runs} ({})",
        success_rate.map_or("no runs yet".into(), |r| format!(
            "{:.0}% passed",
            r * 100.0
        ))
    );
    say!(
        out,
        "mean duration: {}",
        mean.map_or("-".into(), |m| ui::duration(m.round() as u64))
    );
    say!(
        out,
        "queue:         {queued} pending{}, {running} running{}",
        queue_reasons(&why),
        if dead > 0 {
            format!(", {dead} given up after {} attempts (`git sandbox events --kind run.failed` and the daemons' logs say why; `git sandbox run REV` runs one by hand)", gs_store::MAX_ATTEMPTS)
        } else {
            String::new()
        }
    );
    say!(
        out,
        "daemon:        {}",
        daemon.map_or(
            "not running (start it with `git sandbox daemon`)".into(),
            |pid| format!("running (pid {pid})")
        )
    );
    for d in daemons.iter().filter(|d| d.state != "stopped") {
        say!(
            out,
            "               {} {} pid {} ({} of {} workers busy, heartbeat {}{})",
            d.state,
            d.row.host,
            d.row.pid,
            d.row.busy_workers,
            d.row.workers,
            d.row.heartbeat_at,
            d.row
                .http
                .as_deref()
                .map(|h| format!(", http://{h}/"))
                .unwrap_or_default()
        );
    }
    if !unindexed.is_empty() {
        eprintln!(
            "hint: {} registered repositor{} not in the index (was index.db deleted?): {}; run `git sandbox reindex` to bring back their results",
            unindexed.len(),
            if unindexed.len() == 1 { "y is" } else { "ies are" },
            unindexed.join(", ")
        );
    }
    if !stats.is_empty() {
        say!(out);
        let rows: Vec<Vec<String>> = stats
            .iter()
            .map(|s| {
                let rate = if s.runs > 0 {
                    format!("{:.0}%", s.passed_runs as f64 * 100.0 / s.runs as f64)
                } else {
                    "-".into()
                };
                vec![
                    s.repo.name.clone(),
                    s.experiments.to_string(),
                    s.runs.to_string(),
                    rate,
                    s.pending_jobs.to_string(),
                    s.repo.path.clone(),
                ]
            })
            .collect();
        ui::table_into(
            &mut out,
            &[
                "REPOSITORY",
                "EXPERIMENTS",
                "RUNS",
                "PASSED",
                "PENDING",
                "PATH",
            ],
            &rows,
        );
        // What phase one caught of the failures, where runs were split in two.
        for st in stats.iter() {
            let r = views::Recall::of(st);
            if r.commits.of == 0 {
                continue;
            }
            say!(
                out,
                "{}: phase one caught {} of {} faulty commits with a probe ({}), {} of {} failing tests ({})",
                st.repo.name,
                r.commits.caught,
                r.commits.of,
                percent(r.commits.share),
                r.tests.caught,
                r.tests.of,
                percent(r.tests.share)
            );
        }
    }
    print!("{out}");
    Ok(0)
}

/// `92%`, or `-` for a share of nothing.
fn percent(share: Option<f64>) -> String {
    share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0))
}

/// ` (10 backfill, 2 hook)`: why the pending jobs were queued.
pub fn queue_reasons(why: &std::collections::BTreeMap<String, u64>) -> String {
    if why.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = why.iter().map(|(t, n)| format!("{n} {t}")).collect();
    format!(" ({})", parts.join(", "))
}
