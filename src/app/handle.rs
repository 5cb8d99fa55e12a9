//! One registered repository as the use-cases take it: the context, the repository and its
//! row, borrowed together and passed as one.

use crate::app::Context;
use gs_store::RepoRow;

/// The repository a use-case works on, with the context it runs in and its index row.
/// A use-case takes it as `at: Repo<'_>` and, where it needs the parts, opens it with
/// `let Repo { ctx, repo, row } = at;`.
#[derive(Clone, Copy)]
pub struct Repo<'a> {
    pub ctx: &'a Context,
    pub repo: &'a gs_git::Repository,
    pub row: &'a RepoRow,
}

impl<'a> Repo<'a> {
    pub fn new(ctx: &'a Context, repo: &'a gs_git::Repository, row: &'a RepoRow) -> Repo<'a> {
        Repo { ctx, repo, row }
    }
}
