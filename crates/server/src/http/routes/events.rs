//! `GET /api/events`: the live event stream (Server-Sent Events), and the wire form of every
//! typed event: each is serialised here, once, into the text all its subscribers are sent.

use crate::events::{AccountUpdate, Event as Published, RiskChange, StoredEvent, WatchlistChange, KINDS};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tradeops_core::backtest::dollars;
use tradeops_core::engine::StrategyStatus;
use tradeops_core::risk::TradingState;
use tradeops_core::time::format_ts;
use tradeops_core::TradingMode;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/events", get(events))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EventQuery {
    /// Comma-separated kinds to receive (default: all): order.updated, execution.created,
    /// position.updated, radar.updated, watchlist.updated, risk.state_changed, risk.violation,
    /// settings.updated, download.updated, backtest.updated, health.changed, account.updated,
    /// bars.closed.
    pub kinds: Option<String>,
}

fn message(e: &StoredEvent) -> Event {
    Event::default().id(e.id.to_string()).event(e.kind()).data(wire(e).as_ref())
}

/// The SSE `data` of a stored event, serialised on first use and then shared.
pub fn wire(e: &StoredEvent) -> &Arc<str> {
    e.wire.get_or_init(|| {
        let envelope = Envelope {
            kind: e.kind(),
            timestamp: &e.timestamp,
            mode: e.mode,
            data: data(&e.event),
            wall_time: &e.wall_time,
        };
        serde_json::to_string(&envelope).unwrap_or_default().into()
    })
}

#[derive(Serialize)]
struct Envelope<'a> {
    kind: &'static str,
    /// Market time.
    timestamp: &'a str,
    mode: TradingMode,
    data: Value,
    /// Wall time.
    wall_time: &'a str,
}

/// An event's `data` (CONTRACT §7).
fn data(event: &Published) -> Value {
    match event {
        Published::OrderUpdated { order, mode, broker } => {
            serde_json::to_value(crate::http::routes::orders::order_detail(order, mode.as_str(), broker))
                .unwrap_or_default()
        }
        Published::ExecutionCreated { client_order_id, symbol, side, execution: e } => json!({
            "client_order_id": client_order_id, "symbol": symbol, "side": side,
            "execution_id": e.execution_id, "timestamp": format_ts(&e.timestamp),
            "quantity": e.quantity, "price": dollars(e.price), "fee": dollars(e.fee),
        }),
        Published::PositionUpdated { position, status, levels, halted, protection } => json!({
            "symbol": position.symbol, "quantity": position.quantity,
            "average_entry_price": position.average_entry_price().map(dollars),
            "realized_pnl": dollars(position.realized_pnl), "strategy_status": status,
            "stop_loss": levels.map(|l| dollars(l.stop_loss)),
            "target": levels.and_then(|l| l.target).map(dollars),
            "halted": halted,
            "protection": protection.kind.as_str(),
            "protective_order_id": protection.order_id,
        }),
        Published::RadarUpdated(radar) => json!({
            "captured_at": format_ts(&radar.captured_at),
            "rows": radar.rows,
            "top": radar.top,
        }),
        Published::WatchlistUpdated(WatchlistChange::Status { symbol, status, reason }) => {
            json!({"symbol": symbol, "strategy_status": status, "reason": reason})
        }
        Published::WatchlistUpdated(WatchlistChange::Started { symbol, source, at }) => {
            json!({"symbol": symbol, "strategy_status": StrategyStatus::Active, "source": source, "time_added": format_ts(at)})
        }
        Published::RiskStateChanged(change) => match change {
            RiskChange::TradingState { state, halt } => json!({"trading_state": state, "halt": halt}),
            RiskChange::Liquidation { open_positions, open_orders } => json!({
                "trading_state": TradingState::Halted,
                "liquidation": {"open_positions": open_positions, "open_orders": open_orders,
                    "flat": *open_positions == 0 && *open_orders == 0},
            }),
            RiskChange::Blocked { symbol, block } => {
                json!({"blocked": crate::domain::watchlist::engine_block_result(symbol, block)})
            }
            RiskChange::Unblocked { symbol, reason, actor } => {
                json!({"unblocked": symbol, "reason": reason, "by": actor})
            }
            RiskChange::StoppedByHalt { symbols } => json!({"stopped_by_halt": symbols}),
        },
        Published::RiskViolation(v) => json!({
            "rule": v.rule, "symbol": v.symbol, "client_order_id": v.client_order_id, "detail": v.detail,
            "timestamp": format_ts(&v.at),
        }),
        Published::SettingsUpdated(change) => {
            json!({"version": change.version, "updated": change.updated, "actor": change.actor})
        }
        Published::DownloadUpdated(job) => crate::http::routes::data::job_json(job),
        Published::BacktestUpdated(run) => crate::http::routes::backtests::run_json(run, false),
        Published::HealthChanged(change) => {
            json!({"component": change.component, "from": change.from, "to": change.to, "detail": change.detail})
        }
        Published::AccountUpdated(update) => account(update),
        Published::BarsClosed(closed) => {
            let bar = |(symbol, b): &(tradeops_core::Symbol, tradeops_core::market::Bar)| {
                json!({"symbol": symbol, "timestamp": format_ts(&b.start), "open": b.open.to_f64(),
                    "high": b.high.to_f64(), "low": b.low.to_f64(), "close": b.close.to_f64(), "volume": b.volume})
            };
            json!({"bars": closed.bars.iter().map(bar).collect::<Vec<_>>()})
        }
        Published::SymbolStatus { symbol, halt } => json!({
            "symbol": symbol,
            "trading_status": crate::http::routes::market::trading_status(halt.as_ref()),
            "halt": halt.as_ref().map(crate::http::routes::market::halt_view),
        }),
        Published::MarketSession(view) => {
            serde_json::to_value(crate::http::routes::market::session_row(view)).unwrap_or_default()
        }
        // Its wire text came with it: never serialised here.
        Published::Earlier(_) => Value::Null,
    }
}

