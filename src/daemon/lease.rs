//! The daemon's lease loop: a thread of its own, on a connection of its own, renews the leases of
//! the jobs this daemon holds every third of a lease. The scheduler says which jobs those are
//! (`Shared::held`) at the end of each of its turns; a turn slowed by a scan, a reload or a
//! loaded machine then cannot let a lease run out under a job that still runs, which another
//! daemon would claim and run a second time beside it.

use super::supervise::{Body, Life};
use super::Shared;
use crate::app::intake::queue::Claimant;
use crate::app::Context;
use std::sync::Arc;

/// The lease loop of `me`'s jobs, as `shared` names them.
pub fn body(me: Claimant, shared: Arc<Shared>) -> Body {
    Box::new(move |life: &Life| {
        let ctx = Context::load().map_err(|e| format!("leases cannot be renewed: {e}"))?;
        let every = me.lease / 3;
        loop {
            let ids = shared.held();
            // A failure (the index away) is tried again at the next third; the scheduler's
            // health says the index is away.
            if !ids.is_empty() && me.renew(&ctx, &ids).is_ok() {
                life.healthy();
            }
            if life.sleep(every) {
                return Ok(());
            }
        }
    })
}
