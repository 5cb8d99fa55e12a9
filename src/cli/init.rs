use super::{cwd, print_json, CmdResult};
use crate::app::{repos, Context};

/// Adopt the current repository: install hooks (keeping any that exist), write `.sandbox.toml`
/// if it has none, and register it. Running it again changes nothing.
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
    } else {
        println!(
            "{} is already an experiment repository; nothing changed",
            adopted.repo.path
        );
    }
    Ok(0)
}
