//! Which tests phase one — the probe beside a commit's run — picks. The rules are `gs-select`'s
//! (one file per runner, typed reasons); here is what they read of this repository: its commit
//! and parent in git, the parent's run in the index and its log, the per-test coverage it kept,
//! and the index's cache of each blob's imports ([`GitSources`]). The run itself is always the
//! whole suite.

use crate::app::{run::testcov, AppError, Context, Repo, Result};
use gs_git as git;
use gs_git::{objects, CommitInfo, GitError, ObjectId};
use gs_select::{File, PerTest, Sources};
use gs_store::{RepoRow, StoreError};
use serde::Serialize;

pub use gs_select::{irrelevant, OnePhase, Selection, Selects, Why};

/// What a selection reads of one commit of this repository.
pub struct GitSources<'a> {
    ctx: &'a Context,
    repo: &'a gs_git::Repository,
    row: &'a RepoRow,
    info: &'a CommitInfo,
}

impl<'a> GitSources<'a> {
    pub fn new(at: Repo<'a>, info: &'a CommitInfo) -> GitSources<'a> {
        let Repo { ctx, repo, row } = at;
        GitSources {
            ctx,
            repo,
            row,
            info,
        }
    }

    fn parent(&self) -> Option<ObjectId> {
        self.info.parents.first().copied()
    }
}

fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> gs_select::Error {
    gs_select::Error::new(e)
}

/// A selection's failure to read as the error the sources met.
fn unboxed(e: gs_select::Error) -> AppError {
    let e = match e.0.downcast::<GitError>() {
        Ok(g) => return AppError::Git(*g),
        Err(e) => e,
    };
    match e.downcast::<StoreError>() {
        Ok(s) => AppError::Store(*s),
        Err(e) => AppError::Io {
            context: "selecting phase one".into(),
            source: std::io::Error::other(e.to_string()),
        },
    }
}

impl PerTest for testcov::Contexts {
    fn tests(&self) -> &std::collections::BTreeSet<String> {
        &self.tests
    }

    fn tests_running(
        &self,
        path: &str,
        lines: &[u32],
    ) -> Option<std::collections::BTreeSet<String>> {
        testcov::Contexts::tests_running(self, path, lines)
    }
}

