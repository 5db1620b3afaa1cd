//! Quotes around the last trade: the spread widens for cheap and thinly traded names, as on a
//! real small-cap tape.

use tradeops_core::market::{Price, Quote};

/// The quoted spread, in dollars, for a price and typical daily volume: about 5 basis points for
/// liquid names, up to 1% for illiquid ones, never under one tick.
pub fn spread(price: Price, average_volume: u64) -> Price {
    let p = price.to_f64();
    let liquidity = (1_000_000.0 / average_volume.max(1) as f64).sqrt().clamp(1.0, 20.0);
    let tick = if p >= 1.0 { 100 } else { 1 };
    let raw = (p * 0.0005 * liquidity * Price::SCALE as f64).round() as i64;
    Price(((raw + tick - 1) / tick).max(1) * tick)
}

/// How many times wider the spread is outside the regular session (CONTRACT §12): the
/// pre-market's and the after-hours' books are thin, a few makers and few resting orders.
pub const EXTENDED_SPREAD_FACTOR: i64 = 4;

/// A quote around `last`: bid and ask straddle it by half the spread each (the ask takes the odd
/// tick); sizes scale with the volume.
pub fn quote_around(last: Price, average_volume: u64) -> Quote {
    quote_in_session(last, average_volume, false)
}

/// [`quote_around`], the spread [`EXTENDED_SPREAD_FACTOR`] times wider and the sizes a tenth
/// when `extended` (in the pre-market or the after-hours).
pub fn quote_in_session(last: Price, average_volume: u64, extended: bool) -> Quote {
    let tick = if last.0 >= Price::SCALE { 100 } else { 1 };
    let spread = match extended {
        true => Price(spread(last, average_volume).0 * EXTENDED_SPREAD_FACTOR),
        false => spread(last, average_volume),
    };
    let half = (spread.0 / 2 / tick) * tick;
    let bid = Price((last.0 - half).max(tick));
    let ask = Price(bid.0 + spread.0.max(tick));
    let size = (average_volume / 2_000).clamp(1, 50) * 100;
    let size = if extended { (size / 10).max(100) } else { size };
    Quote { bid, ask, bid_size: size, ask_size: size }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_are_ticks_and_widen_when_thin() {
        let liquid = spread(Price::from_cents(1000), 5_000_000);
        let thin = spread(Price::from_cents(1000), 20_000);
        assert_eq!(liquid, Price::from_cents(1), "one cent on a liquid $10 name");
        assert_eq!(thin, Price::from_cents(4), "four cents when thin");
        let q = quote_around(Price::from_cents(1000), 20_000);
        assert_eq!((q.bid, q.ask), (Price::from_cents(998), Price::from_cents(1002)), "centred on the last trade");
        let penny = quote_around(Price(5_000), 100_000);
        assert_eq!((penny.bid, penny.ask), (Price(4_996), Price(5_004)), "sub-dollar: ticks of $0.0001");
    }

    #[test]
    fn outside_the_regular_session_the_spread_is_four_times_wider_and_the_book_thinner() {
        let regular = quote_in_session(Price::from_cents(1000), 20_000, false);
        let extended = quote_in_session(Price::from_cents(1000), 20_000, true);
        assert_eq!((extended.bid, extended.ask), (Price::from_cents(992), Price::from_cents(1008)));
        assert_eq!(extended.ask.0 - extended.bid.0, 4 * (regular.ask.0 - regular.bid.0));
        assert_eq!((regular.bid_size, extended.bid_size), (1_000, 100));
    }
}
