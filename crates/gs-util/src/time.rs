//! UTC time stamps as RFC 3339 strings and compact names (the calendar is jiff's, which gix
//! already builds on), and short texts for ages and lengths of time in human output.

use jiff::Timestamp;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

pub fn now_millis() -> i64 {
    (now_nanos() / 1_000_000) as i64
}

/// `millis` as a jiff timestamp, clamped to the years jiff spans (-9999 to 9999).
fn timestamp(millis: i64) -> Timestamp {
    Timestamp::from_millisecond(millis).unwrap_or(if millis < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// `2026-11-25T22:10:02.123Z`
pub fn rfc3339(millis: i64) -> String {
    format!("{:.3}", timestamp(millis))
}

pub fn now_rfc3339() -> String {
    rfc3339(now_millis())
}

/// `20261125_221002`, for default repository names.
pub fn compact(millis: i64) -> String {
    timestamp(millis).strftime("%Y%m%d_%H%M%S").to_string()
}

/// An RFC 3339 time (what [`rfc3339`] writes, or any offset: `+02:00` is two hours ahead of UTC)
/// as milliseconds since the epoch; `None` for anything else, an impossible date among them.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    s.trim()
        .parse::<Timestamp>()
        .ok()
        .map(Timestamp::as_millisecond)
}

/// A length of time for people: "850ms", "1.5s", "2m03s".
pub fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// "3m ago"-style age for human tables.
pub fn age(then_millis: i64, now: i64) -> String {
    let secs = ((now - then_millis) / 1000).max(0);
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86_399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-25T22:10:02.5Z
        let t = 1_795_644_602_500;
        let s = rfc3339(t);
        assert_eq!(s, "2026-11-25T22:10:02.500Z");
        assert_eq!(parse_rfc3339(&s), Some(t));
        assert_eq!(compact(t), "20261125_221002");
        assert_eq!(parse_rfc3339("2000-02-29T12:00:00Z"), Some(951_825_600_000));
        assert_eq!(parse_rfc3339("2026-11-25T22:10:02.5+00:00"), Some(t));
    }

    #[test]
    fn an_offset_is_honoured_and_an_impossible_date_refused() {
        // Read as UTC, ignoring the offset, before.
        assert_eq!(
            parse_rfc3339("2026-11-26T00:10:02.500+02:00"),
            Some(1_795_644_602_500)
        );
        // Accepted (as 2026-12-02 and 23:00) before.
        assert_eq!(parse_rfc3339("2026-11-32T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-11-25T23:60:00Z"), None);
        assert_eq!(parse_rfc3339("2026-11-25 nonsense"), None);
    }
}
