//! The command line's one error type: a kind (which decides the exit code), the problem, and the
//! hints that say what to do, printed as `error:` and `hint:` lines, or as JSON under `--json`.

use crate::app::{AppError, ErrorKind, Hinted};
use crate::daemon::DaemonError;
use gs_git::GitError;
use gs_store::StoreError;

/// Exit codes of a command that fails (a success is 0; `exec` passes its command's code on).
pub mod exit {
    /// What the command reports is a failure, or it refused and changed nothing.
    pub const FAILURE: i32 = 1;
    /// Bad usage or bad input: flags, names, revisions, config.
    pub const USAGE: i32 = 2;
    /// The machine or the data failed (git's `fatal:` code): `git bisect run` stops rather
    /// than marking the commit bad.
    pub const ENVIRONMENT: i32 = 128;
}

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad flags, names, revisions or config: the user fixes what they typed or wrote.
    Usage,
    /// The command refused (and changed nothing): a conflict, a dirty work tree, a daemon that
    /// already runs.
    Refused,
    /// What the command reports is a failure: no result yet, a git command that failed.
    Failed,
    /// The machine or the data failed: a corrupt or newer index, a data directory that cannot
    /// be created, a socket that cannot be bound, git missing, a file that cannot be written.
    Environment,
    /// The reader of stdout went away: end quietly, as SIGPIPE does.
    BrokenPipe,
}

impl Kind {
    pub fn exit_code(self) -> i32 {
        match self {
            Kind::Usage => exit::USAGE,
            Kind::Refused | Kind::Failed => exit::FAILURE,
            Kind::Environment => exit::ENVIRONMENT,
            Kind::BrokenPipe => 128 + libc::SIGPIPE,
        }
    }

    /// The name in `--json` errors.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Usage => "usage",
            Kind::Refused => "refused",
            Kind::Failed => "failed",
            Kind::Environment => "environment",
            Kind::BrokenPipe => "broken_pipe",
        }
    }
}

/// An error at the edge: its kind, the problem, and what to do about it.
#[derive(Debug)]
pub struct CommandError {
    pub kind: Kind,
    pub error: String,
    pub hints: Vec<String>,
}

impl CommandError {
    pub fn new(kind: Kind, error: impl Into<String>) -> CommandError {
        CommandError {
            kind,
            error: error.into(),
            hints: Vec::new(),
        }
    }

    pub fn usage(error: impl Into<String>) -> CommandError {
        CommandError::new(Kind::Usage, error)
    }

    pub fn failed(error: impl Into<String>) -> CommandError {
        CommandError::new(Kind::Failed, error)
    }

    pub fn environment(error: impl Into<String>) -> CommandError {
        CommandError::new(Kind::Environment, error)
    }

    /// An I/O failure of the machine, or a broken pipe when that is what it was.
    pub fn io(error: impl Into<String>, e: &std::io::Error) -> CommandError {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CommandError::new(Kind::BrokenPipe, error);
        }
        CommandError::environment(error)
    }

    pub fn hint(mut self, fix: impl Into<String>) -> CommandError {
        self.hints.push(fix.into());
        self
    }

    fn hinted(kind: Kind, e: &dyn Hinted) -> CommandError {
        CommandError {
            kind,
            error: e.problem(),
            hints: e.hints(),
        }
    }

    /// Print the error and give the exit code: `error:` and `hint:` lines on stderr, or with
    /// `json` one object on stdout, where the caller reads the command's data. A broken pipe
    /// ends the process as SIGPIPE would.
    pub fn report(self, json: bool) -> i32 {
        if self.kind == Kind::BrokenPipe {
            super::die_of_sigpipe();
        }
        if json {
            #[derive(serde::Serialize)]
            struct JsonError<'a> {
                error: &'a str,
                kind: &'static str,
                hints: &'a [String],
            }
            super::print_json(&JsonError {
                error: &self.error,
                kind: self.kind.name(),
                hints: &self.hints,
            });
        } else {
            let one_line = |s: &str| s.replace('\n', " ");
            let mut text = format!("error: {}\n", one_line(&self.error));
            for h in &self.hints {
                text.push_str(&format!("hint: {}\n", one_line(h)));
            }
            eprint!("{text}");
        }
        self.kind.exit_code()
    }
}

