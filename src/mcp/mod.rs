//! `git sandbox mcp`: the use-cases of `app/` as MCP tools and resources over stdio, for one
//! repository. Each call runs on a blocking thread with its own view of the index and config;
//! answers are compact JSON text within a byte budget (`budget.rs`); errors are tool errors with
//! the command line's one-line message and hint, never the end of the server. While no daemon
//! runs, the server runs its repository's queued commits itself, so every commit an agent makes
//! is verified, and delivers what the outbox holds (statuses, notifications, auto-push).

mod args;
mod budget;
mod tools;
mod workspace;

use crate::app::Repo;
use crate::app::{
    intake::queue, intake::session::Session, repo::repos, AppError, Context, ErrorKind, Hinted,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server serves.
#[derive(Clone)]
pub struct Options {
    /// The repository's top directory.
    pub root: PathBuf,
    /// Serve only the tools that change nothing.
    pub read_only: bool,
}

/// Why the server cannot start.
pub type StartError = AppError;

#[derive(Clone)]
struct Server {
    opts: Arc<Options>,
    /// The repository's name, as resource URIs carry it.
    name: Arc<String>,
    stop: Arc<AtomicBool>,
    /// Wakes the runner of queued commits.
    wake: std::sync::mpsc::SyncSender<()>,
}

/// Check that `dir` is in a registered repository; returns its top directory and name.
pub fn check(dir: &Path) -> Result<(PathBuf, String), StartError> {
    let s = Session::within(Context::load()?, dir)?;
    Ok((gs_git::repo_root(&s.repo), s.row.name))
}

/// Serve MCP on stdin/stdout until the client closes it.
pub fn serve(opts: Options, name: String) -> std::io::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let (wake, woken) = std::sync::mpsc::sync_channel(1);
    // A read-only server runs nothing.
    let runner = (!opts.read_only).then(|| {
        let (root, stop) = (opts.root.clone(), stop.clone());
        std::thread::spawn(move || run_queue(&root, &stop, &woken))
    });
    let server = Server {
        opts: Arc::new(opts),
        name: Arc::new(name),
        stop: stop.clone(),
        wake,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(std::io::Error::other)?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    });
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = runner {
        let _ = r.join();
    }
    // A blocking call still running (a long run_wait) must not hold the process.
    rt.shutdown_timeout(Duration::from_millis(200));
    result
}

/// While no daemon runs on this machine, run the queued commits of this repository (the hooks
/// queue every commit on a watched branch): on each wake-up and every two seconds. One server
/// per repository does (it holds the runner lock); when it takes the lock, jobs a killed runner
/// left assigned or running are queued again.
fn run_queue(root: &Path, stop: &AtomicBool, woken: &std::sync::mpsc::Receiver<()>) {
    let mut lock = None;
    let mut lock_failed = false;
    while !stop.load(Ordering::Relaxed) {
        let _ = woken.recv_timeout(Duration::from_secs(2));
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(ctx) = Context::load() else { continue };
        if gs_ipc::running(&ctx.paths.home).is_some() {
            continue;
        }
        let Ok((repo, row)) = repos::require_registered(&ctx, root) else {
            continue;
        };
        if lock.is_none() {
            lock = match gs_ipc::runner_lock(&ctx.paths.home, &row.repository_id) {
                Ok(l) => l,
                Err(e) => {
                    // Nobody holds it and nobody can take it: said once, not waited on quietly.
                    if !lock_failed {
                        eprintln!(
                            "warning: cannot take the queue's runner lock ({e}); this server does not run the queue: fix the file's permissions or remove it"
                        );
                        lock_failed = true;
                    }
                    None
                }
            };
            if lock.is_none() {
                continue;
            }
            let _ = queue::reclaim_from_mcp_servers(&ctx, &row);
        }
        // What the hooks spooled, then what they may have missed (hooks not installed, a
        // commit made by a tool that skips them), as the daemon's watcher would.
        crate::app::intake::spool::take_in(&ctx, false);
        let _ = crate::app::intake::notify::scan(&ctx, &repo, &row.repository_id, "watch");
        if let Err(e) = queue::run_ready(&ctx, &row, stop) {
            eprintln!("warning: running the queue: {}", e.problem());
        }
        // What the runs (and the tools) queued for GitHub, the alert channels and the remote.
        deliver(&ctx);
    }
    // Before the server ends: what is due, for a few seconds (the rest waits for a daemon or
    // the next command).
    if let Ok(ctx) = Context::load() {
        deliver(&ctx);
    }
}

