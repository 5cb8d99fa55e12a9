//! git-sandbox: every commit of an experiment repository becomes an experiment.
//!
//! Layers, each using only those below it: `cli` (edge) → `app` (use-cases) → `runner`,
//! `analysis` (domain) → `git`, `store`, `config` (infrastructure) → `model` (plain data).

pub mod analysis;
pub mod app;
pub mod cli;
pub mod config;
pub mod git;
pub mod model;
pub mod runner;
pub mod store;
pub mod util;
