//! `git sandbox key`: this machine's public signing key, as a line for others' `allowed_signers`.

use super::{print_json, CmdResult};
use crate::app::Context;

/// Print this machine's signing key as a line for another machine's `allowed_signers` file.
///
/// Every record this machine writes is signed with its own ed25519 key (made on first use in
/// the data dir, 0600). Another machine takes these records as evidence when its user config
/// names an `allowed_signers` file holding this line (`[trust] allowed_signers = "…"`).
///
/// Example: `git sandbox key >> ~/.config/git-sandbox/allowed_signers` on the other machine's
/// copy, or `git sandbox key --json`.
#[derive(clap::Args)]
pub struct KeyArgs {
    /// Print the principal, key, fingerprint and line as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct KeyOut {
    principal: String,
    public_key: String,
    fingerprint: String,
    allowed_signers: String,
}

pub fn cmd_key(args: KeyArgs) -> CmdResult {
    let ctx = Context::load()?;
    let keys = ctx.keys()?;
    let out = KeyOut {
        principal: keys.principal(),
        public_key: keys.public_key(),
        fingerprint: keys.fingerprint(),
        allowed_signers: keys.allowed_signers_line(),
    };
    if args.json {
        print_json(&out);
    } else {
        println!("{}", out.allowed_signers);
    }
    Ok(0)
}
