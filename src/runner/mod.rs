//! Running a test command for a checked-out tree: choosing the command, supervising the process
//! tree (timeout, output cap, log), and reading the results out of its output.

pub mod detect;
pub mod env;
pub mod parse;
pub mod process;

pub use process::{run, Outcome, Output, Spec};