impl Sources for GitSources<'_> {
    fn has_file(&self, path: &str) -> bool {
        git::path_in_tree(self.repo, self.info.tree, path)
    }

    fn text(&self, path: &str, max: u64) -> Option<String> {
        let entry =
            objects::entry_at(self.repo, self.info.tree, path).filter(|e| e.kind.is_file())?;
        let blob = objects::small_blob(self.repo, entry.id, max)?;
        Some(String::from_utf8_lossy(&blob).into_owned())
    }

    fn dirs(&self, dir: &str) -> Vec<String> {
        let tree = if dir.is_empty() {
            Some(self.info.tree)
        } else {
            objects::entry_at(self.repo, self.info.tree, dir)
                .filter(|e| e.kind == objects::Kind::Tree)
                .map(|e| e.id)
        };
        let Some(Ok(entries)) = tree.map(|t| objects::entries(self.repo, t)) else {
            return Vec::new();
        };
        entries
            .into_iter()
            .filter(|e| e.kind == objects::Kind::Tree)
            .map(|e| e.path)
            .collect()
    }

    fn files(&self) -> gs_select::Result<Vec<File>> {
        Ok(objects::walk(self.repo, self.info.tree)
            .map_err(boxed)?
            .into_iter()
            .filter(|e| e.kind.is_file())
            .map(|e| File {
                path: e.path,
                id: e.id.to_string(),
            })
            .collect())
    }

    fn blob(&self, id: &str, max: u64) -> Option<Vec<u8>> {
        let id = ObjectId::from_hex(id.as_bytes()).ok()?;
        objects::small_blob(self.repo, id, max)
    }

    fn changes(&self) -> gs_select::Result<Option<gs_model::Changes>> {
        if self.parent().is_none() {
            return Ok(None);
        }
        git::diff::commit_changes(self.repo, self.info)
            .map(Some)
            .map_err(boxed)
    }

    fn parent_blob(&self, path: &str, max: u64) -> Option<Vec<u8>> {
        let tree = objects::tree_of(self.repo, self.parent()?)?;
        let entry = objects::entry_at(self.repo, tree, path).filter(|e| e.kind.is_file())?;
        objects::small_blob(self.repo, entry.id, max)
    }

    fn failed_before(&self) -> gs_select::Result<Vec<String>> {
        let Some(parent) = self.parent() else {
            return Ok(Vec::new());
        };
        let run = self
            .ctx
            .index
            .run_for_commit(&self.row.repository_id, &parent.to_string())
            .map_err(boxed)?;
        Ok(run
            .and_then(|r| r.record.tests)
            .map(|t| t.failures.into_iter().map(|f| f.name).collect())
            .unwrap_or_default())
    }

    fn failed_when_changed(&self, path: &str) -> gs_select::Result<Vec<(String, Vec<String>)>> {
        let runs = self
            .ctx
            .index
            .failed_runs_changing(&self.row.repository_id, path, 3)
            .map_err(boxed)?;
        let this = self.info.id.to_string();
        Ok(runs
            .into_iter()
            .filter(|r| r.commit != this)
            .filter_map(|r| {
                let failed: Vec<String> = r.tests?.failures.into_iter().map(|f| f.name).collect();
                (!failed.is_empty()).then_some((r.commit, failed))
            })
            .collect())
    }

    fn parent_log(&self) -> Option<Vec<u8>> {
        let log = crate::app::records::logs::log_path(
            &self.ctx.paths.logs().join(&self.row.repository_id),
            &self.parent()?.to_string(),
            None,
            false,
        );
        std::fs::read(log).ok()
    }

    fn per_test(&self) -> Option<Box<dyn PerTest + '_>> {
        let parent = self.parent()?.to_string();
        let contexts = testcov::open(&self.ctx.paths.home, &self.row.repository_id, &parent)?;
        Some(Box::new(contexts))
    }

    fn test_map(&self) -> Option<(String, Box<dyn PerTest + '_>)> {
        let parent = self.parent()?;
        let home = &self.ctx.paths.home;
        let (made_at, map) =
            super::testmap::nearest(home, &self.row.repository_id, self.repo, parent)?;
        let at = super::testmap::MapAt {
            map,
            repo: self.repo,
            made_at,
            parent,
        };
        Some((made_at.to_string(), Box::new(at)))
    }

    fn cached(&self, blob: &str, key: &str) -> gs_select::Result<Option<String>> {
        self.ctx.index.cached_analysis(blob, key).map_err(boxed)
    }

    fn keep(&self, fresh: &[(String, String, String)]) -> gs_select::Result<()> {
        self.ctx.index.put_analysis(fresh).map_err(boxed)
    }
}

/// Phase one of `info`'s run with `config`.
pub fn select(at: Repo<'_>, info: &CommitInfo, config: &gs_config::Config) -> Result<Selection> {
    if !config.test.phases {
        return Ok(Selection::whole_suite(
            Selects::TestFiles,
            OnePhase::Disabled,
        ));
    }
    let sources = GitSources::new(at, info);
    match gs_select::runner(config.test.command.as_deref(), &sources) {
        Ok(runner) => runner.select(&sources).map_err(unboxed),
        Err(why) => Ok(Selection::whole_suite(Selects::TestFiles, why)),
    }
}

/// What `run --explain-selection` says of one commit.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    pub commit: String,
    /// The configured test command; `None`: detected from the checkout when it runs.
    pub command: Option<String>,
    #[serde(flatten)]
    pub selection: Selection,
}

/// Phase one of `commit`'s run on `refname`, as a run would pick it, without running anything.
pub fn explain(at: Repo<'_>, commit: gs_git::ObjectId, refname: Option<&str>) -> Result<Explained> {
    let Repo { ctx, repo, .. } = at;
    let info = git::commit_info(repo, commit)?;
    let experiment = crate::app::config::commit_config::experiment_of(refname);
    let flags = gs_config::ConfigFile::default();
    let config = crate::app::config::commit_config::config_for(
        ctx,
        repo,
        &info,
        experiment.as_deref(),
        &flags,
    )?;
    let selection = select(at, &info, &config)?;
    let command = config.test.command.clone();
    Ok(Explained {
        commit: commit.to_string(),
        command,
        selection,
    })
}
