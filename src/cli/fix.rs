use super::{cwd, print_json, ui, CmdResult};
use crate::app::intake::session::Session;
use crate::app::run::fix::{self, FixOptions};

/// Run a formatter (or a linter's --fix) on each commit of a range, in the sandbox, and take
/// what it wrote into those commits.
///
/// The check is a `[checks.NAME]` marked `fix = true`, as the range's tip (or your user config)
/// declares it: every commit runs that one. What it writes to the tree is taken — modified and
/// deleted tracked files, new files the tree's .gitignore does not ignore, nothing under a cached
/// directory, symlinks as symlinks — and each commit whose tree it changed is made again with
/// its fixed tree, the commits after it replayed (messages, authors and dates kept); commits it
/// did not change keep their ids while their parents do. The branch moves once (its old tip in
/// the reflog); a work tree on it follows, and fix refuses when that work tree has changes.
/// --fixup writes `fixup!` commits on the tip instead, for history already pushed. Results are
/// kept by tree and check: fixing the same range again runs nothing.
///
/// RANGE is BASE..BRANCH, BASE.. (the current branch) or BRANCH (from the production branch).
///
/// Examples: `git sandbox fix main..my-branch --check fmt`, `git sandbox fix HEAD~5.. --check fmt --fixup`
#[derive(clap::Args)]
pub struct FixArgs {
    #[arg(value_name = "RANGE")]
    pub range: String,
    /// The check to run: a [checks.NAME] with fix = true.
    #[arg(long, value_name = "NAME")]
    pub check: String,
    /// Write `fixup!` commits on the tip (for pushed history) instead of rewriting the range.
    #[arg(long)]
    pub fixup: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_fix(args: FixArgs) -> CmdResult {
    let s = Session::open(&cwd()?)?;
    let fixed = fix::fix(
        s.at(),
        &FixOptions {
            range: &args.range,
            check: &args.check,
            fixup: args.fixup,
            interrupt: &gix::interrupt::IS_INTERRUPTED,
        },
    )?;
    if args.json {
        print_json(&fixed);
        return Ok(0);
    }
    for c in &fixed.commits {
        let short = gs_util::short(&c.commit);
        let from = if c.cached { " (kept from before)" } else { "" };
        let code = match c.exit_code {
            Some(code) if code != 0 => format!(" (the check exited {code})"),
            _ => String::new(),
        };
        match (&c.new, c.changed.len()) {
            (_, 0) if c.new.as_deref().is_none_or(|n| n == c.commit) => {
                println!("  {short} unchanged{from}{code}")
            }
            (Some(new), n) if n > 0 => println!(
                "✎ {short} → {} {}{from}{code}",
                gs_util::short(new),
                ui::plural(n, "file changed")
            ),
            (Some(new), _) => println!("  {short} → {} (replayed){from}", gs_util::short(new)),
            (None, n) => println!(
                "✎ {short} {} already in the tip{from}{code}",
                ui::plural(n, "change")
            ),
        }
        for n in &c.not_taken {
            println!("    not taken: {}", ui::escape(n));
        }
    }
    if fixed.new_tip == fixed.old_tip {
        println!(
            "Nothing to fix: {} stays at {}.",
            fixed.branch,
            gs_util::short(&fixed.old_tip)
        );
    } else {
        let what = if fixed.fixup {
            ui::plural(fixed.written, "fixup! commit")
        } else {
            format!("{} rewritten", ui::plural(fixed.written, "commit"))
        };
        println!(
            "{} moved {} → {} ({what}; the old tip is in its reflog).",
            fixed.branch,
            gs_util::short(&fixed.old_tip),
            gs_util::short(&fixed.new_tip)
        );
    }
    Ok(0)
}
