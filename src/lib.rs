//! git-sandbox: every commit of an experiment repository becomes an experiment.
//!
//! This crate holds the faces (`cli`, `daemon`, `mcp`, `http`) and the use-cases (`app`); the
//! layers below are crates of the workspace, each using only those below it: `gs-runner`
//! (`gs-sandbox`, `gs-parse`), `gs-analysis` → `gs-git`, `gs-store`, `gs-config`, `gs-trust`,
//! `gs-ipc`, `gs-github` → `gs-model` → `gs-util`.

pub mod app;
pub mod cli;
pub mod daemon;
pub mod http;
pub mod mcp;
