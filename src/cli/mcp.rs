use super::{cwd, CmdResult, CommandError};

/// Serve MCP on stdin and stdout for AI coding agents (results, failures, experiments).
///
/// The Model Context Protocol: experiments, runs, results, failures, logs, analysis, evaluation
/// and promotion of one repository, as tools with compact answers. Nothing else is printed on
/// stdout.
///
/// The repository is the one you are in, or --repo PATH. While no daemon runs, the server runs
/// the repository's queued commits itself.
///
/// Example: `git sandbox mcp --repo ~/experiments/parser` (in an MCP client's config)
#[derive(clap::Args)]
pub struct McpArgs {
    /// The repository to serve (default: the one the current directory is in).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<std::path::PathBuf>,
    /// Serve only the tools that change nothing (no experiment_start, run_request, eval,
    /// promote, kill, exec).
    #[arg(long)]
    pub read_only: bool,
}

pub fn cmd_mcp(args: McpArgs) -> CmdResult {
    let dir = match &args.repo {
        Some(p) => std::path::absolute(p)
            .map_err(|e| CommandError::usage(format!("bad --repo {}: {e}", p.display())))?,
        None => cwd()?,
    };
    if !dir.is_dir() {
        return Err(
            CommandError::usage(format!("--repo {} is not a directory", dir.display()))
                .hint("name the experiment repository's directory"),
        );
    }
    let (root, name) = crate::mcp::check(&dir)?;
    crate::mcp::serve(
        crate::mcp::Options {
            root,
            read_only: args.read_only,
        },
        name,
    )
    .map_err(|e| CommandError::environment(format!("the MCP server stopped: {e}")))?;
    Ok(0)
}
