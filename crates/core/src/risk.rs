//! The pre-trade risk gate (CONTRACT §5, research/domain.md §3.2): every order is checked before
//! it leaves, fail-fast in a fixed order, and the answer is [`Verdict::Approved`] or a
//! [`Refusal`] naming the rule with its limit and the current value — never a bare bool.
//!
//! Trading is long only: a `BUY` opens or adds risk, a `SELL` reduces it. While `HALTED` only
//! sells pass (closing positions stays possible); while `REDUCING` (the daily loss limit was
//! reached) buys are refused as `MAX_DAILY_LOSS`.
//!
//! The size rules (`MAX_ORDER_VALUE`, `MAX_POSITION_SIZE`, `BUYING_POWER`) also size entries:
//! [`BuyRoom`] is the most shares each allows, so the engine sends the largest entry the gate
//! approves rather than one it refuses. A market buy is valued at its fill price where the venue
//! states it (a backtest), else at the last trade, plus `risk_controls.market_buy_buffer_pct`.

use crate::market::Side;
use crate::orders::{ClientOrderId, OrderStatus, OrderType};
use crate::settings::RiskControls;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TradingState {
    #[default]
    Active,
    /// Only risk-reducing orders (the daily loss limit was reached).
    Reducing,
    /// Emergency halt: nothing new until an operator resumes.
    Halted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RiskRule {
    MaxDailyLoss,
    MaxPositionSize,
    MaxTradesPerDay,
    ActiveWatchlistLimit,
    OpenPositionLimit,
    SymbolBlocked,
    BuyingPower,
    PriceCollar,
    MaxOrderValue,
    /// Not a refusal: an order the emergency halt was cancelling filled while `HALTED` (the
    /// shares are exited at once). Recorded as a violation row.
    FillWhileHalted,
    /// Not a refusal: a strategy position whose stop could not be placed at the broker in time
    /// (`risk_controls.require_broker_stop`, CONTRACT §11) is sold. Recorded as a violation row.
    BrokerStopMissing,
}

impl RiskRule {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskRule::MaxDailyLoss => "MAX_DAILY_LOSS",
            RiskRule::MaxPositionSize => "MAX_POSITION_SIZE",
            RiskRule::MaxTradesPerDay => "MAX_TRADES_PER_DAY",
            RiskRule::ActiveWatchlistLimit => "ACTIVE_WATCHLIST_LIMIT",
            RiskRule::OpenPositionLimit => "OPEN_POSITION_LIMIT",
            RiskRule::SymbolBlocked => "SYMBOL_BLOCKED",
            RiskRule::BuyingPower => "BUYING_POWER",
            RiskRule::PriceCollar => "PRICE_COLLAR",
            RiskRule::MaxOrderValue => "MAX_ORDER_VALUE",
            RiskRule::FillWhileHalted => "FILL_WHILE_HALTED",
            RiskRule::BrokerStopMissing => "BROKER_STOP_MISSING",
        }
    }
}

/// An order about to be sent.
#[derive(Clone, Debug)]
pub struct OrderIntent<'a> {
    pub client_order_id: &'a ClientOrderId,
    pub symbol: &'a Symbol,
    pub side: Side,
    pub order_type: OrderType,
    pub quantity: u64,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
}

/// An order of the last moments, for the duplicate window.
#[derive(Clone, Debug)]
pub struct RecentOrder {
    pub client_order_id: ClientOrderId,
    pub symbol: Symbol,
    pub side: Side,
    pub quantity: u64,
    pub submitted_at: Timestamp,
}

/// What the gate knows when it checks an order.
#[derive(Clone, Debug)]
pub struct RiskSnapshot<'a> {
    pub trading_state: TradingState,
    pub limits: &'a RiskControls,
    pub blocked: bool,
    /// Last trade of the symbol; `None` when the market has none.
    pub last_price: Option<Decimal>,
    /// The price a market order sent now fills at, when the venue states it (a backtest's fill
    /// model: the next bar's open); `None` live, where the last trade stands for it.
    pub market_fill: Option<Decimal>,
    /// Shares held.
    pub position: u64,
    /// Shares still to fill on working buy and sell orders of the symbol.
    pub open_buy_quantity: u64,
    pub open_sell_quantity: u64,
    /// Symbols with a position or a working buy order.
    pub open_positions: u32,
    /// Orders that opened or added to a position today.
    pub trades_today: u32,
    /// Realized plus unrealized P&L today (a loss is negative).
    pub daily_pnl: Decimal,
    /// Buying power left after what working buy orders reserve.
    pub buying_power: Decimal,
    /// Whether this client order id was ever used.
    pub client_order_id_used: bool,
    pub recent_orders: &'a [RecentOrder],
}

