//! Errors that keep the fix apart from the problem. The command line prints each hint on its
//! own `hint:` line (and in `--json`); `Display` stays the one line "<problem>; <hint>" that run
//! records, events and logs store.

use std::fmt;

/// An error that can tell its problem from what to do about it.
pub trait Hinted: fmt::Display {
    /// The problem alone, on one line.
    fn problem(&self) -> String;
    /// What the user can do about it, each a fragment that reads on its own line.
    fn hints(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Write a problem and its hints as the one line `Display` shows: joined by "; ".
pub fn write_line(f: &mut fmt::Formatter<'_>, problem: &str, hints: &[String]) -> fmt::Result {
    f.write_str(problem)?;
    for h in hints {
        write!(f, "; {h}")?;
    }
    Ok(())
}

/// `Display` for [`Hinted`] types: the problem and its hints on one line.
#[macro_export]
macro_rules! display_hinted {
    ($($t:ty),+) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                use $crate::hint::Hinted;
                $crate::hint::write_line(f, &self.problem(), &self.hints())
            }
        }
    )+};
}
pub use crate::display_hinted;

/// A problem and its hints, for errors made where they happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub problem: String,
    pub hints: Vec<String>,
}

impl Message {
    pub fn new(problem: impl Into<String>) -> Message {
        Message {
            problem: problem.into(),
            hints: Vec::new(),
        }
    }

    /// The problem of `error` (prefixed with `context`, when not empty) and its hints.
    pub fn of(context: &str, error: &dyn Hinted) -> Message {
        let problem = error.problem();
        Message {
            problem: if context.is_empty() {
                problem
            } else {
                format!("{context}: {problem}")
            },
            hints: error.hints(),
        }
    }

    pub fn hint(mut self, fix: impl Into<String>) -> Message {
        self.hints.push(fix.into());
        self
    }
}

impl Hinted for Message {
    fn problem(&self) -> String {
        self.problem.clone()
    }

    fn hints(&self) -> Vec<String> {
        self.hints.clone()
    }
}

display_hinted!(Message);

impl std::error::Error for Message {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_with_the_hints() {
        let m = Message::new("the index is corrupt")
            .hint("move it away")
            .hint("run `git sandbox reindex`");
        assert_eq!(
            m.to_string(),
            "the index is corrupt; move it away; run `git sandbox reindex`"
        );
        assert_eq!(Message::new("plain").to_string(), "plain");
        let wrapped = Message::of("[watch] branches", &m);
        assert_eq!(wrapped.problem, "[watch] branches: the index is corrupt");
        assert_eq!(wrapped.hints.len(), 2);
    }
}
