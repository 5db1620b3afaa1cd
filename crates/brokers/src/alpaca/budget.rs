//! Alpaca's request budget ([`RateBudget`]): Alpaca answers more than its limit of requests a
//! minute (200 on the free plan, for the Trading API and for the Market Data API each) with
//! 429s, so each client paces itself below it and waits rather than fails.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The request budget: at most `limit` requests in any minute, on [`tokio::time`]. Taking a
/// permit waits until the oldest of the last `limit` requests is a minute old. A sliding window
/// rather than a token bucket refilled per minute: a full bucket spent at once and refilled
/// over the next minute lets nearly twice the limit through in one minute, which Alpaca would
/// answer with 429s. Tests pause tokio's clock and the waits pass instantly.
#[derive(Debug)]
pub struct RateBudget {
    limit: usize,
    window: Duration,
    /// When the last `limit` requests were sent, oldest first.
    sent: Mutex<VecDeque<Instant>>,
}

impl RateBudget {
    pub fn per_minute(requests: u32) -> RateBudget {
        let limit = requests.max(1) as usize;
        RateBudget { limit, window: Duration::from_secs(60), sent: Mutex::new(VecDeque::with_capacity(limit)) }
    }

    /// Takes one permit, waiting for it when `limit` requests went out in the last minute.
    pub async fn acquire(&self) {
        loop {
            let wait = {
                let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                while sent.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
                    sent.pop_front();
                }
                match sent.front() {
                    Some(oldest) if sent.len() >= self.limit => self.window - now.duration_since(*oldest),
                    _ => {
                        sent.push_back(now);
                        return;
                    }
                }
            };
            tokio::time::sleep(wait).await;
        }
    }
}
