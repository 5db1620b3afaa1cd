//! Tests of [`WithReference`] over a market source that knows float and sector: the simulated
//! market.

use super::*;
use crate::simulated::SimulatedMarket;
use tradeops_core::reference::parse_reference_csv;

/// An imported float replaces the market's; a symbol not imported keeps the market's values;
/// the backtest history carries the same.
#[test]
fn imported_values_replace_the_markets_in_instruments_and_history() {
    let sim = SimulatedMarket::new(7, 20);
    let (a, b) = (sim.universe.symbols[0].symbol.clone(), sim.universe.symbols[1].symbol.clone());
    let reference = Arc::new(ReferenceData::default());
    let market = WithReference::new(Arc::new(sim), reference.clone());
    let before = market.instrument(&a).unwrap();
    assert!(before.float.is_some() && before.sector.is_some(), "the simulated market knows both");
    reference.replace(ReferenceBook::new(parse_reference_csv(&format!("symbol,float,sector\n{a},1234,\n")).unwrap()));
    let after = market.instrument(&a).unwrap();
    assert_eq!((after.float, after.sector), (Some(1234), before.sector), "an empty cell keeps the market's");
    assert_eq!(market.instrument(&b), market.inner.instrument(&b));
    let history = market.history(&a, MarketCalendar::new(Default::default())).unwrap();
    assert_eq!(history.float(), Some(1234));
}

/// A history made from bars, given the imported float, still gives its bars' New York dates:
/// every run of a sweep over those bars reads them there instead of working out the calendar.
#[test]
fn a_history_with_imported_values_keeps_its_bars_dates() {
    let csv = "timestamp,open,high,low,close,volume\n2026-03-02,10,11,9,10.5,100\n2026-03-03,10.5,12,10,11,200\n";
    let bars = tradeops_core::csv_bars::parse_bars_csv(csv, Timeframe::Day).unwrap();
    let own = tradeops_core::backtest::BarHistory::new(&bars, Timeframe::Day);
    let dates = own.ny_dates().expect("a history made from bars keeps their dates");
    let reference = ReferenceData::default();
    let symbol = Symbol::parse("ABC").unwrap();
    reference.replace(ReferenceBook::new(parse_reference_csv("symbol,float,sector\nABC,1234,Tech\n").unwrap()));
    let history = reference.history(&symbol, Box::new(own));
    assert_eq!(history.float(), Some(1234));
    let passed = history.ny_dates().expect("the dates passed on");
    assert!(Arc::ptr_eq(&passed, &dates), "the same dates, not worked out again");
}
