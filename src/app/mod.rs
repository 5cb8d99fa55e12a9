//! Use-cases: the one place that joins git, the index, the config and the runner into what a
//! command does (create a repository, take a hook's notification, run a commit, start, evaluate,
//! promote or kill an experiment, keep the data dir tidy, unregister a repository).

pub mod analysis;
pub mod config;
pub mod experiment;
mod handle;
pub mod home;
pub mod intake;
pub mod locate;
pub mod publish;
pub mod records;
pub mod repo;
pub mod run;
pub mod select;
pub mod workspace;

use gs_config::{ConfigError, Layers, Paths};
use gs_git::GitError;
use gs_store::{Index, StoreError};
pub use gs_util::{hint::Hinted, hint::Message};
pub use handle::Repo;

/// What a use-case reports when it cannot do its job. `Display` is the one line (problem, then
/// its fixes) that records and events keep; [`Hinted`] gives the two apart for the faces.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad usage or bad input: the problem, and hints that say how to fix it.
    /// Made with `AppError::usage(problem).hint(fix)`.
    #[error("{0}")]
    Usage(Message),
    /// The command did what it could and refused (promote below the minimum, a conflict, a dirty
    /// work tree), and nothing was changed. The hints say how to get past it.
    /// Made with `AppError::refused(problem).hint(fix)`.
    #[error("{0}")]
    Refused(Message),
    /// What the caller named does not exist (an experiment, a repository, a token): a usage
    /// error to the command line, 404 to HTTP. Made with `AppError::not_found(problem).hint(fix)`.
    #[error("{0}")]
    NotFound(Message),
    #[error(transparent)]
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
    pub fn usage(problem: impl Into<String>) -> AppError {
        AppError::Usage(Message::new(problem))
    }

    pub fn refused(problem: impl Into<String>) -> AppError {
        AppError::Refused(Message::new(problem))
    }

    pub fn not_found(problem: impl Into<String>) -> AppError {
        AppError::NotFound(Message::new(problem))
    }

    /// What kind of failure this is, decided here once for every face.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AppError::Usage(_) | AppError::Config(_) => ErrorKind::Usage,
            AppError::NotFound(_) => ErrorKind::NotFound,
            AppError::Refused(_) => ErrorKind::Refused,
            AppError::Store(e) => ErrorKind::of_store(e),
            AppError::Git(e) => ErrorKind::of_git(e),
            AppError::Io { .. } => ErrorKind::Internal,
        }
    }

    /// Add a fix to a usage error or a refusal (the wrapped errors carry their own).
    pub fn hint(mut self, fix: impl Into<String>) -> AppError {
        match &mut self {
            AppError::Usage(m) | AppError::Refused(m) | AppError::NotFound(m) => {
                m.hints.push(fix.into())
            }
            _ => debug_assert!(false, "a hint on {self:?}, which carries its own"),
        }
        self
    }
}

impl Hinted for AppError {
    fn problem(&self) -> String {
        match self {
            AppError::Usage(m) | AppError::Refused(m) | AppError::NotFound(m) => m.problem.clone(),
            AppError::Config(e) => e.problem(),
            AppError::Store(e) => e.problem(),
            AppError::Git(e) => e.problem(),
            AppError::Io { context, source } => format!("{context}: {source}"),
        }
    }

    fn hints(&self) -> Vec<String> {
        match self {
            AppError::Usage(m) | AppError::Refused(m) | AppError::NotFound(m) => m.hints.clone(),
            AppError::Config(e) => e.hints(),
            AppError::Store(e) => e.hints(),
            AppError::Git(e) => e.hints(),
            AppError::Io { .. } => Vec::new(),
        }
    }
}