/// `account.updated`: the account summary, with the trading state, market time and date.
fn account(update: &AccountUpdate) -> Value {
    let AccountUpdate { view, market_time, trading_date, session } = update;
    let mut data = serde_json::to_value(crate::domain::account::AccountSummary::of(view, *session)).unwrap_or_default();
    if let Value::Object(fields) = &mut data {
        fields.insert("trading_state".into(), json!(view.trading_state));
        fields.insert("market_time".into(), json!(format_ts(market_time)));
        fields.insert("trading_date".into(), json!(trading_date.map(|d| d.to_string())));
    }
    data
}

/// Server-Sent Events: `id` (monotonic), `event` (the kind), `data` = `{kind, timestamp, mode,
/// data, wall_time}` (`timestamp` market time — the simulated market's in DEMO —, `wall_time`
/// the wall clock's). `Last-Event-ID` resumes from a buffer of the last 10,000 events. A comment line is
/// sent every 15 s as a heartbeat. A client too slow to keep up is disconnected (it can resume).
#[utoipa::path(get, path = "/api/events", tag = "events", security(("bearer" = [])), params(EventQuery),
    responses((status = 200, description = "text/event-stream"),
              (status = 400, description = "VALIDATION_ERROR (kinds, Last-Event-ID)", body = crate::http::envelope::ErrorBody),
              (status = 401, description = "UNAUTHORIZED", body = crate::http::envelope::ErrorBody)))]
pub async fn events(
    State(state): State<AppState>,
    _caller: Caller,
    headers: HeaderMap,
    Query(q): Query<EventQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let kinds: Option<BTreeSet<String>> = match &q.kinds {
        None => None,
        Some(text) => {
            let wanted: BTreeSet<String> =
                text.split(',').map(|k| k.trim().to_string()).filter(|k| !k.is_empty()).collect();
            if let Some(bad) = wanted.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(ApiError::validation(
                    "kinds",
                    format!("unknown event kind {bad:?}; known: {}", KINDS.join(", ")),
                ));
            }
            Some(wanted)
        }
    };
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|t| t.trim().parse::<u64>().ok())) {
        None => None,
        Some(Some(id)) => Some(id),
        Some(None) => return Err(ApiError::validation("Last-Event-ID", "must be an event id from this stream")),
    };
    let (replay, live) = state.events.subscribe(after);
    let wanted = move |e: &Arc<StoredEvent>| kinds.as_ref().is_none_or(|k| k.contains(e.kind()));
    let live = futures::stream::unfold(live, |mut rx| async move {
        match rx.recv().await {
            Ok(e) => Some((e, rx)),
            // Too slow (or shutting down): end the stream; the client resumes with Last-Event-ID.
            Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => None,
        }
    });
    let stream = futures::stream::iter(replay)
        .chain(live)
        .filter(move |e| futures::future::ready(wanted(e)))
        .map(|e| Ok::<_, Infallible>(message(&e)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("heartbeat")))
}

