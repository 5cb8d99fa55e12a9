use super::{print_json, ui, CmdResult, CommandError};
use crate::app::repo::tokens::{self, Role};
use crate::app::Context;

/// Tokens for the daemon's HTTP API and dashboard: create, list, revoke.
///
/// Each has a role: read (look), run (also queue runs and evaluate) or admin (also create
/// repositories, promote and kill). A token is printed once, when made; only its SHA-256 is
/// kept.
///
/// Examples: `git sandbox token create --role read --name phone`, `git sandbox token list`,
/// `git sandbox token revoke phone`
#[derive(clap::Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(clap::Subcommand)]
pub enum TokenCommand {
    /// Make a token and print it (once).
    Create {
        /// read, run or admin.
        #[arg(long, value_name = "read|run|admin")]
        role: String,
        /// A name to list and revoke it by (default: ROLE-N).
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The tokens: name, role, when made (never the tokens themselves).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: it stops working at once.
    Revoke {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn cmd_token(args: TokenArgs) -> CmdResult {
    let ctx = Context::load()?;
    match args.command {
        TokenCommand::Create { role, name, json } => {
            let role = Role::parse(&role).ok_or_else(|| {
                CommandError::usage(format!("invalid --role {role:?}"))
                    .hint("use read, run or admin")
            })?;
            let (secret, t) = tokens::create(&ctx, role, name.as_deref())?;
            if json {
                print_json(&serde_json::json!({"name": t.name, "role": t.role, "token": secret}));
            } else {
                println!("{secret}");
                eprintln!(
                    "Made {} token {:?}; it is shown only now. Send it as `Authorization: Bearer TOKEN`, or sign in to the dashboard with it.",
                    t.role, t.name
                );
            }
        }
        TokenCommand::List { json } => {
            let all = tokens::list(&ctx.paths)?;
            if json {
                print_json(
                    &serde_json::json!({"tokens": all.iter().map(|t| serde_json::json!({"name": t.name, "role": t.role, "created_at": t.created_at})).collect::<Vec<_>>()}),
                );
            } else if all.is_empty() {
                println!("No tokens; make one with `git sandbox token create --role read`.");
            } else {
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|t| vec![t.name.clone(), t.role.to_string(), t.created_at.clone()])
                    .collect();
                ui::table(&["NAME", "ROLE", "CREATED"], &rows);
            }
        }
        TokenCommand::Revoke { name, json } => {
            let t = tokens::revoke(&ctx, &name)?;
            if json {
                print_json(&serde_json::json!({"revoked": t.name, "role": t.role}));
            } else {
                println!("Revoked token {:?} ({})", t.name, t.role);
            }
        }
    }
    Ok(0)
}
