//! The radar, watching and blocking, through the API with the simulated market on a manual
//! market clock.

use crate::helpers::*;
use serde_json::json;
use std::time::Duration;

const FIRST_SCAN: &str = "2026-11-20T15:00:00.000Z";

#[tokio::test]
async fn radar_serves_ranked_filtered_rows_from_the_latest_scan() {
    let app = spawn_app().await;
    let reply = app.wait_for_scan(FIRST_SCAN).await;
    let rows = reply.data().as_array().unwrap().clone();
    assert!(!rows.is_empty(), "runners pass the default filters at 10:00");
    assert_eq!(reply.body["meta"]["count"], rows.len());
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["rank"], i + 1);
        let price = row["price"].as_f64().unwrap();
        assert!((1.0..=20.0).contains(&price), "{row}");
        assert!(row["percentage_gain"].as_f64().unwrap() >= 10.0, "{row}");
        assert!(row["relative_volume"].as_f64().unwrap() >= 5.0, "{row}");
        assert!(row["float"].as_u64().unwrap() <= 20_000_000, "{row}");
        for key in ["symbol", "change_1m", "change_5m", "sector", "volume", "average_volume"] {
            assert!(!row[key].is_null(), "{key} in {row}");
        }
    }
    assert!(rows.windows(2).all(|w| w[0]["percentage_gain"].as_f64() >= w[1]["percentage_gain"].as_f64()));

    assert_eq!(app.get("/api/radar/momentum?top_n=1").await.data().as_array().unwrap().len(), 1);
    for bad in ["0", "201", "-1", "ten"] {
        let reply = app.get(&format!("/api/radar/momentum?top_n={bad}")).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], "top_n");
    }
}

#[tokio::test]
async fn scans_follow_the_market_clock_minute_by_minute() {
    let app = spawn_app().await;
    app.wait_for_scan(FIRST_SCAN).await;
    app.market.advance(chrono::Duration::seconds(59));
    app.wait_for_feed("2026-11-20T15:00:45.000Z").await;
    assert_eq!(
        app.get("/api/radar/momentum").await.data()[0]["captured_at"],
        FIRST_SCAN,
        "no scan before the boundary"
    );
    app.market.advance(chrono::Duration::seconds(1));
    app.wait_for_scan("2026-11-20T15:01:00.000Z").await;
    let health = app.get("/api/health/components").await;
    let feed = health.data().as_array().unwrap().iter().find(|c| c["name"] == "data_broker").unwrap().clone();
    assert_eq!(feed["detail"]["adapter"], "simulated");
    assert_eq!(feed["detail"]["trading_date"], "2026-11-20");
}

