//! The daemon's scan of one repository: what is new on its watched branches is queued, and a
//! full scan (start-up, heartbeat) also writes again the notes a concurrent writer dropped and
//! packs the repository's loose refs when there are many.

use super::log;
use crate::app::{intake::lost_notes, intake::notify, AppError, Context, Repo};
use gs_model::EventKind;
use gs_store::RepoRow;
use std::collections::HashMap;

/// Where each repository's last look for lost notes left it, by repository id: a heartbeat
/// looks only at what moved since.
pub type Looked = HashMap<String, lost_notes::Seen>;

/// Queue what is new in a repository; a `full` scan also looks for lost notes, in what moved
/// since `looked` says it last did.
pub fn scan(ctx: &Context, row: &RepoRow, full: bool, looked: &mut Looked) {
    let result = gs_git::open(std::path::Path::new(&row.path))
        .map_err(AppError::from)
        .and_then(|repo| {
            // A daemon killed mid-write leaves a lock on the notes ref; clear it if it is old.
            for r in [gs_git::NOTES_REF, gs_git::SUMMARY_NOTES_REF] {
                gs_git::notes::remove_stale_locks(&repo, r);
            }
            if full {
                let seen = looked.get(&row.repository_id).copied();
                let ((restored, requeued), now) = lost_notes::restore(Repo::new(ctx, &repo, row), seen)?;
                looked.insert(row.repository_id.clone(), now);
                if restored > 0 && ctx.index.is_shared() {
                    log(&format!(
                        "{}: wrote {restored} results from the shared index into its notes",
                        row.name
                    ));
                } else if restored > 0 {
                    log(&format!(
                        "{}: wrote {restored} lost note{} again",
                        row.name,
                        if restored == 1 { "" } else { "s" }
                    ));
                }
                if requeued > 0 {
                    log(&format!(
                        "{}: {requeued} notes hold no run record for their commit; queued those commits again",
                        row.name
                    ));
                }
                // Branches made one at a time leave a loose ref each; the next `git gc` would
                // start the reference-transaction hook twice per loose ref.
                match gs_git::loose_refs::pack_if_many(&repo) {
                    Ok(true) => log(&format!(
                        "{}: packed its loose refs ({} or more), with no hook run",
                        row.name,
                        gs_git::loose_refs::PACK_AT
                    )),
                    Ok(false) => {}
                    Err(e) => log(&format!("{}: could not pack its loose refs: {e}", row.name)),
                }
            }
            notify::scan(ctx, &repo, &row.repository_id, "watch")
        });
    if let Err(e) = result {
        // Looked at again in full next time.
        looked.remove(&row.repository_id);
        let _ = ctx.index.add_event(
            EventKind::DaemonError,
            Some(&row.repository_id),
            None,
            None,
            &serde_json::json!({"error": e.to_string()}),
        );
    }
}
