use super::*;

fn price(dollars: f64) -> Price {
    Price::from_f64_tick(dollars)
}

#[test]
fn band_percentages_follow_the_previous_close() {
    // (reference, previous close, session minute, expected half-width)
    let cases = [
        (10.0, 10.0, 100, 1.0), // above $3: 10 %
        (10.0, 3.01, 100, 1.0), // just above $3
        (2.0, 3.0, 100, 0.4),   // $0.75–$3.00: 20 %
        (2.0, 0.75, 100, 0.4),  // the lower edge of that tier
        (0.5, 0.74, 100, 0.15), // below $0.75: the lesser of $0.15 …
        (0.1, 0.5, 100, 0.075), // … or 75 %
    ];
    for (reference, prev_close, minute, width) in cases {
        let got = band_width(reference, prev_close, minute);
        assert!((got - width).abs() < 1e-12, "{reference} {prev_close} {minute}: {got} vs {width}");
    }
}

#[test]
fn bands_double_at_the_open_for_all_and_near_the_close_only_up_to_three_dollars() {
    // (previous close, session minute, doubled)
    let cases = [
        (10.0, 0, true),
        (10.0, 14, true),   // 9:44
        (10.0, 15, false),  // 9:45
        (10.0, 364, false), // 15:34
        (10.0, 365, false), // 15:35: Amendment 18, a Tier 2 stock above $3 stays at 10 %
        (10.0, 389, false),
        (3.0, 364, false),
        (3.0, 365, true), // at or below $3.00: doubled from 15:35
        (3.0, 389, true),
        (0.5, 370, true),
        (3.0, 14, true),
    ];
    for (prev_close, minute, doubled) in cases {
        let base = band_width(1.0, prev_close, 100);
        let got = band_width(1.0, prev_close, minute);
        let factor = if doubled { 2.0 } else { 1.0 };
        assert!((got - factor * base).abs() < 1e-12, "{prev_close} at {minute}: {got} vs {base}");
    }
}

#[test]
fn bands_are_rounded_inwards_on_the_tick_grid() {
    let band = Band::around(10.004, 10.0, 100);
    assert_eq!((band.lower, band.upper), (price(9.01), price(11.0)));
    let exact = Band::around(10.0, 10.0, 100);
    assert_eq!((exact.lower, exact.upper), (price(9.0), price(11.0)), "on the grid up to float error");
    let penny = Band::around(0.1, 0.5, 100);
    assert_eq!((penny.lower, penny.upper), (Price(250), Price(1_750)));
    let floor = Band::around(0.1, 0.5, 0);
    assert_eq!(floor.lower, Price(1), "never under one tick");
    assert_eq!(exact.clip(price(12.0)), price(11.0));
    assert!(exact.contains(price(9.0)) && !exact.contains(price(8.99)));
}

#[test]
fn the_reference_is_the_mean_of_the_last_five_minutes_or_the_open() {
    let mut r = ReferencePrice::default();
    assert_eq!(r.at(570, price(10.0)), 10.0, "the session's first reference is its open");
    for (m, close) in [(570, 10.0), (571, 11.0), (572, 12.0), (573, 13.0), (574, 14.0), (575, 15.0)] {
        r.push(m, price(close));
    }
    assert!((r.at(576, price(1.0)) - 13.0).abs() < 1e-9, "571–575");
    assert!((r.at(579, price(1.0)) - 14.5).abs() < 1e-9, "574–575 (no trades since)");
    assert_eq!(r.at(581, price(20.0)), 20.0, "none in the last five: the reopening price");
}
