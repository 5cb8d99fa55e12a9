use super::{cwd, print_json, ui, CmdResult};
use crate::app::config::adopted::Adoption;
use crate::app::{intake::notify, repo::forget, repo::repos, Context};

/// Adopt the current repository: install hooks (keeping any that exist), register it, and keep
/// what it detects in the git directory (`.git/sandbox.toml`, never the work tree): the test
/// command and setup step for every commit without its own `.sandbox.toml`, history included,
/// and the branches — the one checked out and the remote's default are watched, and the latter
/// is production. `git sandbox config --adopted > .sandbox.toml` makes them the repository's.
/// Its history is not run: commits from now on are (`[watch] backfill = N` queues the last N).
/// Running it again changes nothing; it never modifies a file of the work tree.
///
/// With --remove, undo it: take our hooks out (a hook that was there before goes back in its
/// place; hooks that are not ours are left), unset `sandbox.repositoryId` and our
/// `notes.displayRef`, and unregister the repository as `git sandbox forget` does. Notes,
/// `.sandbox.toml` and every tracked file stay. Running it again changes nothing.
///
/// Example: `cd my-project && git sandbox init`, `git sandbox init --remove`
#[derive(clap::Args)]
pub struct InitArgs {
    /// Uninstall instead: hooks, git config and registration; notes are kept.
    #[arg(long)]
    pub remove: bool,
    /// Print the repository (with --remove: what was removed) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_init(args: InitArgs) -> CmdResult {
    let dir = cwd()?;
    // Outside a repository is bad input: say so before touching the index.
    gs_git::discover(&dir)?;
    let ctx = Context::load()?;
    if args.remove {
        return remove(&ctx, &dir, args.json);
    }
    // A fresh clone where an adopted repository was takes its place.
    forget::replaced(&ctx, &dir)?;
    let (adopted, changed) = repos::adopt(&ctx, &dir, &notify::adopt_history)?;
    if args.json {
        let mut v = serde_json::to_value(&adopted).expect("serializable");
        v["changed"] = changed.into();
        v["hooks"] = serde_json::to_value(&adopted.hooks).expect("serializable");
        if let Some(a) = &adopted.adopted {
            if let Some(p) = &a.setup {
                v["setup"] = serde_json::json!({"command": p.command, "why": p.why,
                    "network_allowed": adopted.setup_network, "missing": a.missing});
            }
            v["adopted"] = serde_json::json!({"command": a.command,
                "build": a.build.as_ref().map(|b| &b.command), "watch": a.watch,
                "production": a.production, "branches_only": a.branches_only});
        }
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
        if let Some(a) = &adopted.adopted {
            tell_adoption(&ctx, a, adopted.setup_network);
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

/// What `init` adopted the repository with, and how to make it the repository's.
fn tell_adoption(ctx: &Context, a: &Adoption, setup_network: bool) {
    if a.branches_only {
        println!(
            "  its .sandbox.toml holds its settings; adopted only its branches (.git/sandbox.toml)"
        );
    } else {
        let command = a
            .command
            .as_deref()
            .unwrap_or("none detected: runs analyse the code only");
        println!("  test command: {command}");
        if let Some(b) = &a.build {
            println!("  build step: {} ({})", b.command, b.why);
        }
        if let Some(p) = &a.setup {
            println!("  setup step: {} ({})", p.command, p.why);
            if let Some(missing) = &a.missing {
                println!("  {missing}");
            }
            if !setup_network {
                println!(
                    "  its network needs your consent: add `setup_network = true` under [limits] in {}",
                    ctx.paths.user_config.display()
                );
            }
        }
    }
    println!(
        "  watches {}; production is {} ({})",
        a.watch.join(", "),
        a.production,
        a.production_why
    );
    if !a.branches_only {
        println!("  kept in .git/sandbox.toml for every commit without its own .sandbox.toml; to make it the repository's:");
        println!("    git sandbox config --adopted > .sandbox.toml && git add .sandbox.toml");
    }
}

fn remove(ctx: &Context, dir: &std::path::Path, json: bool) -> CmdResult {
    let r = forget::remove(ctx, dir)?;
    if json {
        print_json(&r);
        return Ok(0);
    }
    if !r.changed {
        println!(
            "{} has nothing of git-sandbox's to remove; nothing changed",
            r.path
        );
    } else {
        println!("Removed git-sandbox from {}", r.path);
        for h in r.hooks.iter().filter(|h| h.action != "absent") {
            let what = match (h.action, &h.restored_from) {
                ("restored", Some(from)) => {
                    format!("removed; {} is back in its place", from.display())
                }
                ("kept", _) => "not ours: left as it is".into(),
                (action, _) => action.to_string(),
            };
            println!("  hook {:<22} {what}", h.name);
        }
        for c in &r.config {
            println!("  unset git config {c}");
        }
        if r.watermarks {
            println!("  removed the branch watermarks");
        }
        if let Some(f) = &r.forgotten {
            println!(
                "  unregistered {} ({}): {}, {}",
                f.name,
                f.repository_id,
                ui::plural(f.rows.runs, "run"),
                ui::plural(f.logs.count, "log")
            );
        }
        println!("  results stay in git (refs/notes/sandbox*)");
    }
    if let Some(hint) = &r.hint {
        eprintln!("hint: {hint}");
    }
    Ok(0)
}
