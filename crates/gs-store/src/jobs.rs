//! The job queue: commits waiting to be run (pending → assigned → running → completed / failed).

use super::sql::params;
use super::{Index, Result};
use serde::Serialize;
use std::collections::HashSet;

#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: i64,
    pub repository_id: String,
    pub commit_id: String,
    pub refname: Option<String>,
    pub trigger: String,
    pub state: String,
    /// The claim's attempt number (the fencing token of every later change).
    pub attempts: i64,
    /// Who holds it (a daemon's or runner's id), while claimed.
    pub owner: Option<String>,
}

/// A `jobs` row selected as [`JOB_COLS`].
fn job_row(r: &super::sql::Row) -> super::sql::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        repository_id: r.get(1)?,
        commit_id: r.get(2)?,
        refname: r.get(3)?,
        trigger: r.get(4)?,
        state: r.get(5)?,
        attempts: r.get(6)?,
        owner: r.get(7)?,
    })
}

impl Index {
    /// Queue `commits` (newest last) for a repository; commits already queued are left alone.
    /// Returns how many were new.
    pub fn enqueue(
        &self,
        repository_id: &str,
        commits: &[(String, Option<String>)],
        trigger: &str,
    ) -> Result<usize> {
        if commits.is_empty() {
            return Ok(0);
        }
        let now = gs_util::time::now_rfc3339();
        let tx = self.conn.transaction()?;
        let mut added = 0;
        // A statement per hundred commits (one round trip each, not one per commit).
        for chunk in commits.chunks(100) {
            let rows = (0..chunk.len())
                .map(|i| {
                    format!(
                        "(?1, ?{}, ?{}, ?2, 'pending', ?3, ?3)",
                        4 + 2 * i,
                        5 + 2 * i
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut p = params![repository_id, trigger, now];
            for (commit, refname) in chunk {
                p.extend(params![commit, refname]);
            }
            added += tx.execute(
                &format!(
                    "INSERT INTO jobs (repository_id, commit_id, refname, trigger, state, created_at, updated_at)
                     VALUES {rows}
                     ON CONFLICT (repository_id, commit_id) DO NOTHING"
                ),
                p,
            )?;
        }
        if added > 0 {
            self.announce_jobs(&tx)?;
            tx.execute(
                "INSERT INTO events (time, kind, repository_id, data) VALUES (?1, 'run.queued', ?2, ?3)",
                params![
                    now,
                    repository_id,
                    serde_json::json!({"commits": added, "trigger": trigger}).to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(added)
    }

    /// Queue `commits` again, also those whose job already completed or failed (their result
    /// was lost): such jobs become pending with a fresh attempt count. Returns how many.
    pub fn requeue(
        &self,
        repository_id: &str,
        commits: &[(String, Option<String>)],
        trigger: &str,
    ) -> Result<usize> {
        let now = gs_util::time::now_rfc3339();
        let tx = self.conn.transaction()?;
        let mut n = 0;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO jobs (repository_id, commit_id, refname, trigger, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)
                 ON CONFLICT (repository_id, commit_id) DO UPDATE SET
                    state = 'pending', attempts = 0, error = NULL, not_before = NULL,
                    trigger = excluded.trigger, updated_at = excluded.updated_at
                 WHERE jobs.state IN ('completed', 'failed', 'dead')",
            )?;
            for (commit, refname) in commits {
                n += stmt.execute(params![repository_id, commit, refname, trigger, now])?;
            }
        }
        if n > 0 {
            self.announce_jobs(&tx)?;
        }
        tx.commit()?;
        Ok(n)
    }

    /// On PostgreSQL, wake every listening daemon when `tx` commits (`NOTIFY`); on SQLite the
    /// local daemon is pinged by whoever queued.
    fn announce_jobs(&self, tx: &super::sql::Tx<'_>) -> Result<()> {
        if tx.is_pg() {
            tx.execute_batch(&format!("NOTIFY {}", super::pg::JOBS_CHANNEL))?;
        }
        Ok(())
    }

    /// Whether a commit already has a job in any state.
    pub fn has_job(&self, repository_id: &str, commit: &str) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT 1 FROM jobs WHERE repository_id = ?1 AND commit_id = ?2")?;
        Ok(stmt.exists([repository_id, commit])?)
    }

    /// Which of `commits` have a job in any state: a query per hundred commits.
    pub fn queued_among(
        &self,
        repository_id: &str,
        commits: &[&str],
    ) -> Result<std::collections::HashSet<String>> {
        let mut found = std::collections::HashSet::new();
        for chunk in commits.chunks(100) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            let rows = self.conn.query(
                &format!(
                    "SELECT commit_id FROM jobs WHERE repository_id = ?1 AND commit_id IN ({})",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
            for r in rows {
                found.insert(r.get(0)?);
            }
        }
        Ok(found)
    }

    /// The state of a commit's job, if it has one.
    pub fn job_state(&self, repository_id: &str, commit: &str) -> Result<Option<String>> {
        use super::sql::OptionalExtension;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state FROM jobs WHERE repository_id = ?1 AND commit_id = ?2")?;
        Ok(stmt
            .query_row([repository_id, commit], |r| r.get(0))
            .optional()?)
    }

    /// The open jobs of `commits` (pending, assigned or running), by commit: what `log` shows
    /// for a commit without a result.
    pub fn open_jobs(
        &self,
        repository_id: &str,
        commits: &[&str],
    ) -> Result<std::collections::HashMap<String, String>> {
        let mut out = std::collections::HashMap::new();
        for chunk in commits.chunks(500) {
            let mut p = params![repository_id];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            let rows = self.conn.query(
                &format!(
                    "SELECT commit_id, state FROM jobs WHERE repository_id = ?1
                     AND state IN ('pending', 'assigned', 'running') AND commit_id IN ({})",
                    super::sql::placeholders(2, chunk.len())
                ),
                p,
            )?;
            for r in rows {
                out.insert(r.get(0)?, r.get(1)?);
            }
        }
        Ok(out)
    }

    /// The jobs of commits that have a result now (by a daemon, or by hand) are done.
    pub fn complete_jobs(&self, repository_id: &str, commits: &[&str], ok: bool) -> Result<()> {
        for chunk in commits.chunks(500) {
            let among = super::sql::placeholders(4, chunk.len());
            let mut p = params![
                repository_id,
                if ok { "completed" } else { "failed" },
                gs_util::time::now_rfc3339()
            ];
            p.extend(chunk.iter().map(super::sql::ToVal::to_val));
            self.conn.execute(
                &format!(
                    "UPDATE jobs SET state = ?2, updated_at = ?3
                     WHERE repository_id = ?1 AND commit_id IN ({among})"
                ),
                p,
            )?;
        }
        Ok(())
    }
}

/// How many times a job is claimed (an infrastructure failure, or a daemon lost while it ran
/// the job) before it is given up as `dead`.
pub const MAX_ATTEMPTS: i64 = 5;

/// A job whose run failed for the machine's sake waits 1 s, doubling per claim, at most 256 s.
const RETRY: gs_util::backoff::Backoff = gs_util::backoff::Backoff::doubling(
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(256),
);

/// The columns [`job_row`] reads.
const JOB_COLS: &str = "id, repository_id, commit_id, refname, trigger, state, attempts, owner";

/// What [`Index::reap`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Jobs back in the queue.
    pub requeued: usize,
    /// Jobs given up (`dead`) because they had been claimed [`MAX_ATTEMPTS`] times.
    pub dead: usize,
}

/// Which claimed jobs [`Index::reap`] takes back.
pub enum Held<'a> {
    /// Those whose lease ran out (their owner stopped renewing it: killed, or cut off).
    Expired,
    /// Those of owners whose id starts with this prefix (a home whose daemon died: whoever
    /// holds its lock now knows no one of that home runs them).
    OwnerPrefix(&'a str),
    /// Those of owners whose id starts with this prefix, in one repository.
    OwnerPrefixIn(&'a str, &'a str),
}

impl Index {
    /// Claim up to `limit` ready jobs of `repositories` for `owner`, oldest first: each becomes
    /// `assigned` with a lease until `lease_until` and one more attempt (its fencing token). On PostgreSQL rows
    /// another daemon is claiming are skipped (`FOR UPDATE SKIP LOCKED`), so no job is claimed
    /// twice; SQLite serializes writers.
    pub fn claim_jobs(
        &self,
        owner: &str,
        limit: usize,
        lease_until: &str,
        repositories: &[&str],
    ) -> Result<Vec<Job>> {
        if repositories.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let now = gs_util::time::now_rfc3339();
        let lock = if self.conn.is_pg() {
            "FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let among = super::sql::placeholders(5, repositories.len());
        let sql = format!(
            "UPDATE jobs SET state = 'assigned', owner = ?1, lease_until = ?2, attempts = attempts + 1,
                    updated_at = ?3
             WHERE id IN (SELECT id FROM jobs
                          WHERE state = 'pending' AND (not_before IS NULL OR not_before <= ?3)
                            AND repository_id IN ({among})
                          ORDER BY id LIMIT ?4 {lock})
             RETURNING {JOB_COLS}"
        );
        let mut p = params![owner, lease_until, now, limit as i64];
        p.extend(repositories.iter().map(super::sql::ToVal::to_val));
        // One statement: atomic on both, no transaction round trips.
        let mut jobs = self
            .conn
            .query(&sql, p)?
            .iter()
            .map(job_row)
            .collect::<super::sql::Result<Vec<_>>>()?;
        jobs.sort_by_key(|j| j.id);
        Ok(jobs)
    }

    /// Renew the lease of the jobs `ids` that `owner` still holds (a job a worker dropped is not
    /// renewed, so it returns to the queue). Returns how many it holds of them.
    pub fn renew_leases(&self, owner: &str, lease_until: &str, ids: &[i64]) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let among = super::sql::placeholders(3, ids.len());
        let mut p = params![owner, lease_until];
        p.extend(ids.iter().map(super::sql::ToVal::to_val));
        Ok(self.conn.execute(
            &format!(
                "UPDATE jobs SET lease_until = ?2
                 WHERE owner = ?1 AND state IN ('assigned', 'running') AND id IN ({among})"
            ),
            p,
        )?)
    }

    /// Take back claimed jobs whose owner is gone: to the queue, or `dead` after
    /// [`MAX_ATTEMPTS`] claims.
    pub fn reap(&self, which: Held<'_>) -> Result<Reaped> {
        let now = gs_util::time::now_rfc3339();
        let (filter, key, repo) = match which {
            // A claim without a lease was made before leases existed: nobody renews it.
            Held::Expired => (
                "(lease_until IS NULL OR lease_until < ?2)",
                now.clone(),
                None,
            ),
            Held::OwnerPrefix(p) => (
                "owner LIKE ?2 ESCAPE '\\'",
                format!("{}%", like_escape(p)),
                None,
            ),
            Held::OwnerPrefixIn(p, repo) => (
                "owner LIKE ?2 ESCAPE '\\'",
                format!("{}%", like_escape(p)),
                Some(repo.to_string()),
            ),
        };
        let give_up = |dead: bool| {
            format!(
                "UPDATE jobs SET state = '{}', owner = NULL, lease_until = NULL, updated_at = ?1,
                        error = 'its daemon stopped answering while it held the job'
                 WHERE state IN ('assigned', 'running') AND attempts {} {MAX_ATTEMPTS} AND {filter}
                   AND (CAST(?3 AS TEXT) IS NULL OR repository_id = ?3)",
                if dead { "dead" } else { "pending" },
                if dead { ">=" } else { "<" },
            )
        };
        let tx = self.conn.transaction()?;
        let dead = tx.execute(&give_up(true), params![now, key, repo])?;
        let requeued = tx.execute(&give_up(false), params![now, key, repo])?;
        tx.commit()?;
        Ok(Reaped { requeued, dead })
    }

    /// The jobs running now, oldest first.
    pub fn running_jobs(&self) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM jobs WHERE state = 'running' ORDER BY id"
        ))?;
        let rows = stmt
            .query_map(params![], job_row)?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Pending jobs whose back-off has passed, oldest first.
    pub fn ready_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM jobs
             WHERE state = 'pending' AND (not_before IS NULL OR not_before <= ?1)
             ORDER BY id LIMIT ?2"
        ))?;
        let rows = stmt
            .query_map(params![gs_util::time::now_rfc3339(), limit as i64], job_row)?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Move claimed jobs from `assigned` to `running`, in one statement. Returns the ids whose
    /// claim is still this one (a job whose lease ran out went to someone else).
    pub fn start_jobs(&self, jobs: &[&Job]) -> Result<HashSet<i64>> {
        let now = gs_util::time::now_rfc3339();
        self.fenced(
            "state = 'running', started_at = ?1, updated_at = ?1",
            params![now],
            &["assigned"],
            jobs,
        )
    }

    /// [`Index::start_jobs`] of one job.
    pub fn start_job(&self, job: &Job) -> Result<bool> {
        Ok(self.start_jobs(&[job])?.contains(&job.id))
    }

    /// The claims ended with a result: `completed` (or `failed` when the run could only record
    /// an error). Indexing the result already marked the job done ([`Index::complete_jobs`]);
    /// this ends the claim. A late end from an owner whose claim was taken back changes
    /// nothing: the ids returned are those whose claim still held.
    pub fn finish_jobs(&self, jobs: &[&Job], ok: bool) -> Result<HashSet<i64>> {
        self.fenced(
            "state = ?1, owner = NULL, lease_until = NULL, updated_at = ?2",
            params![
                if ok { "completed" } else { "failed" },
                gs_util::time::now_rfc3339()
            ],
            &["assigned", "running", "completed", "failed"],
            jobs,
        )
    }

    /// [`Index::finish_jobs`] of one job.
    pub fn finish_job(&self, job: &Job, ok: bool) -> Result<bool> {
        Ok(self.finish_jobs(&[job], ok)?.contains(&job.id))
    }

    /// Give claimed jobs back untouched (a stop interrupted them, or a worker hands back the
    /// rest of its batch): pending again, and the claim does not count as an attempt.
    pub fn release_jobs(&self, jobs: &[&Job]) -> Result<HashSet<i64>> {
        self.fenced(
            "state = 'pending', owner = NULL, lease_until = NULL, attempts = attempts - 1,
             updated_at = ?1",
            params![gs_util::time::now_rfc3339()],
            &["assigned", "running"],
            jobs,
        )
    }

    /// [`Index::release_jobs`] of one job.
    pub fn release_job(&self, job: &Job) -> Result<bool> {
        Ok(self.release_jobs(&[job])?.contains(&job.id))
    }

    /// `UPDATE jobs SET {set}` (its parameters `set_params`, numbered from 1) for those of `jobs`
    /// in one of `states` whose claim is still the one each names: its attempt (the fencing
    /// token) and its owner (a claim given back uncounted and taken again has the same attempt,
    /// never the same owner). Returns the ids changed.
    fn fenced(
        &self,
        set: &str,
        set_params: Vec<super::sql::Val>,
        states: &[&str],
        jobs: &[&Job],
    ) -> Result<HashSet<i64>> {
        if jobs.is_empty() {
            return Ok(HashSet::new());
        }
        let first = set_params.len() + 1;
        let claims = (0..jobs.len())
            .map(|i| {
                let n = first + 3 * i;
                format!(
                    "(id = ?{n} AND attempts = ?{} AND owner = ?{})",
                    n + 1,
                    n + 2
                )
            })
            .collect::<Vec<_>>()
            .join(" OR ");
        let states = states
            .iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut p = set_params;
        for j in jobs {
            p.extend(params![j.id, j.attempts, j.owner]);
        }
        self.conn
            .query(
                &format!(
                    "UPDATE jobs SET {set} WHERE state IN ({states}) AND ({claims}) RETURNING id"
                ),
                p,
            )?
            .iter()
            .map(|r| r.get(0))
            .collect::<super::sql::Result<HashSet<i64>>>()
            .map_err(Into::into)
    }

    /// Give a claimed job back until `not_before` without counting the claim: its commit is not
    /// on this machine yet (another machine made it and will run it, or push it).
    pub fn defer_job(&self, job: &Job, not_before: &str, why: &str) -> Result<bool> {
        let n = self.conn.execute(
            "UPDATE jobs SET state = 'pending', owner = NULL, lease_until = NULL,
                    attempts = attempts - 1, not_before = ?3, error = ?4, updated_at = ?5
             WHERE id = ?1 AND attempts = ?2 AND owner = ?6 AND state IN ('assigned', 'running')",
            params![
                job.id,
                job.attempts,
                not_before,
                why,
                gs_util::time::now_rfc3339(),
                job.owner
            ],
        )?;
        Ok(n == 1)
    }

    /// Give back every job `owner` holds that it did not start (a stop). Returns how many.
    pub fn release_unstarted(&self, owner: &str) -> Result<usize> {
        Ok(self.conn.execute(
            "UPDATE jobs SET state = 'pending', owner = NULL, lease_until = NULL,
                    attempts = attempts - 1, updated_at = ?2
             WHERE owner = ?1 AND state = 'assigned'",
            params![owner, gs_util::time::now_rfc3339()],
        )?)
    }

    /// An infrastructure failure: back off and retry, or give the job up (`dead`) after
    /// [`MAX_ATTEMPTS`] claims. Returns whether it will be retried (false also when the claim
    /// was no longer this one).
    pub fn retry_job(&self, job: &Job, error: &str) -> Result<bool> {
        let now = gs_util::time::now_millis();
        let retry = job.attempts < MAX_ATTEMPTS;
        let delay_ms = RETRY.delay(job.attempts.max(0) as u32 + 1).as_millis() as i64;
        let n = self.conn.execute(
            "UPDATE jobs SET state = ?3, error = ?4, updated_at = ?5, not_before = ?6,
                    owner = NULL, lease_until = NULL
             WHERE id = ?1 AND attempts = ?2 AND owner = ?7 AND state IN ('assigned', 'running')",
            params![
                job.id,
                job.attempts,
                if retry { "pending" } else { "dead" },
                error,
                gs_util::time::rfc3339(now),
                gs_util::time::rfc3339(now + delay_ms),
                job.owner
            ],
        )?;
        Ok(retry && n == 1)
    }

    /// A repository's unfinished jobs by the ref they were queued for: how many wait (pending
    /// or assigned) and how many run.
    pub fn queued_by_ref(
        &self,
        repository_id: &str,
    ) -> Result<std::collections::BTreeMap<String, (u64, u64)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT COALESCE(refname, ''), state, COUNT(*) FROM jobs
             WHERE repository_id = ?1 AND state IN ('pending', 'assigned', 'running')
             GROUP BY 1, 2",
        )?;
        let mut out = std::collections::BTreeMap::<String, (u64, u64)>::new();
        let rows = stmt.query_map([repository_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        for row in rows {
            let (refname, state, n) = row?;
            let e = out.entry(refname).or_default();
            if state == "running" {
                e.1 += n as u64;
            } else {
                e.0 += n as u64;
            }
        }
        Ok(out)
    }

    /// Pending jobs by why they were queued (their trigger: hook, watch, backfill, …).
    pub fn pending_by_trigger(&self) -> Result<std::collections::BTreeMap<String, u64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT trigger, COUNT(*) FROM jobs WHERE state = 'pending' GROUP BY trigger",
        )?;
        let rows = stmt
            .query_map(params![], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })?
            .collect::<super::sql::Result<_>>()?;
        Ok(rows)
    }

    /// Jobs given up (`dead`): claimed [`MAX_ATTEMPTS`] times without an end.
    pub fn dead_jobs(&self) -> Result<u64> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM jobs WHERE state = 'dead'",
            params![],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    }

    /// Jobs waiting or in flight.
    pub fn queue_depth(&self) -> Result<(u64, u64)> {
        let (pending, running): (i64, i64) = self.conn.query_row(
            "SELECT COALESCE(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN state IN ('assigned', 'running') THEN 1 ELSE 0 END), 0)
             FROM jobs WHERE state IN ('pending', 'assigned', 'running')",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((pending as u64, running as u64))
    }
}

/// `s` with LIKE's wildcards (and the escape itself) escaped by a backslash.
pub(crate) fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
