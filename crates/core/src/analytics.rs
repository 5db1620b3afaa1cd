//! Recommendations from completed trades (CONTRACT §4 "Recommendations", §3 `scope_type`).
//!
//! For every scope (symbol, strategy, sector, time of day, price, float, relative volume and gain
//! bands, hold time, day of week) trades are grouped by the scope's value. A group with at least
//! `analytics.min_sample_size` trades — and at least one trade outside it to compare with — gets
//! one recommendation:
//!
//! - its **win rate** (a `WINNER` is a win; `BREAKEVEN` and `LOSER` are not) beside the overall
//!   baseline, with the **Wilson score interval** of the group's rate at
//!   `analytics.confidence_level`;
//! - **`confidence_score`** = 1 − the two-sided p-value of a **two-proportion z-test** of the
//!   group's win rate against the other trades' (pooled variance). 0.99 means a difference this
//!   large would arise by chance about once in a hundred samples.
//! - a sentence: what the group did against the baseline, and — only when `confidence_score`
//!   reaches the confidence level — what to do about it ("consider avoiding them" / "favour
//!   them"); otherwise that the difference is not yet significant.

use crate::trades::{Label, Trade};
use chrono::{Datelike, Timelike};
use chrono_tz::America::New_York;
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `scope_type` (CONTRACT §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ScopeType {
    Symbol,
    Strategy,
    Sector,
    TimeOfDay,
    PriceBand,
    FloatBand,
    RvolBand,
    GainBand,
    HoldTime,
    DayOfWeek,
}

impl ScopeType {
    pub const ALL: [ScopeType; 10] = [
        ScopeType::Symbol,
        ScopeType::Strategy,
        ScopeType::Sector,
        ScopeType::TimeOfDay,
        ScopeType::PriceBand,
        ScopeType::FloatBand,
        ScopeType::RvolBand,
        ScopeType::GainBand,
        ScopeType::HoldTime,
        ScopeType::DayOfWeek,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ScopeType::Symbol => "SYMBOL",
            ScopeType::Strategy => "STRATEGY",
            ScopeType::Sector => "SECTOR",
            ScopeType::TimeOfDay => "TIME_OF_DAY",
            ScopeType::PriceBand => "PRICE_BAND",
            ScopeType::FloatBand => "FLOAT_BAND",
            ScopeType::RvolBand => "RVOL_BAND",
            ScopeType::GainBand => "GAIN_BAND",
            ScopeType::HoldTime => "HOLD_TIME",
            ScopeType::DayOfWeek => "DAY_OF_WEEK",
        }
    }

    pub fn parse(text: &str) -> Option<ScopeType> {
        ScopeType::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// A recommendation row (seed §2 plus the figures behind the sentence).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recommendation {
    /// `<SCOPE_TYPE>:<scope_value>`: stable while the grouping is.
    pub recommendation_id: String,
    pub scope_type: ScopeType,
    pub scope_value: String,
    pub recommendation_text: String,
    /// 1 − p-value of the two-proportion z-test against the other trades (0..1).
    pub confidence_score: f64,
    pub sample_size: u64,
    pub win_rate: f64,
    pub baseline_win_rate: f64,
    /// Wilson score interval of `win_rate` at the configured confidence level.
    pub win_rate_interval: [f64; 2],
    /// Mean net P&L of the group's trades, dollars (of a walk-forward's: the chosen
    /// parameters' mean out-of-sample P&L per window).
    pub average_net_pnl: f64,
    /// The walk-forward sweep a recommendation cites; absent for trade groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub sweep_id: Option<String>,
}

fn band(value: f64, edges: &[(f64, &'static str)], last: &'static str) -> &'static str {
    edges.iter().find(|(edge, _)| value < *edge).map_or(last, |(_, name)| name)
}

/// The group of `trade` under `scope`, with the words that name it; `None` when the trade does
/// not say (a feature unknown at entry).
pub fn scope_of(trade: &Trade, scope: ScopeType) -> Option<(String, String)> {
    let features = trade.detail.features.as_ref();
    let named = |value: &str, words: String| Some((value.to_string(), words));
    match scope {
        ScopeType::Symbol => named(trade.symbol.as_str(), format!("Trades in {}", trade.symbol)),
        ScopeType::Strategy => {
            let id = trade.strategy_id.clone().unwrap_or_else(|| "manual".into());
            let words = if id == "manual" { "Trades opened by hand".into() } else { format!("Trades by {id}") };
            named(&id, words)
        }
        ScopeType::Sector => {
            let sector = features?.sector.clone()?;
            named(&sector, format!("Trades in the {sector} sector"))
        }
        ScopeType::TimeOfDay => {
            let local = trade.entry_time.with_timezone(&New_York);
            let minute = local.hour() * 60 + local.minute();
            let (value, words) = match minute {
                m if m < 570 => ("PRE_MARKET", "Entries before 09:30"),
                m if m < 585 => ("09:30-09:45", "Entries 09:30–09:45"),
                m if m < 630 => ("09:45-10:30", "Entries 09:45–10:30"),
                m if m < 720 => ("10:30-12:00", "Entries 10:30–12:00"),
                m if m < 840 => ("12:00-14:00", "Entries 12:00–14:00"),
                m if m < 960 => ("14:00-16:00", "Entries 14:00–16:00"),
                _ => ("AFTER_HOURS", "Entries after 16:00"),
            };
            named(value, words.into())
        }
        ScopeType::PriceBand => {
            let price = trade.entry_price.to_f64()?;
            let value = band(price, &[(2.0, "<2"), (5.0, "2-5"), (10.0, "5-10"), (20.0, "10-20")], "20+");
            named(value, format!("Entries priced ${}", value.replace('-', "–$").replace("<", "under $")))
        }
        ScopeType::FloatBand => {
            let float = features?.float? as f64;
            let value = band(float, &[(10e6, "<10M"), (20e6, "10M-20M"), (50e6, "20M-50M")], "50M+");
            named(value, format!("Stocks with a float of {}", value.replace('-', "–").replace("<", "under ")))
        }
        ScopeType::RvolBand => {
            let rvol = features?.relative_volume?;
            let value = band(rvol, &[(2.0, "<2"), (5.0, "2-5"), (10.0, "5-10")], "10+");
            named(value, format!("Entries at relative volume {}", value.replace('-', "–").replace("<", "under ")))
        }
        ScopeType::GainBand => {
            let gain = features?.percentage_gain?;
            let value = band(gain, &[(10.0, "<10%"), (20.0, "10-20%"), (50.0, "20-50%")], "50%+");
            named(value, format!("Entries up {} on the day", value.replace('-', "–").replace("<", "under ")))
        }
        ScopeType::HoldTime => {
            let minutes = trade.detail.outcomes.hold_seconds as f64 / 60.0;
            let value = band(minutes, &[(5.0, "<5m"), (15.0, "5-15m"), (60.0, "15-60m")], "60m+");
            let words = value.replace('-', "–").replace("<", "under ").replace('m', " minutes");
            named(value, format!("Trades held {words}"))
        }
        ScopeType::DayOfWeek => {
            let day = trade.entry_time.with_timezone(&New_York).weekday();
            let name = match day {
                chrono::Weekday::Mon => "Monday",
                chrono::Weekday::Tue => "Tuesday",
                chrono::Weekday::Wed => "Wednesday",
                chrono::Weekday::Thu => "Thursday",
                chrono::Weekday::Fri => "Friday",
                chrono::Weekday::Sat => "Saturday",
                chrono::Weekday::Sun => "Sunday",
            };
            named(&name.to_uppercase(), format!("Entries on {name}s"))
        }
    }
}

/// 1 − the two-sided p-value of the sign test of `wins` of `n` paired comparisons (ties left
/// out) against a coin flip: how sure one may be that one side beats the other more often than
/// chance would (the exact binomial, as `confidence_score` is 1 − a p-value). 0 when `n` is 0.
pub fn sign_test_confidence(wins: u64, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let extreme = wins.max(n - wins);
    // P(X ≥ extreme) for X ~ Binomial(n, ½), the terms built up as C(n, k) / 2ⁿ in logs.
    let ln_choose = |k: u64| -> f64 { (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum() };
    let tail: f64 = (extreme..=n).map(|k| (ln_choose(k) - n as f64 * std::f64::consts::LN_2).exp()).sum();
    (1.0 - (2.0 * tail).min(1.0)).clamp(0.0, 1.0)
}

/// Φ, the standard normal CDF (erfc by the Numerical Recipes Chebyshev fit, |error| < 1.2e-7).
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806
                        + t * (0.27886807
                            + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

/// The z with Φ(z) = p (bisection on [`normal_cdf`]).
pub fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-10.0_f64, 10.0_f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The Wilson score interval of `wins` of `n` at two-sided `confidence`.
pub fn wilson_interval(wins: u64, n: u64, confidence: f64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (n, p) = (n as f64, wins as f64 / n as f64);
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    [(centre - margin).max(0.0), (centre + margin).min(1.0)]
}

/// Two-sided p-value of the pooled two-proportion z-test of `w1/n1` against `w2/n2`.
pub fn two_proportion_p_value(w1: u64, n1: u64, w2: u64, n2: u64) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let (p1, p2) = (w1 as f64 / n1 as f64, w2 as f64 / n2 as f64);
    let pooled = (w1 + w2) as f64 / (n1 + n2) as f64;
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 as f64 + 1.0 / n2 as f64)).sqrt();
    if se == 0.0 {
        return 1.0;
    }
    let z = (p1 - p2) / se;
    2.0 * (1.0 - normal_cdf(z.abs()))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// Every recommendation the trades support, by scope type then by confidence (highest first).
pub fn recommendations(trades: &[Trade], min_sample_size: u32, confidence_level: f64) -> Vec<Recommendation> {
    let total = trades.len() as u64;
    if total == 0 {
        return Vec::new();
    }
    let is_win = |t: &Trade| t.winner_loser_label == Label::Winner;
    let wins_all = trades.iter().filter(|t| is_win(t)).count() as u64;
    let baseline = wins_all as f64 / total as f64;
    let mut out = Vec::new();
    for scope in ScopeType::ALL {
        let mut groups: BTreeMap<String, (String, Vec<&Trade>)> = BTreeMap::new();
        for t in trades {
            if let Some((value, words)) = scope_of(t, scope) {
                groups.entry(value).or_insert_with(|| (words, Vec::new())).1.push(t);
            }
        }
        let mut rows = Vec::new();
        for (value, (words, group)) in groups {
            let n = group.len() as u64;
            if n < u64::from(min_sample_size.max(1)) || n == total {
                continue;
            }
            let wins = group.iter().filter(|t| is_win(t)).count() as u64;
            let rate = wins as f64 / n as f64;
            let p_value = two_proportion_p_value(wins, n, wins_all - wins, total - n);
            let confidence = (1.0 - p_value).clamp(0.0, 1.0);
            let interval = wilson_interval(wins, n, confidence_level);
            let average = group.iter().map(|t| t.net_pnl.to_f64().unwrap_or(0.0)).sum::<f64>() / n as f64;
            let advice = if confidence < confidence_level {
                format!("the difference is not yet significant (confidence {confidence:.2})")
            } else if rate < baseline {
                "consider avoiding them or tightening the entry rules for them".to_string()
            } else {
                "consider favouring them, for example with larger size".to_string()
            };
            let text = format!(
                "{words} won {} of {n} trades against {} overall ({:.0}% interval {}–{}), averaging {}${:.2} a \
                 trade; {advice}.",
                pct(rate),
                pct(baseline),
                confidence_level * 100.0,
                pct(interval[0]),
                pct(interval[1]),
                if average < 0.0 { "−" } else { "" },
                average.abs(),
            );
            rows.push(Recommendation {
                recommendation_id: format!("{}:{value}", scope.as_str()),
                scope_type: scope,
                scope_value: value,
                recommendation_text: text,
                confidence_score: confidence,
                sample_size: n,
                win_rate: rate,
                baseline_win_rate: baseline,
                win_rate_interval: interval,
                average_net_pnl: average,
                sweep_id: None,
            });
        }
        rows.sort_by(|a, b| b.confidence_score.total_cmp(&a.confidence_score).then(a.scope_value.cmp(&b.scope_value)));
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trades::{Outcomes, TradeDetail};
    use chrono::TimeZone;
    use rust_decimal::Decimal;

    /// A trade entered at New York `hh:mm` on Monday 2026-03-02, won or lost.
    fn trade(i: usize, hh: u32, mm: u32, win: bool) -> Trade {
        let entry = New_York.with_ymd_and_hms(2026, 3, 2, hh, mm, 0).unwrap().to_utc();
        let net = if win { Decimal::from(30) } else { Decimal::from(-20) };
        Trade {
            trade_id: format!("T{i}"),
            symbol: crate::Symbol::parse(if i.is_multiple_of(2) { "AAA" } else { "BBB" }).unwrap(),
            strategy_id: Some("momentum_breakout".into()),
            entry_time: entry,
            exit_time: entry + chrono::Duration::minutes(10),
            gross_pnl: net,
            net_pnl: net,
            winner_loser_label: if win { Label::Winner } else { Label::Loser },
            quantity: 100,
            entry_price: Decimal::from(4),
            exit_price: Decimal::from(4),
            fees: Decimal::ZERO,
            mode: "PAPER".into(),
            detail: TradeDetail {
                outcomes: Outcomes { hold_seconds: 600, ..Default::default() },
                ..Default::default()
            },
        }
    }

    /// 40 entries 09:30–09:45 winning 10, 60 later entries winning 45: overall 55%.
    fn book() -> Vec<Trade> {
        let early = (0..40).map(|i| trade(i, 9, 35, i < 10));
        let late = (40..100).map(|i| trade(i, 10, 45, i < 85));
        early.chain(late).collect()
    }

    #[test]
    fn the_sign_test_matches_the_binomial() {
        // 7 of 9: P(X >= 7) = (36 + 9 + 1) / 512; two-sided 92 / 512.
        assert!((sign_test_confidence(7, 9) - (1.0 - 92.0 / 512.0)).abs() < 1e-12);
        assert!((sign_test_confidence(2, 9) - sign_test_confidence(7, 9)).abs() < 1e-12, "symmetric");
        assert_eq!(sign_test_confidence(5, 10), 0.0, "an even split says nothing");
        assert_eq!(sign_test_confidence(0, 0), 0.0);
        // 10 of 10: 1 - 2/1024.
        assert!((sign_test_confidence(10, 10) - (1.0 - 2.0 / 1024.0)).abs() < 1e-12);
    }

    #[test]
    fn early_entries_are_flagged_with_a_significant_confidence() {
        let recs = recommendations(&book(), 20, 0.95);
        let early = recs.iter().find(|r| r.recommendation_id == "TIME_OF_DAY:09:30-09:45").expect("a row");
        assert_eq!((early.sample_size, early.win_rate, early.baseline_win_rate), (40, 0.25, 0.55));
        // Pooled p = 0.55, se = √(0.55 × 0.45 × (1/40 + 1/60)) = 0.101550, z = −0.5 / se = −4.924:
        // p ≈ 8.5e-7.
        assert!(early.confidence_score > 0.99999 && early.confidence_score < 1.0, "{}", early.confidence_score);
        // Wilson at 95%: 0.2719 ± 0.1300.
        assert!((early.win_rate_interval[0] - 0.14188).abs() < 1e-4, "{:?}", early.win_rate_interval);
        assert!((early.win_rate_interval[1] - 0.40194).abs() < 1e-4, "{:?}", early.win_rate_interval);
        assert_eq!(
            early.recommendation_text,
            "Entries 09:30–09:45 won 25% of 40 trades against 55% overall (95% interval 14%–40%), averaging \
             −$7.50 a trade; consider avoiding them or tightening the entry rules for them."
        );
        let late = recs.iter().find(|r| r.recommendation_id == "TIME_OF_DAY:10:30-12:00").expect("a row");
        assert!(
            late.recommendation_text.contains("won 75% of 60 trades") && late.recommendation_text.contains("favouring")
        );
    }

    #[test]
    fn small_groups_and_groups_without_contrast_give_nothing() {
        let recs = recommendations(&book(), 41, 0.95);
        assert!(recs.iter().all(|r| r.sample_size >= 41), "{recs:?}");
        assert!(recs.iter().any(|r| r.recommendation_id == "TIME_OF_DAY:10:30-12:00"));
        // Every trade is by one strategy and held 10 minutes: nothing to compare against.
        assert!(recs.iter().all(|r| r.scope_type != ScopeType::Strategy && r.scope_type != ScopeType::HoldTime));
        assert!(recommendations(&[], 1, 0.95).is_empty());
    }

    #[test]
    fn an_even_split_is_not_significant() {
        // Symbols alternate, and both win at the same rate: no advice.
        let trades: Vec<Trade> = (0..40).map(|i| trade(i, 10, 45, i % 4 < 2)).collect();
        let recs = recommendations(&trades, 10, 0.95);
        let aaa = recs.iter().find(|r| r.recommendation_id == "SYMBOL:AAA").expect("a row");
        assert_eq!((aaa.win_rate, aaa.baseline_win_rate), (0.5, 0.5));
        assert!(aaa.confidence_score.abs() < 1e-6);
        assert!(aaa.recommendation_text.ends_with("the difference is not yet significant (confidence 0.00)."));
    }

    /// Each scope names the group of a trade from its own field: price, float, relative volume
    /// and gain bands at their edges, the sector, hold time and weekday.
    #[test]
    fn every_scope_groups_a_trade_by_its_own_feature() {
        let mut t = trade(1, 9, 35, true);
        t.entry_price = Decimal::from(5);
        t.entry_time = New_York.with_ymd_and_hms(2026, 3, 5, 9, 35, 0).unwrap().to_utc();
        t.detail.outcomes.hold_seconds = 15 * 60;
        t.detail.features = Some(crate::trades::Features {
            float: Some(9_999_999),
            relative_volume: Some(5.0),
            percentage_gain: Some(19.99),
            sector: Some("Healthcare".into()),
            ..Default::default()
        });
        let group = |t: &Trade, scope| scope_of(t, scope).map(|(value, _)| value);
        let expected = [
            (ScopeType::Symbol, "BBB"),
            (ScopeType::Strategy, "momentum_breakout"),
            (ScopeType::Sector, "Healthcare"),
            (ScopeType::TimeOfDay, "09:30-09:45"),
            (ScopeType::PriceBand, "5-10"),
            (ScopeType::FloatBand, "<10M"),
            (ScopeType::RvolBand, "5-10"),
            (ScopeType::GainBand, "10-20%"),
            (ScopeType::HoldTime, "15-60m"),
            (ScopeType::DayOfWeek, "THURSDAY"),
        ];
        for (scope, value) in expected {
            assert_eq!(group(&t, scope).as_deref(), Some(value), "{scope:?}");
        }
        assert_eq!(scope_of(&t, ScopeType::FloatBand).unwrap().1, "Stocks with a float of under 10M");
        // A trade without features is in no feature group.
        t.detail.features = None;
        assert_eq!(group(&t, ScopeType::FloatBand), None);
        assert_eq!(group(&t, ScopeType::PriceBand).as_deref(), Some("5-10"), "the price is the trade's own");
    }

    /// 30 low-float entries winning 24 against 30 others winning 6: 80% against 50% overall.
    #[test]
    fn low_float_entries_are_favoured_with_a_known_interval_and_confidence() {
        let trades: Vec<Trade> = (0..60)
            .map(|i| {
                let low = i < 30;
                let mut t = trade(i, 10, 45, if low { i < 24 } else { i < 36 });
                let float = if low { 5_000_000 } else { 80_000_000 };
                t.detail.features = Some(crate::trades::Features { float: Some(float), ..Default::default() });
                t
            })
            .collect();
        let recs = recommendations(&trades, 20, 0.95);
        let low = recs.iter().find(|r| r.recommendation_id == "FLOAT_BAND:<10M").expect("a row");
        assert_eq!((low.sample_size, low.win_rate, low.baseline_win_rate), (30, 0.8, 0.5));
        // Pooled p = 0.5, se = √(0.25 × 2/30) = 0.129099, z = 0.6 / se = 4.6476: p ≈ 3.36e-6.
        assert!((low.confidence_score - (1.0 - 3.3585e-6)).abs() < 1e-8, "{}", low.confidence_score);
        // Wilson at 95% of 24/30: 0.62694–0.90495.
        assert!((low.win_rate_interval[0] - 0.62694).abs() < 1e-4, "{:?}", low.win_rate_interval);
        assert!((low.win_rate_interval[1] - 0.90495).abs() < 1e-4, "{:?}", low.win_rate_interval);
        assert!(low
            .recommendation_text
            .starts_with("Stocks with a float of under 10M won 80% of 30 trades against 50% overall"));
        let high = recs.iter().find(|r| r.recommendation_id == "FLOAT_BAND:50M+").expect("a row");
        assert_eq!((high.sample_size, high.win_rate), (30, 0.2));
    }

    #[test]
    fn the_normal_distribution_is_accurate() {
        assert!((normal_cdf(1.959964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158655).abs() < 1e-6);
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-5);
        assert!((two_proportion_p_value(10, 40, 45, 60) - 8.49e-7).abs() < 5e-8);
    }
}
