//! API tokens: a role each (`read` < `run` < `admin`), shown once when made; only their SHA-256
//! is kept, in `tokens.json` beside the user config (mode 0600, replaced atomically), so that
//! rebuilding the index loses none. A presented token is checked against every kept hash in
//! constant time.

use crate::app::{io_err, AppError, Context, Result};
use gs_config::Paths;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::path::PathBuf;

/// What a token may do. Each role may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Look: every GET.
    Read,
    /// Also queue runs and evaluate.
    Run,
    /// Also create repositories, promote and kill.
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "read" => Some(Role::Read),
            "run" => Some(Role::Run),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Run => "run",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kept token: never the token itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Token {
    pub name: String,
    pub role: Role,
    /// SHA-256 of the token, hex.
    #[serde(rename = "sha256")]
    pub hash: String,
    pub created_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<Token>,
}

/// Where the tokens are kept.
pub fn path(paths: &Paths) -> PathBuf {
    paths
        .user_config
        .parent()
        .unwrap_or(&paths.home)
        .join("tokens.json")
}

fn hash(secret: &str) -> String {
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The kept tokens (none when there is no file).
pub fn list(paths: &Paths) -> Result<Vec<Token>> {
    let file = path(paths);
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice::<TokenFile>(&bytes)
            .map(|f| f.tokens)
            .map_err(|e| {
                AppError::usage(format!("{} is not a token file: {e}", file.display())).hint(
                    "move it away and make new tokens with `git sandbox token create --role ROLE`",
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(format!("cannot read {}", file.display()))(e)),
    }
}

fn save(paths: &Paths, tokens: Vec<Token>) -> Result<()> {
    let file = path(paths);
    if let Some(dir) = file.parent() {
        gs_util::private::create_dir_all(dir)
            .map_err(io_err(format!("cannot create {}", dir.display())))?;
    }
    let mut body = serde_json::to_vec_pretty(&TokenFile { tokens }).expect("tokens serialize");
    body.push(b'\n');
    // Written 0600 from the start: the temp file is private before it is renamed into place.
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(io_err(format!("cannot write {}", file.display())))?;
    gs_util::private::restrict_file(tmp.as_file())
        .and_then(|_| std::io::Write::write_all(&mut tmp.as_file(), &body))
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(io_err(format!("cannot write {}", file.display())))?;
    tmp.persist(&file)
        .map_err(|e| io_err(format!("cannot write {}", file.display()))(e.error))?;
    Ok(())
}

/// A new token: returns the secret (shown once) and what is kept of it.
pub fn create(ctx: &Context, role: Role, name: Option<&str>) -> Result<(String, Token)> {
    let mut tokens = list(&ctx.paths)?;
    let name = match name {
        Some(n) => {
            crate::app::repo::repos::check_name(n)?;
            if tokens.iter().any(|t| t.name == n) {
                return Err(
                    AppError::usage(format!("a token named {n:?} exists")).hint(format!(
                        "pick another name, or revoke it first: `git sandbox token revoke {n}`"
                    )),
                );
            }
            n.to_string()
        }
        None => (1..)
            .map(|i| format!("{role}-{i}"))
            .find(|n| !tokens.iter().any(|t| &t.name == n))
            .expect("some name is free"),
    };
    let secret = format!("gsbx_{}", gs_util::random_hex(24));
    let token = Token {
        name,
        role,
        hash: hash(&secret),
        created_at: gs_util::time::now_rfc3339(),
    };
    tokens.push(token.clone());
    save(&ctx.paths, tokens)?;
    Ok((secret, token))
}

/// Revoke the token called `name`.
pub fn revoke(ctx: &Context, name: &str) -> Result<Token> {
    let mut tokens = list(&ctx.paths)?;
    let Some(i) = tokens.iter().position(|t| t.name == name) else {
        return Err(AppError::usage(format!("no token named {name:?}"))
            .hint("see `git sandbox token list`"));
    };
    let gone = tokens.remove(i);
    save(&ctx.paths, tokens)?;
    Ok(gone)
}

/// The token `presented` is, if it is one: every kept hash is compared, in constant time, so
/// neither which token matched nor how much of it did shows in the time taken.
pub fn verify(tokens: &[Token], presented: &str) -> Option<Token> {
    let h = hash(presented);
    let mut found = None;
    for t in tokens {
        if constant_time_eq(t.hash.as_bytes(), h.as_bytes()) {
            found = Some(t.clone());
        }
    }
    found
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_tokens_match_only_themselves() {
        assert!(Role::Read < Role::Run && Role::Run < Role::Admin);
        let kept = vec![Token {
            name: "ci".into(),
            role: Role::Run,
            hash: hash("gsbx_abc"),
            created_at: String::new(),
        }];
        assert_eq!(verify(&kept, "gsbx_abc").unwrap().name, "ci");
        assert!(verify(&kept, "gsbx_abd").is_none());
        assert!(verify(&kept, "").is_none());
    }
}
