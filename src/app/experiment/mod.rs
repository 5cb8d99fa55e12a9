//! Experiments: starting, evaluating, promoting, rolling back and comparing them, and the
//! judgements over their records.

pub mod bisect;
pub mod compare;
pub mod eval;
pub mod experiments;
pub mod preview;
pub mod promote;
pub mod propose;
pub mod pull_request;
pub mod rollback;
