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
