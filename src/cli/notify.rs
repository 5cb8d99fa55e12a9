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

/// The arguments of the calls the installed hook makes (`notify --hook NAME [--stdin]`, in that
/// order), read without building the whole command line's parser: the hook runs inside every
/// `git commit`. `None` for anything else, which the parser reads (its errors, `--help`).
pub fn hook_call(args: &[std::ffi::OsString]) -> Option<NotifyArgs> {
    let [notify, flag, hook, rest @ ..] = args else {
        return None;
    };
    let hook = hook.to_str()?;
    // A value the parser would read as a flag (or an empty one) is for it to judge.
    if notify != "notify" || flag != "--hook" || hook.is_empty() || hook.starts_with('-') {
        return None;
    }
    let stdin = match rest {
        [] => false,
        [s] if s == "--stdin" => true,
        _ => return None,
    };
    Some(NotifyArgs {
        hook: Some(hook.to_string()),
        stdin,
    })
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
            let n = match &updates {
                Some(u) => notify::notify_updates(&ctx, &dir, "hook", u),
                None => notify::notify(&ctx, &dir, "hook"),
            }
            .map_err(|e| e.to_string());
            // A hook runs inside the user's git command: its few rows stay in the index's WAL
            // rather than cost a checkpoint's fsyncs on the way out.
            ctx.index.keep_wal_on_close();
            n
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
