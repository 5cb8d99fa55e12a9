//! Reading and writing the records of runs: a commit's note and index row, its summary, the
//! views over many commits, its logs and failures, and why a result stands or not.

pub mod commits;
pub mod explain;
pub mod failures;
pub mod history;
pub mod logs;
pub mod quarantine;
pub mod results;
pub mod summary;
pub mod views;