#[tokio::test]
async fn watching_creates_an_active_polling_row_once() {
    let app = spawn_app().await;
    let symbol = app.wait_for_scan(FIRST_SCAN).await.data()[0]["symbol"].as_str().unwrap().to_string();
    let reply = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol.to_lowercase()})).await;
    let data = reply.assert_ok(200).clone();
    assert_eq!(data["symbol"], symbol);
    assert_eq!(data["watchlist_status"], "WATCHING");
    assert!(data["time_added"].as_str().unwrap().starts_with("2026-11-20T15:00"));
    let again = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol, "source": "API"})).await;
    assert_eq!(again.assert_ok(200)["watchlist_status"], "ALREADY_WATCHING");

    let list = app.get("/api/watchlist").await;
    let row = &list.data()[0];
    assert_eq!(list.body["meta"]["count"], 1);
    assert_eq!(row["symbol"], symbol);
    assert_eq!(row["strategy_status"], "Active");
    assert_eq!(row["polling_status"], "POLLING");
    assert_eq!(row["strategy_id"], "momentum_breakout");
    assert_eq!(row["strategy_version"], "1.0.0");
    assert_eq!(row["source"], "MANUAL");
    assert!(row["current_price"].as_f64().unwrap() > 0.0);

    // survives a restart
    let app = app.restart().await;
    assert_eq!(app.get("/api/watchlist?status=Active").await.data()[0]["symbol"], symbol);
    assert_eq!(app.get("/api/watchlist?status=Closed").await.body["meta"]["count"], 0);
    app.get("/api/watchlist?status=Sleeping").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/watchlist?sort=random").await.assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn watch_refusals() {
    let app = spawn_app_with(|c| c.auth.rate_limit_burst = 1000).await;
    let viewer = app.token("watcher", "viewer").await;
    app.post("/api/radar/watch", &viewer, json!({"symbol": "ABC"})).await.assert_error(403, "FORBIDDEN");
    let bad = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": "NOT A SYMBOL"})).await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.body["error"]["detail"]["field"], "symbol");
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": "ZZZZZZZZZ"})).await.assert_error(404, "NOT_FOUND");
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": "ABC", "source": "GUESS"}))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({})).await.assert_error(400, "VALIDATION_ERROR");
    // Watching starts a strategy: refused while halted, as the served spec says it may be.
    let symbol = universe_symbols(&app, 1).await.remove(0);
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "test"})).await.assert_ok(200);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol}))
        .await
        .assert_error(409, "EMERGENCY_HALT_ACTIVE");
    let spec = app.get("/api/openapi.json").await;
    assert!(spec.body["paths"]["/api/radar/watch"]["post"]["responses"].get("409").is_some(), "409 is declared");
    assert_eq!(app.get("/api/watchlist").await.body["meta"]["count"], 0, "refusals change nothing");
}

async fn universe_symbols(app: &TestApp, n: usize) -> Vec<String> {
    let rows = app.wait_for_scan(FIRST_SCAN).await;
    let mut symbols: Vec<String> =
        rows.data().as_array().unwrap().iter().map(|r| r["symbol"].as_str().unwrap().to_string()).collect();
    // Filters off: every symbol of the market is on the radar.
    if symbols.len() < n {
        app.put_settings(ADMIN_TOKEN, json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000u64, "min_volume": 0, "min_price": 0.01, "max_price": 100000}})).await.assert_ok(200);
        app.market.advance(chrono::Duration::minutes(1));
        let rows = app.wait_for_scan("2026-11-20T15:01:00.000Z").await;
        symbols = rows.data().as_array().unwrap().iter().map(|r| r["symbol"].as_str().unwrap().to_string()).collect();
    }
    symbols.truncate(n);
    symbols
}

#[tokio::test]
async fn the_active_watchlist_limit_is_a_risk_rule() {
    let app = spawn_app().await;
    app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"active_watchlist_limit": 2}})).await.assert_ok(200);
    let symbols = universe_symbols(&app, 3).await;
    for s in &symbols[..2] {
        app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": s})).await.assert_ok(200);
    }
    let full = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbols[2]})).await;
    full.assert_error(422, "RISK_BLOCKED");
    let detail = &full.body["error"]["detail"];
    assert_eq!(detail["rule"], "ACTIVE_WATCHLIST_LIMIT");
    assert_eq!((detail["limit"].as_i64(), detail["current"].as_i64()), (Some(2), Some(2)));
    assert_eq!(violations(&app).await, vec![("ACTIVE_WATCHLIST_LIMIT".to_string(), symbols[2].clone())]);
    // blocking one closes its row, which frees a place
    app.post("/api/radar/block", ADMIN_TOKEN, json!({"symbol": symbols[0], "reason": "halted news"}))
        .await
        .assert_ok(200);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbols[2]})).await.assert_ok(200);
}

async fn violations(app: &TestApp) -> Vec<(String, String)> {
    use tradeops_store::MarketRepository;
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let rows = db.violations(100).await.unwrap();
    db.close().await;
    rows.into_iter().map(|v| (v.rule, v.symbol.unwrap_or_default())).collect()
}

