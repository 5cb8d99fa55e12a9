//! The command line: one `Command` enum, one dispatch, one file per subcommand. Errors become
//! one line on stderr and an exit code: 0 success, 1 a reported failure, 2 bad usage or input.

mod analyze;
mod daemon;
mod demo;
mod doctor;
mod eval;
mod events;
mod exec;
mod experiment;
mod init;
mod kill;
mod list;
mod log;
mod new;
mod notify;
mod promote;
mod reindex;
mod run;
mod sandbox_exec;
mod show;
mod status;
mod ui;

use crate::app::AppError;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "git-sandbox",
    bin_name = "git sandbox",
    version,
    about = "Every commit of an experiment repository becomes an experiment: sandboxed tests, code analysis, results as git notes",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    New(new::NewArgs),
    Init(init::InitArgs),
    List(list::ListArgs),
    Status(status::StatusArgs),
    Run(run::RunArgs),
    Show(show::ShowArgs),
    Log(log::LogArgs),
    Analyze(analyze::AnalyzeArgs),
    Exec(exec::ExecArgs),
    Experiment(experiment::ExperimentArgs),
    Eval(eval::EvalArgs),
    Promote(promote::PromoteArgs),
    Kill(kill::KillArgs),
    Reindex(reindex::ReindexArgs),
    Daemon(daemon::DaemonArgs),
    Events(events::EventsArgs),
    Demo(demo::DemoArgs),
    Doctor(doctor::DoctorArgs),
    #[command(hide = true)]
    Notify(notify::NotifyArgs),
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(sandbox_exec::SandboxExecArgs),
}

/// An error at the edge: what to print and which exit code to use.
#[derive(Debug)]
pub struct CommandError {
    pub exit: i32,
    pub message: String,
}

impl CommandError {
    pub fn usage(message: impl Into<String>) -> Self {
        CommandError {
            exit: 2,
            message: message.into(),
        }
    }
}

impl From<AppError> for CommandError {
    fn from(e: AppError) -> Self {
        CommandError {
            exit: if e.is_usage() { 2 } else { 1 },
            message: e.to_string(),
        }
    }
}

impl From<crate::git::GitError> for CommandError {
    fn from(e: crate::git::GitError) -> Self {
        AppError::from(e).into()
    }
}

impl From<crate::config::ConfigError> for CommandError {
    fn from(e: crate::config::ConfigError) -> Self {
        AppError::from(e).into()
    }
}

impl From<crate::store::StoreError> for CommandError {
    fn from(e: crate::store::StoreError) -> Self {
        AppError::from(e).into()
    }
}

pub type CmdResult = Result<i32, CommandError>;

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::New(a) => new::cmd_new(a),
        Command::Init(a) => init::cmd_init(a),
        Command::List(a) => list::cmd_list(a),
        Command::Status(a) => status::cmd_status(a),
        Command::Run(a) => run::cmd_run(a),
        Command::Show(a) => show::cmd_show(a),
        Command::Log(a) => log::cmd_log(a),
        Command::Analyze(a) => analyze::cmd_analyze(a),
        Command::Exec(a) => exec::cmd_exec(a),
        Command::Experiment(a) => experiment::cmd_experiment(a),
        Command::Eval(a) => eval::cmd_eval(a),
        Command::Promote(a) => promote::cmd_promote(a),
        Command::Kill(a) => kill::cmd_kill(a),
        Command::Reindex(a) => reindex::cmd_reindex(a),
        Command::Daemon(a) => daemon::cmd_daemon(a),
        Command::Events(a) => events::cmd_events(a),
        Command::Demo(a) => demo::cmd_demo(a),
        Command::Notify(a) => notify::cmd_notify(a),
        Command::Doctor(a) => doctor::cmd_doctor(a),
        Command::SandboxExec(a) => sandbox_exec::cmd_sandbox_exec(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let msg = e.message.replace('\n', " ");
            eprintln!("error: {msg}");
            e.exit
        }
    }
}

fn cwd() -> Result<std::path::PathBuf, CommandError> {
    std::env::current_dir().map_err(|e| {
        CommandError::usage(format!(
            "cannot read the current directory: {e}; cd into an existing directory"
        ))
    })
}

fn print_json<T: serde::Serialize>(value: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("output types always serialize")
    );
}
