//! What promoting an experiment would do, said before anyone clicks: read from what is already
//! known (its branch, production's tip, its evaluation, its head's result). Nothing is
//! evaluated and nothing runs, so a page can show it for every experiment; the promotion itself
//! still checks everything again.

use crate::app::{experiment::experiments, Repo, Result};
use gs_git::cli;
use gs_model::Recommendation;

/// Why promoting experiment `name` would be refused, or `None` when nothing known refuses it.
/// `head_status` is its head's result (`passed`, `failed`, …, or `not_run`) when known.
pub fn promotion_refusal(
    at: Repo<'_>,
    name: &str,
    head_status: Option<&str>,
) -> Result<Option<String>> {
    let Repo { ctx, repo, .. } = at;
    let config = experiments::production_config(ctx, repo)?;
    let minimum =
        Recommendation::parse(&config.promote.minimum).unwrap_or(Recommendation::Recommend);
    let (target, base) = experiments::production_tip(repo, &config)?;
    let Some(head) = experiments::ref_tip(repo, &experiments::branch_ref(name))? else {
        return Ok(Some(format!("experiment/{name} has no branch")));
    };
    let dir = experiments::git_dir_for_cli(repo);
    let (contained, _, _) = cli::git_status(
        &dir,
        &[
            "merge-base",
            "--is-ancestor",
            &head.to_string(),
            &base.to_string(),
        ],
        &[],
    )?;
    if contained {
        return Ok(Some(format!(
            "experiment/{name} has nothing {target} lacks"
        )));
    }
    let (head_hex, base_hex) = (head.to_string(), base.to_string());
    if let Some(ev) = experiments::latest_evaluation(at, name, Some(head))? {
        if ev.head.commit == head_hex && ev.base.commit == base_hex {
            return Ok((ev.recommendation < minimum).then(|| {
                format!(
                    "it is {} ({}), below the minimum {minimum}",
                    ev.recommendation, ev.reason
                )
            }));
        }
    }
    // No evaluation of these two heads: promotion makes one, and one whose head's tests do not
    // pass is NOT_READY whatever else it finds.
    let failing = head_status.filter(|s| *s != "passed" && *s != "not_run");
    Ok(match failing {
        Some(status) if minimum > Recommendation::NotReady => {
            Some(format!("the experiment's tests do not pass ({status})"))
        }
        _ => None,
    })
}