#[cfg(test)]
mod tests {
    //! The wire form of one event of each kind, pinned: the typed events must serialise exactly
    //! as the JSON the publishers built before (keys, their order, values).

    use super::wire;
    use crate::engine_view::EngineView;
    use crate::events::*;
    use rust_decimal::Decimal;
    use std::sync::{Arc, OnceLock};
    use tradeops_core::engine::{Block, Halt, StrategyStatus};
    use tradeops_core::market::{Price, Side};
    use tradeops_core::orders::{ClientOrderId, Execution, Order, OrderStatus, OrderType, TimeInForce};
    use tradeops_core::positions::Position;
    use tradeops_core::radar::RadarRow;
    use tradeops_core::risk::{RiskRule, TradingState};
    use tradeops_core::strategy::Levels;
    use tradeops_core::time::from_epoch_ms;
    use tradeops_core::{Symbol, Timestamp, TradingMode};
    use tradeops_store::{BacktestRecord, JobRecord};

    const T0: i64 = 1_764_080_000_000;

    fn at(seconds: i64) -> Timestamp {
        from_epoch_ms(T0 + seconds * 1000)
    }

    fn symbol() -> Symbol {
        Symbol::parse("ABCD").unwrap()
    }

    fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    fn id() -> ClientOrderId {
        ClientOrderId::parse("ord-1").unwrap()
    }

    fn execution() -> Execution {
        Execution { execution_id: "ex-1".into(), timestamp: at(2), quantity: 40, price: d("12.5"), fee: d("0.2") }
    }

    fn stored(event: Event) -> StoredEvent {
        StoredEvent {
            id: 7,
            timestamp: "2026-11-25T14:30:00Z".into(),
            mode: TradingMode::Paper,
            event,
            wall_time: "2026-11-25T13:00:00Z".into(),
            wire: OnceLock::new(),
        }
    }

