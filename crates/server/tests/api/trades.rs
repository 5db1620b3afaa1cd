//! Completed trades from paper fills, their deep dive, and recommendations.

use crate::helpers::*;
use serde_json::{json, Value};

/// Buys 100 of `symbol` at market, then closes the position; returns when flat.
async fn round_trip(app: &TestApp, symbol: &str) {
    let buy = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 100})).await;
    app.wait_for_order(buy.assert_ok(201)["client_order_id"].as_str().unwrap(), "FILLED").await;
    for _ in 0..100 {
        let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await;
        if close.status == 200 {
            app.wait_for_order(close.data()["close_order_client_order_id"].as_str().unwrap(), "FILLED").await;
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("could not close {symbol}");
}

async fn trades(app: &TestApp, query: &str) -> Vec<Value> {
    for _ in 0..100 {
        let reply = app.get(&format!("/api/trades{query}")).await;
        let rows = reply.assert_ok(200).as_array().unwrap().clone();
        if !rows.is_empty() || !query.is_empty() {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Vec::new()
}

#[tokio::test]
async fn a_round_trip_becomes_a_trade_with_its_deep_dive() {
    let app = spawn_app().await;
    let symbols = app.market_symbols(2).await;
    let (a, b) = (symbols[0].0.clone(), symbols[1].0.clone());
    round_trip(&app, &a).await;
    let rows = trades(&app, "").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["symbol"], a.as_str());
    assert_eq!((row["quantity"].as_u64(), row["mode"].as_str()), (Some(100), Some("PAPER")));
    assert_eq!(row["strategy_id"], Value::Null, "opened by hand");
    assert_eq!(row["exit_reason"], "MANUAL_CLOSE");
    let gross = (row["exit_price"].as_f64().unwrap() - row["entry_price"].as_f64().unwrap()) * 100.0;
    assert!((row["gross_pnl"].as_f64().unwrap() - gross).abs() < 1e-6, "{row}");
    let net = row["gross_pnl"].as_f64().unwrap() - row["fees"].as_f64().unwrap();
    assert!((row["net_pnl"].as_f64().unwrap() - net).abs() < 1e-6);
    assert!(["WINNER", "LOSER", "BREAKEVEN"].contains(&row["winner_loser_label"].as_str().unwrap()));

    let id = row["trade_id"].as_str().unwrap();
    let dive = app.get(&format!("/api/trades/{id}")).await;
    let dive = dive.assert_ok(200);
    assert_eq!(dive["trade"]["trade_id"], id);
    let kinds: Vec<&str> = dive["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"ORDER_SUBMITTED"));
    assert_eq!(kinds, ["ORDER_SUBMITTED", "FILL", "ORDER_SUBMITTED", "FILL"]);
    assert!(dive["events"][2]["detail"].as_str().unwrap().contains("manual close of 100"), "{}", dive["events"]);
    let features = &dive["features"];
    // The market when the order was placed: the close of the last minute completed by then.
    let placed = dive["events"][0]["timestamp"].as_str().unwrap();
    let bars = app.get(&format!("/api/market/bars?symbol={a}&end={placed}")).await;
    let last_close = bars.assert_ok(200).as_array().unwrap().last().unwrap()["close"].as_f64().unwrap();
    assert!((features["price"].as_f64().unwrap() - last_close).abs() < 1e-9, "{features} vs {last_close}");
    assert!(features["float"].is_u64() && features["sector"].is_string() && features["percentage_gain"].is_number());
    assert!(features["minutes_since_open"].as_i64().unwrap() >= 30, "entered after 10:00 New York");
    let outcomes = &dive["outcomes"];
    for key in ["return_pct", "r_multiple", "hold_seconds", "mfe", "mae", "exit_reason"] {
        assert!(outcomes.get(key).is_some(), "{key}");
    }
    assert_eq!(outcomes["exit_reason"], "MANUAL_CLOSE");
    assert_eq!(outcomes["r_multiple"], Value::Null, "no stop, so no risk unit to measure in");
    let (entered, exited) = (&dive["events"][1]["timestamp"], &dive["events"][3]["timestamp"]);
    let held = tradeops_core::time::parse_ts(exited.as_str().unwrap()).unwrap()
        - tradeops_core::time::parse_ts(entered.as_str().unwrap()).unwrap();
    assert_eq!(outcomes["hold_seconds"].as_i64(), Some(held.num_seconds()), "from the entry fill to the exit fill");
    let rules: Vec<&str> =
        dive["explanations"].as_array().unwrap().iter().map(|e| e["rule"].as_str().unwrap()).collect();
    assert_eq!(rules, ["MANUAL_ORDER", "MANUAL_CLOSE"]);
    assert!(dive["explanations"][1]["text"].as_str().unwrap().starts_with("An operator closed the position"));

    // Filters, refusals, and a restart changes nothing.
    round_trip(&app, &b).await;
    assert_eq!(trades(&app, &format!("?symbol={b}")).await.len(), 1);
    assert_eq!(trades(&app, &format!("?symbol={}", b.to_lowercase())).await.len(), 1, "symbols in any case");
    app.get("/api/trades?symbol=no%20such").await.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(trades(&app, "?date=2026-11-20").await.len(), 2);
    assert_eq!(trades(&app, "?date=2026-11-19").await.len(), 0);
    assert_eq!(trades(&app, "?strategy_id=manual").await.len(), 2);
    app.get("/api/trades?date=yesterday").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/trades/nope").await.assert_error(404, "NOT_FOUND");
    let app = app.restart().await;
    assert_eq!(trades(&app, "").await.len(), 2);
    assert_eq!(app.get(&format!("/api/trades/{id}")).await.assert_ok(200)["trade"]["trade_id"], id);
}

/// An operator action on the symbol while the trade was open stays in its timeline however
/// many audit rows about other things come after it.
#[tokio::test]
async fn operator_actions_stay_in_the_timeline_as_the_audit_log_grows() {
    use tradeops_store::{AuditEntry, AuditRepository};
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await.remove(0).0;
    round_trip(&app, &symbol).await;
    let row = trades(&app, "").await.remove(0);
    let entry = tradeops_core::time::parse_ts(row["entry_time"].as_str().unwrap()).unwrap();
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let audit = |target: &str, action: &str| AuditEntry {
        ts: tradeops_core::time::to_epoch_ms(&entry),
        wall_ts: tradeops_core::time::to_epoch_ms(&entry),
        actor: "desk".into(),
        role: Some("operator".into()),
        action: action.into(),
        target: target.into(),
        request: "{}".into(),
        outcome: "OK".into(),
        mode: "PAPER".into(),
        request_id: "req".into(),
    };
    db.append_audit(&audit(&symbol, "position.halt")).await.unwrap();
    for _ in 0..1_200 {
        db.append_audit(&audit("OTHER", "settings.update")).await.unwrap();
    }
    db.close().await;
    let app = app.restart().await;
    let dive = app.get(&format!("/api/trades/{}", row["trade_id"].as_str().unwrap())).await;
    let kinds: Vec<String> = dive.assert_ok(200)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.contains(&"OPERATOR_POSITION_HALT".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"OPERATOR_SETTINGS_UPDATE".to_string()), "other targets stay out: {kinds:?}");
}

#[tokio::test]
async fn recommendations_need_the_minimum_sample() {
    let app = spawn_app().await;
    let symbols = app.market_symbols(2).await;
    round_trip(&app, &symbols[0].0).await;
    round_trip(&app, &symbols[1].0).await;
    assert_eq!(trades(&app, "").await.len(), 2);
    let none = app.get("/api/trades/recommendations").await;
    assert_eq!(none.assert_ok(200).as_array().unwrap().len(), 0, "2 trades are under the default minimum of 20");
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 1}})).await.assert_ok(200);
    let rows = app.get("/api/trades/recommendations?scope_type=SYMBOL").await;
    let rows = rows.assert_ok(200).as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "one per symbol: {rows:?}");
    for row in &rows {
        assert_eq!(row["sample_size"], 1);
        let score = row["confidence_score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score));
        assert!(row["recommendation_text"].as_str().unwrap().contains("of 1 trades against"), "{row}");
        assert_eq!(row["recommendation_id"], format!("SYMBOL:{}", row["scope_value"].as_str().unwrap()));
    }
    let one = app.get(&format!("/api/trades/recommendations?scope_type=SYMBOL&scope_value={}", symbols[0].0)).await;
    assert_eq!(one.assert_ok(200).as_array().unwrap().len(), 1);
    app.get("/api/trades/recommendations?scope_type=MOON").await.assert_error(400, "VALIDATION_ERROR");
}

/// Trades are kept built while no order changes; a new breakeven threshold relabels them at
/// once all the same: a trade whose net P&L is within it reads BREAKEVEN in the next list.
#[tokio::test]
async fn a_new_breakeven_threshold_relabels_trades_at_once() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    round_trip(&app, &symbol).await;
    let net = trades(&app, "").await[0]["net_pnl"].as_f64().unwrap();
    let wider = (net.abs() + 1.0).ceil();
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"breakeven_threshold": wider}})).await.assert_ok(200);
    assert_eq!(trades(&app, "").await[0]["winner_loser_label"], "BREAKEVEN", "net {net} within {wider}");
}
