use super::{cwd, print_json, ui, CmdResult, CommandError};
use crate::app::intake::session::Session;
use crate::app::run::exec::Output;
use crate::app::workspace;
use gs_model::Trigger;
use std::io::{Read, Write};

/// Workspaces for agents: a live sandbox on an experiment's branch to work in. Its commands run
/// sandboxed over the branch's commit with what earlier commands wrote (files persist between
/// calls); its files are read and written without a shell; `commit` turns it into a commit on
/// experiment/NAME, verified like any other. Your checkout, index and HEAD are never touched.
///
/// Examples: `git sandbox workspace new parser-fix`,
/// `git sandbox workspace exec parser-fix -- python3 -m pytest -x`,
/// `echo 'x = 1' | git sandbox workspace write parser-fix src/x.py`,
/// `git sandbox workspace diff parser-fix`,
/// `git sandbox workspace commit parser-fix -m "fix the parser"`
#[derive(clap::Args)]
pub struct WorkspaceArgs {
    #[command(subcommand)]
    pub action: WorkspaceAction,
}

#[derive(clap::Subcommand)]
pub enum WorkspaceAction {
    /// Start experiment NAME (its branch at REV, default the production branch) and a workspace
    /// on it.
    New(NewArgs),
    /// The workspaces of this repository: base, size, last use, budget.
    List(JsonArgs),
    /// Run a command in the workspace (after `--`); prints its output, exits with its code.
    Exec(ExecArgs),
    /// Print a file of the workspace.
    Read(PathArgs),
    /// Write a file of the workspace from stdin (made, or replaced).
    Write(PathArgs),
    /// List a directory of the workspace (default its root).
    Ls(LsArgs),
    /// The workspace's changes against its base, as a unified diff (binary files named).
    Diff(NameArgs),
    /// Commit the workspace's changes on experiment/NAME; the workspace goes on from there.
    Commit(CommitArgs),
    /// Drop every change it holds: its files are its base commit's again (built files too).
    Reset(NameArgs),
    /// Remove the workspace (its branch stays unless --kill).
    Rm(RmArgs),
}

#[derive(clap::Args)]
pub struct NewArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where its branch starts (default: the production branch).
    #[arg(long, value_name = "REV")]
    pub from: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct JsonArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct NameArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ExecArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Stop the command after this long ("90s", "5m"; default the repository's test timeout).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(clap::Args)]
pub struct PathArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Relative to the workspace's root.
    #[arg(value_name = "PATH")]
    pub path: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct LsArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    #[arg(value_name = "PATH", default_value = "")]
    pub path: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct CommitArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    #[arg(short, long, value_name = "MESSAGE")]
    pub message: String,
    /// Wait for the commit's result (run here when no daemon runs it).
    #[arg(long)]
    pub wait: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RmArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Kill its experiment too (its branch archived under refs/sandbox/archive/NAME).
    #[arg(long)]
    pub kill: bool,
    #[arg(long)]
    pub json: bool,
}

fn session() -> Result<Session, CommandError> {
    Ok(Session::open(&cwd()?)?)
}