#[tokio::test]
async fn blocks_stop_strategies_refuse_watching_and_expire_with_the_day() {
    let app = spawn_app().await;
    let symbols = universe_symbols(&app, 2).await;
    let (a, b) = (&symbols[0], &symbols[1]);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": a})).await.assert_ok(200);

    let today = app.post("/api/radar/block", ADMIN_TOKEN, json!({"symbol": a, "reason": "offering"})).await;
    let data = today.assert_ok(200).clone();
    assert_eq!(data["block_scope"], "TODAY");
    // ALWAYS_OPEN: the trading day ends at midnight New York
    assert_eq!(data["expires_at"], "2026-11-21T05:00:00.000Z");
    let row = app.get("/api/watchlist").await.data()[0].clone();
    assert_eq!((row["strategy_status"].as_str(), row["polling_status"].as_str()), (Some("Closed"), Some("STOPPED")));
    assert_eq!(row["reason"], "blocked: offering");

    let refused = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": a})).await;
    refused.assert_error(422, "RISK_BLOCKED");
    assert_eq!(refused.body["error"]["detail"]["rule"], "SYMBOL_BLOCKED");
    assert_eq!(violations(&app).await, vec![("SYMBOL_BLOCKED".to_string(), a.clone())]);

    let forever = app
        .post("/api/radar/block", ADMIN_TOKEN, json!({"symbol": b, "block_scope": "PERMANENT", "reason": "never"}))
        .await;
    assert!(forever.assert_ok(200)["expires_at"].is_null());
    let blocks = app.get("/api/radar/blocks").await;
    assert_eq!(blocks.body["meta"]["count"], 2);

    // the TODAY block expires with the trading day; the permanent one stays
    app.market.set(tradeops_core::time::parse_ts("2026-11-21T05:00:00Z").unwrap());
    let blocks = app.get("/api/radar/blocks").await;
    let left: Vec<_> =
        blocks.data().as_array().unwrap().iter().map(|b| b["symbol"].as_str().unwrap().to_string()).collect();
    assert_eq!(left, vec![b.clone()]);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": a})).await.assert_ok(200);

    let lifted = app.post("/api/radar/unblock", ADMIN_TOKEN, json!({"symbol": b, "reason": "cleared"})).await;
    assert_eq!(lifted.assert_ok(200)["unblocked"], true);
    app.post("/api/radar/unblock", ADMIN_TOKEN, json!({"symbol": b, "reason": "again"}))
        .await
        .assert_error(404, "NOT_FOUND");
    app.post("/api/radar/block", ADMIN_TOKEN, json!({"symbol": b, "reason": ""}))
        .await
        .assert_error(400, "VALIDATION_ERROR");

    let audit = app.get("/api/audit?action=radar.block").await;
    assert_eq!(audit.body["meta"]["count"], 3, "two blocks and the refused empty reason");
}

