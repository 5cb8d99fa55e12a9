//! Plain data types shared by every layer: the run record, experiments and evaluations.

pub mod experiment;
pub mod record;

pub use experiment::*;
pub use record::*;
