//! Plain data types shared by every layer: the run record, experiments and evaluations.

pub mod experiment;
pub mod note;
pub mod record;

pub use experiment::*;
pub use note::NoteRecord;
pub use record::*;
