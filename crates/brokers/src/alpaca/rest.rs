//! Alpaca's Trading REST API v2 (research/domain.md §1.2): the [`TradingClient`] that sends
//! orders, cancels them, looks them up by client order id, lists them (open, or all submitted
//! after a time, page after page) and reads the account and positions. It owns the mapping of
//! Alpaca's HTTP answers to [`BrokerError`] ([`map_error`]) and the exactly-once submit
//! ([`TradingClient::submit_once`]): a submit whose answer was lost is looked up by client order
//! id before it is ever sent again. The API secret is sent only as a header marked sensitive and
//! never appears in `Debug`, logs or errors.

use crate::alpaca::budget::{Lane, RateBudget};
use crate::alpaca::wire;
use crate::execution::{BrokerError, Rejection};
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, StatusCode};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderType, TimeInForce};
use tradeops_core::time::Timestamp;
use tradeops_core::Clock;

/// The Trading API's request limit (Alpaca: 200 a minute per account).
pub const REQUESTS_PER_MINUTE: u32 = 200;

/// The most orders Alpaca returns in one `GET /v2/orders` page.
pub const PAGE_LIMIT: usize = 500;

/// Alpaca's message for a `client_order_id` already used on the account: the only 422 that
/// means "received before". Its code, 40010001, is Alpaca's code for any malformed request
/// ("qty must be > 0", "only type=\"limit\" is allowed for extended hours orders"), so the code
/// alone says nothing about a duplicate.
const DUPLICATE_CLIENT_ORDER_ID: &str = "client_order_id must be unique";

/// The API key pair. `Debug` shows the key id and hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AlpacaCredentials {
    pub key_id: String,
    pub secret_key: String,
}

impl fmt::Debug for AlpacaCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlpacaCredentials").field("key_id", &self.key_id).field("secret_key", &"<redacted>").finish()
    }
}

impl AlpacaCredentials {
    /// An HTTP client sending the key pair on every request (the secret as a header marked
    /// sensitive), each request bounded by `timeout`: what both Alpaca clients are built on.
    pub fn http_client(&self, timeout: Duration) -> Result<reqwest::Client, ClientBuildError> {
        let mut headers = HeaderMap::new();
        let key = HeaderValue::from_str(&self.key_id)
            .map_err(|_| ClientBuildError("the key id is not a valid header value".into()))?;
        let mut secret = HeaderValue::from_str(&self.secret_key)
            .map_err(|_| ClientBuildError("the secret key is not a valid header value".into()))?;
        secret.set_sensitive(true);
        headers.insert("APCA-API-KEY-ID", key);
        headers.insert("APCA-API-SECRET-KEY", secret);
        reqwest::Client::builder()
            .default_headers(headers)
            .timeout(timeout)
            .build()
            .map_err(|e| ClientBuildError(e.to_string()))
    }
}

/// The client could not be built (a header value that is not valid HTTP, the HTTP client).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the Alpaca client: {0}")]
pub struct ClientBuildError(pub(crate) String);

/// A client of Alpaca's Trading API at one base URL (`https://paper-api.alpaca.markets`, or a
/// stand-in in tests), every request bounded by one timeout. HTTPS goes through rustls with the
/// bundled Mozilla roots (the workspace's `reqwest` features).
#[derive(Clone)]
pub struct TradingClient {
    http: reqwest::Client,
    /// Every request takes a permit: at most [`REQUESTS_PER_MINUTE`] a minute.
    budget: Arc<RateBudget>,
    base_url: String,
    key_id: String,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for TradingClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TradingClient").field("base_url", &self.base_url).field("key_id", &self.key_id).finish()
    }
}

