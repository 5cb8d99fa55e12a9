//! Attacks, against the real binary. Everything a commit holds is hostile.
//!
//! - `sandbox`: the attack table of the team's isolation notes, row by row — what the test command
//!   can do inside its sandbox (fork bombs, memory, CPU, escapes, the network, secrets, signals).
//! - `hostile`: what a commit controls outside its sandbox — its config (which may only tighten the
//!   user's policy), the report paths the supervisor reads, the size of what it writes, the notes
//!   ref it races for, a corrupt index — as root and as the unprivileged user `nobody`.
//! - `hardening`: private data files whatever the umask, manifests read without following the
//!   commit's links, a checkout bounded by a ceiling with bounded memory.
//! - `network`: a run with the network reaches the hosts the user allows through the proxy, and
//!   nothing else: not the host's loopback (its index on PostgreSQL), not an IP literal, not a
//!   host only the commit added, not DNS.
//! - `caches`: what a run of one branch can leave for another through the build caches.
//! - `warm`: what a commit's tests can leave for later verdicts of their own branch: start-up
//!   files in the home, a poisoned cached directory before `eval`, a stale report.
//! - `counts`: test counts a commit prints (a pytest summary line from a test, or in place of
//!   pytest's) add no test, and deleting a failing test is no improvement in `eval`.
//! - `control_socket`: the daemon's door against other users, huge requests and slow clients.
//! - `descriptors`: what the launching process holds open (`run`, `exec`, the daemon, `mcp`) never
//!   reaches the command.
//! - `http_doors`: the HTTP listener against piles of half-sent heads, connections and unsigned
//!   webhook bodies.
//! - `forgery`: results pushed to the remote by someone else: unsigned, a signature copied onto
//!   a changed record, this machine's home id copied — none becomes evidence.

use crate::common;

#[path = "attacks/caches.rs"]
mod caches;
#[path = "attacks/control_socket.rs"]
mod control_socket;
#[path = "attacks/counts.rs"]
mod counts;
#[path = "attacks/descriptors.rs"]
mod descriptors;
#[path = "attacks/forgery.rs"]
mod forgery;
#[path = "attacks/hardening.rs"]
mod hardening;
#[path = "attacks/hostile.rs"]
mod hostile;
#[path = "attacks/http_doors.rs"]
mod http_doors;
#[path = "attacks/network.rs"]
mod network;
#[path = "attacks/sandbox.rs"]
mod sandbox;
#[path = "attacks/warm.rs"]
mod warm;
