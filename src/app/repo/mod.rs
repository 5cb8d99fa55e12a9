//! Whole repositories: creating and adopting them, the registry, rebuilding the index from
//! git, housekeeping, access.

pub mod daemons;
pub mod demo;
pub mod forget;
pub mod gc;
pub mod reindex;
pub mod repos;
pub mod tokens;
