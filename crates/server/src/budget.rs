//! Token-bucket request budgets on the injected clock: the per-token budget of authenticated
//! callers ([`RateLimiter`], CONTRACT §6) and the bucket arithmetic the per-address budget of
//! callers without a valid token ([`crate::http::client_limit`]) shares. Time is the caller's
//! `now_ms` from the service clock, never read here, so tests drive it.

use std::collections::HashMap;
use std::sync::Mutex;

/// One caller's budget: `tokens` requests left as of `at_ms`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bucket {
    tokens: f64,
    at_ms: i64,
}

impl Bucket {
    /// A full bucket of `burst` requests at `now_ms`.
    pub(crate) fn full(burst: f64, now_ms: i64) -> Bucket {
        Bucket { tokens: burst, at_ms: now_ms }
    }

    /// The requests the bucket would hold at `now_ms`, refilled at `per_second` (uncapped).
    pub(crate) fn refilled(&self, now_ms: i64, per_second: f64) -> f64 {
        // A clock set back refills nothing (and takes nothing back).
        self.tokens + (now_ms - self.at_ms).max(0) as f64 / 1000.0 * per_second
    }

    /// Takes one request at `now_ms`, or says how many whole seconds until one is available.
    pub(crate) fn take(&mut self, now_ms: i64, per_second: f64, burst: f64) -> Result<(), u64> {
        self.tokens = self.refilled(now_ms, per_second).min(burst);
        self.at_ms = self.at_ms.max(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - self.tokens) / per_second).ceil().max(1.0) as u64)
        }
    }
}

/// Token buckets per principal (a token's name). Only valid tokens spend here, so the table is
/// as large as the token table at most.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(per_second: u32, burst: u32) -> Self {
        Self { per_second: per_second.into(), burst: burst.into(), buckets: Mutex::default() }
    }

    /// Takes one request from `key`'s budget at `now_ms`, or says how many seconds until one
    /// is available.
    pub fn check(&self, key: &str, now_ms: i64) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = match buckets.get_mut(key) {
            Some(bucket) => bucket,
            None => buckets.entry(key.to_string()).or_insert(Bucket::full(self.burst, now_ms)),
        };
        bucket.take(now_ms, self.per_second, self.burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_burst_then_refusals_until_the_clock_refills() {
        let limiter = RateLimiter::new(1, 3);
        for _ in 0..3 {
            assert!(limiter.check("t", 0).is_ok());
        }
        assert_eq!(limiter.check("t", 0), Err(1));
        assert!(limiter.check("other", 0).is_ok(), "budgets are per token");
        assert_eq!(limiter.check("t", 999), Err(1), "not a whole request after 999 ms");
        assert_eq!(limiter.check("t", 1_000), Ok(()));
        assert_eq!(limiter.check("t", 1_000), Err(1));
    }

    #[test]
    fn a_clock_set_back_neither_refills_nor_takes_back() {
        let limiter = RateLimiter::new(1, 2);
        limiter.check("t", 10_000).unwrap();
        limiter.check("t", 10_000).unwrap();
        assert_eq!(limiter.check("t", 5_000), Err(1));
        assert_eq!(limiter.check("t", 10_999), Err(1), "refill counts from the latest time seen");
        assert_eq!(limiter.check("t", 11_000), Ok(()));
    }

    #[test]
    fn a_long_idle_refills_only_to_the_burst() {
        let limiter = RateLimiter::new(10, 2);
        limiter.check("t", 0).unwrap();
        for _ in 0..2 {
            limiter.check("t", 3_600_000).unwrap();
        }
        assert_eq!(limiter.check("t", 3_600_000), Err(1));
    }
}
