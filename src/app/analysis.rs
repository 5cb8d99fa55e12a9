//! Analysing a commit's code: the tree-sitter analysis of its tree and the metrics over it.

pub mod analyze;
pub mod metrics;
