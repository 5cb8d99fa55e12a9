//! UTC time stamps as RFC 3339 strings and compact names, without a calendar crate.

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

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn parts(millis: i64) -> (i64, u32, u32, i64, i64, i64, i64) {
    let secs = millis.div_euclid(1000);
    let ms = millis.rem_euclid(1000);
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    (y, mo, d, sod / 3600, (sod % 3600) / 60, sod % 60, ms)
}

/// `2026-11-25T22:10:02.123Z`
pub fn rfc3339(millis: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = parts(millis);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

pub fn now_rfc3339() -> String {
    rfc3339(now_millis())
}

/// `20261125_221002`, for default repository names.
pub fn compact(millis: i64) -> String {
    let (y, mo, d, h, mi, s, _) = parts(millis);
    format!("{y:04}{mo:02}{d:02}_{h:02}{mi:02}{s:02}")
}

/// Parse what [`rfc3339`] writes (and plain `…Z` / `+00:00` forms) back to milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut ms = 0;
    if b.get(19) == Some(&b'.') {
        let frac: String = s[20..].chars().take_while(char::is_ascii_digit).collect();
        let padded = format!("{:0<3}", &frac[..frac.len().min(3)]);
        ms = padded.parse().ok()?;
    }
    // days from civil
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) * 1000) + ms)
}

/// "3 minutes ago"-style age for human tables.
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
    }
}