pub fn cmd_workspace(args: WorkspaceArgs) -> CmdResult {
    let s = session()?;
    let at = s.at();
    match args.action {
        WorkspaceAction::New(a) => {
            let w = workspace::new(at, &a.name, a.from.as_deref())?;
            if a.json {
                print_json(&w);
            } else {
                println!(
                    "Workspace {} on {} at {}",
                    w.state.name,
                    w.branch,
                    gs_util::short(&w.state.base)
                );
                println!(
                    "  run in it:  git sandbox workspace exec {} -- CMD…",
                    w.state.name
                );
                println!(
                    "  then:       git sandbox workspace commit {} -m MESSAGE",
                    w.state.name
                );
            }
            Ok(0)
        }
        WorkspaceAction::List(a) => {
            let all = workspace::list(at)?;
            if a.json {
                print_json(&all);
                return Ok(0);
            }
            if all.is_empty() {
                println!("No workspaces: make one with `git sandbox workspace new NAME`.");
                return Ok(0);
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|w| {
                    vec![
                        w.state.name.clone(),
                        format!("{} {}", w.branch, gs_util::short(&w.state.base)),
                        ui::bytes(w.bytes),
                        w.state.used_at.clone(),
                        format!("{} ({} ms CPU)", w.state.execs, w.state.cpu_ms),
                        w.budget.as_ref().map_or("-".into(), |b| {
                            format!("{} of {} ms", b.spent_ms, b.limit_ms)
                        }),
                    ]
                })
                .collect();
            ui::table(
                &["NAME", "BASE", "SIZE", "LAST USED", "COMMANDS", "BUDGET"],
                &rows,
            );
            Ok(0)
        }
        WorkspaceAction::Exec(a) => {
            let timeout = super::exec::parse_timeout(a.timeout.as_deref())?;
            let _ = gix::interrupt::init_handler_default(1);
            let ran = workspace::exec(
                at,
                &a.name,
                &a.command,
                timeout,
                Output::Inherit,
                &gix::interrupt::IS_INTERRUPTED,
            )?;
            if let Some(why) = &ran.dropped {
                eprintln!("note: {why}: what it wrote was not kept");
            }
            super::exec::exit_code(ran.outcome, ran.timeout)
        }
        WorkspaceAction::Read(a) => {
            let f = workspace::read_file(at, &a.name, &a.path)?;
            if a.json {
                let mut v = serde_json::to_value(&f).expect("files serialize");
                match std::str::from_utf8(&f.bytes) {
                    Ok(text) => v["content"] = text.into(),
                    Err(_) => v["binary"] = true.into(),
                }
                print_json(&v);
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(&f.bytes)
                    .and_then(|_| out.flush())
                    .map_err(|e| CommandError::failed(format!("cannot print the file: {e}")))?;
            }
            Ok(0)
        }
        WorkspaceAction::Write(a) => {
            let mut content = Vec::new();
            std::io::stdin()
                .take(workspace::MAX_FILE + 1)
                .read_to_end(&mut content)
                .map_err(|e| CommandError::failed(format!("cannot read stdin: {e}")))?;
            let w = workspace::write_file(at, &a.name, &a.path, &content)?;
            if a.json {
                print_json(&w);
            } else {
                println!(
                    "{} {} ({} bytes, +{} -{})",
                    if w.created { "Created" } else { "Wrote" },
                    ui::escape(&w.path),
                    w.bytes,
                    w.lines_added,
                    w.lines_removed
                );
            }
            Ok(0)
        }
        WorkspaceAction::Ls(a) => {
            let entries = workspace::list_dir(at, &a.name, &a.path)?;
            if a.json {
                print_json(&entries);
            } else {
                for e in entries {
                    let mark = match e.kind {
                        "dir" => "/",
                        "link" => "@",
                        "executable" => "*",
                        _ => "",
                    };
                    println!("{}{mark}", ui::escape(&e.name));
                }
            }
            Ok(0)
        }
        WorkspaceAction::Diff(a) => {
            let d = workspace::diff(at, &a.name)?;
            if a.json {
                print_json(&d);
            } else {
                print!("{}", d.patch);
            }
            Ok(0)
        }
        WorkspaceAction::Commit(a) => {
            let c = workspace::commit(at, &a.name, &a.message, Trigger::Manual, !a.wait)?;
            let record = if a.wait {
                let _ = gix::interrupt::init_handler_default(1);
                let commit =
                    gs_git::ObjectId::from_hex(c.commit.as_bytes()).expect("commits are full ids");
                let opts = crate::app::run::RunOptions::new(
                    Trigger::Manual,
                    Some(format!("refs/heads/{}", c.branch)),
                    &gix::interrupt::IS_INTERRUPTED,
                );
                crate::app::run::run_commits(at, &[commit], &opts, &mut |_| {})?
                    .records
                    .into_iter()
                    .next()
            } else {
                None
            };
            if a.json {
                let mut v = serde_json::to_value(&c).expect("commits serialize");
                if let Some(r) = &record {
                    v["status"] = serde_json::to_value(r.status).expect("statuses serialize");
                }
                print_json(&v);
            } else {
                println!(
                    "Committed {} on {} ({})",
                    gs_util::short(&c.commit),
                    c.branch,
                    ui::plural(c.files.files_changed, "file")
                );
                match &record {
                    Some(r) => println!("{}", ui::oneline(r, &ui::counts(r))),
                    None => println!(
                        "  verified like any commit: `git sandbox show {}`",
                        gs_util::short(&c.commit)
                    ),
                }
            }
            Ok(match &record {
                Some(r) if r.status != gs_model::Status::Passed => 1,
                _ => 0,
            })
        }
        WorkspaceAction::Reset(a) => {
            let w = workspace::reset(at, &a.name)?;
            if a.json {
                print_json(&w);
            } else {
                println!(
                    "Reset {}: its files are {}'s again",
                    w.state.name,
                    gs_util::short(&w.state.base)
                );
            }
            Ok(0)
        }
        WorkspaceAction::Rm(a) => {
            let r = workspace::rm(at, &a.name, a.kill)?;
            if a.json {
                print_json(&r);
            } else if r.killed {
                println!(
                    "Removed workspace {}; its experiment is killed (branch archived)",
                    r.workspace
                );
            } else {
                println!(
                    "Removed workspace {}; its branch {} stays",
                    r.workspace, r.branch
                );
            }
            Ok(0)
        }
    }
}
