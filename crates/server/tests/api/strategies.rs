//! `GET /api/strategies`.

use crate::helpers::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn strategies_list_versions_parameters_and_follow_the_settings() {
    let app = spawn_app().await;
    app.call(Method::GET, "/api/strategies", None, None).await.assert_error(401, "UNAUTHORIZED");

    let reply = app.get("/api/strategies").await;
    let list = reply.assert_ok(200).as_array().unwrap().clone();
    let ids: Vec<&str> = list.iter().map(|s| s["strategy_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["momentum_breakout", "sma_cross"]);
    let sma = &list[1];
    assert_eq!((sma["live"].clone(), sma["strategy_version"].clone()), (json!(false), json!("1.1.0")));
    assert_eq!(sma["timeframes"], json!(["1m", "1d"]));
    let fast = &sma["parameters"][0];
    assert_eq!(
        (fast["name"].clone(), fast["kind"].clone(), fast["default"].clone()),
        (json!("fast"), json!("INTEGER"), json!(10.0))
    );

    let mb = &list[0];
    assert_eq!(mb["live"], true);
    let risk = mb["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "risk_per_trade").unwrap().clone();
    assert_eq!(risk["default"], 50.0);

    app.put_settings(ADMIN_TOKEN, json!({"strategy_allocator": {"risk_per_trade": 125}})).await.assert_ok(200);
    let after = app.get("/api/strategies").await.data().clone();
    let risk =
        after[0]["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "risk_per_trade").unwrap().clone();
    assert_eq!(risk["default"], 125.0, "a backtest's default follows the operator's settings");
}
