//! Turning hooks, watcher events, webhooks, polls and fetches into jobs, and running them.

pub mod fetch;
pub mod fleet;
pub mod gate;
pub mod lost_notes;
pub mod notify;
pub mod queue;
pub mod session;
pub mod spool;
pub mod webhook;
