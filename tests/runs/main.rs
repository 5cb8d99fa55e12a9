//! One commit's run: its sandboxed tests, checks, setup step, limits, toolchains, phases and the
//! supervisor under them; real toolchains and, for first runs, real package registries. One test
//! binary (`cargo test --test runs`), see "The tests" in docs/src/development.md.

#[path = "../common/mod.rs"]
mod common;

mod budgets;
mod checks;
mod first_run;
mod fix;
mod flaky;
mod image;
mod image_build;
mod image_network;
mod limits;
mod process;
mod run;
mod setup;
mod toolchains;
mod workspace;