/// What kind of failure an error is: the layers below say what happened, this says how the
/// caller should take it, and each face maps it once (`cli::error`'s exit codes, `http`'s
/// statuses, `mcp`'s error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad flags, names, revisions or config: the caller fixes what they typed or wrote.
    Usage,
    /// What the caller named does not exist: a revision, a repository, an experiment.
    NotFound,
    /// Refused, and nothing was changed: a conflict, a policy (a tree over the size ceiling, a
    /// dirty work tree).
    Refused,
    /// A command it ran failed (git): what it reports is a failure.
    Failed,
    /// A service it needs cannot be reached now (a shared index that is down): try again.
    Unavailable,
    /// The machine or the data failed: a corrupt or newer index, I/O, git's object database.
    Internal,
}

impl ErrorKind {
    pub fn of_git(e: &GitError) -> ErrorKind {
        match e {
            GitError::BadRevision { .. }
            | GitError::EmptyRange(_)
            | GitError::NotACommit { .. } => ErrorKind::Usage,
            GitError::NotARepo { .. }
            | GitError::UnknownRevision { .. }
            | GitError::PastRoot { .. }
            | GitError::NoSuchParent { .. } => ErrorKind::NotFound,
            GitError::TreeTooLarge { .. } | GitError::Refused { .. } => ErrorKind::Refused,
            GitError::Cli { .. } => ErrorKind::Failed,
            GitError::Gix(_) | GitError::Io { .. } => ErrorKind::Internal,
        }
    }

    pub fn of_store(e: &StoreError) -> ErrorKind {
        if e.is_unreachable() {
            return ErrorKind::Unavailable;
        }
        match e {
            StoreError::Home { .. }
            | StoreError::Corrupt { .. }
            | StoreError::TooNew { .. }
            | StoreError::Sql(_)
            | StoreError::Unreachable { .. } => ErrorKind::Internal,
        }
    }
}

pub type Result<T> = std::result::Result<T, AppError>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> AppError {
    let context = context.into();
    move |source| AppError::Io { context, source }
}

/// Where the index lives: `GIT_SANDBOX_INDEX`, else `[index] url` of the user config; `None`
/// means the SQLite file in the data dir.
pub fn index_url(layers: &Layers) -> Result<Option<String>> {
    if let Some(u) = std::env::var("GIT_SANDBOX_INDEX")
        .ok()
        .filter(|u| !u.is_empty())
    {
        gs_config::check_index_url(&u).map_err(|(problem, fix)| {
            AppError::usage(format!("GIT_SANDBOX_INDEX: {problem}")).hint(fix)
        })?;
        return Ok(Some(u));
    }
    Ok(layers.resolve().index.url)
}

/// What every use-case needs: where things are, the user's config layers, the index.
pub struct Context {
    pub paths: Paths,
    pub layers: Layers,
    pub index: Index,
    /// This machine's signing key and the signers it trusts, read when first needed.
    keys: std::cell::OnceCell<gs_trust::Keyring>,
}

impl Context {
    /// Load the user config and environment, then open the index. A broken config fails before
    /// the index is touched, so nothing is created on bad input.
    pub fn load() -> Result<Context> {
        let paths = Paths::from_env();
        let layers = Layers::load(&paths)?;
        let index = match index_url(&layers)? {
            Some(url) => {
                let mut index = Index::connect(&url)?;
                // The SQLite file makes the data dir; on a shared index nothing else would, and
                // a new machine's daemon keeps its lock, keys and clones there.
                gs_util::private::create_private_dir(&paths.home).map_err(|source| {
                    gs_store::StoreError::Home {
                        path: paths.home.clone(),
                        source,
                    }
                })?;
                index.localize(&paths.home);
                index
            }
            None => Index::open(&paths.home)?,
        };
        Ok(Context {
            paths,
            layers,
            index,
            keys: std::cell::OnceCell::new(),
        })
    }

    /// The user's layers with the settings `init` adopted `repo` with (`$GIT_DIR/sandbox.toml`,
    /// see `config::adopted`): the base every commit's config is laid over.
    pub fn adopted_layers(&self, repo: &gs_git::Repository) -> Result<Layers> {
        Ok(self
            .layers
            .with_adopted(gs_git::objects::common_dir(repo))?)
    }

