//! Running a test command for a checked-out tree: choosing the command, sandboxing and
//! supervising the process tree (layers, timeout, output cap, log), and reading the results out
//! of its output.

pub mod caches;
pub mod cargo_cmd;
pub mod coverage;
pub mod detect;
pub mod detect_setup;
pub mod env;
pub mod go_cmd;
pub mod first_fail;
pub mod js_cmd;
mod launch;
pub mod limit_hit;
pub mod parse;
pub mod process;
pub mod pytest_cmd;
pub mod sandbox;
pub mod stamps;
pub mod toolchain;
pub mod words;
pub mod workspace;

pub use process::{run, Outcome, Output, Spec};
pub use sandbox::Sandbox;
pub use words::{command_words, program_name, CommandWords};
