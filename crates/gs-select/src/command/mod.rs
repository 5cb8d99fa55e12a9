//! Test commands as the user wrote them: which runner a command is, the parts of the suite it
//! names, and phase one's command made from it (the same command, with only the selected parts).
//!
//! A command is split into plain words first ([`words`]): what goes before the runner
//! (assignments, `env …`, `uv run` …) is kept as written.

pub mod cargo;
pub mod go;
pub mod js;
pub mod pytest;
pub mod words;

pub use words::{command_words, program_name, split_words, CommandWords, NotPlain};

/// A word for `sh -c`, quoted when it holds anything but plain path characters.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:+@%=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
