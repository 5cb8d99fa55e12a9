//! A commit's config as every area reads it: the user's layers, the commit's own
//! `.sandbox.toml` and an experiment's `[config]` from its metadata.

pub mod adopted;
pub mod build;
pub mod commit_config;
pub mod experiment_meta;
pub mod image;
