use super::{cwd, ui, CmdResult};
use crate::app::{intake::gate, intake::session::Session, Context, Repo};
use std::io::Read;

/// The pre-push gate, run by the pre-push hook `git sandbox init` installs: reads git's
/// `<local ref> <local oid> <remote ref> <remote oid>` lines on stdin and, as `[hooks] pre_push`
/// says, warns about (`warn`) or refuses (`block`, `wait`) a push whose tip failed. Off by
/// default. `git push --no-verify` skips it.
///
/// Example: `printf 'refs/heads/main %s refs/heads/main %040d\n' $(git rev-parse HEAD) 0 | git sandbox pre-push origin`
#[derive(clap::Args)]
pub struct PrePushArgs {
    /// The remote pushed to (git passes its name, or its URL when it has none).
    pub remote: String,
    /// The remote's URL (git passes it; unused).
    pub url: Option<String>,
}

pub fn cmd_pre_push(args: PrePushArgs) -> CmdResult {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| super::CommandError::usage(format!("cannot read the pushed refs: {e}")))?;
    let updates = gate::parse_updates(&input)?;
    let dir = cwd()?;
    // The gate is a convenience: when it cannot judge (no registered repository, a broken user
    // config), it says so and lets the push through.
    let judged = Context::load().and_then(|ctx| {
        let Session { ctx, repo, row } = Session::within(ctx, &dir)?;
        let tips = gate::judge(Repo::new(&ctx, &repo, &row), &args.remote, &updates)?;
        Ok((repo, tips))
    });
    let (repo, tips) = match judged {
        Ok(j) => j,
        Err(e) => {
            eprintln!("git-sandbox: warning: the pre-push gate could not judge this push: {e}");
            return Ok(0);
        }
    };
    let summary = |c: &str| {
        gix::ObjectId::from_hex(c.as_bytes())
            .ok()
            .and_then(|id| gs_git::commit_info(&repo, id).ok())
            .map(|i| i.summary)
            .unwrap_or_default()
    };
    let mut refused = Vec::new();
    for t in &tips {
        let name = t
            .update
            .local_ref
            .strip_prefix("refs/heads/")
            .unwrap_or(&t.update.local_ref);
        match &t.record {
            Some(r) if r.status != gs_model::Status::Passed => {
                let line = ui::oneline(r, &summary(&r.commit));
                if t.refuses() {
                    refused.push(format!("  {line}"));
                    eprintln!("git-sandbox: the tip of {name} failed:\n  {line}");
                } else {
                    eprintln!("git-sandbox: warning: the tip of {name} failed:\n  {line}");
                }
            }
            Some(_) => {}
            None if t.waited_in_vain => {
                refused.push(format!("  {name}: no result"));
                eprintln!(
                    "git-sandbox: the tip of {name} ({}) has no result after waiting [hooks] pre_push_timeout",
                    gs_util::short(&t.update.local.to_string())
                );
            }
            None => eprintln!(
                "git-sandbox: note: the tip of {name} ({}) has no result yet, so it is not gated (pre_push = \"wait\" waits for it)",
                gs_util::short(&t.update.local.to_string())
            ),
        }
        if !t.earlier_failed.is_empty() {
            let shorts: Vec<&str> = t
                .earlier_failed
                .iter()
                .map(|r| gs_util::short(&r.commit))
                .collect();
            eprintln!(
                "git-sandbox: note: {} below the tip of {name} failed: {}",
                ui::plural(shorts.len(), "earlier new commit"),
                shorts.join(", ")
            );
        }
    }
    if refused.is_empty() {
        return Ok(0);
    }
    eprintln!(
        "error: git-sandbox refused the push to {}: {} not pass\nhint: fix it and commit, or push anyway with `git push --no-verify`",
        args.remote,
        if refused.len() == 1 { "a tip does" } else { "tips do" }
    );
    Ok(1)
}
