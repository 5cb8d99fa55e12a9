use super::{outln, print_json, CmdResult, CommandError};
use gs_config::Paths;
use std::time::{Duration, Instant};

/// Run the daemon in the foreground: watch every registered repository, queue each new commit
/// of a watched branch, and run the queue with N workers. Stop it with SIGTERM, Ctrl-C or
/// `git sandbox daemon stop`: running jobs get a grace period, the rest stay queued.
///
/// Examples: `git sandbox daemon`, `git sandbox daemon --workers 4`, `git sandbox daemon status`
#[derive(clap::Args)]
pub struct DaemonArgs {
    #[command(subcommand)]
    pub action: Option<DaemonAction>,
    /// Jobs run in parallel (default: the number of cores, or with `[limits] cpu_cores` as many
    /// as the cores hold at that share each).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// How long running jobs may take to finish after a stop request ("30s", "2m").
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub grace: String,
    /// Serve the dashboard at http://ADDR/, the API at /api/v1 and, with [remote]
    /// webhook_secret_file in your user config, webhooks at /webhooks/github. ADDR defaults to
    /// 127.0.0.1:8787; another interface needs an API token to exist (`git sandbox token`).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8787")]
    pub http: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum DaemonAction {
    /// Whether the daemon runs, its pid, workers and queue (exit 1 when it does not run).
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Ask the running daemon to stop and wait until it has.
    Stop,
}

pub fn cmd_daemon(args: DaemonArgs) -> CmdResult {
    let paths = Paths::from_env();
    match args.action {
        Some(DaemonAction::Status { json }) => status(&paths, json),
        Some(DaemonAction::Stop) => stop(&paths),
        None => {
            let grace = gs_config::parse_duration(&args.grace).ok_or_else(|| {
                CommandError::usage(format!("invalid --grace {:?}", args.grace))
                    .hint("write a duration like \"30s\" or \"2m\"")
            })?;
            if args.workers == Some(0) {
                return Err(CommandError::usage("--workers must be at least 1"));
            }
            let workers = args.workers;
            let http = match &args.http {
                Some(a) => Some(a.parse::<std::net::SocketAddr>().map_err(|_| {
                    CommandError::usage(format!("invalid --http {a:?}"))
                        .hint("write an address and a port, like 127.0.0.1:8787")
                })?),
                None => None,
            };
            crate::daemon::run(crate::daemon::Options {
                workers,
                grace,
                http,
            })?;
            Ok(0)
        }
    }
}

fn status(paths: &Paths, json: bool) -> CmdResult {
    let Some(pid) = gs_ipc::running(&paths.home) else {
        if json {
            print_json(&serde_json::json!({"running": false}));
        } else {
            outln!("daemon: not running (start it with `git sandbox daemon`)");
        }
        return Ok(1);
    };
    let mut v: serde_json::Value = gs_ipc::request(&paths.home, "status", Duration::from_secs(3))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| serde_json::json!({"pid": pid}));
    v["running"] = true.into();
    if json {
        print_json(&v);
    } else {
        outln!("daemon: running (pid {pid})");
        for key in [
            "workers",
            "busy_workers",
            "pending_jobs",
            "running_jobs",
            "repositories",
            "uptime_s",
        ] {
            if let Some(x) = v.get(key) {
                let why = if key == "pending_jobs" {
                    let map: std::collections::BTreeMap<String, u64> = v
                        .get("pending_by_trigger")
                        .and_then(|m| serde_json::from_value(m.clone()).ok())
                        .unwrap_or_default();
                    super::status::queue_reasons(&map)
                } else {
                    String::new()
                };
                if !x.is_null() {
                    outln!("  {key:<13} {x}{why}");
                }
            }
        }
        if v["index"]["reachable"] == false {
            outln!(
                "  {:<13} unreachable since {} ({}); running what it holds, retrying",
                "index",
                v["index"]["since"].as_str().unwrap_or("?"),
                v["index"]["error"].as_str().unwrap_or("?")
            );
        }
    }
    Ok(0)
}

fn stop(paths: &Paths) -> CmdResult {
    let Some(pid) = gs_ipc::running(&paths.home) else {
        outln!("daemon: not running");
        return Ok(0);
    };
    if gs_ipc::request(&paths.home, "stop", Duration::from_secs(3)).is_err() && pid > 0 {
        // The socket is gone but the process holds the lock: ask with a signal instead.
        // SAFETY: sending SIGTERM to the pid recorded in our own lock file.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while gs_ipc::running(&paths.home).is_some() {
        if Instant::now() > deadline {
            return Err(CommandError::failed(format!(
                "the daemon (pid {pid}) did not stop within 120 s"
            ))
            .hint(format!("kill it with `kill {pid}`")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    outln!("daemon: stopped (pid {pid})");
    Ok(0)
}
