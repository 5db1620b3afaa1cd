//! What the operator is told, and when (CONTRACT §13): the [`Notice`] each event becomes, and the
//! [`Tracker`] that turns the event stream into notices — an order's fill once, with what
//! protects the position it opened; a position's close with the trade's P&L and exit reason (a
//! stop-out when the stop sold it); the risk state when it changes; a followed symbol's trading
//! halt; a component going down and coming back.
//!
//! A notice is read in one glance on a phone: the mode first (`🔴 LIVE` stands out from `PAPER`
//! and `DEMO`), then the symbol and what happened in the title; the figures in a line or two; a
//! link to the console's page. Plain text: nothing in a symbol or a reason can break a chat's
//! markup.

use super::kinds::NoticeKind;
use crate::events::{Event, HealthStatus, RiskChange, StoredEvent};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use tradeops_core::engine::Protection;
use tradeops_core::engine::ProtectionKind;
use tradeops_core::market::Side;
use tradeops_core::orders::{Order, OrderStatus};
use tradeops_core::risk::TradingState;
use tradeops_core::strategy::Levels;
use tradeops_core::{Symbol, TradingMode};

/// One message to send, as recorded with each of its deliveries (so a new leader sends exactly
/// it) and as a generic webhook's JSON body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// The event bus's id of what it reports (or `test-…`, `summary-<date>`, `digest-…`):
    /// a channel is sent each id once.
    pub event_id: String,
    /// The kind's wire name (`order.filled`, …, `test`, `digest`).
    pub kind: String,
    pub critical: bool,
    /// `LIVE`, `PAPER` or `DEMO`.
    pub mode: String,
    /// Mode, symbol and what happened: `🔴 LIVE · AAPL stopped out`.
    pub title: String,
    /// The figures, a line each.
    pub text: String,
    /// The console's page for it.
    pub link: Option<String>,
    pub symbol: Option<String>,
    /// Market time of the event.
    pub at: String,
    /// The figures as data, for a webhook's receiver.
    pub data: Value,
}

impl Notice {
    /// The kind as configured channels name it (`None`: a digest, which no list names).
    pub fn notice_kind(&self) -> Option<NoticeKind> {
        NoticeKind::parse(&self.kind)
    }

    /// Whether a channel sent `events` gets it: its kind is listed, or it is a stop-out and the
    /// channel lists `position.closed` (a stop-out is a close: a channel that wants closes gets
    /// it once, as the stop-out). Tests and digests go wherever they are addressed.
    pub fn wanted_by(&self, events: &[NoticeKind]) -> bool {
        match self.notice_kind() {
            Some(NoticeKind::Test) | None => true,
            Some(NoticeKind::PositionStoppedOut) => {
                events.contains(&NoticeKind::PositionStoppedOut) || events.contains(&NoticeKind::PositionClosed)
            }
            Some(kind) => events.contains(&kind),
        }
    }

    /// Title, text and link as one plain-text message.
    pub fn plain(&self) -> String {
        format!("{}\n{}", self.title, self.plain_body())
    }

    /// Text and link, a line each.
    pub fn plain_body(&self) -> String {
        match &self.link {
            Some(link) => format!("{}\n{link}", self.text),
            None => self.text.clone(),
        }
    }
}

/// The mode as a message's first word: LIVE money stands out.
pub fn mode_label(mode: TradingMode) -> &'static str {
    match mode {
        TradingMode::Live => "🔴 LIVE",
        TradingMode::Paper => "PAPER",
        TradingMode::Demo => "DEMO",
    }
}

/// `$1,234.56`; `signed` puts `+` or `−` before it (P&L).
pub fn dollars(amount: Decimal, signed: bool) -> String {
    let rounded = amount.round_dp(2);
    let cents = format!("{:.2}", rounded.abs());
    let (whole, frac) = cents.split_once('.').unwrap_or((&cents, "00"));
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = match (signed, rounded.is_sign_negative() && !rounded.is_zero()) {
        (_, true) => "−",
        (true, false) if !rounded.is_zero() => "+",
        _ => "",
    };
    format!("{sign}${grouped}.{frac}")
}

