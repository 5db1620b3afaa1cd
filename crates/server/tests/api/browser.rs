//! The console in a real browser: `console/tests/browser.mjs` drives headless Chromium through
//! playwright-core against this service (see that file for what it checks). Screenshots of every
//! tab, light and dark, land in `target/screenshots/`. The console's formatting module and what
//! its charts derive from bars, the sweep grid, the desk replay's time and the halts' wording are
//! unit tested under Node (every `console/tests/*.test.mjs`).
//!
//! The service trades through [`Switchable`], the paper broker with faults the browser test
//! switches on (unreachable, or its open orders unlisted) so that the console's alerts meet the
//! real health and reconciliation paths; a page opened through [`proxy`] has its connections cut
//! (the event stream dropped) on the test's word. The console's speed goals are measured on every run and
//! fail it only with `TRADEOPS_CONSOLE_TIMING_GOALS=assert` (`bench/console.sh`).
//!
//! Needs Node.js, `npm ci` in `console/` and Debian's `chromium`; without them the test says so
//! and passes, unless `TRADEOPS_REQUIRE_BROWSER=1` (set by `.ci/run`), which makes it fail.

use crate::helpers::*;
use crate::venues::Switchable;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn console_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../console")
}

/// What is missing to run the console's tests under Node, if anything.
fn missing_node() -> Option<String> {
    if Command::new("node").arg("--version").output().is_err() {
        return Some("Node.js (`node`) is not installed".into());
    }
    if !console_dir().join("node_modules/playwright-core").is_dir() {
        return Some("console/node_modules is missing: run `npm ci --prefix console`".into());
    }
    None
}

/// What is missing to run the browser test, if anything.
fn missing(chromium: &str) -> Option<String> {
    if let Some(why) = missing_node() {
        return Some(why);
    }
    if !Path::new(chromium).exists() {
        return Some(format!("{chromium} is missing: install Debian's `chromium` package"));
    }
    None
}

/// Money, percentages and plain numbers are rounded for display without float drift, chart axes
/// label their ticks distinctly, and the charts' VWAP, day range and stated stop and target are
/// right (Node's test runner over `console/src/format.ts` and `console/src/bars.ts`).
#[test]
fn the_console_formats_figures_and_axes() {
    if let Some(why) = missing_node() {
        return skip("the_console_formats_figures_and_axes", &why, REQUIRE_BROWSER);
    }
    let output = Command::new("node")
        // Every `*.test.mjs` (as `npm test` runs them); `browser.mjs` is the browser test's driver.
        .args(["--test", "tests/"])
        .current_dir(console_dir())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "format tests failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
}

/// A TCP proxy to the service at `upstream`: the browser test opens a page through it and cuts
/// every connection it carries, as a network fault would (the event stream drops at the
/// server's end), each time `cuts` changes.
async fn proxy(listener: tokio::net::TcpListener, upstream: String, cuts: tokio::sync::watch::Receiver<u64>) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let (upstream, mut cuts) = (upstream.clone(), cuts.clone());
        tokio::spawn(async move {
            let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else { return };
            cuts.borrow_and_update();
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                // Dropping both sockets closes them.
                _ = cuts.changed() => {}
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_works_in_a_browser() {
    let chromium = std::env::var("TRADEOPS_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if let Some(why) = missing(&chromium) {
        return skip("the_console_works_in_a_browser", &why, REQUIRE_BROWSER);
    }
    let venue = Switchable::new(&test_config(String::new()));
    let app = spawn_app_trading_through(venue.clone()).await;
    // Open radar filters, so the radar has its full 200 rows.
    app.market_symbols(1).await;
    let viewer = app.token("browser-viewer", "viewer").await;
    // The radar's symbols the simulated market does not halt today, in rank order: the ones the
    // test trades, so that a close is not refused SYMBOL_HALTED at whatever moment a halt
    // happens to fall in a run (the halts themselves are tested in `halts` and the console's
    // unit tests).
    let quiet = {
        let (sim, date) = (SimDays::new(), ny_date_of(MARKET_START));
        let rows = app.get("/api/radar/momentum?top_n=200").await;
        let quiet: Vec<String> = rows
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["symbol"].as_str().unwrap().to_string())
            .filter(|s| sim.quiet(s, date))
            .collect();
        assert!(quiet.len() >= 5, "radar symbols with no halt today: {quiet:?}");
        quiet.join(",")
    };
    // The market moves 20× faster than the wall clock: a scan every 3 s, fills within a second.
    // The browser test may ask for another speed (60× to measure the live charts as in DEMO) by
    // writing it to SPEED_FILE, and for a broker fault (see `Switchable`) in FAULT_FILE.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&shots).expect("the screenshot directory");
    let speed_file = shots.join("market-speed");
    let fault_file = shots.join("broker-fault");
    let _ = std::fs::remove_file(&speed_file);
    let _ = std::fs::remove_file(&fault_file);
    // FAULT_FILE `cut`: every connection through the proxy is cut, again at each tick while it
    // says so (reconnections included).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port for the proxy");
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    let (cut, cuts) = tokio::sync::watch::channel(0u64);
    let proxied = tokio::spawn(proxy(listener, app.base.trim_start_matches("http://").to_string(), cuts));
    let clock = app.market.clone();
    let (speed_path, fault_path) = (speed_file.clone(), fault_file.clone());
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let speed =
                std::fs::read_to_string(&speed_path).ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(20);
            clock.advance(chrono::Duration::milliseconds(100 * speed));
            let fault = std::fs::read_to_string(&fault_path).unwrap_or_default();
            if fault.trim() == "cut" {
                cut.send_modify(|n| *n += 1);
            }
            venue.set(fault.trim());
        }
    });
    let (base, dir) = (app.base.clone(), console_dir());
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("tests/browser.mjs")
            .current_dir(dir)
            .env("BASE_URL", base)
            .env("ADMIN_TOKEN", ADMIN_TOKEN)
            .env("VIEWER_TOKEN", viewer)
            .env("SCREENSHOT_DIR", shots)
            .env("CHROMIUM", chromium)
            .env("SPEED_FILE", speed_file)
            .env("QUIET_SYMBOLS", quiet)
            .env("FAULT_FILE", fault_file)
            .env("PROXY_URL", proxy_url)
            // `assert` (bench/console.sh): the console's speed goals fail the test when missed.
            .env("TIMING_GOALS", std::env::var("TRADEOPS_CONSOLE_TIMING_GOALS").unwrap_or_default())
            .output()
    })
    .await
    .unwrap()
    .expect("node runs");
    ticker.abort();
    proxied.abort();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "browser test failed:\n{stdout}\n{stderr}");
}
