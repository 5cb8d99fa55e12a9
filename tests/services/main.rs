//! What runs beside the command line: the daemon and its queue, the HTTP API and dashboard, MCP,
//! GitHub, webhooks, alerts, remotes and PostgreSQL (local servers on 127.0.0.1, a browser).
//! One test binary (`cargo test --test services`), see "The tests" in docs/src/development.md.

#[path = "../common/mod.rs"]
mod common;

mod alerts;
mod api;
mod daemon;
mod dashboard;
mod fleet;
mod github;
mod http_git_server;
mod mcp;
mod remotes;
mod storage;
mod webhooks;
