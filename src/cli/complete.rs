//! `git sandbox __complete KIND [WORD]` (hidden): the values the bash completion script offers
//! for an argument, one per line — the revisions, experiments and remotes of the repository in
//! the current directory, and the registered repositories' names. It never complains: outside a
//! repository, or with no index yet, it prints nothing.

use super::CmdResult;
use std::io::Write;

#[derive(clap::Args)]
pub struct CompleteArgs {
    #[arg(value_enum)]
    pub kind: Kind,
    /// The word typed so far: a range's `A..` part is kept in front of each revision.
    #[arg(default_value = "", allow_hyphen_values = true)]
    pub word: String,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Revisions,
    Experiments,
    Repositories,
    Remotes,
}

impl Kind {
    /// What stands for this kind's values in a generated bash script until they are asked for.
    pub fn marker(self) -> &'static str {
        match self {
            Kind::Revisions => "__git_sandbox_revisions__",
            Kind::Experiments => "__git_sandbox_experiments__",
            Kind::Repositories => "__git_sandbox_repositories__",
            Kind::Remotes => "__git_sandbox_remotes__",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Revisions => "revisions",
            Kind::Experiments => "experiments",
            Kind::Repositories => "repositories",
            Kind::Remotes => "remotes",
        }
    }

    pub const ALL: [Kind; 4] = [
        Kind::Revisions,
        Kind::Experiments,
        Kind::Repositories,
        Kind::Remotes,
    ];
}

pub fn cmd_complete(args: CompleteArgs) -> CmdResult {
    let values = values(args.kind, &args.word).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    for v in values {
        if writeln!(out, "{v}").is_err() {
            break;
        }
    }
    Ok(0)
}

fn values(kind: Kind, word: &str) -> Option<Vec<String>> {
    let cwd = std::env::current_dir().ok()?;
    let git = |args: &[&str]| -> Option<Vec<String>> {
        let text = gs_git::cli::git(&cwd, args).ok()?;
        Some(text.lines().map(str::to_string).collect())
    };
    Some(match kind {
        Kind::Revisions => {
            let mut refs = git(&[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads",
                "refs/tags",
                "refs/remotes",
            ])?;
            refs.insert(0, "HEAD".into());
            // `main..fe<TAB>`: bash sees one word, so each value carries the range's start.
            let start = word.rfind("..").map_or("", |i| &word[..i + 2]);
            refs.into_iter().map(|r| format!("{start}{r}")).collect()
        }
        Kind::Experiments => {
            let repo = gs_git::discover(&cwd).ok()?;
            crate::app::experiment::experiments::scan(&repo)
                .ok()?
                .1
                .into_iter()
                .map(|s| s.experiment.name)
                .collect()
        }
        Kind::Remotes => git(&["remote"])?,
        Kind::Repositories => {
            let paths = gs_config::Paths::from_env();
            // No index yet: nothing registered, and completing creates none.
            if !paths.index_db().exists() {
                return None;
            }
            let ctx = crate::app::Context::load().ok()?;
            let rows = crate::app::records::views::registered(&ctx).ok()?;
            rows.into_iter().map(|r| r.name).collect()
        }
    })
}

/// The values an argument completes to, by the command's path and the argument's id and value
/// name: fixed ones (`--strategy merge|ff|pull-request`), or kinds asked of
/// `git sandbox __complete` as the user types.
pub fn arg_values(path: &[String], id: &str, value_name: &str) -> (Vec<&'static str>, Vec<Kind>) {
    let fixed: &[&str] = match value_name {
        "merge|ff|pull-request" => &["merge", "ff", "pull-request"],
        "read|run|admin" => &["read", "run", "admin"],
        _ => &[],
    };
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let kinds = match (value_name, id, path.as_slice()) {
        ("REV" | "REV|RANGE" | "REV|DIR", _, _) => vec![Kind::Revisions],
        ("EXPERIMENT", _, _) | (_, "name", ["experiment", "show" | "budget"]) => {
            vec![Kind::Experiments]
        }
        ("EXPERIMENT|REV", _, _) => vec![Kind::Experiments, Kind::Revisions],
        ("REPO" | "PATH|NAME|ID", _, _) => vec![Kind::Repositories],
        ("REMOTE", _, _) => vec![Kind::Remotes],
        _ => vec![],
    };
    (fixed.to_vec(), kinds)
}