    /// One event of every kind, in the order of [`KINDS`].
    fn one_of_each() -> Vec<Event> {
        let mut order = Order::new(
            id(),
            symbol(),
            Side::Buy,
            OrderType::Limit,
            TimeInForce::Day,
            100,
            Some(d("12.5")),
            None,
            at(0),
        );
        order.status = OrderStatus::PartiallyFilled;
        order.filled_quantity = 40;
        order.filled_notional = d("500");
        order.fees = d("0.2");
        order.executions.push(execution());
        order.reason = Some("breakout".into());
        order.strategy_id = Some("momentum_breakout".into());
        order.updated_at = at(2);
        let mut position = Position::new(symbol());
        position.quantity = 40;
        position.cost_basis = d("500");
        position.realized_pnl = d("12.34");
        let row = RadarRow {
            rank: 1,
            symbol: symbol(),
            price: Price(125_000),
            percentage_gain: 25.5,
            change_1m: Some(1.25),
            change_5m: None,
            volume: 1_000_000,
            average_volume: 200_000,
            relative_volume: Some(5.0),
            float: Some(10_000_000),
            sector: Some("Technology".into()),
            captured_at: at(0),
            halted: true,
            session: tradeops_core::calendar::SessionPhase::PreMarket,
            gap_pct: Some(25.5),
            premarket_volume: 400_000,
            premarket_high: Some(Price(130_000)),
        };
        let halt = Halt { at: at(3), reason: "drill".into(), actor: "admin".into() };
        let job = JobRecord {
            request_id: "dl-1".into(),
            symbol: "ABCD".into(),
            timeframe: "1m".into(),
            start: T0,
            end: T0 + 60_000,
            status: "RUNNING".into(),
            progress: 0.5,
            bars: 30,
            error: None,
            requested_by: "operator".into(),
            created_at: T0,
            started_at: Some(T0 + 1000),
            finished_at: None,
        };
        let run = BacktestRecord {
            backtest_id: "bt-1".into(),
            strategy_id: "sma_cross".into(),
            symbol: "ABCD".into(),
            status: "COMPLETED".into(),
            progress: 1.0,
            request: r#"{"strategy_id":"sma_cross","symbol":"ABCD","initial_cash":"100000","effective_settings":{}}"#
                .into(),
            result: Some(r#"{"total_return":0.12,"trades":[],"equity_curve":[]}"#.into()),
            error: None,
            requested_by: "operator".into(),
            created_at: T0,
            started_at: Some(T0 + 1000),
            finished_at: Some(T0 + 2000),
        };
        let view = EngineView {
            trading_state: TradingState::Halted,
            cash: d("99500"),
            equity: d("100012.345"),
            buying_power: d("99500"),
            realized_today: d("12.34"),
            unrealized: d("0.005"),
            start_equity: d("100000"),
            ..EngineView::default()
        };
        vec![
            Event::OrderUpdated { order: Arc::new(order), mode: TradingMode::Paper, broker: "paper" },
            Event::ExecutionCreated {
                client_order_id: id(),
                symbol: symbol(),
                side: Side::Buy,
                execution: execution(),
            },
            Event::PositionUpdated {
                position,
                status: StrategyStatus::Hold,
                levels: Some(Levels { stop_loss: "12.09".parse().unwrap(), target: Some("13.31".parse().unwrap()) }),
                halted: true,
                protection: tradeops_core::engine::Protection {
                    kind: tradeops_core::engine::ProtectionKind::Broker,
                    order_id: Some(tradeops_core::orders::ClientOrderId::parse("to-ABCD-1").unwrap()),
                },
            },
            Event::RadarUpdated(RadarSummary { captured_at: at(0), rows: 40, top: vec![row] }),
            Event::WatchlistUpdated(WatchlistChange::Started { symbol: symbol(), source: "RADAR".into(), at: at(1) }),
            Event::RiskStateChanged(RiskChange::TradingState { state: TradingState::Halted, halt: Some(halt) }),
            Event::RiskViolation(Violation {
                rule: RiskRule::MaxDailyLoss,
                symbol: symbol(),
                client_order_id: Some(id()),
                detail: tradeops_core::risk::ViolationDetail::Refused {
                    limit: tradeops_core::risk::RiskFigure::Money(rust_decimal::Decimal::new(500, 0)),
                    current: tradeops_core::risk::RiskFigure::Money(rust_decimal::Decimal::new(5125, 1)),
                    message: "daily loss 512.50 is past the limit 500.00".into(),
                },
                at: at(6),
            }),
            Event::SettingsUpdated(SettingsChange {
                version: 3,
                updated: vec!["risk_controls.max_daily_loss".into()],
                actor: "admin".into(),
            }),
            Event::DownloadUpdated(job),
            Event::BacktestUpdated(run),
            Event::HealthChanged(HealthChange {
                component: "database",
                from: HealthStatus::Healthy,
                to: HealthStatus::Down,
                detail: serde_json::json!({"backend": "sqlite"}),
            }),
            Event::AccountUpdated(AccountUpdate {
                view: Arc::new(view),
                market_time: at(7),
                trading_date: Some("2025-11-25".parse().unwrap()),
                session: tradeops_core::calendar::SessionPhase::Regular,
            }),
            Event::BarsClosed(BarsClosed {
                bars: vec![(
                    symbol(),
                    tradeops_core::market::Bar {
                        start: at(8),
                        open: Price::from_cents(1250),
                        high: Price::from_cents(1275),
                        low: Price::from_cents(1240),
                        close: Price::from_cents(1262),
                        volume: 4200,
                    },
                )],
            }),
            Event::SymbolStatus { symbol: symbol(), halt: Some(tradeops_core::market::SymbolHalt::luld_pause(at(9))) },
            // The pre-market of an early-close day (09:00 New York).
            Event::MarketSession(
                tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse)
                    .session(tradeops_core::time::parse_ts("2026-11-27T14:00:00Z").unwrap()),
            ),
        ]
    }

