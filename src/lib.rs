//! git-sandbox: every commit of an experiment repository becomes an experiment.
//!
//! Layers, each using only those below it: `cli`, `daemon`, `mcp`, `http` (edges) → `app` (use-cases) →
//! `runner`, `analysis` (domain) → `git`, `store`, `config`, `trust`, `ipc` (infrastructure) → `model`.

pub mod analysis;
pub mod app;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod git;
pub mod github;
pub mod http;
pub mod ipc;
pub mod mcp;
pub mod model;
pub mod runner;
pub mod store;
pub mod trust;
pub mod util;