/// A risk rule's refusal: `detail.rule`, `detail.limit`, `detail.current` of `RISK_BLOCKED`.
#[derive(Clone, Debug, PartialEq)]
pub struct RiskRefusal {
    pub rule: RiskRule,
    pub limit: RiskFigure,
    pub current: RiskFigure,
    pub message: String,
}

/// A limit or current value of a [`RiskRefusal`], as `RISK_BLOCKED`'s `detail` and a violation
/// row show it: money and percentages as JSON numbers (floats), counts and shares as integers,
/// a symbol as its text, an active block as `{"block_scope", "reason"}`, no figure as `null`.
#[derive(Clone, Debug, PartialEq)]
pub enum RiskFigure {
    /// Dollars (shown as a float, as the API shows money).
    Money(Decimal),
    /// A percentage (the price collar's).
    Percent(f64),
    /// A count of trades, positions or watched symbols.
    Count(u64),
    /// A number of shares.
    Shares(u64),
    /// The symbol refused.
    Symbol(Symbol),
    /// The active block of the symbol refused.
    Block { block_scope: String, reason: String },
    /// The rule has no such figure (a block has no limit).
    None,
}

impl Serialize for RiskFigure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RiskFigure::Money(dollars) => serializer.serialize_f64(f64_of(*dollars)),
            RiskFigure::Percent(pct) => serializer.serialize_f64(*pct),
            RiskFigure::Count(n) | RiskFigure::Shares(n) => serializer.serialize_u64(*n),
            RiskFigure::Symbol(symbol) => symbol.serialize(serializer),
            RiskFigure::Block { block_scope, reason } => {
                let mut block = serializer.serialize_struct("Block", 2)?;
                block.serialize_field("block_scope", block_scope)?;
                block.serialize_field("reason", reason)?;
                block.end()
            }
            RiskFigure::None => serializer.serialize_none(),
        }
    }
}

/// The `detail` of a violation row and of its `risk.violation` event.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ViolationDetail {
    /// A refusal: `{"limit", "current", "message"}`.
    Refused { limit: RiskFigure, current: RiskFigure, message: String },
    /// A buy the emergency halt was cancelling filled (`FILL_WHILE_HALTED`).
    FillWhileHalted { message: String, quantity: u64, price: Decimal, order_status: OrderStatus },
}

impl ViolationDetail {
    /// The detail of `refusal`'s violation row.
    pub fn of(refusal: &RiskRefusal) -> ViolationDetail {
        ViolationDetail::Refused {
            limit: refusal.limit.clone(),
            current: refusal.current.clone(),
            message: refusal.message.clone(),
        }
    }
}

/// Why an order may not leave.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// `EMERGENCY_HALT_ACTIVE`.
    Halted,
    /// `RISK_BLOCKED` with a violation row.
    Risk(Box<RiskRefusal>),
    /// `DUPLICATE_ORDER_BLOCKED`.
    Duplicate { existing: ClientOrderId, message: String },
    /// `VALIDATION_ERROR`: the order itself is not sound.
    Invalid { field: &'static str, reason: String },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Approved,
    Refused(Refusal),
}

fn risk(rule: RiskRule, limit: RiskFigure, current: RiskFigure, message: String) -> Verdict {
    Verdict::Refused(Refusal::Risk(Box::new(RiskRefusal { rule, limit, current, message })))
}

fn f64_of(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

/// What a buy is valued at: its limit, else its stop, else the market order's fill price where
/// known (`market_fill`), else the last trade; positive prices only.
pub fn reference_price(
    limit: Option<Decimal>,
    stop: Option<Decimal>,
    market_fill: Option<Decimal>,
    last: Option<Decimal>,
) -> Option<Decimal> {
    let positive = |p: &Decimal| *p > Decimal::ZERO;
    limit.or(stop).or(market_fill.filter(positive)).or(last.filter(positive))
}

/// floor(`dollars` / `per_share`) whole shares (0 for no dollars), exactly: in 128-bit integers
/// where they hold the operands (every entry is sized, and a `Decimal` division costs more than the
/// rest of the sizing), else in `Decimal`.
pub fn whole_shares(dollars: Decimal, per_share: Decimal) -> u64 {
    if dollars <= Decimal::ZERO || per_share <= Decimal::ZERO {
        return 0;
    }
    // dollars = a / 10^s, per share = b / 10^t: floor(a × 10^t / (b × 10^s)).
    let exact = || {
        let numerator = dollars.mantissa().checked_mul(10i128.checked_pow(per_share.scale())?)?;
        let denominator = per_share.mantissa().checked_mul(10i128.checked_pow(dollars.scale())?)?;
        Some(u64::try_from(numerator / denominator).unwrap_or(u64::MAX))
    };
    exact().unwrap_or_else(|| (dollars / per_share).floor().to_u64().unwrap_or(u64::MAX))
}

/// The size rules of a buy, in the gate's order: the most shares each allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BuyRoom {
    /// The price the buy is valued at (see [`check`]).
    pub reference: Decimal,
    /// `MAX_ORDER_VALUE`: floor(max order value / reference).
    pub order_value: u64,
    /// `MAX_POSITION_SIZE`: the maximum position less what is held and being bought.
    pub position_size: u64,
    /// `BUYING_POWER`: floor(buying power / (reference × the market buy factor for market orders)).
    pub buying_power: u64,
}