    #[test]
    fn one_event_of_each_kind_serialises_as_pinned() {
        let events = one_of_each();
        let kinds: Vec<_> = events.iter().map(Event::kind).collect();
        assert_eq!(kinds, KINDS);
        assert_eq!(PINNED.len(), KINDS.len());
        for (event, expected) in events.into_iter().zip(PINNED) {
            let stored = stored(event);
            assert_eq!(wire(&stored).as_ref(), *expected, "{}", stored.kind());
        }
    }

    #[test]
    fn the_other_shapes_of_risk_and_watchlist_events_serialise_as_pinned() {
        let events = vec![
            Event::RiskStateChanged(RiskChange::TradingState { state: TradingState::Active, halt: None }),
            Event::RiskStateChanged(RiskChange::Liquidation { open_positions: 0, open_orders: 0 }),
            Event::RiskStateChanged(RiskChange::Blocked {
                symbol: symbol(),
                block: Block {
                    scope: "TODAY".into(),
                    reason: "news".into(),
                    actor: "operator".into(),
                    effective_from: at(4),
                    expires_at: Some(at(5)),
                },
            }),
            Event::RiskStateChanged(RiskChange::Blocked {
                symbol: symbol(),
                block: Block {
                    scope: "PERMANENT".into(),
                    reason: "halted stock".into(),
                    actor: "operator".into(),
                    effective_from: at(4),
                    expires_at: None,
                },
            }),
            Event::RiskStateChanged(RiskChange::Unblocked {
                symbol: symbol(),
                reason: "news out".into(),
                actor: "operator".into(),
            }),
            Event::RiskStateChanged(RiskChange::StoppedByHalt { symbols: vec![symbol()] }),
            Event::WatchlistUpdated(WatchlistChange::Status {
                symbol: symbol(),
                status: StrategyStatus::Closed,
                reason: Some("stopped".into()),
            }),
            Event::SymbolStatus { symbol: symbol(), halt: None },
        ];
        assert_eq!(events.len(), PINNED_SHAPES.len());
        for (event, expected) in events.into_iter().zip(PINNED_SHAPES) {
            let stored = stored(event);
            assert_eq!(wire(&stored).as_ref(), *expected);
        }
    }

    #[test]
    fn an_event_is_serialised_once_for_all_subscribers() {
        let stored = stored(Event::SettingsUpdated(SettingsChange { version: 1, updated: vec![], actor: "a".into() }));
        assert!(Arc::ptr_eq(wire(&stored), wire(&stored)));
    }

