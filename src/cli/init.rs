use super::{cwd, print_json, CmdResult};
use crate::app::{repos, Context};

/// Adopt the current repository: install hooks (keeping any that exist), write `.sandbox.toml`
/// with the detected test command if it has none, and register it. Its history is not run:
/// commits from now on are (`[watch] backfill = N` queues the last N). Running it again changes
/// nothing; it never modifies a tracked file.
///
/// Example: `cd my-project && git sandbox init`
#[derive(clap::Args)]
pub struct InitArgs {
    /// Print the repository as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_init(args: InitArgs) -> CmdResult {
    let dir = cwd()?;
    // Outside a repository is bad input: say so before touching the index.
    crate::git::discover(&dir)?;
    let ctx = Context::load()?;
    let (adopted, changed) = repos::adopt(&ctx, &dir)?;
    if args.json {
        let mut v = serde_json::to_value(&adopted).expect("serializable");
        v["changed"] = changed.into();
        v["hooks"] = serde_json::to_value(&adopted.hooks).expect("serializable");
        print_json(&v);
    } else if changed {
        println!(
            "Adopted {} ({})",
            adopted.repo.path, adopted.repo.repository_id
        );
        for h in &adopted.hooks {
            let chained = h
                .chained
                .as_ref()
                .map(|p| format!(" (runs the existing {} first)", p.display()))
                .unwrap_or_default();
            println!("  hook {:<22} {}{}", h.name, h.action, chained);
        }
        if let Some(body) = &adopted.config_written {
            let command = body
                .lines()
                .find_map(|l| l.strip_prefix("command = "))
                .unwrap_or("none detected: runs analyse the code only");
            println!("  wrote .sandbox.toml (test command: {command})");
        }
        if adopted.backfill_queued > 0 {
            println!(
                "  queued the last {} commits of the watched branches ([watch] backfill)",
                adopted.backfill_queued
            );
        } else {
            println!("  history is not run: commits from now on are (run older ones with `git sandbox run RANGE`)");
        }
        for hint in adopted.hooks.iter().filter_map(|h| h.hint.as_deref()) {
            eprintln!("hint: {hint}");
        }
    } else {
        println!(
            "{} is already an experiment repository; nothing changed",
            adopted.repo.path
        );
    }
    Ok(0)
}