impl BuyRoom {
    /// The room of a buy of `order_type` at `limit`/`stop` under `s`; `None` without a price to
    /// value it at.
    pub fn of(
        order_type: OrderType,
        limit: Option<Decimal>,
        stop: Option<Decimal>,
        s: &RiskSnapshot<'_>,
    ) -> Option<BuyRoom> {
        let reference = reference_price(limit, stop, s.market_fill, s.last_price).filter(|p| *p > Decimal::ZERO)?;
        Some(BuyRoom::new(s.limits, order_type, reference, s.position + s.open_buy_quantity, s.buying_power))
    }

    /// The room of a buy of `order_type` valued at `reference` (see [`reference_price`]), with
    /// `held` shares held and being bought and `buying_power` left.
    pub fn new(
        limits: &RiskControls,
        order_type: OrderType,
        reference: Decimal,
        held: u64,
        buying_power: Decimal,
    ) -> BuyRoom {
        let shares = whole_shares;
        let per_share =
            if order_type == OrderType::Market { reference * limits.market_buy_factor() } else { reference };
        BuyRoom {
            reference,
            order_value: shares(limits.max_order_value, reference),
            position_size: limits.max_position_size.saturating_sub(held),
            buying_power: shares(buying_power, per_share),
        }
    }

    /// The largest buy of at most `wanted` shares (`None`: as many as buying power takes) these
    /// rules allow, and the rule that bound it below `wanted` (`None` when nothing did, and for
    /// buying power when it was all that was asked for).
    pub fn size(&self, wanted: Option<u64>) -> (u64, Option<(RiskRule, u64)>) {
        let mut size = wanted.unwrap_or(self.buying_power);
        let mut bound = None;
        let rules = [
            (RiskRule::MaxOrderValue, self.order_value),
            (RiskRule::MaxPositionSize, self.position_size),
            (RiskRule::BuyingPower, self.buying_power),
        ];
        for (rule, room) in rules {
            if room < size {
                size = room;
                bound = Some((rule, room));
            }
        }
        (size, bound)
    }
}