/// Deliver what the outbox holds, briefly, when no daemon does; problems go to stderr, as the
/// command line shows them.
fn deliver(ctx: &Context) {
    let Some(d) = crate::app::publish::drain_briefly(ctx) else {
        return;
    };
    for f in d.failed.iter().chain(&d.errors) {
        eprintln!("warning: {f}");
    }
}

/// The one-line problem and its hints, as the command line prints them.
fn error_text(e: &AppError) -> String {
    let mut text = format!("error: {}", e.problem());
    for h in e.hints() {
        text.push_str(&format!("\nhint: {h}"));
    }
    text
}

/// MCP's error for each kind of error where the protocol itself answers (a resource read): bad
/// input is invalid params, a name that names nothing a resource not found, the rest internal.
/// Tools answer every kind with a tool error carrying [`error_text`], for the agent to act on.
fn protocol_error(e: &AppError) -> McpError {
    let text = error_text(e);
    match e.kind() {
        ErrorKind::Usage => McpError::invalid_params(text, None),
        ErrorKind::NotFound => McpError::resource_not_found(text, None),
        ErrorKind::Refused | ErrorKind::Failed | ErrorKind::Unavailable | ErrorKind::Internal => {
            McpError::internal_error(text, None)
        }
    }
}

impl Server {
    fn tool_list(&self) -> Vec<Tool> {
        tools::definitions()
            .into_iter()
            .filter(|d| !self.opts.read_only || !d.writes)
            .map(|d| {
                let annotations = ToolAnnotations::new()
                    .read_only(!d.writes)
                    .destructive(d.destructive)
                    .idempotent(d.idempotent)
                    .open_world(false);
                Tool::new(d.name, d.description, (d.schema)()).with_annotations(annotations)
            })
            .collect()
    }

