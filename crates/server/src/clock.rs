//! The one place that reads the wall clock.

use tradeops_core::{Clock, Timestamp};

/// Real time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> Timestamp {
        chrono::Utc::now()
    }
}

/// Market time running `speed` times faster than real time from an origin (DEMO mode).
#[derive(Clone, Copy, Debug)]
pub struct ScaledClock {
    origin_wall: Timestamp,
    origin_market: Timestamp,
    speed: f64,
}

impl ScaledClock {
    /// Market time `origin_market` now, advancing `speed` market seconds per real second.
    pub fn starting_at(origin_market: Timestamp, speed: f64) -> ScaledClock {
        ScaledClock { origin_wall: SystemClock.now(), origin_market, speed }
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> Timestamp {
        let real = (SystemClock.now() - self.origin_wall).num_microseconds().unwrap_or(i64::MAX);
        self.origin_market + chrono::Duration::microseconds((real as f64 * self.speed) as i64)
    }
}
