//! Prometheus metrics (`GET /metrics`): request counts and latency histograms per route, plus
//! the counters the `api` health component reports.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tradeops_core::Clock;

/// Labels are `&'static str`: methods are a fixed set and routes are interned once (route
/// templates are finite; unmatched paths share one label), so recording allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: &'static str,
}

fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    in_flight: Gauge,
    requests_total: AtomicU64,
    server_errors_total: AtomicU64,
    /// Service-clock milliseconds of the last server error (`i64::MIN`: none yet).
    last_server_error_ms: AtomicI64,
    /// The service clock, which decides how recent an error is and how long we have been up.
    clock: Arc<dyn Clock>,
    started_ms: i64,
    routes: RwLock<HashMap<String, &'static str>>,
}

impl Metrics {
    /// Metrics of a service started now on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let mut registry = Registry::with_prefix("tradeops");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 0.1 ms … ~6.5 s
            Histogram::new(exponential_buckets(0.0001, 2.0, 17))
        });
        let in_flight = Gauge::default();
        registry.register("http_requests", "HTTP requests by method, route and status", requests.clone());
        registry.register("http_request_duration_seconds", "HTTP request latency by method and route", latency.clone());
        registry.register("http_requests_in_flight", "HTTP requests being handled", in_flight.clone());
        Self {
            registry,
            requests,
            latency,
            in_flight,
            requests_total: AtomicU64::new(0),
            server_errors_total: AtomicU64::new(0),
            last_server_error_ms: AtomicI64::new(i64::MIN),
            started_ms: clock.now().timestamp_millis(),
            clock,
            routes: RwLock::default(),
        }
    }
}

impl Metrics {
    /// Marks a request started; [`Metrics::finish`] records it.
    pub fn start(&self) {
        self.in_flight.inc();
    }

    pub fn finish(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.in_flight.dec();
        self.requests_total.fetch_add(1, Ordering::Relaxed);
        if status >= 500 {
            self.server_errors_total.fetch_add(1, Ordering::Relaxed);
            // A 503 is the service saying a dependency (the database, the broker) is unavailable —
            // `/api/health` answers it whenever a component is DOWN, its own probe included —
            // not the API failing: only other server errors make the API `DEGRADED`.
            if status != 503 {
                self.last_server_error_ms.store(self.clock.now().timestamp_millis(), Ordering::Relaxed);
            }
        }
        let (method, route) = (method_label(method), self.route_label(route));
        self.requests.get_or_create(&RequestLabels { method, route, status }).inc();
        self.latency.get_or_create(&RouteLabels { method, route }).observe(elapsed.as_secs_f64());
    }

    /// The interned label of a route template (leaked once per template: a bounded set).
    fn route_label(&self, route: &str) -> &'static str {
        if let Some(label) = self.routes.read().unwrap_or_else(|e| e.into_inner()).get(route) {
            return label;
        }
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.entry(route.to_string()).or_insert_with(|| Box::leak(route.to_string().into_boxed_str()))
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    pub fn uptime(&self) -> Duration {
        Duration::from_millis((self.clock.now().timestamp_millis() - self.started_ms).max(0) as u64)
    }

    pub fn requests_total(&self) -> u64 {
        self.requests_total.load(Ordering::Relaxed)
    }

    pub fn server_errors_total(&self) -> u64 {
        self.server_errors_total.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    pub fn server_errors_within(&self, window: Duration) -> bool {
        let at = self.last_server_error_ms.load(Ordering::Relaxed);
        at != i64::MIN && self.clock.now().timestamp_millis().saturating_sub(at) < window.as_millis() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::ManualClock;

    #[test]
    fn a_server_error_degrades_the_api_for_a_minute_of_the_service_clock_but_a_503_does_not() {
        let clock = ManualClock::new(tradeops_core::time::parse_ts("2026-11-25T15:00:00Z").unwrap());
        let m = Metrics::new(Arc::new(clock.clone()));
        let minute = Duration::from_secs(60);
        m.start();
        m.finish("GET", "/api/health", 503, Duration::from_millis(1));
        assert!(!m.server_errors_within(minute), "a dependency down is not the API failing");
        assert_eq!(m.server_errors_total(), 1);
        m.start();
        m.finish("GET", "/api/orders", 500, Duration::from_millis(1));
        assert!(m.server_errors_within(minute));
        clock.advance(chrono::Duration::seconds(59));
        assert!(m.server_errors_within(minute));
        clock.advance(chrono::Duration::seconds(1));
        assert!(!m.server_errors_within(minute), "a minute later on the service clock");
        assert_eq!(m.uptime(), Duration::from_secs(60));
    }
}
