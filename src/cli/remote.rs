use super::{cwd, print_json, CmdResult};
use crate::app::{intake::session::Session, publish::github, repo::repos, Repo};

/// Connect a repository to GitHub.
///
/// `add-github` creates a repository of the same name on GitHub (private unless --public),
/// adds it as `origin` and pushes the branches and results there: what `new --github` does, for
/// a repository that was created without it.
///
/// Example: `git sandbox remote add-github --org my-team`
#[derive(clap::Args)]
pub struct RemoteArgs {
    #[command(subcommand)]
    pub action: RemoteAction,
}

#[derive(clap::Subcommand)]
pub enum RemoteAction {
    /// Create this repository on GitHub, add it as origin, push.
    AddGithub {
        /// Create it under this organisation instead of your account.
        #[arg(long, value_name = "ORG")]
        org: Option<String>,
        /// Make it public.
        #[arg(long)]
        public: bool,
        #[arg(long)]
        json: bool,
    },
}

pub fn cmd_remote(args: RemoteArgs) -> CmdResult {
    let RemoteAction::AddGithub { org, public, json } = args.action;
    if let Some(o) = &org {
        repos::check_name(o)?;
    }
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    let c = github::connect(Repo::new(&ctx, &repo, &row), org.as_deref(), public)?;
    if json {
        print_json(&c);
    } else if let Some(url) = &c.html_url {
        println!(
            "Created {} on GitHub{}",
            url,
            if c.pushed { " and pushed to it" } else { "" }
        );
    }
    if let Some(p) = &c.problem {
        eprintln!("warning: {p}");
    }
    Ok(i32::from(!c.created || !c.pushed))
}
