//! Everything a commit or a remote holds is hostile: the attack tests, results as evidence, and
//! what a remote can push. One test binary (`cargo test --test security`), see "The tests" in
//! docs/src/development.md.

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod remote_bounds;
mod trust;
