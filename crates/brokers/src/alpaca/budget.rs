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
///
/// A fifth of the budget is kept for the order lane ([`Lane::Orders`]: submits, cancels and
/// the reads an order's fate waits on): reads that only watch (listings, gap fills, the
/// account) stop at the rest, so a close that must first cancel a protective order (CONTRACT
/// §11) never waits behind a minute of reconciliation reads.
#[derive(Debug)]
pub struct RateBudget {
    limit: usize,
    /// Permits only the order lane may take.
    reserve: usize,
    window: Duration,
    /// When the last `limit` requests were sent, oldest first.
    sent: Mutex<VecDeque<Instant>>,
}

/// Which share of the budget a request may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Submits, cancels and the reads an order's outcome waits on: the whole budget.
    Orders,
    /// Reads that watch: all but the order lane's reserve.
    Reads,
}

impl RateBudget {
    pub fn per_minute(requests: u32) -> RateBudget {
        let limit = requests.max(1) as usize;
        let reserve = limit / 5;
        RateBudget { limit, reserve, window: Duration::from_secs(60), sent: Mutex::new(VecDeque::with_capacity(limit)) }
    }

    /// How many requests of `lane` may have gone out in the window before it waits.
    fn cap(&self, lane: Lane) -> usize {
        match lane {
            Lane::Orders => self.limit,
            Lane::Reads => self.limit - self.reserve,
        }
    }

    /// Takes one permit when one is free now; `false` (and nothing taken) when `limit`
    /// requests went out in the last minute.
    pub fn try_acquire(&self) -> bool {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        while sent.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
            sent.pop_front();
        }
        if sent.len() >= self.limit {
            return false;
        }
        sent.push_back(now);
        true
    }

    /// Takes one permit of the order lane, waiting for it when `limit` requests went out in
    /// the last minute.
    pub async fn acquire(&self) {
        self.acquire_in(Lane::Orders).await
    }

    /// Takes one permit of `lane`, waiting while its share of the last minute is spent.
    pub async fn acquire_in(&self, lane: Lane) {
        let cap = self.cap(lane);
        loop {
            let wait = {
                let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                while sent.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
                    sent.pop_front();
                }
                match sent.len().checked_sub(cap).and_then(|over| sent.get(over)) {
                    // The request that must leave the window before one more of this lane fits.
                    Some(oldest) => self.window - now.duration_since(*oldest),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// With 10 a minute, reads stop at 8: the order lane still takes its 2 at once (a close's
    /// cancel and sell), and only then waits for the window like anything else.
    #[tokio::test(start_paused = true)]
    async fn reads_leave_the_order_lane_its_reserve() {
        let budget = RateBudget::per_minute(10);
        let started = Instant::now();
        for _ in 0..8 {
            budget.acquire_in(Lane::Reads).await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO, "eight reads within the reads' share");
        let read = tokio::spawn(async move {
            budget.acquire_in(Lane::Reads).await;
            (budget, Instant::now())
        });
        tokio::task::yield_now().await;
        assert!(!read.is_finished(), "a ninth read waits for the window");
        let (budget, read_at) = read.await.unwrap();
        assert_eq!(read_at - started, Duration::from_secs(60), "the ninth read went once the first left the window");
        let orders_at = Instant::now();
        budget.acquire_in(Lane::Orders).await;
        budget.acquire_in(Lane::Orders).await;
        assert_eq!(orders_at.elapsed(), Duration::ZERO, "the order lane's two are free at once");
    }
}
