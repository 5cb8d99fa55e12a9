use super::{CmdResult, CommandError};
use crate::app::{records::views, Context};
use gs_store::{Event, EventFilter};
use std::time::Duration;

/// The event log: runs queued, started, checked out, tested, analysed, completed or failed, and
/// the daemon's life. Pages by id; `--follow` keeps printing new events as they happen.
///
/// Examples: `git sandbox events --limit 20`, `git sandbox events --kind run. --follow --json`
#[derive(clap::Args)]
pub struct EventsArgs {
    /// Only this repository (its id, name or path).
    #[arg(long, value_name = "REPO")]
    pub repo: Option<String>,
    /// Only events of this run id.
    #[arg(long, value_name = "ID")]
    pub run: Option<i64>,
    /// Only this kind (`run.completed`), or a prefix ending in a dot (`run.`).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Only events after this event id.
    #[arg(long, value_name = "ID")]
    pub since: Option<i64>,
    /// At most this many events (the newest ones, unless --since is given).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: u64,
    /// Keep printing new events until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_events(args: EventsArgs) -> CmdResult {
    let ctx = Context::load()?;
    let repository_id = match &args.repo {
        None => None,
        Some(r) => Some(resolve_repo(&ctx, r)?),
    };
    let mut filter = EventFilter {
        repository_id,
        run_id: args.run,
        kind: args.kind.clone(),
        not_kind: None,
        since: args.since,
        limit: Some(args.limit),
    };
    let mut last = args.since.unwrap_or(0);
    loop {
        let events = views::events(&ctx, &filter)?;
        for e in &events {
            print(e, args.json);
            last = last.max(e.id);
        }
        if !args.follow {
            return Ok(0);
        }
        filter.since = Some(last);
        filter.limit = Some(1000);
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(super) fn resolve_repo(ctx: &Context, r: &str) -> Result<String, CommandError> {
    views::repository_at(ctx, r)?
        .map(|row| row.repository_id)
        .ok_or_else(|| {
            CommandError::usage(format!("no registered repository {r:?}"))
                .hint("see `git sandbox list` for names and ids")
        })
}

fn print(e: &Event, json: bool) {
    let line = if json {
        serde_json::to_string(e).expect("events serialize")
    } else {
        format!(
            "{:>6} {} {:<20} {} {}{}",
            e.id,
            e.time,
            e.kind,
            e.repository
                .as_deref()
                .or(e.repository_id.as_deref())
                .unwrap_or("-"),
            e.commit.as_deref().map(gs_util::short).unwrap_or("-"),
            if e.data.is_null() {
                String::new()
            } else {
                format!(" {}", e.data)
            }
        )
    };
    // Flushed line by line for `--follow`; a reader that went away ends it by SIGPIPE.
    super::outln!("{line}");
}
