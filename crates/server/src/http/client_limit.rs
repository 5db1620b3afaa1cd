//! The request budget of callers without a valid token, per client address: a token
//! bucket per IPv4 address or IPv6 /64, spent before anything about the request is written, so
//! a flood of unauthenticated or bad-token requests is answered `429 RATE_LIMITED` from memory.
//! Valid tokens never spend from it: an operator behind the same address as a flood keeps their
//! own per-token budget. Time comes from the injected clock.
//!
//! Memory is bounded: a bucket idle long enough to have refilled is indistinguishable from a new
//! one and is swept once the table passes [`SWEEP_ABOVE`] buckets; past [`MAX_BUCKETS`] (a flood
//! from more addresses than that at once) new addresses share one overflow bucket.

use crate::budget::Bucket;
use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;

/// Buckets kept before idle ones are swept (at most once a second).
pub const SWEEP_ABOVE: usize = 4_096;
/// Buckets kept at most; further addresses share the overflow bucket.
pub const MAX_BUCKETS: usize = 65_536;

/// Where a request came from, as far as budgets and the audit log are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientAddr {
    /// An IPv4 address, or an IPv6 address masked to its /64 (one host usually owns a whole
    /// /64, so counting single IPv6 addresses would give it billions of budgets).
    Ip(IpAddr),
    /// No address known (a connection without peer information) or the table is full.
    Unknown,
}

impl ClientAddr {
    pub fn from_ip(ip: IpAddr) -> ClientAddr {
        match ip {
            IpAddr::V4(_) => ClientAddr::Ip(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientAddr::Ip(IpAddr::V4(v4)),
                None => {
                    let masked = u128::from(v6) & (u128::MAX << 64);
                    ClientAddr::Ip(IpAddr::V6(Ipv6Addr::from(masked)))
                }
            },
        }
    }

    /// The TCP peer's address, or with `trust_forwarded_for` the last `X-Forwarded-For` entry
    /// (the address the reverse proxy in front of us saw; entries before it are the client's
    /// own claims and may be forged).
    pub fn of_request(parts: &Parts, trust_forwarded_for: bool) -> ClientAddr {
        if trust_forwarded_for {
            let forwarded = parts
                .headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .next_back()
                .and_then(|last| last.trim().parse::<IpAddr>().ok());
            if let Some(ip) = forwarded {
                return ClientAddr::from_ip(ip);
            }
        }
        match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => ClientAddr::from_ip(peer.ip()),
            None => ClientAddr::Unknown,
        }
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientAddr::Ip(IpAddr::V6(v6)) => write!(f, "{v6}/64"),
            ClientAddr::Ip(ip) => write!(f, "{ip}"),
            ClientAddr::Unknown => f.write_str("unknown"),
        }
    }
}

#[derive(Default)]
struct Buckets {
    by_addr: HashMap<ClientAddr, Bucket>,
    last_sweep_ms: i64,
}

/// Token buckets per client address.
pub struct ClientLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<Buckets>,
}

impl ClientLimiter {
    pub fn new(per_second: u32, burst: u32) -> ClientLimiter {
        ClientLimiter { per_second: per_second.into(), burst: burst.into(), buckets: Mutex::default() }
    }

    /// Takes one request from `addr`'s budget at `now_ms`, or says how many seconds until one
    /// is available.
    pub fn check(&self, addr: ClientAddr, now_ms: i64) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let addr = self.admit(&mut buckets, addr, now_ms);
        let bucket = buckets.by_addr.entry(addr).or_insert(Bucket::full(self.burst, now_ms));
        bucket.take(now_ms, self.per_second, self.burst)
    }

    /// The key `addr` spends from: its own bucket, or the overflow bucket when the table is
    /// full even after sweeping idle buckets.
    fn admit(&self, buckets: &mut Buckets, addr: ClientAddr, now_ms: i64) -> ClientAddr {
        if buckets.by_addr.contains_key(&addr) {
            return addr;
        }
        if buckets.by_addr.len() >= SWEEP_ABOVE && now_ms - buckets.last_sweep_ms >= 1_000 {
            buckets.last_sweep_ms = now_ms;
            let (per_second, burst) = (self.per_second, self.burst);
            buckets.by_addr.retain(|_, b| b.refilled(now_ms, per_second) < burst);
        }
        if buckets.by_addr.len() >= MAX_BUCKETS {
            ClientAddr::Unknown
        } else {
            addr
        }
    }

    /// Buckets held (for tests and metrics).
    pub fn len(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).by_addr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(n: u32) -> ClientAddr {
        ClientAddr::from_ip(IpAddr::V4(Ipv4Addr::from(n)))
    }

    #[test]
    fn the_burst_then_refusals_until_the_clock_refills() {
        let limiter = ClientLimiter::new(2, 3);
        for _ in 0..3 {
            assert_eq!(limiter.check(v4(1), 0), Ok(()));
        }
        assert_eq!(limiter.check(v4(1), 0), Err(1));
        assert_eq!(limiter.check(v4(2), 0), Ok(()), "budgets are per address");
        assert_eq!(limiter.check(v4(1), 499), Err(1), "half a token after 499 ms");
        assert_eq!(limiter.check(v4(1), 500), Ok(()));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert_eq!(ClientAddr::from_ip(a), ClientAddr::from_ip(b));
        assert_eq!(ClientAddr::from_ip(a).to_string(), "2001:db8:1:2::/64");
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(ClientAddr::from_ip(mapped).to_string(), "10.0.0.7");
    }

    #[test]
    fn idle_buckets_are_swept_and_the_table_never_passes_its_bound() {
        let limiter = ClientLimiter::new(1, 2);
        for n in 0..SWEEP_ABOVE as u32 {
            limiter.check(v4(n), 0).unwrap();
        }
        // Two seconds later every bucket has refilled: the next new address sweeps them all.
        limiter.check(v4(u32::MAX), 2_000).unwrap();
        assert_eq!(limiter.len(), 1);
        // A flood from more addresses than the table holds, all within one instant.
        for n in 0..(MAX_BUCKETS as u32 + 1_000) {
            let _ = limiter.check(v4(n), 10_000);
        }
        assert!(limiter.len() <= MAX_BUCKETS + 1, "{} buckets", limiter.len());
        assert!(limiter.check(v4(u32::MAX - 1), 10_000).is_err(), "newcomers share the spent overflow bucket");
    }

    #[test]
    fn forwarded_for_is_trusted_only_when_configured() {
        let req = axum::http::Request::builder()
            .header("x-forwarded-for", "203.0.113.9, 198.51.100.4")
            .extension(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 5000))))
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        assert_eq!(ClientAddr::of_request(&parts, false).to_string(), "127.0.0.1");
        assert_eq!(ClientAddr::of_request(&parts, true).to_string(), "198.51.100.4");
    }
}
