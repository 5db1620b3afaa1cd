//! The symbol universe: made-up but plausible listed symbols with sector, float, average daily
//! volume, price level and volatility, skewed towards the small caps momentum traders watch.
//! Symbol `i` depends only on (seed, i): a larger universe extends a smaller one.

use crate::rng::{mix, Rng};
use std::collections::HashMap;
use tradeops_core::Symbol;

/// Sectors (GICS names) and their weights among small caps.
pub const SECTORS: &[(&str, u32)] = &[
    ("Health Care", 22),
    ("Information Technology", 16),
    ("Industrials", 11),
    ("Consumer Discretionary", 11),
    ("Financials", 10),
    ("Energy", 7),
    ("Communication Services", 6),
    ("Materials", 6),
    ("Real Estate", 5),
    ("Consumer Staples", 4),
    ("Utilities", 2),
];

#[derive(Clone, Debug, PartialEq)]
pub struct SymbolProfile {
    pub index: usize,
    pub symbol: Symbol,
    pub sector: &'static str,
    /// Shares available to trade.
    pub float: u64,
    /// Typical shares traded per day.
    pub avg_volume: u64,
    /// Long-run price level, dollars.
    pub base_price: f64,
    /// Typical daily volatility (standard deviation of daily log returns).
    pub daily_vol: f64,
    /// Stable per-symbol id mixed into every random draw about it.
    pub key: u64,
}

#[derive(Clone, Debug)]
pub struct Universe {
    pub seed: u64,
    pub symbols: Vec<SymbolProfile>,
    by_symbol: HashMap<Symbol, usize>,
}

impl Universe {
    pub fn generate(seed: u64, size: usize) -> Universe {
        let mut symbols = Vec::with_capacity(size);
        let mut by_symbol = HashMap::with_capacity(size);
        for index in 0..size {
            let mut rng = Rng::new(mix(&[seed, 0x5359_4D42, index as u64]));
            let symbol = loop {
                let candidate = ticker(&mut rng);
                if !by_symbol.contains_key(&candidate) {
                    break candidate;
                }
            };
            by_symbol.insert(symbol.clone(), index);
            symbols.push(profile(index, symbol, &mut rng));
        }
        Universe { seed, symbols, by_symbol }
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    pub fn get(&self, symbol: &Symbol) -> Option<&SymbolProfile> {
        self.by_symbol.get(symbol).map(|&i| &self.symbols[i])
    }
}

/// 2–5 letters, mostly 3–4, sometimes with a class suffix (`.A`/`.B`)… kept rare.
fn ticker(rng: &mut Rng) -> Symbol {
    let len = match rng.uniform() {
        u if u < 0.04 => 2,
        u if u < 0.45 => 3,
        u if u < 0.95 => 4,
        _ => 5,
    };
    let text: String = (0..len).map(|_| (b'A' + (rng.next_u64() % 26) as u8) as char).collect();
    Symbol::parse(&text).expect("letters form a valid symbol")
}

fn profile(index: usize, symbol: Symbol, rng: &mut Rng) -> SymbolProfile {
    let total: u32 = SECTORS.iter().map(|(_, w)| w).sum();
    let mut pick = (rng.next_u64() % total as u64) as u32;
    let sector = SECTORS
        .iter()
        .find(|(_, w)| {
            if pick < *w {
                true
            } else {
                pick -= w;
                false
            }
        })
        .map(|(s, _)| *s)
        .unwrap_or("Industrials");
    // Lognormal levels, clamped to plausible ranges.
    let base_price = (8.0 * (0.95 * rng.normal()).exp()).clamp(0.6, 400.0);
    let float = ((25e6 * (1.1 * rng.normal()).exp()).clamp(1.5e6, 3e9)) as u64;
    let turnover = (0.012 * (0.6 * rng.normal()).exp()).clamp(0.002, 0.08);
    let avg_volume = ((float as f64 * turnover).max(20_000.0)) as u64;
    // Cheaper and smaller names move more.
    let daily_vol = (0.035 * (8.0 / base_price).powf(0.25) * (0.3 * rng.normal()).exp()).clamp(0.01, 0.15);
    let key = mix(&[crate::rng::hash_str(symbol.as_str()), index as u64]);
    SymbolProfile { index, symbol, sector, float, avg_volume, base_price, daily_vol, key }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universe_is_deterministic_unique_and_prefix_stable() {
        let a = Universe::generate(1, 2000);
        let b = Universe::generate(1, 500);
        assert_eq!(a.symbols[..500], b.symbols[..]);
        let distinct: std::collections::HashSet<_> = a.symbols.iter().map(|s| &s.symbol).collect();
        assert_eq!(distinct.len(), 2000);
        assert_ne!(Universe::generate(2, 10).symbols, b.symbols[..10]);
    }

    #[test]
    fn profiles_are_plausible_small_caps() {
        let u = Universe::generate(3, 10_000);
        let median = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let price = median(u.symbols.iter().map(|s| s.base_price).collect());
        let float = median(u.symbols.iter().map(|s| s.float as f64).collect());
        assert!((5.0..12.0).contains(&price), "{price}");
        assert!((1e7..5e7).contains(&float), "{float}");
        assert!(u.symbols.iter().all(|s| s.avg_volume >= 20_000 && s.float >= 1_500_000));
        for (sector, _) in SECTORS {
            assert!(u.symbols.iter().any(|s| s.sector == *sector), "{sector}");
        }
    }
}
