//! One back-off policy for everything that is tried again: a first wait that doubles with each
//! attempt up to a ceiling, optionally spread by noise so that two machines that collided do not
//! collide again in step. Each caller names its first wait and ceiling; the formula is here once.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failed attempt.
    pub first: Duration,
    /// No wait is longer than this.
    pub most: Duration,
    /// Add up to half the wait again, at random.
    pub jitter: bool,
}

impl Backoff {
    /// `first`, doubling, at most `most`; no noise.
    pub const fn doubling(first: Duration, most: Duration) -> Backoff {
        Backoff {
            first,
            most,
            jitter: false,
        }
    }

    /// The same, spread by up to half the wait again.
    pub const fn with_jitter(self) -> Backoff {
        Backoff {
            jitter: true,
            ..self
        }
    }

    /// The wait after `failed` attempts have failed (1: the first wait).
    pub fn delay(&self, failed: u32) -> Duration {
        let doublings = failed.saturating_sub(1).min(31);
        let base = self
            .first
            .checked_mul(1u32 << doublings)
            .map_or(self.most, |d| d.min(self.most));
        if !self.jitter {
            return base;
        }
        let half = base.as_millis() as u64 / 2 + 1;
        let noise = u64::from_str_radix(&super::random_hex(4), 16).unwrap_or(0) % half;
        base + Duration::from_millis(noise)
    }

    /// The wait after the one just waited: doubled, at most the ceiling (no noise).
    pub fn next(&self, waited: Duration) -> Duration {
        waited.saturating_mul(2).clamp(self.first, self.most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_doubles_up_to_the_ceiling() {
        let b = Backoff::doubling(Duration::from_secs(5), Duration::from_secs(60));
        let waits: Vec<u64> = (1..=6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.delay(0).as_secs(), 5);
        assert_eq!(b.delay(u32::MAX).as_secs(), 60);
        assert_eq!(b.next(Duration::from_secs(40)).as_secs(), 60);
    }

    #[test]
    fn noise_adds_at_most_half() {
        let b = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(1)).with_jitter();
        for _ in 0..50 {
            let d = b.delay(2).as_millis();
            assert!((200..=300).contains(&d), "{d}");
        }
    }
}