/// A price as the venue quotes it: cents from $1, more places below.
fn price(p: Decimal) -> String {
    if p >= Decimal::ONE {
        dollars(p, false)
    } else {
        format!("${}", p.normalize())
    }
}

/// What protects a position, in words.
fn protection_words(protection: &Protection, levels: Option<&Levels>) -> String {
    let stop = levels.map(|l| format!(" at {}", price(l.stop_loss))).unwrap_or_default();
    match protection.kind {
        ProtectionKind::Broker => format!("protected at the broker (stop{stop})"),
        ProtectionKind::Engine => format!("protected by the engine (stop{stop})"),
        ProtectionKind::None => "NOT protected".to_string(),
    }
}

/// A fill waiting for its position's next update, which says what protects it.
struct HeldFill {
    order: std::sync::Arc<Order>,
    /// Its own strategy, or (an exit at the broker) its entry's.
    strategy: Option<String>,
    mode: TradingMode,
    event_id: u64,
    at: String,
    /// The tracker's generation when it was held (see [`Tracker::flush_stale_fills`]).
    generation: u64,
}

/// The position a symbol had as last published.
#[derive(Default, Clone)]
struct Held {
    quantity: u64,
    protection: Protection,
    levels: Option<Levels>,
}

/// Turns the event stream into notices: remembers what it needs across events (orders already
/// told, positions held, the exit that last sold each symbol, the last risk state).
pub struct Tracker {
    /// Where links point (`https://desk.example.com`).
    console_url: String,
    told: HashSet<(String, &'static str)>,
    held: BTreeMap<Symbol, Held>,
    /// The rule and sentence of the last exit that filled, by symbol.
    last_exit: BTreeMap<Symbol, (String, String, Option<String>)>,
    fills: Vec<HeldFill>,
    risk_state: Option<TradingState>,
    generation: u64,
    /// The strategy of each held symbol's entry: its exits (a protective order at the broker
    /// carries none) are that strategy's.
    entry_strategy: BTreeMap<Symbol, Option<String>>,
}

impl Tracker {
    /// Starting from the positions held now (a close of one of them is told) and the trading
    /// state now (told again only when it changes: a restart does not repeat a halt).
    pub fn new(
        console_url: String,
        held: impl IntoIterator<Item = (Symbol, u64, Protection, Option<Levels>)>,
        risk_state: TradingState,
    ) -> Tracker {
        Tracker {
            console_url,
            told: HashSet::new(),
            held: held
                .into_iter()
                .map(|(symbol, quantity, protection, levels)| (symbol, Held { quantity, protection, levels }))
                .collect(),
            last_exit: BTreeMap::new(),
            fills: Vec::new(),
            risk_state: Some(risk_state),
            generation: 0,
            entry_strategy: BTreeMap::new(),
        }
    }

    fn link(&self, page: &str) -> Option<String> {
        Some(format!("{}/#/{page}", self.console_url))
    }