    const PINNED: &[&str] = &[
        r#"{"kind":"order.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"submitted_at":"2025-11-25T14:13:20.000Z","status":"PARTIALLY_FILLED","symbol":"ABCD","side":"BUY","quantity":100,"filled_quantity":40,"order_type":"LIMIT","price":12.5,"broker_name":"paper","client_order_id":"ord-1","broker_order_id":null,"reason":"breakout","strategy_id":"momentum_breakout","mode":"PAPER","extended_hours":false,"time_in_force":"DAY","limit_price":12.5,"stop_price":null,"average_fill_price":12.5,"fees":0.2,"reject_reason":null,"updated_at":"2025-11-25T14:13:22.000Z","executions":[{"execution_id":"ex-1","timestamp":"2025-11-25T14:13:22.000Z","quantity":40,"price":12.5,"fee":0.2}],"stop_loss":null,"take_profit":null},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"execution.created","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"client_order_id":"ord-1","symbol":"ABCD","side":"BUY","execution_id":"ex-1","timestamp":"2025-11-25T14:13:22.000Z","quantity":40,"price":12.5,"fee":0.2},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"position.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"symbol":"ABCD","quantity":40,"average_entry_price":12.5,"realized_pnl":12.34,"strategy_status":"Hold","stop_loss":12.09,"target":13.31,"halted":true,"protection":"BROKER","protective_order_id":"to-ABCD-1"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"radar.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"captured_at":"2025-11-25T14:13:20.000Z","rows":40,"top":[{"rank":1,"symbol":"ABCD","price":12.5,"percentage_gain":25.5,"change_1m":1.25,"change_5m":null,"volume":1000000,"average_volume":200000,"relative_volume":5.0,"float":10000000,"sector":"Technology","captured_at":"2025-11-25T14:13:20.000Z","halted":true,"session":"PRE_MARKET","gap_pct":25.5,"premarket_volume":400000,"premarket_high":13.0}]},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"watchlist.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"symbol":"ABCD","strategy_status":"Active","source":"RADAR","time_added":"2025-11-25T14:13:21.000Z"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"trading_state":"HALTED","halt":{"at":"2025-11-25T14:13:23.000Z","reason":"drill","actor":"admin"}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.violation","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"rule":"MAX_DAILY_LOSS","symbol":"ABCD","client_order_id":"ord-1","detail":{"limit":500.0,"current":512.5,"message":"daily loss 512.50 is past the limit 500.00"},"timestamp":"2025-11-25T14:13:26.000Z"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"settings.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"version":3,"updated":["risk_controls.max_daily_loss"],"actor":"admin"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"download.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"request_id":"dl-1","symbol":"ABCD","timeframe":"1m","start":"2025-11-25T14:13:20.000Z","end":"2025-11-25T14:14:20.000Z","status":"RUNNING","progress":0.5,"bars":30,"created_at":"2025-11-25T14:13:20.000Z","finished_at":null,"error":null},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"backtest.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"backtest_id":"bt-1","status":"COMPLETED","progress":1.0,"market_buy_buffer_pct":3.0,"strategy_id":"sma_cross","symbol":"ABCD","initial_cash":100000.0,"requested_by":"operator","created_at":"2025-11-25T14:13:20.000Z","started_at":"2025-11-25T14:13:21.000Z","finished_at":"2025-11-25T14:13:22.000Z","error":null,"total_return":0.12},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"health.changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"component":"database","from":"HEALTHY","to":"DOWN","detail":{"backend":"sqlite"}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"account.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"buying_power":99500.0,"equity":100012.34,"cash":99500.0,"margin_available":99500.0,"day_pnl":12.34,"realized_pnl":12.34,"unrealized_pnl":0.0,"broker_name":"paper","account_status":"TRADING_HALTED","open_risk":0.0,"session":"REGULAR","trading_state":"HALTED","market_time":"2025-11-25T14:13:27.000Z","trading_date":"2025-11-25"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"bars.closed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"bars":[{"symbol":"ABCD","timestamp":"2025-11-25T14:13:28.000Z","open":12.5,"high":12.75,"low":12.4,"close":12.62,"volume":4200}]},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"symbol.status","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"symbol":"ABCD","trading_status":"HALTED","halt":{"reason_code":"LUDP","reason":"Volatility Trading Pause","since":"2025-11-25T14:13:29.000Z"}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"market.session","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"session":"PRE_MARKET","trading_day":"2026-11-27","pre_market_open_at":"2026-11-27T09:00:00.000Z","regular_open_at":"2026-11-27T14:30:00.000Z","regular_close_at":"2026-11-27T18:00:00.000Z","after_hours_close_at":"2026-11-27T22:00:00.000Z","next_session":"REGULAR","next_session_at":"2026-11-27T14:30:00.000Z"},"wall_time":"2026-11-25T13:00:00Z"}"#,
    ];

    const PINNED_SHAPES: &[&str] = &[
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"trading_state":"ACTIVE","halt":null},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"trading_state":"HALTED","liquidation":{"open_positions":0,"open_orders":0,"flat":true}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"blocked":{"symbol":"ABCD","block_scope":"TODAY","effective_from":"2025-11-25T14:13:24.000Z","expires_at":"2025-11-25T14:13:25.000Z","reason":"news","blocked_by":"operator"}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"blocked":{"symbol":"ABCD","block_scope":"PERMANENT","effective_from":"2025-11-25T14:13:24.000Z","expires_at":null,"reason":"halted stock","blocked_by":"operator"}},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"unblocked":"ABCD","reason":"news out","by":"operator"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"risk.state_changed","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"stopped_by_halt":["ABCD"]},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"watchlist.updated","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"symbol":"ABCD","strategy_status":"Closed","reason":"stopped"},"wall_time":"2026-11-25T13:00:00Z"}"#,
        r#"{"kind":"symbol.status","timestamp":"2026-11-25T14:30:00Z","mode":"PAPER","data":{"symbol":"ABCD","trading_status":"TRADING","halt":null},"wall_time":"2026-11-25T13:00:00Z"}"#,
    ];
}
