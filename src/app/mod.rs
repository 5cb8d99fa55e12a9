//! Use-cases: the one place that joins git, the index, the config and the runner into what a
//! command does (create a repository, take a hook's notification, run a commit, start, evaluate,
//! promote or kill an experiment, keep the data dir tidy, unregister a repository).

pub mod analyze;
pub mod demo;
pub mod eval;
pub mod experiments;
pub mod forget;
pub mod gc;
pub mod notify;
pub mod promote;
pub mod reindex;
pub mod repos;
pub mod results;
pub mod run;
pub mod select;

use crate::config::{ConfigError, Layers, Paths};
use crate::git::GitError;
use crate::store::{Index, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad usage or bad input: the message names the problem and the fix.
    #[error("{0}")]
    Usage(String),
    /// The command did what it could and refused (promote below the minimum, a conflict, a dirty
    /// work tree): exit 1, and nothing was changed. The message says how to get past it.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl AppError {
    /// Whether the user can fix this by changing what they typed or wrote (exit 2), as opposed
    /// to something failing underneath (exit 1).
    pub fn is_usage(&self) -> bool {
        match self {
            AppError::Usage(_) | AppError::Config(_) => true,
            AppError::Store(e) => matches!(
                e,
                StoreError::Home { .. } | StoreError::Corrupt { .. } | StoreError::TooNew { .. }
            ),
            AppError::Git(e) => matches!(
                e,
                GitError::NotARepo { .. }
                    | GitError::BadRevision { .. }
                    | GitError::EmptyRange(_)
                    | GitError::UnknownRevision { .. }
                    | GitError::PastRoot { .. }
                    | GitError::NoSuchParent { .. }
                    | GitError::NotACommit { .. }
            ),
            AppError::Io { .. } | AppError::Refused(_) => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, AppError>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> AppError {
    let context = context.into();
    move |source| AppError::Io { context, source }
}

/// What every use-case needs: where things are, the user's config layers, the index.
pub struct Context {
    pub paths: Paths,
    pub layers: Layers,
    pub index: Index,
}

impl Context {
    /// Load the user config and environment, then open the index. A broken config fails before
    /// the index is touched, so nothing is created on bad input.
    pub fn load() -> Result<Context> {
        let paths = Paths::from_env();
        let layers = Layers::load(&paths)?;
        let index = Index::open(&paths.home)?;
        Ok(Context {
            paths,
            layers,
            index,
        })
    }

    /// How this user's runs are sandboxed (probes the machine once, then reads the cache).
    pub fn sandbox(&self) -> crate::runner::Sandbox {
        let config_dir = self
            .paths
            .user_config
            .parent()
            .unwrap_or(&self.paths.home)
            .to_path_buf();
        crate::runner::Sandbox::for_user(&self.paths.home, &config_dir)
    }
}
