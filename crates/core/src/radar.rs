//! The momentum radar's columns, filters and ranking (research/domain.md §2).
//!
//! - `percentage_gain` = (last − previous regular close) / previous close × 100.
//! - `change_1m`, `change_5m` = (close of the last completed minute bar − open of the bar 1 or 5
//!   bars back) / that open × 100; `null` until enough bars exist.
//! - `volume` = shares traded today (the New York date, pre-market included).
//! - `average_volume` = mean daily volume of the previous 10 trading days ([`AVERAGE_VOLUME_DAYS`]).
//! - `relative_volume` is time-of-day adjusted: volume so far today divided by the volume an
//!   average day has traded by the same minute (`average_volume` × the expected cumulative
//!   fraction of a day's volume at that minute, from the market's intraday volume profile).
//! - `float` and `sector` are reference data: the imported values (`instrument_reference`) over
//!   the market source's; `null` when neither knows them (a real market-data feed has no float).
//!
//! Unknown reference data in the filters: a float ceiling (`max_float`) exists to find low
//! floats, so a symbol whose float is unknown does **not** pass it — unless the ceiling is at its
//! maximum ([`NO_FLOAT_CEILING`]), which means "no ceiling" and lets unknown floats through. No
//! filter reads the sector.

use crate::market::{Bar, Price};
use crate::settings::MomentumRadarSettings;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The largest `momentum_radar.max_float` accepted: a ceiling set there is no ceiling, and a
/// symbol whose float is unknown passes it. The settings define it (the validator bounds
/// `max_float` with it); the filter's meaning of it is here.
pub use crate::settings::NO_FLOAT_CEILING;

/// Trading days in `average_volume`: every market source averages a symbol's daily volume over
/// this many previous days, so the radar's relative volume means the same whatever feeds it.
pub const AVERAGE_VOLUME_DAYS: usize = 10;

/// What the radar knows about one symbol at a scan.
#[derive(Clone, Debug)]
pub struct RadarInput<'a> {
    pub symbol: &'a Symbol,
    /// `None` when neither the imported reference data nor the market source knows it.
    pub sector: Option<&'a str>,
    /// Shares in the float; `None` when unknown.
    pub float: Option<u64>,
    pub prev_close: Price,
    pub last: Price,
    pub volume: u64,
    pub average_volume: u64,
    /// Expected fraction of a day's volume traded by now (0..=1).
    pub expected_fraction: f64,
    /// Completed minute bars, oldest first (the last 5 or more).
    pub recent: &'a [Bar],
}

/// One radar row (seed §2.4 plus `relative_volume` and `rank`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RadarRow {
    pub rank: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub symbol: Symbol,
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub price: Price,
    pub percentage_gain: f64,
    pub change_1m: Option<f64>,
    pub change_5m: Option<f64>,
    pub volume: u64,
    pub average_volume: u64,
    pub relative_volume: Option<f64>,
    /// Shares in the float; `null` when unknown (not imported, and the market source has none).
    pub float: Option<u64>,
    /// `null` when unknown (not imported, and the market source has none).
    pub sector: Option<String>,
    #[serde(with = "crate::time::serde_ts")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub captured_at: Timestamp,
    /// The symbol's trading was halted when the scan was published (CONTRACT §11).
    #[serde(default)]
    pub halted: bool,
}