    /// The notices `event` makes now (a fill waits for its position's update: see
    /// [`Tracker::flush_fills`]).
    pub fn observe(&mut self, stored: &StoredEvent) -> Vec<Notice> {
        let mode = stored.mode;
        let at = stored.timestamp.clone();
        let id = stored.id;
        let mut out = Vec::new();
        match &stored.event {
            Event::OrderUpdated { order, mode, .. } => {
                let key = order.client_order_id.as_str().to_string();
                match order.status {
                    OrderStatus::Filled if self.told.insert((key.clone(), "filled")) => {
                        let own = order.strategy_id.as_deref().map(str::to_string);
                        let strategy = match order.side {
                            Side::Buy => {
                                self.entry_strategy.insert(order.symbol.clone(), own.clone());
                                own
                            }
                            Side::Sell => own.or_else(|| self.entry_strategy.get(&order.symbol).cloned().flatten()),
                        };
                        if order.side == Side::Sell {
                            let explanation = match order.is_protective() {
                                true => tradeops_core::trades::explain_protective(order, order_average(order)),
                                false => tradeops_core::trades::explain(order),
                            };
                            self.last_exit
                                .insert(order.symbol.clone(), (explanation.rule, explanation.text, strategy.clone()));
                        }
                        self.fills.push(HeldFill {
                            order: order.clone(),
                            strategy,
                            mode: *mode,
                            event_id: id,
                            at: at.clone(),
                            generation: self.generation,
                        });
                    }
                    OrderStatus::Rejected if self.told.insert((key, "rejected")) => {
                        out.push(self.rejected(order, *mode, id, &at));
                    }
                    _ => {}
                }
            }
            Event::PositionUpdated { position, protection, levels, .. } => {
                let before = self.held.get(&position.symbol).map(|h| h.quantity).unwrap_or(0);
                self.held.insert(
                    position.symbol.clone(),
                    Held { quantity: position.quantity, protection: protection.clone(), levels: *levels },
                );
                out.extend(self.flush_fills_of(&position.symbol));
                if before > 0 && position.quantity == 0 {
                    out.push(self.closed(position, mode, id, &at));
                    self.entry_strategy.remove(&position.symbol);
                }
            }
            // Told when the state changes, not at each repeat of it.
            Event::RiskStateChanged(RiskChange::TradingState { state, halt })
                if self.risk_state.replace(*state) != Some(*state) =>
            {
                let name = format!("{state:?}").to_uppercase();
                let (title, text) = match (state, halt) {
                    (TradingState::Halted, Some(h)) => (
                        format!("{} · trading HALTED", mode_label(mode)),
                        format!("Emergency halt by {}: {}\nOpen positions are being closed.", h.actor, h.reason),
                    ),
                    (TradingState::Reducing, _) => (
                        format!("{} · trading REDUCING", mode_label(mode)),
                        "The daily loss limit was reached: only orders that reduce risk are accepted.".into(),
                    ),
                    (TradingState::Active, _) => {
                        (format!("{} · trading ACTIVE", mode_label(mode)), "New entries are accepted again.".into())
                    }
                    (_, None) => (format!("{} · trading {name}", mode_label(mode)), String::new()),
                };
                out.push(Notice {
                    event_id: id.to_string(),
                    kind: NoticeKind::RiskStateChanged.as_str().into(),
                    critical: true,
                    mode: mode.as_str().into(),
                    title,
                    text,
                    link: self.link("health"),
                    symbol: None,
                    at: at.clone(),
                    data: json!({"state": name, "reason": halt.as_ref().map(|h| &h.reason),
                                     "actor": halt.as_ref().map(|h| &h.actor)}),
                });
            }
            Event::RiskViolation(v) => {
                let message = match &v.detail {
                    tradeops_core::risk::ViolationDetail::Refused { message, .. } => message.clone(),
                    tradeops_core::risk::ViolationDetail::FillWhileHalted { message, .. } => message.clone(),
                };
                out.push(Notice {
                    event_id: id.to_string(),
                    kind: NoticeKind::RiskViolation.as_str().into(),
                    critical: true,
                    mode: mode.as_str().into(),
                    title: format!("{} · {} refused by risk", mode_label(mode), v.symbol),
                    text: format!("{}: {message}", v.rule.as_str()),
                    link: self.link(&format!("positions?symbol={}", v.symbol)),
                    symbol: Some(v.symbol.to_string()),
                    at: at.clone(),
                    data: json!({"rule": v.rule.as_str(), "message": message,
                                 "client_order_id": v.client_order_id.as_ref().map(|c| c.as_str().to_string())}),
                });
            }
            Event::SymbolStatus { symbol, halt } => {
                let held = self.held.get(symbol).filter(|h| h.quantity > 0).cloned();
                let holding = match &held {
                    Some(h) => format!(
                        "You hold {} shares, {}.",
                        h.quantity,
                        protection_words(&h.protection, h.levels.as_ref())
                    ),
                    None => "No position held.".to_string(),
                };
                let (kind, title, text) = match halt {
                    Some(h) => (
                        NoticeKind::SymbolHalted,
                        format!("{} · {symbol} trading HALTED", mode_label(mode)),
                        format!("{} ({})\n{holding}", h.reason, h.reason_code),
                    ),
                    None => {
                        (NoticeKind::SymbolResumed, format!("{} · {symbol} trading resumed", mode_label(mode)), holding)
                    }
                };
                out.push(Notice {
                    event_id: id.to_string(),
                    kind: kind.as_str().into(),
                    critical: kind.is_critical(),
                    mode: mode.as_str().into(),
                    title,
                    text,
                    link: self.link(&format!("positions?symbol={symbol}")),
                    symbol: Some(symbol.to_string()),
                    at: at.clone(),
                    data: json!({"halted": halt.is_some(), "reason_code": halt.as_ref().map(|h| h.reason_code.to_string()),
                                 "held": held.map(|h| h.quantity).unwrap_or(0)}),
                });
            }
            Event::HealthChanged(change) => {
                let down = change.to == HealthStatus::Down;
                let back = change.from == HealthStatus::Down && change.to != HealthStatus::Down;
                if down || back {
                    let state = if down { "DOWN" } else { "back" };
                    let detail = match &change.detail {
                        Value::Object(fields) => {
                            fields.get("reason").or_else(|| fields.get("detail")).and_then(Value::as_str).unwrap_or("")
                        }
                        Value::String(s) => s,
                        _ => "",
                    };
                    out.push(Notice {
                        event_id: id.to_string(),
                        kind: NoticeKind::HealthChanged.as_str().into(),
                        critical: true,
                        mode: mode.as_str().into(),
                        title: format!("{} · {} {state}", mode_label(mode), change.component),
                        text: format!(
                            "{} {} → {}{}",
                            change.component,
                            status_name(change.from),
                            status_name(change.to),
                            if detail.is_empty() { String::new() } else { format!(": {detail}") }
                        ),
                        link: self.link("health"),
                        symbol: None,
                        at: at.clone(),
                        data: json!({"component": change.component, "from": change.from, "to": change.to,
                                     "detail": change.detail}),
                    });
                }
            }
            _ => {}
        }
        out
    }

