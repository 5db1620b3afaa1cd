//! Alpaca's JSON, as its Trading API v2 sends and takes it (research/domain.md §1.2–1.5):
//! orders, the account, positions, and the `trade_updates` stream's messages. Money and
//! quantities come as decimal strings; times as RFC 3339. Only the fields tradeops reads are
//! declared, every one optional where Alpaca may send `null` or leave it out; unknown fields
//! are ignored, so a field Alpaca adds never breaks a reply.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// `POST /v2/orders` body.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OrderRequest {
    pub symbol: String,
    /// Whole shares, as a string.
    pub qty: String,
    /// `buy` / `sell`.
    pub side: &'static str,
    /// `market`, `limit`, `stop`, `stop_limit`.
    #[serde(rename = "type")]
    pub order_type: &'static str,
    /// `day`, `gtc`, `ioc`, `fok`.
    pub time_in_force: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_price: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_price: Option<String>,
    /// Ours: the exactly-once key (at most 48 characters, unique per account for all time).
    /// On an `oco` order Alpaca gives it to the top-level (take-profit) order only; the stop
    /// leg gets an id of Alpaca's.
    pub client_order_id: String,
    /// `oco` for a protective order with a take-profit (CONTRACT §11); absent for a simple one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_class: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub take_profit: Option<TakeProfit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_loss: Option<StopLoss>,
    /// Worked from 04:00 to 20:00 New York (a `limit` `day` order only); sent when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub extended_hours: bool,
}

/// The take-profit leg of an `oco` order: a limit sell at `limit_price`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TakeProfit {
    pub limit_price: String,
}

/// The stop-loss leg of an `oco` order: a stop at `stop_price`, a stop-limit when
/// `limit_price` is given.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StopLoss {
    pub stop_price: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_price: Option<String>,
}

/// An order as Alpaca reports it (`GET /v2/orders…`, and inside every trade update).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Order {
    /// Alpaca's id (a UUID): the broker order id.
    pub id: String,
    pub client_order_id: String,
    pub symbol: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub submitted_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub filled_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub canceled_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub expired_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub failed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub qty: Option<Decimal>,
    #[serde(default)]
    pub filled_qty: Option<Decimal>,
    #[serde(default)]
    pub filled_avg_price: Option<Decimal>,
    /// `market`, `limit`, `stop`, `stop_limit`, `trailing_stop`.
    #[serde(rename = "type", default)]
    pub order_type: Option<String>,
    /// `buy` / `sell`.
    pub side: String,
    #[serde(default)]
    pub time_in_force: Option<String>,
    #[serde(default)]
    pub limit_price: Option<Decimal>,
    #[serde(default)]
    pub stop_price: Option<Decimal>,
    /// `new`, `accepted`, `pending_new`, `partially_filled`, `filled`, `pending_cancel`,
    /// `canceled`, `expired`, `rejected`, `replaced`, `done_for_day`, `held` (a leg waiting on
    /// its group), … (research §1.3).
    pub status: String,
    /// `simple`, `""` (simple, as Alpaca sends it), `oco`, `bracket`, `oto`, `mleg`.
    #[serde(default)]
    pub order_class: Option<String>,
    /// The group's other orders, under the top-level order, when asked with `nested=true`
    /// (for an `oco`, the stop leg under the take-profit); `null` otherwise and on every leg.
    #[serde(default)]
    pub legs: Option<Vec<Order>>,
    /// The order that replaced this one (`replaced`); Alpaca replaces the take-profit of an
    /// `oco` when its stop triggers.
    #[serde(default)]
    pub replaced_by: Option<String>,
    /// Shared by every order of one group, legs and replacements included (sent by Alpaca since
    /// late 2026; absent on simple orders and before).
    #[serde(default)]
    pub group_id: Option<String>,
    /// `entry`, `take_profit`, `stop_loss` (with `group_id`).
    #[serde(default)]
    pub group_role: Option<String>,
}

impl Order {
    /// Whether this order's own status is terminal (research §1.3): nothing more of it alone.
    pub fn is_final_alone(&self) -> bool {
        matches!(self.status.as_str(), "filled" | "canceled" | "expired" | "rejected" | "replaced")
    }

    /// Whether Alpaca will report nothing more of this order, nor of its legs when it came
    /// nested: an `oco` whose take-profit was replaced or cancelled still works while its stop
    /// leg does.
    pub fn is_final(&self) -> bool {
        self.is_final_alone() && self.legs.iter().flatten().all(Order::is_final_alone)
    }

    /// Whether it is one order of an advanced group (`oco`, `bracket`, `oto`): its legs are
    /// reported as orders of their own, with Alpaca's client order ids.
    pub fn in_group(&self) -> bool {
        matches!(self.order_class.as_deref(), Some("oco" | "bracket" | "oto"))
    }