fn pct(from: Price, to: Price) -> Option<f64> {
    (from.0 > 0).then(|| round4((to.0 - from.0) as f64 / from.0 as f64 * 100.0))
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn change_over(recent: &[Bar], bars: usize) -> Option<f64> {
    let last = recent.last()?;
    let first = recent.len().checked_sub(bars).map(|i| &recent[i])?;
    pct(first.open, last.close)
}

fn percentage_gain(input: &RadarInput<'_>) -> f64 {
    pct(input.prev_close, input.last).unwrap_or(0.0)
}

fn relative_volume(input: &RadarInput<'_>) -> Option<f64> {
    let expected = input.average_volume as f64 * input.expected_fraction;
    (expected >= 1.0).then(|| round4(input.volume as f64 / expected))
}

/// The row of one symbol (rank 0 until ranked).
pub fn radar_row(input: &RadarInput<'_>, captured_at: Timestamp) -> RadarRow {
    RadarRow {
        rank: 0,
        symbol: input.symbol.clone(),
        price: input.last,
        percentage_gain: percentage_gain(input),
        change_1m: change_over(input.recent, 1),
        change_5m: change_over(input.recent, 5),
        volume: input.volume,
        average_volume: input.average_volume,
        relative_volume: relative_volume(input),
        float: input.float,
        sector: input.sector.map(str::to_string),
        captured_at,
        halted: false,
    }
}

/// Whether a float passes the ceiling `max_float`: a known float at or under it; an unknown one
/// only when the ceiling is [`NO_FLOAT_CEILING`] (no ceiling). The ceiling is there to find low
/// floats, and an unknown float is not known to be low.
pub fn float_passes(float: Option<u64>, max_float: u64) -> bool {
    match float {
        Some(float) => float <= max_float,
        None => max_float >= NO_FLOAT_CEILING,
    }
}

/// Whether a row passes the radar's filters (an unknown float: see [`float_passes`]).
pub fn passes(row: &RadarRow, f: &MomentumRadarSettings) -> bool {
    screen(
        &Screened {
            symbol: &row.symbol,
            price: row.price,
            percentage_gain: row.percentage_gain,
            relative_volume: row.relative_volume,
            float: row.float,
            volume: row.volume,
        },
        f,
    )
}

/// What the filters read of a row.
struct Screened<'a> {
    symbol: &'a Symbol,
    price: Price,
    percentage_gain: f64,
    relative_volume: Option<f64>,
    float: Option<u64>,
    volume: u64,
}

fn screen(r: &Screened<'_>, f: &MomentumRadarSettings) -> bool {
    let price = r.price.to_decimal();
    price >= f.min_price
        && price <= f.max_price
        && r.percentage_gain >= f.min_percentage_gain
        && r.relative_volume.unwrap_or(0.0) >= f.min_relative_volume
        && float_passes(r.float, f.max_float)
        && r.volume >= f.min_volume
        && (f.universe.is_empty() || f.universe.contains(r.symbol))
}

/// Whether `input`'s row would pass the filters ([`passes`]), from the figures they read alone:
/// most of the market fails them, and a scan makes rows (the sector copied, the changes worked
/// out) of what passes only.
fn input_passes(input: &RadarInput<'_>, f: &MomentumRadarSettings) -> bool {
    screen(
        &Screened {
            symbol: input.symbol,
            price: input.last,
            percentage_gain: percentage_gain(input),
            relative_volume: relative_volume(input),
            float: input.float,
            volume: input.volume,
        },
        f,
    )
}

