//! A command's view of one registered repository: the context, the repository and its row,
//! opened once in the same order by every face, after what the hooks spooled is queued (so
//! nothing a command reports lags behind the user's last commit).

use crate::app::{intake::spool, repo::repos, Context, Repo, Result};
use gs_store::RepoRow;
use std::path::Path;

/// What a command on one repository works with.
pub struct Session {
    pub ctx: Context,
    pub repo: gs_git::Repository,
    pub row: RepoRow,
}

impl Session {
    /// The registered repository around `dir`. A directory outside git fails before the config
    /// is read or the index opened, so bad input creates nothing.
    pub fn open(dir: &Path) -> Result<Session> {
        gs_git::discover(dir)?;
        Session::within(Context::load()?, dir)
    }

    /// The registered repository around `dir`, with a context already loaded.
    pub fn within(ctx: Context, dir: &Path) -> Result<Session> {
        let (repo, row) = repos::require_registered(&ctx, dir)?;
        spool::take_in(&ctx, true);
        Ok(Session { ctx, repo, row })
    }

    /// The repository as the use-cases take it.
    pub fn at(&self) -> Repo<'_> {
        Repo::new(&self.ctx, &self.repo, &self.row)
    }
}