#[tokio::test]
async fn the_allocator_auto_watches_top_radar_symbols() {
    let app = spawn_app().await;
    app.wait_for_scan(FIRST_SCAN).await;
    app.put_settings(ADMIN_TOKEN, json!({"strategy_allocator": {"auto_watch": true, "auto_watch_top_n": 2}}))
        .await
        .assert_ok(200);
    app.market.advance(chrono::Duration::minutes(1));
    let scan = app.wait_for_scan("2026-11-20T15:01:00.000Z").await;
    let expected: Vec<_> = scan.data().as_array().unwrap().iter().take(2).map(|r| r["symbol"].clone()).collect();
    assert_eq!(expected.len(), 2, "the scan has two symbols to watch: {}", scan.body);
    let mut watched = Vec::new();
    for _ in 0..50 {
        watched = app.get("/api/watchlist?sort=symbol_asc").await.data().as_array().unwrap().clone();
        if watched.len() >= expected.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut got: Vec<_> = watched.iter().map(|r| r["symbol"].clone()).collect();
    let mut want = expected.clone();
    got.sort_by_key(|v| v.to_string());
    want.sort_by_key(|v| v.to_string());
    assert_eq!(got, want);
    assert!(watched.iter().all(|r| r["source"] == "RADAR"));
}

#[tokio::test]
async fn scans_are_kept_in_the_database() {
    use tradeops_store::MarketRepository;
    let app = spawn_app().await;
    let served = app.wait_for_scan(FIRST_SCAN).await.data().as_array().unwrap().clone();
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let at = tradeops_core::time::to_epoch_ms(&tradeops_core::time::parse_ts(FIRST_SCAN).unwrap());
    let mut stored = db.radar_scan_at(at).await.unwrap();
    for _ in 0..20 {
        if stored.len() == served.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        stored = db.radar_scan_at(at).await.unwrap();
    }
    db.close().await;
    let symbols: Vec<_> = stored.iter().map(|r| r.symbol.clone()).collect();
    let expected: Vec<_> = served.iter().map(|r| r["symbol"].as_str().unwrap().to_string()).collect();
    assert_eq!(symbols, expected);
}

/// The rows stored for the scan captured at `at`, once `count` of them are (the radar stores a
/// scan just after serving it).
async fn stored_scan(app: &TestApp, at: &str, count: usize) -> Vec<tradeops_store::RadarRowRecord> {
    use tradeops_store::MarketRepository;
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let at = tradeops_core::time::to_epoch_ms(&tradeops_core::time::parse_ts(at).unwrap());
    let mut stored = db.radar_scan_at(at).await.unwrap();
    for _ in 0..20 {
        if stored.len() == count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        stored = db.radar_scan_at(at).await.unwrap();
    }
    db.close().await;
    stored
}

/// A restart within the minute the service stopped in scans that minute again. The scan
/// operators saw stays stored as it was — no second insert of it, which failed on its key at
/// every restart — and is the one served again, though the filters changed since (a rescan with
/// them keeps fewer rows).
#[tokio::test]
async fn a_restart_keeps_and_serves_the_scan_operators_saw() {
    use tradeops_store::MarketRepository;
    let app = spawn_app().await;
    let seen = app.wait_for_scan(FIRST_SCAN).await.data().as_array().unwrap().clone();
    let gains: Vec<f64> = seen.iter().map(|r| r["percentage_gain"].as_f64().unwrap()).collect();
    assert!(gains.len() >= 2 && gains[0] > gains[gains.len() - 1], "rows of different gains: {gains:?}");
    let stored = stored_scan(&app, FIRST_SCAN, seen.len()).await;
    assert_eq!(stored.len(), seen.len());
    app.put_settings(ADMIN_TOKEN, json!({"momentum_radar": {"min_percentage_gain": gains[0]}})).await.assert_ok(200);

    let app = app.restart().await;
    let served = app.wait_for_scan(FIRST_SCAN).await;
    assert_eq!(served.data().as_array().unwrap(), &seen, "the scan operators saw is served again");
    assert_eq!(stored_scan(&app, FIRST_SCAN, seen.len()).await, stored, "the stored scan is unchanged");
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    assert!(!db.insert_radar_scan(&stored).await.unwrap(), "storing it again writes nothing and is no error");
    db.close().await;
}

/// The scan's rows of `symbol`, by symbol.
fn rows_by_symbol(reply: &Reply) -> std::collections::BTreeMap<String, serde_json::Value> {
    reply.data().as_array().unwrap().iter().map(|r| (r["symbol"].as_str().unwrap().to_string(), r.clone())).collect()
}

/// `(to − from) / from × 100`, to four decimals as the radar rounds it.
fn gap(from: f64, to: f64) -> f64 {
    ((to - from) / from * 100.0 * 10_000.0).round() / 10_000.0
}

/// CONTRACT §12: on the NYSE calendar the radar scans the pre-market, and its rows say so — the
/// session, the pre-market's volume and high for the symbols that traded since 04:00, and the
/// gap of the last trade over the previous close; once the regular session opened the gap is
/// the day's open, the pre-market's figures stay what 04:00–09:30 traded, and the after-hours
/// are scanned too.
#[tokio::test]
async fn the_radar_scans_the_pre_market_with_its_gap_and_volume() {
    // Monday 2026-11-23, 08:00 New York (EST, UTC−5).
    let (db, url) = TestDb::new().await;
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts("2026-11-23T13:00:00Z").unwrap());
    let app = start_at(test_config(url), std::sync::Arc::new(db), axum::Router::new(), market).await;
    let open = json!({"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000u64,
        "min_volume": 0, "min_price": 0.01, "max_price": 100000});
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}, "momentum_radar": open}))
        .await
        .assert_ok(200);
    app.market.advance(chrono::Duration::minutes(1));
    let pre = app.wait_for_scan("2026-11-23T13:01:00.000Z").await;
    let rows = pre.data().as_array().unwrap();
    assert!(rows.iter().all(|r| r["session"] == "PRE_MARKET"), "{}", pre.body);
    let traded: Vec<&serde_json::Value> = rows.iter().filter(|r| r["premarket_volume"].as_u64().unwrap() > 0).collect();
    assert!(traded.len() >= 5, "symbols trade in the pre-market: {}", pre.body);
    for row in rows {
        let traded = row["premarket_volume"].as_u64().unwrap() > 0;
        assert_eq!(!row["premarket_high"].is_null(), traded, "{row}");
        assert_eq!(!row["gap_pct"].is_null(), traded, "no trade since 04:00, no gap: {row}");
    }
    let mut prev_close = std::collections::BTreeMap::new();
    for row in &traded[..3] {
        let symbol = row["symbol"].as_str().unwrap();
        let quote = app.get(&format!("/api/market/quote?symbol={symbol}")).await;
        let prev = quote.assert_ok(200)["prev_close"].as_f64().unwrap();
        let price = row["price"].as_f64().unwrap();
        let got = row["gap_pct"].as_f64().unwrap();
        assert!((got - gap(prev, price)).abs() < 2e-4, "the last trade against the previous close {prev}: {row}");
        prev_close.insert(symbol.to_string(), prev);
    }
    let symbols: Vec<&String> = prev_close.keys().collect();
    let before = rows_by_symbol(&pre);
    app.put_settings(ADMIN_TOKEN, json!({"momentum_radar": {"universe": symbols}})).await.assert_ok(200);

    // 10:00: the regular session.
    app.market.set(tradeops_core::time::parse_ts("2026-11-23T15:00:00Z").unwrap());
    let regular = rows_by_symbol(&app.wait_for_scan("2026-11-23T15:00:00.000Z").await);
    assert_eq!(regular.len(), 3, "{regular:?}");
    for (symbol, prev) in &prev_close {
        let row = &regular[symbol];
        assert_eq!(row["session"], "REGULAR", "{row}");
        let bars = app
            .get(&format!("/api/market/bars?symbol={symbol}&start=2026-11-23T09:00:00Z&end=2026-11-23T15:00:00Z"))
            .await;
        let bars = bars.assert_ok(200).as_array().unwrap().clone();
        let (premarket, session): (Vec<_>, Vec<_>) =
            bars.iter().partition(|b| b["timestamp"].as_str().unwrap() < "2026-11-23T14:30:00.000Z");
        let volume: u64 = premarket.iter().map(|b| b["volume"].as_u64().unwrap()).sum();
        let high = premarket.iter().map(|b| b["high"].as_f64().unwrap()).fold(f64::MIN, f64::max);
        assert_eq!(row["premarket_volume"].as_u64(), Some(volume), "04:00–09:30's shares: {row}");
        assert!(volume >= before[symbol]["premarket_volume"].as_u64().unwrap());
        assert_eq!(row["premarket_high"].as_f64(), Some(high), "{row}");
        let open = session[0]["open"].as_f64().unwrap();
        let got = row["gap_pct"].as_f64().unwrap();
        assert!((got - gap(*prev, open)).abs() < 2e-4, "the day's open {open} against {prev}: {row}");
    }

    // 10:01, then 16:30 (after-hours, scanned too): the pre-market's figures and the gap stay.
    for (at, session) in [("2026-11-23T15:01:00Z", "REGULAR"), ("2026-11-23T21:30:00Z", "AFTER_HOURS")] {
        app.market.set(tradeops_core::time::parse_ts(at).unwrap());
        let later = rows_by_symbol(&app.wait_for_scan(&at.replace('Z', ".000Z")).await);
        assert_eq!(later.len(), 3, "{later:?}");
        for (symbol, row) in &later {
            assert_eq!(row["session"], session, "{row}");
            for key in ["premarket_volume", "premarket_high", "gap_pct"] {
                assert_eq!(row[key], regular[symbol][key], "{key} at {at}: {row}");
            }
            assert!(row["volume"].as_u64().unwrap() > regular[symbol]["volume"].as_u64().unwrap(), "{row}");
        }
    }
}

