//! `git sandbox propose`: evaluate every active experiment against production (running what
//! has no result yet), and list those whose verdict meets `[promote] minimum`, best first; with
//! `promote`, promote them in that order, each only if — against production as it is by then —
//! it still meets the minimum, still merges cleanly and its merged tree passes.

use crate::app::experiment::promote::{promote, PromoteOptions, Promoted};
use crate::app::{experiment::eval, experiment::experiments, Repo, Result};
use gs_model::{Recommendation, State};
use serde::Serialize;
use std::sync::atomic::AtomicBool;

#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub experiment: String,
    pub recommendation: Recommendation,
    pub reason: String,
    pub head: String,
    pub passed: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Proposed {
    /// The production branch and the minimum verdict a proposal needs.
    pub target: String,
    pub minimum: Recommendation,
    /// Those that meet the minimum, best first.
    pub proposals: Vec<Candidate>,
    /// Those that do not, with why (and experiments that could not be evaluated).
    pub not_proposed: Vec<Candidate>,
    pub errors: Vec<(String, String)>,
    /// With `promote`: the promotions made, and those refused with why.
    pub promoted: Vec<Promoted>,
    pub refused: Vec<(String, String)>,
}

pub fn propose(at: Repo<'_>, and_promote: bool, interrupt: &AtomicBool) -> Result<Proposed> {
    let Repo { ctx, repo, .. } = at;
    let config = experiments::production_config(ctx, repo)?;
    let minimum =
        Recommendation::parse(&config.promote.minimum).unwrap_or(Recommendation::Recommend);
    let (target, _) = experiments::production_tip(repo, &config)?;
    let mut out = Proposed {
        target,
        minimum,
        proposals: Vec::new(),
        not_proposed: Vec::new(),
        errors: Vec::new(),
        promoted: Vec::new(),
        refused: Vec::new(),
    };
    for o in experiments::list(at)? {
        let name = o.experiment.name.clone();
        if o.experiment.state != State::Active {
            continue;
        }
        match eval::evaluate(at, &name, gs_model::Trigger::Manual, interrupt) {
            Ok(ev) => {
                let c = Candidate {
                    experiment: name,
                    recommendation: ev.recommendation,
                    reason: ev.reason.clone(),
                    head: ev.head.commit.clone(),
                    passed: ev.head.passed,
                };
                if c.recommendation >= minimum {
                    out.proposals.push(c);
                } else {
                    out.not_proposed.push(c);
                }
            }
            Err(e) => out.errors.push((name, e.to_string())),
        }
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    let best_first = |a: &Candidate, b: &Candidate| {
        b.recommendation
            .cmp(&a.recommendation)
            .then_with(|| b.passed.unwrap_or(0).cmp(&a.passed.unwrap_or(0)))
            .then_with(|| a.experiment.cmp(&b.experiment))
    };
    out.proposals.sort_by(best_first);
    out.not_proposed.sort_by(best_first);
    if and_promote {
        let opts = PromoteOptions {
            strategy: None,
            force: false,
            dry_run: false,
            watch: None,
            trigger: gs_model::Trigger::Manual,
        };
        for c in &out.proposals {
            match promote(at, &c.experiment, &opts, interrupt) {
                Ok(p) => out.promoted.push(p),
                Err(e) => out.refused.push((c.experiment.clone(), e.to_string())),
            }
        }
    }
    Ok(out)
}
