//! The sandbox a test command runs in (its layers, the helper and the fork server) and the
//! supervisor of its process tree (timeout, output cap, log), which use each other.

pub mod env;
pub mod first_fail;
mod launch;
pub mod probe;
pub mod process;
pub mod sandbox;

pub use probe::Probe;
pub use process::{run, Egress, Outcome, Output, Spec};
pub use sandbox::Sandbox;
