//! Reading a sweep's bars on SQLite: 2,148 daily bars (GOOG's span) saved, then read back as a
//! sweep's part reads them, timed: from the rows (after a write) and again (from memory).
//! `cargo run --release -p tradeops-store --example bars_read -- [runs]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;
use tradeops_core::market::{Bar, Price};
use tradeops_core::time::{parse_ts, plus_seconds, to_epoch_ms};
use tradeops_core::Symbol;
use tradeops_store::{DataRepository, Database};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(21);
    let dir = std::env::temp_dir().join(format!("tradeops-bars-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let db = Database::open(&format!("sqlite://{}/bench.db", dir.display())).await.expect("opens");
    let symbol = Symbol::parse("GOOG").expect("valid");
    let first = parse_ts("2004-08-19T04:00:00Z").expect("valid");
    let bars: Vec<Bar> = (0..2148i64)
        .map(|i| Bar {
            start: plus_seconds(&first, i as u32 * 86_400),
            open: Price(1_000_000 + i),
            high: Price(1_010_000 + i),
            low: Price(990_000 + i),
            close: Price(1_005_000 + i),
            volume: 1_000_000 + i as u64,
        })
        .collect();
    db.save_bars(&symbol, "1d", &bars, "import").await.expect("saved");
    let (from, end) = (to_epoch_ms(&first), to_epoch_ms(&plus_seconds(&first, 2148 * 86_400)));
    // Each round: a write moves the series' version on, so the first read is from the rows;
    // the reads after it, at the same version, are served from memory.
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        db.save_bars(&symbol, "1d", &bars[..1], "import").await.expect("saved");
        for times in [&mut cold, &mut warm] {
            let started = Instant::now();
            let read = db.bars(&symbol, "1d", from, end).await.expect("read");
            times.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(read.len(), bars.len());
        }
    }
    for (what, mut times) in [("from the rows (written since)", cold), ("again (cached)", warm)] {
        times.sort_by(f64::total_cmp);
        println!(
            "2,148 daily bars read {what}: median {:.2} ms (min {:.2}, max {:.2})",
            times[runs / 2],
            times[0],
            times[runs - 1]
        );
    }
    db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
