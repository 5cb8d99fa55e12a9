//! Plain data types shared by every layer: the run record, experiments and evaluations.

pub mod attempt;
pub mod enforced;
pub mod event;
pub mod experiment;
pub mod note;
mod open_enum;
pub mod record;
pub mod test_name;

pub use attempt::{could_not_run, Attempt, IMAGE_UNAVAILABLE};
pub use enforced::*;
pub use event::EventKind;
pub use experiment::*;
pub use note::NoteRecord;
pub use open_enum::{ChangeStatus, Framework, KilledBy};
pub use record::*;
