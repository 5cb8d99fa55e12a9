//! The hidden `__sandbox-exec` subcommand: the sandbox helper the supervisor starts for every
//! test command (see `runner::sandbox::helper`). Not for people to call.

use super::CmdResult;

#[derive(clap::Args)]
pub struct SandboxExecArgs {}

pub fn cmd_sandbox_exec(_args: SandboxExecArgs) -> CmdResult {
    Ok(gs_sandbox::sandbox::helper::main())
}