/// The command line's kind of each kind of error: a name that is not there is bad input (exit 2),
/// a service away or the machine's failure is git's `fatal:` (128).
fn cli_kind(k: ErrorKind) -> Kind {
    match k {
        ErrorKind::Usage | ErrorKind::NotFound => Kind::Usage,
        ErrorKind::Refused => Kind::Refused,
        ErrorKind::Failed => Kind::Failed,
        ErrorKind::Unavailable | ErrorKind::Internal => Kind::Environment,
    }
}

fn app_kind(e: &AppError) -> Kind {
    match e {
        AppError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
            Kind::BrokenPipe
        }
        e => cli_kind(e.kind()),
    }
}

impl From<AppError> for CommandError {
    fn from(e: AppError) -> Self {
        CommandError::hinted(app_kind(&e), &e)
    }
}

impl From<GitError> for CommandError {
    fn from(e: GitError) -> Self {
        CommandError::hinted(cli_kind(ErrorKind::of_git(&e)), &e)
    }
}

impl From<gs_config::ConfigError> for CommandError {
    fn from(e: gs_config::ConfigError) -> Self {
        CommandError::hinted(Kind::Usage, &e)
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> Self {
        CommandError::hinted(cli_kind(ErrorKind::of_store(&e)), &e)
    }
}

impl From<DaemonError> for CommandError {
    fn from(e: DaemonError) -> Self {
        match e {
            DaemonError::App(e) => e.into(),
            DaemonError::AlreadyRunning { .. } => CommandError::hinted(Kind::Refused, &e),
            DaemonError::Lock { .. } | DaemonError::Bind { .. } | DaemonError::HttpBind { .. } => {
                CommandError::hinted(Kind::Environment, &e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_kind_decides_the_exit_code() {
        let corrupt: CommandError = StoreError::Corrupt {
            path: PathBuf::from("/d/index.db"),
            detail: "file is not a database".into(),
        }
        .into();
        assert_eq!(corrupt.kind, Kind::Environment);
        assert_eq!(corrupt.kind.exit_code(), exit::ENVIRONMENT);
        assert_eq!(
            corrupt.error,
            "the index /d/index.db is corrupt (file is not a database)"
        );
        assert!(corrupt.hints[0].contains("git sandbox reindex"));

        let rev: CommandError = GitError::UnknownRevision {
            name: "mian".into(),
            within: None,
        }
        .into();
        assert_eq!((rev.kind, rev.kind.exit_code()), (Kind::Usage, 2));
        assert_eq!(rev.error, "unknown revision \"mian\"");
        assert_eq!(rev.hints.len(), 1);

        let refused: CommandError = AppError::refused("promote refused: a conflict")
            .hint("resolve it")
            .into();
        assert_eq!((refused.kind, refused.kind.exit_code()), (Kind::Refused, 1));
        assert_eq!(refused.hints, ["resolve it"]);

        let bind: CommandError = DaemonError::Bind {
            path: PathBuf::from("/d/daemon.sock"),
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        }
        .into();
        assert_eq!(bind.kind, Kind::Environment);

        let pipe: CommandError = AppError::Io {
            context: "cannot write".into(),
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        }
        .into();
        assert_eq!(pipe.kind, Kind::BrokenPipe);
    }

    /// A name that names nothing is bad input here (exit 2, kind `usage`), as it always was; a
    /// tree over the ceiling a refusal; an index that is away the machine's failure.
    #[test]
    fn the_kinds_of_app_map_onto_the_documented_exit_codes() {
        let kind = |e: AppError| CommandError::from(e).kind;
        assert_eq!(kind(AppError::not_found("unknown experiment")), Kind::Usage);
        let too_large = GitError::TreeTooLarge {
            size: 3 << 20,
            ceiling: 2 << 20,
        };
        assert_eq!(kind(too_large.into()), Kind::Refused);
        let away = StoreError::Unreachable {
            url: "postgres://db/x".into(),
            detail: "connection refused".into(),
        };
        assert_eq!(kind(away.into()), Kind::Environment);
    }

    #[test]
    fn display_keeps_the_one_line_the_records_store() {
        let e = AppError::usage("invalid name \"a/b\": it holds '/'").hint("use letters");
        assert_eq!(
            e.to_string(),
            "invalid name \"a/b\": it holds '/'; use letters"
        );
        let c: CommandError = e.into();
        assert_eq!(c.error, "invalid name \"a/b\": it holds '/'");
        assert_eq!(c.hints, ["use letters"]);
    }
}
