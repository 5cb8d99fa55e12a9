use super::CmdResult;
use crate::app::{intake::notify, Context};

/// What the installed hooks call: queue the new commits of watched branches. Always exits 0 so
/// it can never fail the user's git command; problems are printed as warnings.
#[derive(clap::Args)]
pub struct NotifyArgs {
    /// The hook that called (for the event log).
    #[arg(long)]
    pub hook: Option<String>,
    /// Read a reference transaction's `<old> <new> <ref>` lines from stdin and look at those
    /// branches alone (the reference-transaction hook), instead of at every branch.
    #[arg(long)]
    pub stdin: bool,
}

pub fn cmd_notify(args: NotifyArgs) -> CmdResult {
    let updates = if args.stdin {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text);
        Some(notify::parse_updates(&text))
    } else {
        None
    };
    let result = std::env::current_dir()
        .map_err(|e| e.to_string())
        .and_then(|dir| {
            let ctx = Context::load().map_err(|e| e.to_string())?;
            match &updates {
                Some(u) => notify::notify_updates(&ctx, &dir, "hook", u),
                None => notify::notify(&ctx, &dir, "hook"),
            }
            .map_err(|e| e.to_string())
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
