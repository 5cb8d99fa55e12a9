use super::{print_json, ui, CmdResult};
use crate::app::{repo::gc, Context};

/// Prune old run logs and events, stale checkouts and caches, and repositories gone from disk.
///
/// Removes run logs older than `[gc] logs` (default 30d), the oldest logs while all of them take more than `[gc] max_log_mb` (default 1024),
/// events older than `[gc] events` (default 90d), checkouts left by processes that no longer
/// exist, the registration of repositories whose directory is gone, and build caches and kept
/// checkouts: of branches that are gone, of repositories no longer registered, unused for
/// `[gc] caches` (default 14d), and a repository's least recently used branches' caches while
/// they take more than `[gc] max_cache_mb` (default 16384), and images no run used for `[gc]
/// images` (default 14d).
///
/// It never removes a log of a run in progress, a note, or anything inside a repository. The
/// `[gc]` keys are read from your user config (and `SANDBOX_GC_*`), never from a repository.
///
/// Example: `git sandbox gc --dry-run`
#[derive(clap::Args)]
pub struct GcArgs {
    /// Say what would be removed, and remove nothing.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_gc(args: GcArgs) -> CmdResult {
    let ctx = Context::load()?;
    let r = gc::gc(&ctx, args.dry_run)?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if args.json {
        print_json(&r);
        return Ok(0);
    }
    let verb = if r.dry_run { "Would remove" } else { "Removed" };
    let sized =
        |n: u64, noun: &str, bytes: u64| format!("{} ({})", ui::plural(n, noun), ui::bytes(bytes));
    let mut lines = Vec::new();
    if r.logs_expired.count > 0 {
        lines.push(format!(
            "{verb} {} older than {}",
            sized(r.logs_expired.count, "log", r.logs_expired.bytes),
            r.retention.logs
        ));
    }
    if r.logs_over_bound.count > 0 {
        lines.push(format!(
            "{verb} {}, the oldest, to keep logs under {} MiB",
            sized(r.logs_over_bound.count, "log", r.logs_over_bound.bytes),
            r.retention.max_log_mb
        ));
    }
    if r.checkouts.count > 0 {
        lines.push(format!(
            "{verb} {} of processes that are gone",
            sized(r.checkouts.count, "stale checkout", r.checkouts.bytes)
        ));
    }
    if r.caches.count > 0 {
        lines.push(format!(
            "{verb} {} (branches gone, repositories no longer registered, unused for {}, or past {} MiB a repository)",
            sized(r.caches.count, "build cache", r.caches.bytes),
            r.retention.caches,
            r.retention.max_cache_mb
        ));
    }
    if r.generations.count > 0 {
        lines.push(format!(
            "{verb} {} no run reads any more",
            sized(
                r.generations.count,
                "build-cache generation",
                r.generations.bytes
            )
        ));
    }
    if r.kept_checkouts.count > 0 {
        lines.push(format!(
            "{verb} {} (repositories no longer registered, or unused for {})",
            sized(
                r.kept_checkouts.count,
                "kept checkout",
                r.kept_checkouts.bytes
            ),
            r.retention.caches
        ));
    }
    if r.images.count > 0 {
        lines.push(format!(
            "{verb} {} no run used for {}",
            sized(r.images.count, "image", r.images.bytes),
            r.retention.images
        ));
    }
    if r.workspaces.count > 0 {
        lines.push(format!(
            "{verb} {} (their branch is gone, or their repository is no longer registered)",
            sized(r.workspaces.count, "workspace", r.workspaces.bytes),
        ));
    }
    if r.events > 0 {
        lines.push(format!(
            "{verb} {} older than {}",
            ui::plural(r.events, "event"),
            r.retention.events
        ));
    }
    if r.jobs > 0 {
        lines.push(format!(
            "{verb} {} completed over {} ago",
            ui::plural(r.jobs, "job"),
            r.retention.events
        ));
    }
    if r.tallies > 0 {
        lines.push(format!(
            "{verb} {} of trees no recent run has",
            ui::plural(r.tallies, "stored analysis tally"),
        ));
    }
    for f in &r.repositories {
        lines.push(format!(
            "{} {} ({}), gone from {}: {}, {}, {}, {}",
            if r.dry_run {
                "Would unregister"
            } else {
                "Unregistered"
            },
            f.name,
            f.repository_id,
            f.path,
            ui::plural(f.rows.runs, "run"),
            ui::plural(f.rows.experiments, "experiment"),
            ui::plural(f.rows.events, "event"),
            sized(f.logs.count, "log", f.logs.bytes)
        ));
    }
    if lines.is_empty() {
        println!(
            "Nothing to remove (logs are kept {} and up to {} MiB, events {})",
            r.retention.logs, r.retention.max_log_mb, r.retention.events
        );
    }
    for l in &lines {
        println!("{l}");
    }
    if r.logs_in_progress > 0 {
        println!(
            "Kept {} of runs in progress",
            ui::plural(r.logs_in_progress, "log")
        );
    }
    if r.caches_busy > 0 {
        println!(
            "Kept {} in use by a run; run gc again later",
            ui::plural(r.caches_busy, "cache")
        );
    }
    for id in &r.repositories_busy {
        println!(
            "Kept {id}: it is gone from disk but a run of it is in progress; run gc again later"
        );
    }
    println!(
        "{} and {}{}",
        sized(r.logs_kept.count, "log", r.logs_kept.bytes),
        sized(r.caches_kept.count, "build cache", r.caches_kept.bytes),
        if r.dry_run {
            " would remain; nothing was changed (--dry-run)"
        } else {
            " remain"
        }
    );
    Ok(0)
}