/// Scores every input, keeps the rows passing the filters, ranks them by gain (ties by symbol)
/// and keeps at most `limit`.
pub fn scan<'a>(
    inputs: impl IntoIterator<Item = RadarInput<'a>>,
    filters: &MomentumRadarSettings,
    captured_at: Timestamp,
    limit: usize,
) -> Vec<RadarRow> {
    let mut rows: Vec<RadarRow> =
        inputs.into_iter().filter(|i| input_passes(i, filters)).map(|i| radar_row(&i, captured_at)).collect();
    rows.sort_by(|a, b| b.percentage_gain.total_cmp(&a.percentage_gain).then_with(|| a.symbol.cmp(&b.symbol)));
    rows.truncate(limit);
    for (i, row) in rows.iter_mut().enumerate() {
        row.rank = i as u32 + 1;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_ts;
    use rust_decimal::Decimal;

    fn bar(open: i64, close: i64) -> Bar {
        let (o, c) = (Price::from_cents(open), Price::from_cents(close));
        Bar {
            start: parse_ts("2026-11-20T14:30:00Z").unwrap(),
            open: o,
            high: o.max(c),
            low: o.min(c),
            close: c,
            volume: 1,
        }
    }

    fn input<'a>(symbol: &'a Symbol, recent: &'a [Bar], prev: i64, last: i64, volume: u64) -> RadarInput<'a> {
        RadarInput {
            symbol,
            sector: Some("Health Care"),
            float: Some(5_000_000),
            prev_close: Price::from_cents(prev),
            last: Price::from_cents(last),
            volume,
            average_volume: 1_000_000,
            expected_fraction: 0.25,
            recent,
        }
    }

    #[test]
    fn columns_follow_their_definitions() {
        let sym = Symbol::parse("ABCD").unwrap();
        let recent = [bar(400, 410), bar(410, 420), bar(420, 430), bar(430, 440), bar(440, 450), bar(450, 460)];
        let row = radar_row(&input(&sym, &recent, 400, 460, 2_500_000), parse_ts("2026-11-20T14:36:00Z").unwrap());
        assert_eq!(row.percentage_gain, 15.0);
        assert_eq!(row.change_1m, Some(2.2222), "(4.60 − 4.50) / 4.50");
        assert_eq!(row.change_5m, Some(12.1951), "(4.60 − 4.10) / 4.10");
        assert_eq!(row.relative_volume, Some(10.0), "2.5M / (1M × 0.25)");
        let few = radar_row(&input(&sym, &recent[..3], 400, 460, 0), row.captured_at);
        assert_eq!(few.change_5m, None);
        assert_eq!(few.relative_volume, Some(0.0));
        let none = radar_row(&input(&sym, &[], 0, 460, 0), row.captured_at);
        assert_eq!((none.change_1m, none.percentage_gain), (None, 0.0));
    }

    #[test]
    fn filters_and_ranking() {
        let names: Vec<Symbol> =
            ["AAA", "BBB", "CCC", "DDD", "EEE"].iter().map(|s| Symbol::parse(s).unwrap()).collect();
        let recent = [bar(100, 101)];
        let inputs = vec![
            input(&names[0], &recent, 500, 600, 3_000_000),   // +20%, rvol 12
            input(&names[1], &recent, 500, 700, 3_000_000),   // +40%
            input(&names[2], &recent, 500, 520, 3_000_000),   // +4%: under min gain
            input(&names[3], &recent, 2000, 2600, 3_000_000), // $26: over max price
            input(&names[4], &recent, 500, 700, 100_000),     // rvol 0.4: under min rvol
        ];
        let f = MomentumRadarSettings::default();
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let rows = scan(inputs.clone(), &f, at, 25);
        let got: Vec<_> = rows.iter().map(|r| (r.rank, r.symbol.as_str())).collect();
        assert_eq!(got, vec![(1, "BBB"), (2, "AAA")]);
        assert_eq!(scan(inputs.clone(), &f, at, 1).len(), 1);
        let wide = MomentumRadarSettings {
            max_price: Decimal::new(100, 0),
            min_percentage_gain: 0.0,
            min_relative_volume: 0.0,
            universe: vec![names[2].clone(), names[3].clone()],
            ..f
        };
        let got: Vec<_> = scan(inputs.clone(), &wide, at, 25).into_iter().map(|r| r.symbol.to_string()).collect();
        assert_eq!(got, vec!["DDD", "CCC"]);
        // The scan screens inputs before making rows: the same verdict as the rows'.
        for filters in [&f, &wide] {
            for i in &inputs {
                assert_eq!(input_passes(i, filters), passes(&radar_row(i, at), filters), "{}", i.symbol);
            }
        }
    }

    /// An unknown float fails a float ceiling (the ceiling finds low floats) unless the ceiling
    /// is the "no ceiling" maximum; a known float is compared as it is; an unknown sector is
    /// `None` on the row and filters nothing.
    #[test]
    fn unknown_float_fails_a_ceiling_and_unknown_sector_is_none() {
        let names: Vec<Symbol> = ["KNOWN", "BIG", "UNKNOWN"].iter().map(|s| Symbol::parse(s).unwrap()).collect();
        let recent = [bar(100, 101)];
        let mut inputs = vec![
            input(&names[0], &recent, 500, 600, 3_000_000),
            input(&names[1], &recent, 500, 600, 3_000_000),
            input(&names[2], &recent, 500, 600, 3_000_000),
        ];
        inputs[1].float = Some(50_000_000);
        inputs[2].float = None;
        inputs[2].sector = None;
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let f = MomentumRadarSettings::default();
        let got: Vec<_> = scan(inputs.clone(), &f, at, 25).into_iter().map(|r| r.symbol.to_string()).collect();
        assert_eq!(got, vec!["KNOWN"], "50M is over the 20M ceiling; unknown is not known to be under it");
        let open = MomentumRadarSettings { max_float: NO_FLOAT_CEILING, ..f };
        let rows = scan(inputs, &open, at, 25);
        let got: Vec<_> = rows.iter().map(|r| (r.symbol.to_string(), r.float, r.sector.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("BIG".into(), Some(50_000_000), Some("Health Care".into())),
                ("KNOWN".into(), Some(5_000_000), Some("Health Care".into())),
                ("UNKNOWN".into(), None, None),
            ]
        );
        assert!(float_passes(Some(20_000_000), 20_000_000) && !float_passes(Some(20_000_001), 20_000_000));
        assert!(!float_passes(None, NO_FLOAT_CEILING - 1) && float_passes(None, NO_FLOAT_CEILING));
        let json = serde_json::to_value(&rows[2]).unwrap();
        assert!(json["float"].is_null() && json["sector"].is_null(), "{json}");
    }
}
