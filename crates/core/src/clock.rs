//! The injected clock. Live code reads time through [`Clock`]; the one implementation that
//! reads the wall clock lives in the server crate (`SystemClock`). Tests and backtests drive a
//! [`ManualClock`].

use crate::time::Timestamp;
use std::sync::{Arc, Mutex};

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// A clock that only moves when told to.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self { now: Arc::new(Mutex::new(start)) }
    }

    pub fn set(&self, to: Timestamp) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }

    pub fn advance(&self, by: chrono::Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_ts;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(parse_ts("2026-11-21T14:30:00Z").unwrap());
        assert_eq!(clock.now(), parse_ts("2026-11-21T14:30:00Z").unwrap(), "it starts where it was set");
        clock.advance(chrono::Duration::seconds(61));
        assert_eq!(clock.now(), parse_ts("2026-11-21T14:31:01Z").unwrap());
    }
}