/// One HTTP answer that was not a success, as [`map_error`] reads it.
#[derive(Clone, Debug)]
pub struct FailedReply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl TradingClient {
    /// A client of `base_url` (no trailing path) with `timeout` per request; `clock` is what a
    /// rate-limit reset time is measured from when the reply carries no `Date`.
    pub fn new(
        base_url: &str,
        credentials: &AlpacaCredentials,
        timeout: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<TradingClient, ClientBuildError> {
        let http = credentials.http_client(timeout)?;
        Ok(TradingClient {
            http,
            budget: Arc::new(RateBudget::per_minute(REQUESTS_PER_MINUTE)),
            base_url: base_url.trim_end_matches('/').to_string(),
            key_id: credentials.key_id.clone(),
            clock,
        })
    }

    /// The same client with another request budget (tests; a larger plan's limit).
    pub fn with_budget(self, budget: RateBudget) -> TradingClient {
        TradingClient { budget: Arc::new(budget), ..self }
    }

    /// `POST /v2/orders`: sends the order once. A lost answer comes back as
    /// [`BrokerError::Unavailable`]; use [`TradingClient::submit_once`] to resolve it.
    pub async fn submit(&self, order: &Order) -> Result<wire::Order, BrokerError> {
        let body = order_request(order);
        let request = self.request(Method::POST, "/v2/orders").json(&body);
        match self.send(request, Lane::Orders).await? {
            Ok(text) => decode(&text),
            Err(reply) => Err(match map_error(&reply, Some(&order.client_order_id), self.clock.now()) {
                // The shares asked for are the order's own.
                BrokerError::Rejected { reason, kind: Rejection::SharesAvailable { available, requested: None } } => {
                    let requested = Some(Decimal::from(order.quantity));
                    BrokerError::Rejected { reason, kind: Rejection::SharesAvailable { available, requested } }
                }
                other => other,
            }),
        }
    }

    /// Submits the order so that Alpaca holds it exactly once. When the answer to a submit is
    /// lost (timeout, connection error, 5xx without `Retry-After`), the order is looked up by its
    /// client order id: found, it is returned with no second POST; not found, it is sent once
    /// more, and a "client_order_id must be unique" answer to that means it landed after all, so
    /// it is looked up again. A duplicate on the first send (an order sent before a restart)
    /// is looked up too. When Alpaca said when to come back (`retry_after`), the error is
    /// returned as it is: the caller waits, then looks up before sending again.
    pub async fn submit_once(&self, order: &Order) -> Result<wire::Order, BrokerError> {
        let id = &order.client_order_id;
        match self.submit(order).await {
            Ok(placed) => Ok(placed),
            Err(BrokerError::AlreadyReceived(_)) => self.existing(id).await,
            Err(BrokerError::Unavailable { retry_after: None, .. }) => {
                if let Some(placed) = self.by_client_order_id(id).await? {
                    return Ok(placed);
                }
                match self.submit(order).await {
                    Err(BrokerError::AlreadyReceived(_)) => self.existing(id).await,
                    other => other,
                }
            }
            Err(other) => Err(other),
        }
    }

    /// The order Alpaca just said it already has.
    async fn existing(&self, id: &ClientOrderId) -> Result<wire::Order, BrokerError> {
        self.by_client_order_id(id).await?.ok_or_else(|| BrokerError::Unavailable {
            reason: format!("Alpaca reports order {id} as a duplicate but does not find it yet"),
            retry_after: None,
        })
    }

    /// `GET /v2/orders:by_client_order_id`: the order, or `None` when Alpaca does not know it.
    pub async fn by_client_order_id(&self, id: &ClientOrderId) -> Result<Option<wire::Order>, BrokerError> {
        let request =
            self.request(Method::GET, "/v2/orders:by_client_order_id").query(&[("client_order_id", id.as_str())]);
        match self.send(request, Lane::Orders).await? {
            Ok(text) => decode(&text).map(Some),
            Err(reply) if reply.status == StatusCode::NOT_FOUND => Ok(None),
            Err(reply) => Err(map_error(&reply, None, self.clock.now())),
        }
    }

    /// [`TradingClient::by_client_order_id`], with the legs of a group nested under it: Alpaca's
    /// lookup by client order id never nests, so an order of a group is read again by its id
    /// with `nested=true` ([`TradingClient::nested`]).
    pub async fn by_client_order_id_nested(&self, id: &ClientOrderId) -> Result<Option<wire::Order>, BrokerError> {
        let Some(order) = self.by_client_order_id(id).await? else { return Ok(None) };
        if !order.in_group() || order.legs.is_some() {
            return Ok(Some(order));
        }
        Ok(Some(self.nested(&order.id).await?.unwrap_or(order)))
    }

    /// `GET /v2/orders/{broker_order_id}?nested=true`: the order with its group's legs under it
    /// (a leg comes back alone); `None` when Alpaca does not know it.
    pub async fn nested(&self, broker_order_id: &str) -> Result<Option<wire::Order>, BrokerError> {
        if !is_alpaca_id(broker_order_id) {
            return Err(BrokerError::rejected(format!("not an Alpaca order id: {broker_order_id:?}")));
        }
        let request = self.request(Method::GET, &format!("/v2/orders/{broker_order_id}")).query(&[("nested", "true")]);
        match self.send(request, Lane::Orders).await? {
            Ok(text) => decode(&text).map(Some),
            Err(reply) if reply.status == StatusCode::NOT_FOUND => Ok(None),
            Err(reply) => Err(map_error(&reply, None, self.clock.now())),
        }
    }

    /// Every order of `symbol` submitted after `after`, groups nested (`status=all`,
    /// `nested=true`, one page of 500): where a leg reported alone finds the order it hangs under.
    pub async fn group_orders(&self, symbol: &str, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError> {
        let limit = PAGE_LIMIT.to_string();
        let since = after.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let request = self.request(Method::GET, "/v2/orders").query(&[
            ("status", "all"),
            ("nested", "true"),
            ("symbols", symbol),
            ("after", since.as_str()),
            ("direction", "asc"),
            ("limit", limit.as_str()),
        ]);
        self.get(request).await
    }

    /// `DELETE /v2/orders/{broker_order_id}` of our order `id`: Ok when Alpaca took the request
    /// (the cancel itself arrives on the stream); [`BrokerError::UnknownOrder`] when Alpaca does
    /// not know the order; [`BrokerError::Rejected`] with Alpaca's message when it can no longer
    /// be canceled (already filled).
    pub async fn cancel(&self, id: &ClientOrderId, broker_order_id: &str) -> Result<(), BrokerError> {
        if !is_alpaca_id(broker_order_id) {
            return Err(BrokerError::rejected(format!("not an Alpaca order id: {broker_order_id:?}")));
        }
        let request = self.request(Method::DELETE, &format!("/v2/orders/{broker_order_id}"));
        match self.send(request, Lane::Orders).await? {
            Ok(_) => Ok(()),
            Err(reply) => Err(map_error(&reply, Some(id), self.clock.now())),
        }
    }

    /// `GET /v2/orders?status=open&nested=true&limit=500`: every order Alpaca is still working,
    /// the legs of a group under its top-level order (an `oco` of ours is listed once, by our
    /// client order id, its stop leg under it).
    pub async fn open_orders(&self) -> Result<Vec<wire::Order>, BrokerError> {
        let limit = PAGE_LIMIT.to_string();
        let request = self.request(Method::GET, "/v2/orders").query(&[
            ("status", "open"),
            ("nested", "true"),
            ("limit", limit.as_str()),
        ]);
        self.get(request).await
    }

    /// Every order submitted after `after` (exclusive, Alpaca's `after` is submission time),
    /// oldest first, groups nested: `GET /v2/orders?status=all&nested=true&after=…&direction=asc&limit=500`, page after
    /// page, each page starting after the last order of the one before, until a page comes back
    /// short. An order submitted before `after` that changed since is not in it: the stream's gap
    /// fill reads those through [`TradingClient::open_orders`] and by client order id.
    pub async fn orders_updated_since(&self, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError> {
        let limit = PAGE_LIMIT.to_string();
        let mut orders: Vec<wire::Order> = Vec::new();
        let mut cursor = after;
        loop {
            let since = cursor.to_rfc3339_opts(SecondsFormat::AutoSi, true);
            let request = self.request(Method::GET, "/v2/orders").query(&[
                ("status", "all"),
                ("nested", "true"),
                ("after", since.as_str()),
                ("direction", "asc"),
                ("limit", limit.as_str()),
            ]);
            let page: Vec<wire::Order> = self.get(request).await?;
            let full = page.len() >= PAGE_LIMIT;
            let last = page.last().and_then(|o| o.submitted_at.or(o.created_at));
            orders.extend(page);
            match last {
                Some(next) if full && next > cursor => cursor = next,
                Some(_) if full => {
                    return Err(BrokerError::Unavailable {
                        reason: format!("Alpaca's order pages do not move past {since}"),
                        retry_after: None,
                    })
                }
                None if full => {
                    return Err(BrokerError::Unavailable {
                        reason: "a full page of Alpaca orders without a submission time".into(),
                        retry_after: None,
                    })
                }
                _ => return Ok(orders),
            }
        }
    }

    /// `GET /v2/account`.
    pub async fn account(&self) -> Result<wire::Account, BrokerError> {
        self.get(self.request(Method::GET, "/v2/account")).await
    }

    /// `GET /v2/positions`.
    pub async fn positions(&self) -> Result<Vec<wire::Position>, BrokerError> {
        self.get(self.request(Method::GET, "/v2/positions")).await
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{}", self.base_url, path))
    }

    /// A read that watches (listings, gap fills, the account): the reads' lane of the budget.
    async fn get<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, BrokerError> {
        match self.send(request, Lane::Reads).await? {
            Ok(text) => decode(&text),
            Err(reply) => Err(map_error(&reply, None, self.clock.now())),
        }
    }

    /// Sends a request in `lane` of the budget: the success body, or the failed reply to map; a
    /// transport failure (timeout, connection, a body cut off) is [`BrokerError::Unavailable`].
    /// Submits, cancels, lookups by client order id and a group's nested read (what a held exit
    /// waits on) go in the order lane; [`TradingClient::get`]'s reads in the reads' lane.
    async fn send(&self, request: RequestBuilder, lane: Lane) -> Result<Result<String, FailedReply>, BrokerError> {
        self.budget.acquire_in(lane).await;
        let response = request.send().await.map_err(transport_error)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.map_err(transport_error)?;
        if status.is_success() {
            Ok(Ok(body))
        } else {
            Ok(Err(FailedReply { status, headers, body }))
        }
    }
}

/// Our order as Alpaca's `POST /v2/orders` body.
///
/// A protective order (CONTRACT §11, [`Order::is_protective`]) with a take-profit is one `oco`
/// order at Alpaca: a GTC limit sell whose price is `take_profit.limit_price`, with the stop (a
/// stop-limit when the legs carry one) as `stop_loss`; our client order id names the top-level
/// (take-profit) order, Alpaca names the stop leg. Without a take-profit it is the plain GTC
/// `stop` / `stop_limit` sell it already is. An entry's legs are never sent with it: the engine
/// places them once the entry fills. An order marked extended-hours (a `limit` `day` order:
/// Alpaca refuses any other so marked) says so (CONTRACT §12).
pub fn order_request(order: &Order) -> wire::OrderRequest {
    let side = match order.side {
        Side::Buy => "buy",
        Side::Sell => "sell",
    };
    let time_in_force = match order.time_in_force {
        TimeInForce::Day => "day",
        TimeInForce::Gtc => "gtc",
        TimeInForce::Ioc => "ioc",
    };
    let oco = order.legs.filter(|_| order.is_protective()).and_then(|legs| legs.take_profit.map(|tp| (legs, tp)));
    if let Some((legs, take_profit)) = oco {
        return wire::OrderRequest {
            symbol: order.symbol.as_str().to_string(),
            qty: order.quantity.to_string(),
            side,
            order_type: "limit",
            time_in_force,
            limit_price: None,
            stop_price: None,
            client_order_id: order.client_order_id.as_str().to_string(),
            order_class: Some("oco"),
            take_profit: Some(wire::TakeProfit { limit_price: price_text(take_profit) }),
            stop_loss: Some(wire::StopLoss {
                stop_price: price_text(legs.stop_price),
                limit_price: legs.stop_limit_price.map(price_text),
            }),
            extended_hours: false,
        };
    }
    wire::OrderRequest {
        symbol: order.symbol.as_str().to_string(),
        qty: order.quantity.to_string(),
        side,
        order_type: match order.order_type {
            OrderType::Market => "market",
            OrderType::Limit => "limit",
            OrderType::Stop => "stop",
            OrderType::StopLimit => "stop_limit",
        },
        time_in_force,
        limit_price: order.limit_price.map(price_text),
        stop_price: order.stop_price.map(price_text),
        client_order_id: order.client_order_id.as_str().to_string(),
        order_class: None,
        take_profit: None,
        stop_loss: None,
        extended_hours: order.extended_hours,
    }
}

/// A price as Alpaca takes it: at most 2 decimals above $1, at most 4 at or below (half away
/// from zero), without trailing zeros beyond the cents.
pub fn price_text(price: Decimal) -> String {
    let places = if price > Decimal::ONE { 2 } else { 4 };
    let mut rounded = price.round_dp_with_strategy(places, RoundingStrategy::MidpointAwayFromZero).normalize();
    if rounded.scale() < 2 {
        rounded.rescale(2);
    }
    rounded.to_string()
}

/// Whether `id` can be an Alpaca order id (a UUID's characters): it goes into a URL path.
fn is_alpaca_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
}

fn decode<T: DeserializeOwned>(text: &str) -> Result<T, BrokerError> {
    serde_json::from_str(text)
        .map_err(|e| BrokerError::Unavailable { reason: format!("unreadable Alpaca reply: {e}"), retry_after: None })
}

fn transport_error(error: reqwest::Error) -> BrokerError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    BrokerError::Unavailable { reason: format!("Alpaca {what}: {error}"), retry_after: None }
}

/// Alpaca's answer to a request about order `order` (none for account reads) as a
/// [`BrokerError`]:
/// - 403 (buying power, quantity held or not available): `Rejected`, with Alpaca's message and
///   figures;
/// - 422 whose message is "client_order_id must be unique": `AlreadyReceived`; every other 422
///   (whatever its code: 40010001 is Alpaca's code for any malformed order) is `Rejected` with
///   Alpaca's message (an order Alpaca will not take, a cancel of a filled order);
/// - 404: `UnknownOrder` about an order, `Rejected` otherwise (lookups answer `None` before
///   reaching here);
/// - 429: `Unavailable`, back after `Retry-After` (seconds or a date) or at `X-RateLimit-Reset` (epoch
///   seconds, measured from the reply's `Date`, else from `now`);
/// - 5xx: `Unavailable` (with `Retry-After` when given); any other status: `Rejected`.
pub fn map_error(reply: &FailedReply, order: Option<&ClientOrderId>, now: Timestamp) -> BrokerError {
    let body: Option<wire::ErrorBody> = serde_json::from_str(&reply.body).ok();
    let message = match &body {
        Some(b) if !b.message.is_empty() => b.message.clone(),
        _ => reply.body.chars().take(200).collect(),
    };
    let status = reply.status;
    let described = format!("{} {message}", status.as_u16());
    match status.as_u16() {
        403 => {
            let mut reason = described;
            let mut kind = Rejection::Other;
            if let Some(b) = &body {
                let figures: Vec<String> = [
                    ("buying_power", b.buying_power),
                    ("cost_basis", b.cost_basis),
                    ("available", b.available),
                    ("existing_qty", b.existing_qty),
                    ("held_for_orders", b.held_for_orders),
                ]
                .iter()
                .filter_map(|(name, value)| value.map(|v| format!("{name} {v}")))
                .collect();
                if !figures.is_empty() {
                    reason = format!("{reason} ({})", figures.join(", "));
                }
                let text = b.message.to_ascii_lowercase();
                kind = if text.contains("buying power") || b.buying_power.is_some() {
                    Rejection::BuyingPower { available: b.buying_power, required: b.cost_basis }
                } else if text.contains("qty") || text.contains("quantity") || b.available.is_some() {
                    // Alpaca's message carries the figures when its body does not:
                    // "insufficient qty available for order (requested: 10, available: 0)".
                    let available = b.available.or_else(|| figure_in(&text, "available:"));
                    Rejection::SharesAvailable { available, requested: figure_in(&text, "requested:") }
                } else {
                    Rejection::Other
                };
            }
            BrokerError::Rejected { reason, kind }
        }
        422 => {
            let duplicate = message.to_ascii_lowercase().contains(DUPLICATE_CLIENT_ORDER_ID);
            match order {
                Some(id) if duplicate => BrokerError::AlreadyReceived(id.clone()),
                _ => {
                    let text = message.to_ascii_lowercase();
                    let kind = if text.contains("cancel") || text.contains("already in") {
                        Rejection::NotCancellable { filled: text.contains("filled") }
                    } else {
                        Rejection::Invalid { field: field_named(&text) }
                    };
                    BrokerError::Rejected { reason: described, kind }
                }
            }
        }
        404 => match order {
            Some(id) => BrokerError::UnknownOrder(id.clone()),
            None => BrokerError::rejected(described),
        },
        429 => BrokerError::Unavailable { reason: described, retry_after: retry_after(&reply.headers, now) },
        500..=599 => {
            BrokerError::Unavailable { reason: described, retry_after: retry_after_header(&reply.headers, now) }
        }
        _ => BrokerError::rejected(described),
    }
}

/// The number after `label` in an Alpaca message (`requested: 10` → 10).
fn figure_in(message: &str, label: &str) -> Option<Decimal> {
    let rest = &message[message.find(label)? + label.len()..];
    let number: String = rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    number.parse().ok()
}

/// The field of our order API an Alpaca 422 message is about (`qty must be > 0` → `quantity`),
/// when it names one. Longer names are tried first (`limit_price` before `type`).
fn field_named(message: &str) -> Option<&'static str> {
    const FIELDS: &[(&str, &str)] = &[
        ("client_order_id", "client_order_id"),
        ("time_in_force", "time_in_force"),
        ("limit_price", "limit_price"),
        ("stop_price", "stop_price"),
        ("notional", "quantity"),
        ("symbol", "symbol"),
        ("asset", "symbol"),
        ("side", "side"),
        ("type", "order_type"),
        ("qty", "quantity"),
    ];
    FIELDS.iter().find(|(word, _)| message.contains(word)).map(|(_, field)| *field)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

/// The reply's own time (`Date`), else `now`.
fn reply_time(headers: &HeaderMap, now: Timestamp) -> Timestamp {
    header(headers, "date")
        .and_then(|d| DateTime::parse_from_rfc2822(d).ok())
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or(now)
}

/// `Retry-After` as seconds or as an HTTP date (less the reply's time), never negative.
pub(crate) fn retry_after_header(headers: &HeaderMap, now: Timestamp) -> Option<Duration> {
    let value = header(headers, RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?.with_timezone(&Utc);
    Some(Duration::from_secs(at.signed_duration_since(reply_time(headers, now)).num_seconds().max(0) as u64))
}

/// When to come back after a 429: `Retry-After`, else `X-RateLimit-Reset` (epoch seconds)
/// less the reply's `Date` (or `now`), never negative.
pub(crate) fn retry_after(headers: &HeaderMap, now: Timestamp) -> Option<Duration> {
    if let Some(after) = retry_after_header(headers, now) {
        return Some(after);
    }
    let reset = header(headers, "x-ratelimit-reset")?.parse::<i64>().ok()?;
    let wait = reset.saturating_sub(reply_time(headers, now).timestamp()).max(0);
    Some(Duration::from_secs(wait as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::time::parse_ts;

    fn reply(status: u16, headers: &[(&'static str, &str)], body: &str) -> FailedReply {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        FailedReply { status: StatusCode::from_u16(status).unwrap(), headers: map, body: body.into() }
    }

    fn id() -> ClientOrderId {
        ClientOrderId::parse("to-ABCD-1").unwrap()
    }

    fn now() -> Timestamp {
        parse_ts("2026-11-25T14:40:00Z").unwrap()
    }

    #[test]
    fn forbidden_is_a_rejection_keeping_alpacas_figures() {
        let body =
            r#"{"code":40310000,"message":"insufficient buying power","buying_power":"1000.5","cost_basis":"5000"}"#;
        let error = map_error(&reply(403, &[], body), Some(&id()), now());
        assert_eq!(
            error,
            BrokerError::Rejected {
                reason: "403 insufficient buying power (buying_power 1000.5, cost_basis 5000)".into(),
                kind: Rejection::BuyingPower {
                    available: Some(Decimal::new(10005, 1)),
                    required: Some(Decimal::from(5000))
                },
            }
        );
        let shares = r#"{"code":40310000,"message":"insufficient qty available for order (requested: 10, available: 0)","available":"0"}"#;
        let BrokerError::Rejected { kind, .. } = map_error(&reply(403, &[], shares), Some(&id()), now()) else {
            panic!("a 403 is a rejection")
        };
        assert_eq!(
            kind,
            Rejection::SharesAvailable { available: Some(Decimal::ZERO), requested: Some(Decimal::from(10)) }
        );
        // Only the message: its figures are read from it.
        let bare =
            r#"{"code":40310000,"message":"insufficient qty available for order (requested: 10, available: 4)"}"#;
        let BrokerError::Rejected { kind, .. } = map_error(&reply(403, &[], bare), Some(&id()), now()) else {
            panic!("a 403 is a rejection")
        };
        assert_eq!(
            kind,
            Rejection::SharesAvailable { available: Some(Decimal::from(4)), requested: Some(Decimal::from(10)) }
        );
    }

    #[test]
    fn an_unprocessable_order_names_our_field() {
        let cases = [
            ("qty must be > 0", Some("quantity")),
            (
                "invalid limit_price 0.001. sub-penny increment does not fulfill minimum pricing criteria",
                Some("limit_price"),
            ),
            ("stop_price must be set for stop orders", Some("stop_price")),
            ("invalid time_in_force for this order type", Some("time_in_force")),
            ("asset \"ZZZZ\" not found", Some("symbol")),
            ("something else entirely", None),
        ];
        for (message, field) in cases {
            let body = format!(r#"{{"code":42210000,"message":"{message}"}}"#);
            let BrokerError::Rejected { kind, .. } = map_error(&reply(422, &[], &body), Some(&id()), now()) else {
                panic!("a 422 is a rejection")
            };
            assert_eq!(kind, Rejection::Invalid { field }, "{message}");
        }
    }

    #[test]
    fn only_the_duplicate_message_means_already_received() {
        let with_code = r#"{"code":40010001,"message":"client_order_id must be unique"}"#;
        let bare = r#"{"message":"client_order_id must be unique"}"#;
        for body in [with_code, bare] {
            assert_eq!(map_error(&reply(422, &[], body), Some(&id()), now()), BrokerError::AlreadyReceived(id()));
        }
        // 40010001 is Alpaca's code for any malformed order: each of these is that order's
        // rejection, with Alpaca's message, never a duplicate.
        let refusals = [
            "qty must be > 0",
            "only type=\"limit\" is allowed for extended hours orders",
            "extended hours order must be DAY limit orders",
            "bracket orders must be DAY or GTC",
            "invalid limit_price 10.001. sub-penny increment does not fulfill minimum pricing criteria",
        ];
        for message in refusals {
            let body = serde_json::json!({"code": 40010001, "message": message}).to_string();
            let got = map_error(&reply(422, &[], &body), Some(&id()), now());
            let BrokerError::Rejected { reason, .. } = got else { panic!("{message}: a rejection, got {got:?}") };
            assert_eq!(reason, format!("422 {message}"));
        }
    }

    #[test]
    fn another_unprocessable_is_a_rejection_with_alpacas_message() {
        let body = r#"{"code":42210000,"message":"order is not cancelable"}"#;
        assert_eq!(
            map_error(&reply(422, &[], body), Some(&id()), now()),
            BrokerError::Rejected {
                reason: "422 order is not cancelable".into(),
                kind: Rejection::NotCancellable { filled: false }
            }
        );
        let filled = r#"{"code":42210000,"message":"order is already in \"filled\" state"}"#;
        let BrokerError::Rejected { kind, .. } = map_error(&reply(422, &[], filled), Some(&id()), now()) else {
            panic!("a 422 is a rejection")
        };
        assert_eq!(kind, Rejection::NotCancellable { filled: true });
    }

    #[test]
    fn not_found_about_an_order_is_unknown_order() {
        let body = r#"{"code":40410000,"message":"order not found"}"#;
        assert_eq!(map_error(&reply(404, &[], body), Some(&id()), now()), BrokerError::UnknownOrder(id()));
        assert!(matches!(map_error(&reply(404, &[], body), None, now()), BrokerError::Rejected { .. }));
    }

    #[test]
    fn too_many_requests_waits_as_the_headers_say() {
        let retry = map_error(&reply(429, &[("retry-after", "7")], "rate limit exceeded"), None, now());
        assert!(matches!(retry, BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(7)));
        // Reset 30 s after the reply's Date (which is 10 s before the clock).
        let reset = now().timestamp() + 20;
        let headers = [("x-ratelimit-reset", &*reset.to_string()), ("date", "Wed, 25 Nov 2026 14:39:50 GMT")];
        let by_date = map_error(&reply(429, &headers, "{}"), None, now());
        assert!(
            matches!(by_date, BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(30))
        );
        let reset_text = reset.to_string();
        let by_clock = map_error(&reply(429, &[("x-ratelimit-reset", &reset_text)], "{}"), None, now());
        assert!(
            matches!(by_clock, BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(20))
        );
        let dated = [("retry-after", "Wed, 25 Nov 2026 14:41:00 GMT"), ("date", "Wed, 25 Nov 2026 14:40:45 GMT")];
        let by_http_date = map_error(&reply(429, &dated, "{}"), None, now());
        assert!(
            matches!(by_http_date, BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(15))
        );
        let past = (now().timestamp() - 5).to_string();
        let passed = map_error(&reply(429, &[("x-ratelimit-reset", &past)], "{}"), None, now());
        assert!(matches!(passed, BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::ZERO));
    }

    #[test]
    fn server_errors_are_unavailable_and_other_statuses_rejected() {
        assert!(matches!(
            map_error(&reply(500, &[], "oops"), Some(&id()), now()),
            BrokerError::Unavailable { retry_after: None, .. }
        ));
        assert!(matches!(
            map_error(&reply(503, &[("retry-after", "2")], ""), None, now()),
            BrokerError::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(2)
        ));
        assert!(matches!(
            map_error(&reply(401, &[], r#"{"message":"request is not authorized"}"#), None, now()),
            BrokerError::Rejected { reason, .. } if reason == "401 request is not authorized"
        ));
    }

    #[test]
    fn prices_round_to_cents_above_a_dollar_and_to_four_places_below() {
        let cases = [
            ("12.345", "12.35"),
            ("12.3", "12.30"),
            ("180", "180.00"),
            ("0.12345", "0.1235"),
            ("1", "1.00"),
            ("0.5", "0.50"),
            ("1.00005", "1.00"),
        ];
        for (price, text) in cases {
            assert_eq!(price_text(price.parse().unwrap()), text, "{price}");
        }
    }

    #[test]
    fn the_secret_is_never_shown() {
        let credentials = AlpacaCredentials { key_id: "PKTEST".into(), secret_key: "s3cr3t".into() };
        let shown = format!("{credentials:?}");
        assert!(shown.contains("PKTEST") && !shown.contains("s3cr3t"), "{shown}");
        let clock = Arc::new(tradeops_core::ManualClock::new(now()));
        let client = TradingClient::new("http://127.0.0.1:1/", &credentials, Duration::from_secs(1), clock).unwrap();
        assert!(!format!("{client:?}").contains("s3cr3t"));
    }
}