    /// The order and its legs (when nested), top-level first.
    pub fn members(&self) -> impl Iterator<Item = &Order> {
        std::iter::once(self).chain(self.legs.iter().flatten())
    }
}

/// `GET /v2/account` (money as decimal strings).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Account {
    #[serde(default)]
    pub status: Option<String>,
    pub cash: Decimal,
    pub equity: Decimal,
    /// Equity at the previous trading day's 16:00 New York: day P&L = `equity - last_equity`.
    #[serde(default)]
    pub last_equity: Option<Decimal>,
    pub buying_power: Decimal,
    #[serde(default)]
    pub trading_blocked: bool,
    #[serde(default)]
    pub account_blocked: bool,
}

/// One open position (`GET /v2/positions`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Position {
    pub symbol: String,
    /// Signed by `side` (`long` / `short`); shares as a decimal string.
    pub qty: Decimal,
    pub avg_entry_price: Decimal,
    #[serde(default)]
    pub side: Option<String>,
    #[serde(default)]
    pub current_price: Option<Decimal>,
}

/// A message of the trading stream (`/stream`): the stream's name and its data. Alpaca sends
/// these as **binary** WebSocket frames holding JSON.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct StreamMessage {
    pub stream: String,
    #[serde(default)]
    pub data: serde_json::Value,
}

/// The data of a `trade_updates` message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TradeUpdate {
    /// `new`, `fill`, `partial_fill`, `canceled`, `expired`, `done_for_day`, `replaced`,
    /// `rejected`, `pending_new`, `pending_cancel`, `order_cancel_rejected`, … (research §1.4).
    pub event: String,
    /// The execution's id on `fill` and `partial_fill`: the key executions are de-duplicated by.
    #[serde(default)]
    pub execution_id: Option<String>,
    pub order: Order,
    #[serde(default)]
    pub timestamp: Option<DateTime<Utc>>,
    /// This execution's price and shares (`fill`, `partial_fill`).
    #[serde(default)]
    pub price: Option<Decimal>,
    #[serde(default)]
    pub qty: Option<Decimal>,
    /// The position after this event.
    #[serde(default)]
    pub position_qty: Option<Decimal>,
}

/// An error body: `{"code": 40010001, "message": "client_order_id must be unique"}`, plus the
/// figures of a buying-power or quantity refusal when Alpaca gives them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub buying_power: Option<Decimal>,
    #[serde(default)]
    pub cost_basis: Option<Decimal>,
    #[serde(default)]
    pub available: Option<Decimal>,
    #[serde(default)]
    pub existing_qty: Option<Decimal>,
    #[serde(default)]
    pub held_for_orders: Option<Decimal>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `fill` as Alpaca's paper stream sends it (research §1.4): numbers as strings, extra
    /// fields ignored.
    #[test]
    fn a_fill_update_reads_its_execution_and_order() {
        let text = r#"{"stream":"trade_updates","data":{"event":"fill","execution_id":"e-1",
            "timestamp":"2026-11-25T14:31:02.123456Z","price":"179.08","qty":"100","position_qty":"100",
            "order":{"id":"61e69015-8549-4bfd-b9c3-01e75843f47d","client_order_id":"to-ABCD-1",
            "symbol":"ABCD","created_at":"2026-11-25T14:31:00Z","qty":"100","filled_qty":"100",
            "filled_avg_price":"179.08","type":"market","side":"buy","time_in_force":"day",
            "limit_price":null,"stop_price":null,"status":"filled","extended_hours":false,"legs":null}}}"#;
        let message: StreamMessage = serde_json::from_str(text).unwrap();
        assert_eq!(message.stream, "trade_updates");
        let update: TradeUpdate = serde_json::from_value(message.data).unwrap();
        assert_eq!((update.event.as_str(), update.execution_id.as_deref()), ("fill", Some("e-1")));
        assert_eq!((update.price, update.qty), (Some(Decimal::new(17908, 2)), Some(Decimal::from(100))));
        assert_eq!(update.order.client_order_id, "to-ABCD-1");
        assert_eq!(update.order.limit_price, None);
        assert!(update.order.is_final());
    }

    #[test]
    fn an_order_request_names_its_fields_as_alpaca_does() {
        let request = OrderRequest {
            symbol: "ABCD".into(),
            qty: "10".into(),
            side: "buy",
            order_type: "limit",
            time_in_force: "day",
            limit_price: Some("12.34".into()),
            stop_price: None,
            client_order_id: "to-ABCD-1".into(),
            order_class: None,
            take_profit: None,
            stop_loss: None,
            extended_hours: false,
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"symbol": "ABCD", "qty": "10", "side": "buy", "type": "limit",
                "time_in_force": "day", "limit_price": "12.34", "client_order_id": "to-ABCD-1"})
        );
        let extended = OrderRequest { extended_hours: true, ..request };
        assert_eq!(serde_json::to_value(&extended).unwrap()["extended_hours"], true);
    }
}
