//! Plain data types shared by every layer: the run record and the rows the index returns.

pub mod record;

pub use record::*;
