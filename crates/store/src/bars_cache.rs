//! The bars of the last reads of [`DataRepository::bars`](crate::DataRepository::bars), kept in
//! memory against their series' version: a series (a symbol's bars of one timeframe) is given
//! a new version in the transaction of every write to it (`bar_series`), so a read that finds
//! the version it cached under gets the bars the database holds, whichever node wrote them;
//! otherwise it reads them again. A sweep's part, and every backtest over the same range, then
//! costs one small query instead of reading thousands of rows.
//!
//! The version is read before the bars: a write committed between the two leaves the cached
//! bars newer than their version, and the next read, seeing the newer version, reads again.
//! Never the other way round (older bars under a newer version), which would serve them stale.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tradeops_core::market::Bar;

/// The most bars kept, all entries together (≈ 28 MB at 56 bytes a bar): a year of one
/// symbol's extended-hours minute bars fits; the entries read longest ago go first.
const MAX_BARS: usize = 500_000;

/// One read: its series, range and version, and the bars it returned.
struct Entry {
    symbol: String,
    timeframe: String,
    start: i64,
    end: i64,
    version: i64,
    bars: Arc<[Bar]>,
}

impl Entry {
    fn is(&self, symbol: &str, timeframe: &str, start: i64, end: i64) -> bool {
        self.start == start && self.end == end && self.symbol == symbol && self.timeframe == timeframe
    }
}

/// Shared by a [`Database`](crate::Database)'s clones; the most recently used entry first.
#[derive(Default)]
pub(crate) struct BarsCache {
    entries: Mutex<VecDeque<Entry>>,
}

impl std::fmt::Debug for BarsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().map(|e| e.len()).unwrap_or(0);
        f.debug_struct("BarsCache").field("entries", &entries).finish()
    }
}

impl BarsCache {
    /// The bars of `[start, end)` of the series, when they were read at `version`.
    pub(crate) fn get(&self, symbol: &str, timeframe: &str, start: i64, end: i64, version: i64) -> Option<Arc<[Bar]>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let at = entries.iter().position(|e| e.is(symbol, timeframe, start, end))?;
        // Taken out either way: a read at an older version is stale, a current one moves first.
        let entry = entries.remove(at)?;
        if entry.version != version {
            return None;
        }
        let bars = entry.bars.clone();
        entries.push_front(entry);
        Some(bars)
    }

    /// Keeps `bars`, read at `version`, in place of an earlier read of the same range; drops
    /// the reads used longest ago beyond [`MAX_BARS`]. A read larger than that is not kept.
    pub(crate) fn put(&self, symbol: &str, timeframe: &str, start: i64, end: i64, version: i64, bars: &[Bar]) {
        if bars.len() > MAX_BARS {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|e| !e.is(symbol, timeframe, start, end));
        let entry = Entry {
            symbol: symbol.to_string(),
            timeframe: timeframe.to_string(),
            start,
            end,
            version,
            bars: Arc::from(bars),
        };
        entries.push_front(entry);
        let mut kept = 0;
        entries.retain(|e| {
            kept += e.bars.len();
            kept <= MAX_BARS
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::market::Price;
    use tradeops_core::time::from_epoch_ms;

    fn bars(n: usize) -> Vec<Bar> {
        (0..n)
            .map(|i| {
                let p = Price(10_000 + i as i64);
                Bar { start: from_epoch_ms(i as i64 * 60_000), open: p, high: p, low: p, close: p, volume: 1 }
            })
            .collect()
    }

    #[test]
    fn a_read_is_served_at_its_version_only() {
        let cache = BarsCache::default();
        cache.put("ABC", "1m", 0, 10, 3, &bars(5));
        assert_eq!(cache.get("ABC", "1m", 0, 10, 3).map(|b| b.len()), Some(5));
        assert!(cache.get("ABC", "1m", 0, 11, 3).is_none(), "another range");
        assert!(cache.get("ABC", "1d", 0, 10, 3).is_none(), "another timeframe");
        assert!(cache.get("ABC", "1m", 0, 10, 4).is_none(), "written since");
        assert!(cache.get("ABC", "1m", 0, 10, 3).is_none(), "a stale read is dropped, not kept");
    }

    #[test]
    fn the_reads_used_longest_ago_go_first_beyond_the_bound() {
        let cache = BarsCache::default();
        let half = bars(MAX_BARS / 2);
        cache.put("A", "1m", 0, 1, 1, &half);
        cache.put("B", "1m", 0, 1, 1, &half);
        assert!(cache.get("A", "1m", 0, 1, 1).is_some(), "A used last");
        cache.put("C", "1m", 0, 1, 1, &bars(10));
        assert!(cache.get("B", "1m", 0, 1, 1).is_none(), "B, used longest ago, dropped");
        assert!(cache.get("A", "1m", 0, 1, 1).is_some() && cache.get("C", "1m", 0, 1, 1).is_some());
        cache.put("D", "1m", 0, 1, 1, &bars(MAX_BARS + 1));
        assert!(cache.get("D", "1m", 0, 1, 1).is_none(), "larger than the bound: not kept");
        assert!(cache.get("A", "1m", 0, 1, 1).is_some(), "and nothing dropped for it");
    }
}