/// Checks one order. Fails fast in a fixed order.
pub fn check(order: &OrderIntent<'_>, s: &RiskSnapshot<'_>, now: Timestamp) -> Verdict {
    let limits = s.limits;
    let buy = order.side == Side::Buy;
    let qty = Decimal::from(order.quantity);

    // 1. Trading state.
    if buy {
        match s.trading_state {
            TradingState::Halted => return Verdict::Refused(Refusal::Halted),
            TradingState::Reducing => {
                return risk(
                    RiskRule::MaxDailyLoss,
                    RiskFigure::Money(limits.max_daily_loss),
                    RiskFigure::Money(-s.daily_pnl),
                    "The daily loss limit was reached: only orders that reduce a position are allowed".into(),
                );
            }
            TradingState::Active => {}
        }
    }
    // 2. Order sanity.
    if order.quantity == 0 {
        return Verdict::Refused(Refusal::Invalid { field: "quantity", reason: "must be at least 1".into() });
    }
    let needs_limit = matches!(order.order_type, OrderType::Limit | OrderType::StopLimit);
    let needs_stop = matches!(order.order_type, OrderType::Stop | OrderType::StopLimit);
    if needs_limit != order.limit_price.is_some() {
        let reason = if needs_limit {
            "is required for LIMIT and STOP_LIMIT orders"
        } else {
            "is only for LIMIT and STOP_LIMIT orders"
        };
        return Verdict::Refused(Refusal::Invalid { field: "limit_price", reason: reason.into() });
    }
    if needs_stop != order.stop_price.is_some() {
        let reason = if needs_stop {
            "is required for STOP and STOP_LIMIT orders"
        } else {
            "is only for STOP and STOP_LIMIT orders"
        };
        return Verdict::Refused(Refusal::Invalid { field: "stop_price", reason: reason.into() });
    }
    if !buy {
        let available = s.position.saturating_sub(s.open_sell_quantity);
        if order.quantity > available {
            return Verdict::Refused(Refusal::Invalid {
                field: "quantity",
                reason: format!(
                    "sell of {} exceeds the {available} shares held and not already being sold (no short selling)",
                    order.quantity
                ),
            });
        }
    }
    // 3. Duplicates.
    if s.client_order_id_used {
        return Verdict::Refused(Refusal::Duplicate {
            existing: order.client_order_id.clone(),
            message: format!("client_order_id {} was already used", order.client_order_id),
        });
    }
    let window = chrono::Duration::seconds(limits.duplicate_order_window_seconds.into());
    if let Some(previous) = s.recent_orders.iter().find(|r| {
        r.symbol == *order.symbol
            && r.side == order.side
            && r.quantity == order.quantity
            && now - r.submitted_at < window
    }) {
        return Verdict::Refused(Refusal::Duplicate {
            existing: previous.client_order_id.clone(),
            message: format!(
                "The same {} {} {} was submitted {} s ago (window {} s)",
                order.side.as_str(),
                order.quantity,
                order.symbol,
                (now - previous.submitted_at).num_seconds(),
                limits.duplicate_order_window_seconds
            ),
        });
    }
    // 4. Price collar: limit and stop prices near the last trade.
    if let Some(last) = s.last_price.filter(|p| *p > Decimal::ZERO) {
        for price in [order.limit_price, order.stop_price].into_iter().flatten() {
            let distance = f64_of((price - last).abs() / last * Decimal::ONE_HUNDRED);
            if distance > limits.price_collar_pct {
                return risk(
                    RiskRule::PriceCollar,
                    RiskFigure::Percent(limits.price_collar_pct),
                    RiskFigure::Percent((distance * 100.0).round() / 100.0),
                    format!(
                        "Price {price} is {distance:.2}% from the last trade {last} (collar {}%)",
                        limits.price_collar_pct
                    ),
                );
            }
        }
    }
    if !buy {
        return Verdict::Approved;
    }
    // Buys from here: they open or add risk.
    if s.blocked {
        let (limit, current) = (RiskFigure::None, RiskFigure::Symbol(order.symbol.clone()));
        return risk(RiskRule::SymbolBlocked, limit, current, format!("{} is blocked", order.symbol));
    }
    let Some(reference) = reference_price(order.limit_price, order.stop_price, s.market_fill, s.last_price) else {
        return Verdict::Refused(Refusal::Invalid {
            field: "symbol",
            reason: "has no market price to value the order".into(),
        });
    };
    let notional = qty * reference;
    if notional > limits.max_order_value {
        return risk(
            RiskRule::MaxOrderValue,
            RiskFigure::Money(limits.max_order_value),
            RiskFigure::Money(notional.round_dp(2)),
            format!("Order value {} exceeds the maximum {}", notional.round_dp(2), limits.max_order_value),
        );
    }
    let after = s.position + s.open_buy_quantity + order.quantity;
    if after > limits.max_position_size {
        return risk(
            RiskRule::MaxPositionSize,
            RiskFigure::Shares(limits.max_position_size),
            RiskFigure::Shares(after),
            format!("{after} shares would exceed the maximum position of {}", limits.max_position_size),
        );
    }
    let opens_symbol = s.position == 0 && s.open_buy_quantity == 0;
    if opens_symbol && s.open_positions >= limits.open_position_limit {
        return risk(
            RiskRule::OpenPositionLimit,
            RiskFigure::Count(limits.open_position_limit.into()),
            RiskFigure::Count(s.open_positions.into()),
            format!("{} positions are open (limit {})", s.open_positions, limits.open_position_limit),
        );
    }
    if s.trades_today >= limits.max_trades_per_day {
        return risk(
            RiskRule::MaxTradesPerDay,
            RiskFigure::Count(limits.max_trades_per_day.into()),
            RiskFigure::Count(s.trades_today.into()),
            format!("{} trades today (limit {})", s.trades_today, limits.max_trades_per_day),
        );
    }
    if -s.daily_pnl >= limits.max_daily_loss {
        return risk(
            RiskRule::MaxDailyLoss,
            RiskFigure::Money(limits.max_daily_loss),
            RiskFigure::Money(-s.daily_pnl),
            format!("Today's loss {} reached the limit {}", (-s.daily_pnl).round_dp(2), limits.max_daily_loss),
        );
    }
    let reserve = if order.order_type == OrderType::Market { notional * limits.market_buy_factor() } else { notional };
    if reserve > s.buying_power {
        return risk(
            RiskRule::BuyingPower,
            RiskFigure::Money(s.buying_power.round_dp(2)),
            RiskFigure::Money(reserve.round_dp(2)),
            format!("Order needs {} of buying power; {} is available", reserve.round_dp(2), s.buying_power.round_dp(2)),
        );
    }
    Verdict::Approved
}

#[cfg(test)]
mod tests;