    /// The settings as the user sees them now: [`Context::adopted_layers`] under the work
    /// tree's `.sandbox.toml` (none in a bare repository). What the hook, the watcher and
    /// production read.
    pub fn checkout_layers(&self, repo: &gs_git::Repository) -> Result<Layers> {
        let base = self.adopted_layers(repo)?;
        Ok(match gs_git::objects::workdir(repo) {
            Some(dir) => base.with_repo_dir(dir)?,
            None => base,
        })
    }

    /// This machine's signing key (made on first use) and the signers it trusts: the user's
    /// `allowed_signers` file and, on a shared index, the keys its daemons registered.
    pub fn keys(&self) -> Result<&gs_trust::Keyring> {
        let ring = match self.keys.get() {
            Some(k) => k,
            None => {
                let home_id = home::home_id(&self.paths.home);
                let allowed = self.layers.resolve().trust.allowed_signers;
                let ring = gs_trust::Keyring::load(&self.paths.home, home_id, allowed.as_deref())
                    .map_err(|e| AppError::usage(e.problem).hint(e.fix))?;
                self.keys.get_or_init(|| ring)
            }
        };
        if self.index.is_shared() && ring.fleet_stale() {
            // A database that is away leaves the fleet's keys as last read for a minute
            // (signing needs none of them).
            match home::registered_keys(self, ring) {
                Ok(fleet) => ring.set_fleet(fleet),
                Err(_) => ring.keep_fleet(),
            }
        }
        Ok(ring)
    }

    /// Who vouches for a record's bytes signed with `signature` (see [`note::decode`]).
    ///
    /// [`note::decode`]: gs_model::note::decode
    pub fn judge(
        &self,
    ) -> Result<impl Fn(&[u8], &str) -> std::result::Result<gs_model::Verified, String> + '_> {
        let keys = self.keys()?;
        Ok(move |m: &[u8], s: &str| keys.verify(m, s))
    }

    /// How this user's runs are sandboxed (probes the machine once, then reads the cache).
    pub fn sandbox(&self) -> gs_sandbox::Sandbox {
        let config_dir = self
            .paths
            .user_config
            .parent()
            .unwrap_or(&self.paths.home)
            .to_path_buf();
        let mut sandbox =
            gs_sandbox::Sandbox::for_user(&self.paths.home, &config_dir).probed(&self.paths.home);
        sandbox.programs = self.user_programs();
        let ca_files = self.layers.resolve().network.ca_files;
        if !ca_files.is_empty() {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let files: Vec<std::path::PathBuf> = ca_files
                .iter()
                .map(|f| match (f.strip_prefix("~/"), &home) {
                    (Some(rest), Some(h)) => h.join(rest),
                    _ => std::path::PathBuf::from(f),
                })
                .collect();
            sandbox.ca_bundle = Some(gs_sandbox::sandbox::egress::ca_bundle(
                &self.paths.home.join("ca"),
                &files,
            ));
        }
        sandbox
    }

    /// The programs the user's own config (the file, the environment, the flags: never a
    /// committed one) names by absolute path in its test and setup commands and its checks.
    fn user_programs(&self) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for layer in [&self.layers.user, &self.layers.env, &self.layers.flags] {
            let commands = [&layer.test.command, &layer.test.setup]
                .into_iter()
                .flatten()
                .chain(layer.checks.iter().filter_map(|(_, c)| c.command.as_ref()));
            for command in commands {
                out.extend(
                    gs_runner::toolchain::program_words(command)
                        .into_iter()
                        .filter(|w| w.starts_with('/'))
                        .map(std::path::PathBuf::from),
                );
            }
        }
        out
    }

    /// What this machine's sandbox enforces, layer by layer (the probe runs once, then is read
    /// from its cache).
    pub fn probe(&self) -> gs_sandbox::Probe {
        gs_sandbox::Probe::load_or_run(&self.paths.home, &self.sandbox())
    }
}
