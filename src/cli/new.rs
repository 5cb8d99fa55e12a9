use super::{print_json, CmdResult};
use crate::app::{intake::notify, repo::repos, Context, Repo};
use std::path::PathBuf;

/// Create an experiment repository: template files, initial commit, hooks, registration.
///
/// Example: `git sandbox new faster-parser` creates `$GIT_SANDBOX_HOME/repos/faster-parser`.
#[derive(clap::Args)]
pub struct NewArgs {
    /// Name of the repository (default `ai-sandbox-experiments-YYYYMMDD_HHMMSS`, UTC).
    pub name: Option<String>,
    /// Create it at this directory (which must not exist) instead of `$GIT_SANDBOX_HOME/repos/NAME`.
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Also create it on GitHub (private unless --public), push it there and set `origin`.
    /// Needs GITHUB_TOKEN or [github] token_command; without one (or without the network) it is
    /// created here only, and the reason is printed.
    #[arg(long)]
    pub github: bool,
    /// With --github: create it under this organisation instead of your account.
    #[arg(long, value_name = "ORG", requires = "github")]
    pub org: Option<String>,
    /// With --github: make it public.
    #[arg(long, requires = "github")]
    pub public: bool,
    /// Print the new repository as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_new(args: NewArgs) -> CmdResult {
    // Check the name before anything else is opened or created.
    if let Some(name) = &args.name {
        repos::check_name(name)?;
    }
    if let Some(org) = &args.org {
        repos::check_name(org)?;
    }
    let ctx = Context::load()?;
    let created = repos::create(
        &ctx,
        args.name.as_deref(),
        args.path.as_deref(),
        &notify::adopt_history,
    )?;
    let github = if args.github {
        let repo = gs_git::open(std::path::Path::new(&created.repo.path))?;
        Some(crate::app::publish::github::connect(
            Repo::new(&ctx, &repo, &created.repo),
            args.org.as_deref(),
            args.public,
        )?)
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::to_value(&created).expect("rows serialize");
        if let Some(g) = &github {
            v["github"] = serde_json::to_value(g).expect("serializes");
        }
        print_json(&v);
    } else {
        println!(
            "Created experiment repository {} at {}",
            created.repo.name, created.repo.path
        );
        println!("  id:    {}", created.repo.repository_id);
        println!(
            "  hooks: {}",
            created
                .hooks
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(g) = &github {
            if let Some(url) = &g.html_url {
                println!(
                    "  github: {url}{}",
                    if g.pushed { "" } else { " (not pushed)" }
                );
            }
        }
        eprintln!("Next: cd {} && git sandbox run", created.repo.path);
    }
    if let Some(p) = github.as_ref().and_then(|g| g.problem.as_ref()) {
        eprintln!("warning: {p}");
    }
    Ok(0)
}