/// CONTRACT §12 on Alpaca's market data: at 08:00 New York the rows are the pre-market's, tallied
/// from Alpaca's bars of the day (read in half-hours by the service's first scan; the snapshot's
/// minute bar, inside the last of them, not counted again), and the `data_broker` health says
/// what the configured `iex` feed cannot show.
#[tokio::test]
async fn an_alpaca_radar_in_the_pre_market_tallies_the_days_bars_and_health_names_the_iex_feed() {
    use crate::alpaca_data::{alpaca_config, bar_json, clock_in_latest_session, data_broker, wait_until, StandIn};
    let clock = clock_in_latest_session(|day| day.pre_market_open + chrono::Duration::hours(4));
    let market: std::sync::Arc<dyn tradeops_core::Clock> = clock.clone();
    let alpaca = StandIn::start_on(market.clone()).await;
    // Closed at 4.00, trading at 5.20: 20,000 shares from 04:00, 39,000 from 07:30 up to 5.60.
    alpaca.add_mover("GAPR", 400, 520, 59_000);
    let nyse = tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse);
    let day = nyse.trading_day(nyse.date_of(market.now())).unwrap();
    let (four, half_past_seven) = (day.pre_market_open, day.pre_market_open + chrono::Duration::minutes(210));
    alpaca.add_bars(
        "30Min",
        "GAPR",
        vec![
            (four, bar_json(four, 4.5, 4.9, 4.4, 4.8, 20_000)),
            (half_past_seven, bar_json(half_past_seven, 5.0, 5.6, 4.9, 5.2, 39_000)),
        ],
    );
    // The radar's filters opened (the first scan, at start, reads them): Alpaca knows no float.
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    alpaca_config(&mut config, &alpaca);
    let db = std::sync::Arc::new(db);
    let mut app = start_on_own_market_clock(config, db.clone(), market.clone()).await;
    let open = json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0,
        "max_float": 100000000000u64, "min_volume": 0, "min_price": 0.01, "max_price": 100}});
    app.put_settings(ADMIN_TOKEN, open).await.assert_ok(200);
    app.stop().await;
    let app = start_on_own_market_clock(app.config.clone(), db, market).await;

    let radar = wait_until(
        "a radar scan over Alpaca's snapshots",
        Duration::from_secs(15),
        || async { app.get("/api/radar/momentum").await },
        |r| r.data().as_array().is_some_and(|rows| !rows.is_empty()),
    )
    .await;
    let row = &radar.data()[0];
    assert_eq!(row["symbol"], "GAPR", "{}", radar.body);
    assert_eq!(row["session"], "PRE_MARKET", "{row}");
    assert_eq!(row["premarket_volume"], 59_000, "the half-hours' shares, the 07:59 minute once: {row}");
    assert_eq!(row["premarket_high"], 5.6, "{row}");
    assert_eq!(row["gap_pct"], 30.0, "(5.20 − 4.00) / 4.00: {row}");
    let asked = alpaca.requests_to("/v2/stocks/bars");
    let four = tradeops_core::time::format_ts(&four).replace(".000Z", "Z");
    assert!(asked.iter().any(|q| q["timeframe"] == "30Min" && q["start"] == four), "{asked:?}");

    let health = wait_until(
        "data_broker's detail after a scan",
        Duration::from_secs(10),
        || data_broker(&app),
        |c| c["detail"]["radar_rows"].as_u64() > Some(0),
    )
    .await;
    assert_eq!(
        health["detail"]["note"],
        "the iex feed has no prints before 08:00 New York: the sip feed is needed for the 04:00 gappers",
        "{health}"
    );
}