    /// Run a tool on a blocking thread with a fresh context.
    async fn run_tool(
        &self,
        name: String,
        args: serde_json::Value,
    ) -> Result<CallToolResult, McpError> {
        let known = tools::definitions().into_iter().find(|d| d.name == name);
        match known {
            None => {
                return Err(McpError::invalid_params(
                    format!("unknown tool {name:?}; tools/list names the tools"),
                    None,
                ))
            }
            Some(d) if d.writes && self.opts.read_only => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "error: {name} changes the repository and this server is read-only (--read-only)\nhint: start `git sandbox mcp` without --read-only to use it"
                ))]))
            }
            Some(_) => {}
        }
        let (root, stop, wake) = (self.opts.root.clone(), self.stop.clone(), self.wake.clone());
        let joined = tokio::task::spawn_blocking(move || {
            let s = Session::within(Context::load()?, &root)?;
            let call = tools::Call {
                ctx: &s.ctx,
                repo: &s.repo,
                row: &s.row,
                interrupt: &stop,
            };
            let answer = tools::call(&call, &name, args);
            if name == "run_request" {
                let _ = wake.try_send(());
            }
            Ok::<_, AppError>(answer)
        })
        .await;
        let answer = match joined {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => Err(tools::CallError::App(e)),
            // A panic is no refusal: the machine failed.
            Err(e) => Err(tools::CallError::App(AppError::Io {
                context: "the tool failed unexpectedly".into(),
                source: std::io::Error::other(e.to_string()),
            })),
        };
        match answer {
            Ok(v) => Ok(CallToolResult::success(vec![ContentBlock::text(
                serde_json::to_string(&v).expect("answers serialize"),
            )])),
            Err(tools::CallError::Unknown(n)) => Err(McpError::invalid_params(
                format!("unknown tool {n:?}"),
                None,
            )),
            Err(tools::CallError::Arguments(e) | tools::CallError::App(e)) => Ok(
                CallToolResult::error(vec![ContentBlock::text(error_text(&e))]),
            ),
        }
    }

    fn read(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let not_found = |why: String| McpError::resource_not_found(why, None);
        let rest = uri
            .strip_prefix("sandbox://")
            .ok_or_else(|| not_found(format!("{uri:?} is not a sandbox:// URI")))?;
        let mut parts = rest.splitn(3, '/');
        let (repo_name, kind, rev) = match (parts.next(), parts.next(), parts.next()) {
            (Some(r), Some(k), Some(c)) if !c.is_empty() => (r, k, c),
            _ => {
                return Err(not_found(format!(
                    "{uri:?}: write sandbox://{}/result/COMMIT or sandbox://{}/log/COMMIT",
                    self.name, self.name
                )))
            }
        };
        if repo_name != self.name.as_str() {
            return Err(not_found(format!(
                "{uri:?}: this server serves repository {:?}",
                self.name
            )));
        }
        let Session { ctx, repo, row } = Context::load()
            .and_then(|ctx| Session::within(ctx, &self.opts.root))
            .map_err(|e| protocol_error(&e))?;
        let (commit, _) =
            crate::app::experiment::compare::resolve(&repo, rev).map_err(|e| protocol_error(&e))?;
        let mut reader =
            crate::app::records::results::NoteReader::new(&repo).map_err(|e| protocol_error(&e))?;
        let record = crate::app::records::results::find_evidence(
            Repo::new(&ctx, &repo, &row),
            &mut reader,
            commit,
        )
        .map_err(|e| protocol_error(&e))?
        .ok_or_else(|| not_found(format!("{rev} has no result yet")))?;
        match kind {
            "result" => Ok(ReadResourceResult::new(vec![ResourceContents::text(
                serde_json::to_string_pretty(&record).expect("records serialize"),
                uri,
            )
            .with_mime_type("application/json")])),
            "log" => {
                let path = crate::app::records::logs::path(&ctx, &row, &record);
                let text = std::fs::read(&path)
                    .map_err(|e| not_found(format!("the run's output is not kept here: {e}")))?;
                Ok(ReadResourceResult::new(vec![ResourceContents::text(
                    String::from_utf8_lossy(&text).into_owned(),
                    uri,
                )]))
            }
            other => Err(not_found(format!(
                "{uri:?}: no resource kind {other:?} (result or log)"
            ))),
        }
    }

    fn resources(&self) -> Vec<Resource> {
        let Ok(ctx) = Context::load() else {
            return Vec::new();
        };
        let Ok((_, row)) = repos::require_registered(&ctx, &self.opts.root) else {
            return Vec::new();
        };
        let runs = crate::app::records::views::recent_runs(&ctx, &row, 50).unwrap_or_default();
        let mut out = Vec::new();
        for (commit, status, _) in runs {
            let short = &commit[..commit.len().min(12)];
            out.push(
                Resource::new(
                    format!("sandbox://{}/result/{commit}", self.name),
                    format!("result {short} ({status})"),
                )
                .with_mime_type("application/json"),
            );
            out.push(
                Resource::new(
                    format!("sandbox://{}/log/{commit}", self.name),
                    format!("log {short}"),
                )
                .with_mime_type("text/plain"),
            );
        }
        out
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            "git-sandbox",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(format!(
            "Verification of the commits of repository {:?}: every commit on a watched branch \
             (experiment/*, the production branch) is tested in a sandbox and analysed. Start \
             work with experiment_start, commit with git as usual, then run_wait for the \
             result, failures_list and log_read to see why, experiment_eval and \
             experiment_promote to finish. Answers are compact; pass detail: true for more.",
            self.name
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        Ok(self.run_tool(request.name.to_string(), args).await?.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let server = self.clone();
        let list = tokio::task::spawn_blocking(move || server.resources())
            .await
            .unwrap_or_default();
        Ok(ListResourcesResult::with_all_items(list))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(
                format!("sandbox://{}/result/{{commit}}", self.name),
                "run record",
            )
            .with_description(
                "The whole run record of a commit (any revision), as its note holds it",
            )
            .with_mime_type("application/json"),
            ResourceTemplate::new(format!("sandbox://{}/log/{{commit}}", self.name), "run log")
                .with_description("The captured output of a commit's test run")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let server = self.clone();
        let uri = request.uri.clone();
        tokio::task::spawn_blocking(move || server.read(&uri))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .map(Into::into)
    }
}