    /// The fills that waited a whole generation for their position's update, told now without
    /// it; called on a steady tick, so a fill waits one to two ticks at most (its position's
    /// update is published in the same batch: it is almost always there first).
    pub fn flush_stale_fills(&mut self) -> Vec<Notice> {
        let generation = self.generation;
        self.generation += 1;
        let (stale, fresh): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.fills).into_iter().partition(|f| f.generation < generation);
        self.fills = fresh;
        stale.iter().map(|f| self.filled(f)).collect()
    }

    fn flush_fills_of(&mut self, symbol: &Symbol) -> Vec<Notice> {
        let (mine, others): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.fills).into_iter().partition(|f| &f.order.symbol == symbol);
        self.fills = others;
        mine.iter().map(|f| self.filled(f)).collect()
    }

    fn filled(&self, fill: &HeldFill) -> Notice {
        let o = &fill.order;
        let avg = order_average(o);
        let entry = o.side == Side::Buy;
        let strategy = fill.strategy.as_deref().unwrap_or("manual");
        let held = self.held.get(&o.symbol).cloned().unwrap_or_default();
        let protection = match (held.quantity, held.protection.kind, o.legs.filter(|_| entry)) {
            (0, _, _) => "position flat".to_string(),
            // A bracket's stop is placed at the broker once the entry fills: not there yet.
            (quantity, ProtectionKind::None, Some(legs)) => {
                format!("{quantity} shares held, stop at {} being placed at the broker", price(legs.stop_price))
            }
            (quantity, _, _) => {
                format!("{quantity} shares held, {}", protection_words(&held.protection, held.levels.as_ref()))
            }
        };
        let what = if entry { "entry" } else { "exit" };
        let reason = o.reason.as_deref().unwrap_or("");
        Notice {
            event_id: fill.event_id.to_string(),
            kind: NoticeKind::OrderFilled.as_str().into(),
            critical: false,
            mode: fill.mode.as_str().into(),
            title: format!(
                "{} · {} {} {} @ {}",
                mode_label(fill.mode),
                o.symbol,
                o.side.as_str(),
                o.filled_quantity,
                price(avg)
            ),
            text: format!(
                "{what} filled · {strategy} · {}\n{protection}{}",
                dollars(o.filled_notional, false),
                if reason.is_empty() { String::new() } else { format!("\n{reason}") }
            ),
            link: self.link(&format!("positions?symbol={}", o.symbol)),
            symbol: Some(o.symbol.to_string()),
            at: fill.at.clone(),
            data: json!({"client_order_id": o.client_order_id.as_str(), "side": o.side.as_str(),
                         "quantity": o.filled_quantity, "average_price": avg.round_dp(4).to_string(),
                         "strategy_id": o.strategy_id.as_deref(), "entry": entry,
                         "protection": held.protection.kind.as_str(),
                         "stop_loss": held.levels.map(|l| l.stop_loss.to_string())}),
        }
    }

    fn rejected(&self, o: &Order, mode: TradingMode, id: u64, at: &str) -> Notice {
        let why = o.reject_reason.as_deref().unwrap_or("no reason given");
        Notice {
            event_id: id.to_string(),
            kind: NoticeKind::OrderRejected.as_str().into(),
            critical: false,
            mode: mode.as_str().into(),
            title: format!("{} · {} {} {} REJECTED", mode_label(mode), o.symbol, o.side.as_str(), o.quantity),
            text: format!("{} · {why}", o.strategy_id.as_deref().unwrap_or("manual")),
            link: self.link("orders"),
            symbol: Some(o.symbol.to_string()),
            at: at.to_string(),
            data: json!({"client_order_id": o.client_order_id.as_str(), "reject_reason": o.reject_reason}),
        }
    }

    fn closed(&mut self, p: &tradeops_core::positions::Position, mode: TradingMode, id: u64, at: &str) -> Notice {
        let net = p.realized_pnl - p.fees;
        let (rule, sentence, strategy) = self.last_exit.remove(&p.symbol).unwrap_or_default();
        // `explain` names every stop's exit `STOP_LOSS`: a strategy's, the engine's outside the
        // regular session, and a stop resting at the broker.
        let stopped = rule == "STOP_LOSS";
        let kind = if stopped { NoticeKind::PositionStoppedOut } else { NoticeKind::PositionClosed };
        let what = if stopped { "stopped out" } else { "closed" };
        Notice {
            event_id: id.to_string(),
            kind: kind.as_str().into(),
            critical: kind.is_critical(),
            mode: mode.as_str().into(),
            title: format!("{} · {} {what} {}", mode_label(mode), p.symbol, dollars(net, true)),
            text: format!(
                "{} · {}{}",
                strategy.as_deref().unwrap_or("manual"),
                if rule.is_empty() { "exit" } else { &rule },
                if sentence.is_empty() { String::new() } else { format!("\n{sentence}") }
            ),
            link: self.link(&format!("pnl?symbol={}", p.symbol)),
            symbol: Some(p.symbol.to_string()),
            at: at.to_string(),
            data: json!({"net_pnl": net.round_dp(2).to_string(), "gross_pnl": p.realized_pnl.round_dp(2).to_string(),
                         "fees": p.fees.round_dp(2).to_string(), "exit_reason": rule, "strategy_id": strategy}),
        }
    }
}

