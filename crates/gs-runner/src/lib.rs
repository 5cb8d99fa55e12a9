//! Running a test command for a checked-out tree: choosing the command, sandboxing and
//! supervising the process tree (layers, timeout, output cap, log), and reading the results out
//! of its output.

pub mod caches;
pub mod coverage;
pub mod detect;
pub mod detect_setup;
pub mod js_cmd;
pub mod limit_hit;
pub mod mocha_map;
pub mod newer;
pub mod pytest_capture;
pub mod pytest_report;
pub mod rundir;
pub mod stamps;
pub mod toolchain;

// Test commands are recognised by the selection's layer; their old names here stay for the
// callers that still use them.
pub use gs_select::command::{cargo as cargo_cmd, go as go_cmd, pytest as pytest_cmd};
pub use gs_select::command::{command_words, program_name, CommandWords};
