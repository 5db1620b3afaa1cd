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
