//! The command line: one `Command` enum, one dispatch, one file per subcommand. Errors become
//! an `error:` line and `hint:` lines on stderr (a JSON object on stdout under `--json`) and an
//! exit code from their kind (`error.rs`).

mod analyze;
mod bisect;
mod compare;
mod complete;
mod completions;
mod config;
mod daemon;
mod demo;
mod doctor;
mod error;
mod eval;
mod events;
mod exec;
mod experiment;
mod fetch;
mod fix;
mod flaky;
mod forget;
mod gc;
mod image;
mod init;
mod install_man_pages;
mod key;
mod kill;
mod list;
mod log;
mod mcp;
mod new;
mod notify;
mod pre_push;
mod promote;
mod propose;
mod push;
mod reference;
mod reindex;
mod remote;
mod run;
mod sandbox_exec;
mod show;
mod status;
mod testmap;
mod token;
mod ui;
mod workspace;

pub use error::{CommandError, Kind};

use clap::{FromArgMatches, Parser, Subcommand};

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
    Bisect(bisect::BisectArgs),
    Compare(compare::CompareArgs),
    Flaky(flaky::FlakyArgs),
    Fix(fix::FixArgs),
    Workspace(workspace::WorkspaceArgs),
    Propose(propose::ProposeArgs),
    Promote(promote::PromoteArgs),
    Kill(kill::KillArgs),
    Push(push::PushArgs),
    Remote(remote::RemoteArgs),
    Fetch(fetch::FetchArgs),
    Reindex(reindex::ReindexArgs),
    Config(config::ConfigArgs),
    Gc(gc::GcArgs),
    Image(image::ImageArgs),
    Forget(forget::ForgetArgs),
    Daemon(daemon::DaemonArgs),
    Events(events::EventsArgs),
    Mcp(mcp::McpArgs),
    Demo(demo::DemoArgs),
    Doctor(doctor::DoctorArgs),
    Token(token::TokenArgs),
    Key(key::KeyArgs),
    Completions(completions::CompletionsArgs),
    InstallManPages(install_man_pages::InstallManPagesArgs),
    PrePush(pre_push::PrePushArgs),
    #[command(hide = true)]
    Notify(notify::NotifyArgs),
    #[command(name = "__complete", hide = true)]
    Complete(complete::CompleteArgs),
    #[command(name = "__reference", hide = true)]
    Reference(reference::ReferenceArgs),
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(sandbox_exec::SandboxExecArgs),
    #[command(name = "__testmap", hide = true)]
    Testmap(testmap::TestmapArgs),
}

pub type CmdResult = Result<i32, CommandError>;

/// Deliver what the outbox holds (commit statuses, notifications, auto-pushes) for at most a
/// few seconds, when no daemon runs to deliver it; what is left waits in the index for the
/// daemon or the next command.
pub(crate) fn drain_outbox(ctx: &crate::app::Context) {
    let Some(d) = crate::app::publish::drain_briefly(ctx) else {
        return;
    };
    for f in d.failed.iter().chain(&d.errors) {
        eprintln!("warning: {f}");
    }
    if d.statuses_waiting > 0 {
        eprintln!(
            "warning: {} commit statuses wait to be posted to GitHub; the daemon (or the next run) posts them",
            d.statuses_waiting
        );
    }
}

pub fn main() -> i32 {
    // Rust ignores SIGPIPE, so printing into a closed pipe (`git sandbox log | head -1`) would
    // panic. Like git, end quietly by SIGPIPE instead: restore its default action before
    // anything (even `--help`) is printed.
    set_sigpipe(libc::SIG_DFL);
    // The sandbox helper starts for every run: straight to it, without building the whole
    // command line's parser (it takes its plan from the environment, no arguments).
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(gs_sandbox::sandbox::HELPER_SUBCOMMAND))
        && args.next().is_none()
    {
        set_sigpipe(libc::SIG_IGN);
        return gs_sandbox::sandbox::helper::main();
    }
    // An image's layer is unpacked by a process of its own, in a user namespace (its layer on
    // stdin, its directory on descriptor 3): straight to it, nothing else opened.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(gs_image::isolate::SUBCOMMAND)) {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return gs_image::isolate::child_main(&rest);
    }
    // A Dockerfile's RUN, in a user namespace of its own (its directories as descriptors).
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(gs_image::buildrun::SUBCOMMAND)) {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return gs_image::buildrun::child_main(&rest);
    }
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref()
        == Some(std::ffi::OsStr::new(
            gs_sandbox::sandbox::forkserver::SUBCOMMAND,
        ))
        && args.next().is_none()
    {
        // The helpers it forks start from here, as an exec'd one does above.
        set_sigpipe(libc::SIG_IGN);
        return gs_sandbox::sandbox::forkserver::serve();
    }
    // What the caller left open (a shell's `exec 7<file`, its own pipes) stays its business:
    // no process started from here — git, the fork server, a helper, a hook — inherits it.
    // Marked, not closed: what the caller handed on purpose stays usable by this process.
    gs_util::fds::cloexec_from(3);
    // The hooks' call runs inside every `git commit`: straight to it as well, as parsed below.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(a) = notify::hook_call(&args) {
        return run_command(Command::Notify(a), false);
    }
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, wants_json(&m))));
    let (cli, json) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let code = if e.use_stderr() {
                error::exit::USAGE
            } else {
                0
            };
            let _ = e.print();
            return code;
        }
    };
    run_command(cli.command, json)
}

