//! The command line and what it shows: arguments, errors, help and man pages, repositories,
//! experiments, results and housekeeping. One test binary (`cargo test --test commands`); a
//! module per former binary, see "The tests" in docs/src/development.md.

#[path = "../common/mod.rs"]
mod common;

mod bisect;
mod cli;
mod errors;
mod experiments;
mod gate;
mod hook_calls;
mod housekeeping;
mod repos;
mod revs;
mod rollback;
mod suite;
mod usability;
mod wip;
