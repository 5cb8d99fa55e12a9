//! Tests that need the machine's run slots to themselves: as root a slot's uid is held machine-wide
//! (under /run), so a run of any other test at the same time would take the slot these tests
//! assert about. Their own binary, so that no test of another group runs beside them (`cargo
//! test` runs one binary at a time); within it they take a lock, one at a time. See "The tests"
//! in docs/src/development.md.

#[path = "../common/mod.rs"]
mod common;

mod kept_checkouts;
