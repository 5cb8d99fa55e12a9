//! Reading a config file's values: errors with their fix kept apart, and the kinds of value
//! every section has (commands, paths in the checkout, durations, timeouts).

use super::parse_duration;
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// The longest timeout a run may be given.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Between the problem and the fix in a deserialize error: serde carries only a string, and
/// [`super::parse_file`] splits it back into the message and its hints.
pub(super) const HINT_MARK: char = '\u{1f}';

/// A deserialize error with its fix kept apart.
pub(super) fn hinted<E: serde::de::Error>(
    problem: impl std::fmt::Display,
    fix: impl std::fmt::Display,
) -> E {
    E::custom(format!("{problem}{HINT_MARK}{fix}"))
}

/// A command with a NUL byte cannot be passed to a shell: it is an error, never a command cut
/// short at the NUL.
pub(super) fn de_command<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if s.contains('\0') {
        return Err(hinted(
            "the command contains a NUL byte, which no shell can run",
            "remove it",
        ));
    }
    Ok(Some(s))
}

/// A path inside the checkout: relative, no `..`, no NUL.
pub(super) fn de_relative_path<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    let p = std::path::Path::new(&s);
    let bad = if s.is_empty() {
        Some("is empty")
    } else if s.contains('\0') {
        Some("contains a NUL byte")
    } else if p.is_absolute() {
        Some("is absolute")
    } else if p
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Some("leaves the checkout with `..`")
    } else {
        None
    };
    match bad {
        Some(why) => Err(hinted(
            format!("the path {s:?} {why}"),
            "name a file inside the checkout, relative to its root (like \"reports/junit.xml\")",
        )),
        None => Ok(Some(s)),
    }
}

pub(super) fn de_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let t = de_duration(d)?;
    if t.is_some_and(|t| t > MAX_TIMEOUT) {
        return Err(hinted(
            "a timeout over 7 days is not a timeout",
            "write a real one, like \"30m\"",
        ));
    }
    Ok(t)
}

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    let text = match Raw::deserialize(d)? {
        Raw::Secs(n) => n.to_string(),
        Raw::Text(t) => t,
    };
    parse_duration(&text).map(Some).ok_or_else(|| {
        hinted(
            format!("invalid duration {text:?}"),
            "write a positive number with a unit, like \"90s\", \"5m\", \"1h\" or \"30d\"",
        )
    })
}

/// Lay `value` over `slot` when the file sets it.
pub(super) fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}
