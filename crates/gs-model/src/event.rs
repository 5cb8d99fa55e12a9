//! What the event log records, by kind. The names are what the index stores and `events`, the
//! HTTP API and the notifications show (`run.completed`): they never change.

use std::fmt;

macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The kind of an event in the log (`git sandbox events`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $variant,)*
        }

        impl EventKind {
            /// Every kind, in the order declared.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The stored name (`run.completed`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }
        }
    };
}

kinds! {
    AnalysisCompleted = "analysis.completed",
    CacheAudited = "cache.audited",
    CheckCompleted = "check.completed",
    CheckoutCompleted = "checkout.completed",
    DaemonError = "daemon.error",
    DaemonHeartbeat = "daemon.heartbeat",
    DaemonStarted = "daemon.started",
    DaemonStopped = "daemon.stopped",
    /// An evaluation's verdict changed (also a notification).
    EvalChanged = "eval.changed",
    ExperimentBudget = "experiment.budget",
    ExperimentEvaluated = "experiment.evaluated",
    ExperimentKilled = "experiment.killed",
    /// Also a notification.
    ExperimentPromoted = "experiment.promoted",
    ExperimentPullRequest = "experiment.pull_request",
    /// Also a notification.
    ExperimentRolledBack = "experiment.rolled_back",
    ExperimentStarted = "experiment.started",
    GithubStatusFailed = "github.status_failed",
    JobEnded = "job.ended",
    JobReaped = "job.reaped",
    JobStarted = "job.started",
    NotesRestored = "notes.restored",
    NotesUnreadable = "notes.unreadable",
    RemoteFetched = "remote.fetched",
    RemotePollFailed = "remote.poll_failed",
    RemotePushFailed = "remote.push_failed",
    RemotePushed = "remote.pushed",
    RepositoryAdopted = "repository.adopted",
    RepositoryCreated = "repository.created",
    RepositoryForgotten = "repository.forgotten",
    RunAttempt = "run.attempt",
    RunCompleted = "run.completed",
    RunFailed = "run.failed",
    RunFirstFailure = "run.first_failure",
    /// A run failed after its parent passed: a notification, not logged as an event.
    RunRegressed = "run.regressed",
    RunStarted = "run.started",
    SetupCompleted = "setup.completed",
    TestCompleted = "test.completed",
    TestStarted = "test.started",
    WebhookFailed = "webhook.failed",
    /// A workspace's changes became a commit on its experiment's branch.
    WorkspaceCommitted = "workspace.committed",
    WorkspaceCreated = "workspace.created",
    /// A command ran in a workspace (command, exit, duration).
    WorkspaceExec = "workspace.exec",
    /// A file of a workspace changed, by a write or a command (path, lines added and removed).
    WorkspaceFileEdited = "workspace.file_edited",
    WorkspaceRemoved = "workspace.removed",
    WorkspaceReset = "workspace.reset",
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::EventKind;

    #[test]
    fn names_are_unique_and_dotted() {
        let mut seen = std::collections::HashSet::new();
        for k in EventKind::ALL {
            let name = k.as_str();
            assert!(seen.insert(name), "{name} twice");
            let (area, what) = name.split_once('.').unwrap();
            assert!(!area.is_empty() && !what.is_empty(), "{name}");
        }
    }
}
