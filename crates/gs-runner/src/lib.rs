//! Running a test command for a checked-out tree: choosing the command, sandboxing and
//! supervising the process tree (layers, timeout, output cap, log), and reading the results out
//! of its output.

pub mod caches;
pub mod cargo_cmd;
pub mod coverage;
pub mod detect;
pub mod detect_setup;
pub mod go_cmd;
pub mod js_cmd;
pub mod limit_hit;
pub mod newer;
pub mod pytest_capture;
pub mod pytest_cmd;
pub mod pytest_report;
pub mod stamps;
pub mod toolchain;
pub mod words;
pub mod workspace;

pub use words::{command_words, program_name, CommandWords};