/// The average price of an order's fills.
fn order_average(o: &Order) -> Decimal {
    if o.filled_quantity == 0 {
        return Decimal::ZERO;
    }
    o.filled_notional / Decimal::from(o.filled_quantity)
}

/// A health status as the contract writes it (`DOWN`).
fn status_name(status: HealthStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, OnceLock};
    use tradeops_core::engine::StrategyStatus;
    use tradeops_core::positions::Position;
    use tradeops_core::trades::fixtures::{d, fill, order};

    fn stored(id: u64, event: Event) -> StoredEvent {
        StoredEvent {
            id,
            timestamp: "2026-03-02T15:30:00.000Z".into(),
            mode: TradingMode::Live,
            event,
            wall_time: String::new(),
            wire: OnceLock::new(),
        }
    }

    fn order_update(o: &Order) -> Event {
        Event::OrderUpdated { order: Arc::new(o.clone()), mode: TradingMode::Live, broker: "alpaca" }
    }

    fn position(quantity: u64, realized: &str, kind: ProtectionKind) -> Event {
        let mut p = Position::new(Symbol::parse("ABC").unwrap());
        p.quantity = quantity;
        p.cost_basis = d("10") * Decimal::from(quantity);
        p.realized_pnl = d(realized);
        p.fees = d("1");
        Event::PositionUpdated {
            position: p,
            status: StrategyStatus::Hold,
            levels: Some(Levels { stop_loss: d("9.50"), target: None }),
            halted: false,
            protection: Protection { kind, order_id: None },
        }
    }

    fn tracker() -> Tracker {
        Tracker::new("https://desk".into(), Vec::new(), TradingState::Active)
    }

    /// An entry's fill is told once its position's update says what protects it; LIVE first.
    #[test]
    fn a_fill_is_told_with_what_protects_its_position() {
        let mut t = tracker();
        let mut buy = order("b1", Side::Buy, 100, 0, "FIRST_PULLBACK_BREAKOUT: broke out", Some("momentum"));
        fill(&mut buy, 100, "10.00", 1);
        assert!(t.observe(&stored(1, order_update(&buy))).is_empty(), "waits for the position");
        let told = t.observe(&stored(2, position(100, "0", ProtectionKind::Broker)));
        assert_eq!(told.len(), 1);
        let n = &told[0];
        assert_eq!((n.kind.as_str(), n.event_id.as_str(), n.critical), ("order.filled", "1", false));
        assert_eq!(n.title, "🔴 LIVE · ABC BUY 100 @ $10.00");
        assert!(n.text.contains("entry filled · momentum · $1,000.00"), "{}", n.text);
        assert!(n.text.contains("100 shares held, protected at the broker (stop at $9.50)"), "{}", n.text);
        assert_eq!(n.link.as_deref(), Some("https://desk/#/positions?symbol=ABC"));
        assert!(t.observe(&stored(3, order_update(&buy))).is_empty(), "told once");
        // A bracket's entry: its stop is not at the broker yet when the position first shows.
        let mut bracket = order("b3", Side::Buy, 50, 0, "manual order", None);
        bracket.legs =
            Some(tradeops_core::orders::ExitLegs { stop_price: d("9.25"), stop_limit_price: None, take_profit: None });
        fill(&mut bracket, 50, "10.00", 1);
        t.observe(&stored(5, order_update(&bracket)));
        let told = t.observe(&stored(6, position(150, "0", ProtectionKind::None)));
        assert!(told[0].text.contains("150 shares held, stop at $9.25 being placed at the broker"), "{}", told[0].text);
        // A fill whose position's update never comes is told after a generation or two.
        let mut other = order("b2", Side::Buy, 5, 2, "manual order", None);
        fill(&mut other, 5, "10.00", 2);
        t.observe(&stored(4, order_update(&other)));
        assert!(t.flush_stale_fills().is_empty(), "not at the first tick");
        assert_eq!(t.flush_stale_fills().len(), 1, "at the second");
    }

    /// A close by a stop is a stop-out (critical), with the trade's net P&L; another close is a
    /// routine close; a channel that wants closes gets a stop-out too, once.
    #[test]
    fn a_stop_out_is_critical_and_a_close_names_its_exit() {
        let mut t = tracker();
        t.observe(&stored(1, position(100, "0", ProtectionKind::Engine)));
        let mut buy = order("b1", Side::Buy, 100, 0, "FIRST_PULLBACK_BREAKOUT: broke out", Some("momentum"));
        fill(&mut buy, 100, "10.00", 1);
        t.observe(&stored(10, order_update(&buy)));
        // An exit the engine placed holds the stop: no strategy of its own, the entry's.
        let mut sell = order("s1", Side::Sell, 100, 5, "STOP_LOSS: the stop at 9.50 was touched", None);
        fill(&mut sell, 100, "9.50", 6);
        t.observe(&stored(2, order_update(&sell)));
        let told = t.observe(&stored(3, position(0, "-50", ProtectionKind::None)));
        let stop = told.iter().find(|n| n.kind == "position.stopped_out").expect("a stop-out");
        assert!(stop.critical);
        assert_eq!(stop.title, "🔴 LIVE · ABC stopped out −$51.00", "net of fees");
        assert!(stop.text.starts_with("momentum · STOP_LOSS"), "{}", stop.text);
        assert!(stop.wanted_by(&[NoticeKind::PositionClosed]) && stop.wanted_by(&[NoticeKind::PositionStoppedOut]));
        assert!(!stop.wanted_by(&[NoticeKind::OrderFilled]));

        t.observe(&stored(4, position(10, "0", ProtectionKind::None)));
        let mut close = order("s2", Side::Sell, 10, 7, "manual close: done", None);
        fill(&mut close, 10, "12.00", 8);
        t.observe(&stored(5, order_update(&close)));
        let told = t.observe(&stored(6, position(0, "20", ProtectionKind::None)));
        let closed = told.iter().find(|n| n.kind == "position.closed").expect("a close");
        assert!(!closed.critical);
        assert_eq!(closed.title, "🔴 LIVE · ABC closed +$19.00");
        assert!(closed.text.starts_with("manual · MANUAL_CLOSE"), "{}", closed.text);
    }

    /// A trading halt of a held symbol says how much is held and what protects it; the risk
    /// state is told when it changes only.
    #[test]
    fn a_halt_of_a_held_symbol_and_the_risk_state() {
        let mut t = tracker();
        t.observe(&stored(1, position(300, "0", ProtectionKind::Engine)));
        let halt = tradeops_core::market::SymbolHalt::new(
            "LUDP",
            "Volatility trading pause",
            tradeops_core::trades::fixtures::t(0),
        );
        let told =
            t.observe(&stored(2, Event::SymbolStatus { symbol: Symbol::parse("ABC").unwrap(), halt: Some(halt) }));
        assert_eq!(told[0].kind, "symbol.halted");
        assert!(told[0].critical);
        assert_eq!(told[0].title, "🔴 LIVE · ABC trading HALTED");
        assert!(
            told[0].text.contains("You hold 300 shares, protected by the engine (stop at $9.50)."),
            "{}",
            told[0].text
        );
        let resumed = t.observe(&stored(3, Event::SymbolStatus { symbol: Symbol::parse("ABC").unwrap(), halt: None }));
        assert_eq!((resumed[0].kind.as_str(), resumed[0].critical), ("symbol.resumed", false));

        let active = Event::RiskStateChanged(crate::events::RiskChange::TradingState {
            state: TradingState::Active,
            halt: None,
        });
        assert!(t.observe(&stored(4, active.clone())).is_empty(), "no change");
        let reducing = Event::RiskStateChanged(crate::events::RiskChange::TradingState {
            state: TradingState::Reducing,
            halt: None,
        });
        let told = t.observe(&stored(5, reducing.clone()));
        assert_eq!(told[0].title, "🔴 LIVE · trading REDUCING");
        assert!(t.observe(&stored(6, reducing)).is_empty(), "told once");
        assert_eq!(t.observe(&stored(7, active)).len(), 1);
    }

    #[test]
    fn dollars_read_at_a_glance() {
        assert_eq!(dollars(Decimal::new(123456789, 2), false), "$1,234,567.89");
        assert_eq!(dollars(Decimal::new(-5, 0), true), "−$5.00");
        assert_eq!(dollars(Decimal::new(1230, 2), true), "+$12.30");
        assert_eq!(dollars(Decimal::ZERO, true), "$0.00");
        assert_eq!(price(Decimal::new(5123, 4)), "$0.5123");
    }
}