/// Run a parsed command: its signal and log set-up, then the command itself.
fn run_command(command: Command, json: bool) -> i32 {
    if matches!(
        command,
        Command::Daemon(_) | Command::Notify(_) | Command::SandboxExec(_) | Command::Mcp(_)
    ) {
        // These write to sockets and child pipes whose readers may go away at any time (and the
        // daemon runs for days): a write there must fail with EPIPE, not kill the process. Their
        // few stdout lines go through `outln!`, which ends like SIGPIPE when stdout is closed.
        set_sigpipe(libc::SIG_IGN);
    }
    if gs_util::trace::log_asked() && !matches!(command, Command::Daemon(_)) {
        // The daemon always logs; another command only when asked (its stderr is for people).
        gs_util::trace::init_log();
    }
    // The first command a person runs with an installed binary puts the man pages beside it,
    // so that `git sandbox --help` opens one (git asks man; nothing of ours runs then).
    if !matches!(
        command,
        Command::Notify(_)
            | Command::SandboxExec(_)
            | Command::Complete(_)
            | Command::InstallManPages(_)
            | Command::Reference(_)
            | Command::Testmap(_)
    ) {
        install_man_pages::beside_installed_binary();
    }
    let result = match command {
        Command::New(a) => new::cmd_new(a),
        Command::Init(a) => init::cmd_init(a),
        Command::List(a) => list::cmd_list(a),
        Command::Status(a) => status::cmd_status(a),
        Command::Run(a) => run::cmd_run(a),
        Command::Bisect(a) => bisect::cmd_bisect(a),
        Command::Compare(a) => compare::cmd_compare(a),
        Command::Flaky(a) => flaky::cmd_flaky(a),
        Command::Fix(a) => fix::cmd_fix(a),
        Command::Workspace(a) => workspace::cmd_workspace(a),
        Command::Propose(a) => propose::cmd_propose(a),
        Command::PrePush(a) => pre_push::cmd_pre_push(a),
        Command::Show(a) => show::cmd_show(a),
        Command::Log(a) => log::cmd_log(a),
        Command::Analyze(a) => analyze::cmd_analyze(a),
        Command::Exec(a) => exec::cmd_exec(a),
        Command::Experiment(a) => experiment::cmd_experiment(a),
        Command::Eval(a) => eval::cmd_eval(a),
        Command::Promote(a) => promote::cmd_promote(a),
        Command::Kill(a) => kill::cmd_kill(a),
        Command::Push(a) => push::cmd_push(a),
        Command::Remote(a) => remote::cmd_remote(a),
        Command::Fetch(a) => fetch::cmd_fetch(a),
        Command::Reindex(a) => reindex::cmd_reindex(a),
        Command::Config(a) => config::cmd_config(a),
        Command::Gc(a) => gc::cmd_gc(a),
        Command::Forget(a) => forget::cmd_forget(a),
        Command::Image(a) => image::cmd_image(a),
        Command::Daemon(a) => daemon::cmd_daemon(a),
        Command::Events(a) => events::cmd_events(a),
        Command::Mcp(a) => mcp::cmd_mcp(a),
        Command::Demo(a) => demo::cmd_demo(a),
        Command::Notify(a) => notify::cmd_notify(a),
        Command::Doctor(a) => doctor::cmd_doctor(a),
        Command::Token(a) => token::cmd_token(a),
        Command::Key(a) => key::cmd_key(a),
        Command::Completions(a) => completions::cmd_completions(a),
        Command::Complete(a) => complete::cmd_complete(a),
        Command::InstallManPages(a) => install_man_pages::cmd_install_man_pages(a),
        Command::Reference(a) => reference::cmd_reference(a),
        Command::SandboxExec(a) => sandbox_exec::cmd_sandbox_exec(a),
        Command::Testmap(a) => testmap::cmd_testmap(a),
    };
    // A run's publication prunes its branch's cache in the background: done before the exit.
    gs_runner::caches::settle();
    // The empty cache stages kept for this process's next runs go with it.
    gs_runner::caches::drop_spares();
    match result {
        Ok(code) => code,
        Err(e) => e.report(json),
    }
}

/// Whether the command that runs was given `--json` (then its errors are JSON too).
fn wants_json(matches: &clap::ArgMatches) -> bool {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    matches!(m.try_get_one::<bool>("json"), Ok(Some(true)))
}

/// The whole command line definition, for completions and man pages.
fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

fn set_sigpipe(action: libc::sighandler_t) {
    // SAFETY: setting a disposition (no handler) at start-up, before any thread is spawned.
    unsafe { libc::signal(libc::SIGPIPE, action) };
}

/// Print a line on stdout where SIGPIPE is ignored: when the reader has gone, end the way the
/// other commands do, by SIGPIPE, quietly.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}
pub(crate) use outln;

pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{args}").and_then(|_| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => die_of_sigpipe(),
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(1);
        }
    }
}

/// End the process as a write into a closed pipe ends it under SIGPIPE's default action.
pub(crate) fn die_of_sigpipe() -> ! {
    set_sigpipe(libc::SIG_DFL);
    // SAFETY: raising a signal on ourselves; its default action ends the process.
    unsafe { libc::raise(libc::SIGPIPE) };
    std::process::exit(128 + libc::SIGPIPE)
}

/// Say once (per value of `core.hooksPath`) that git no longer runs our hooks.
fn notice_hooks(repo: &gix::Repository) {
    if let Some(msg) = crate::app::repo::repos::hooks_bypassed(repo) {
        eprintln!("warning: {msg}");
    }
}

fn cwd() -> Result<std::path::PathBuf, CommandError> {
    std::env::current_dir().map_err(|e| {
        CommandError::environment(format!("cannot read the current directory: {e}"))
            .hint("cd into an existing directory")
    })
}

fn print_json<T: serde::Serialize>(value: &T) {
    outln!(
        "{}",
        serde_json::to_string_pretty(value).expect("output types always serialize")
    );
}
