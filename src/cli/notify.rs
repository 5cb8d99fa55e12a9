use super::CmdResult;
use crate::app::{notify, Context};

/// What the installed hooks call: queue the new commits of watched branches. Always exits 0 so
/// it can never fail the user's git command; problems are printed as warnings.
#[derive(clap::Args)]
pub struct NotifyArgs {
    /// The hook that called (for the event log).
    #[arg(long)]
    pub hook: Option<String>,
}

pub fn cmd_notify(_args: NotifyArgs) -> CmdResult {
    let result = std::env::current_dir()
        .map_err(|e| e.to_string())
        .and_then(|dir| {
            let ctx = Context::load().map_err(|e| e.to_string())?;
            notify::notify(&ctx, &dir, "hook").map_err(|e| e.to_string())
        });
    match result {
        Ok(n) => {
            if let Some(w) = n.warning {
                eprintln!("git-sandbox: warning: {w}");
            }
        }
        Err(e) => eprintln!("git-sandbox: warning: could not queue the commit: {e}"),
    }
    Ok(0)
}
